"""Flame graphs of a job vertex (Flink's VertexFlameGraph, VertexFlameGraphFactory and the bookkeeping of
its VertexThreadInfoTracker, FLIP-165), pure: merging the slots' stack samples into Flink's shape and
deciding when to sample again.

The answer of ``GET /jobs/{id}/vertices/{vid}/flamegraph`` is ``{endTimestamp, data}``, ``data`` a tree
of ``{name, value, children}`` rooted at ``root`` whose values count samples. While no samples exist
yet the answer is Flink's "waiting" one (``endTimestamp`` -3, no data), for a vertex that does not run
(ended, or not yet started) it is "terminated" (-2). Samples are kept per vertex for
``refresh_interval_s`` (Flink's ``rest.flamegraph.refresh-interval``); the first request after that
starts a new sampling and keeps answering the old graph until the new one is complete.
"""
from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

WAITING = -3  # Flink's JobVertexFlameGraph.waiting(): sampling in progress, no data yet
TERMINATED = -2  # JobVertexFlameGraph.terminated(): the vertex has no running subtask to sample


class FlameGraphType(str, enum.Enum):
    FULL = "full"
    ON_CPU = "on_cpu"
    OFF_CPU = "off_cpu"

    @classmethod
    def parse(cls, value: str | None) -> "FlameGraphType":
        """Raises ValueError naming the types for anything else (the REST layer's 400)."""
        try:
            return cls((value or "full").lower())
        except ValueError:
            raise ValueError(f"unknown flame graph type {value!r}; expected full, on_cpu or off_cpu") from None


@dataclass(frozen=True)
class FlameGraphOptions:
    """Flink's ``rest.flamegraph.*``: samples per subtask, the pause between them, how long a graph is kept."""

    num_samples: int = 100
    delay_ms: int = 20
    refresh_interval_s: float = 60.0
    # A slot that has not answered by the sampling time plus this is left out of the graph.
    answer_grace_s: float = 10.0

    @property
    def deadline_s(self) -> float:
        return self.num_samples * self.delay_ms / 1000 + self.answer_grace_s


def flame_graph(samples: Iterable[list[Any]], kind: FlameGraphType, end_timestamp: int) -> dict[str, Any]:
    """Flink's JobVertexFlameGraph from ``[stack, count, off_cpu]`` samples (stacks root first)."""
    root: dict[str, Any] = {"name": "root", "value": 0, "children": []}
    index: dict[int, dict[str, dict[str, Any]]] = {}  # id(node) -> child name -> child
    for stack, count, off_cpu in samples:
        if kind is FlameGraphType.ON_CPU and off_cpu or kind is FlameGraphType.OFF_CPU and not off_cpu:
            continue
        node = root
        node["value"] += count
        for name in stack:
            children = index.setdefault(id(node), {})
            child = children.get(name)
            if child is None:
                child = children[name] = {"name": name, "value": 0, "children": []}
                node["children"].append(child)
            child["value"] += count
            node = child
    return {"endTimestamp": end_timestamp, "data": root}


def no_data(end_timestamp: int) -> dict[str, Any]:
    return {"endTimestamp": end_timestamp, "data": None}


@dataclass
class SampleRequest:
    """One sampling of a vertex: sent to the slots running ``expected`` subtasks at ``started_s``."""

    request_id: str
    started_s: float
    expected: frozenset[int]
    answers: dict[int, list[list[Any]]] = field(default_factory=dict)

    def complete(self, now_s: float, options: FlameGraphOptions) -> bool:
        return self.expected <= set(self.answers) or now_s - self.started_s > options.deadline_s


@dataclass
class _VertexStats:
    end_timestamp: int
    taken_s: float
    samples: list[list[Any]]


class VertexFlameGraphTracker:
    """What the JobManager knows per (job, vertex): the last complete samples and a sampling in flight."""

    def __init__(self, options: FlameGraphOptions | None = None) -> None:
        self.options = options or FlameGraphOptions()
        self._stats: dict[tuple[str, str], _VertexStats] = {}
        self._pending: dict[tuple[str, str], SampleRequest] = {}

    def pending(self, job_id: str, vertex_id: str) -> SampleRequest | None:
        return self._pending.get((job_id, vertex_id))

    def needs_sampling(self, job_id: str, vertex_id: str, now_s: float) -> bool:
        """No sampling in flight, and no samples or samples older than the refresh interval."""
        if (job_id, vertex_id) in self._pending:
            return False
        stats = self._stats.get((job_id, vertex_id))
        return stats is None or now_s - stats.taken_s > self.options.refresh_interval_s

    def start(self, job_id: str, vertex_id: str, subtasks: Iterable[int], now_s: float) -> SampleRequest:
        request = SampleRequest(uuid.uuid4().hex, now_s, frozenset(subtasks))
        self._pending[(job_id, vertex_id)] = request
        return request

    def finish_if_complete(self, job_id: str, vertex_id: str, now_s: float, now_ms: int) -> bool:
        """Move the request in flight to the kept samples once every subtask answered or time ran out."""
        request = self._pending.get((job_id, vertex_id))
        if request is None or not request.complete(now_s, self.options):
            return False
        del self._pending[(job_id, vertex_id)]
        merged = [s for subtask in sorted(request.answers) for s in request.answers[subtask]]
        self._stats[(job_id, vertex_id)] = _VertexStats(now_ms, now_s, merged)
        return True

    def answer(self, job_id: str, vertex_id: str, kind: FlameGraphType) -> dict[str, Any]:
        stats = self._stats.get((job_id, vertex_id))
        if stats is None:
            return no_data(WAITING)
        return flame_graph(stats.samples, kind, stats.end_timestamp)

    def forget_job(self, job_id: str) -> None:
        self.retain(lambda j: j != job_id)

    def retain(self, keep: Callable[[str], bool]) -> None:
        """Drop what is kept for jobs ``keep`` refuses (jobs that left the JobManager)."""
        for key in [k for k in (*self._stats, *self._pending) if not keep(k[0])]:
            self._stats.pop(key, None)
            self._pending.pop(key, None)
