"""CheckpointStorage: where snapshots are written, behind a small protocol; the only I/O in this package.

``FileSystemCheckpointStorage`` lays out ``<dir>/<job>/chk-<n>/`` for checkpoints
and ``<savepoint-dir>/savepoint-<job6>-<suffix>/`` for savepoints. Every file is
written atomically (temp file, fsync, rename) and ``_metadata`` is written last,
so a directory without ``_metadata`` is an incomplete checkpoint. Directories are local paths or
any fsspec URL (engine/checkpoint/filesystem.py does the I/O for both).

In a cluster, state files and ``_metadata`` are sealed with the cluster secret (engine/security/mac.py;
a state file bound to the job and checkpoint that wrote it, its name and the piece, see ``StateOrigin``): each cluster process calls ``seal_state_files`` once at start, and a state file that
does not open (written by someone else, altered, or from a cluster with another secret) is refused
before it is unpickled, a ``_metadata`` before it is parsed. Processes that never call it (the in-process mini-cluster, unit tests) write
plain files and read both kinds without checking.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from typing import Any, Callable, Iterable, Iterator, Mapping, Protocol

from millstream.engine.checkpoint.filesystem import is_remote, local_path, storage_fs
from millstream.engine.checkpoint.messages import TaskId
from millstream.engine.checkpoint import state_file
from millstream.engine.checkpoint.shared_state_registry import SHARED_DIR, is_shared_name
from millstream.engine.checkpoint.state_origin import StateOrigin
from millstream.engine.security import mac
from millstream.engine.security.mac import VERSION, Sealer, Unauthenticated, check_secret, is_unsealed

METADATA_FILE = "_metadata"
_COPY_BLOCK = 1 << 20  # spooled parts are copied behind the head in blocks this big
_READ_BLOCK = 1 << 20  # a streamed restore reads parts this many bytes at a time (a bigger part alone)
_DISCARDABLE = re.compile(r"^(chk-\d+|savepoint-[0-9a-zA-Z-]+)$")
_SAFE = re.compile(r"[^0-9A-Za-z._-]")
_TMP = re.compile(r"^\.(.+)\.[0-9a-f]{32}\.tmp$")  # _atomic_write's temporary file of ``name``


_sealing: dict[str, str | bytes] = {}  # "secret" once this process seals and checks its state files

METADATA_KIND = "checkpoint-metadata"  # the current _metadata's MAC kind (the previous release's: "state")
_STATE_KIND = "state2"  # the current state files' MAC kind, bound to job, checkpoint, file and role


def seal_state_files(secret: str | bytes | None) -> None:
    """From now on this process seals the state files it writes and refuses any it reads that do not
    open with ``secret`` (called once by each cluster process at start: slot processes, JobManager)."""
    check_secret(secret)
    _sealing["secret"] = secret  # type: ignore[assignment]


# MAC contexts. A state file's pieces are bound to (job, checkpoint, file name, role[, key group]):
# the file name encodes operator, vertex and subtask (``state_file_name``), the role says which piece
# (a whole single-blob file, a key-grouped file's head, or one key group's part). A shared file of
# incremental checkpoints is bound to its job and name but to no checkpoint, since later checkpoints
# of the job refer to it; its name is unique (attempt, checkpoint id and a random suffix in it).
# Bound to the job that WROTE the files (from _metadata), not the job reading them, so a savepoint
# restores into a new job and a rescaled subtask opens other subtasks' files.


def _file_context(origin: StateOrigin, name: str, role: str, key_group: int | None = None) -> tuple[str, tuple]:
    if origin.legacy:  # the previous release: the base name only, "#<key group>" for a part
        return "state", (name if key_group is None else f"{name}#{key_group}",)
    extra = () if key_group is None else (key_group,)
    return _STATE_KIND, (origin.job_id, origin.checkpoint_id, name, role, *extra)


def _shared_context(job_id: str, name: str, key_group: int, legacy: bool = False) -> tuple[str, tuple]:
    if legacy:
        return "state", (f"{name}#{key_group}",)
    return _STATE_KIND, (job_id, "shared", name, "part", key_group)


def _seal(context: tuple[str, tuple], data: bytes) -> bytes:
    secret = _sealing.get("secret")
    return Sealer(secret, context[0], *context[1]).seal(data) if secret else data


def _describe(origin: StateOrigin | None) -> str:
    if origin is None:
        return ""
    if origin.legacy:
        return " (the previous release's format)"
    return f" for checkpoint {origin.checkpoint_id} of job {origin.job_id}"


def _open(context: tuple[str, tuple], data: bytes, path: str, origin: StateOrigin | None = None) -> bytes:
    secret = _sealing.get("secret")
    if not secret:  # no cluster secret here: a sealed file's envelope is skipped unchecked (pickles start 0x80)
        return data[1 + 16 :] if data[:1] == bytes((VERSION,)) else data
    try:
        return Sealer(secret, context[0], *context[1]).open(data)
    except Unauthenticated:
        raise InvalidSavepoint(
            str(path)[:300],
            f"the state file is not sealed with this cluster's secret (MILLSTREAM_CLUSTER_SECRET){_describe(origin)}: "
            "copied from another checkpoint or job, written by another cluster or process, or altered; it is not read",
        ) from None


def _need_origin(path: str, origin: StateOrigin | None) -> StateOrigin:
    """The origin a sealed read checks against; without a secret nothing is checked, so any will do."""
    if origin is not None:
        return origin
    if _sealing.get("secret"):
        raise InvalidSavepoint(str(path)[:300], "no checkpoint is named for this state file, so it cannot be checked")
    return StateOrigin("", 0)


def _seal_state(origin: StateOrigin, name: str, data: bytes) -> bytes:
    """A state file sealed for writing: a key-grouped one (``state_file``) has its head and each part
    sealed on its own (each part bound to its key group too), so a reader checks only the parts it reads."""
    if not _sealing.get("secret") or not state_file.is_key_grouped(data):
        return _seal(_file_context(origin, name, "file"), data)
    payload, index, body = state_file.split(data)
    parts, sealed_index, offset = [], [], 0
    for kg, off, length in index:
        part = _seal(_file_context(origin, name, "part", kg), bytes(body[off : off + length]))
        sealed_index.append((kg, offset, len(part)))
        parts.append(part)
        offset += len(part)
    return state_file.pack(_seal(_file_context(origin, name, "head"), state_file.encode_head(payload, sealed_index)), parts)


def _open_state(origin: StateOrigin | None, path: str, data: bytes) -> bytes:
    """The unsealed bytes of a whole state file, in either format."""
    origin = _need_origin(path, origin)
    name = storage_fs(path).basename(path)
    if not state_file.is_key_grouped(data):
        return _open(_file_context(origin, name, "file"), data, path, origin)
    try:
        n = state_file.head_length(data[: state_file.PREFIX_BYTES])
        sealed_head = data[state_file.PREFIX_BYTES : state_file.PREFIX_BYTES + n]
        payload, index = state_file.decode_head(_open(_file_context(origin, name, "head"), sealed_head, path, origin))
    except ValueError as e:
        raise InvalidSavepoint(str(path)[:300], f"state file is corrupt: {e}") from e
    body = memoryview(data)[state_file.PREFIX_BYTES + n :]
    parts = [
        (kg, _open(_file_context(origin, name, "part", kg), bytes(body[off : off + length]), path, origin))
        for kg, off, length in index
    ]
    return state_file.build(payload, parts)


def _open_metadata(path: str, data: bytes) -> tuple[bytes, bool]:
    """``_metadata``'s JSON, checked like a state file before it is parsed, and whether it is in the
    previous release's format (``legacy``): its handles and offsets decide which files a restore
    reads and where sources resume, so a cluster trusts only its own.

    The previous release's sealed ``_metadata`` (and its state files, bound to their names only) still
    opens, as Flink keeps restoring older savepoints: a savepoint taken before an upgrade must restore
    after it. The binding a file from that format lacks is the gap it had; every checkpoint written
    now is bound, and a new-format file never opens as an old-format one (the MAC kinds differ)."""
    secret = _sealing.get("secret")
    if not secret:
        return (data[1 + 16 :] if data[:1] == bytes((VERSION,)) else data), False
    if is_unsealed():  # benchmark only (engine/security/mac.py)
        return data, False
    if data[:1] != bytes((VERSION,)):
        # Written before _metadata was sealed (or by hand): refused, as its unsealed state files would be.
        raise InvalidSavepoint(
            str(path)[:300],
            f"its {METADATA_FILE} is not sealed (written by an older Millstream, by the in-process mini-cluster, "
            "or by hand); this cluster restores only checkpoints and savepoints it sealed with its secret",
        )
    for kind, context, legacy in ((METADATA_KIND, ("v2",), False), ("state", (METADATA_FILE,), True)):
        opened = Sealer(secret, kind, *context).try_open(data)
        if opened is not None:
            return opened, legacy
    # Counted and logged as any refused element is (Sealer.open would have; try_open stays quiet).
    mac.refused[METADATA_KIND] = mac.refused.get(METADATA_KIND, 0) + 1
    mac.log.warning("refused an unauthenticated element (%s %s): its MAC does not match", METADATA_KIND, str(path)[:300])
    raise InvalidSavepoint(
        str(path)[:300],
        f"its {METADATA_FILE} is not sealed with this cluster's secret (MILLSTREAM_CLUSTER_SECRET): written "
        "by another cluster, or altered; it is not read",
    )


class CheckpointStorageError(OSError):
    pass


class InvalidSavepoint(Exception):
    """A checkpoint or savepoint path that cannot be restored from."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"cannot restore from '{path}': {reason}")
        self.path = path
        self.reason = reason


