"""Backend test defaults: Starlette's TestClient calls itself ``testserver``, a name the
OriginGuard refuses on a cluster without a token, so these tests allow it explicitly."""
from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _allow_testserver_host(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MILLSTREAM_ALLOWED_HOSTS", "testserver")
