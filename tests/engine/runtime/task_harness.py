"""Runs a job's real StreamTasks in this process over in-memory channels, playing the JobManager's
checkpoint role by hand: trigger barriers at the sources, collect acks into a CompletedCheckpoint,
notify complete or aborted, and deploy a new run restored (possibly rescaled) from it.

Everything below the coordinator is the production code: tasks, operators, state backends,
checkpoint storage on disk and ``plan_restore``.
"""
from __future__ import annotations

import threading
import time
import traceback
from typing import Any

import cloudpickle

from millstream.engine.checkpoint.completed_checkpoint import CompletedCheckpoint, operators_of_job_graph
from millstream.engine.checkpoint.messages import CheckpointType, TaskAck
from millstream.engine.checkpoint.rescale import plan_restore
from millstream.engine.checkpoint.storage import FileSystemCheckpointStorage, checkpoint_location
from millstream.engine.graph.transformations import OperatorKind
from millstream.engine.runtime import collect
from millstream.engine.runtime.checkpointing import Barrier
from millstream.engine.runtime.deployment import make_tdd
from millstream.engine.runtime.io.channel import TaskCancelled
from millstream.engine.runtime.io.local_channels import LocalChannelRegistry
from millstream.engine.runtime.stream_task import StreamTask, TaskEnvironment


def collect_sink(ds: Any) -> int:
    """Add a collect sink after ``ds``; the harness gathers what reaches it in ``results``."""
    env = ds._env
    return env._add(OperatorKind.SINK, "Collect Sink", (ds._id,), params={"sink": "collect"})


