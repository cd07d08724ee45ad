"""Key encoding: keys Python calls equal get equal bytes, in every process; keys without a stable
encoding are refused with a message naming the type and the fix; old key groups stay put."""
from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import enum
import fractions
import os
import subprocess
import sys
import textwrap
from decimal import Decimal
from pathlib import Path

import msgpack
import pytest

from millstream.engine.runtime.key_encoding import KeyEncodingError, canonical, pack
from millstream.engine.runtime.key_groups import assign_to_key_group
from millstream.engine.runtime.key_hash import key_hash_code
from millstream.engine.runtime.state.heap_backend import HeapKeyedStateBackend
from millstream.engine.runtime.state.lmdb_backend import LmdbKeyedStateBackend

ROOT = Path(__file__).resolve().parents[3]


@dataclasses.dataclass(frozen=True)
class Point:
    x: object
    y: object
    label: str = dataclasses.field(default="", compare=False)


class Color(enum.Enum):
    RED = 1
    GREEN = 2


class Level(enum.IntEnum):
    LOW = 1


class Mode(enum.StrEnum):
    FAST = "fast"


Pair = collections.namedtuple("Pair", "a b")


class Money:
    """Its own __eq__ and __hash__, made a key through the documented hook."""

    def __init__(self, cents: int) -> None:
        self.cents = cents

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Money) and other.cents == self.cents

    def __hash__(self) -> int:
        return hash(self.cents)

    def __millstream_key__(self) -> object:
        return ("Money", self.cents)


UTC = dt.timezone.utc
PLUS2 = dt.timezone(dt.timedelta(hours=2))

# Each group: keys that Python calls equal, of different types or built differently.
EQUAL_GROUPS = [
    [1, True, 1.0, Decimal(1), Decimal("1.000"), fractions.Fraction(1), Level.LOW, complex(1, 0)],
    [0, False, 0.0, -0.0, Decimal("-0"), fractions.Fraction(0)],
    [1.5, Decimal("1.5"), fractions.Fraction(3, 2), complex(1.5, 0)],
    [fractions.Fraction(1, 3), fractions.Fraction(2, 6)],
    [Decimal("0.1"), fractions.Fraction(1, 10)],
    [2**70, float(2**70), Decimal(2**70)],
    ["fast", Mode.FAST],
    [("a", 1), ("a", True), ("a", 1.0), Pair("a", 1)],
    [(1, (2.0, "x")), (True, (2, "x"))],
    [frozenset({"a", "b", 1}), frozenset({1.0, "b", "a"}), frozenset(["b", "a", True])],
    [frozenset({("x", 1), ("y", 2)}), frozenset({("y", 2.0), ("x", True)})],
    [Point(1, "a"), Point(1.0, "a", label="other"), Point(True, "a")],
    [Point((1, 2), frozenset({3})), Point((1.0, 2), frozenset({3.0}))],
    [Color.RED, Color(1), Color["RED"]],
    [dt.datetime(2024, 3, 1, 12, 0, tzinfo=UTC), dt.datetime(2024, 3, 1, 14, 0, tzinfo=PLUS2)],
    [dt.datetime(2024, 3, 1, 12, 0), dt.datetime(2024, 3, 1, 12, 0, fold=1)],
    [dt.date(2024, 3, 1)],
    [dt.time(12, 30, tzinfo=UTC), dt.time(14, 30, tzinfo=PLUS2)],
    [dt.timedelta(days=1), dt.timedelta(hours=24), dt.timedelta(seconds=86400)],
    [Money(250), Money(250)],
    [None],
    [b"raw"],
]


@pytest.mark.parametrize("group", EQUAL_GROUPS, ids=lambda g: type(g[0]).__name__)
def test_equal_keys_have_equal_bytes_and_key_groups(group):
    for k in group:
        assert k == group[0], (k, group[0])  # the fixture itself: these really are equal in Python
        assert key_hash_code(k) == key_hash_code(group[0]), (k, group[0])
        assert pack(k) == pack(group[0]), (k, group[0])
        assert all(assign_to_key_group(k, m) == assign_to_key_group(group[0], m) for m in (128, 4096))


