"""What ``execute_and_collect``'s collect sink tells its client, and the gateway it tells it through.

As in Flink's collect sink, results are versioned: every entry carries the job attempt that wrote it
and records carry their position (sequence number) in the job's result stream. Four kinds of entry:

- ``START(attempt, seq, gated, origin)``: an attempt of the sink begins at position ``seq``, restored
  from a checkpoint that covered ``seq`` records (0 without one). ``gated``: its records are final
  only once a COMMIT covers them (exactly-once checkpointing); otherwise final as they arrive.
  ``origin``: the first position the attempt writes. A restored attempt first writes again, from
  ``origin`` up to ``seq``, the records its checkpoint holds that the client had not acknowledged
  (Flink's CollectSinkFunction keeps them in its operator state the same way), so records a Redis
  restart lost reach the client all the same.
- ``RECORDS(attempt, seq, values)``: records at positions ``seq, seq+1, ...``. An attempt's RECORDS
  are contiguous from its ``origin``: a gap means entries went missing.
- ``COMMIT(attempt, seq)``: every record of the attempt before position ``seq`` is final (the
  checkpoint that covered them completed).
- ``END(attempt, seq)``: the input ended after position ``seq``; everything before it is final.

The client (engine/client/collect_result_buffer.py) hands out only final records; on a new attempt
it drops what the failed one wrote past the restored position, and it acknowledges the positions it
holds (``Ack``), which the sink may then forget. Nothing here does I/O.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Protocol

import msgpack

from millstream.engine.checkpoint.config import CheckpointConfig, CheckpointingMode, InvalidCheckpointConfig
from millstream.engine.runtime.io.serialization import RECORDS as _RECORDS_BUFFER
from millstream.engine.runtime.io.serialization import MsgpackSerializer

START = 0
RECORDS = 1
COMMIT = 2
END = 3

#: records per RECORDS entry, so one entry (and one fetch) stays small
MAX_RECORDS_PER_ENTRY = 1024
#: encoded bytes of records a collect sink keeps for its client before it waits (backpressure): also
#: what a job whose client reads nothing holds in Redis, and the most its checkpoints carry
MAX_KEPT_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class CollectEntry:
    kind: int
    attempt: int
    seq: int
    values: tuple[Any, ...] | list[Any] = ()
    gated: bool = False  # START only
    origin: int | None = None  # START only: the first position it writes (None: ``seq``)
    body: bytes | None = None  # RECORDS: the values already encoded (a sink's kept records)

    def encode(self, serializer: MsgpackSerializer) -> bytes:
        """Records travel as the data plane's buffers, so Row, bytes and sets survive as they do there."""
        body = self.body
        if body is None and self.kind == RECORDS:
            body = encode_values(serializer, self.values)
        extra = self.origin if self.kind == START else None
        return msgpack.packb([self.kind, self.attempt, self.seq, body, self.gated, extra], use_bin_type=True)

    @staticmethod
    def decode(data: bytes, serializer: MsgpackSerializer) -> "CollectEntry":
        kind, attempt, seq, body, gated, extra = msgpack.unpackb(data, raw=False)
        values: Any = ()
        if kind == RECORDS:
            _, values, _ = serializer.decode(body)
        origin = int(extra) if kind == START and extra is not None else None
        return CollectEntry(int(kind), int(attempt), int(seq), values, bool(gated), origin)

    @property
    def first(self) -> int:
        """A START's first written position."""
        return self.seq if self.origin is None else self.origin


def encode_values(serializer: MsgpackSerializer, values: Any) -> bytes:
    return serializer.encode(_RECORDS_BUFFER, list(values))


def start(attempt: int, seq: int, gated: bool, origin: int | None = None) -> CollectEntry:
    return CollectEntry(START, attempt, seq, (), gated, origin)


def records(attempt: int, seq: int, values: list[Any], body: bytes | None = None) -> CollectEntry:
    return CollectEntry(RECORDS, attempt, seq, values, body=body)


def commit(attempt: int, seq: int) -> CollectEntry:
    return CollectEntry(COMMIT, attempt, seq)


def end(attempt: int, seq: int) -> CollectEntry:
    return CollectEntry(END, attempt, seq)


@dataclass(frozen=True)
class Ack:
    """The client holds every record before ``position`` as attempt ``attempt`` wrote them: that
    attempt's sink may forget them. Only the attempt named may act on it (an older attempt's ack
    speaks of positions a restore may have rolled back)."""

    attempt: int
    position: int

    def encode(self) -> bytes:
        return msgpack.packb([self.attempt, self.position])

    @staticmethod
    def decode(data: bytes) -> "Ack":
        attempt, position = msgpack.unpackb(data, raw=False)
        if not isinstance(attempt, int) or not isinstance(position, int) or attempt < 0 or position < 0:
            raise ValueError("a collect acknowledgement holds two non-negative integers")
        return Ack(attempt, position)


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
    #: whether published entries can be lost before the client has them (a Redis restart): the sink
    #: then keeps what the client has not acknowledged in its checkpointed state, bounded, and a
    #: restored sink writes it again. False for a mini-cluster's in-process queue.
    replays: bool

    def publish(self, entries: list[CollectEntry]) -> None:
        """Append entries for the client; raises ``TaskCancelled`` if the task is cancelled while
        the gateway waits (a mini-cluster's queue is bounded)."""

    def await_acknowledged(self, attempt: int, position: int) -> int:
        """Wait until the client holds attempt ``attempt``'s records before ``position`` (or more);
        returns the position it acknowledged. Raises ``TaskCancelled`` if the task is cancelled."""

    def acknowledged(self, attempt: int) -> int:
        """The position before which the client holds ``attempt``'s records (0: none known)."""
