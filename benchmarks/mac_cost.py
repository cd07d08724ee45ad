"""What authenticating the data plane costs (issue 14): one keyed-BLAKE2b seal and open per buffer,
against that buffer's other costs on the reference workload (rolling word count, 1024 records of
``("w123", 1)`` per buffer): msgpack encode and decode, and the share of the measured throughput.

``make bench`` prints this micro-benchmark next to the cluster figures, and the end-to-end figure
(a sealed cluster against an unsealed one) from ``seal_cost.py``. Run alone: ``python benchmarks/mac_cost.py [records_per_s [slots]]``.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from millstream.engine.runtime.io.serialization import RECORDS, MsgpackSerializer  # noqa: E402
from millstream.engine.security.mac import Sealer  # noqa: E402

BUFFER_RECORDS = 1024


def _per_call_us(fn: Callable[[], object], repeat: int = 2000) -> float:
    best = float("inf")
    for _ in range(5):  # the best of five: the machine is shared
        t0 = time.perf_counter()
        for _ in range(repeat):
            fn()
        best = min(best, (time.perf_counter() - t0) / repeat)
    return best * 1e6


def measure() -> dict[str, float]:
    ser = MsgpackSerializer()
    values = [("w%d" % (i % 1000), 1) for i in range(BUFFER_RECORDS)]
    payload = ser.encode(RECORDS, values)
    writer = Sealer("bench-secret", "buffer", "ms:ch:0123456789abcdef0123456789abcdef:0:1:0:1")
    reader = Sealer("bench-secret", "buffer", "ms:ch:0123456789abcdef0123456789abcdef:0:1:0:1")
    sealed = writer.seal(payload, 7)
    return {
        "bytes": len(payload),
        "encode_us": _per_call_us(lambda: ser.encode(RECORDS, values), 300),
        "decode_us": _per_call_us(lambda: ser.decode(payload), 300),
        "seal_us": _per_call_us(lambda: writer.seal(payload, 7)),
        "open_us": _per_call_us(lambda: reader.open(sealed, 7)),
    }


def describe(m: dict[str, float], records_per_s: float | None = None, processes: int = 2) -> str:
    mac = m["seal_us"] + m["open_us"]
    codec = m["encode_us"] + m["decode_us"]
    line = (
        f"buffer authentication: seal {m['seal_us']:.1f} us + open {m['open_us']:.1f} us per {BUFFER_RECORDS}-record "
        f"buffer ({m['bytes']:.0f} B) = {100 * mac / codec:.1f}% of its msgpack encode+decode ({codec:.0f} us)"
    )
    if records_per_s:
        # Each record crosses one channel (the keyed shuffle), sealed in one slot process and opened in
        # another; ``processes`` slot processes share the work, so a record has processes/rate of CPU.
        share = (mac / BUFFER_RECORDS) / (processes * 1e6 / records_per_s)
        line += f"; at {records_per_s:,.0f} records/s over {processes} slots it is {100 * share:.2f}% of the CPU per record"
    return line


if __name__ == "__main__":
    rate = float(sys.argv[1]) if len(sys.argv) > 1 else None
    print(describe(measure(), rate, int(sys.argv[2]) if len(sys.argv) > 2 else 2))
