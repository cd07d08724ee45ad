"""Integration fixtures: one shared cluster of real processes for the module's tests, and two
external data Redis servers for the tests of a sharded data plane."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from millstream.backend.embedded_redis import start_embedded_redis
from tests.integration.cluster import Cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("cluster"))
    try:
        yield c.start(taskmanagers=2, slots=2)
    finally:
        c.stop()


@pytest.fixture
def data_servers(tmp_path: Path) -> Iterator[list]:
    servers = [start_embedded_redis(tmp_path / f"data-{i}") for i in range(2)]
    yield servers
    for s in servers:
        s.stop()