# -- layout: pure path arithmetic, shared with the coordinator ---------------------


def checkpoint_location(base_dir: str, job_id: str, checkpoint_id: int) -> str:
    return storage_fs(base_dir).join(base_dir, job_id, f"chk-{checkpoint_id}")


def shared_location(base_dir: str, job_id: str) -> str:
    """The files incremental checkpoints share (``SharedStateRegistry``), next to the chk-<n> directories."""
    return storage_fs(base_dir).join(base_dir, job_id, SHARED_DIR)


def savepoint_location(target_dir: str, job_id: str, checkpoint_id: int) -> str:
    """Flink's ``savepoint-<first 6 of job id>-<12 hex>``, the suffix derived from (job, id) so it is repeatable."""
    suffix = hashlib.sha1(f"{job_id}:{checkpoint_id}".encode()).hexdigest()[:12]
    return storage_fs(target_dir).join(target_dir, f"savepoint-{job_id[:6]}-{suffix}")


def state_file_name(task: TaskId, operator_id: str) -> str:
    vertex_id, subtask = task
    return f"{_SAFE.sub('_', operator_id)}-{_SAFE.sub('_', str(vertex_id))}-{int(subtask)}.state"


class CheckpointStorage(Protocol):
    def check_writable(self, directory: str | None = None, kind: str = "checkpoint") -> None: ...

    def write_task_state(
        self, job_id: str, checkpoint_id: int, task: TaskId, operator_id: str, data: bytes, location: str | None = None
    ) -> str: ...

    def read_task_state(self, handle: str, origin: StateOrigin | None = None) -> bytes: ...

    def write_metadata(
        self, job_id: str, checkpoint_id: int, metadata: Mapping[str, Any], location: str | None = None
    ) -> str: ...

    def read_metadata(self, path: str) -> dict[str, Any]: ...

    def discard(self, path: str) -> None: ...


