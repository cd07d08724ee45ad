"""Integration fixtures: one shared cluster of real processes for the module's tests."""
from __future__ import annotations

from typing import Iterator

import pytest

from tests.integration.cluster import Cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("cluster"))
    try:
        yield c.start(taskmanagers=2, slots=2)
    finally:
        c.stop()
