"""``millstream cluster start``: a JobManager and TaskManagers as child processes on this machine.

If ``REDIS_URL`` is unset a private valkey-server is started first. Each child
logs to ``<data_dir>/log``. A TaskManager that dies is started again, as a
supervisor would, unless ``restart_taskmanagers`` is off. A JobManager that dies
is started again too, and the TaskManagers are left running: the new JobManager
resumes running jobs from their latest checkpoints, as after a restart by hand.
An embedded Redis that dies is started again on the same port with the same
config; everything reconnects, and the JobManager fails running jobs over to
their latest checkpoints (what Redis held is gone). Ctrl-C stops everything, saying what it stops.

With ``data_redis`` N > 0 it also starts N embedded servers for the data channels
(MILLSTREAM_DATA_REDIS_URLS, engine/runtime/io/data_servers.py), each started again on its port
when it dies; the tasks using one that died fail, and their jobs restart from their latest
checkpoints once it is back. With ``MILLSTREAM_DATA_REDIS_URLS`` set, those servers are used instead.

Start-up fails, with the reason in ``failure``, when a REST port is already taken (checked before
anything starts, so another server on the port is never mistaken for this cluster) or when any
process exits before the cluster is up.

With ``jobmanagers`` > 1 (high availability, issue 18) it starts that many JobManagers on
consecutive REST ports from the configured one: they elect a leader through a lease in Redis and the
others stand by. A dead one is started again as above, and comes back as a standby.
"""
from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from millstream.backend.embedded_redis import embedded_redis_alive, redis_url_of, restart_embedded_redis, start_embedded_redis
from millstream.backend.settings import Settings


#: a JobManager that exits this soon after its start counts as crashing on start-up
JOBMANAGER_QUICK_EXIT_S = 15.0
#: start-up crashes in a row after which the launcher stops restarting it (a bad config, a port taken)
JOBMANAGER_MAX_QUICK_EXITS = 3


