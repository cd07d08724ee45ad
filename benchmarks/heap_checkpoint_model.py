"""The heap backend's incremental checkpoints in one process: what the state path costs, without a cluster.

A model of one reduce subtask (issue 16): ``--passes`` passes over ``--keys`` LONG keys (``--key-type
string``: STRING keys ``user-<n>``), the records' ``(key, 1)`` tuples reduced to ``(key, count)`` in batches of 512 through ``heap_incremental.batch_access``
as ``ReduceOperator`` does, with an incremental checkpoint every ``--interval`` records whose delta a
writer thread reads while the task goes on, completed as soon as it is read (no files are written and
no chain is compacted). The slot's interpreter settings (switch interval, collector thresholds) are
used. Printed: the process's CPU seconds with checkpoints and, in the same run, without
(``--interval 0``), and their ratio.

The cluster (``large_state_bench.py``) is the figure that counts; this model leaves out Redis, the
network and the other subtasks, so it moves far less between rounds, and it overlaps the writer with
a task thread that never waits for input, the case where the task's copy-on-write work weighs most.
Run with two checkouts to compare them (docs/large-state.md, change 19).

``python benchmarks/heap_checkpoint_model.py [--keys 1500000] [--passes 6] [--interval 1300000] [--rounds 2] [--key-type string]``
"""
from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import machine  # noqa: E402

from millstream.engine.runtime.state.heap_backend import HeapKeyedStateBackend  # noqa: E402
from millstream.engine.runtime.state import heap_incremental  # noqa: E402
from millstream.engine.runtime.state.heap_incremental import batch_access  # noqa: E402
from millstream.engine.runtime.state.state_chain import DELTA, SharedFile  # noqa: E402
from millstream.engine.taskexecutor.slot_process import GC_THRESHOLDS, SWITCH_INTERVAL_S  # noqa: E402

BATCH = 512
_MISSING = object()


def _count(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    return a[0], a[1] + b[1]


def run(keys: int, passes: int, interval: int, strings: bool = False) -> tuple[float, int]:
    """(CPU seconds of the process, checkpoints taken) for one model run; ``interval`` 0: none."""
    backend = HeapKeyedStateBackend(128, key_spec="STRING" if strings else "LONG", incremental=interval > 0)
    table = backend.table("_reduce", "value")
    writer = ThreadPoolExecutor(1, thread_name_prefix="checkpoint-writer")
    pending: list[Future] = []
    chain: tuple[SharedFile, ...] = ()
    since, checkpoint = 0, 0

    def read_delta(cid: int, read: Any) -> tuple[int, SharedFile]:
        parts = read()
        index = tuple((kg, 0, len(p)) for kg, p in parts)
        return cid, SharedFile(f"d{cid}", DELTA, sum(len(p) for _, p in parts), index, parts.entries, True)

    # the values written go with the keys, as ReduceOperator records them (a tree before the change
    # log, change 22, records the keys alone)
    with_values = hasattr(heap_incremental, "ChangeLog")
    gc.collect()
    started = time.process_time()
    for _ in range(passes):
        for lo in range(0, keys, BATCH):
            # fresh objects per record, as a deserialized batch has them
            if strings:
                values = [("user-" + str(k), 1) for k in range(lo, min(lo + BATCH, keys))]
            else:
                values = [(int(str(k)), 1) for k in range(lo, min(lo + BATCH, keys))]
            batch = [v[0] for v in values]
            get, put, record = batch_access(table, batch)
            out = []
            for k, v in zip(batch, values):
                cur = get(k, _MISSING)
                nv = v if cur is _MISSING else _count(cur, v)
                put(k, nv)
                out.append(nv)
            if with_values:
                record(batch, out)
            else:
                record(batch)
            since += len(batch)
            while pending and pending[0].done():  # completed once read: no JobManager round trip here
                cid, file = pending.pop(0).result()
                chain = (*chain, file)
                backend.changes.written(cid, chain)
                backend.notify_checkpoint_complete(cid)
            if interval and since >= interval:
                since, checkpoint = 0, checkpoint + 1
                plan, read = backend.begin_incremental_snapshot(checkpoint, compact=True, live=len(table))
                if read is None:
                    raise RuntimeError(f"checkpoint {checkpoint} planned as a base: {plan}")
                pending.append(writer.submit(read_delta, checkpoint, read))
    for f in pending:
        f.result()
    writer.shutdown()
    return time.process_time() - started, checkpoint


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=1_500_000)
    ap.add_argument("--passes", type=int, default=6)
    ap.add_argument("--interval", type=int, default=1_300_000, help="records between checkpoints")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--key-type", choices=("long", "string"), default="long")
    args = ap.parse_args()
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    gc.set_threshold(*GC_THRESHOLDS)
    print(machine())
    ratios = []
    for _ in range(args.rounds):
        strings = args.key_type == "string"
        without, _ = run(args.keys, args.passes, 0, strings)
        with_cp, taken = run(args.keys, args.passes, args.interval, strings)
        ratios.append(with_cp / without)
        print(f"  without checkpoints {without:.2f} s CPU; with {taken} checkpoints {with_cp:.2f} s CPU")
    print(
        f"heap checkpoint model, {args.keys:,} {args.key_type.upper()} keys x {args.passes} passes, a delta every {args.interval:,} records: "
        f"CPU with / without median {statistics.median(ratios):.2f} ({', '.join(f'{r:.2f}' for r in ratios)})"
    )


if __name__ == "__main__":
    main()