class FileSystemCheckpointStorage:
    def __init__(self, base_dir: str) -> None:
        self.base_dir = storage_fs(base_dir).absolute(base_dir)

    def location(self, job_id: str, checkpoint_id: int) -> str:
        return checkpoint_location(self.base_dir, job_id, checkpoint_id)

    def check_writable(self, directory: str | None = None, kind: str = "checkpoint") -> None:
        """Create ``directory`` (default: the base directory) and prove a file can be written there;
        ``kind`` names it in the error ("checkpoint" or "savepoint")."""
        d = directory or self.base_dir
        fs = storage_fs(d)
        d = fs.absolute(d)
        try:
            fs.probe_writable(d)
        except (OSError, ValueError) as e:
            raise CheckpointStorageError(
                f"{kind} directory '{d}' is not writable: {getattr(e, 'strerror', None) or e}"
            ) from e

    def write_task_state(
        self, job_id: str, checkpoint_id: int, task: TaskId, operator_id: str, data: bytes, location: str | None = None
    ) -> str:
        """Write one operator's snapshot of one subtask; the returned path is its state handle."""
        directory = location or self.location(job_id, checkpoint_id)
        name = state_file_name(task, operator_id)
        path = storage_fs(directory).join(directory, name)
        _atomic_write(path, _seal_state(StateOrigin(job_id, checkpoint_id), name, data))
        return path

    def write_task_state_parts(
        self,
        job_id: str,
        checkpoint_id: int,
        task: TaskId,
        operator_id: str,
        payload: bytes,
        parts: Iterable[tuple[int, bytes]],
        location: str | None = None,
    ) -> tuple[str, int]:
        """As ``write_task_state`` for a key-grouped file given as its head's payload and its parts
        ([(key group, bytes)] in key-group order, e.g. a generator reading them off a read
        transaction), with one part in memory at a time; the bytes on disk are those
        ``write_task_state`` writes for the same state. Returns (handle, bytes written).

        The head, which holds the index, comes first in the file but is known only after the last
        part: the (sealed) parts are spooled to an unnamed temporary file first, next to the file
        when it is local, then copied behind the head."""
        directory = location or self.location(job_id, checkpoint_id)
        fs = storage_fs(directory)
        name = state_file_name(task, operator_id)
        path = fs.join(directory, name)
        origin = StateOrigin(job_id, checkpoint_id)
        try:
            if not fs.remote:
                fs.makedirs(directory)
            with tempfile.TemporaryFile(dir=None if fs.remote else directory, prefix=".spool-") as spool:
                index: state_file.Index = []
                offset = 0
                for kg, data in parts:
                    sealed = _seal(_file_context(origin, name, "part", kg), data)
                    spool.write(sealed)
                    index.append((kg, offset, len(sealed)))
                    offset += len(sealed)
                    del data, sealed  # not held while the next part is read
                head = _seal(_file_context(origin, name, "head"), state_file.encode_head(payload, index))

                def chunks() -> Iterator[bytes]:
                    yield state_file.prefix(head) + head
                    spool.seek(0)
                    while block := spool.read(_COPY_BLOCK):
                        yield block

                size = fs.write_atomic_stream(path, chunks())
        except OSError as e:
            raise CheckpointStorageError(f"cannot write '{path}': {e.strerror or e}") from e
        return path, size

    def read_task_state(self, handle: str, origin: StateOrigin | None = None) -> bytes:
        return _open_state(origin, handle, _read_file(handle))

    @staticmethod
    def read_state_file(handle: str, origin: StateOrigin | None = None) -> bytes:
        # The TaskManager's side of the confinement: a handle must name a state file directly in
        # a completed checkpoint or savepoint directory, never any file the process can read.
        if not is_state_file(handle):
            raise InvalidSavepoint(str(handle)[:300], "a state handle must be a .state file in a completed checkpoint")
        return _open_state(origin, handle, _read_file(handle))

    @staticmethod
    def read_state_file_key_groups(handle: str, key_groups: range, origin: StateOrigin | None = None) -> bytes:
        """As ``read_state_file``, reading only the head and the parts of ``key_groups`` of a
        key-grouped file (``state_file``): the unsealed file of just those parts. A file in the
        older single-blob format is read whole."""
        opened = FileSystemCheckpointStorage.read_state_file_parts(handle, key_groups, origin)
        if isinstance(opened, bytes):
            return opened
        payload, parts = opened
        return state_file.build(payload, list(parts))

    @staticmethod
    def read_state_file_parts(
        handle: str, key_groups: range, origin: StateOrigin | None = None
    ) -> "bytes | tuple[bytes, Iterator[tuple[int, bytes]]]":
        """The head's payload of a key-grouped state file and a generator of the unsealed parts of
        ``key_groups`` ([(key group, bytes)] in index order), read a batch of ranges at a time as it is
        drawn (issue 16: a restore never holds the file). A file in the older single-blob format: its
        unsealed bytes, read whole."""
        if not is_state_file(handle):
            raise InvalidSavepoint(str(handle)[:300], "a state handle must be a .state file in a completed checkpoint")
        fs = storage_fs(handle)
        origin = _need_origin(handle, origin)
        name = fs.basename(handle)
        try:
            (prefix,) = fs.read_ranges(handle, [(0, state_file.PREFIX_BYTES)])
            if not state_file.is_key_grouped(prefix):
                return _open_state(origin, handle, fs.read(handle))
            n = state_file.head_length(prefix)
            (sealed_head,) = fs.read_ranges(handle, [(state_file.PREFIX_BYTES, n)])
            if len(sealed_head) != n:
                raise InvalidSavepoint(handle, "the state file is shorter than its head says")
            payload, index = state_file.decode_head(_open(_file_context(origin, name, "head"), sealed_head, handle, origin))
        except OSError as e:
            raise InvalidSavepoint(handle, f"state file cannot be read: {e.strerror or e}") from e
        except ValueError as e:
            raise InvalidSavepoint(handle, f"state file is corrupt: {e}") from e
        start = state_file.PREFIX_BYTES + n
        wanted = [(kg, start + off, length) for kg, off, length in index if kg in key_groups]

        def parts() -> Iterator[tuple[int, bytes]]:
            for kg, data in _read_parts(fs, handle, wanted, "the state file is shorter than its index says", "state file"):
                yield kg, _open(_file_context(origin, name, "part", kg), data, handle, origin)

        return payload, parts()

    def write_metadata(
        self, job_id: str, checkpoint_id: int, metadata: Mapping[str, Any], location: str | None = None
    ) -> str:
        """Write ``_metadata`` last, which makes the checkpoint complete; returns the checkpoint's directory."""
        directory = location or self.location(job_id, checkpoint_id)
        if metadata.get("job_id", job_id) != job_id or metadata.get("checkpoint_id", checkpoint_id) != checkpoint_id:
            # A reader checks the state files against these two: they must be the ones the files were sealed with.
            raise CheckpointStorageError(f"checkpoint {checkpoint_id} metadata names another job or checkpoint")
        metadata = _relative_handles(metadata, directory)
        try:
            data = json.dumps(metadata, sort_keys=True, indent=1).encode()
        except (TypeError, ValueError) as e:
            raise CheckpointStorageError(f"checkpoint {checkpoint_id} metadata is not JSON-serialisable: {e}") from e
        file = storage_fs(directory).join(directory, METADATA_FILE)
        _atomic_write(file, _seal((METADATA_KIND, ("v2",)), data))
        return directory

    def read_metadata(self, path: str) -> dict[str, Any]:
        """Read ``_metadata`` from a checkpoint/savepoint directory or the file itself. Its
        ``seal_format`` is set here (never taken from the file): 1 for the previous release's sealing,
        whose state files a restore must open that way too (``StateOrigin.legacy``), else 2."""
        if not path:
            raise InvalidSavepoint(str(path), "no path given")
        fs = storage_fs(path)
        try:
            path = path if fs.remote else local_path(path)
            if not fs.exists(path):
                raise InvalidSavepoint(path, "the path does not exist")
            file = fs.join(path, METADATA_FILE) if fs.isdir(path) else path
            if not fs.isfile(file):
                raise InvalidSavepoint(
                    path, f"it has no {METADATA_FILE} file; the checkpoint is incomplete or this is not a checkpoint directory"
                )
            opened, legacy = _open_metadata(path, fs.read(file))
            meta = json.loads(opened.decode())
        except (UnicodeDecodeError, ValueError) as e:
            raise InvalidSavepoint(path, f"{METADATA_FILE} is corrupt: {e}") from e
        except OSError as e:
            raise InvalidSavepoint(path, f"{METADATA_FILE} cannot be read: {e.strerror or e}") from e
        if not isinstance(meta, dict) or "operators" not in meta or "checkpoint_id" not in meta:
            raise InvalidSavepoint(path, f"{METADATA_FILE} is not Millstream checkpoint metadata")
        meta["seal_format"] = 1 if legacy else 2
        _resolve_handles(meta, fs.dirname(fs.absolute(file)), path)
        missing = [
            s["handle"]
            for o in meta["operators"]
            for s in o.get("subtasks", ())
            if isinstance(s.get("handle"), str) and not fs.isfile(s["handle"])
        ]
        if missing:
            raise InvalidSavepoint(path, f"{len(missing)} state file(s) are missing, e.g. '{missing[0]}'")
        return meta

    def discard(self, path: str) -> None:
        """Delete one checkpoint or savepoint directory; a missing one is already discarded."""
        if not path:
            return
        fs = storage_fs(path)
        if not _DISCARDABLE.match(fs.basename(path)):
            raise CheckpointStorageError(f"refusing to discard '{path}': not a chk-<n> or savepoint-* directory")
        fs.rmtree(path)


