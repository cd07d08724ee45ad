"""Disposing of a savepoint, as Flink's ``POST /savepoint-disposal``: the JobManager deletes a savepoint
directory, after checking it lies under the cluster's state roots, is named as savepoints are
(``savepoint-...``) and holds a ``_metadata`` this cluster wrote (sealed with its secret). Anything else
is refused, so the call cannot delete arbitrary directories.

The REST call is asynchronous in Flink's shape (a request id, then its status); deleting a directory is
quick, so the work is done at once and ``DisposalResults`` only keeps the outcome for the status poll.
"""
from __future__ import annotations

import threading
import uuid
from collections import OrderedDict

from millstream.engine.checkpoint.filesystem import storage_fs
from millstream.engine.checkpoint.storage import CheckpointStorageError, FileSystemCheckpointStorage, InvalidSavepoint
from millstream.engine.jobmanager.savepoints import OperationRejected, StateRoots

#: outcomes kept for polling; older ones are forgotten (their status answers 404)
MAX_RESULTS = 1000


def dispose_savepoint(path: str, roots: StateRoots | None) -> None:
    """Delete the savepoint at ``path``; raises :class:`OperationRejected` saying why it will not."""
    if not path or not isinstance(path, str):
        raise OperationRejected("savepoint-path is required")
    if roots is not None:
        roots.confine(path, "savepoint-path")  # before anything touches the path
    fs = storage_fs(path)  # a local path or a URL (engine/checkpoint/filesystem.py)
    try:
        resolved = fs.resolve(path)
    except ValueError as e:
        raise OperationRejected(f"'{path[:300]}' is not a savepoint directory: {e}") from e
    if not fs.basename(resolved).startswith("savepoint-"):
        raise OperationRejected(f"'{path[:300]}' is not a savepoint directory (savepoint-...); only savepoints are disposed")
    storage = FileSystemCheckpointStorage(fs.dirname(resolved))
    try:
        storage.read_metadata(resolved)  # exists, and its _metadata opens with this cluster's secret
    except InvalidSavepoint as e:
        raise OperationRejected(f"cannot dispose of '{path[:300]}': {e.reason}") from e
    try:
        storage.discard(resolved)
    except (CheckpointStorageError, OSError) as e:
        raise OperationRejected(f"cannot dispose of '{path[:300]}': {e}") from e


class DisposalResults:
    """The outcome of each disposal request, by request id: None for done, else the failure's message."""

    def __init__(self) -> None:
        self._results: OrderedDict[str, str | None] = OrderedDict()
        self._lock = threading.Lock()

    def run(self, path: str, roots: StateRoots | None) -> str:
        request_id = uuid.uuid4().hex
        try:
            dispose_savepoint(path, roots)
            outcome = None
        except OperationRejected as e:
            outcome = str(e)
        with self._lock:
            self._results[request_id] = outcome
            while len(self._results) > MAX_RESULTS:
                self._results.popitem(last=False)
        return request_id

    def get(self, request_id: str) -> tuple[bool, str | None]:
        """(known, failure message or None)."""
        with self._lock:
            if request_id not in self._results:
                return False, None
            return True, self._results[request_id]
