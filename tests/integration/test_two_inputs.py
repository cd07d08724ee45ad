"""connect, KeyedCoProcessFunction and broadcast state on a real cluster at parallelism 1 and 4."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.cluster import Cluster

PROGRAM = Path(__file__).parent / "programs" / "two_inputs.py"


def expected() -> dict:
    join = [[f"c{k}", name, [i for i in range(20) if i % 4 == k]] for k, name in enumerate(["ada", "bob", "cy", "di"])]
    broadcast = sorted([f"k{i % 5}", i] for i in range(60) if i % 3 == 0 and i % 5 != 2)
    return {
        "co_map": [["number", 10], ["number", 20], ["number", 30], ["word", 1], ["word", 2]],
        "join": sorted(join),
        "broadcast": broadcast,
    }


@pytest.mark.parametrize("parallelism", [1, 2, 4])
def test_two_input_streams(cluster: Cluster, parallelism: int) -> None:
    res = cluster.run(PROGRAM, options=("-p", str(parallelism)))
    assert res.returncode == 0, res.stderr[-3000:]
    got = json.loads(next(ln for ln in res.stdout.splitlines() if ln.startswith("{")))
    assert got == expected()
