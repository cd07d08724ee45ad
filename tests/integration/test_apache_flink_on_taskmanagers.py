"""TaskManagers whose environment has apache-flink's ``pyflink`` importable (here first on the
path, as an installed apache-flink would be): user code that imports ``pyflink`` while it runs in a
slot process (a function body, a module shipped with the job) still gets Millstream's API, since
the slot process puts Millstream's alias first. A plain import there would get Apache Flink's."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import pytest

from tests.integration.cluster import Cluster

pytestmark = pytest.mark.integration

PROGRAM = """
from pyflink.datastream import StreamExecutionEnvironment


def tag(x):
    # Runs in a slot process: the imports happen there, not in the client.
    import pyflink
    from pyflink.common import Row
    return (x, getattr(pyflink, "__millstream_shim__", False), Row(v=x * 10).v)


env = StreamExecutionEnvironment.get_execution_environment()
print(sorted(env.from_collection([1, 2, 3]).map(tag).execute_and_collect()))
"""


@pytest.fixture(scope="module")
def cluster_with_apache_flink(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    site = tmp_path_factory.mktemp("apache-site")
    meta = site / "apache_flink-2.3.0.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: apache-flink\nVersion: 2.3.0\n")
    (site / "pyflink").mkdir()
    (site / "pyflink" / "__init__.py").write_text("REAL_APACHE_FLINK = True\n")
    c = Cluster(tmp_path_factory.mktemp("cluster"))
    c.env["PYTHONPATH"] = os.pathsep.join(p for p in (str(site), c.env.get("PYTHONPATH", "")) if p)
    try:
        yield c.start(taskmanagers=1, slots=1)
    finally:
        c.stop()


def test_user_code_in_slot_processes_imports_millstreams_pyflink(cluster_with_apache_flink: Cluster, tmp_path: Path):
    program = tmp_path / "prog.py"
    program.write_text(PROGRAM)
    run = cluster_with_apache_flink.run(program, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    assert "[(1, True, 10), (2, True, 20), (3, True, 30)]" in run.stdout, run.stdout + run.stderr[-3000:]
