"""RemoteContext: ``execute()`` submits the JobGraph to a JobManager over REST.

User code travels as a cloudpickled StreamGraph. Modules that live next to
the program are pickled by value, so helper files need not be installed on
TaskManagers. Results of ``execute_and_collect`` are polled from
``/jobs/{id}/results``; each poll acknowledges what the previous ones returned.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import time
from typing import TYPE_CHECKING, Any, Iterator

import cloudpickle
import httpx
import msgpack

from engine.checkpoint.filesystem import storage_fs
from engine.client import job_output
from engine.client.collect_result_buffer import CollectResultBuffer
from engine.client.failover import failover_client
from engine.client.job_client import CloseableIterator
from engine.common.job_execution_result import JobExecutionException, JobExecutionResult
from engine.runtime.collect import CollectEntry
from engine.runtime.user_code_class_loader import register_pickled_classes
from engine.runtime.io.serialization import MsgpackSerializer
from engine.runtime.python_dependencies import user_code_of

if TYPE_CHECKING:
    from engine.datastream.stream_execution_environment import StreamExecutionEnvironment
    from engine.graph.job_graph import JobGraph
    from engine.graph.stream_graph import StreamGraph

TERMINAL = {"FINISHED", "FAILED", "CANCELED"}


class SubmissionFailed(RuntimeError):
    pass


def _errors(resp: httpx.Response) -> str:
    try:
        return "; ".join(resp.json().get("errors", [])) or resp.text
    except ValueError:
        return resp.text


def register_program_modules(program_dir: str) -> None:
    """Pickle modules that live under the program's directory by value."""
    base = os.path.abspath(program_dir)
    for name, mod in list(sys.modules.items()):
        path = getattr(mod, "__file__", None)
        if not path or name == "__main__" or "site-packages" in path:
            continue
        if os.path.abspath(path).startswith(base + os.sep):
            try:
                cloudpickle.register_pickle_by_value(mod)
            except ValueError:
                pass


JOBMANAGER_OUTAGE_S = 90.0  # how long a client waits for a restarted JobManager before giving up


class RestJobClient:
    def __init__(
        self, http: httpx.Client, job_id: str, detached: bool = False, cancelled: set[str] | None = None
    ) -> None:
        self.http = http
        self.job_id = job_id
        self.detached = detached
        # Jobs the program cancelled itself (closing a collect iterator early, limit=): they ended as
        # asked, so ``millstream run`` does not count them as failed.
        self.cancelled = cancelled if cancelled is not None else set()

    def _get(self, path: str, **kwargs: Any) -> httpx.Response:
        """GET that survives a JobManager restart (connection errors) and a Redis outage (503s): both
        are retried for a while, the latter after one line on stderr instead of a traceback."""
        deadline = time.monotonic() + JOBMANAGER_OUTAGE_S
        told = False
        while True:
            try:
                r = self.http.get(path, **kwargs)
                if r.status_code != 503 or time.monotonic() > deadline:
                    return r
                if not told:
                    told = True
                    print(f"millstream: the cluster is unavailable ({_errors(r)}); waiting for it", file=sys.stderr)
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
            time.sleep(0.5)

    def get_job_id(self) -> str:
        return self.job_id

    def get_job_status(self) -> str:
        r = self._get(f"/jobs/{self.job_id}")
        r.raise_for_status()
        return r.json()["state"]

    def cancel(self) -> None:
        self.cancelled.add(self.job_id)
        self.http.patch(f"/jobs/{self.job_id}", params={"mode": "cancel"})

    def wait(self, poll_s: float = 0.3) -> dict[str, Any]:
        while True:
            r = self._get(f"/jobs/{self.job_id}")
            r.raise_for_status()
            job = r.json()
            if job["state"] in TERMINAL:
                return job
            time.sleep(poll_s)

    def failure_cause(self) -> str | None:
        r = self._get(f"/jobs/{self.job_id}/exceptions", params={"maxExceptions": 1})
        if r.status_code != 200:
            return None
        entries = r.json().get("exceptionHistory", {}).get("entries", [])
        if entries:
            return entries[0].get("stacktrace")
        return r.json().get("root-exception")

    def get_job_execution_result(self) -> JobExecutionResult:
        if self.detached:
            return JobExecutionResult(self.job_id, 0)
        job = self.wait()
        job_output.finish(self.job_id)  # the job's print() output, complete, before execute() returns
        if job["state"] != "FINISHED":
            raise JobExecutionException(self.job_id, job["state"], self.failure_cause())
        return JobExecutionResult(self.job_id, int(job.get("duration", 0)))

    def collect(self, node_id: int, limit: int | None) -> CloseableIterator:
        if self.detached:
            raise RuntimeError("execute_and_collect() needs an attached client; run without --detached")
        serializer = MsgpackSerializer()
        buffer = CollectResultBuffer()

        def gen() -> Iterator[Any]:
            offset = 0  # entries read: asking from here acknowledges them, so Redis drops them
            while True:
                r = self._get(f"/jobs/{self.job_id}/results", params={"offset": offset})
                if r.status_code == 400:  # e.g. an entry the cluster did not write (refused, never decoded)
                    why = r.text
                    with contextlib.suppress(ValueError, KeyError, TypeError):
                        why = "; ".join(r.json()["errors"])
                    raise RuntimeError(f"cannot read the results of job {self.job_id}: {why}")
                r.raise_for_status()
                body = msgpack.unpackb(r.content, raw=False)
                entries = body["batches"]
                offset += len(entries)
                yield from buffer.add(CollectEntry.decode(raw, serializer) for raw in entries)
                if body["ended"] and not entries:
                    if body["state"] != "FINISHED":
                        raise JobExecutionException(self.job_id, body["state"], self.failure_cause())
                    yield from buffer.finish()
                    return
                if not entries:
                    time.sleep(0.1)

        def close() -> None:
            if self.get_job_status() not in TERMINAL:
                self.cancel()

        return CloseableIterator(gen(), on_close=close, limit=limit)


