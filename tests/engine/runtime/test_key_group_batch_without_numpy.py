"""Without numpy (a Spark standalone cluster's executors may run a bare Python), the modules an
executor loads still import, and the batch key-group functions answer what the numpy path answers:
run in a fresh interpreter where ``import numpy`` fails."""
from __future__ import annotations

import json
import subprocess
import sys

from millstream.engine.runtime.key_group_batch import assign_to_key_groups, group_keys, key_group_hashes

KEYS = ["a", "rose", "", "é", 7, -3, 2**40, 2**90, True, None, 1.5, ("x", 1), "rose", 7] * 3

PROGRAM = """
import json, sys
sys.modules["numpy"] = None  # import numpy fails
import millstream.engine.spark.partitions, millstream.engine.spark.translator  # what executors load
from millstream.engine.runtime import key_group_batch as b
from millstream.engine.runtime.partitioner import KeyGroupStreamPartitioner
assert not b.BATCHED
keys = [tuple(k) if isinstance(k, list) else k for k in json.loads(sys.argv[1])]
kgs = b.assign_to_key_groups(keys, 128)
ordered, runs = b.group_keys(keys, kgs)
p = KeyGroupStreamPartitioner(3, lambda v: v, 128)
split = p.split([str(i) for i in range(5000)], None)  # past BATCH_MISSES: the batch path when numpy is there
print(json.dumps([b.key_group_hashes(keys), list(kgs), ordered, runs, [(c, len(v)) for c, v, _ in split]]))
"""


def test_the_batch_functions_answer_the_same_without_numpy():
    from millstream.engine.runtime.partitioner import KeyGroupStreamPartitioner

    out = subprocess.run([sys.executable, "-c", PROGRAM, json.dumps(KEYS)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    hashes, kgs, ordered, runs, split = json.loads(out.stdout)
    assert hashes == key_group_hashes(KEYS)
    expected_kgs = assign_to_key_groups(KEYS, 128)
    assert kgs == expected_kgs.tolist()
    want_ordered, want_runs = group_keys(KEYS, expected_kgs)
    assert ordered == [list(k) if isinstance(k, tuple) else k for k in want_ordered]
    assert [tuple(r) for r in runs] == want_runs
    p = KeyGroupStreamPartitioner(3, lambda v: v, 128)
    assert [tuple(c) for c in split] == [(c, len(v)) for c, v, _ in p.split([str(i) for i in range(5000)], None)]