@dataclass
class _Child:
    name: str
    cmd: list[str]
    log: Path
    proc: subprocess.Popen | None = None
    started_at: float = 0.0
    quick_exits: int = 0  # consecutive exits within JOBMANAGER_QUICK_EXIT_S of a start
    env_overrides: dict[str, str] | None = None  # this child's own settings (a JobManager's port)

    def start(self, env: dict[str, str]) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        out = open(self.log, "ab")
        env = {**env, **(self.env_overrides or {})}
        self.proc = subprocess.Popen(self.cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        self.started_at = time.monotonic()
        out.close()


class LocalCluster:
    def __init__(
        self,
        settings: Settings,
        taskmanagers: int,
        slots: int,
        restart_taskmanagers: bool = True,
        jobmanagers: int = 1,
        data_redis: int = 0,
    ) -> None:
        if jobmanagers < 1:
            raise ValueError("a cluster needs at least one JobManager")
        if data_redis < 0:
            raise ValueError("data_redis is a number of servers")
        self.data_redis_count = data_redis
        self.data_redis: list = []  # the embedded data servers started here
        self.settings = settings
        self.jobmanagers = jobmanagers
        self.taskmanagers = taskmanagers
        self.slots = slots
        self.restart = restart_taskmanagers
        self.redis = None
        self.children: list[_Child] = []
        self._stop = False
        self.failure: str | None = None  # why the cluster did not come up, once it did not
        # Shared by the processes started here only; generated when the user set none.
        self.cluster_secret = settings.cluster_secret or secrets.token_hex(32)
        # Secret variables the CLI took out of this process's environment (process_hardening): the
        # processes started here still get them, explicitly.
        self.inherited_secrets: dict[str, str] = {}

    def _env(self, redis_url: str) -> dict[str, str]:
        env = dict(os.environ)
        env.update(self.inherited_secrets)
        env["REDIS_URL"] = redis_url
        env["MILLSTREAM_DATA_DIR"] = str(self.settings.data_dir.resolve())
        # Absolute, so that the JobManager and the TaskManagers agree whatever their working directory.
        env["MILLSTREAM_CHECKPOINT_DIR"] = str(self.settings.resolved_checkpoint_dir)
        env["MILLSTREAM_HOST"] = self.settings.host
        env["MILLSTREAM_PORT"] = str(self.settings.port)
        env["PYTHONUNBUFFERED"] = "1"
        env["MILLSTREAM_CLUSTER_SECRET"] = self.cluster_secret
        if self.settings.database_url:
            env["DATABASE_URL"] = self.settings.database_url
        if self.jobmanagers > 1:
            env["MILLSTREAM_HIGH_AVAILABILITY"] = "true"
            env["MILLSTREAM_JOBMANAGER"] = ",".join(self.jobmanager_urls)
        return env

    @property
    def jobmanager_urls(self) -> list[str]:
        return [f"http://{self.settings.host}:{self.settings.port + i}" for i in range(self.jobmanagers)]

    def taken_port(self) -> str | None:
        """Why the cluster cannot start here (a REST port another process holds), or None."""
        host = self.settings.host
        for i in range(self.jobmanagers):
            port = self.settings.port + i
            try:
                infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            except socket.gaierror as e:
                return f"cannot bind to {host}: {e}"
            family, _, _, _, address = infos[0]
            with socket.socket(family, socket.SOCK_STREAM) as probe:
                # As uvicorn binds: SO_REUSEADDR, so a port in TIME_WAIT counts as free, a listening one not.
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    probe.bind(address)
                except OSError as e:
                    return (
                        f"port {port} on {host} is taken by another process ({e.strerror or e}); stop it, or "
                        "start the cluster on another port with --port (or MILLSTREAM_PORT)"
                    )
        return None

    def start(self) -> str:
        data = self.settings.data_dir.resolve()
        logs = data / "log"
        redis_url = self.settings.redis_url
        if not redis_url:
            # A generated password (issue 14): only the processes started here get it, in REDIS_URL.
            # The server keeps it in its config, so restart_embedded_redis brings it back with the same one.
            self.redis = start_embedded_redis(data / "valkey", password=secrets.token_urlsafe(32))
            redis_url = redis_url_of(self.redis)
        env = self._env(redis_url)
        if self.data_redis_count and not self.settings.data_redis_urls:
            for i in range(self.data_redis_count):
                self.data_redis.append(start_embedded_redis(data / f"valkey-data-{i}", password=secrets.token_urlsafe(32)))
            env["MILLSTREAM_DATA_REDIS_URLS"] = ",".join(redis_url_of(s) for s in self.data_redis)
        cli = [sys.executable, "-m", "millstream.backend.cli"]
        for i in range(self.jobmanagers):
            name = "jobmanager" if self.jobmanagers == 1 else f"jobmanager-{i}"
            # Flink's split: the process logs to <name>.log (rotated), its stdout/stderr go to <name>.out.
            jm = _Child(
                name, [*cli, "jobmanager", "--log-file", str(logs / f"{name}.log")], logs / f"{name}.out",
                env_overrides={"MILLSTREAM_PORT": str(self.settings.port + i)},
            )
            self.children.append(jm)
            jm.start(env)
        for i in range(self.taskmanagers):
            log = logs / f"taskmanager-{i}.log"
            tm = _Child(
                f"taskmanager-{i}", [*cli, "taskmanager", "--slots", str(self.slots), "--log-file", str(log)],
                logs / f"taskmanager-{i}.out",  # what the job's print() sinks and user code print
            )
            self.children.append(tm)
            tm.start(env)
        self.env = env
        return redis_url

    def wait_ready(self, timeout_s: float = 60) -> bool:
        """Until the JobManager answers with every TaskManager registered; False, with ``failure`` set,
        when a process exits first or the time runs out."""
        url = f"http://{self.settings.host}:{self.settings.port}/overview"
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            # Any process that exits before the cluster is up is a failed start: a TaskManager's
            # supervisor restarts would only hide why (a bad setting, an unwritable directory).
            for child in self.children:
                if child.proc is not None and child.proc.poll() is not None:
                    self.failure = (
                        f"the {_role(child)} exited with {child.proc.returncode} while starting: "
                        f"{_last_line(child.log)} (see {child.log})"
                    )
                    return False
            try:
                # With MILLSTREAM_AUTH_READS every GET needs the token, the probe's too.
                r = httpx.get(url, timeout=2, headers=self._probe_headers())
                if r.status_code == 200 and r.json().get("taskmanagers", 0) >= self.taskmanagers:
                    return True
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        self.failure = f"the cluster was not up within {timeout_s:.0f} s; see {self.settings.data_dir.resolve() / 'log'}"
        return False

    def _probe_headers(self) -> dict[str, str]:
        token = self.settings.auth_token
        return {"Authorization": f"Bearer {token}"} if token else {}

    def supervise(self) -> None:
        while not self._stop:
            if self.redis is not None and not embedded_redis_alive(self.redis) and not self._stop:
                self._restart_redis()
            for i, server in enumerate(self.data_redis):
                if not embedded_redis_alive(server) and not self._stop:
                    print(f"the embedded data Redis {i} exited; starting it again on the same port", flush=True)
                    try:
                        restart_embedded_redis(server)
                    except Exception as e:  # noqa: BLE001 - as for the control Redis: next round
                        print(f"could not start the embedded data Redis {i} again: {e}", flush=True)
            for child in self.children:
                if child.proc is not None and child.proc.poll() is not None and not self._stop:
                    if child.name.startswith("taskmanager") and self.restart:
                        print(f"{child.name} exited with {child.proc.returncode}; starting it again", flush=True)
                        child.start(self.env)
                    elif child.name.startswith("jobmanager"):
                        self._restart_jobmanager(child)
            time.sleep(0.5)

    def _restart_redis(self) -> None:
        """The embedded Redis died: start it again where the processes look for it. A start that fails
        (the port taken meanwhile) is retried on the next round rather than ending the cluster."""
        print("the embedded Redis exited; starting it again on the same port", flush=True)
        try:
            restart_embedded_redis(self.redis)
        except Exception as e:  # noqa: BLE001 - ServerStartError, OSError: try again in a moment
            print(f"could not start the embedded Redis again: {e}", flush=True)

    def _restart_jobmanager(self, child: _Child) -> None:
        """Start a dead JobManager again, leaving the TaskManagers (and their slots' tasks) alone:
        they re-register with the new JobManager, which resumes running jobs from SQL. One that keeps
        dying on start-up is given up on, and the cluster stops, rather than looping forever."""
        code = child.proc.returncode if child.proc is not None else None
        if time.monotonic() - child.started_at < JOBMANAGER_QUICK_EXIT_S:
            child.quick_exits += 1
        else:
            child.quick_exits = 0
        if child.quick_exits >= JOBMANAGER_MAX_QUICK_EXITS:
            print(
                f"the {_role(child)} exited with {code} {child.quick_exits} times in a row right after starting; "
                f"giving up, see {child.log}",
                flush=True,
            )
            self.failure = f"the {_role(child)} kept exiting right after starting (last with {code}); see {child.log}"
            self._stop = True
            return
        print(f"the {_role(child)} exited with {code}; starting it again (see {child.log})", flush=True)
        child.start(self.env)

    def stop(self, *_: object) -> None:
        self._stop = True

    def shutdown(self, say: bool = False) -> None:
        """Stop every process started here (with ``say``, naming each on stdout first)."""
        alive = [c for c in reversed(self.children) if c.proc and c.proc.poll() is None]
        if say and (alive or self.redis is not None or self.data_redis):
            names = [f"{_role(c)} (pid {c.proc.pid})" for c in alive if c.proc is not None]
            if self.redis is not None:
                names.append("the embedded Redis")
            if self.data_redis:
                names.append(f"{len(self.data_redis)} embedded data Redis servers")
            print(f"Stopping {', '.join(names)}", flush=True)
        for child in alive:
            if child.proc and child.proc.poll() is None:
                child.proc.send_signal(signal.SIGTERM)
        deadline = time.time() + 10
        for child in self.children:
            if child.proc:
                try:
                    child.proc.wait(max(0.1, deadline - time.time()))
                except subprocess.TimeoutExpired:
                    os.killpg(child.proc.pid, signal.SIGKILL)
        if self.redis is not None:
            self.redis.stop()
        for server in self.data_redis:
            if embedded_redis_alive(server):
                server.stop()
        if say:
            print("Stopped.", flush=True)


def _role(child: _Child) -> str:
    if child.name.startswith("taskmanager"):
        return f"TaskManager {child.name.removeprefix('taskmanager-')}"
    return "JobManager" if child.name == "jobmanager" else f"JobManager {child.name.removeprefix('jobmanager-')}"


def _last_line(log: Path) -> str:
    """The last non-empty line a process wrote (its reason for exiting, usually), or a note that it wrote none."""
    try:
        with open(log, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 4096))
            lines = [ln.strip() for ln in f.read().decode(errors="replace").splitlines() if ln.strip()]
    except OSError:
        lines = []
    return lines[-1][:500] if lines else "it wrote nothing"