# -- shared files of incremental checkpoints ----------------------------------------------
# A shared file is a concatenation of parts, one per key group, each sealed on its own (bound to the
# file's name and the key group), so a restore reads and checks only the key groups it owns: the
# offsets and lengths travel in the state handle that refers to the file.


def write_shared_file(
    shared_dir: str,
    name: str,
    parts: list[tuple[int, bytes]],
    job_id: str,
    footer: tuple[int, Callable[[list[tuple[int, int, int]]], bytes]] | None = None,
    upload: Callable[[Callable[[], None]], None] | None = None,
) -> tuple[int, list[tuple[int, int, int]]]:
    """Write ``parts`` ([(key group, payload)]) as shared file ``name`` of job ``job_id`` (whose
    shared directory it is); returns (bytes written, [(key group, offset, length)]). ``footer``:
    (key group, encode): the file ends with ``encode(index)`` of the parts before it, sealed as a part
    of that key group, whose entry ends the index returned (the file carries its own index).
    ``upload`` (at a URL; ``state_uploader.Uploads.submit``): the upload is handed to it once the file
    is spooled, and its failure raises where that is waited for."""
    if not is_shared_name(name):
        raise CheckpointStorageError(f"not a shared state file name: {name!r}")
    index: list[tuple[int, int, int]] = []

    def chunks() -> Iterator[bytes]:
        offset = 0
        for kg, payload in parts:
            sealed = _seal(_shared_context(job_id, name, kg), payload)
            index.append((kg, offset, len(sealed)))
            offset += len(sealed)
            yield sealed
        if footer is not None:
            kg, encode = footer
            sealed = _seal(_shared_context(job_id, name, kg), encode(list(index)))
            index.append((kg, offset, len(sealed)))
            yield sealed

    path = storage_fs(shared_dir).join(shared_dir, name)

    def handed(send: Callable[[], None]) -> None:
        def checked() -> None:  # a failed upload says which file, as a failed write does
            try:
                send()
            except OSError as e:
                raise CheckpointStorageError(f"cannot write '{path}': {e.strerror or e}") from e

        upload(checked)  # type: ignore[misc]

    try:
        size = storage_fs(path).write_atomic_stream(path, chunks(), None if upload is None else handed)
    except CheckpointStorageError:
        raise  # an upload run here (one transfer thread), already said
    except OSError as e:
        raise CheckpointStorageError(f"cannot write '{path}': {e.strerror or e}") from e
    return size, index


