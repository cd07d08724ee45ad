"""The SQL persistence layer against real databases: SQLite in a temporary
directory always, and PostgreSQL when one is reachable (in a throwaway schema)."""
from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, inspect, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from millstream.backend.persistence.database import (
    alembic_config,
    make_engine,
    make_session_factory,
    upgrade_database,
)
from millstream.backend.persistence.jar_store import JarRepository
from millstream.backend.persistence.models import Base
from millstream.backend.persistence.sql_job_store import SqlJobStore
from millstream.backend.persistence.taskmanager_history import TaskManagerHistory, TaskManagerState
from millstream.engine.jobmanager.job_store import ExceptionRecord, JobOutputRecord, JobRecord, SavepointRecord, bounded_tail

TABLES = {
    "jobs", "job_exceptions", "jars", "taskmanagers", "checkpoints", "checkpoint_restores", "savepoints", "job_output",
    "collect_marks", "stdout_marks",
}


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    upgrade_database(database_url)
    engine = make_engine(database_url)
    yield engine
    engine.dispose()


@pytest.fixture
def sessions(engine: Engine) -> sessionmaker[Session]:
    return make_session_factory(engine)


def _job(jid: str = "a" * 32, start_time: int = 1_700_000_000_000, **changes) -> JobRecord:
    record = JobRecord(
        jid=jid,
        name="WordCount — ünïcode",
        state="RUNNING",
        job_type="STREAMING",
        start_time=start_time,
        end_time=-1,
        last_modification=start_time + 5,
        job_graph={
            "jid": jid,
            "nodes": [{"id": "v1", "parallelism": 2, "inputs": [{"id": "v0", "ship_strategy": "HASH"}]}],
            "nested": {"flag": True, "none": None, "float": 1.5},
        },
        timestamps={"CREATED": start_time, "RUNNING": start_time + 3},
        vertices=[{"id": "v1", "subtasks": [{"subtask": 0, "status": "RUNNING"}]}],
        failure_cause=None,
        # Every byte value, including NUL, which text columns would mangle.
        user_code=bytes(range(256)) * 4,
    )
    for key, value in changes.items():
        setattr(record, key, value)
    return record


def _current_revision(url: str) -> str | None:
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            return MigrationContext.configure(connection).get_current_revision()
    finally:
        engine.dispose()


# --- migrations -------------------------------------------------------------