def test_distinct_groups_differ():
    # One representative per group: all pairwise different bytes (collisions are allowed in
    # principle, but none may come from the encoding forgetting a type tag).
    firsts = [g[0] for g in EQUAL_GROUPS]
    assert len({pack(k) for k in firsts}) == len(firsts)
    assert len({key_hash_code(k) for k in firsts}) == len(firsts)
    # Never equal in Python, so never folded together:
    distinct = [
        dt.datetime(2024, 3, 1), dt.date(2024, 3, 1), dt.datetime(2024, 3, 1, tzinfo=UTC),
        (1, 2), Point(1, 2), frozenset({1, 2}), Color.RED, 1, "1", b"1", 1.25, (), frozenset(), None,
    ]
    assert len({pack(k) for k in distinct}) == len(distinct)


def _v1_key_hash_code(key):
    """Key encoding 1, as it was before this change: the reference for keys that must not move."""
    if isinstance(key, str):
        return key.encode()
    if isinstance(key, bytes):
        return key
    if isinstance(key, bool) or key is None:
        return msgpack.packb(key)
    if isinstance(key, int):
        return key.to_bytes(16, "little", signed=True) if -(2**127) <= key < 2**127 else str(key).encode()
    return msgpack.packb(key, default=str)


def _v1_key_bytes(key):
    """Key encoding 1's bytes (crc32 of them was the key group): for building old snapshots."""
    if isinstance(key, str):
        return key.encode()
    if isinstance(key, bytes):
        return key
    if isinstance(key, bool) or key is None:
        return msgpack.packb(key)
    if isinstance(key, int):
        return key.to_bytes(16, "little", signed=True) if -(2**127) <= key < 2**127 else str(key).encode()
    return msgpack.packb(key, default=str)


def _v2_key_bytes(key):
    """Key encoding 2's bytes (crc32 of them was the key group; engine/runtime/key_groups.py before
    encoding 3): encoding 1's bytes for str, int, bytes, None and tuples of them, else the packed
    canonical form, with keys equal to an int, str or bytes hashed as that value."""
    t = type(key)
    if t is str or t is int or t is bytes or key is None:
        return _v1_key_bytes(key)
    if t is tuple and all(
        type(e) is str or (type(e) is int and -(2**63) <= e < 2**64) or type(e) is bytes or e is None for e in key
    ):
        return msgpack.packb(key, use_bin_type=True)
    c = canonical(key)
    if type(c) is int or type(c) is str or type(c) is bytes:
        return _v1_key_bytes(c)
    if type(c) is msgpack.ExtType and c.code == 1:  # EXT_BIGINT: a big int folded from a float or Decimal
        return _v1_key_bytes(int(c.data))
    return msgpack.packb(c, use_bin_type=True)


_CROSS_PROCESS = textwrap.dedent(
    """
    import dataclasses, datetime as dt, enum, sys
    from decimal import Decimal
    from millstream.engine.runtime.key_hash import key_hash_code

    @dataclasses.dataclass(frozen=True)
    class Point:
        x: object
        y: object

    class Color(enum.Enum):
        RED = 1

    words = [f"w{i}" for i in range(40)]
    keys = [
        frozenset(words), frozenset(reversed(words)), frozenset({("a", 1), ("b", 2.0), ("c", True)}),
        Point(frozenset(words[:7]), 1.0), Color.RED, (Color.RED, Decimal("2.50")),
        dt.datetime(2024, 1, 1, 9, tzinfo=dt.timezone(dt.timedelta(hours=9))), True, 1.0, ("x", None, b"y"),
    ]
    print(" ".join(str(key_hash_code(k)) for k in keys))
    """
)


def test_bytes_are_the_same_in_processes_with_different_hash_seeds(tmp_path):
    script = tmp_path / "keys.py"
    script.write_text(_CROSS_PROCESS)
    outputs = set()
    for seed in ("0", "1", "12345", "random"):
        env = dict(os.environ, PYTHONHASHSEED=seed, PYTHONPATH=str(ROOT))
        r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert r.returncode == 0, r.stderr
        outputs.add(r.stdout)
        # The two frozensets of the same words, built in opposite orders, agree within a process too.
        first, second = r.stdout.split()[:2]
        assert first == second
    assert len(outputs) == 1