def shared_dir_of(handle: str) -> str:
    """The shared directory of the checkpoint that holds state file ``handle`` (checked by the caller)."""
    fs = storage_fs(handle)
    return shared_dir_of_checkpoint(fs.dirname(fs.resolve(handle)))


def shared_dir_of_checkpoint(location: str) -> str:
    """The shared directory next to checkpoint directory ``location`` (``<dir>/<job>/chk-<n>``): a
    local path or a URL, as the checkpoint's."""
    fs = storage_fs(location)
    return fs.join(fs.dirname(fs.resolve(location)), SHARED_DIR)


def read_shared_parts(
    handle: str, name: str, ranges: list[tuple[int, int, int]], origin: StateOrigin | None = None
) -> list[tuple[int, bytes]]:
    """The parts ``ranges`` ([(key group, offset, length)]) of shared file ``name`` that the checkpoint
    of state file ``handle`` (of ``origin``) refers to, each checked before it is returned. Only a
    plain name inside that job's shared directory is read, for a handle in a completed checkpoint."""
    return list(iter_shared_parts(handle, name, ranges, origin))


def iter_shared_parts(
    handle: str, name: str, ranges: list[tuple[int, int, int]], origin: StateOrigin | None = None
) -> Iterator[tuple[int, bytes]]:
    """As ``read_shared_parts``, a generator reading a batch of ranges at a time as it is drawn
    (issue 16: a restore replays a chain without holding its files). The handle and name are
    checked at once, before the first part is asked for."""
    if not is_state_file(handle):
        raise InvalidSavepoint(str(handle)[:300], "a state handle must be a .state file in a completed checkpoint")
    if not is_shared_name(name):
        raise InvalidSavepoint(str(handle)[:300], f"it refers to a shared state file with an invalid name: {str(name)[:100]!r}")
    origin = _need_origin(handle, origin)
    fs = storage_fs(handle)
    path = fs.join(shared_dir_of(handle), name)

    def parts() -> Iterator[tuple[int, bytes]]:
        for kg, data in _read_parts(fs, path, ranges, "the shared state file is shorter than its handle says", "shared state file"):
            yield kg, _open(_shared_context(origin.job_id, name, kg, origin.legacy), data, path, origin)

    return parts()


