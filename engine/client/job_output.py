"""An attached client's copy of a job's print() output: follows ``GET /jobs/{id}/stdout`` on a thread
and writes the lines to this process's stdout as they come, as a local PyFlink run shows them.

``finish`` (called once the job ended: by ``get_job_execution_result`` and by ``millstream run``
before it returns) reads what remains, so a short job's output is complete. Lines the cluster's
bounded stream dropped before they were read are counted on stderr, never silently skipped.
"""
from __future__ import annotations

import sys
import threading
import time
from typing import Any, TextIO

import httpx

POLL_S = 0.2
MAX_LINES = 2000
TRANSPORT_RETRY_S = 90.0  # a JobManager restart: keep following once it is back


class JobOutputFollower:
    def __init__(self, http: httpx.Client, job_id: str, out: TextIO | None = None, err: TextIO | None = None) -> None:
        # A client of its own: the caller's may be busy on another thread (collect, status polls).
        self.http = httpx.Client(base_url=http.base_url, headers=http.headers, timeout=30)
        self.job_id = job_id
        self.out = out
        self.err = err
        self.offset = 0
        self.dropped = 0
        self._lock = threading.Lock()  # one reader at a time: the thread, or finish()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"stdout-{job_id[:8]}", daemon=True)
        self._thread.start()

    def _read_once(self) -> dict[str, Any] | None:
        """One request; writes what it got. None if the server has no such endpoint or job."""
        r = self.http.get(f"/jobs/{self.job_id}/stdout", params={"offset": self.offset, "maxLines": MAX_LINES})
        if r.status_code == 404:  # a JobManager without the endpoint, or a job it does not know
            return None
        if r.status_code != 200:  # e.g. a JobManager still starting after a restart: try again later
            return {"lines": [], "ended": False, "total": self.offset}
        body = r.json()
        out = self.out or sys.stdout
        if body["dropped"]:
            self.dropped += body["dropped"]
            (self.err or sys.stderr).write(
                f"[{body['dropped']} lines of job {self.job_id}'s output were dropped: "
                "the cluster keeps only the newest lines of a job's output]\n"
            )
        if body["lines"]:
            out.write("".join(line + "\n" for line in body["lines"]))
            out.flush()
        self.offset = body["next-offset"]
        return body

    def _drained(self, body: dict[str, Any] | None) -> bool:
        return body is None or (body["ended"] and self.offset >= body["total"])

    def _loop(self) -> None:
        failing_since: float | None = None
        while not self._stop.is_set():
            try:
                with self._lock:
                    if self._stop.is_set():
                        return
                    body = self._read_once()
                failing_since = None
            except httpx.TransportError:
                failing_since = failing_since or time.monotonic()
                if time.monotonic() - failing_since > TRANSPORT_RETRY_S:
                    return
                body = {"lines": [], "ended": False}
            if self._drained(body):
                return
            if len(body["lines"]) < MAX_LINES:  # else more is waiting: read on at once
                self._stop.wait(POLL_S)

    def finish(self, timeout_s: float = 30.0) -> None:
        """Read the rest of the output of a job that has ended (or, if it has not, what is there now)."""
        self._stop.set()
        deadline = time.monotonic() + timeout_s
        with self._lock:
            try:
                while time.monotonic() < deadline:
                    body = self._read_once()
                    if body is None or not body["lines"]:
                        break
                    if not body["ended"] and len(body["lines"]) < MAX_LINES:
                        break  # still running (execute_async): what it printed so far, no more
            except httpx.HTTPError:
                pass
        self.http.close()


_followers: dict[str, JobOutputFollower] = {}
_lock = threading.Lock()


def follow(http: httpx.Client, job_id: str) -> JobOutputFollower:
    """Start copying the job's output to stdout (once per job)."""
    with _lock:
        f = _followers.get(job_id)
        if f is None:
            f = _followers[job_id] = JobOutputFollower(http, job_id)
        return f


def finish(job_id: str) -> None:
    """The job ended: print the rest of its output, then stop following it."""
    with _lock:
        f = _followers.pop(job_id, None)
    if f is not None:
        f.finish()


def finish_all() -> None:
    """Before the client exits: whatever every followed job printed so far."""
    with _lock:
        jobs = list(_followers)
    for job_id in jobs:
        finish(job_id)
