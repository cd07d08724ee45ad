"""``FileSource`` for text lines: files split per subtask, read line by line, resumable by byte offset.

Each file is one split. A reader's position is the list of its split states,
``[path, offset]`` with ``offset`` the byte offset of the next line to read
(``-1`` once the file is done), so a restored reader re-reads no line and
skips none. When monitoring, each state also names the parallelism it was taken
at, and a rescale hands every split, finished or not, to the subtask that owns
its path at the new parallelism (``FileSource.redistribute_splits``): the one
that would discover the file, so no file is read twice. Flink's continuous
enumerator keeps the set of processed paths for the same reason. Bounded (the
default) reads the files present when the job starts;
``monitor_continuously`` keeps looking for new files, as Flink's continuous
enumerator does. Hidden files and those starting with ``_`` are skipped, as
Flink's default file filter does.

A path may also be an fsspec URL (``s3://bucket/in``, ``ftp://host/in``...; see ``file_paths``):
files are found with the store's listing and read with ranged reads from the split's offset, and
split states name them by URL.
"""
from __future__ import annotations

import os
import time
import zlib
from typing import Any, BinaryIO, Iterable, Mapping, Sequence

from millstream.engine.common.serialization import _check_charset
from millstream.engine.checkpoint.filesystem import is_remote
from millstream.engine.common.time import Duration
from millstream.engine.datastream.connectors.file_paths import basename, normalise, open_binary, remote_files
from millstream.engine.datastream.connectors.source import Source, SourceReader

DONE = -1  # the offset of a split that has been read to its end
CHUNK = 1 << 20  # bytes read at a time


class StreamFormat:
    """How a file's bytes become records; only text lines exist here (PyFlink's ``StreamFormat``)."""

    def __init__(self, charset: str = "UTF-8") -> None:
        _check_charset(charset)
        if "\n".encode(charset) != b"\n":
            # Lines are split on the 0x0a byte, which is only a line feed in ASCII-compatible charsets.
            raise ValueError(f"text_line_format reads ASCII-compatible charsets only, not {charset!r}")
        self.charset = charset

    @staticmethod
    def text_line_format(charset_name: str = "UTF-8", charset: str | None = None) -> "StreamFormat":
        """One record per line, without its line separator, decoded with ``charset_name`` (PyFlink's
        parameter name; ``charset`` is accepted too)."""
        return StreamFormat(charset if charset is not None else charset_name)

    def __repr__(self) -> str:
        return f"StreamFormat.text_line_format({self.charset!r})"


def _source_path(path: str) -> str:
    return normalise(path, "FileSource")


def _visible(name: str) -> bool:
    # Flink's DefaultFileFilter: files being written or metadata (".x", "_SUCCESS") are not input.
    return not (name.startswith(".") or name.startswith("_"))


def enumerate_files(paths: Iterable[str]) -> list[str]:
    """Every visible file under ``paths`` (files or directories, recursively), sorted, without repeats."""
    found: set[str] = set()
    for root in paths:
        if not _visible(basename(root) or root):
            continue
        if is_remote(root):
            found.update(_enumerate_remote(root))
            continue
        if os.path.isfile(root):
            found.add(root)
            continue
        if not os.path.isdir(root):
            raise FileNotFoundError(f"FileSource path {root!r} does not exist")
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = [d for d in dirnames if _visible(d)]
            found.update(os.path.join(dirpath, f) for f in filenames if _visible(f))
    return sorted(found)


def _enumerate_remote(root: str) -> list[str]:
    files = remote_files(root)
    if files.isfile(root):
        return [root]
    if not files.exists(root):
        raise FileNotFoundError(f"FileSource path {root!r} does not exist")
    prefix = root.rstrip("/") + "/"
    # A store lists every object under the prefix; one under a hidden "directory" is skipped too.
    return [u for u in files.find(root) if u.startswith(prefix) and all(_visible(p) for p in u[len(prefix):].split("/"))]


def owner_of(path: str, parallelism: int) -> int:
    """The subtask that reads a file found by continuous monitoring: stable across processes."""
    return zlib.crc32(path.encode("utf-8")) % parallelism


def assign_splits(files: list[str], subtask: int, parallelism: int, continuous: bool) -> list[list[Any]]:
    """A fresh start's split states for ``subtask``: sorted files round-robin (or by path hash when monitoring)."""
    if continuous:
        # New files appear later; only a hash of the path gives every subtask the same answer then.
        mine = [f for f in files if owner_of(f, parallelism) == subtask]
    else:
        mine = files[subtask::parallelism]
    return [[f, 0] for f in mine]