def _read_parts(fs: Any, path: str, ranges: list[tuple[int, int, int]], short: str, what: str) -> Iterator[tuple[int, bytes]]:
    """(key group, sealed bytes) of ``ranges`` ([(key group, offset, length)]) of file ``path``, read
    ``_READ_BLOCK`` bytes of ranges at a time (a bigger part alone), adjacent ranges in one read;
    ``short`` and ``what`` word the errors."""
    i = 0
    while i < len(ranges):
        batch, size = [ranges[i]], ranges[i][2]
        i += 1
        while i < len(ranges) and size + ranges[i][2] <= _READ_BLOCK:
            batch.append(ranges[i])
            size += ranges[i][2]
            i += 1
        spans: list[tuple[int, int]] = []  # runs of adjacent ranges (a rescale's share of a file), one read each
        for _, offset, length in batch:
            if spans and spans[-1][0] + spans[-1][1] == offset:
                spans[-1] = (spans[-1][0], spans[-1][1] + length)
            else:
                spans.append((offset, length))
        try:
            chunks = fs.read_ranges(path, spans)
        except OSError as e:
            raise InvalidSavepoint(path, f"{what} cannot be read: {e.strerror or e}") from e
        for (_, length), chunk in zip(spans, chunks):
            if len(chunk) != length:
                raise InvalidSavepoint(path, short)
        j = 0
        for kg, offset, length in batch:
            while j + 1 < len(spans) and offset >= spans[j][0] + spans[j][1]:
                j += 1
            chunk, lo = chunks[j], offset - spans[j][0]
            yield kg, chunk if lo == 0 and length == len(chunk) else chunk[lo : lo + length]
        del chunks, batch


