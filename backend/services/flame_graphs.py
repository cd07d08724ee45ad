"""Flame graphs of a running vertex: the JobManager side of FLIP-165's thread sampling.

Asked for a vertex's graph, the service asks every slot running one of its subtasks to sample that
subtask's task thread (``messages.request_stack_samples``, sealed for the slot's inbox), reads the sealed
answers back from the request's Redis key, and merges them (engine/jobmanager/vertex_flame_graph.py,
which also keeps them for the refresh interval). Nothing runs in the background: each GET moves the
sampling on, as the dashboard polls until the graph is there.
"""
from __future__ import annotations

import threading
import time
from typing import Any

import redis

from millstream.engine import redis_keys
from millstream.engine.executiongraph.states import ExecutionState, JobStatus
from millstream.engine.jobmanager.dispatcher import Dispatcher
from millstream.engine.jobmanager.vertex_flame_graph import (
    TERMINATED,
    FlameGraphOptions,
    FlameGraphType,
    VertexFlameGraphTracker,
    no_data,
)
from millstream.engine.taskexecutor import messages


class UnknownFlameGraphVertex(KeyError):
    """The job runs no such vertex."""


class FlameGraphService:
    def __init__(self, dispatcher: Dispatcher, options: FlameGraphOptions | None = None) -> None:
        self.dispatcher = dispatcher
        self.tracker = VertexFlameGraphTracker(options)
        self._lock = threading.Lock()  # requests from several REST threads share the tracker

    def flame_graph(self, job_id: str, vertex_id: str, kind: FlameGraphType) -> dict[str, Any] | None:
        """Flink's JobVertexFlameGraph, or None for a job that the JobManager does not run now (ended
        and archived: the REST layer answers from the record that the vertex no longer runs)."""
        targets = self._running_subtasks(job_id, vertex_id)
        if targets is None:
            return None
        attempt, where = targets
        now_s, now_ms = time.monotonic(), int(time.time() * 1000)
        with self._lock:
            live = set(self.dispatcher.live_job_ids())
            self.tracker.retain(live.__contains__)  # graphs of jobs gone from the JobManager go too
            self._collect(job_id, vertex_id)
            self.tracker.finish_if_complete(job_id, vertex_id, now_s, now_ms)
            if where and self.tracker.needs_sampling(job_id, vertex_id, now_s):
                request = self.tracker.start(job_id, vertex_id, where, now_s)
                self._ask(job_id, vertex_id, attempt, request.request_id, where)
            answer = self.tracker.answer(job_id, vertex_id, kind)
        if answer["data"] is None and not where and self.tracker.pending(job_id, vertex_id) is None:
            return no_data(TERMINATED)  # nothing runs to sample, and nothing was sampled before
        return answer

    def _running_subtasks(self, job_id: str, vertex_id: str) -> tuple[int, dict[int, tuple[str, int]]] | None:
        """The job's attempt and ``subtask -> (TaskManager, slot)`` of the vertex's RUNNING subtasks."""
        with self.dispatcher.lock:
            jm = self.dispatcher.job_master(job_id)
            if jm is None:
                return None
            eg = jm.eg
            ejv = eg.vertices.get(vertex_id)
            if ejv is None:
                raise UnknownFlameGraphVertex(vertex_id)
            if JobStatus(eg.status).is_terminal():
                return eg.attempt, {}
            where = {
                sv.subtask: (sv.current.taskmanager_id, sv.current.slot)
                for sv in ejv.subtasks
                if sv.current.state is ExecutionState.RUNNING
                and sv.current.taskmanager_id is not None and sv.current.slot is not None
            }
            return eg.attempt, where  # type: ignore[return-value]

    def _ask(self, job_id: str, vertex_id: str, attempt: int, request_id: str, where: dict[int, tuple[str, int]]) -> None:
        options = self.tracker.options
        msg = messages.request_stack_samples(job_id, attempt, vertex_id, request_id, options.num_samples, options.delay_ms)
        for tm_id, slot in sorted(set(where.values())):
            try:
                self.dispatcher.gateway.request_stack_samples(tm_id, slot, msg)
            except redis.RedisError:
                pass  # that slot's subtasks time out of this graph; the next refresh asks again

    def _collect(self, job_id: str, vertex_id: str) -> None:
        """Take the answers of the request in flight that arrived since the last look."""
        request = self.tracker.pending(job_id, vertex_id)
        if request is None:
            return
        key = redis_keys.stack_samples(request.request_id)
        try:
            raw = self.dispatcher.client.hgetall(key)
        except redis.RedisError:
            return
        secret = self.dispatcher.config.cluster_secret
        for field, value in raw.items():
            name = field.decode()
            vid, _, sub = name.rpartition(":")
            if vid != vertex_id or not sub.isdigit():
                continue
            report = messages.open_report(value, secret, "stack_samples", key, name)
            samples = report.get("samples") if report is not None else None
            if isinstance(samples, list):
                request.answers[int(sub)] = [s for s in samples if _valid_sample(s)]


def _valid_sample(s: Any) -> bool:
    return (
        isinstance(s, list) and len(s) == 3 and isinstance(s[0], list) and all(isinstance(n, str) for n in s[0])
        and isinstance(s[1], int) and s[1] > 0 and isinstance(s[2], bool)
    )
