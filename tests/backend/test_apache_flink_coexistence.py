"""With apache-flink installed in the same environment, ``millstream run`` says so (a plain
``import pyflink`` then gets Apache Flink's package) and still runs the program on Millstream."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = """
from pyflink.datastream import StreamExecutionEnvironment
import pyflink
env = StreamExecutionEnvironment.get_execution_environment()
print(sorted(env.from_collection([1, 2, 3]).map(lambda x: x * 10).execute_and_collect()), pyflink.__name__)
"""


def _run(tmp_path: Path, site: Path | None) -> subprocess.CompletedProcess:
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MILLSTREAM_")}
    env["PYTHONPATH"] = os.pathsep.join([str(site)] if site else []) + os.pathsep + str(ROOT)
    return subprocess.run(
        [sys.executable, "-m", "millstream.backend.cli", "run", "--local", str(prog)],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )


def _fake_apache_flink(root: Path) -> Path:
    """What pip leaves of apache-flink: its metadata and a ``pyflink`` package of its own."""
    site = root / "site"
    meta = site / "apache_flink-2.3.0.dist-info"
    meta.mkdir(parents=True)
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: apache-flink\nVersion: 2.3.0\n")
    (site / "pyflink").mkdir()
    (site / "pyflink" / "__init__.py").write_text("raise ImportError('the real PyFlink was imported')\n")
    return site


def test_run_names_an_installed_apache_flink_and_still_runs_on_millstream(tmp_path: Path) -> None:
    res = _run(tmp_path, _fake_apache_flink(tmp_path))
    assert res.returncode == 0, res.stderr[-3000:]
    assert "[10, 20, 30]" in res.stdout
    assert "apache-flink 2.3.0 is installed in this environment as well" in res.stderr
    assert "`python program.py` imports apache-flink's pyflink and so runs it on real PyFlink" in res.stderr


def test_no_note_without_apache_flink(tmp_path: Path) -> None:
    res = _run(tmp_path, None)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "[10, 20, 30]" in res.stdout
    assert "apache-flink" not in res.stderr