def read_shared_file(shared_dir: str, name: str, ranges: list[tuple[int, int, int]], job_id: str) -> list[tuple[int, bytes]]:
    """The parts ``ranges`` of shared file ``name`` in ``shared_dir`` (job ``job_id``'s), each checked:
    for a task compacting its own chain (the directory is its job's, from its checkpoint barrier, not a handle)."""
    if not is_shared_name(name):
        raise CheckpointStorageError(f"not a shared state file name: {str(name)[:100]!r}")
    fs = storage_fs(shared_dir)
    path = fs.join(shared_dir, name)
    chunks = fs.read_ranges(path, [(offset, length) for _, offset, length in ranges])
    out = []
    for (kg, _, length), data in zip(ranges, chunks):
        if len(data) != length:
            raise CheckpointStorageError(f"shared state file '{name}' is shorter than its index says")
        out.append((kg, _open(_shared_context(job_id, name, kg), data, path)))
    return out


def discard_shared(shared_dir: str, names: list[str] | tuple[str, ...]) -> None:
    """Delete shared files no retained checkpoint refers to; a missing one is already gone."""
    fs = storage_fs(shared_dir)
    for name in names:
        if not is_shared_name(name):
            raise CheckpointStorageError(f"refusing to delete {name!r}: not a shared state file name")
        fs.remove(fs.join(shared_dir, name))


