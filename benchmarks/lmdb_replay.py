"""Offline replay of one subtask's share of the large-state count on the on-disk backend (issue 16).

``python benchmarks/lmdb_replay.py KEYS EVERY {none,incremental,full}`` feeds KEYS new LONG keys, in
batches of 1,024, through the reduce operator's state access pattern (``table.get`` then
``table[k] = ...``) into an ``LmdbKeyedStateBackend``; with checkpoints, one every EVERY keys: the
snapshot is taken at the barrier on this thread, as the task does, and finished on a writer thread
(``snapshot_keyed_incremental`` into real shared files, or a full streamed snapshot), each confirmed
once written. No cluster, no network: what a checkpoint costs the task thread and the writer, in CPU
seconds (``thread_time``), without the machine's other load mixed in. Prints one line and the size of
LMDB's file at the end (a read transaction held open while the task writes grows it).
"""
from __future__ import annotations

import argparse
import itertools
import os
import queue
import shutil
import tempfile
import threading
import time
from typing import Any

from millstream.engine.checkpoint.storage import seal_state_files, write_shared_file
from millstream.engine.runtime.state.incremental import encode_groups
from millstream.engine.runtime.state.key_grouped_state import RECORD_GROUPS
from millstream.engine.runtime.state.lmdb_backend import LmdbKeyedStateBackend
from millstream.engine.runtime.state.state_chain import SharedFile
from millstream.engine.runtime.state.task_state_manager import snapshot_keyed_async, snapshot_keyed_incremental

MAX_P = 128
BATCH = 1024


class _Operator:
    """An operator with no timers and no keyed tables of its own (a reduce's)."""

    def timer_services(self) -> dict:
        return {}

    def keyed_tables(self) -> dict:
        return {}


def replay(keys: int, every: int, mode: str) -> str:
    seal_state_files("r" * 32)  # sealed, as a cluster's slot processes write them
    root = tempfile.mkdtemp(prefix="lmdb-replay-")
    shared = os.path.join(root, "shared")
    os.makedirs(shared)
    backend = LmdbKeyedStateBackend(MAX_P, os.path.join(root, "lmdb"), incremental=mode == "incremental", key_spec="LONG")
    table = backend.table("_reduce", "value")
    names = itertools.count()
    jobs: queue.Queue = queue.Queue()
    writer_cpu = [0.0]

    def write_file(kind: str, parts: Any) -> SharedFile:
        name = f"op-0-{next(names)}.{kind}"
        size, index = write_shared_file(shared, name, parts, "replay")
        return SharedFile(name, kind, size, tuple(index))

    def writer() -> None:
        while (job := jobs.get()) is not None:
            cid, finish = job
            t0 = time.thread_time()
            finish()
            writer_cpu[0] += time.thread_time() - t0
            if mode == "incremental":
                backend.notify_checkpoint_complete(cid)

    thread = threading.Thread(target=writer)
    thread.start()
    wall0, cpu0 = time.time(), time.thread_time()
    barrier_cpu, cid = 0.0, 0
    for start in range(0, keys, BATCH):
        for k in range(start, min(keys, start + BATCH)):
            cur = table.get(k, None)
            table[k] = (k, 1) if cur is None else (k, cur[1] + 1)
        if mode != "none" and (start // BATCH + 1) % max(1, every // BATCH) == 0:
            cid += 1
            t0 = time.thread_time()
            if mode == "incremental":
                finish = snapshot_keyed_incremental(backend, _Operator(), cid, write_file)
            else:
                read = snapshot_keyed_async(backend, _Operator(), streamed=True)

                def finish(read: Any = read) -> Any:
                    return read()[RECORD_GROUPS](lambda groups: write_file("base", encode_groups(groups)))

            barrier_cpu += time.thread_time() - t0
            jobs.put((cid, finish))
    task_cpu = time.thread_time() - cpu0
    jobs.put(None)
    thread.join()
    wall = time.time() - wall0
    written = sum(os.path.getsize(os.path.join(shared, f)) for f in os.listdir(shared))
    lmdb_mb = os.path.getsize(os.path.join(root, "lmdb", "data.mdb")) / 1e6
    backend.close()
    shutil.rmtree(root)
    return (
        f"{mode} keys={keys} every={every} checkpoints={cid} task_cpu={task_cpu:.2f} s (barriers {barrier_cpu:.2f} s) "
        f"writer_cpu={writer_cpu[0]:.2f} s wall={wall:.2f} s written={written / 1e6:.1f} MB lmdb_file={lmdb_mb:.1f} MB"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("keys", type=int)
    ap.add_argument("every", type=int, help="keys between checkpoints")
    ap.add_argument("mode", choices=["none", "incremental", "full"])
    args = ap.parse_args()
    print(replay(args.keys, args.every, args.mode), flush=True)


if __name__ == "__main__":
    main()
