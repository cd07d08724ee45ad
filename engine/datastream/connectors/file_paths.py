"""Where FileSource reads and FileSink writes: a local (or mounted) path, or any fsspec URL.

A plain path or a ``file://`` URL is a local file, handled with ``os`` as before. Any other URL
(``s3://bucket/dir``, ``gs://...``, ``ftp://host/dir``...) goes through fsspec, which picks the
implementation from the scheme; its package (``millstream[s3]`` brings s3fs) must be installed
wherever the job's tasks run, and the endpoint and credentials come from that package's usual
configuration (``FSSPEC_S3_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``...), never from the job.

Paths stay whole URLs everywhere (split states, committables, sink state), so they name where a
file lives in any process; ``RemoteFiles`` turns them into fsspec's own path form and back.
"""
from __future__ import annotations

import os
import posixpath
import threading
from typing import BinaryIO
from urllib.parse import urlsplit

from millstream.engine.checkpoint.filesystem import is_remote


def normalise(path: str, what: str) -> str:
    """A local path made absolute, or a URL checked to have an fsspec implementation installed."""
    if not isinstance(path, str) or not path:
        raise ValueError(f"{what} needs a non-empty path, got {path!r}")
    if path.startswith("file://"):
        path = path[len("file://") :]
    if not is_remote(path):
        return os.path.abspath(path)
    scheme = urlsplit(path).scheme
    import fsspec

    try:
        fsspec.get_filesystem_class(scheme)
    except ImportError as e:
        raise ValueError(f"{what} cannot use {path!r}: the package for {scheme}:// is not installed ({e})") from None
    except ValueError:
        raise ValueError(f"{what} cannot use {path!r}: no file system is known for {scheme}://") from None
    return path.rstrip("/")


class RemoteFiles:
    """The fsspec file system of one location (``scheme://netloc``), in this process."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.scheme, self.netloc = parts.scheme, parts.netloc
        import fsspec.core

        # An instance of its own and no listings cache: other subtasks and processes write the same
        # directories, and a stale listing would hide their files.
        self.fs, _ = fsspec.core.url_to_fs(f"{self.scheme}://{self.netloc}/", skip_instance_cache=True, use_listings_cache=False)

    def path(self, url: str) -> str:
        return self.fs._strip_protocol(url)

    def url(self, path: str) -> str:
        """The URL of a path fsspec returned: for bucket stores it starts with the bucket, for
        host-based ones (ftp, sftp, hdfs) it is the path on the host."""
        path = path.strip("/")
        if self.netloc and (path == self.netloc or path.startswith(self.netloc + "/")):
            return f"{self.scheme}://{path}"
        return f"{self.scheme}://{self.netloc}/{path}"

    def exists(self, url: str) -> bool:
        return bool(self.fs.exists(self.path(url)))

    def isfile(self, url: str) -> bool:
        return bool(self.fs.isfile(self.path(url)))

    def size(self, url: str) -> int:
        return int(self.fs.size(self.path(url)))

    def find(self, url: str) -> list[str]:
        """Every file under the directory ``url``, recursively, as URLs."""
        return [self.url(p) for p in self.fs.find(self.path(url))]

    def open(self, url: str) -> BinaryIO:
        return self.fs.open(self.path(url), "rb")

    def makedirs(self, url: str) -> None:
        try:
            self.fs.makedirs(self.path(url), exist_ok=True)
        except FileExistsError:
            pass

    def upload(self, local: str, url: str) -> None:
        """The whole local file as the object ``url``: it appears whole or not at all."""
        self.fs.put_file(local, self.path(url))

    def write(self, url: str, data: bytes) -> None:
        self.fs.pipe_file(self.path(url), data)

    def read(self, url: str, start: int, end: int) -> bytes:
        return bytes(self.fs.cat_file(self.path(url), start=start, end=end))

    def move(self, src: str, dst: str) -> None:
        """A rename where the store has one, else copy and delete (S3)."""
        self.fs.mv(self.path(src), self.path(dst))

    def remove(self, url: str) -> None:
        try:
            self.fs.rm_file(self.path(url))
        except FileNotFoundError:
            pass


_cache: dict[tuple[str, int, int], RemoteFiles] = {}
_lock = threading.Lock()


def remote_files(url: str) -> RemoteFiles:
    """The file system ``url`` lives on, one per location, process and thread: some fsspec
    implementations (FTP, SFTP) hold one connection that task threads reading and writing at once
    would interleave on, and a forked child must not use its parent's."""
    parts = urlsplit(url)
    key = (f"{parts.scheme}://{parts.netloc}", os.getpid(), threading.get_ident())
    with _lock:
        found = _cache.get(key)
        if found is None:
            found = _cache[key] = RemoteFiles(url)
        return found


def join(base: str, *parts: str) -> str:
    return posixpath.join(base, *parts) if is_remote(base) else os.path.join(base, *parts)


def basename(path: str) -> str:
    return posixpath.basename(path.rstrip("/")) if is_remote(path) else os.path.basename(path.rstrip(os.sep))


def file_size(path: str) -> int:
    return remote_files(path).size(path) if is_remote(path) else os.path.getsize(path)


def open_binary(path: str) -> BinaryIO:
    return remote_files(path).open(path) if is_remote(path) else open(path, "rb")
