"""The file systems checkpoints and savepoints live on: a local directory, or any fsspec URL.

A plain path (or a ``file://`` URL) is a local directory: POSIX semantics, atomic writes by fsync
and rename, and confinement by resolving symlinks. Any other URL (``s3://bucket/checkpoints``,
``gs://...``, ``hdfs://...``, ``ftp://...``) goes through fsspec, which picks the implementation from
the scheme; the package that provides it (s3fs, gcsfs, ...) must be installed in every JobManager and
TaskManager, and credentials come from the URL or that package's usual environment variables. On
an object store (S3, GCS, Azure) an object appears whole when its upload completes (a failed
multipart upload is aborted and leaves nothing), so a file is written straight to its name; on other
stores (FTP, SFTP, HDFS show a file as it grows) it is written under a temporary name and moved into
place. Nothing is ever resolved through symlinks: paths are normalised and a ``..`` is refused
instead.

``storage_fs(path)`` returns the object that does the I/O for ``path``; both kinds offer the same
small set of operations, so ``engine/checkpoint/storage.py`` is written once for both.
"""
from __future__ import annotations

import contextlib
import functools
import os
import posixpath
import shutil
import threading
import uuid
from typing import Any, Callable, Iterable, TypeVar
from urllib.parse import urlsplit


def is_remote(path: str) -> bool:
    """A URL with a scheme other than ``file``: storage reached through fsspec."""
    scheme = urlsplit(str(path)).scheme
    return len(scheme) > 1 and scheme != "file"  # one letter: a Windows drive, not a scheme


def local_path(path: str) -> str:
    """A local path from a path or a ``file://`` URL."""
    return str(path).removeprefix("file://")


class LocalFileSystem:
    """A directory of this machine (or a mounted share): the fast, fsync-and-rename path."""

    remote = False

    def join(self, base: str, *parts: str) -> str:
        return os.path.join(base, *parts)

    def dirname(self, path: str) -> str:
        return os.path.dirname(path)

    def basename(self, path: str) -> str:
        return os.path.basename(os.path.normpath(path))

    def absolute(self, path: str) -> str:
        return os.path.abspath(local_path(path))

    def resolve(self, path: str) -> str:
        """The path with symlinks resolved: what confinement checks compare."""
        return os.path.realpath(local_path(path))

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def isfile(self, path: str) -> bool:
        return os.path.isfile(path)

    def isdir(self, path: str) -> bool:
        return os.path.isdir(path)

    def listdir(self, path: str) -> list[str]:
        return os.listdir(path)

    def makedirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def read(self, path: str) -> bytes:
        with open(path, "rb") as f:
            return f.read()

    def read_ranges(self, path: str, ranges: list[tuple[int, int]]) -> list[bytes]:
        out = []
        with open(path, "rb") as f:
            for offset, length in ranges:
                f.seek(offset)
                out.append(f.read(length))
        return out

    def write_atomic(self, path: str, data: bytes) -> None:
        directory = os.path.dirname(path)
        os.makedirs(directory, exist_ok=True)
        tmp = os.path.join(directory, f".{os.path.basename(path)}.{uuid.uuid4().hex}.tmp")
        try:
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        _fsync_dir(directory)

    def write_atomic_stream(self, path: str, chunks: Iterable[bytes], upload: Callable[[Callable[[], None]], None] | None = None) -> int:
        """As ``write_atomic`` for a file given in pieces, written as they come (never all in memory);
        returns its size. ``upload`` is for stores at a URL: here the file is on disk when this
        returns (there is no round trip to hide)."""
        directory = os.path.dirname(path)
        os.makedirs(directory, exist_ok=True)
        tmp = os.path.join(directory, f".{os.path.basename(path)}.{uuid.uuid4().hex}.tmp")
        size = 0
        try:
            with open(tmp, "wb") as f:
                for chunk in chunks:
                    f.write(chunk)
                    size += len(chunk)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        _fsync_dir(directory)
        return size

    def remove(self, path: str) -> None:
        try:
            os.remove(path)
        except FileNotFoundError:
            pass

    def rmtree(self, path: str) -> None:
        if os.path.isdir(path):
            shutil.rmtree(path)

    def probe_writable(self, directory: str) -> None:
        os.makedirs(directory, exist_ok=True)
        probe = os.path.join(directory, f".writable-{uuid.uuid4().hex}")
        with open(probe, "wb"):
            pass
        os.unlink(probe)


