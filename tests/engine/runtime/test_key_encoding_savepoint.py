"""On real StreamTasks: a savepoint whose keyed state was grouped by key encoding 1 (keys such as
True, 2.0, a frozenset or a tuple holding a bool sat in other key groups than now) or by key
encoding 2 (crc32 of the key's bytes; almost every key sat elsewhere than under the current
encoding 3's murmur hash) resumes with every key's count where it stopped, at the same parallelism
and at another one."""
from __future__ import annotations

import pickle
import zlib
from collections import Counter, defaultdict

import pytest

from millstream.engine.checkpoint.completed_checkpoint import CompletedCheckpoint
from millstream.engine.datastream.connectors.datagen import DataGeneratorSource
from millstream.engine.datastream.stream_execution_environment import StreamExecutionEnvironment
from millstream.engine.runtime.key_groups import assign_to_key_group
from millstream.engine.runtime.state.key_grouped_state import decode_state
from millstream.engine.runtime.state.task_state_manager import KEY_ENCODING_FIELD
from tests.engine.progress import until
from tests.engine.runtime.task_harness import TaskHarness, collect_sink
from tests.engine.runtime.test_key_encoding import _v1_key_bytes, _v2_key_bytes

KEYS = [True, 2.0, 3.5, frozenset({"a", "b"}), ("t", False), "s", 7, ("u", 8)]
N = 2400
RATE = 3000
MAX_P = 128


def _event(i: int) -> tuple:
    return (KEYS[i % len(KEYS)], 1)


def _job(parallelism: int) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    events = env.from_source(DataGeneratorSource(_event, N, RATE), None, "events")
    collect_sink(events.key_by(lambda e: e[0]).reduce(lambda a, b: (a[0], a[1] + b[1])).uid("counts"))
    return env


OLD_KEY_BYTES = {1: _v1_key_bytes, 2: _v2_key_bytes}


def _as_old_encoding(savepoint: CompletedCheckpoint, version: int) -> None:
    """Rewrite the keyed state files as a task of an older encoding wrote them: each key in its old
    key group, each key group in the file of the old subtask that owned it, in the single-pickle
    file format of that time (which restores still read); encoding 1 recorded no version."""
    for handles in savepoint.handles.values():
        states = {i: decode_state(open(h, "rb").read()) for i, h in handles.items()}
        if not any("keyed" in s for s in states.values()):
            continue
        parallelism = len(handles)
        entries = [
            (name, key, value)
            for s in states.values()
            for groups in (s.get("keyed") or {}).values()
            for name, pairs in groups.items()
            for key, value in pairs
        ] + [  # the heap backend's tables, which encoding 1 kept by key group too
            (name, key, value)
            for s in states.values()
            for name, table in (s.get("tables") or {}).items()
            for key, value in table.items()
        ]
        moved = 0
        for s in states.values():
            s["keyed"] = {}
            s.pop("tables", None)
            s["kinds"].pop(KEY_ENCODING_FIELD)
            if version > 1:
                s["kinds"][KEY_ENCODING_FIELD] = str(version)
        for name, key, value in entries:
            kg = zlib.crc32(OLD_KEY_BYTES[version](key)) % MAX_P
            moved += kg != assign_to_key_group(key, MAX_P)
            states[kg * parallelism // MAX_P]["keyed"].setdefault(kg, defaultdict(list))[name].append((key, value))
        assert moved >= 4, "the fixture must hold keys whose key group changed"
        for i, h in handles.items():
            with open(h, "wb") as f:
                pickle.dump(states[i], f)


def _typed(key: object) -> object:
    """The key with the type of every part spelled out, so True and 1 or 2.0 and 2 differ. Not repr: a
    frozenset's repr follows its hash order, which can differ between an equal set built and unpickled."""
    if isinstance(key, frozenset):
        return ("frozenset", tuple(sorted(map(repr, map(_typed, key)))))
    if isinstance(key, tuple):
        return ("tuple", tuple(map(_typed, key)))
    return (type(key).__name__, key)


def _final_counts(outputs: list) -> dict:
    final: dict = {}
    for key, count in outputs:
        final[key] = max(final.get(key, 0), count)
    return final


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize(("before", "after"), [(2, 2), (2, 3), (3, 1)])
def test_a_savepoint_of_an_older_key_encoding_resumes_every_key_where_it_stopped(tmp_path, before, after, version):
    first = TaskHarness(_job(before), str(tmp_path)).start()
    until(lambda: len(first.results) >= N // 6, "the first run to count a sixth of the records")
    first.trigger(1, "SYNC_SAVEPOINT", drain=False)
    savepoint = first.await_checkpoint(1)
    first.notify_complete(1)
    part1 = first.join()
    assert 0 < len(part1) < N, "the savepoint cut the run in the middle"
    _as_old_encoding(savepoint, version)
    part2 = TaskHarness(_job(after), str(tmp_path), restore_from=savepoint).start().join()
    # One update per record; each key's last count is its number of records, so no key restarted
    # from zero (lost state) or counted in two places (state left in the wrong subtask).
    assert len(part1) + len(part2) == N
    assert _final_counts(part1 + part2) == {k: N // len(KEYS) for k in KEYS}
    assert Counter(map(_typed, (k for k, _ in part2))).keys() <= set(map(_typed, KEYS))