def sweep_shared(shared_dir: str, in_use: Any) -> list[str]:
    """Delete every shared file (and leftover temporary file of one, from a writer that was killed)
    for which ``in_use(name)`` is false; returns the names deleted. Only for a moment when no
    checkpoint is in flight: then no file outside the retained checkpoints can ever be referenced."""
    fs = storage_fs(shared_dir)
    try:
        entries = fs.listdir(shared_dir)
    except FileNotFoundError:
        return []
    gone = []
    for entry in entries:
        name = entry
        m = _TMP.match(entry)
        if m:
            name = m.group(1)
        elif not is_shared_name(entry):
            continue
        if not is_shared_name(name) or (entry == name and in_use(name)):
            continue
        fs.remove(fs.join(shared_dir, entry))
        gone.append(entry)
    return gone


def _read_file(handle: str) -> bytes:
    try:
        return storage_fs(handle).read(handle)
    except OSError as e:
        raise InvalidSavepoint(handle, f"state file cannot be read: {e.strerror or e}") from e


def is_state_file(handle: str) -> bool:
    if not isinstance(handle, str) or not handle.endswith(".state"):
        return False
    fs = storage_fs(handle)
    try:
        directory = fs.dirname(fs.resolve(handle))
    except ValueError:  # a remote path that climbs with ..
        return False
    return bool(_DISCARDABLE.match(fs.basename(directory))) and fs.isfile(fs.join(directory, METADATA_FILE))


def _relative_handles(metadata: Mapping[str, Any], directory: str) -> Mapping[str, Any]:
    """State handles are stored relative to the directory holding ``_metadata`` (issue 14): a moved
    savepoint still restores, and a reader never has to trust an absolute path from the file."""
    fs = storage_fs(directory)
    base = fs.absolute(directory)
    operators = []
    for o in metadata.get("operators", ()):
        subtasks = []
        for st in o.get("subtasks", ()):
            h = st.get("handle")
            if isinstance(h, str) and storage_fs(h) is fs and _is_absolute(h) and fs.dirname(fs.absolute(h)) == base:
                st = {**st, "handle": fs.basename(h)}
            subtasks.append(st)
        operators.append({**o, "subtasks": subtasks} if "subtasks" in o else o)
    return {**metadata, "operators": operators} if "operators" in metadata else metadata


def _resolve_handles(meta: dict[str, Any], directory: str, path: str) -> None:
    """Make every state handle absolute inside ``directory``, refusing one that resolves elsewhere
    (an absolute path, ``..`` or a symlink out), so crafted metadata cannot make a TaskManager read
    (and unpickle) another file."""
    fs = storage_fs(directory)
    root = fs.resolve(directory)
    for o in meta.get("operators", ()):
        for st in o.get("subtasks", ()) if isinstance(o, dict) else ():
            h = st.get("handle") if isinstance(st, dict) else None
            if not isinstance(h, str):
                continue
            if fs.remote and (is_remote(h) or h.startswith("/")):
                raise InvalidSavepoint(path, "a state handle in its _metadata points outside the checkpoint directory")
            try:
                resolved = fs.resolve(fs.join(root, h))
            except ValueError:
                resolved = ""
            if fs.dirname(resolved) != root:
                raise InvalidSavepoint(path, "a state handle in its _metadata points outside the checkpoint directory")
            st["handle"] = resolved


def _is_absolute(path: str) -> bool:
    return is_remote(path) or os.path.isabs(path)


def _atomic_write(path: str, data: bytes) -> None:
    try:
        storage_fs(path).write_atomic(path, data)
    except OSError as e:
        raise CheckpointStorageError(f"cannot write '{path}': {e.strerror or e}") from e
