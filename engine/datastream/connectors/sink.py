"""The sink protocol used by ``DataStream.sink_to`` (Flink's Sink V2): one writer per subtask.

A plain sink only needs ``create_writer`` and ``SinkWriter.write``. A sink that
is exactly-once at its output commits in two phases tied to checkpoints:

1. before checkpoint n's barrier moves on, the runtime calls the writer's
   ``flush(False)`` and ``prepare_commit()``; the committables it returns
   (plain data: paths, batches...) go into the operator's checkpointed state
   together with ``snapshot_state(n)``, the writer's own state;
2. when checkpoint n completes everywhere, the ``Committer`` commits every
   committable of checkpoints <= n. A committable restored from a checkpoint
   is committed again, because the failure may have come between completion
   and notification: ``Committer.commit`` must be idempotent.

At the end of a bounded input, ``flush(True)`` then ``prepare_commit()`` hand
over the rest, which is committed at once.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from millstream.engine.compat.unsupported import java_only


class SinkWriter(ABC):
    @abstractmethod
    def write(self, value: Any) -> None: ...

    def flush(self, end_of_input: bool) -> None:
        """Push buffered data on; at end of input, also close what is open so ``prepare_commit`` takes it."""

    def prepare_commit(self) -> list[Any]:
        """The committables of everything written since the last call (Flink's ``PrecommittingSinkWriter``)."""
        return []

    def snapshot_state(self, checkpoint_id: int) -> list[Any]:
        """The writer's own state for checkpoint ``checkpoint_id``, a list of plain items that may be
        redistributed over subtasks on rescale (Flink's ``StatefulSinkWriter``)."""
        return []

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` completed and its committables are committed."""

    def close(self) -> None:
        pass


class Committer(ABC):
    """Makes committables visible. Called with the committables of completed checkpoints, in order."""

    @abstractmethod
    def commit(self, committables: list[Any]) -> None:
        """Commit every committable; committing one that is already committed must change nothing."""

    def close(self) -> None:
        pass


@dataclass(frozen=True)
class InitContext:
    """What a writer learns about its subtask (Flink's ``Sink.InitContext``)."""

    subtask: int
    parallelism: int
    attempt: int = 0
    job_id: str = ""
    operator_id: str = ""  # stable within a job: names the writer in external systems
    restored: bool = False  # restored from a checkpoint or savepoint (its state may be empty)
    # The native runtime: a job failover restarts tasks that had already finished, replaying their
    # input, so a writer that committed everything at its end must not write it again.
    restarts_finished_tasks: bool = False


class Sink(ABC):
    get_java_function = java_only("the sink itself, stream.sink_to(sink)")

    @abstractmethod
    def create_writer(self, subtask: int, parallelism: int) -> SinkWriter: ...

    def restore_writer(self, context: InitContext, recovered_state: list[Any]) -> SinkWriter:
        """The writer the runtime uses: ``recovered_state`` is this subtask's share of the writer
        states of the checkpoint it restores from ([] on a fresh start)."""
        return self.create_writer(context.subtask, context.parallelism)

    def create_committer(self) -> Committer | None:
        """The committer of a two-phase-commit sink; None for a sink that writes directly."""
        return None

    def name(self) -> str:
        return type(self).__name__
