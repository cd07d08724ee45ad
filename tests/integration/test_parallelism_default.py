"""A cluster started with MILLSTREAM_PARALLELISM_DEFAULT (Flink's ``parallelism.default``) runs a program
that sets no parallelism at that parallelism, through ``millstream run`` and an uploaded program alike;
``-p`` and the program's own Configuration still win."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Iterator

import pytest

from tests.integration.cluster import Cluster

pytestmark = pytest.mark.integration

JOB_LINE = re.compile(r"^Job ([0-9a-f]{32}) (\w+)$", re.M)

# No set_parallelism anywhere; with "own" its Configuration names parallelism.default 1 itself.
PROGRAM = '''
import json, sys
from pyflink.common import Configuration
from pyflink.datastream import StreamExecutionEnvironment
config = Configuration()
if "own" in sys.argv:
    config.set_integer("parallelism.default", 1)
env = StreamExecutionEnvironment.get_execution_environment(config)
env.from_collection([1, 2, 3, 4]).map(lambda x: x * 2).print()
print(json.dumps({"parallelism": env.get_parallelism()}))
env.execute("unparallelised")
'''


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path / "c")
    c.env["MILLSTREAM_PARALLELISM_DEFAULT"] = "2"
    try:
        c.start(taskmanagers=1, slots=2)
        # The client is not given the setting: the default it applies must come from the cluster.
        del c.env["MILLSTREAM_PARALLELISM_DEFAULT"]
        yield c
    finally:
        c.stop()


def _run(cluster: Cluster, program: Path, *args: str, options: tuple[str, ...] = ()) -> tuple[int, int]:
    """(what the program saw as its parallelism, the job's widest vertex)."""
    res = cluster.run(program, *args, options=options)
    assert res.returncode == 0, res.stdout + res.stderr
    (jid, state), = JOB_LINE.findall(res.stdout)
    assert state == "FINISHED"
    said = json.loads(next(ln for ln in res.stdout.splitlines() if ln.startswith("{")))
    return said["parallelism"], max(v["parallelism"] for v in cluster.job(jid)["vertices"])


def test_the_clusters_default_parallelism_applies_when_nothing_else_sets_one(cluster: Cluster, tmp_path: Path) -> None:
    program = tmp_path / "unparallelised.py"
    program.write_text(PROGRAM)

    assert _run(cluster, program) == (2, 2)
    assert _run(cluster, program, options=("-p", "1")) == (1, 1)
    assert _run(cluster, program, "own") == (1, 1)

    # An uploaded program run without a parallelism gets the cluster's default too.
    with open(program, "rb") as f:
        jar_id = cluster.http.post("/jars/upload", files={"jarfile": ("unparallelised.py", f)}).json()["filename"]
    plan = cluster.http.post(f"/jars/{jar_id}/plan", json={}).json()["plan"]
    assert max(n["parallelism"] for n in plan["nodes"]) == 2
