"""Savepoints, stop-with-savepoint and manual checkpoints as Dispatcher services.

The REST routes and the dashboard call these, so they stay thin. Each request has
an id (the client's ``triggerId`` or a generated one); a savepoint request is a
row in the JobStore from the moment it starts, so a retried id never takes a
second savepoint, also across a JobManager restart, and its status can be polled
after the job ended.

Every directory a request or a job's config can name (savepoint targets, the
savepoint to start from, the job's own checkpoint and savepoint directories) must
lie under the cluster's :class:`StateRoots`; any other path is refused before it
is touched, with an answer that does not say whether it exists.
"""
from __future__ import annotations

import os
import re
import threading
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from millstream.engine.checkpoint.config import CheckpointConfig
from millstream.engine.checkpoint.coordinator import CheckpointTriggerError
from millstream.engine.checkpoint.filesystem import is_remote, storage_fs
from millstream.engine.checkpoint.storage import CheckpointStorageError
from millstream.engine.jobmanager.job_master import JobMaster, JobNotRunning
from millstream.engine.jobmanager.job_store import JobStore, SavepointRecord

if TYPE_CHECKING:
    from millstream.engine.spark.spark_job_master import SparkJobMaster

_TRIGGER_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


class OperationRejected(ValueError):
    """A savepoint, stop or checkpoint request that cannot start; ``status`` is the HTTP answer
    (409 when the job is not in a state to take it, 400 for a bad request)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


# Job options naming directories the JobManager writes or reads (Flink's names).
_JOB_PATH_OPTIONS = (
    "execution.savepoint.path", "state.savepoints.dir", "state.checkpoints.dir", "execution.checkpointing.savepoint-dir"
)


@dataclass(frozen=True)
class StateRoots:
    """The directories state may be written to or restored from: the cluster's savepoint and
    checkpoint directories and the operator's allowlist. Paths are compared after resolving
    symlinks and ``..``, so neither leads out."""

    roots: tuple[str, ...]

    @classmethod
    def of(cls, *directories: str | os.PathLike[str] | None) -> "StateRoots":
        return cls(tuple(storage_fs(os.fspath(d)).resolve(os.fspath(d)) for d in directories if d))

    def contains(self, path: str) -> bool:
        path = str(path)
        try:
            resolved = storage_fs(path).resolve(path)
        except ValueError:  # a NUL or a lone surrogate, or a URL that climbs with ..: never under a root (issue 14)
            return False
        if is_remote(resolved):
            # The same store, and the root's path a whole-segment prefix of the path's.
            return any(is_remote(root) and (resolved == root or resolved.startswith(root.rstrip("/") + "/")) for root in self.roots)
        return any(not is_remote(root) and os.path.commonpath([root, resolved]) == root for root in self.roots)

    def confine(self, path: str, what: str) -> None:
        if not self.contains(path):
            # The same answer whether or not the path exists, so the API is no file-system probe.
            raise OperationRejected(
                f"{what} '{str(path)[:300]}' is not under a state directory of this cluster (the savepoint or "
                "checkpoint directory, or MILLSTREAM_STATE_DIRS)"
            )


class SavepointOperations:
    """Mixed into the Dispatcher, whose ``jobs``, ``store`` and ``lock`` it uses."""

    jobs: "dict[str, JobMaster | SparkJobMaster]"
    store: JobStore
    lock: threading.RLock
    state_roots: StateRoots | None = None  # set by the REST server; None (embedded use): no confinement

    def confine_job_paths(self, config: dict[str, Any], savepoint_path: str | None = None) -> None:
        """Refuse a submission whose savepoint to start from, or whose own checkpoint or savepoint
        directory, lies outside the state roots."""
        if self.state_roots is None:
            return
        if savepoint_path:
            self.state_roots.confine(savepoint_path, "savepointPath")
        for option in _JOB_PATH_OPTIONS:
            if config.get(option):
                self.state_roots.confine(str(config[option]), option)
        storage_dir = CheckpointConfig.from_job_config(config).storage_dir  # set_checkpoint_storage_dir
        if storage_dir:
            self.state_roots.confine(storage_dir, "state.checkpoints.dir")

    def _live_job(self, job_id: str, what: str) -> JobMaster:
        jm = self.jobs.get(job_id)
        if jm is None:
            record = self.store.get_job(job_id)
            if record is None:
                raise _unknown(job_id)
            raise OperationRejected(f"cannot take a {what} of job {job_id}: it is {record.state}", 409)
        if not isinstance(jm, JobMaster):
            raise OperationRejected(f"job {job_id} runs on Spark, which takes no {what}s", 409)
        return jm

    @staticmethod
    def _request_id(trigger_id: str | None) -> str:
        if trigger_id is None or trigger_id == "":
            return uuid.uuid4().hex
        if not _TRIGGER_ID.match(trigger_id):
            raise OperationRejected(f"triggerId '{trigger_id[:80]}' must be 1-64 letters, digits, '.', '_' or '-'")
        return trigger_id

    def trigger_savepoint(
        self,
        job_id: str,
        target_directory: str | None = None,
        *,
        cancel_job: bool = False,
        trigger_id: str | None = None,
        stop: bool = False,
        drain: bool = False,
    ) -> str:
        """Start a savepoint (``stop``: stop-with-savepoint) and return its request id, to poll with
        ``savepoint_status``. A ``trigger_id`` seen before for this job returns the same request and
        takes no second savepoint, also after a JobManager restart."""
        request_id = self._request_id(trigger_id)
        what = "stop-with-savepoint" if stop else "savepoint"
        with self.lock:
            if self.store.get_savepoint(job_id, request_id) is not None:
                return request_id
            jm = self._live_job(job_id, what)
            chosen = target_directory or jm.checkpointing.savepoint_dir
            if self.state_roots is not None and chosen:
                self.state_roots.confine(chosen, "target directory")
            try:
                jm.trigger_savepoint(request_id, target_directory, stop=stop, drain=drain, cancel_job=cancel_job)
            except JobNotRunning as e:
                raise OperationRejected(str(e), 409) from e
            except (CheckpointTriggerError, CheckpointStorageError) as e:
                raise OperationRejected(str(e)) from e
        return request_id

    def stop_with_savepoint(
        self, job_id: str, target_directory: str | None = None, *, drain: bool = False, trigger_id: str | None = None
    ) -> str:
        """A final savepoint, after which the job ends FINISHED; if it fails the job keeps running."""
        return self.trigger_savepoint(job_id, target_directory, trigger_id=trigger_id, stop=True, drain=drain)

    def savepoint_status(self, job_id: str, request_id: str) -> SavepointRecord | None:
        """The savepoint a request started (None: no such request for this job)."""
        if job_id not in self.jobs and self.store.get_job(job_id) is None:
            raise _unknown(job_id)
        return self.store.get_savepoint(job_id, request_id)

    def savepoints(self, job_id: str) -> list[SavepointRecord]:
        """Every savepoint of the job, newest first, with path, times, status and trigger id."""
        if job_id not in self.jobs and self.store.get_job(job_id) is None:
            raise _unknown(job_id)
        return self.store.list_savepoints(job_id)

    def trigger_checkpoint(self, job_id: str, trigger_id: str | None = None) -> str:
        """A checkpoint by hand; returns the request id to poll with ``checkpoint_status``."""
        request_id = self._request_id(trigger_id)
        with self.lock:
            jm = self._live_job(job_id, "checkpoint")
            try:
                jm.trigger_checkpoint(request_id)
            except JobNotRunning as e:
                raise OperationRejected(str(e), 409) from e
        return request_id

    def checkpoint_status(self, job_id: str, request_id: str) -> dict[str, Any] | None:
        """Flink's ``{status, operation}`` for a manual checkpoint this JobManager triggered."""
        with self.lock:
            jm = self.jobs.get(job_id)
            if jm is None and self.store.get_job(job_id) is None:
                raise _unknown(job_id)
            if jm is None:  # ended and archived: the statistics in SQL know the request too
                archived = self.checkpointing(job_id)  # type: ignore[attr-defined]
                return archived.request_status(request_id) if archived is not None else None
            return jm.checkpointing.request_status(request_id) if isinstance(jm, JobMaster) else None


def _unknown(job_id: str) -> KeyError:
    from millstream.engine.jobmanager.dispatcher import UnknownJob  # the Dispatcher module defines it and imports this one

    return UnknownJob(job_id)
