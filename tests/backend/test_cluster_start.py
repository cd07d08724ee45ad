"""``millstream cluster start`` as a real process: its readiness probe carries the token (so
MILLSTREAM_AUTH_READS=1 comes up), and a cluster that does not come up exits non-zero."""
from __future__ import annotations

import os
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
        [sys.executable, "-m", "backend.cli", "cluster", "start"], env=full, stdout=subprocess.PIPE,
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
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(60)


def test_a_cluster_that_does_not_come_up_exits_non_zero(tmp_path: Path):
    with socket.socket() as taken:  # the REST port is in use, so the JobManager cannot start
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        proc = start(tmp_path, taken.getsockname()[1])
        out, _ = proc.communicate(timeout=180)
    assert "did not come up" in out, out
    assert proc.returncode != 0, out
