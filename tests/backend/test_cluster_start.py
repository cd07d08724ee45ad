"""``millstream cluster start`` as a real process: its readiness probe carries the token (so
MILLSTREAM_AUTH_READS=1 comes up), Ctrl-C says what it stops, and a cluster that does not come up
(its port taken, even by another web server; a process that exits on start) exits non-zero saying why."""
from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.integration.cluster import free_port


def start(tmp_path: Path, port: int, **env: str) -> subprocess.Popen:
    full = {k: v for k, v in os.environ.items() if not k.startswith("MILLSTREAM_") and k not in ("REDIS_URL", "DATABASE_URL")}
    full.update(
        MILLSTREAM_PORT=str(port), MILLSTREAM_DATA_DIR=str(tmp_path / "var"), MILLSTREAM_CLUSTER_SECRET="s" * 32,
        MILLSTREAM_TASKMANAGERS="1", MILLSTREAM_SLOTS="1", PYTHONUNBUFFERED="1", **env,
    )
    return subprocess.Popen(
        [sys.executable, "-m", "millstream.backend.cli", "cluster", "start"], env=full, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True,
    )


def test_cluster_start_with_protected_reads_comes_up(tmp_path: Path):
    proc = start(tmp_path, free_port(), MILLSTREAM_AUTH_TOKEN="tok", MILLSTREAM_AUTH_READS="1")
    lines = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if "Millstream is up" in line or "did not come up" in line:
                break
        assert any("Millstream is up" in ln for ln in lines), "".join(lines)
        if sys.platform.startswith("linux"):
            # The launcher, an ancestor of every program the cluster runs, keeps the secrets it passes
            # on (the JobManager and the TaskManager came up with them) out of its /proc environ.
            try:
                environ = Path(f"/proc/{proc.pid}/environ").read_bytes()
            except PermissionError:
                environ = b""  # non-dumpable, seen by a non-root reader: unreadable altogether
            assert b"s" * 32 not in environ and b"MILLSTREAM_AUTH_TOKEN" not in environ
    finally:
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=60)
    assert re.search(r"^Stopping TaskManager 0 \(pid \d+\), JobManager \(pid \d+\), the embedded Redis$", rest, re.M), rest
    assert rest.rstrip().endswith("Stopped."), rest
    assert proc.returncode == 0, rest


def test_a_cluster_that_does_not_come_up_exits_non_zero(tmp_path: Path):
    with socket.socket() as taken:  # the REST port is in use, so the JobManager cannot start
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = start(tmp_path, port)
        out, _ = proc.communicate(timeout=180)
    assert "did not come up" in out, out
    assert f"port {port} on 127.0.0.1 is taken by another process" in out, out
    assert proc.returncode != 0, out


def test_another_web_server_on_the_port_is_not_taken_for_the_cluster(tmp_path: Path):
    port = free_port()
    web = subprocess.Popen(
        [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port)], cwd=tmp_path,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while socket.socket().connect_ex(("127.0.0.1", port)) != 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        proc = start(tmp_path, port)
        out, _ = proc.communicate(timeout=60)
    finally:
        web.kill()
        web.wait()
    assert "Millstream is up" not in out and f"port {port} on 127.0.0.1 is taken" in out, out
    assert proc.returncode == 1, out


def test_a_process_that_exits_on_start_stops_the_start_with_its_reason(tmp_path: Path):
    # A database whose driver is not installed: the JobManager says so and exits 2.
    proc = start(tmp_path, free_port(), DATABASE_URL="mysql+mysqldb://user@localhost/millstream")
    out, _ = proc.communicate(timeout=120)
    assert "the cluster did not come up: the JobManager exited with 2 while starting" in out, out
    assert "driver is not installed" in out, out
    assert "Millstream is up" not in out and proc.returncode == 1, out
