"""A count per key for keys of every type people key by, each key arriving in forms Python calls
equal: 1, True, 1.0, Decimal(1) and Fraction(1); a tuple, a namedtuple and a tuple holding a float;
lists (nested, holding floats and bools); frozensets built in other orders; dataclasses, enums,
datetimes in other time zones, Row, and a class with its own __eq__ that offers __millstream_key__.
The "listtuple" family keys each label by a list and by the tuple of the same elements: Python calls
them unequal, Millstream makes them one key (README, "Where key_by sends a key"), so its count is
that of both forms. Prints {label: count} as one JSON line at the
end; a key split over two subtasks shows as a count below its expected one.

Usage: key_types.py PARALLELISM [refuse|batch]
  refuse: key by plain objects, which must fail clearly; batch: BATCH runtime mode (Spark on a cluster)
"""
import collections
import dataclasses
import datetime as dt
import enum
import fractions
import json
import random
import sys
from decimal import Decimal

from pyflink.common import Row, WatermarkStrategy
from pyflink.datastream import RuntimeExecutionMode, StreamExecutionEnvironment
from pyflink.datastream.connectors.number_seq import NumberSequenceSource

PARALLELISM = int(sys.argv[1])
MODE = sys.argv[2] if len(sys.argv) > 2 else ""
REFUSE = MODE == "refuse"
KEYS = 8  # logical keys per family
REPEAT = 3  # every equal form of a key arrives this many times


@dataclasses.dataclass(frozen=True)
class Point:
    x: object
    y: object


class Color(enum.Enum):
    RED = 1
    GREEN = 2
    BLUE = 3


class Money:
    """Equality of its own; a key through the documented hook."""

    def __init__(self, cents):
        self.cents = cents

    def __eq__(self, other):
        return isinstance(other, Money) and other.cents == self.cents

    def __hash__(self):
        return hash(self.cents)

    def __millstream_key__(self):
        return ("Money", self.cents)


class Plain:
    pass


Pair = collections.namedtuple("Pair", "name n")
PLUS530 = dt.timezone(dt.timedelta(hours=5, minutes=30))


def forms(family, i):
    """What travels in the record for each equal form of key i of a family; key_of builds the key."""
    words = [f"w{i}-{j}" for j in range(6)]
    return {
        "int": [i, float(i), "decimal", "fraction"] + ([bool(i)] if i < 2 else []),
        "half": [i + 0.5, "decimal", "fraction"],
        "str": [f"s{i}"],
        "bytes": [b"b%d" % i],
        "tuple": [("t", i), ("t", float(i)), "pair"] + ([("t", bool(i))] if i < 2 else []),
        # Carried as tuples (how a record encodes them does not matter): key_of makes them lists.
        "list": [("l", i, ("x", i)), ("l", float(i), ("x", float(i)))] + ([("l", bool(i), ("x", i))] if i < 2 else []),
        "listtuple": ["list", "tuple"],
        "frozenset": [frozenset(words), frozenset(reversed(words)), frozenset(random.Random(i).sample(words, 6))],
        "mixed": [("m", i, frozenset({i, "x"})), ("m", float(i), frozenset({"x", float(i)}))],
        "dataclass": [("p", i), ("p", float(i))],
        "enum": [i % 3 + 1, ["RED", "GREEN", "BLUE"][i % 3]],
        "datetime": ["utc", "plus530"],
        "date": [i],
        "time": ["utc", "plus530"],
        "decimal": ["a", "b"],
        "row": [(f"r{i}", i), (f"r{i}", float(i))],
        "money": [i * 100, float(i * 100)],
        "none": [None],
    }[family]


def key_of(record):
    label, family, i, carried, _ = record
    if family in ("int", "half") and carried in ("decimal", "fraction"):
        exact = fractions.Fraction(i) if family == "int" else fractions.Fraction(2 * i + 1, 2)
        return exact if carried == "fraction" else Decimal(exact.numerator) / Decimal(exact.denominator)
    if family == "tuple" and carried == "pair":
        return Pair("t", i)
    if family == "list":
        return [carried[0], carried[1], list(carried[2])]
    if family == "listtuple":
        return ["lt", i] if carried == "list" else ("lt", i)
    if family == "dataclass":
        return Point(carried[1], carried[0])
    if family == "enum":
        return Color(carried) if isinstance(carried, int) else Color[carried]
    if family == "datetime":
        instant = dt.datetime(2024, 5, 1, i, 30, tzinfo=dt.timezone.utc)
        return instant if carried == "utc" else instant.astimezone(PLUS530)
    if family == "date":
        return dt.date(2024, 5, 1 + carried)
    if family == "time":
        t = dt.time(i, 45, tzinfo=dt.timezone.utc)
        return t if carried == "utc" else dt.time(i + 6, 15, tzinfo=PLUS530)  # the same instant (i < 18)
    if family == "decimal":
        return Decimal(f"{i}.25") if carried == "a" else Decimal(f"{i}.250")
    if family == "row":
        return Row(*carried)
    if family == "money":
        return Money(int(carried) if carried == int(carried) else carried)
    return carried


FAMILIES = ["int", "half", "str", "bytes", "tuple", "list", "listtuple", "frozenset", "mixed", "dataclass", "enum", "datetime", "date",
            "time", "decimal", "row", "money", "none"]
RECORDS = []
for family in FAMILIES:
    for i in range({"none": 1, "enum": len(Color)}.get(family, KEYS)):
        for carried in forms(family, i):
            RECORDS += [(f"{family}:{i}", family, i, carried, 1)] * REPEAT
random.Random(7).shuffle(RECORDS)
EXPECTED = collections.Counter(r[0] for r in RECORDS)

if __name__ == "__main__":
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(PARALLELISM)
    if MODE == "batch":
        env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    numbers = env.from_source(NumberSequenceSource(0, len(RECORDS) - 1), WatermarkStrategy.no_watermarks(), "indexes")
    records = numbers.map(lambda n: RECORDS[n])
    selector = (lambda r: Plain()) if REFUSE else key_of
    counts = records.key_by(selector).reduce(lambda a, b: (a[0], a[1], a[2], a[3], a[4] + b[4]))
    final: dict = {}
    with counts.map(lambda r: (r[0], r[4])).execute_and_collect("key types") as results:
        for label, count in results:
            final[label] = max(final.get(label, 0), count)
    print(json.dumps({"counts": final, "expected": EXPECTED}, sort_keys=True), flush=True)
