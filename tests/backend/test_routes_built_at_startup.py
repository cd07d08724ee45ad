"""The JobManager builds its routes' validators while it starts, not on the first request that
reaches each router: FastAPI builds an included router lazily, about 100 ms of the JobManager's CPU
here, which the first job on a fresh cluster used to pay while its tasks were reporting."""
from __future__ import annotations

import gc
from pathlib import Path

from fastapi.testclient import TestClient
from pydantic import TypeAdapter

from millstream.backend.app import create_app
from millstream.backend.settings import Settings


def _type_adapters() -> int:
    return sum(1 for o in gc.get_objects() if isinstance(o, TypeAdapter))


def test_the_first_requests_to_each_router_build_no_validators(redis_url: str, tmp_path: Path) -> None:
    settings = Settings(redis_url=redis_url, data_dir=tmp_path, database_url=None)
    with TestClient(create_app(settings)) as api:
        built = _type_adapters()
        for path in ("/overview", "/jobs/overview", "/taskmanagers", "/jars", "/jobmanager/config", "/v1/overview", "/"):
            assert api.get(path, follow_redirects=False).status_code < 400, path
        assert api.get("/jobs/0123456789abcdef0123456789abcdef").status_code == 404
        assert _type_adapters() == built
