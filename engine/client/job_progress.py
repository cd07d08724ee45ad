"""What an attached ``millstream run`` tells its user while a job runs: that it waits for slots (live,
from the job detail's ``status-message``), that it gave up after the slot request timeout (Flink's
``slot.request.timeout``), and on a terminal the progress of a BATCH job's Spark stages.

``SlotWait`` (the timeout decision) and ``render_spark_progress`` are pure; ``JobWatcher`` is the
thread that polls the JobManager and acts on them.
"""
from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, TextIO

import httpx

POLL_S = 0.5
TERMINAL = frozenset({"FINISHED", "FAILED", "CANCELED"})


@dataclass
class SlotWait:
    """Decides when a job waiting for slots has waited too long. A job waits while it is CREATED with
    a status message (the scheduler's "waiting for resources: ..."); the clock restarts whenever it
    stops waiting, so a job that ran, lost a TaskManager and waits again gets the full timeout again."""

    timeout_s: float
    since: float | None = None

    def observe(self, state: str, message: str | None, now: float) -> bool:
        """Record one look at the job; True once it has waited ``timeout_s`` without a break."""
        if state != "CREATED" or not message:
            self.since = None
            return False
        if self.since is None:
            self.since = now
        return now - self.since >= self.timeout_s


def render_spark_progress(stages: list[dict[str, Any]], width: int = 24) -> str:
    """One line for a BATCH job's Spark stages: each unfinished stage as ``[Stage 3: ===>   2+1/8]``
    (completed + running / tasks), or ``Spark: n stages done`` when none is left; "" before Spark
    has any."""
    if not stages:
        return ""
    open_ = [s for s in stages if s.get("numCompletedTasks", 0) < s.get("numTasks", 0)]
    if not open_:
        return f"Spark: {len(stages)} stage{'s' if len(stages) != 1 else ''} done"
    parts = []
    for s in open_[:3]:  # more than three at once would not fit a line
        total = max(1, int(s.get("numTasks", 0)))
        done = int(s.get("numCompletedTasks", 0))
        active = int(s.get("numActiveTasks", 0))
        filled = min(width, width * done // total)
        bar = "=" * filled + (">" if filled < width else "") + " " * max(0, width - filled - 1)
        parts.append(f"[Stage {s.get('stageId')}:{bar} {done}+{active}/{total}]")
    more = f" (+{len(open_) - 3} more)" if len(open_) > 3 else ""
    return " ".join(parts) + more


class JobWatcher(threading.Thread):
    """Polls ``GET /jobs/{id}`` until the job ends: says when it starts waiting for slots and when it
    runs, cancels it once :class:`SlotWait` says it waited too long (``timed_out`` then holds the last
    status message), and on a TTY keeps a Spark progress line up to date."""

    def __init__(
        self,
        http: httpx.Client,
        job_id: str,
        slot_timeout_s: float,
        err: TextIO | None = None,
        tty: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(name=f"watch-{job_id[:8]}", daemon=True)
        # A client of its own: the program's may be busy on another thread (collect, status polls).
        self.http = httpx.Client(base_url=http.base_url, headers=http.headers, timeout=30)
        self.job_id = job_id
        self.wait = SlotWait(slot_timeout_s)
        self.err = err or sys.stderr
        self.tty = self.err.isatty() if tty is None else tty
        self.clock = clock
        self.timed_out: str | None = None
        self.done = threading.Event()  # the job ended (or was given up on) and the watcher stopped
        self._stopping = threading.Event()
        self._message: str | None = None
        self._progress_shown = False

    def stop(self) -> None:
        self._stopping.set()

    def run(self) -> None:
        try:
            while not self._stopping.is_set():
                try:
                    r = self.http.get(f"/jobs/{self.job_id}")
                except httpx.TransportError:  # a JobManager restart: the program's own calls wait for it
                    self._stopping.wait(POLL_S)
                    continue
                if r.status_code == 200 and self._look(r.json()):
                    return
                self._stopping.wait(POLL_S)
            if self._message:
                # Stopped (the job ended) while the last look said it waited: one more look says how
                # it went, so a short job that got its slots between two looks is still told.
                try:
                    r = self.http.get(f"/jobs/{self.job_id}")
                    if r.status_code == 200:
                        self._look(r.json())
                except httpx.TransportError:
                    pass
        finally:
            self._clear_progress()
            self.http.close()
            self.done.set()

    def _look(self, job: dict[str, Any]) -> bool:
        """Act on one look at the job; True when there is nothing left to watch."""
        state = job.get("state", "")
        message = job.get("status-message") if state == "CREATED" else None
        if message is None and state == "CREATED" and self._message:
            pass  # the slots came, the tasks are not deployed yet: said once the job runs (or ends)
        elif message != self._message:
            if message:
                self._say(f"Job {self.job_id} is waiting for slots: {message.removeprefix('waiting for resources: ')}")
            elif self._message and (state not in TERMINAL or state == "FINISHED"):
                # FINISHED too: a short job can end between two looks, and it did get its slots.
                self._say(f"Job {self.job_id} got its slots and is {state}")
            self._message = message
        if self.wait.observe(state, message, self.clock()):
            self.timed_out = message or "waiting for resources"
            self._give_up()
            return True
        if state in TERMINAL:
            return True
        spark = job.get("spark")
        if self.tty and spark:
            line = render_spark_progress(spark.get("stages", []))
            if line:
                self.err.write("\r\x1b[K" + line)
                self.err.flush()
                self._progress_shown = True
        return False

    def _give_up(self) -> None:
        """Cancel the job so nothing is left behind, and wait (briefly) until it has ended."""
        try:
            self.http.patch(f"/jobs/{self.job_id}", params={"mode": "cancel"})
            deadline = self.clock() + 30
            while self.clock() < deadline:
                r = self.http.get(f"/jobs/{self.job_id}")
                if r.status_code != 200 or r.json().get("state") in TERMINAL:
                    return
                time.sleep(0.2)
        except httpx.HTTPError:
            pass  # the caller's message says to check; the job may still be waiting

    def _say(self, line: str) -> None:
        self._clear_progress()
        self.err.write(line + "\n")
        self.err.flush()

    def _clear_progress(self) -> None:
        if self._progress_shown:
            self.err.write("\r\x1b[K")
            self.err.flush()
            self._progress_shown = False
