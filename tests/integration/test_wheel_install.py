"""A non-editable install, as the Dockerfile makes it: the wheel built from this tree is installed
into a fresh venv, and ``millstream cluster start`` runs from an empty directory.

The package itself comes only from the wheel (the venv has no access to this tree or to the
worktree's venv); its dependencies come from pip's usual sources. The dashboard must answer with
its static assets, a checkpointed job must finish, and its checkpoints must be where
``MILLSTREAM_CHECKPOINT_DIR`` says.

The wheel is installed without extras, so this is also the streaming-only install: no PySpark, no
PostgreSQL driver. Streaming works; a BATCH job is refused saying to install millstream[spark], and
the REST API and dashboard say Spark is not available.

The ``pyflink`` name comes from a ``.pth`` file, not a ``pyflink/`` directory: a (small, built here)
apache-flink installs next to it without either overwriting a file of the other, takes the plain
``import pyflink`` while installed and gives it back when uninstalled.
"""
from __future__ import annotations

import base64
import csv
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
import zipfile
from importlib import metadata
from pathlib import Path

import httpx
import pytest

from tests.integration.cluster import free_port

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
# Local state and build output that must not reach the wheel (a stale build/lib would).
_NOT_SOURCES = shutil.ignore_patterns(
    ".venv", ".git", "var", "build", "dist", "test-artifacts", "*.egg-info", "__pycache__", ".pytest_cache", "tests"
)

CHECKPOINTED_JOB = """
from pyflink.common import WatermarkStrategy
from pyflink.datastream import ExternalizedCheckpointRetention, StreamExecutionEnvironment
from pyflink.datastream.connectors import DataGeneratorSource

env = StreamExecutionEnvironment.get_execution_environment()
env.enable_checkpointing(200)
env.get_checkpoint_config().set_externalized_checkpoint_retention(
    ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION)
source = DataGeneratorSource(lambda i: ("k%d" % (i % 4), 1), 400, records_per_second=100)
(env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers").uid("numbers")
    .key_by(lambda t: t[0]).reduce(lambda a, b: (a[0], a[1] + b[1])).uid("counts")
    .filter(lambda t: t[1] == 100).print())
env.execute("wheel checkpointed count")
"""