class TaskHarness:
    def __init__(
        self, env: Any, checkpoint_dir: str, restore_from: CompletedCheckpoint | None = None,
        finish_barrier: Barrier | None = None,
    ) -> None:
        """``finish_barrier``: deploy as the JobMaster does after a restart that found ``restore_from``
        to be a completed stop-with-savepoint (that savepoint's barrier)."""
        self.job_graph, stream_graph = env.get_job_graph("harness")
        self.checkpoint_dir = checkpoint_dir
        self.cancelled = threading.Event()
        self.lock = threading.Lock()
        self.results: list[Any] = []
        self.collect_kinds: list[int] = []  # the kind of every entry the collect sinks published, in order
        self.results_by_task: dict[tuple[str, int], list[Any]] = {}
        self.cuts: dict[int, dict[tuple[str, int], int]] = {}  # checkpoint -> task -> results before it
        self.acks: dict[int, dict[tuple[str, int], TaskAck]] = {}
        self.declines: list[tuple[int, str]] = []
        self.not_ready: list[tuple[int, str]] = []  # declines of checkpoints a task could not take
        self.failures: list[str] = []
        plan = plan_restore(restore_from, operators_of_job_graph(self.job_graph)) if restore_from else {}
        payload = cloudpickle.dumps(stream_graph)
        registry = LocalChannelRegistry(8)
        self.tasks: dict[tuple[str, int], StreamTask] = {}
        self.sources: list[StreamTask] = []
        for v in self.job_graph.vertices:
            for i in range(v.parallelism):
                restore = plan.get((v.id, i))
                tdd = make_tdd(
                    self.job_graph, v.id, i, 0, restore.to_dict() if restore else None,
                    finish_barrier.to_wire() if finish_barrier is not None else None,
                )
                graph = cloudpickle.loads(payload)  # each subtask its own copy of the user code
                env_ = TaskEnvironment(
                    channels=registry.factory(self.cancelled),
                    cancelled=self.cancelled,
                    print_line=lambda s: None,
                    state_dir=checkpoint_dir + "/task-state",  # used by the on-disk backend only
                    collect=_HarnessCollect(self, (v.id, i)),
                    checkpoint_ack=lambda cid, ack, t=(v.id, i): self._ack(cid, t, ack),
                    checkpoint_decline=lambda cid, reason, not_ready=False: self._decline(cid, reason, not_ready),
                )
                task = StreamTask(tdd, graph, env_)
                self._record_cuts(task, (v.id, i))
                self.tasks[(v.id, i)] = task
                if graph.transformations[tdd.operators[0]].kind is OperatorKind.SOURCE:
                    self.sources.append(task)
        self.threads = [threading.Thread(target=self._run, args=(t,), daemon=True) for t in self.tasks.values()]

    def _collect(self, task: tuple[str, int], values: Any) -> None:
        with self.lock:
            self.results.extend(values)
            self.results_by_task.setdefault(task, []).extend(values)

    def _record_cuts(self, task: StreamTask, key: tuple[str, int]) -> None:
        """Note how much a task had sent to the collect sink when it took each snapshot (on its own
        thread, in the synchronous part): that output is covered by the checkpoint, the rest is not."""
        checkpointer = task.checkpointer
        assert checkpointer is not None
        snapshot = checkpointer.snapshot

        def recording(barrier: Barrier, *args: Any) -> None:
            with self.lock:
                self.cuts.setdefault(barrier.checkpoint_id, {})[key] = len(self.results_by_task.get(key, ()))
            snapshot(barrier, *args)

        checkpointer.snapshot = recording  # type: ignore[method-assign]

    def output_before(self, cid: int) -> list[Any]:
        """What reached the collect sinks before checkpoint ``cid``'s snapshot, in every task."""
        with self.lock:
            return [v for t, n in self.cuts.get(cid, {}).items() for v in self.results_by_task.get(t, [])[:n]]

    def _ack(self, cid: int, task: tuple[str, int], ack: TaskAck) -> None:
        with self.lock:
            self.acks.setdefault(cid, {})[task] = ack

    def _decline(self, cid: int, reason: str, not_ready: bool = False) -> None:
        with self.lock:
            (self.not_ready if not_ready else self.declines).append((cid, reason))

    def _run(self, task: StreamTask) -> None:
        try:
            task.run()
        except TaskCancelled:
            pass
        except BaseException:
            with self.lock:
                self.failures.append(f"{task.name}: {traceback.format_exc()}")
            self.cancelled.set()

    # -- the JobManager's part ------------------------------------------------
    def start(self) -> "TaskHarness":
        for t in self.threads:
            t.start()
        return self

    def trigger(self, cid: int, checkpoint_type: str = "CHECKPOINT", drain: bool = False) -> Barrier:
        barrier = Barrier(
            cid, int(time.time() * 1000), checkpoint_location(self.checkpoint_dir, self.job_graph.job_id, cid),
            checkpoint_type, drain,
        )
        for s in self.sources:
            s.trigger_checkpoint(barrier)
        return barrier

    def await_checkpoint(self, cid: int, timeout: float = 20.0) -> CompletedCheckpoint:
        """Wait until every task acknowledged ``cid``; the checkpoint as the coordinator would complete it."""
        deadline = time.monotonic() + timeout
        while True:
            with self.lock:
                got = dict(self.acks.get(cid, {}))
                if self.failures:
                    raise AssertionError("\n".join(self.failures))
                if self.declines:
                    raise AssertionError(f"declined: {self.declines}")
                not_ready = [reason for c, reason in self.not_ready if c == cid]
                if not_ready:  # as the coordinator: a checkpoint a source could not take fails at once
                    raise AssertionError(f"checkpoint {cid} declined as not ready: {not_ready}")
            if len(got) == len(self.tasks):
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"checkpoint {cid}: {len(got)} of {len(self.tasks)} acks")
            time.sleep(0.01)
        first = min(self.acks[cid].values(), key=lambda a: a.ack_timestamp or 0)
        done = CompletedCheckpoint.from_acks(
            self.job_graph.job_id, cid, CheckpointType.CHECKPOINT, int(first.ack_timestamp or 0),
            int(time.time() * 1000), None, got, operators_of_job_graph(self.job_graph),
        )
        # As the coordinator does: ``_metadata`` makes the checkpoint complete, and tasks restore
        # only state files of a complete checkpoint.
        FileSystemCheckpointStorage(self.checkpoint_dir).write_metadata(self.job_graph.job_id, cid, done.to_metadata())
        return done

    def notify_complete(self, cid: int) -> None:
        for t in self.tasks.values():
            t.notify_checkpoint_complete(cid)

    def notify_aborted(self, cid: int) -> None:
        for t in self.tasks.values():
            t.notify_checkpoint_aborted(cid)

    def checkpoint(self, cid: int, checkpoint_type: str = "CHECKPOINT", drain: bool = False) -> CompletedCheckpoint:
        self.trigger(cid, checkpoint_type, drain)
        done = self.await_checkpoint(cid)
        self.notify_complete(cid)
        return done

    def join(self, timeout: float = 30.0) -> list[Any]:
        """Wait for every task to end; returns the collected results. Fails on a task failure or timeout."""
        deadline = time.monotonic() + timeout
        for t in self.threads:
            t.join(max(deadline - time.monotonic(), 0.01))
        alive = [t for t in self.threads if t.is_alive()]
        if alive:
            self.cancelled.set()
            raise AssertionError(f"{len(alive)} tasks still running after {timeout}s")
        if self.failures:
            raise AssertionError("\n".join(self.failures))
        with self.lock:
            return list(self.results)

    def await_output(self, count: int = 1, timeout: float = 20.0) -> None:
        """Wait until the collect sinks received ``count`` values: the job is under way (on a loaded
        machine a fixed sleep may end before the first record, or after the last)."""
        deadline = time.monotonic() + timeout
        while True:
            with self.lock:
                if len(self.results) >= count:
                    return
                if self.failures:
                    raise AssertionError("\n".join(self.failures))
            if time.monotonic() > deadline:
                raise AssertionError(f"fewer than {count} results after {timeout}s")
            time.sleep(0.005)

    def running(self) -> int:
        return sum(t.is_alive() for t in self.threads)

    def cancel(self) -> None:
        self.cancelled.set()
        for t in self.threads:
            t.join(10)


class _HarnessCollect:
    """A collect sink's gateway that keeps its records, ungated, in the harness's results."""

    gated = False

    def __init__(self, harness: Any, task: tuple[str, int]) -> None:
        self.harness = harness
        self.task = task

    def publish(self, entries: list[Any]) -> None:
        with self.harness.lock:
            self.harness.collect_kinds.extend(e.kind for e in entries)
        for e in entries:
            if e.kind == collect.RECORDS:
                self.harness._collect(self.task, e.values)
