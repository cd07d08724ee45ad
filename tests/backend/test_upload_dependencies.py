"""-pyfs/-pyarch/-pyreq in the program arguments of an uploaded program (REST and dashboard), on a real
app with a real Redis: the options are taken out of the arguments, name files of the upload only, and
make the helper importable by the program as `millstream run -pyfs` does. (That the files reach the
TaskManagers is tests/integration/test_python_files.py's upload test, on a real cluster.)"""
from __future__ import annotations

import html
import io
import json
import os
import zipfile
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests.backend.test_bad_input import api, settings  # noqa: F401 - fixtures: the real app

PROGRAM = """
import json, sys
import helper                     # only importable through -pyfs: libs/ is not on the program's path
from pyflink.datastream import StreamExecutionEnvironment
env = StreamExecutionEnvironment.get_execution_environment()
env.from_collection([1, 2]).map(lambda x: x).print()
env.execute(helper.TAG + json.dumps(sys.argv[1:]))
"""


def _zip(program: str = PROGRAM) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("main.py", program)
        zf.writestr("libs/helper.py", "TAG = 'helped'\n")
        zf.writestr("libs/requirements.txt", "\n")
    return buf.getvalue()


def _upload(api: TestClient) -> str:
    r = api.post("/jars/upload", files={"jarfile": ("p.zip", _zip())})
    assert r.status_code == 200, r.text
    return r.json()["filename"]


def _csrf_headers(api: TestClient) -> dict[str, str]:
    r = api.get("/ui/submit")
    csrf = r.cookies.get("millstream_csrf") or api.cookies.get("millstream_csrf")
    return {"HX-Request": "true", **({"X-CSRF-Token": csrf} if csrf else {})}


def test_pyfs_among_the_program_arguments_makes_the_helper_importable(api: TestClient) -> None:
    jar = _upload(api)
    args = ["--in", "x", "-pyfs", "libs/helper.py", "y", "--pyRequirements=libs/requirements.txt", "-z"]
    r = api.post(f"/jars/{jar}/plan", json={"programArgsList": args})
    assert r.status_code == 200, r.text
    # the other arguments reach the program unchanged and in order; the options do not
    assert r.json()["plan"]["name"] == "helped" + json.dumps(["--in", "x", "y", "-z"])
    r = api.post(f"/jars/{jar}/plan", json={"programArgsList": ["--pyFiles=libs/helper.py"]})
    assert r.status_code == 200 and r.json()["plan"]["name"] == "helped[]", r.text


def test_without_pyfs_the_helper_is_not_importable(api: TestClient) -> None:
    """What makes the test above mean something."""
    r = api.post(f"/jars/{_upload(api)}/plan", json={"programArgsList": ["x"]})
    assert r.status_code == 400 and "No module named 'helper'" in r.text, r.text


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["-pyfs", "../../../../etc/passwd"], "-pyfs: '../../../../etc/passwd' is outside the uploaded program's directory"),
        (["-pyfs", "/etc/hostname"], "-pyfs: '/etc/hostname' is outside"),
        (["-pyfs", "libs/escape"], "-pyfs: 'libs/escape' is outside"),  # a symlink out of the upload
        (["-pyarch", "../archive.zip"], "-pyarch: '../archive.zip' is outside"),  # the stored upload itself
        (["-pyreq", "libs/requirements.txt#/tmp"], "-pyreq: '/tmp' is outside"),
        (["-pyfs", "libs/missing.py"], "does not exist"),
        (["a", "-pyfs"], "-pyfs needs a value"),
    ],
)
def test_a_path_out_of_the_upload_is_a_400_and_nothing_runs(
    api: TestClient, settings, args: list[str], fragment: str  # noqa: F811
) -> None:
    jar = _upload(api)
    # a symlink planted next to the unpacked files (a zip cannot carry one: the upload refuses it)
    os.symlink("/etc", next(settings.upload_dir.glob(f"{jar}/program")) / "libs" / "escape")
    r = api.post(f"/jars/{jar}/run", json={"programArgsList": ["-pyfs", "libs/helper.py", *args]})
    assert r.status_code == 400 and fragment in r.json()["errors"][0], r.text
    r = api.post(f"/ui/submit/{jar}/run", data={"args": " ".join(args)}, headers=_csrf_headers(api))
    assert r.status_code == 400 and fragment in html.unescape(r.text), r.text
    assert api.get("/jobs/overview").json()["jobs"] == []


def test_the_dashboard_run_form_takes_the_options_from_its_arguments(api: TestClient) -> None:
    jar = _upload(api)
    r = api.post(f"/ui/submit/{jar}/plan", data={"args": "a -pyfs libs/helper.py b"}, headers=_csrf_headers(api))
    assert r.status_code == 200, r.text
    assert "helped" in r.text
