"""RemoteContext: ``execute()`` submits the JobGraph to a JobManager over REST.

User code travels as a cloudpickled StreamGraph. Modules that live next to
the program are pickled by value, so helper files need not be installed on
TaskManagers. Results of ``execute_and_collect`` are polled from
``/jobs/{id}/results``; each poll acknowledges the entries the previous ones returned, and says
which records the client holds, so the collect sink may forget them.

On submission the client says so on stderr, as Flink's does ("Job has been submitted with JobID ...")
with the job's dashboard URL; an attached client then watches the job (engine/client/job_progress.py)
and gives it up, cancelled, when it waits for slots longer than the slot request timeout.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import time
from typing import TYPE_CHECKING, Any, Callable, Iterator

import cloudpickle
import httpx
import msgpack

from millstream.engine.checkpoint.filesystem import storage_fs
from millstream.engine.client import job_output
from millstream.engine.client.collect_result_buffer import CollectResultBuffer, ResultsMissing
from millstream.engine.client.context import apply_parallelism
from millstream.engine.client.failover import failover_client
from millstream.engine.client.job_progress import JobWatcher
from millstream.engine.client.job_client import CloseableIterator
from millstream.engine.common.job_execution_result import JobExecutionException, JobExecutionResult
from millstream.engine.runtime.collect import CollectEntry
from millstream.engine.runtime.user_code_class_loader import register_pickled_classes
from millstream.engine.runtime.io.serialization import MsgpackSerializer
from millstream.engine.runtime.python_dependencies import user_code_of

if TYPE_CHECKING:
    from millstream.engine.client.python_options import PythonDependencyOptions
    from millstream.engine.datastream.stream_execution_environment import StreamExecutionEnvironment
    from millstream.engine.graph.job_graph import JobGraph
    from millstream.engine.graph.stream_graph import StreamGraph

TERMINAL = {"FINISHED", "FAILED", "CANCELED"}


#: Flink's slot.request.timeout: how long an attached client lets its job wait for slots
DEFAULT_SLOT_TIMEOUT_S = 300.0


class SubmissionFailed(RuntimeError):
    pass


class JobManagerUnreachable(RuntimeError):
    """No Millstream JobManager answers at the client's address(es); the message says what happened."""


class NoResourceAvailable(JobExecutionException):
    """The job waited for slots longer than the slot request timeout: the client cancelled it, or
    (``cluster_cause``) the JobManager failed it with NoResourceAvailableException."""

    def __init__(self, job_id: str, waiting: str, timeout_s: float | None, cluster_cause: str | None = None) -> None:
        super().__init__(job_id, "FAILED" if cluster_cause else "CANCELED", cluster_cause)
        self.waiting = waiting
        self.timeout_s = timeout_s
        if cluster_cause:
            self.args = (
                f"Job {job_id} failed: {cluster_cause.strip()}. Start more TaskManagers, lower the parallelism, "
                "or raise the cluster's slot request timeout (MILLSTREAM_SLOT_REQUEST_TIMEOUT_S) or the job's "
                "slot.request.timeout.",
            )
        else:
            self.args = (
                f"Job {job_id} got no slots within the slot request timeout of {timeout_s:g} s ({waiting}); it "
                "was cancelled. Start more TaskManagers, lower the parallelism, or raise --slot-timeout.",
            )


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


def wait_out_outage(
    send: Callable[[], httpx.Response],
    outage_s: float,
    doing: str,
    gave_up: Callable[[httpx.TransportError], Exception] | None = None,
) -> httpx.Response:
    """Call ``send`` until it gets an answer other than 503, for up to ``outage_s``: a JobManager that
    restarts cannot be reached for a while, and one whose Redis is away answers 503. The user gets one
    line on stderr saying what the client is ``doing`` meanwhile, never a traceback. Past the deadline a
    503 is returned as it is and a connection error is raised, turned into ``gave_up``'s exception
    when given."""
    deadline = time.monotonic() + outage_s
    told = False
    while True:
        try:
            r = send()
        except httpx.TransportError as e:
            if time.monotonic() > deadline:
                if gave_up is None:
                    raise
                raise gave_up(e) from None
            why = f"the JobManager is unreachable ({e or type(e).__name__})"
        else:
            if r.status_code != 503 or time.monotonic() > deadline:
                return r
            why = f"the cluster is unavailable ({_errors(r)})"
        if not told:
            told = True
            print(f"millstream: {why}; {doing}", file=sys.stderr, flush=True)
        time.sleep(0.5)


