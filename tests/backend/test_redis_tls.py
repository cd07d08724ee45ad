"""REDIS_URL with TLS (``rediss://``): the JobManager app and a real TaskManager process talk to a
redis-server that only accepts TLS, verifying it against a test CA made here with openssl."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest
import redis
from fastapi.testclient import TestClient

from millstream.backend.app import create_app
from millstream.backend.free_ports import free_port
from millstream.backend.settings import Settings

REDIS_SERVER = shutil.which("redis-server")
OPENSSL = shutil.which("openssl")
pytestmark = pytest.mark.skipif(not (REDIS_SERVER and OPENSSL), reason="needs Debian's redis-server and openssl")


def _run(*args: str, cwd: Path) -> None:
    subprocess.run(args, cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def tls_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    d = tmp_path_factory.mktemp("tls")
    _run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
         "-days", "1", "-subj", "/CN=millstream-test-ca", cwd=d)
    _run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
         "-subj", "/CN=localhost", cwd=d)
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _run("openssl", "x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
         "-out", "server.crt", "-days", "1", "-extfile", "san.ext", cwd=d)
    port = free_port()
    server = subprocess.Popen(
        [REDIS_SERVER, "--port", "0", "--tls-port", str(port), "--bind", "127.0.0.1",
         "--tls-cert-file", "server.crt", "--tls-key-file", "server.key", "--tls-ca-cert-file", "ca.crt",
         "--tls-auth-clients", "no", "--save", "", "--appendonly", "no", "--dir", str(d)],
        cwd=d, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    url = f"rediss://127.0.0.1:{port}/0?ssl_ca_certs={d / 'ca.crt'}"
    deadline = time.time() + 20
    while True:
        try:
            redis.Redis.from_url(url).ping()
            break
        except redis.RedisError:
            if time.time() > deadline or server.poll() is not None:
                server.kill()
                pytest.fail("the TLS redis-server did not start")
            time.sleep(0.2)
    try:
        yield url, d
    finally:
        server.terminate()
        server.wait(10)


def test_plain_connections_to_the_tls_port_fail(tls_redis: tuple[str, Path]) -> None:
    url, _ = tls_redis
    plain = url.replace("rediss://", "redis://").split("?")[0]
    with pytest.raises(redis.RedisError):
        redis.Redis.from_url(plain, socket_timeout=2).ping()


def test_jobmanager_and_taskmanager_work_over_tls(tls_redis: tuple[str, Path], tmp_path: Path) -> None:
    url, _ = tls_redis
    client = redis.Redis.from_url(url)
    client.flushall()
    env = dict(os.environ, REDIS_URL=url, MILLSTREAM_CLUSTER_SECRET="tls-test-secret", MILLSTREAM_DATA_DIR=str(tmp_path))
    tm = subprocess.Popen(
        [sys.executable, "-m", "millstream.backend.cli", "taskmanager", "--slots", "1"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        settings = Settings(redis_url=url, data_dir=tmp_path, heartbeat_interval_ms=200, cluster_secret="tls-test-secret")
        with TestClient(create_app(settings)) as http:
            deadline = time.time() + 30
            while http.get("/overview").json()["taskmanagers"] < 1:
                assert time.time() < deadline, "the TaskManager never registered over TLS"
                time.sleep(0.3)
            assert http.get("/overview").json()["slots-total"] == 1
    finally:
        tm.terminate()
        tm.wait(10)