_T = TypeVar("_T")

#: Ranges of a file at most this far apart are read in one request: a request to a remote store costs
#: a round trip (tens of milliseconds there), in which more than this many bytes arrive. A restore's
#: key groups are consecutive in a grouped file, so its parts of a file are usually one request.
RANGE_GAP = 512 * 1024


def coalesced(ranges: list[tuple[int, int]], max_gap: int = RANGE_GAP) -> list[tuple[int, int, list[int]]]:
    """Spans ``(start, end, [indexes into ranges])`` covering every (offset, length) of ``ranges``,
    in file order, each range inside the span that lists it; ranges no more than ``max_gap`` bytes
    apart share a span."""
    spans: list[tuple[int, int, list[int]]] = []
    for i in sorted(range(len(ranges)), key=lambda i: ranges[i][0]):
        offset, length = ranges[i]
        if spans and offset <= spans[-1][1] + max_gap:
            start, end, members = spans[-1]
            members.append(i)
            spans[-1] = (start, max(end, offset + length), members)
        else:
            spans.append((offset, offset + length, [i]))
    return spans


def _serialised(method: Callable[..., _T]) -> Callable[..., _T]:
    """One call at a time per file system where the store needs it: some fsspec implementations
    (FTP, SFTP) hold one connection that concurrent task threads would interleave on. The stores
    fsspec reaches asynchronously (S3, GCS, Azure: ``async_impl``) take calls from several threads
    at once, each on a connection of its pool, so a restore's reads ahead (``state_downloader``)
    overlap their round trips. A call that fails on the connection itself (timed out, reset, closed
    by the server) is tried once more on a new one."""

    @functools.wraps(method)
    def call(self: "RemoteFileSystem", *args: Any, **kwargs: Any) -> _T:
        if getattr(self.fs, "async_impl", False):
            return _retried(self, method, args, kwargs, self.lock)  # only a reconnection takes the lock
        with self.lock:
            return _retried(self, method, args, kwargs, contextlib.nullcontext())

    return call


def _retried(fs: "RemoteFileSystem", method: Callable[..., _T], args: Any, kwargs: Any, reconnecting: Any) -> _T:
    """``method``, once more on a new connection if it failed on the connection itself."""
    try:
        return method(fs, *args, **kwargs)
    except _NOT_THE_CONNECTION:
        raise
    except (OSError, EOFError):
        with reconnecting:
            fs.reconnect()
        return method(fs, *args, **kwargs)


_NOT_THE_CONNECTION = (FileNotFoundError, FileExistsError, PermissionError, IsADirectoryError, NotADirectoryError)


# Schemes of object stores (fsspec's s3fs, gcsfs and adlfs): an object appears whole once written.
OBJECT_STORE_SCHEMES = frozenset({"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss"})


