"""WriteBehindJobStore over an in-memory store that can be made unreachable: writes made while it is away
are kept in order, merged per row, and stored once it is back; reads see every write or raise."""
from __future__ import annotations

import pytest

from millstream.engine.jobmanager.job_store import ExceptionRecord, InMemoryJobStore, JobRecord, StoreUnavailable
from millstream.engine.jobmanager.write_behind_store import WriteBehindJobStore


class Flaky(InMemoryJobStore):
    def __init__(self) -> None:
        super().__init__()
        self.down = False
        self.calls = 0

    def __getattribute__(self, name: str):
        attr = object.__getattribute__(self, name)
        if callable(attr) and not name.startswith("_") and object.__getattribute__(self, "down"):
            def refuse(*a, **k):
                object.__setattr__(self, "calls", object.__getattribute__(self, "calls") + 1)
                raise StoreUnavailable("the SQL database is unavailable: connection refused")
            return refuse
        return attr


class Clock:
    t = 0.0

    def __call__(self) -> float:
        return self.t


def job(state: str, code: bytes | None = None) -> JobRecord:
    return JobRecord(jid="j1", name="n", state=state, job_type="STREAMING", start_time=1, user_code=code)


def test_writes_wait_for_the_store_and_land_in_order() -> None:
    inner, clock = Flaky(), Clock()
    store = WriteBehindJobStore(inner, clock=clock)
    store.save_job(job("CREATED", b"code"))
    inner.down = True
    store.save_job(job("RUNNING"))  # no code: the stored code must survive the merge
    store.save_checkpoints("j1", [{"id": 1, "status": "COMPLETED"}])
    store.add_exception(ExceptionRecord("j1", 5, "E", "trace"))
    store.save_checkpoints("j1", [{"id": 2, "status": "COMPLETED"}, {"id": 1, "status": "COMPLETED", "x": 1}])
    store.save_job(job("CANCELED"))
    assert store.pending() == 3  # one job row, one checkpoint batch, one exception
    assert inner.calls == 1  # tried once; later writes queue without knocking until the retry interval
    with pytest.raises(StoreUnavailable):
        store.get_job("j1")
    assert not store.flush()  # before the retry interval: not tried
    inner.down = False
    assert not store.flush() and store.pending() == 3  # still within the interval
    clock.t += 1.5
    assert store.flush() and store.pending() == 0
    stored = inner.get_job("j1")
    assert (stored.state, stored.user_code) == ("CANCELED", b"code")
    assert [(c["id"], c.get("x")) for c in inner.list_checkpoints("j1")] == [(1, 1), (2, None)]
    assert [e.exception_name for e in inner.list_exceptions("j1")] == ["E"]


def test_a_read_writes_the_queue_first_and_nothing_overtakes_it() -> None:
    inner, clock = Flaky(), Clock()
    store = WriteBehindJobStore(inner, clock=clock)
    inner.down = True
    store.save_job(job("RUNNING", b"c"))
    inner.down = False
    assert store.get_job("j1").state == "RUNNING"  # the read flushed, whatever the interval
    inner.down = True
    store.save_job(job("FAILING"))
    inner.down = False
    store.save_job(job("FAILED"))  # queued behind FAILING (interval not over), never overtaking it
    assert store.pending() == 1
    clock.t += 2
    store.flush()
    assert inner.get_job("j1").state == "FAILED"


def test_exceptions_beyond_the_bound_drop_the_oldest_and_say_so() -> None:
    inner = Flaky()
    store = WriteBehindJobStore(inner, max_exceptions=3, clock=Clock())
    inner.down = True
    for i in range(5):
        store.add_exception(ExceptionRecord("j1", i, f"E{i}", ""))
    assert store.pending() == 3 and store.dropped_exceptions == 2
    inner.down = False
    assert store.flush(force=True)
    assert sorted(e.exception_name for e in inner.list_exceptions("j1")) == ["E2", "E3", "E4"]


def test_a_write_the_database_refuses_is_dropped_not_retried_for_ever() -> None:
    class Picky(Flaky):
        def add_exception(self, record: ExceptionRecord) -> None:
            if record.exception_name == "bad":
                raise ValueError("constraint violated")
            super().add_exception(record)

    inner = Picky()
    store = WriteBehindJobStore(inner, clock=Clock())
    inner.down = True
    store.add_exception(ExceptionRecord("j1", 1, "bad", ""))
    store.add_exception(ExceptionRecord("j1", 2, "good", ""))
    inner.down = False
    assert store.flush(force=True) and store.pending() == 0
    assert [e.exception_name for e in inner.list_exceptions("j1")] == ["good"]


def test_stream_marks_wait_merged_and_a_reset_keeps_its_place_among_the_saves() -> None:
    """Collect marks merge to each writer's highest; a print stream's saves and resets land in the
    order they were made (a save merged before a reset would have its lines frozen by it)."""
    inner, clock = Flaky(), Clock()
    store = WriteBehindJobStore(inner, clock=clock)
    store.save_job(job("RUNNING"))
    inner.down = True
    w1, w2 = b"writer01", b"writer02"
    store.save_collect_marks("j1", {w1: 5, w2: 1})
    store.save_collect_marks("j1", {w1: 3})
    store.save_stdout_marks("j1", {w1: (4, 10)}, 11)
    store.reset_stdout_marks("j1", 2)
    store.save_stdout_marks("j1", {w1: (6, 1)}, 2)
    assert store.pending() == 2  # one row of each kind for the job
    inner.down = False
    clock.t += 1.5
    assert store.flush()
    assert (inner.get_collect_mark("j1", w1), inner.get_collect_mark("j1", w2)) == (5, 1)
    assert inner.get_stdout_mark("j1", w1) == (6, 1, 5, 2)  # saved, frozen below 5, then line 6 read
