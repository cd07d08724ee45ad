"""Redis Streams connectors, Millstream's Kafka: a replayable source and an exactly-once sink.

``RedisStreamSource`` reads streams with XREAD; each stream is a split whose
state is ``[stream, last id read, stop id]`` (the stop id is None when
unbounded), so a restored reader rewinds to exactly the entry after the last
one the checkpoint covers.

``RedisStreamSink`` buffers the records of each checkpoint. They are its
committables: when the checkpoint completes, the batch is written with XADD in
one MULTI/EXEC transaction that also advances a marker holding the writer's
last committed sequence number, so a commit replayed after a recovery (its
checkpoint is restored, the failure may have hit between commit and
notification) finds the marker and writes nothing twice.
"""
from __future__ import annotations

import time
from typing import Any

from millstream.engine.common.serialization import DeserializationSchema, SerializationSchema, SimpleStringSchema
from millstream.engine.datastream.connectors.sink import Committer, InitContext, Sink, SinkWriter
from millstream.engine.datastream.connectors.source import Source, SourceReader

#: the marker of a writer's last committed batch, beside the user's stream in the user's Redis
MARKER_KEY = "millstream:redis-stream-sink:{stream}:{writer}"
MARKER_TTL_S = 7 * 24 * 3600
END_OF_INPUT = 2**62  # the sequence number of the batch committed at end of input: nothing follows it
BLOCK_MS = 50  # how long an unbounded XREAD waits, which bounds how late a checkpoint trigger is seen


def _client(url: str) -> Any:
    import redis

    # The URL carries password, database and TLS (rediss://, ?ssl_ca_certs=...) as REDIS_URL does.
    return redis.Redis.from_url(url)


def parse_id(entry_id: str) -> tuple[int, int]:
    """A stream entry id as a comparable pair; raises ValueError naming a malformed id."""
    ms, _, seq = str(entry_id).partition("-")
    try:
        return int(ms), int(seq or 0)
    except ValueError:
        raise ValueError(f"{entry_id!r} is not a Redis stream id (expected '<ms>-<seq>')") from None