@pytest.mark.parametrize("group", EQUAL_GROUPS, ids=lambda g: type(g[0]).__name__)
def test_heap_and_lmdb_backends_keep_one_entry_per_equal_key(tmp_path, group):
    heap = HeapKeyedStateBackend(128)
    with LmdbKeyedStateBackend(128, tmp_path / "lmdb", cache_entries=2) as lmdb:
        for backend in (heap, lmdb):
            table = backend.table("count", "value")
            for i, k in enumerate(group * 3):
                backend.current_key = k
                table[k] = table.get(k, 0) + 1
                if i % 2:  # evict now and then, so LMDB reads equal keys back from disk
                    for j in range(4):
                        table[f"churn-{j}"] = j
            entries = [(k, v) for k, v in table.items() if not (isinstance(k, str) and k.startswith("churn-"))]
            assert len(entries) == 1 and entries[0][1] == 3 * len(group), (backend, entries)
            snap = backend.snapshot_by_key_group()
            groups = [kg for kg, states in snap.items() for k, _ in states["count"] if k == group[0]]
            assert groups == [assign_to_key_group(group[0], 128)]


def test_canonical_is_msgpack_native():
    # Packs with plain msgpack, no default hook: nothing of the key's own type survives.
    for group in EQUAL_GROUPS:
        msgpack.packb(canonical(group[0]))


def test_numbers_beyond_float_range_encode_exactly():
    tiny, huge = Decimal("1e-400"), Decimal(10) ** 400
    assert key_hash_code(tiny) == key_hash_code(fractions.Fraction(1, 10**400)) != key_hash_code(0)
    assert key_hash_code(huge) == key_hash_code(10**400) == key_hash_code(fractions.Fraction(10**400))


def test_a_list_and_the_tuple_of_its_elements_are_one_key_in_state_and_routing():
    """Python calls ["a", 1] and ("a", 1) unequal and PyFlink (which pickles keys) keeps them apart;
    Millstream routes a list as its tuple and holds it in state as that tuple, so the two share one
    subtask and one state entry (the README's "Where key_by sends a key" says so)."""
    from millstream.engine.datastream import StreamExecutionEnvironment

    assert ["a", 1] != ("a", 1)
    assert key_hash_code(["a", 1]) == key_hash_code(("a", 1))
    assert all(assign_to_key_group(["a", 1], m) == assign_to_key_group(("a", 1), m) for m in (128, 4096))
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    records = [("list", 1)] * 3 + [("tuple", 1)] * 2
    keyed = env.from_collection(records).key_by(lambda r: ["a", r[1]] if r[0] == "list" else ("a", r[1]))
    merged = keyed.reduce(lambda a, b: (a[0], a[1] + b[1]))
    assert max(v for _, v in merged.execute_and_collect()) == 5  # one running sum over both forms


def test_a_declared_key_type_without_a_stable_encoding_is_refused_at_key_by():
    """A declared key_type lets key_by refuse a map key when the program is built; an undeclared key
    is refused at the first record, since Python cannot know its type before then."""
    from millstream.engine.common import Types
    from millstream.engine.datastream import StreamExecutionEnvironment

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    stream = env.from_collection([{"a": 1}, {"a": 1}])
    for declared in (
        Types.MAP(Types.STRING(), Types.INT()),
        Types.ROW([Types.STRING(), Types.MAP(Types.STRING(), Types.INT())]),
        Types.LIST(Types.MAP(Types.STRING(), Types.INT())),
    ):
        with pytest.raises(KeyEncodingError, match=r"has no stable encoding.*map \(dict\).*tuple\(sorted\(d\.items\(\)\)\)"):
            stream.key_by(lambda d: d, key_type=declared)
    # Declared types whose values encode stably are accepted, as are undeclared keys, until a record shows.
    for declared in (Types.STRING(), Types.TUPLE([Types.STRING(), Types.INT()]), Types.LIST(Types.INT()), None):
        stream.key_by(lambda d: d, key_type=declared)
    undeclared = stream.key_by(lambda d: d).reduce(lambda a, b: a)
    with pytest.raises(Exception, match="key of type builtins.dict has no stable encoding"):
        list(undeclared.execute_and_collect())