class RemoteFileSystem:
    """An fsspec file system for one URL scheme and location (``protocol://netloc``); paths handed
    to it and returned by it are whole URLs, so handles in ``_metadata`` name where they live."""

    remote = True

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.prefix = f"{parts.scheme}://{parts.netloc}"
        self.url = url
        self.whole_objects = parts.scheme in OBJECT_STORE_SCHEMES
        self.lock = threading.Lock()
        self._fs: Any = None  # connected at the first I/O: path arithmetic never needs the store

    @property
    def fs(self) -> Any:
        if self._fs is None:
            self.reconnect()
        return self._fs

    def reconnect(self) -> None:
        import fsspec.core

        # An instance of its own, not fsspec's cached one: a forked snapshot child must not use the
        # connection its parent holds (storage_fs makes one per process). No listings cache: other
        # processes write the same directories, and a stale listing would hide their files.
        self._fs, _ = fsspec.core.url_to_fs(self.url, skip_instance_cache=True, use_listings_cache=False)

    def _makedirs(self, path: str) -> None:
        # Several processes create the same checkpoint directory at once; on stores that check
        # first and create second, the loser is told it exists, which is what it wanted.
        try:
            self.fs.makedirs(path, exist_ok=True)
        except Exception:
            self.fs.invalidate_cache(path)
            try:
                info = self.fs.info(path)
            except FileNotFoundError:
                info = None
            if info is None or info.get("type") != "directory":
                raise

    def _path(self, url: str) -> str:
        parts = urlsplit(url)
        if f"{parts.scheme}://{parts.netloc}" != self.prefix:
            raise ValueError(f"{url!r} is not on {self.prefix}")
        # fsspec's own path form: for most schemes the URL without the scheme (bucket/key), for
        # host-based ones (ftp, sftp, hdfs) the path on the host.
        return self.fs._strip_protocol(url)

    def join(self, base: str, *parts: str) -> str:
        return posixpath.join(base, *parts)

    def dirname(self, path: str) -> str:
        return posixpath.dirname(path.rstrip("/"))

    def basename(self, path: str) -> str:
        return posixpath.basename(path.rstrip("/"))

    def absolute(self, path: str) -> str:
        return self.resolve(path)

    def resolve(self, path: str) -> str:
        """Normalised, with any ``..`` refused: a store has no symlinks to resolve, and a path that
        climbs out of its directory is never a checkpoint's."""
        parts = urlsplit(path)
        if ".." in parts.path.split("/"):
            raise ValueError(f"{path!r} climbs out of its directory")
        normal = posixpath.normpath(parts.path or "/")
        return f"{parts.scheme}://{parts.netloc}{normal if normal != '.' else '/'}"

    def _info(self, path: str) -> dict[str, Any] | None:
        # Not fsspec's exists/isfile/isdir: they answer False for any error, so a dropped
        # connection would read as a missing checkpoint instead of being retried.
        try:
            return self.fs.info(self._path(path))
        except FileNotFoundError:
            return None

    @_serialised
    def exists(self, path: str) -> bool:
        return self._info(path) is not None

    @_serialised
    def isfile(self, path: str) -> bool:
        info = self._info(path)
        return info is not None and info.get("type") == "file"

    @_serialised
    def isdir(self, path: str) -> bool:
        info = self._info(path)
        return info is not None and info.get("type") == "directory"

    @_serialised
    def listdir(self, path: str) -> list[str]:
        try:
            entries = self.fs.ls(self._path(path), detail=False)
        except FileNotFoundError:
            raise
        return [posixpath.basename(str(e).rstrip("/")) for e in entries]

    @_serialised
    def makedirs(self, path: str) -> None:
        self._makedirs(self._path(path))

    @_serialised
    def read(self, path: str) -> bytes:
        return bytes(self.fs.cat_file(self._path(path)))

    @_serialised
    def read_ranges(self, path: str, ranges: list[tuple[int, int]]) -> list[bytes]:
        """The bytes of each (offset, length) of ``path``, in as few requests as ``coalesced`` allows,
        sent together (concurrently on the stores fsspec reaches asynchronously, such as S3): each
        request to a store is a round trip, and a restore reads a few parts of every file of a chain."""
        if not ranges:
            return []
        p = self._path(path)
        spans = coalesced(ranges)
        blobs = self.fs.cat_ranges([p] * len(spans), [a for a, _, _ in spans], [b for _, b, _ in spans], on_error="raise")
        out = [b""] * len(ranges)
        for (start, _, members), blob in zip(spans, blobs):
            for i in members:
                offset, length = ranges[i]
                out[i] = bytes(blob[offset - start : offset - start + length])  # short if the file is
        return out

    @_serialised
    def write_atomic(self, path: str, data: bytes) -> None:
        self._write_then_move(path, lambda tmp: self.fs.pipe_file(tmp, data))

    def _write_then_move(self, path: str, write: Callable[[str], None]) -> None:
        p = self._path(path)
        if self.whole_objects:
            # One request: the object is there whole or not at all. A temporary name and a move
            # would be a copy and a delete more, each a round trip (and the move copies every byte).
            write(p)
            return
        # Written under a temporary name and moved: a reader never sees half a file on a store that
        # shows a file as it grows.
        directory = posixpath.dirname(p)
        self._makedirs(directory)
        tmp = posixpath.join(directory, f".{posixpath.basename(p)}.{uuid.uuid4().hex}.tmp")
        try:
            write(tmp)
            self.fs.mv(tmp, p)
        except BaseException:
            try:
                self.fs.rm_file(tmp)
            except (FileNotFoundError, OSError):
                pass
            raise

    def write_atomic_stream(self, path: str, chunks: Iterable[bytes], upload: Callable[[Callable[[], None]], None] | None = None) -> int:
        """As ``write_atomic`` for a file given in pieces: spooled to a local temporary file (the
        store's client wants a whole object, and the pieces must not all be in memory), then uploaded
        under a temporary name and moved. Returns its size. With ``upload`` the upload is handed to
        it (``state_uploader.Uploads.submit``) once the file is spooled, and may still be running when
        this returns; the spool is removed when it ends."""
        import tempfile

        size = 0
        spool = tempfile.NamedTemporaryFile(prefix="millstream-upload-", suffix=".tmp")
        try:
            for chunk in chunks:
                spool.write(chunk)
                size += len(chunk)
            spool.flush()
        except BaseException:
            spool.close()
            raise

        def send() -> None:
            with spool:
                self._upload_atomic(path, spool.name)

        if upload is None:
            send()
        else:
            upload(send)
        return size

    @_serialised
    def _upload_atomic(self, path: str, local: str) -> None:
        self._write_then_move(path, lambda tmp: self.fs.put_file(local, tmp))

    @_serialised
    def remove(self, path: str) -> None:
        try:
            self.fs.rm_file(self._path(path))
        except FileNotFoundError:
            pass

    @_serialised
    def rmtree(self, path: str) -> None:
        p = self._path(path)
        if self.fs.exists(p):
            self.fs.rm(p, recursive=True)

    @_serialised
    def probe_writable(self, directory: str) -> None:
        p = self._path(directory)
        self._makedirs(p)
        probe = posixpath.join(p, f".writable-{uuid.uuid4().hex}")
        self.fs.pipe_file(probe, b"")
        self.fs.rm_file(probe)


_LOCAL = LocalFileSystem()
_remotes: dict[tuple[str, int], RemoteFileSystem] = {}
_remotes_lock = threading.Lock()


def _after_fork_in_child() -> None:
    # A snapshot child forked while another thread held the lock would wait on it forever.
    global _remotes_lock
    _remotes_lock = threading.Lock()
    _remotes.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


def storage_fs(path: str) -> Any:
    """The file system ``path`` lives on (``LocalFileSystem`` or ``RemoteFileSystem``), one per
    location and process."""
    if not is_remote(path):
        return _LOCAL
    parts = urlsplit(str(path))
    key = (f"{parts.scheme}://{parts.netloc}", os.getpid())
    with _remotes_lock:
        fs = _remotes.get(key)
        if fs is None:
            fs = _remotes[key] = RemoteFileSystem(key[0] + "/")
        return fs


def _fsync_dir(directory: str) -> None:
    """Make a rename itself durable; not every platform can open a directory."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
