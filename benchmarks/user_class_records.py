"""Data-plane cost of records that are instances of classes defined in the program (issue 12).

``python benchmarks/user_class_records.py [--records 1024] [--repeats 30]``

A child process defines a dataclass and a plain class in its ``__main__`` and cloudpickles them, as
a client ships user code; this process loads that code the way a TaskManager does
(``load_user_code``), so the classes are not findable by name here. One buffer of records with the
same three fields (str, int, int) is encoded and decoded by the default msgpack serializer as:

* native tuples (the baseline);
* dataclass / plain class instances: one extension per buffer, the class name once and each
  ``__dict__`` (the path a buffer of one user class takes);
* a buffer mixing two classes: one extension per record (name + ``__dict__``);
* each record pickled on its own (what a copyreg-only scheme would cost);
* the whole buffer pickled by the pickle serializer (``pipeline.serializer=pickle``).

Times are CPU time of this thread, best of ``--repeats`` runs, so other load on the machine does
not count. This is a benchmark, not a test: it prints figures and asserts nothing.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from millstream.engine.runtime.io import serialization as S  # noqa: E402
from millstream.engine.runtime.io.serialization import RECORDS, MsgpackSerializer, PickleSerializer  # noqa: E402
from millstream.engine.runtime.user_code_class_loader import load_user_code  # noqa: E402

CLIENT = """
import sys, cloudpickle
from dataclasses import dataclass

@dataclass
class Event:
    user: str
    amount: int
    ts: int

class Plain:
    def __init__(self, user, amount, ts):
        self.user, self.amount, self.ts = user, amount, ts

class Graph:
    pass

g = Graph()
g.classes = (Event, Plain)
sys.stdout.buffer.write(cloudpickle.dumps(g))
"""


def measure(encode: Callable[[], bytes], decode: Callable[[bytes], Any], n: int, repeats: int) -> tuple[float, float, float]:
    """(encode ns/record, decode ns/record, bytes/record)."""
    enc = dec = float("inf")
    data = encode()
    for _ in range(repeats):
        t = time.thread_time()
        for _ in range(10):
            data = encode()
        enc = min(enc, (time.thread_time() - t) / 10 / n * 1e9)
        t = time.thread_time()
        for _ in range(10):
            decode(data)
        dec = min(dec, (time.thread_time() - t) / 10 / n * 1e9)
    return enc, dec, len(data) / n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=30)
    ns = ap.parse_args()
    code = subprocess.run([sys.executable, "-c", CLIENT], capture_output=True, check=True).stdout
    graph = load_user_code(code)
    graph.class_loader.activate()
    event, plain = graph.classes
    n = ns.records
    tuples = [(f"u{i % 100}", i, 1_700_000_000_000 + i) for i in range(n)]
    events = [event(*t) for t in tuples]
    plains = [plain(*t) for t in tuples]
    mixed = [(event if i % 2 else plain)(*t) for i, t in enumerate(tuples)]
    ser, pser = MsgpackSerializer(), PickleSerializer()

    def via(serializer: Any, values: list[Any]) -> tuple[Callable[[], bytes], Callable[[bytes], Any]]:
        return (lambda: serializer.encode(RECORDS, values)), serializer.decode

    rows = [
        ("msgpack, tuples (baseline)", *via(ser, tuples)),
        ("msgpack, dataclass buffer", *via(ser, events)),
        ("msgpack, plain-class buffer", *via(ser, plains)),
        ("msgpack, two classes mixed", *via(ser, mixed)),
        ("pickle, whole buffer", *via(pser, events)),
    ]
    results = [(name, measure(enc, dec, n, ns.repeats)) for name, enc, dec in rows]
    # Each record pickled alone: the copyreg reducer without the msgpack extension.
    original = S.plain_class_name
    S.plain_class_name = lambda cls: None  # type: ignore[assignment]
    try:
        results.append(("msgpack, a pickle per record", measure(*via(ser, events), n, ns.repeats)))
    finally:
        S.plain_class_name = original  # type: ignore[assignment]

    base = results[0][1]
    print(f"{n} records per buffer, 3 fields (str, int, int); CPU ns per record, best of {ns.repeats}")
    print(f"{'':30s} {'encode':>8s} {'decode':>8s} {'bytes':>7s} {'x enc':>6s} {'x dec':>6s} {'x both':>7s}")
    for name, (e, d, b) in results:
        print(f"{name:30s} {e:8.0f} {d:8.0f} {b:7.1f} {e / base[0]:6.1f} {d / base[1]:6.1f} {(e + d) / (base[0] + base[1]):7.1f}")


if __name__ == "__main__":
    threading.Thread(target=main).start()  # the loader is activated on this thread, as a task's is
