"""Upload and file-serving regressions through the real REST app (real Redis, real SQLite):
client names never become paths, hostile zips are refused, and files are addressed by id."""
from __future__ import annotations

import io
import stat
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from millstream.backend.app import create_app
from millstream.backend.settings import Settings

PROGRAM = b"print('hello')\n"
LIMIT = 100_000


@pytest.fixture
def api(redis_url: str, tmp_path: Path) -> Iterator[TestClient]:
    settings = Settings(
        redis_url=redis_url, data_dir=tmp_path / "var", cluster_secret="s", max_upload_bytes=LIMIT
    )
    with TestClient(create_app(settings)) as client:
        yield client


def files_under(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file() or p.is_symlink()}


def make_zip(members: list[tuple[zipfile.ZipInfo | str, bytes]]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for info, data in members:
            zf.writestr(info, data)
    return buf.getvalue()


@pytest.mark.parametrize(
    "name",
    [
        "../../evil.py",
        "..%2f..%2fevil.py",
        "%2e%2e/%2e%2e/evil.py",
        "..%252f..%252fevil.py",
        "/etc/cron.d/evil.py",
        "C:\\Windows\\evil.py",
        "..\\..\\evil.py",
    ],
)
def test_client_file_names_never_become_paths(api: TestClient, tmp_path: Path, name: str):
    r = api.post("/jars/upload", files={"jarfile": (name, PROGRAM)})
    assert r.status_code == 200, r.text
    program = r.json()["filename"]
    assert "/" not in program and "\\" not in program  # one path component, server-generated prefix
    uploads = (tmp_path / "var" / "uploads").resolve()
    written = files_under(tmp_path)
    assert all(uploads in p.resolve().parents for p in written if p.name.endswith("evil.py"))
    assert [p.name for p in written if p.name.endswith("evil.py")] == [program.split("_", 1)[1]]
    assert not Path("/etc/cron.d/evil.py").exists()


@pytest.mark.parametrize(
    "member, why",
    [
        ("../evil.py", "escapes the upload directory"),
        ("program/../../evil.py", "escapes the upload directory"),
        ("/tmp/evil.py", "absolute or foreign path"),
        ("C:/evil.py", "absolute or foreign path"),
    ],
)
def test_zip_members_that_escape_are_refused(api: TestClient, tmp_path: Path, member: str, why: str):
    archive = make_zip([("__main__.py", PROGRAM), (member, b"evil")])
    r = api.post("/jars/upload", files={"jarfile": ("p.zip", archive)})
    assert r.status_code == 400 and why in r.json()["errors"][0]
    assert not any(p.name == "evil.py" for p in files_under(tmp_path))
    assert not Path("/tmp/evil.py").exists() or Path("/tmp/evil.py").read_bytes() != b"evil"
    assert api.get("/jars").json()["files"] == []


def test_percent_encoded_dots_in_a_zip_are_just_names(api: TestClient, tmp_path: Path):
    archive = make_zip([("__main__.py", PROGRAM), ("%2e%2e/%2e%2e/x.py", b"x = 1")])
    r = api.post("/jars/upload", files={"jarfile": ("p.zip", archive)})
    assert r.status_code == 200
    [x] = [p for p in files_under(tmp_path) if p.name == "x.py"]
    assert (tmp_path / "var" / "uploads").resolve() in x.resolve().parents


def test_a_symlink_inside_a_zip_is_refused(api: TestClient, tmp_path: Path):
    link = zipfile.ZipInfo("passwd.py")
    link.external_attr = (stat.S_IFLNK | 0o777) << 16
    archive = make_zip([("__main__.py", PROGRAM), (link, b"/etc/passwd")])
    r = api.post("/jars/upload", files={"jarfile": ("p.zip", archive)})
    assert r.status_code == 400 and "symbolic link" in r.json()["errors"][0]
    assert not any(p.is_symlink() for p in (tmp_path / "var").rglob("*"))


def test_a_zip_bomb_is_refused_before_it_is_unpacked(api: TestClient, tmp_path: Path):
    archive = make_zip([("__main__.py", PROGRAM), ("zeros.bin", bytes(LIMIT * 20))])
    assert len(archive) < LIMIT  # small on the wire, 2 MB unpacked: over the 10x allowance
    r = api.post("/jars/upload", files={"jarfile": ("bomb.zip", archive)})
    assert r.status_code == 400 and "unpacks to more than" in r.json()["errors"][0]
    assert not any(p.name == "zeros.bin" for p in files_under(tmp_path))


def test_an_upload_over_the_limit_is_413(api: TestClient):
    r = api.post("/jars/upload", files={"jarfile": ("big.py", b"#" * (LIMIT + 1))})
    assert r.status_code == 413


def test_entry_points_stay_inside_the_program(api: TestClient):
    archive = make_zip([("__main__.py", PROGRAM)])
    program = api.post("/jars/upload", files={"jarfile": ("p.zip", archive)}).json()["filename"]
    for entry in ("../../../../etc/passwd", "/etc/passwd", "..%2f..%2fetc%2fpasswd"):
        r = api.post(f"/jars/{program}/plan", json={"entryClass": entry})
        assert r.status_code == 400, (entry, r.text)


@pytest.mark.parametrize(
    "path",
    [
        "/taskmanagers/..%2f..%2fetc%2fpasswd/log",
        "/taskmanagers/..%2F..%2Fetc%2Fpasswd/stdout",
        "/taskmanagers/%2e%2e%2f%2e%2e%2fetc%2fpasswd/log",
        "/taskmanagers/..%252f..%252fetc%252fpasswd/log",
        "/taskmanagers/..%2f..%2fetc%2fpasswd/logs",
        "/jars/..%2f..%2fetc%2fpasswd/plan",
        "/jobs/..%2f..%2fetc%2fpasswd",
        "/ui/taskmanagers/..%2f..%2fetc%2fpasswd",
    ],
)
def test_log_and_file_endpoints_take_ids_never_paths(api: TestClient, path: str):
    method = "POST" if path.endswith("/plan") else "GET"
    r = api.request(method, path)
    assert r.status_code == 404, (path, r.status_code)
    assert "root:" not in r.text


def test_deleting_by_a_path_like_id_touches_nothing(api: TestClient, tmp_path: Path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    for jar_id in ("..%2f..%2fvictim.txt", "%2e%2e%2fvictim.txt", "..%252fvictim.txt"):
        assert api.delete(f"/jars/{jar_id}").status_code == 404
    assert victim.read_text() == "keep me"