BATCH_JOB = """
from pyflink.datastream import RuntimeExecutionMode, StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_runtime_mode(RuntimeExecutionMode.BATCH)
data = env.from_collection([("a", 1), ("b", 2), ("a", 3)])
print(sorted(data.key_by(lambda t: t[0]).sum(1).execute_and_collect("batch sum")))
"""


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    result = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert result.returncode == 0, f"{cmd} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    """A fresh venv holding the wheel built from this tree (without the spark extra) and its dependencies."""
    work = tmp_path_factory.mktemp("wheel")
    src = work / "src"
    shutil.copytree(ROOT, src, ignore=_NOT_SOURCES)
    dist = work / "dist"
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(dist), str(src)], timeout=300)
    wheels = list(dist.glob("millstream-*.whl"))
    assert len(wheels) == 1, wheels
    env_dir = work / "venv"
    # No pip of its own: this interpreter's pip installs into it (--python), which saves ~10 s.
    _run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], timeout=120)
    python = env_dir / "bin" / "python"
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", str(wheels[0])], timeout=600)
    return env_dir


def _clean_env(venv: Path, **extra: str) -> dict[str, str]:
    """This process's environment without any Millstream setting, Python path or active venv."""
    drop = ("REDIS_URL", "DATABASE_URL", "SPARK_MASTER", "PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("MILLSTREAM_") and k not in drop}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def test_the_package_comes_from_the_wheel(venv: Path, tmp_path: Path):
    out = _run(
        [str(venv / "bin" / "python"), "-c", "from millstream import backend, engine, migrations; import pyflink; "
         "print(backend.__file__); print(engine.__file__); print(migrations.__file__)"],
        cwd=tmp_path, env=_clean_env(venv),
    ).stdout.split()
    site = str(venv)
    assert out and all(path.startswith(site) for path in out), out
    site_packages = _site_packages(venv)
    # Nothing under the generic names, nor a pyflink/ directory apache-flink would share: only
    # millstream/ and the .pth file (with its module) that serve the pyflink name.
    assert not [n for n in ("engine", "backend", "migrations", "pyflink") if (site_packages / n).exists()], sorted(
        p.name for p in site_packages.iterdir())
    assert (site_packages / "millstream-pyflink.pth").is_file()
    frontend = site_packages / "millstream" / "backend" / "frontend"
    assert (frontend / "templates" / "base.html").is_file()
    assert (frontend / "static" / "vendor" / "htmx" / "htmx.min.js").is_file()


def _site_packages(venv: Path) -> Path:
    return next((venv / "lib").glob("python3*/site-packages"))


def test_a_plain_import_gets_millstreams_pyflink(venv: Path, tmp_path: Path):
    out = _run(
        [str(venv / "bin" / "python"), "-c", "import pyflink; from pyflink.datastream import StreamExecutionEnvironment "
         "as E; print(pyflink.__millstream_shim__, E.__module__)"],
        cwd=tmp_path, env=_clean_env(venv),
    ).stdout.split()
    assert out == ["True", "millstream.engine.datastream.stream_execution_environment"], out


def test_extras_are_left_out(venv: Path, tmp_path: Path):
    """Installed without extras: neither PySpark nor the PostgreSQL driver came along."""
    for module in ("pyspark", "psycopg"):
        probe = subprocess.run(
            [str(venv / "bin" / "python"), "-c", f"import {module}"], cwd=tmp_path, env=_clean_env(venv),
            capture_output=True, text=True,
        )
        assert probe.returncode != 0 and "No module named" in probe.stderr, (module, probe.stderr)


def test_a_postgresql_url_without_the_driver_says_which_extra(venv: Path, tmp_path: Path):
    result = subprocess.run(
        [str(venv / "bin" / "millstream"), "jobmanager", "--port", str(free_port())], cwd=tmp_path,
        env=_clean_env(venv, DATABASE_URL="postgresql+psycopg://millstream@127.0.0.1:1/millstream",
                       MILLSTREAM_CLUSTER_SECRET="s" * 32, MILLSTREAM_DATA_DIR=str(tmp_path / "var")),
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "install millstream[postgres]" in result.stderr and "Traceback" not in result.stderr, result.stderr


def test_cluster_from_an_empty_directory(venv: Path, tmp_path: Path):
    cwd = tmp_path / "empty"
    cwd.mkdir()
    checkpoints = tmp_path / "shared-checkpoints"
    port = free_port()
    env = _clean_env(venv, MILLSTREAM_PORT=str(port), MILLSTREAM_CHECKPOINT_DIR=str(checkpoints),
                     MILLSTREAM_TASKMANAGERS="1", MILLSTREAM_SLOTS="2")
    proc = subprocess.Popen(
        [str(venv / "bin" / "millstream"), "cluster", "start"], cwd=cwd, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if "Millstream is up" in line or "did not come up" in line:
                break
        logs = cwd / "var" / "log" / "jobmanager.log"
        assert any("Millstream is up" in ln for ln in lines), "".join(lines) + (logs.read_text()[-4000:] if logs.exists() else "")
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=base, timeout=10, follow_redirects=True) as http:
            page = http.get("/")
            assert page.status_code == 200 and "text/html" in page.headers["content-type"]
            assets = re.findall(r'(?:href|src)="(/ui/static/[^"]+)"', page.text)
            assert any(a.endswith(".js") for a in assets) and any(a.endswith(".css") for a in assets), page.text[:2000]
            for asset in assets:
                assert http.get(asset).status_code == 200, asset

            program = tmp_path / "programs" / "job.py"
            program.parent.mkdir()
            program.write_text(CHECKPOINTED_JOB)
            run = subprocess.run(
                [str(venv / "bin" / "millstream"), "run", "-m", base, str(program)],
                cwd=cwd, env=_clean_env(venv), capture_output=True, text=True, timeout=180,
            )
            assert run.returncode == 0 and "FINISHED" in run.stdout, run.stdout + run.stderr
            job_id = re.search(r"Job ([0-9a-f]{32}) FINISHED", run.stdout).group(1)
            stats = http.get(f"/jobs/{job_id}/checkpoints").json()
            assert stats["counts"]["completed"] >= 1, stats
            latest = stats["latest"]["completed"]["external_path"]
            assert Path(latest).resolve().is_relative_to(checkpoints.resolve()), latest

            # Streaming-only install: Spark is said to be missing, and a BATCH job is refused clearly.
            assert http.get("/config").json()["features"]["spark"] is False
            config = {e["key"]: e["value"] for e in http.get("/jobmanager/config").json()}
            assert config["spark_available"].startswith("false") and "millstream[spark]" in config["spark_available"]
            assert config["checkpoint_dir"] == str(checkpoints.resolve())
            assert "install millstream[spark]" in http.get("/ui/jobmanager").text
            batch = tmp_path / "programs" / "batch.py"
            batch.write_text(BATCH_JOB)
            refused = subprocess.run(
                [str(venv / "bin" / "millstream"), "run", "-m", base, str(batch)],
                cwd=cwd, env=_clean_env(venv), capture_output=True, text=True, timeout=180,
            )
            output = refused.stdout + refused.stderr
            assert refused.returncode == 1, output
            assert "install millstream[spark]" in output and "--engine native" in output, output
            assert "Traceback" not in output and "ImportError" not in output, output
        # What the TaskManagers wrote and the JobManager's metadata, both in the one shared directory.
        job_dir = checkpoints / job_id
        assert any(job_dir.glob("chk-*/_metadata")), sorted(p.name for p in job_dir.iterdir())
        assert not (cwd / "var" / "checkpoints").exists(), "checkpoints were written to the default directory"
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def test_an_unknown_setting_is_refused_with_the_closest_name(venv: Path, tmp_path: Path):
    result = subprocess.run(
        [str(venv / "bin" / "millstream"), "cluster", "start"], cwd=tmp_path,
        env=_clean_env(venv, MILLSTREAM_CHEKPOINT_DIR=str(tmp_path / "x")), capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 2
    assert "MILLSTREAM_CHEKPOINT_DIR (did you mean MILLSTREAM_CHECKPOINT_DIR?)" in result.stderr, result.stderr
    assert not (tmp_path / "var").exists(), "nothing may start before the refusal"


# -- apache-flink in the same venv -----------------------------------------------------------------
APACHE_MARKER = "REAL_APACHE_FLINK = True\n"
ALIAS_PROGRAM = """
import pyflink
from pyflink.datastream import StreamExecutionEnvironment
env = StreamExecutionEnvironment.get_execution_environment()
print(sorted(env.from_collection([1, 2, 3]).map(lambda x: x * 10).execute_and_collect()),
      getattr(pyflink, "__millstream_shim__", False))
"""


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _fake_apache_flink_wheel(directory: Path) -> Path:
    """A wheel named like Apache Flink's, holding what matters here: a ``pyflink`` package (with a
    marker module) at the root of site-packages. Written directly (a wheel is a zip with a
    dist-info), which saves a build backend in an isolated environment."""
    info = "apache_flink-2.3.0.dist-info"
    files = {
        "pyflink/__init__.py": b"",
        "pyflink/apache_marker.py": APACHE_MARKER.encode(),
        f"{info}/METADATA": b"Metadata-Version: 2.1\nName: apache-flink\nVersion: 2.3.0\n",
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: millstream-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = [_record_line(name, data) for name, data in files.items()] + [f"{info}/RECORD,,"]
    path = directory / "apache_flink-2.3.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
        z.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return path


def _record(site_packages: Path, dist: str) -> dict[str, str]:
    """A distribution's installed files (relative to site-packages) and their recorded hashes."""
    (info,) = site_packages.glob(f"{dist}-*.dist-info")
    with open(info / "RECORD", newline="") as f:
        return {name: digest for name, digest, _size in csv.reader(f)}


def _changed(site_packages: Path, record: dict[str, str]) -> list[str]:
    """The recorded files whose content is no longer what was installed (or which are gone)."""
    changed = []
    for name, digest in record.items():
        if not digest:
            continue  # RECORD itself, compiled files
        path = site_packages / name
        data = path.read_bytes() if path.is_file() else None
        if data is None or _record_line(name, data).split(",")[1] != digest:
            changed.append(name)
    return changed


def _pip(venv: Path, *args: str) -> None:
    _run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), *args], timeout=300)


def test_apache_flink_installs_side_by_side_and_millstream_run_still_runs_on_millstream(venv: Path, tmp_path: Path):
    site_packages = _site_packages(venv)
    python = str(venv / "bin" / "python")
    ours = _record(site_packages, "millstream")
    assert not _changed(site_packages, ours)
    program = tmp_path / "prog.py"
    program.write_text(ALIAS_PROGRAM)
    _pip(venv, "install", "--quiet", "--no-deps", "--no-index", str(_fake_apache_flink_wheel(tmp_path)))
    try:
        theirs = _record(site_packages, "apache_flink")
        assert "pyflink/__init__.py" in theirs
        assert not set(ours) & set(theirs), "both distributions own these files"
        assert not _changed(site_packages, ours), "installing apache-flink changed Millstream's files"

        plain = _run([python, "-c", "import pyflink.apache_marker as m, pyflink; print(m.REAL_APACHE_FLINK, pyflink.__file__)"],
                     cwd=tmp_path, env=_clean_env(venv)).stdout.split()
        assert plain == ["True", str(site_packages / "pyflink" / "__init__.py")], plain

        run = subprocess.run([str(venv / "bin" / "millstream"), "run", "--local", str(program)], cwd=tmp_path,
                             env=_clean_env(venv), capture_output=True, text=True, timeout=120)
        assert run.returncode == 0 and "[10, 20, 30] True" in run.stdout, run.stdout + run.stderr
        assert "apache-flink 2.3.0 is installed in this environment as well" in run.stderr, run.stderr
        assert "imports apache-flink's pyflink and so runs it on real PyFlink" in run.stderr, run.stderr
    finally:
        _pip(venv, "uninstall", "--quiet", "--yes", "apache-flink")

    assert not (site_packages / "pyflink").exists(), sorted(p.name for p in (site_packages / "pyflink").rglob("*"))
    assert not _changed(site_packages, ours), "uninstalling apache-flink changed Millstream's files"
    back = _run([python, str(program)], cwd=tmp_path, env=_clean_env(venv))
    assert "[10, 20, 30] True" in back.stdout, back.stdout + back.stderr


def test_the_editable_install_serves_pyflink_outside_the_repository(tmp_path: Path):
    """``make install`` (``pip install -e .``): the same .pth file, the modules from this tree."""
    site_packages = Path(sysconfig.get_paths()["purelib"])
    # Asked of site-packages alone: the source tree's own millstream.egg-info is on the path too.
    installed = list(metadata.distributions(name="millstream", path=[str(site_packages)]))
    direct_url = json.loads(installed[0].read_text("direct_url.json") or "{}") if installed else {}
    if not direct_url.get("dir_info", {}).get("editable"):
        pytest.skip("this interpreter's millstream is not an editable install")
    project = Path(direct_url["url"].removeprefix("file://")).resolve()
    assert (site_packages / "millstream-pyflink.pth").is_file()
    assert not (site_packages / "pyflink").exists()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    out = _run(
        [sys.executable, "-c", "import pyflink; from pyflink.datastream import StreamExecutionEnvironment as E; "
         "import sys; print(pyflink.__file__, sys.modules[E.__module__].__file__)"],
        cwd=tmp_path, env=env,
    ).stdout.split()
    assert len(out) == 2 and all(Path(p).resolve().is_relative_to(project) for p in out), (out, project)
