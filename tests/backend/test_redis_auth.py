"""The JobManager and a real TaskManager process reach a Redis that needs a password,
through redis-py's ``from_url``: ``redis://:pw@host:port/0`` and an ACL user's ``redis://user:pw@...``."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest
import redis
from fastapi.testclient import TestClient

from millstream.backend.app import create_app
from millstream.backend.embedded_redis import start_embedded_redis
from millstream.backend.settings import Settings

PASSWORD = "default-user-pw"
ACL_USER, ACL_PASSWORD = "millstream", "acl-user-pw"
SECRET = "redis-auth-test-secret"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    srv = start_embedded_redis(tmp_path_factory.mktemp("valkey-auth"), password=PASSWORD)
    admin = redis.Redis(host=srv.host, port=srv.port, password=PASSWORD)
    admin.execute_command("ACL", "SETUSER", ACL_USER, "on", f">{ACL_PASSWORD}", "~*", "&*", "+@all")
    admin.close()
    try:
        yield srv.host, srv.port
    finally:
        srv.stop()


def urls(host: str, port: int) -> dict[str, str]:
    return {
        "password": f"redis://:{PASSWORD}@{host}:{port}/0",
        "acl-user": f"redis://{ACL_USER}:{ACL_PASSWORD}@{host}:{port}/0",
    }


def test_the_server_really_requires_a_password(server: tuple[str, int], tmp_path: Path):
    host, port = server
    with pytest.raises(redis.AuthenticationError):
        redis.Redis.from_url(f"redis://{host}:{port}/0").ping()
    with pytest.raises(redis.AuthenticationError):
        with TestClient(create_app(Settings(redis_url=f"redis://{host}:{port}/0", data_dir=tmp_path))):
            pass


@pytest.mark.parametrize("kind", ["password", "acl-user"])
def test_jobmanager_and_taskmanager_connect_with_credentials(server: tuple[str, int], tmp_path: Path, kind: str):
    url = urls(*server)[kind]
    redis.Redis.from_url(url).flushdb()
    settings = Settings(redis_url=url, data_dir=tmp_path, cluster_secret=SECRET, heartbeat_interval_ms=200)
    env = {**os.environ, "REDIS_URL": url, "MILLSTREAM_CLUSTER_SECRET": SECRET, "MILLSTREAM_DATA_DIR": str(tmp_path)}
    env["MILLSTREAM_HEARTBEAT_INTERVAL_MS"] = "200"
    with TestClient(create_app(settings)) as api:
        assert api.get("/overview").json()["taskmanagers"] == 0
        log = open(tmp_path / "tm.log", "wb")
        tm = subprocess.Popen(
            [sys.executable, "-m", "millstream.backend.cli", "taskmanager", "--slots", "1"], env=env, stdout=log, stderr=log
        )
        try:
            deadline = time.monotonic() + 30
            while api.get("/overview").json()["taskmanagers"] < 1:
                assert tm.poll() is None, (tmp_path / "tm.log").read_text()
                assert time.monotonic() < deadline, (tmp_path / "tm.log").read_text()
                time.sleep(0.2)
            assert api.get("/overview").json()["slots-total"] == 1
        finally:
            tm.terminate()
            tm.wait(15)
            log.close()
