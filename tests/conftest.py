"""Shared fixtures: a private Redis-compatible server per test session, flushed between tests."""
from __future__ import annotations

from typing import Iterator

import pytest
import redis

from millstream.backend.embedded_redis import redis_url_of, start_embedded_redis


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of a valkey-server this test session started on a free port."""
    server = start_embedded_redis(tmp_path_factory.mktemp("valkey"))
    try:
        yield redis_url_of(server)
    finally:
        server.stop()


@pytest.fixture
def redis_url(redis_server: str) -> str:
    client = redis.Redis.from_url(redis_server)
    client.flushall()
    client.close()
    return redis_server


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--full", action="store_true",
        help="also run the long variants (marked `full`): the biggest chaos run, long leak runs, every remote store; "
        "`make bench` runs them",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Long variants stay out of `make test` (it keeps a shorter real run of each path) unless --full."""
    if config.getoption("--full"):
        return
    skip = pytest.mark.skip(reason="long variant: `make bench` runs it (pytest --full -m full)")
    for item in items:
        if item.get_closest_marker("full") is not None:
            item.add_marker(skip)