def test_upgrade_creates_tables_from_any_directory(database_url: str, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    upgrade_database(database_url)

    head = ScriptDirectory.from_config(alembic_config(database_url)).get_current_head()
    assert head is not None
    assert _current_revision(database_url) == head
    engine = make_engine(database_url)
    try:
        assert TABLES <= set(inspect(engine).get_table_names())
        assert {ix["name"] for ix in inspect(engine).get_indexes("jobs")} == {"ix_jobs_start_time"}
    finally:
        engine.dispose()


def test_migrations_match_the_models(engine: Engine) -> None:
    with engine.connect() as connection:
        diff = compare_metadata(MigrationContext.configure(connection), Base.metadata)
    assert diff == []


def test_upgrade_is_idempotent(database_url: str) -> None:
    upgrade_database(database_url)
    engine = make_engine(database_url)
    try:
        store = SqlJobStore(make_session_factory(engine))
        store.save_job(_job())

        upgrade_database(database_url)
        upgrade_database(database_url)

        assert store.get_job("a" * 32) == _job()
    finally:
        engine.dispose()


def test_upgrade_adopts_tables_created_without_alembic(database_url: str) -> None:
    engine = make_engine(database_url)
    Base.metadata.create_all(engine)
    engine.dispose()

    upgrade_database(database_url)

    assert _current_revision(database_url) is not None


# --- jobs and exceptions ----------------------------------------------------


def test_save_and_get_round_trips_every_field(sessions: sessionmaker[Session]) -> None:
    store = SqlJobStore(sessions)
    store.save_job(_job())

    loaded = store.get_job("a" * 32)

    assert loaded == _job()
    assert isinstance(loaded.user_code, bytes)
    assert store.get_job("f" * 32) is None


def test_save_job_updates_by_jid(sessions: sessionmaker[Session]) -> None:
    store = SqlJobStore(sessions)
    store.save_job(_job())
    finished = _job(
        state="FAILED",
        end_time=1_700_000_009_000,
        last_modification=1_700_000_009_000,
        timestamps={"CREATED": 1, "RUNNING": 2, "FAILED": 3},
        vertices=[],
        failure_cause="java.lang.RuntimeException: boom",
        user_code=None,
    )

    store.save_job(finished)

    # user_code=None means "unchanged": state changes never rewrite the program's bytes.
    assert store.get_job("a" * 32) == dataclasses.replace(finished, user_code=_job().user_code)
    assert len(store.list_jobs()) == 1
    assert store.list_jobs()[0].user_code is None  # listing leaves the code out


def test_list_jobs_newest_first(sessions: sessionmaker[Session]) -> None:
    store = SqlJobStore(sessions)
    for jid, start in [("old", 1_000), ("newest", 3_000), ("middle", 2_000)]:
        store.save_job(_job(jid=jid, start_time=start))

    assert [job.jid for job in store.list_jobs()] == ["newest", "middle", "old"]


def test_exceptions_newest_first_with_limit(sessions: sessionmaker[Session]) -> None:
    store = SqlJobStore(sessions)
    store.save_job(_job(jid="j1"))
    store.save_job(_job(jid="j2"))
    full = ExceptionRecord(
        jid="j1",
        timestamp=100,
        exception_name="ValueError",
        stacktrace="Traceback (most recent call last):\n  ...\nValueError: bad",
        task_name="Map -> Sink",
        vertex_id="v1",
        subtask=1,
        attempt=2,
        endpoint="127.0.0.1:6121",
        taskmanager_id="tm-1",
    )
    store.add_exception(full)
    store.add_exception(ExceptionRecord(jid="j1", timestamp=300, exception_name="E300", stacktrace="s"))
    store.add_exception(ExceptionRecord(jid="j1", timestamp=200, exception_name="E200", stacktrace="s"))
    store.add_exception(ExceptionRecord(jid="j2", timestamp=999, exception_name="other", stacktrace="s"))

    assert [e.exception_name for e in store.list_exceptions("j1")] == ["E300", "E200", "ValueError"]
    assert store.list_exceptions("j1")[-1] == full
    assert [e.timestamp for e in store.list_exceptions("j1", limit=2)] == [300, 200]
    assert store.list_exceptions("unknown") == []


def test_exception_for_unknown_job_is_rejected(sessions: sessionmaker[Session]) -> None:
    # Proves foreign keys are enforced, which SQLite only does when switched on.
    with pytest.raises(IntegrityError):
        SqlJobStore(sessions).add_exception(ExceptionRecord(jid="nope", timestamp=1, exception_name="E", stacktrace=""))


def test_deleting_a_job_cascades_to_its_exceptions(sessions: sessionmaker[Session]) -> None:
    store = SqlJobStore(sessions)
    store.save_job(_job(jid="j1"))
    store.add_exception(ExceptionRecord(jid="j1", timestamp=1, exception_name="E", stacktrace=""))

    with sessions.begin() as session:
        session.execute(text("DELETE FROM jobs WHERE jid = 'j1'"))

    with sessions() as session:
        assert session.execute(text("SELECT count(*) FROM job_exceptions")).scalar_one() == 0


def test_history_survives_a_restart(database_url: str) -> None:
    upgrade_database(database_url)
    first = make_engine(database_url)
    store = SqlJobStore(make_session_factory(first))
    store.save_job(_job(jid="j1", state="FINISHED", end_time=5))
    store.add_exception(ExceptionRecord(jid="j1", timestamp=1, exception_name="E", stacktrace="trace"))
    JarRepository(make_session_factory(first)).add("jar-1", "job.py", "/u/jar-1", 10, 1, None)
    first.dispose()

    # A new process: new engine, new session factory, migrations run again at startup.
    upgrade_database(database_url)
    second = make_engine(database_url)
    try:
        reopened = SqlJobStore(make_session_factory(second))
        assert reopened.get_job("j1") == _job(jid="j1", state="FINISHED", end_time=5)
        assert [e.stacktrace for e in reopened.list_exceptions("j1")] == ["trace"]
        assert [j.id for j in JarRepository(make_session_factory(second)).list()] == ["jar-1"]
    finally:
        second.dispose()


# --- uploaded programs ------------------------------------------------------


def test_jars_add_get_list_delete(sessions: sessionmaker[Session]) -> None:
    jars = JarRepository(sessions)
    first = jars.add("id-1", "wordcount.py", "/var/uploads/id-1", 1234, 1_000, ["main", "other"])
    jars.add("id-2", "etl.py", "/var/uploads/id-2", 5 * 1024**3, 2_000, None)

    assert jars.get("id-1") == first
    assert first.entry == ("main", "other")
    assert jars.get("id-2").entry is None
    assert jars.get("id-2").size == 5 * 1024**3  # beyond 32 bits
    assert [j.id for j in jars.list()] == ["id-2", "id-1"]

    assert jars.delete("id-1") is True
    assert jars.delete("id-1") is False
    assert jars.get("id-1") is None
    assert [j.id for j in jars.list()] == ["id-2"]


def test_jar_without_entry_is_sql_null(sessions: sessionmaker[Session]) -> None:
    JarRepository(sessions).add("id-1", "a.py", "/p", 1, 1, None)
    with sessions() as session:
        assert session.execute(text("SELECT count(*) FROM jars WHERE entry IS NULL")).scalar_one() == 1


# --- TaskManager history ----------------------------------------------------


def test_taskmanager_upsert_keeps_first_seen(sessions: sessionmaker[Session]) -> None:
    history = TaskManagerHistory(sessions)
    history.upsert_seen("tm-1", "10.0.0.1", 6121, 2, now_ms=1_000, state="REGISTERED")
    history.upsert_seen("tm-2", "10.0.0.2", None, 4, now_ms=2_000, state="REGISTERED")
    history.upsert_seen("tm-1", "10.0.0.9", 6122, 3, now_ms=5_000, state="REGISTERED")

    tms = {tm.id: tm for tm in history.list()}
    assert [tm.id for tm in history.list()] == ["tm-2", "tm-1"]
    assert asdict(tms["tm-1"]) == {
        "id": "tm-1",
        "host": "10.0.0.9",
        "data_port": 6122,
        "slots": 3,
        "first_seen": 1_000,
        "last_seen": 5_000,
        "state": TaskManagerState.REGISTERED,
    }
    assert tms["tm-2"].data_port is None


def test_taskmanager_mark(sessions: sessionmaker[Session]) -> None:
    history = TaskManagerHistory(sessions)
    history.upsert_seen("tm-1", "h", 1, 2, now_ms=1_000, state="REGISTERED")

    assert history.mark("tm-1", "LOST", now_ms=9_000) is True
    assert history.mark("tm-unknown", "LOST", now_ms=9_000) is False
    (tm,) = history.list()
    assert (tm.state, tm.first_seen, tm.last_seen) == (TaskManagerState.LOST, 1_000, 9_000)
    assert tm.state.is_terminal()

    # Re-registering after being lost brings it back.
    history.upsert_seen("tm-1", "h", 1, 2, now_ms=10_000, state="REGISTERED")
    assert history.list()[0].state is TaskManagerState.REGISTERED

    with pytest.raises(ValueError):
        history.mark("tm-1", "GONE", now_ms=11_000)


def test_concurrent_saves_from_many_threads(sessions: sessionmaker[Session]) -> None:
    # The JobManager saves from several threads; racing upserts of one jid must not collide.
    store = SqlJobStore(sessions)

    def save(worker: int) -> None:
        for i in range(20):
            store.save_job(_job(jid="shared", last_modification=worker * 100 + i))
            store.save_job(_job(jid=f"w{worker}-{i}"))

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(save, range(8)))

    assert len(store.list_jobs()) == 1 + 8 * 20


