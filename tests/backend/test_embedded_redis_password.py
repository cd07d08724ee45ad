"""The embedded Redis the launcher starts has a password, in its URL, that survives a restart (issue 14)."""
from __future__ import annotations

import os
import secrets
import signal
import time
from pathlib import Path

import pytest
import redis

from millstream.backend.embedded_redis import embedded_redis_alive, redis_url_of, restart_embedded_redis, start_embedded_redis


def test_only_the_url_with_the_password_gets_in_before_and_after_a_sigkill_and_restart(tmp_path: Path) -> None:
    password = secrets.token_urlsafe(32) + "/:@"  # characters a URL must quote
    server = start_embedded_redis(tmp_path / "valkey", password=password)
    try:
        url = redis_url_of(server)
        assert redis.Redis.from_url(url).ping()
        bare = f"redis://{server.host}:{server.port}/0"
        with pytest.raises(redis.AuthenticationError):
            redis.Redis.from_url(bare).rpush("ms:jm:inbox", b"forged")
        os.kill(server.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while embedded_redis_alive(server) and time.monotonic() < deadline:
            time.sleep(0.05)
        restart_embedded_redis(server)
        assert redis_url_of(server) == url  # same port, same password: every process keeps its REDIS_URL
        assert redis.Redis.from_url(url).ping()
        with pytest.raises(redis.AuthenticationError):
            redis.Redis.from_url(bare).ping()
    finally:
        server.stop()


def test_without_a_password_the_url_carries_none(tmp_path: Path) -> None:
    server = start_embedded_redis(tmp_path / "valkey")
    try:
        assert "@" not in redis_url_of(server)
    finally:
        server.stop()


def test_the_embedded_server_ticks_100_times_a_second_and_a_short_blpop_returns_on_time(tmp_path: Path) -> None:
    """At valkey's default hz 10 a 10 ms BLPOP returns after ~100 ms (timeouts are checked per tick),
    which delayed a quiet-input task's flush; the embedded server runs at hz 100."""
    server = start_embedded_redis(tmp_path / "valkey")
    try:
        r = redis.Redis.from_url(redis_url_of(server))
        assert r.config_get("hz") == {"hz": "100"}
        took = []
        for _ in range(5):
            t = time.monotonic()
            assert r.blpop(["nothing"], timeout=0.01) is None
            took.append(time.monotonic() - t)
        assert min(took) < 0.08, took  # at hz 10 every one takes >= 0.09 s; min() tolerates a loaded machine
    finally:
        server.stop()