def _s(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


class _StreamReader(SourceReader):
    def __init__(self, source: "RedisStreamSource", splits: list[list[Any]]) -> None:
        self.source = source
        self.splits = splits  # [stream, last id read, stop id or None]
        self.client: Any = None

    def _open(self) -> Any:
        if self.client is None:
            self.client = _client(self.source.url)
        return self.client

    def poll_batch(self, max_records: int) -> list[Any] | None:
        live = [s for s in self.splits if s[2] is None or parse_id(s[1]) < parse_id(s[2])]
        if not live:
            if self.source.bounded:
                return None
            time.sleep(BLOCK_MS / 1000)  # unbounded with no stream left to this subtask: idle, never end
            return []
        client = self._open()
        block = None if self.source.bounded else BLOCK_MS
        answer = client.xread({s[0]: s[1] for s in live}, count=max_records, block=block) or []
        out: list[Any] = []
        by_name = {s[0]: s for s in live}
        if self.source.bounded:
            # Entries up to the stop id that XREAD no longer returns were trimmed away: nothing is left.
            answered = {_s(name) for name, entries in answer if entries}
            for name, split in by_name.items():
                if name not in answered:
                    split[1] = split[2]
        for name, entries in answer:
            split = by_name[_s(name)]
            stop = parse_id(split[2]) if split[2] is not None else None
            for entry_id, fields in entries:
                eid = _s(entry_id)
                if stop is not None and parse_id(eid) > stop:
                    split[1] = split[2]  # past the stop id: this split is done
                    break
                out.append(self.source._record(split[0], eid, fields))
                split[1] = eid
        return out

    def snapshot(self) -> Any:
        return [list(s) for s in self.splits]

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None


class RedisStreamSource(Source):
    """Reads Redis streams from ``start_id`` ("0-0": the beginning, "$": what is added from now on).

    ``bounded=True`` stops at each stream's last entry as of the job's start. Records are the
    entries' ``field`` value through ``deserialization_schema`` (strings by default), or, with
    ``field=None``, a dict of all the entry's fields as strings.
    """

    def __init__(
        self,
        url: str,
        streams: str | list[str] | tuple[str, ...],
        start_id: str = "0-0",
        bounded: bool = False,
        deserialization_schema: DeserializationSchema | None = None,
        field: str | None = "value",
    ) -> None:
        if not isinstance(url, str) or "://" not in url:
            raise ValueError(f"RedisStreamSource needs a redis:// or rediss:// URL, got {url!r}")
        names = [streams] if isinstance(streams, str) else list(streams)
        if not names or not all(isinstance(n, str) and n for n in names):
            raise ValueError(f"RedisStreamSource needs one or more stream names, got {streams!r}")
        if start_id != "$":
            parse_id(start_id)
        self.url = url
        self.streams = tuple(sorted(set(names)))
        self.start_id = start_id
        self.bounded = bool(bounded)
        self.deserialization_schema = deserialization_schema or SimpleStringSchema()
        self.field = field

    def _record(self, stream: str, entry_id: str, fields: dict[Any, Any]) -> Any:
        if self.field is None:
            return {_s(k): _s(v) for k, v in fields.items()}
        raw = fields.get(self.field.encode(), fields.get(self.field))
        if raw is None:
            raise ValueError(f"entry {entry_id} of Redis stream {stream!r} has no field {self.field!r}")
        return self.deserialization_schema.deserialize(raw)

    def is_bounded(self) -> bool:
        return self.bounded

    def create_reader(self, subtask: int, parallelism: int, position: Any = None) -> SourceReader:
        if position is not None:
            if not isinstance(position, (list, tuple)) or not all(
                isinstance(s, (list, tuple)) and len(s) == 3 for s in position
            ):
                raise ValueError(f"a RedisStreamSource position is a list of [stream, last id, stop id], got {position!r}")
            return _StreamReader(self, [[str(a), str(b), None if c is None else str(c)] for a, b, c in position])
        mine = list(self.streams[subtask::parallelism])
        splits: list[list[Any]] = []
        client = _client(self.url) if mine and (self.bounded or self.start_id == "$") else None
        try:
            for name in mine:
                last = None
                if client is not None:
                    newest = client.xrevrange(name, count=1)
                    last = _s(newest[0][0]) if newest else "0-0"
                # "$" becomes a concrete id now, so the position can be replayed.
                start = last if self.start_id == "$" else self.start_id
                splits.append([name, start, last if self.bounded else None])
        finally:
            if client is not None:
                client.close()
        return _StreamReader(self, splits)

    def name(self) -> str:
        return "Redis Stream Source"


class RedisStreamCommitter(Committer):
    """Writes each batch and advances its writer's marker in one transaction, unless the marker shows it done."""

    def __init__(self, url: str, stream: str, field: str, maxlen: int | None) -> None:
        self.url, self.stream, self.field, self.maxlen = url, stream, field, maxlen
        self.client: Any = None

    def commit(self, committables: list[Any]) -> None:
        import redis

        if self.client is None:
            self.client = _client(self.url)
        for writer, seq, payloads in committables:
            marker = MARKER_KEY.format(stream=self.stream, writer=writer)
            with self.client.pipeline(transaction=True) as pipe:
                while True:
                    try:
                        pipe.watch(marker)  # a zombie attempt committing the same batch loses the race
                        done = pipe.get(marker)
                        if done is not None and int(done) >= seq:
                            break  # committed before the failure
                        pipe.multi()
                        for p in payloads:
                            pipe.xadd(self.stream, {self.field: p}, maxlen=self.maxlen, approximate=self.maxlen is not None)
                        pipe.set(marker, seq, ex=MARKER_TTL_S)
                        pipe.execute()
                        break
                    except redis.WatchError:
                        continue

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None


class _StreamWriter(SinkWriter):
    def __init__(self, sink: "RedisStreamSink", writer: str, seq: int) -> None:
        self.sink = sink
        self.writer = writer  # names this subtask's marker: job, operator, subtask
        self.seq = seq  # of the last batch handed over
        self.buffer: list[bytes] = []
        self.ended = False
        self.serialize = sink.serialization_schema.serialize

    def write(self, value: Any) -> None:
        self.buffer.append(self.serialize(value))

    def flush(self, end_of_input: bool) -> None:
        self.ended = self.ended or end_of_input

    def prepare_commit(self) -> list[Any]:
        if not self.buffer and not self.ended:
            return []
        self.seq = END_OF_INPUT if self.ended else self.seq + 1
        batch, self.buffer = self.buffer, []
        return [[self.writer, self.seq, batch]]

    def snapshot_state(self, checkpoint_id: int) -> list[Any]:
        return [[self.writer, self.seq]]


class RedisStreamSink(Sink):
    """Appends records to a Redis stream as ``{field: serialized record}``, exactly once per checkpoint."""

    def __init__(
        self,
        url: str,
        stream: str,
        serialization_schema: SerializationSchema | None = None,
        field: str = "value",
        maxlen: int | None = None,
    ) -> None:
        if not isinstance(url, str) or "://" not in url:
            raise ValueError(f"RedisStreamSink needs a redis:// or rediss:// URL, got {url!r}")
        if not isinstance(stream, str) or not stream:
            raise ValueError(f"RedisStreamSink needs a stream name, got {stream!r}")
        if maxlen is not None and (not isinstance(maxlen, int) or maxlen <= 0):
            raise ValueError(f"RedisStreamSink maxlen must be a positive int, got {maxlen!r}")
        self.url = url
        self.stream = stream
        self.serialization_schema = serialization_schema or SimpleStringSchema()
        self.field = field
        self.maxlen = maxlen

    def create_writer(self, subtask: int, parallelism: int) -> SinkWriter:
        import uuid

        # Outside a job (no checkpoints to tie commits to) every writer is its own.
        return _StreamWriter(self, f"{uuid.uuid4().hex}/{subtask}", 0)

    def restore_writer(self, context: InitContext, recovered_state: list[Any]) -> SinkWriter:
        writer = f"{context.job_id}/{context.operator_id}/{context.subtask}"
        # Only this subtask's own sequence continues; after a rescale the job (and names) are new.
        seq = max((int(s) for w, s in recovered_state if w == writer), default=0)
        return _StreamWriter(self, writer, seq)

    def create_committer(self) -> Committer:
        return RedisStreamCommitter(self.url, self.stream, self.field, self.maxlen)

    def name(self) -> str:
        return "Redis Stream Sink"
