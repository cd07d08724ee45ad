"""Offline replay of one subtask's share of the large-state count on the on-disk backend (issue 16).

``python benchmarks/lmdb_replay.py KEYS EVERY {none,incremental,full} [--passes N] [--rounds R]`` feeds
KEYS LONG keys ``--passes`` times, in batches of 1,024, through the reduce operator's state access
(``batch_access``: the batch's keys prepared at once, then ``get`` and a whole-value write a record)
into an ``LmdbKeyedStateBackend``; with checkpoints, one every EVERY records: the snapshot is taken at
the barrier on this thread, as the task does, and finished on a writer thread
(``snapshot_keyed_incremental`` into real shared files, reading them back for rolled compaction as a
task does, or a full streamed snapshot), each confirmed once written. The slot's switch interval and
collector thresholds are used. No cluster, no network: what a checkpoint costs the task thread and the writer, in CPU seconds
(``thread_time``), without the machine's other load mixed in. With ``--rounds``, each round runs
``none`` and then MODE, and prints the task thread's CPU and the task's and writer's together against
``none``'s (``--inline``: the writer's work on the task thread at each barrier, counted apart, which
tells the work from the cost of two threads sharing the interpreter lock). Prints one line per run
and the size of LMDB's file at the end (a read transaction held open while the task writes grows it).
"""
from __future__ import annotations

import argparse
import gc
import itertools
import os
import queue
import shutil
import statistics
import sys
import tempfile
import threading
import time
from typing import Any

from millstream.engine.checkpoint.storage import read_shared_file, seal_state_files, write_shared_file
from millstream.engine.runtime.state.incremental import encode_groups
from millstream.engine.runtime.state.heap_incremental import batch_access
from millstream.engine.runtime.state.key_grouped_state import RECORD_GROUPS
from millstream.engine.runtime.state.lmdb_backend import LmdbKeyedStateBackend
from millstream.engine.runtime.state.state_chain import SharedFile
from millstream.engine.runtime.state.task_state_manager import snapshot_keyed_async, snapshot_keyed_incremental
from millstream.engine.taskexecutor.slot_process import GC_THRESHOLDS, SWITCH_INTERVAL_S

MAX_P = 128
BATCH = 1024


class _Operator:
    """An operator with no timers and no keyed tables of its own (a reduce's)."""

    def timer_services(self) -> dict:
        return {}

    def keyed_tables(self) -> dict:
        return {}


def replay(keys: int, every: int, mode: str, passes: int = 1, inline: bool = False) -> tuple[str, float, float]:
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

    def read_file(name: str, index: list[tuple[int, int, int]]) -> list[tuple[int, bytes]]:
        return read_shared_file(shared, name, index, "replay")

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
    records = keys * passes
    for start in range(0, records, BATCH):
        batch = [n % keys for n in range(start, min(records, start + BATCH))]
        get, put, _ = batch_access(table, batch)
        for k in batch:
            cur = get(k, None)
            put(k, (k, 1) if cur is None else (k, cur[1] + 1))
        if mode != "none" and (start // BATCH + 1) % max(1, every // BATCH) == 0:
            cid += 1
            t0 = time.thread_time()
            if mode == "incremental":
                finish = snapshot_keyed_incremental(backend, _Operator(), cid, write_file, read_file)
            else:
                read = snapshot_keyed_async(backend, _Operator(), streamed=True)

                def finish(read: Any = read) -> Any:
                    return read()[RECORD_GROUPS](lambda groups: write_file("base", encode_groups(groups)))

            barrier_cpu += time.thread_time() - t0
            if inline:  # the writer's work on this thread, its CPU counted apart: no second thread
                t0 = time.thread_time()
                finish()
                if mode == "incremental":
                    backend.notify_checkpoint_complete(cid)
                inline_cpu = time.thread_time() - t0
                writer_cpu[0] += inline_cpu
                cpu0 += inline_cpu
            else:
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
        f"{mode} keys={keys} x {passes} every={every} checkpoints={cid} task_cpu={task_cpu:.2f} s (barriers {barrier_cpu:.2f} s) "
        f"writer_cpu={writer_cpu[0]:.2f} s wall={wall:.2f} s written={written / 1e6:.1f} MB lmdb_file={lmdb_mb:.1f} MB"
    ), task_cpu, writer_cpu[0]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("keys", type=int)
    ap.add_argument("every", type=int, help="records between checkpoints")
    ap.add_argument("mode", choices=["none", "incremental", "full"])
    ap.add_argument("--passes", type=int, default=1, help="records per key")
    ap.add_argument("--rounds", type=int, default=0, help="rounds of none then MODE, with the task CPU ratio of each")
    ap.add_argument("--inline", action="store_true", help="finish each checkpoint on the task thread (its CPU apart)")
    args = ap.parse_args()
    # as in a slot process, where the writer shares the interpreter lock with the task
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    gc.set_threshold(*GC_THRESHOLDS)
    gc.freeze()
    if not args.rounds:
        print(replay(args.keys, args.every, args.mode, args.passes, args.inline)[0], flush=True)
        return
    tasks, both = [], []
    for _ in range(args.rounds):
        line0, cpu0, _ = replay(args.keys, args.every, "none", args.passes)
        line1, cpu1, writer = replay(args.keys, args.every, args.mode, args.passes, args.inline)
        tasks.append(cpu1 / cpu0)
        both.append((cpu1 + writer) / cpu0)  # the slot's CPU for the same records: what its throughput follows
        print(f"{line0}\n{line1}\n{args.mode} / none: task CPU {tasks[-1]:.2f}, task + writer CPU {both[-1]:.2f}", flush=True)
    print(
        f"median task CPU ratio {statistics.median(tasks):.2f} ({', '.join(f'{r:.2f}' for r in tasks)}), "
        f"task + writer {statistics.median(both):.2f} ({', '.join(f'{r:.2f}' for r in both)})",
        flush=True,
    )


if __name__ == "__main__":
    main()
