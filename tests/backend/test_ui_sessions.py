"""Dashboard sessions and bearer tokens on a real app (real Redis, real SQLite):
a login expires, logout revokes it server-side, sessions survive a JobManager restart,
a token change ends them, and the bearer scheme is case-insensitive."""
from __future__ import annotations

import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from millstream.backend.app import create_app
from millstream.backend.settings import Settings
from millstream.backend.ui.security import SESSION_COOKIE
from tests.backend.test_security import PROGRAM

UI = {"HX-Request": "true"}


def client(redis_url: str, tmp_path: Path, token: str = "tok", **overrides) -> TestClient:
    s = Settings(redis_url=redis_url, data_dir=tmp_path, cluster_secret="s", auth_token=token, auth_reads=True, **overrides)
    return TestClient(create_app(s), base_url="http://testserver")


def login(c: TestClient, token: str = "tok") -> str:
    r = c.post("/ui/login", data={"token": token}, headers=UI)
    assert r.status_code == 200, r.text
    cookie = r.cookies.get(SESSION_COOKIE)
    assert cookie and "tok" not in cookie
    assert "max-age=" in r.headers["set-cookie"].lower()
    return cookie


def page_status(c: TestClient, cookie: str) -> int:
    return c.get("/ui/jobs", cookies={SESSION_COOKIE: cookie}, follow_redirects=False).status_code


def test_logout_revokes_the_session_server_side(redis_url: str, tmp_path: Path):
    with client(redis_url, tmp_path) as c:
        cookie = login(c)
        assert page_status(c, cookie) == 200
        c.cookies.set(SESSION_COOKIE, cookie, path="/ui")
        assert c.post("/ui/logout", headers=UI).status_code == 200
        c.cookies.clear()
        # A copy of the cookie kept elsewhere (another tab, a thief) is dead too.
        assert page_status(c, cookie) == 303


def test_a_session_expires(redis_url: str, tmp_path: Path):
    with client(redis_url, tmp_path, session_ttl_s=1.0) as c:
        cookie = login(c)
        assert page_status(c, cookie) == 200
        time.sleep(1.2)
        assert page_status(c, cookie) == 303


def test_sessions_survive_a_restart_and_end_with_the_token(redis_url: str, tmp_path: Path):
    with client(redis_url, tmp_path) as c:
        cookie = login(c)
    with client(redis_url, tmp_path) as c:  # a new JobManager on the same database
        assert page_status(c, cookie) == 200
    with client(redis_url, tmp_path, token="rotated") as c:
        assert page_status(c, cookie) == 303


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER", "BeArEr"])
def test_the_bearer_scheme_is_case_insensitive(redis_url: str, tmp_path: Path, scheme: str):
    with client(redis_url, tmp_path) as c:
        r = c.post("/jars/upload", files={"jarfile": ("p.py", PROGRAM)}, headers={"Authorization": f"{scheme} tok"})
        assert r.status_code == 200, r.text
        assert c.get("/audit", headers={"Authorization": f"{scheme} tok"}).json()["entries"][0]["actor"] == "token"
        assert c.get("/overview", headers={"Authorization": f"{scheme} TOK"}).status_code == 401  # the token is exact
        assert c.get("/overview", headers={"Authorization": "Basic tok"}).status_code == 401
