"""Deterministic event sets for the event-time tests: (key, timestamp ms, value) tuples."""
from pyflink.datastream.connectors import DataGeneratorSource

# Out of order by up to 300 ms; 5 keys.
EVENTS = [("k%d" % (i % 5), i * 100 + ((i * 37) % 7 - 3) * 100, i % 10) for i in range(3000)]


def _event(i):
    return ("k%d" % (i % 5), i * 100 + ((i * 37) % 7 - 3) * 100, i % 10)


def events_source():
    """The same events from a parallel source: each subtask emits its own slice."""
    return DataGeneratorSource(_event, len(EVENTS))


def _sessions():
    out = []
    for j in range(4):
        for b in range(12):
            start = b * 2000 + j * 50
            for m in range(b % 4 + 1):
                out.append(("s%d" % j, start + m * 150, m + b))
    out.sort(key=lambda e: e[1])
    # swap neighbours: out of order by at most a few hundred ms
    for i in range(0, len(out) - 1, 2):
        out[i], out[i + 1] = out[i + 1], out[i]
    return out


SESSION_EVENTS = _sessions()

# In order, then 20 records far behind the watermark (in a later source batch).
LATE_EVENTS = [("k%d" % (i % 3), i * 10, 1) for i in range(3000)] + [("k%d" % (i % 3), i * 10, 1) for i in range(20)]

COUNT_EVENTS = [("c%d" % (i % 4), i) for i in range(50)]