# --- checkpoint and savepoint history -------------------------------------------------


def _checkpoint_records() -> list[dict]:
    from millstream.engine.checkpoint.messages import CheckpointType, TaskAck
    from millstream.engine.checkpoint.stats_tracker import CheckpointStats, CheckpointStatsTracker, SubtaskStats

    tracker = CheckpointStatsTracker()
    tracker.report_pending(CheckpointStats(1, CheckpointType.CHECKPOINT, 1000, {"v1": 2}))
    for sub in (0, 1):
        tracker.report_ack(1, "v1", SubtaskStats.from_ack(sub, TaskAck({}, 100 + sub, sync_ms=3, async_ms=7), 1100 + sub))
    tracker.report_completed(1, "/ck/job/chk-1")
    tracker.report_pending(CheckpointStats(2, CheckpointType.SAVEPOINT, 2000, {"v1": 2}, request_id="t-1"))
    tracker.report_failed(2, 2500, "task v1 (1): disk full — ünïcode")
    tracker.report_pending(CheckpointStats(3, CheckpointType.CHECKPOINT, 3000, {"v1": 2}))
    return tracker.take_changed_records()


def test_checkpoint_statistics_round_trip_and_update_in_place(sessions: sessionmaker[Session]) -> None:
    from millstream.engine.checkpoint.stats_tracker import JOBMANAGER_RESTARTED, CheckpointStatsTracker

    store = SqlJobStore(sessions)
    store.save_job(_job())
    records = _checkpoint_records()
    store.save_checkpoints("a" * 32, records)
    assert store.list_checkpoints("a" * 32) == records
    done = dict(records[2], status="COMPLETED", external_path="/ck/job/chk-3")
    store.save_checkpoints("a" * 32, [done])  # an update, not a second row
    stored = store.list_checkpoints("a" * 32)
    assert [r["id"] for r in stored] == [1, 2, 3] and stored[2]["external_path"] == "/ck/job/chk-3"
    assert store.list_checkpoints("b" * 32) == []

    store.add_checkpoint_restore("a" * 32, {"id": 1, "restore_timestamp": 5000, "is_savepoint": False, "external_path": "/ck/job/chk-1"})
    restores = store.list_checkpoint_restores("a" * 32)
    tracker = CheckpointStatsTracker.from_records(store.list_checkpoints("a" * 32), restores)
    assert (tracker.num_completed, tracker.num_failed, tracker.num_restored) == (2, 1, 1)
    assert tracker.latest_failed.failure_message == "task v1 (1): disk full — ünïcode"
    assert tracker.get(1).subtasks["v1"][1].state_size == 101
    # in progress when a JobManager died: failed on the way back
    store.save_checkpoints("a" * 32, [records[2]])
    again = CheckpointStatsTracker.from_records(store.list_checkpoints("a" * 32), now_ms=9000)
    assert again.get(3).failure_message == JOBMANAGER_RESTARTED


