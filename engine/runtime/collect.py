"""What ``execute_and_collect``'s collect sink tells its client, and the gateway it tells it through.

As in Flink's collect sink, results are versioned: every entry carries the job attempt that wrote it
and records carry their position (sequence number) in the job's result stream. Three kinds of entry:

- ``START(attempt, seq, gated)``: an attempt of the sink begins at position ``seq``, restored from a
  checkpoint that covered ``seq`` records (0 without one). ``gated``: its records are final only once
  a COMMIT covers them (exactly-once checkpointing); otherwise final as they arrive.
- ``RECORDS(attempt, seq, values)``: records at positions ``seq, seq+1, ...``.
- ``COMMIT(attempt, seq)``: every record of the attempt before position ``seq`` is final (the
  checkpoint that covered them completed, or the input ended).

The client (engine/client/collect_result_buffer.py) hands out only final records; on a new attempt
it drops what the failed one wrote past the restored position. Nothing here does I/O.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Protocol

import msgpack

from engine.checkpoint.config import CheckpointConfig, CheckpointingMode, InvalidCheckpointConfig
from engine.runtime.io.serialization import RECORDS as _RECORDS_BUFFER
from engine.runtime.io.serialization import MsgpackSerializer

START = 0
RECORDS = 1
COMMIT = 2

#: records per RECORDS entry, so one entry (and one fetch) stays small
MAX_RECORDS_PER_ENTRY = 1024


@dataclass(frozen=True)
class CollectEntry:
    kind: int
    attempt: int
    seq: int
    values: tuple[Any, ...] | list[Any] = ()
    gated: bool = False  # START only

    def encode(self, serializer: MsgpackSerializer) -> bytes:
        """Records travel as the data plane's buffers, so Row, bytes and sets survive as they do there."""
        body = serializer.encode(_RECORDS_BUFFER, list(self.values)) if self.kind == RECORDS else None
        return msgpack.packb([self.kind, self.attempt, self.seq, body, self.gated], use_bin_type=True)

    @staticmethod
    def decode(data: bytes, serializer: MsgpackSerializer) -> "CollectEntry":
        kind, attempt, seq, body, gated = msgpack.unpackb(data, raw=False)
        values: Any = ()
        if kind == RECORDS:
            _, values, _ = serializer.decode(body)
        return CollectEntry(int(kind), int(attempt), int(seq), values, bool(gated))


def start(attempt: int, seq: int, gated: bool) -> CollectEntry:
    return CollectEntry(START, attempt, seq, (), gated)


def records(attempt: int, seq: int, values: list[Any]) -> CollectEntry:
    return CollectEntry(RECORDS, attempt, seq, values)


def commit(attempt: int, seq: int) -> CollectEntry:
    return CollectEntry(COMMIT, attempt, seq)


def gated_by_checkpoints(job_config: Mapping[str, Any]) -> bool:
    """Whether a job's collected records wait for checkpoints: only with exactly-once checkpointing,
    as in Flink (at-least-once checkpoints and none at all hand records out as they come)."""
    try:
        cfg = CheckpointConfig.from_job_config(job_config)
    except InvalidCheckpointConfig:
        return False  # the JobManager refuses such a job; nothing is gated by checkpoints it never takes
    return cfg.is_checkpointing_enabled() and cfg.mode is CheckpointingMode.EXACTLY_ONCE


class CollectGateway(Protocol):
    """Where a collect sink's entries go: a Redis list on a cluster, a queue in a mini-cluster."""

    #: whether records wait for checkpoints: exactly-once checkpointing is on and checkpoints complete
    #: here (a mini-cluster takes none)
    gated: bool

    def publish(self, entries: list[CollectEntry]) -> None:
        """Append entries for the client. Records wait (backpressure) while the client has too much
        unread; raises ``TaskCancelled`` if the task is cancelled meanwhile."""
