"""Backend test defaults: Starlette's TestClient calls itself ``testserver``, a name the
OriginGuard refuses on a cluster without a token, so these tests allow it explicitly; and
savepoints go to the test's own tmp_path, which the state-directory allowlist names."""
from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _allow_testserver_host(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("MILLSTREAM_ALLOWED_HOSTS", "testserver")
    # Savepoint targets in these tests are tmp_path/...: the operator's allowlist names it.
    monkeypatch.setenv("MILLSTREAM_STATE_DIRS", str(tmp_path))
