"""Rescaled restore of large keyed state: what each new subtask reads and how long it takes (issue 16).

A rescale 2 -> 3 of the 3,000,000-key count spent 70-83 s before the first record
(docs/large-state.md), nearly all of it in each new subtask reading both old subtasks' whole
state files and hashing every key to keep its own. This measures that step alone, on real
files sealed as a cluster seals them, in one run, for both formats:

- ``whole``: the format before key-grouped files (a heap snapshot's tables whole, the on-disk
  backend's records in one blob), restored through the same fallback the task uses for such files;
- ``key-grouped``: a part per key group (``engine/checkpoint/state_file``); each new subtask reads
  the head and only the parts of its key groups.

N keys (ints, key type LONG as in ``large_state_job.py``) are loaded into ``--old`` subtasks of the
chosen backend; each writes the snapshot a savepoint takes (heap: in a forked child, timed: the
key-grouped one hashes every key there, off the task thread); then each of ``--new`` subtasks
restores its share into a fresh backend, one after the other (in a cluster they run in parallel
processes, so the slowest is the time to the first record). Reported per format: snapshot seconds
(slowest old subtask), bytes read and restore seconds (slowest new subtask), and their ratio.

    .venv/bin/python benchmarks/large_state_restore_bench.py --keys 3000000 --backends hashmap,rocksdb
"""
from __future__ import annotations

import argparse
import os
import pickle
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MAX_P = 128  # the default max parallelism
SPEC = "LONG"


class _Operator:
    ctx = SimpleNamespace(operator_name="count")

    def timer_services(self) -> dict:
        return {}

    def keyed_tables(self) -> dict:
        return {}


def _backend(kind: str, tmp: str, i: int) -> Any:
    from millstream.engine.runtime.state.backend import create_keyed_backend

    return create_keyed_backend(kind, MAX_P, os.path.join(tmp, f"lmdb-{kind}-{i}-{time.monotonic_ns()}"), key_spec=SPEC)


def _load(kind: str, keys: int, old: int, tmp: str) -> list[Any]:
    from millstream.engine.datastream.state import ValueStateDescriptor
    from millstream.engine.runtime.key_groups import assign_key_to_operator

    backends = [_backend(kind, tmp, i) for i in range(old)]
    tables = [b.table("count", "value") for b in backends]
    for k in range(keys):
        tables[assign_key_to_operator(k, MAX_P, old, SPEC)][k] = (k, 1)
    for b in backends:
        b.get_state(ValueStateDescriptor("count", None))
        getattr(b, "flush", lambda: None)()
    return backends


def _snapshot(backend: Any, grouped: bool) -> tuple[bytes, float]:
    """The savepoint's state file bytes of one old subtask, and the seconds taken to produce them."""
    from millstream.engine.runtime import forked_snapshot
    from millstream.engine.runtime.state.key_grouped_state import encode_state
    from millstream.engine.runtime.state.task_state_manager import snapshot_keyed_async, snapshot_keyed_tables

    t0 = time.perf_counter()
    if getattr(backend, "snapshot_in_fork", False):
        def materialise() -> bytes:
            state = snapshot_keyed_tables(backend, _Operator(), grouped)
            return encode_state(state) if grouped else pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)

        data = forked_snapshot.ForkedSnapshot.start(materialise).result()
    else:
        state = snapshot_keyed_async(backend, _Operator())()
        data = encode_state(state) if grouped else pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)
    return data, time.perf_counter() - t0


def _restore(kind: str, handles: dict[int, str], j: int, new: int, old: int, tmp: str) -> tuple[float, int, int]:
    """(seconds, bytes read, keys restored) of new subtask ``j``: read, decode, put back."""
    from millstream.engine.checkpoint.rescale import OperatorRestore
    from millstream.engine.checkpoint.state_origin import StateOrigin
    from millstream.engine.checkpoint.storage import FileSystemCheckpointStorage
    from millstream.engine.runtime.state.key_grouped_state import decode_state
    from millstream.engine.runtime.state.task_state_manager import restore_keyed

    spec = OperatorRestore("count", j, new, old, MAX_P, handles)
    backend = _backend(kind, tmp, 100 + j)
    t0 = time.perf_counter()
    read = 0
    loaded = {}
    for i, h in handles.items():
        data = FileSystemCheckpointStorage.read_state_file_key_groups(h, spec.key_groups, StateOrigin("j" * 32, 1))  # as measure wrote them
        read += len(data)
        loaded[i] = decode_state(data)
    restore_keyed(backend, _Operator(), loaded, spec)
    seconds = time.perf_counter() - t0
    n = len(backend.table("count", "value"))
    getattr(backend, "close", lambda: None)()
    return seconds, read, n


def measure(kind: str, keys: int, old: int, new: int) -> list[str]:
    from millstream.engine.checkpoint import storage as storage_module
    from millstream.engine.checkpoint.storage import METADATA_FILE, FileSystemCheckpointStorage

    storage_module.seal_state_files("bench-secret-" + "x" * 32)  # as every cluster process does
    tmp = tempfile.mkdtemp(prefix="restore-bench-")
    lines = []
    try:
        backends = _load(kind, keys, old, tmp)
        results = {}
        for grouped in (False, True):
            fmt = "key-grouped" if grouped else "whole"
            store = FileSystemCheckpointStorage(os.path.join(tmp, fmt))
            handles, snap_s = {}, []
            for i, b in enumerate(backends):
                data, s = _snapshot(b, grouped)
                snap_s.append(s)
                handles[i] = store.write_task_state("j" * 32, 1, ("v", i), "count", data)
            Path(handles[0]).with_name(METADATA_FILE).write_text("{}")
            restores = [_restore(kind, handles, j, new, old, tmp) for j in range(new)]
            assert sum(r[2] for r in restores) == keys, (fmt, [r[2] for r in restores])
            results[fmt] = (max(snap_s), max(r[0] for r in restores), max(r[1] for r in restores), sum(os.path.getsize(h) for h in handles.values()))
            lines.append(
                f"{kind} {keys} keys {old}->{new} {fmt}: savepoint snapshot {max(snap_s):.2f} s (slowest old subtask), "
                f"files {results[fmt][3] / 1e6:.1f} MB; restore slowest new subtask {results[fmt][1]:.2f} s "
                f"(each {', '.join(f'{r[0]:.2f}' for r in restores)} s), read {results[fmt][2] / 1e6:.1f} MB of them"
            )
        w, g = results["whole"], results["key-grouped"]
        lines.append(f"{kind}: restore key-grouped / whole = {g[1] / w[1]:.2f} (time), {g[2] / w[2]:.2f} (bytes read); "
                     f"snapshot key-grouped / whole = {g[0] / w[0]:.2f}")
        for b in backends:
            getattr(b, "close", lambda: None)()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return lines


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=3_000_000)
    ap.add_argument("--backends", default="hashmap,rocksdb")
    ap.add_argument("--old", type=int, default=2)
    ap.add_argument("--new", type=int, default=3)
    args = ap.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, load {os.getloadavg()[0]:.1f}")
    for kind in args.backends.split(","):
        for line in measure(kind.strip(), args.keys, args.old, args.new):
            print(line, flush=True)


if __name__ == "__main__":
    main()