def _check_position(position: Any, parallelism: int, continuous: bool) -> list[list[Any]]:
    ok = isinstance(position, (list, tuple)) and all(
        isinstance(s, (list, tuple)) and len(s) in (2, 3) and isinstance(s[0], str) and isinstance(s[1], int)
        for s in position
    )
    if not ok:
        raise ValueError(f"a FileSource position is a list of [path, offset] split states, got {position!r}")
    if continuous:
        # Which subtask reads a new file depends on the parallelism, and the files a subtask has
        # finished are known only to the subtask that holds their split: splits taken at another
        # parallelism must come through redistribute_splits, or a new owner could read a file again.
        old = {s[2] for s in position if len(s) == 3}
        if old and old != {parallelism}:
            raise ValueError(
                f"a FileSource that monitors its paths continuously was checkpointed at parallelism "
                f"{sorted(old)[0]} and its splits were not redistributed by path for parallelism {parallelism}: "
                "files already read could be read again"
            )
    return [[str(s[0]), int(s[1])] for s in position]


class _TextLineReader(SourceReader):
    """Reads its splits in order, a chunk at a time: one decode and one split per chunk, and the byte
    offset of the next line worked out only when a snapshot asks for it."""

    def __init__(self, source: "FileSource", subtask: int, parallelism: int, splits: list[list[Any]]) -> None:
        self.source = source
        self.subtask = subtask
        self.parallelism = parallelism
        self.charset = source.stream_format.charset
        # path -> byte offset of the next line (DONE when read); dict order is reading order.
        self.splits: dict[str, int] = {p: o for p, o in splits}
        self.current: str | None = None
        self.file: BinaryIO | None = None
        self.next_discovery = 0.0
        # The current file's decoded lines read ahead (separators cut, a "\r" before them kept), the
        # next one to emit, the byte offset of the first, whether they are all ASCII (a character is a
        # byte) and hold a "\r", whether the last has no separator (the file's end), and the bytes of
        # an incomplete line after them with their offset.
        self.lines: list[str] = []
        self.index = 0
        self.base = 0
        self.ascii = True
        self.cr = False
        self.unterminated = False
        self.rest = b""
        self.rest_offset = 0

    def _next_split(self) -> str | None:
        for path, offset in self.splits.items():
            if offset != DONE:
                return path
        return None

    def _discover(self) -> None:
        interval = self.source.discovery_interval_ms or 0
        now = time.monotonic()
        if now < self.next_discovery:
            return
        self.next_discovery = now + interval / 1000.0
        for f in enumerate_files(self.source.paths):
            if f not in self.splits and owner_of(f, self.parallelism) == self.subtask:
                self.splits[f] = 0

    def _open_split(self) -> bool:
        """Open the next unfinished split; False when there is none (yet)."""
        path = self._next_split()
        if path is None and self.source.discovery_interval_ms is not None:
            self._discover()
            path = self._next_split()
        if path is None:
            return False
        try:
            self.file = open_binary(path)
        except FileNotFoundError:
            raise FileNotFoundError(f"FileSource split {path!r} disappeared before it was read") from None
        offset = self.splits[path]
        self.file.seek(offset)
        self.current = path
        self.lines, self.index, self.base, self.unterminated = [], 0, offset, False
        self.rest, self.rest_offset = b"", offset
        return True

    def _refill(self) -> bool:
        """Read the next chunk of the current file into whole lines; False at its end."""
        assert self.file is not None
        while True:
            data = self.file.read(CHUNK)
            if not data and not self.rest:
                return False
            data = self.rest + data
            if not data.endswith(b"\n") and len(data) == len(self.rest):
                # End of file: its last line has no line separator, and is a record all the same.
                block, cut, self.unterminated = data, len(data), True
            else:
                cut = data.rfind(b"\n")
                if cut < 0:
                    self.rest = data  # a line longer than a chunk: read on
                    continue
                block = data[:cut]
            self.base, self.index = self.rest_offset, 0
            self.ascii = block.isascii()
            text = block.decode(self.charset)
            self.cr = "\r" in text
            self.lines = text.split("\n")
            self.rest, self.rest_offset = data[cut + 1 :], self.rest_offset + cut + 1
            return True

    def poll_batch(self, max_records: int) -> list[Any] | None:
        out: list[Any] = []
        while len(out) < max_records:
            if self.file is None and not self._open_split():
                if self.source.discovery_interval_ms is None:
                    return out or None
                if not out:
                    time.sleep(min(0.02, self.max_idle_s))  # nothing new yet: idle, not spin
                return out
            if self.index >= len(self.lines) and not self._refill():
                self.file.close()  # type: ignore[union-attr]
                self.splits[self.current] = DONE  # type: ignore[index]
                self.file, self.current = None, None
                continue
            batch = self.lines[self.index : self.index + max_records - len(out)]
            self.index += len(batch)
            if self.cr:
                batch = [t[:-1] if t.endswith("\r") else t for t in batch]
            out.extend(batch)
        return out

    def _current_offset(self) -> int:
        done = self.lines[: self.index]
        if self.ascii:
            size = sum(map(len, done))
        else:
            charset = self.charset
            size = sum(len(t.encode(charset)) for t in done)
        # Each line read so far ended with a separator, except an unterminated last one.
        size += len(done) - (1 if self.unterminated and self.index == len(self.lines) and done else 0)
        return self.base + size

    def snapshot(self) -> Any:
        offsets = dict(self.splits)
        if self.current is not None:
            offsets[self.current] = self._current_offset()
        if self.source.discovery_interval_ms is not None:
            return [[p, o, self.parallelism] for p, o in offsets.items()]
        return [[p, o] for p, o in offsets.items()]

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None


