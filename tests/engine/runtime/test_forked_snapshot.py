"""Heap keyed state is snapshotted in a forked copy-on-write child (issue 16): the task thread only
forks, the snapshot holds exactly the state at the barrier however the task changes it afterwards,
and a failing child declines the checkpoint without harming the task. Real forks, real files."""
from __future__ import annotations

import os
import threading
import time
from typing import Any

import pytest

from millstream.engine.checkpoint.storage import FileSystemCheckpointStorage
from millstream.engine.datastream.state import ListStateDescriptor, ValueStateDescriptor
from millstream.engine.runtime import forked_snapshot
from millstream.engine.runtime.checkpointing import Barrier, SubtaskCheckpointer
from millstream.engine.runtime.state.heap_backend import HeapKeyedStateBackend
from millstream.engine.runtime.state.key_grouped_state import decode_state

pytestmark = pytest.mark.skipif(not forked_snapshot.available(), reason="needs os.fork")


class Acks:
    def __init__(self) -> None:
        self.done = threading.Event()
        self.acks: dict[int, Any] = {}
        self.declines: dict[int, str] = {}

    def ack(self, cid: int, ack: Any) -> None:
        self.acks[cid] = ack
        self.done.set()

    def decline(self, cid: int, reason: str) -> None:
        self.declines[cid] = reason
        self.done.set()


def _checkpointer(acks: Acks) -> SubtaskCheckpointer:
    return SubtaskCheckpointer("job", "v1", 0, acks.ack, acks.decline)


def _read(handle: str) -> Any:
    return decode_state(FileSystemCheckpointStorage.read_state_file(handle))


def _complete(location: str) -> None:
    # read_state_file only reads files of a completed checkpoint (one with _metadata)
    with open(os.path.join(location, "_metadata"), "w") as f:
        f.write("{}")


def test_the_snapshot_is_taken_in_a_child_and_holds_the_state_at_the_barrier_only(tmp_path) -> None:
    backend = HeapKeyedStateBackend(128)
    counts = backend.get_state(ValueStateDescriptor("count", None))
    seen = backend.get_list_state(ListStateDescriptor("seen", None))
    for k in range(1000):
        backend.current_key = k
        counts.update(k)
        seen.add(k)
    acks = Acks()
    location = str(tmp_path / "chk-1")
    taken_by: dict[str, int] = {}

    def materialise() -> dict[str, Any]:
        return {"keyed": backend.snapshot_by_key_group(), "pid": os.getpid()}

    cp = _checkpointer(acks)
    cp.snapshot(Barrier(1, 0, location), {"op": {"operator": None}}, {}, 0, 0, {"op": materialise})
    # The task goes on at once: overwrite, delete, and change lists in place.
    for k in range(1000):
        backend.current_key = k
        counts.update(-1)
        seen.add("after")
    backend.current_key = 5
    counts.clear()
    assert acks.done.wait(30)
    cp.close()
    assert acks.declines == {}
    _complete(location)
    state = _read(acks.acks[1].state_handles["op"])
    assert state["pid"] != os.getpid()  # grouped and pickled in another process
    restored = {}
    lists = {}
    for groups in state["keyed"].values():
        restored.update(groups.get("count", ()))
        lists.update(groups.get("seen", ()))
    assert restored == {k: k for k in range(1000)}
    assert lists == {k: [k] for k in range(1000)}
    assert acks.acks[1].state_size == os.path.getsize(acks.acks[1].state_handles["op"])


def test_a_child_that_fails_declines_the_checkpoint_and_the_next_one_succeeds(tmp_path) -> None:
    acks = Acks()
    cp = _checkpointer(acks)

    def broken() -> dict[str, Any]:
        return {"keyed": {0: {"s": [(1, threading.Lock())]}}}  # cannot be pickled

    cp.snapshot(Barrier(1, 0, str(tmp_path / "chk-1")), {"op": {}}, {}, 0, 0, {"op": broken})
    assert acks.done.wait(30)
    assert 1 in acks.declines and "pickle" in acks.declines[1]
    acks.done.clear()
    cp.snapshot(Barrier(2, 0, str(tmp_path / "chk-2")), {"op": {}}, {}, 0, 0, {"op": lambda: {"keyed": {}}})
    assert acks.done.wait(30)
    cp.close()
    assert 2 in acks.acks


def test_a_child_killed_mid_snapshot_declines_it(tmp_path) -> None:
    acks = Acks()
    cp = _checkpointer(acks)

    def dies() -> dict[str, Any]:
        os.kill(os.getpid(), 9)
        return {}

    cp.snapshot(Barrier(1, 0, str(tmp_path / "chk-1")), {"op": {}}, {}, 0, 0, {"op": dies})
    assert acks.done.wait(30)
    cp.close()
    assert "signal 9" in acks.declines[1]


def test_without_fork_the_same_snapshot_is_taken_on_the_task_thread(tmp_path) -> None:
    acks = Acks()
    cp = SubtaskCheckpointer("job", "v1", 0, acks.ack, acks.decline, fork_snapshots=False)
    location = str(tmp_path / "chk-1")
    cp.snapshot(Barrier(1, 0, location), {"op": {"operator": 7}}, {}, 0, 0, {"op": lambda: {"pid": os.getpid()}})
    assert acks.done.wait(30)
    cp.close()
    _complete(location)
    assert _read(acks.acks[1].state_handles["op"]) == {"operator": 7, "pid": os.getpid()}


def test_a_child_that_hangs_is_killed_after_its_timeout() -> None:
    def hangs() -> dict[str, Any]:
        time.sleep(60)  # as on a lock another thread held at the fork
        return {}

    child = forked_snapshot.ForkedSnapshot.start(hangs)
    t0 = time.monotonic()
    with pytest.raises(forked_snapshot.SnapshotFailed, match="longer than 1 s"):
        child.result(timeout_s=1)
    assert time.monotonic() - t0 < 10
    with pytest.raises(ProcessLookupError):
        os.kill(child.pid, 0)  # killed and reaped
