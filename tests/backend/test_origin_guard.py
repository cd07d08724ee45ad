"""The OriginGuard on a real app (real Redis, real SQLite) with no token: browsers from other
origins and rebinding Host names are refused, non-browser clients and the own origin are not."""
from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from millstream.backend.app import create_app
from millstream.backend.origin_guard import cross_site_reason, host_allowed
from millstream.backend.settings import Settings

PROGRAM = b"print('hello')\n"


def client(redis_url: str, tmp_path: Path, **overrides) -> TestClient:
    settings = Settings(redis_url=redis_url, data_dir=tmp_path, cluster_secret="s", **overrides)
    return TestClient(create_app(settings), base_url="http://127.0.0.1:8081")


def upload(c: TestClient, **headers: str) -> int:
    return c.post("/jars/upload", files={"jarfile": ("p.py", PROGRAM)}, headers=headers).status_code


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "http://127.0.0.2:9000"},
        {"Origin": "http://localhost:9000"},  # same site as localhost:8081, another origin
        {"Origin": "null"},  # sandboxed frames and file:// pages
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site"},
        {"Referer": "http://evil.example/page"},
        {"Origin": "http://127.0.0.1:8081", "Sec-Fetch-Site": "cross-site"},  # the browser's word wins
    ],
)
def test_cross_site_mutations_are_refused(redis_url: str, tmp_path: Path, headers: dict[str, str]):
    with client(redis_url, tmp_path) as c:
        assert upload(c, **headers) == 403
        assert c.get("/jars").json()["files"] == []


def test_the_own_origin_and_non_browser_clients_may_mutate(redis_url: str, tmp_path: Path):
    with client(redis_url, tmp_path) as c:
        assert upload(c) == 200
        assert upload(c, Origin="http://127.0.0.1:8081", **{"Sec-Fetch-Site": "same-origin"}) == 200
        assert upload(c, **{"Sec-Fetch-Site": "none"}) == 200
        # reads are not affected by Origin: a cross-origin page cannot read the opaque answer anyway
        assert c.get("/overview", headers={"Origin": "http://evil.example"}).status_code == 200


def test_a_configured_cors_origin_may_mutate(redis_url: str, tmp_path: Path):
    with client(redis_url, tmp_path, cors_origins="http://tools.internal:3000") as c:
        assert upload(c, Origin="http://tools.internal:3000", **{"Sec-Fetch-Site": "cross-site"}) == 200
        assert upload(c, Origin="http://other.internal:3000") == 403


def test_host_names_beyond_loopback_need_the_allowed_hosts_setting(redis_url: str, tmp_path: Path):
    with client(redis_url, tmp_path, allowed_hosts="") as c:
        assert c.get("/overview", headers={"Host": "rebind.attacker.example"}).status_code == 403
        assert c.get("/ui/", headers={"Host": "rebind.attacker.example"}).status_code == 403
        assert c.get("/overview", headers={"Host": "localhost:8081"}).status_code == 200
    with client(redis_url, tmp_path, allowed_hosts="jobmanager, millstream.internal") as c:
        assert c.get("/overview", headers={"Host": "jobmanager:8081"}).status_code == 200
        assert c.get("/overview", headers={"Host": "millstream.internal"}).status_code == 200
        assert c.get("/overview", headers={"Host": "rebind.attacker.example"}).status_code == 403


def test_the_bind_address_is_an_allowed_host(redis_url: str, tmp_path: Path):
    with client(redis_url, tmp_path, allowed_hosts="", host="10.1.2.3") as c:
        assert c.get("/overview", headers={"Host": "10.1.2.3:8081"}).status_code == 200


def test_with_a_token_the_token_decides(redis_url: str, tmp_path: Path):
    with client(redis_url, tmp_path, auth_token="t", allowed_hosts="") as c:
        assert c.get("/overview", headers={"Host": "jm.example.com"}).status_code == 200
        assert upload(c, Authorization="Bearer t") == 200


def test_pure_rules():
    assert host_allowed("127.0.0.5:1", []) and host_allowed("[::1]:8081", []) and host_allowed("LOCALHOST", [])
    assert host_allowed("app.localhost:80", [])
    assert not host_allowed("", []) and not host_allowed("127.0.0.1.nip.io", [])
    assert cross_site_reason({"host": "a:1", "origin": "http://a:1"}) is None
    assert cross_site_reason({"host": "a:1", "origin": "http://a:2"})
    assert cross_site_reason({"host": "a:1"}) is None