# A program that logs at INFO (PyFlink's examples call logging.basicConfig(level=INFO)) would print a
# line per REST call of this client; PyFlink's client prints none, so neither do we.
for _noisy in ("httpx", "httpcore"):
    logging.getLogger(_noisy).setLevel(logging.WARNING)


class RemoteContext:
    def __init__(
        self,
        jobmanager_url: str,
        parallelism: int | None = None,
        detached: bool = False,
        token: str | None = None,
        program_dir: str | None = None,
        batch_engine: str | None = None,
        savepoint_path: str | None = None,
        allow_non_restored_state: bool = False,
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        # Several comma-separated addresses (JobManager HA): the next is tried when one is unreachable.
        self.http = failover_client(jobmanager_url, headers=headers, timeout=60)
        self.parallelism = parallelism
        self.detached = detached
        self.program_dir = program_dir
        self.batch_engine = batch_engine
        self.savepoint_path = savepoint_path
        self.allow_non_restored_state = allow_non_restored_state
        self.submitted: list[str] = []
        self.cancelled: set[str] = set()  # submitted jobs the program cancelled itself

    def configure(self, env: "StreamExecutionEnvironment") -> None:
        if self.parallelism:
            env.set_parallelism(self.parallelism)
        if self.batch_engine:
            env._config.set_string("execution.batch-engine", self.batch_engine)
        if self.savepoint_path:
            # Flink's CLI -s/--fromSavepoint sets the same options; the JobManager validates the path.
            path = self.savepoint_path  # a local path made absolute, a URL (s3://...) as given
            env._config.set_string("execution.savepoint.path", storage_fs(path).absolute(path))
            if self.allow_non_restored_state:
                env._config.set_string("execution.savepoint.ignore-unclaimed-state", "true")

    def _post_job(self, job_graph: "JobGraph", code: bytes) -> str:
        """``POST /jobs``, retried while the JobManager restarts (no connection) or Redis is away
        (503) for up to JOBMANAGER_OUTAGE_S. The job id is chosen here, so a retry is safe: if an
        earlier try got through and only its answer was lost, the JobManager answers 409 for the id
        it already has, and that is the job."""
        deadline = time.monotonic() + JOBMANAGER_OUTAGE_S
        tries = 0
        told = False
        while True:
            tries += 1
            try:
                r = self.http.post(
                    "/jobs",
                    data={"jobgraph": json.dumps(job_graph.to_dict())},
                    files={"usercode": ("usercode.bin", code, "application/octet-stream")},
                )
            except httpx.TransportError as e:
                if time.monotonic() > deadline:
                    raise SubmissionFailed(f"the JobManager did not answer: {e}") from e
                if not told:
                    told = True
                    print(f"millstream: the JobManager is unreachable ({e}); retrying the submission", file=sys.stderr)
                time.sleep(0.5)
                continue
            if r.status_code == 409 and tries > 1:
                return job_graph.job_id
            if r.status_code == 503 and time.monotonic() <= deadline:
                if not told:
                    told = True
                    print(f"millstream: the cluster is unavailable ({_errors(r)}); retrying the submission", file=sys.stderr)
                time.sleep(0.5)
                continue
            if r.status_code >= 400:
                raise SubmissionFailed(f"the JobManager refused the job ({r.status_code}): {_errors(r)}")
            return r.json()["jobid"]

    def submit(self, job_graph: "JobGraph", stream_graph: "StreamGraph") -> RestJobClient:
        if self.program_dir:
            register_program_modules(self.program_dir)
        code = user_code_of(stream_graph)
        register_pickled_classes()  # collected records of the program's own classes come back as them
        job_id = self._post_job(job_graph, code)
        self.submitted.append(job_id)
        if not self.detached:
            job_output.follow(self.http, job_id)  # its print() lines appear here as they come
        return RestJobClient(self.http, job_id, self.detached, self.cancelled)
