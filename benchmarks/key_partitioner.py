"""Micro-benchmark: the HASH partitioner before and after key encoding 2.

Times ``KeyGroupStreamPartitioner.split`` on 1024-record batches, interleaving the two versions
over several rounds and reporting the median time per record and the ratio new/old (below 1 is
faster). The old version is read from git (``--old``, default the commit before key encoding 2).

    python benchmarks/key_partitioner.py [--old REV] [--rounds N]
"""
from __future__ import annotations

import argparse
import importlib.util
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from millstream.engine.runtime import partitioner as new_partitioner  # noqa: E402


def _old_module(rev: str) -> Any:
    """The partitioner of ``rev`` wired to the key groups of ``rev``, as a module of its own."""
    tmp = Path(tempfile.mkdtemp(prefix="old-partitioner-"))
    for name in ("key_groups", "partitioner"):
        src = subprocess.run(["git", "show", f"{rev}:engine/runtime/{name}.py"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
        (tmp / f"old_{name}.py").write_text(src.replace("from millstream.engine.runtime.key_groups", "from old_key_groups").replace("from engine.runtime.key_groups", "from old_key_groups"))
    sys.path.insert(0, str(tmp))
    spec = importlib.util.spec_from_file_location("old_partitioner", tmp / "old_partitioner.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def _workloads() -> dict[str, tuple[list[Any], Callable[[Any], Any]]]:
    rng = random.Random(1)
    batch = 1024
    return {
        "str keys, cached (1000 keys)": ([(f"user-{rng.randrange(1000)}", 1) for _ in range(batch)], lambda r: r[0]),
        "int keys, cached (1000 keys)": ([(rng.randrange(1000), 1) for _ in range(batch)], lambda r: r[0]),
        "str keys, cache full (fresh keys)": ([(f"fresh-{i}", 1) for i in range(batch)], lambda r: r[0]),
        "tuple keys (1000 keys)": ([(("u", rng.randrange(1000)), 1) for _ in range(batch)], lambda r: r[0]),
        "float keys (1000 keys)": ([(rng.randrange(1000) + 0.5, 1) for _ in range(batch)], lambda r: r[0]),
    }


def _time(module: Any, values: list[Any], selector: Callable[[Any], Any], fresh: bool, repeat: int) -> float:
    p = module.KeyGroupStreamPartitioner(4, selector, 128)
    if fresh:
        p.CACHE_KEYS = 0  # every key misses: the encode-and-hash path
    p.split(values, None)  # warm the cache
    start = time.perf_counter()
    for _ in range(repeat):
        p.split(values, None)
    return (time.perf_counter() - start) / (repeat * len(values))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--old", default="d31f22c^")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--repeat", type=int, default=200)
    ns = ap.parse_args()
    old = _old_module(ns.old)
    print(f"{'workload':38} {'old ns/rec':>10} {'new ns/rec':>10} {'new/old':>8}")
    for name, (values, selector) in _workloads().items():
        fresh = "fresh" in name
        olds, news = [], []
        for _ in range(ns.rounds):  # interleaved, so load on the machine hits both alike
            olds.append(_time(old, values, selector, fresh, ns.repeat))
            news.append(_time(new_partitioner, values, selector, fresh, ns.repeat))
        o, n = statistics.median(olds), statistics.median(news)
        print(f"{name:38} {o * 1e9:10.1f} {n * 1e9:10.1f} {n / o:8.3f}")


if __name__ == "__main__":
    main()