class RestJobClient:
    def __init__(
        self,
        http: httpx.Client,
        job_id: str,
        detached: bool = False,
        cancelled: set[str] | None = None,
        watcher: JobWatcher | None = None,
        outage_s: float = JOBMANAGER_OUTAGE_S,
    ) -> None:
        self.http = http
        self.outage_s = outage_s
        self.job_id = job_id
        self.detached = detached
        self.watcher = watcher
        # Jobs the program cancelled itself (closing a collect iterator early, limit=): they ended as
        # asked, so ``millstream run`` does not count them as failed.
        self.cancelled = cancelled if cancelled is not None else set()

    def _get(self, path: str, **kwargs: Any) -> httpx.Response:
        """GET that survives a JobManager restart (connection errors) and a Redis outage (503s): both
        are retried for a while, after one line on stderr instead of a traceback."""
        return wait_out_outage(lambda: self.http.get(path, **kwargs), self.outage_s, "waiting for it")

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
                if self.watcher is not None:
                    self.watcher.stop()  # its last look says how a job it saw waiting went
                    self.watcher.join(5)
                return job
            time.sleep(poll_s)

    def _ended(self, state: str) -> JobExecutionException:
        """What ``execute()`` raises for a job that ended ``state`` (not FINISHED)."""
        watcher = self.watcher
        if watcher is not None and state == "CANCELED":
            watcher.done.wait(5)  # it may be between its cancel and its record of why
            if watcher.timed_out is not None:
                return NoResourceAvailable(self.job_id, watcher.timed_out, watcher.wait.timeout_s)
        cause = self.failure_cause()
        if state == "FAILED" and cause and cause.lstrip().startswith("NoResourceAvailableException"):
            return NoResourceAvailable(self.job_id, "waiting for slots", None, cluster_cause=cause)
        return JobExecutionException(self.job_id, state, cause)

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
            raise self._ended(job["state"])
        return JobExecutionResult(self.job_id, int(job.get("duration", 0)))

    def collect(self, node_id: int, limit: int | None) -> CloseableIterator:
        if self.detached:
            raise RuntimeError("execute_and_collect() needs an attached client; run without --detached")
        serializer = MsgpackSerializer()
        buffer = CollectResultBuffer()

        def gen() -> Iterator[Any]:
            offset = 0  # entries read: asking from here acknowledges them, so Redis drops them
            while True:
                params = {"offset": offset}
                ack = buffer.ack()  # the records held here: the sink may forget them
                if ack is not None:
                    params.update(attempt=ack.attempt, acked=ack.position)
                r = self._get(f"/jobs/{self.job_id}/results", params=params)
                if r.status_code == 400:  # e.g. an entry the cluster did not write (refused, never decoded)
                    why = r.text
                    with contextlib.suppress(ValueError, KeyError, TypeError):
                        why = "; ".join(r.json()["errors"])
                    raise RuntimeError(f"cannot read the results of job {self.job_id}: {why}")
                r.raise_for_status()
                body = msgpack.unpackb(r.content, raw=False)
                entries = body["batches"]
                # The JobManager leaves a replayed entry out, so the offset is its word, not what arrived;
                # and the results end only with a fetch that read nothing (not one of copies alone).
                asked, offset = offset, int(body.get("next-offset", offset + len(entries)))
                try:
                    yield from buffer.add(CollectEntry.decode(raw, serializer) for raw in entries)
                    if body["ended"] and offset == asked:
                        if body["state"] != "FINISHED":
                            raise self._ended(body["state"])
                        yield from buffer.finish()
                        return
                except ResultsMissing as e:
                    raise ResultsMissing(f"cannot read the results of job {self.job_id}: {e}") from None
                if offset == asked:
                    time.sleep(0.1)

        def close() -> None:
            if self.get_job_status() not in TERMINAL:
                self.cancel()

        return CloseableIterator(gen(), on_close=close, limit=limit)