def test_savepoints_upsert_by_trigger_id_newest_first_and_cascade(sessions: sessionmaker[Session]) -> None:
    store = SqlJobStore(sessions)
    store.save_job(_job())
    jid = "a" * 32
    first = SavepointRecord(jid, "t-1", "IN_PROGRESS", 1000, "/sp", checkpoint_id=4)
    store.save_savepoint(first)
    store.save_savepoint(SavepointRecord(jid, "t-2", "IN_PROGRESS", 2000, "/sp", 9, "SYNC_SAVEPOINT", drain=True))
    first.status, first.path, first.completion_timestamp = "COMPLETED", "/sp/savepoint-aaaaaa-0123456789ab", 1500
    store.save_savepoint(first)
    assert store.get_savepoint(jid, "t-1") == first
    assert [(r.request_id, r.status, r.is_stop) for r in store.list_savepoints(jid)] == [
        ("t-2", "IN_PROGRESS", True),
        ("t-1", "COMPLETED", False),
    ]
    assert store.get_savepoint(jid, "t-3") is None and store.get_savepoint("b" * 32, "t-1") is None
    with sessions.begin() as session:
        session.execute(text("DELETE FROM jobs"))
    assert store.list_savepoints(jid) == []


def test_job_output_is_kept_replaced_and_cascades(sessions: sessionmaker[Session]) -> None:
    store = SqlJobStore(sessions)
    store.save_job(_job())
    jid = "a" * 32
    assert store.get_output(jid) is None
    record = JobOutputRecord(jid, ["one", "twö", ""], first=0, total=3, kept_at=1000)
    store.save_output(record)
    assert store.get_output(jid) == record and not record.truncated
    again = JobOutputRecord(jid, ["b"], first=41, total=42, kept_at=2000)
    store.save_output(again)
    assert store.get_output(jid) == again and again.truncated
    with sessions.begin() as session:
        session.execute(text("DELETE FROM jobs"))
    assert store.get_output(jid) is None