class FileSource(Source):
    """Reads text lines from files and directories. Build with ``for_record_stream_format``."""

    def __init__(self, stream_format: StreamFormat, paths: tuple[str, ...], discovery_interval_ms: int | None) -> None:
        self.stream_format = stream_format
        self.paths: tuple[str, ...] = paths
        self.discovery_interval_ms = discovery_interval_ms

    @staticmethod
    def for_record_stream_format(stream_format: StreamFormat, *paths: str) -> "FileSourceBuilder":
        return FileSourceBuilder(stream_format, paths)

    @staticmethod
    def for_bulk_file_format(bulk_format: Any, *paths: str) -> "FileSourceBuilder":
        from millstream.engine.compat.unsupported import not_supported

        raise not_supported(
            "FileSource.for_bulk_file_format", "bulk (columnar) formats are Java-side readers",
            "FileSource.for_record_stream_format(StreamFormat.text_line_format(), path)",
        )

    def is_bounded(self) -> bool:
        return self.discovery_interval_ms is None

    def create_reader(self, subtask: int, parallelism: int, position: Any = None) -> SourceReader:
        if position is None:
            splits = assign_splits(enumerate_files(self.paths), subtask, parallelism, not self.is_bounded())
        else:
            splits = _check_position(position, parallelism, not self.is_bounded())
        return _TextLineReader(self, subtask, parallelism, splits)

    def redistribute_splits(
        self, positions: Mapping[int, Sequence[Any] | None], subtask: int, parallelism: int, old_parallelism: int
    ) -> list[list[Any]] | None:
        if self.is_bounded() or parallelism == old_parallelism:
            return super().redistribute_splits(positions, subtask, parallelism, old_parallelism)
        mine: list[list[Any]] = []
        for i in sorted(positions):
            for state in _check_position(positions[i] or [], old_parallelism, True):
                if owner_of(state[0], parallelism) == subtask:
                    mine.append([state[0], state[1], parallelism])
        return mine

    def name(self) -> str:
        return "FileSource"


class FileSourceBuilder:
    """PyFlink's ``FileSource.FileSourceBuilder``: bounded unless ``monitor_continuously`` is called."""

    def __init__(self, stream_format: StreamFormat, paths: tuple[str, ...]) -> None:
        if not isinstance(stream_format, StreamFormat):
            raise TypeError(f"FileSource needs a StreamFormat, got {type(stream_format).__name__}")
        if not paths:
            raise ValueError("FileSource needs at least one path")
        self.stream_format = stream_format
        self.paths = tuple(_source_path(p) for p in paths)
        self.discovery_interval_ms: int | None = None

    def monitor_continuously(self, discovery_interval: Duration) -> "FileSourceBuilder":
        """Unbounded: look for new files under the paths every ``discovery_interval``."""
        ms = discovery_interval.to_milliseconds() if isinstance(discovery_interval, Duration) else None
        if ms is None or ms <= 0:
            raise ValueError(f"monitor_continuously needs a positive Duration, got {discovery_interval!r}")
        self.discovery_interval_ms = ms
        return self

    def process_static_file_set(self) -> "FileSourceBuilder":
        """Bounded: read the files present at the start, then end (the default)."""
        self.discovery_interval_ms = None
        return self

    def set_file_enumerator(self, file_enumerator: Any) -> "FileSourceBuilder":
        from millstream.engine.compat.unsupported import not_supported

        raise not_supported(
            "FileSourceBuilder.set_file_enumerator", "files are enumerated by Millstream's own walker",
            "the default enumeration (every file under the paths, hidden files skipped)",
        )

    def set_split_assigner(self, split_assigner: Any) -> "FileSourceBuilder":
        from millstream.engine.compat.unsupported import not_supported

        raise not_supported(
            "FileSourceBuilder.set_split_assigner", "each file goes to the subtask that owns its path",
            "the default assignment",
        )

    def build(self) -> FileSource:
        for p in self.paths:
            if not (remote_files(p).exists(p) if is_remote(p) else os.path.exists(p)):
                raise FileNotFoundError(f"FileSource path {p!r} does not exist")
        return FileSource(self.stream_format, self.paths, self.discovery_interval_ms)