log = logging.getLogger(__name__)

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
        slot_timeout_s: float = DEFAULT_SLOT_TIMEOUT_S,
        outage_s: float = JOBMANAGER_OUTAGE_S,
        python_dependencies: "PythonDependencyOptions | None" = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.addresses = jobmanager_url
        # Several comma-separated addresses (JobManager HA): the next is tried when one is unreachable.
        self.http = failover_client(jobmanager_url, headers=headers, timeout=60)
        self.parallelism = parallelism
        self.detached = detached
        self.program_dir = program_dir
        self.batch_engine = batch_engine
        self.savepoint_path = savepoint_path
        self.allow_non_restored_state = allow_non_restored_state
        self.slot_timeout_s = slot_timeout_s
        self.outage_s = outage_s
        self.python_dependencies = python_dependencies  # -pyfs/-pyarch/-pyreq: shipped with every job
        self.submitted: list[str] = []
        self.cancelled: set[str] = set()  # submitted jobs the program cancelled itself
        self._cluster_parallelism: int | None = None

    def configure(self, env: "StreamExecutionEnvironment") -> None:
        apply_parallelism(env, self.parallelism, None if self.parallelism else self.cluster_default_parallelism())
        if self.python_dependencies:
            self.python_dependencies.apply(env)
        if self.batch_engine:
            env._config.set_string("execution.batch-engine", self.batch_engine)
        if self.savepoint_path:
            # Flink's CLI -s/--fromSavepoint sets the same options; the JobManager validates the path.
            path = self.savepoint_path  # a local path made absolute, a URL (s3://...) as given
            env._config.set_string("execution.savepoint.path", storage_fs(path).absolute(path))
            if self.allow_non_restored_state:
                env._config.set_string("execution.savepoint.ignore-unclaimed-state", "true")

    def cluster_default_parallelism(self) -> int | None:
        """The cluster's ``parallelism.default`` (the JobManager's MILLSTREAM_PARALLELISM_DEFAULT), asked
        once: as under ``flink run``, the cluster's configuration, not the client's, decides the
        parallelism of a program that sets none. None if the JobManager does not say (an older one)."""
        if self._cluster_parallelism is None:
            try:
                r = self.http.get("/jobmanager/config", timeout=10)
                entries = {e["key"]: e["value"] for e in r.json()} if r.status_code == 200 else {}
                self._cluster_parallelism = int(entries["parallelism_default"])
            except (httpx.TransportError, ValueError, KeyError, TypeError) as e:
                # The submission itself will say if the JobManager is gone; the job then runs at 1.
                log.warning("could not read the cluster's default parallelism: %s", e or type(e).__name__)
                self._cluster_parallelism = 0
        return self._cluster_parallelism or None

    def _post_job(self, job_graph: "JobGraph", code: bytes) -> str:
        """``POST /jobs``, retried while the JobManager restarts (no connection) or Redis is away
        (503) for up to ``outage_s``. The job id is chosen here, so a retry is safe: if an
        earlier try got through and only its answer was lost, the JobManager answers 409 for the id
        it already has, and that is the job."""
        tries = 0

        def post() -> httpx.Response:
            nonlocal tries
            tries += 1
            return self.http.post(
                "/jobs",
                data={"jobgraph": json.dumps(job_graph.to_dict())},
                files={"usercode": ("usercode.bin", code, "application/octet-stream")},
            )

        def gave_up(e: httpx.TransportError) -> Exception:
            return SubmissionFailed(f"the JobManager did not answer: {e}")

        r = wait_out_outage(post, self.outage_s, "retrying the submission", gave_up)
        if r.status_code == 409 and tries > 1:
            return job_graph.job_id
        if r.status_code >= 400:
            raise SubmissionFailed(f"the JobManager refused the job ({r.status_code}): {_errors(r)}")
        return r.json()["jobid"]

    def check_jobmanager(self) -> None:
        """Before the program runs: raise :class:`JobManagerUnreachable` unless a Millstream JobManager
        answers. One that cannot be reached, or answers 503, is waited for (``outage_s``), as a
        submission waits out a JobManager restart; anything else that answers is refused at once."""
        def gave_up(e: httpx.TransportError) -> Exception:
            return JobManagerUnreachable(
                f"cannot reach the JobManager at {self.addresses}: {e or type(e).__name__}. Is the cluster running? "
                "(Set the address with -m host:port or MILLSTREAM_JOBMANAGER.)"
            )

        r = wait_out_outage(
            lambda: self.http.get("/overview", timeout=10), self.outage_s,
            f"retrying the submission for up to {self.outage_s:g} s", gave_up,
        )
        if r.status_code in (401, 403):
            raise JobManagerUnreachable(
                f"the JobManager at {self.addresses} refused the request ({r.status_code}): set MILLSTREAM_AUTH_TOKEN "
                "to the cluster's token"
            )
        try:
            ok = r.status_code == 200 and "taskmanagers" in r.json()
        except ValueError:
            ok = False
        if not ok:
            raise JobManagerUnreachable(
                f"{self.addresses} answers, but not as a Millstream JobManager (GET /overview gave {r.status_code}); "
                "check the address (-m host:port, MILLSTREAM_JOBMANAGER)"
            )

    def submit(self, job_graph: "JobGraph", stream_graph: "StreamGraph") -> RestJobClient:
        if self.program_dir:
            register_program_modules(self.program_dir)
        code = user_code_of(stream_graph)
        register_pickled_classes()  # collected records of the program's own classes come back as them
        job_id = self._post_job(job_graph, code)
        self.submitted.append(job_id)
        # On stderr, so that stdout keeps only what the program and its job print (and the final
        # state line), as a local run's does.
        print(f"Job has been submitted with JobID {job_id}", file=sys.stderr)
        print(f"Follow it at {self.http.current_address}/ui/jobs/{job_id}", file=sys.stderr, flush=True)
        watcher = None
        if not self.detached:
            job_output.follow(self.http, job_id)  # its print() lines appear here as they come
            watcher = JobWatcher(self.http, job_id, self.slot_timeout_s)
            watcher.start()
        return RestJobClient(self.http, job_id, self.detached, self.cancelled, watcher, self.outage_s)