def test_collect_marks_only_grow_per_writer_and_cascade(sessions: sessionmaker[Session]) -> None:
    store = SqlJobStore(sessions)
    store.save_job(_job())
    jid, w1, w2 = "a" * 32, b"\x00writer1", b"\xffwriter"
    assert store.get_collect_mark(jid, w1) == -1
    store.save_collect_marks(jid, {w1: 4, w2: 0})
    store.save_collect_marks(jid, {w1: 9})
    store.save_collect_marks(jid, {w1: 2, w2: 3})  # a stale caller's lower mark does not lower it
    assert (store.get_collect_mark(jid, w1), store.get_collect_mark(jid, w2)) == (9, 3)
    assert store.get_collect_mark("b" * 32, w1) == -1
    with pytest.raises(IntegrityError):  # only for a stored job
        store.save_collect_marks("b" * 32, {w1: 1})
    with sessions.begin() as session:
        session.execute(text("DELETE FROM jobs"))
    assert store.get_collect_mark(jid, w1) == -1


def test_stdout_marks_grow_reset_and_cascade(sessions: sessionmaker[Session]) -> None:
    store = SqlJobStore(sessions)
    store.save_job(_job())
    jid, w1, w2 = "a" * 32, b"\x00writer1", b"\xffwriter"
    assert store.get_stdout_mark(jid, w1) == (-1, -1, 0, -1)
    store.save_stdout_marks(jid, {w1: (4, 10), w2: (0, 3)}, 11)
    store.save_stdout_marks(jid, {w1: (2, 5)}, 12)  # a lower index does not lower the mark
    assert store.get_stdout_mark(jid, w1) == (4, 10, 0, 11)
    store.reset_stdout_marks(jid, 2)  # the stream was found holding 2 lines
    assert store.get_stdout_mark(jid, w1) == (4, 10, 5, 2) and store.get_stdout_mark(jid, w2) == (0, 3, 1, 2)
    store.save_stdout_marks(jid, {w1: (6, 1)}, 2)
    assert store.get_stdout_mark(jid, w1) == (6, 1, 5, 2)  # the floor stays
    with sessions.begin() as session:
        session.execute(text("DELETE FROM jobs"))
    assert store.get_stdout_mark(jid, w1) == (-1, -1, 0, -1)


def test_bounded_tail_keeps_the_newest_lines_within_both_bounds() -> None:
    lines = [f"line {i}" for i in range(100)]
    assert bounded_tail(lines, 0, max_lines=10) == (lines[-10:], 90)
    assert bounded_tail(lines, 500, max_lines=1000) == (lines, 500)
    kept, first = bounded_tail(lines, 0, max_lines=1000, max_chars=30)  # "line 99\n" is 8 characters
    assert kept == lines[-3:] and first == 97
    cut, _ = bounded_tail(["x" * 50, "y"], 0, line_chars=10)
    assert cut == ["x" * 10 + " [cut]", "y"]
