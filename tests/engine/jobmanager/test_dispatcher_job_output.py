"""An ended job's print() output goes to the JobStore (engine/jobmanager/job_output.py) and is read back
from there (backend/services/job_output.py) once its Redis stream is gone, or within what was kept;
against the test's real Redis with an in-memory JobStore and sealed lines, as in a cluster."""
from __future__ import annotations

from typing import Iterator

import pytest
import redis

from millstream.backend.services.job_output import has_output, last_page, read_output
from millstream.engine import redis_keys
from millstream.engine.jobmanager.dispatcher import Dispatcher, DispatcherConfig
from millstream.engine.jobmanager.job_store import InMemoryJobStore
from millstream.engine.runtime.io.job_stdout import append_lines, stdout_key
from tests.engine.jobmanager.test_job_master_savepoints import JOB, Clock, graph

SECRET = "a-cluster-secret"


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(redis_url)
    yield c
    c.close()


def _ended_job(client: redis.Redis, store: InMemoryJobStore, tmp_path, lines: list[str]) -> Dispatcher:
    d = Dispatcher(client, store, DispatcherConfig(checkpoint_dir=str(tmp_path), cluster_secret=SECRET), Clock())
    d.submit(graph(), b"user code")
    append_lines(client, JOB, lines, key=stdout_key(SECRET, JOB))
    client.rpush(redis_keys.job_stdout(JOB), b"forged by someone with only the Redis URL")
    client.incr(redis_keys.job_stdout_total(JOB))
    assert d.cancel(JOB)
    d._keep_ended_outputs()
    return d


def test_the_newest_lines_are_kept_and_served_once_redis_lost_them(client, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr("millstream.engine.jobmanager.job_output.OUTPUT_KEPT_LINES", 100)
    store = InMemoryJobStore()
    lines = [f"line {i}" for i in range(250)]
    d = _ended_job(client, store, tmp_path, lines)
    kept = store.get_output(JOB)
    assert kept is not None and kept.total == 251 and kept.lines == lines[-99:]  # the forged line is not kept
    record = d.job_record(JOB)

    # Within what was kept: from SQL, so a reader can page there; before it: Redis, while it has them.
    # (A line left out as forged leaves no gap: the kept lines end at the stream's end, so the ones
    # before the forged last line are numbered one later than in Redis.)
    chunk = read_output(d, record, 200, 10)
    assert chunk.kept and chunk.lines == lines[199:209] and chunk.dropped == 0
    assert read_output(d, record, 0, 5).lines == lines[:5] and not read_output(d, record, 0, 5).kept

    client.delete(redis_keys.job_stdout(JOB), redis_keys.job_stdout_total(JOB))  # an hour later
    assert has_output(d, record)
    old = read_output(d, record, 0, 5)
    assert old.kept and old.offset == old.dropped == old.first_held == kept.first == 152 and old.total == 251
    assert old.lines == lines[-99:-94]
    newest = last_page(d, record, 10)
    assert newest.lines == lines[-10:] and newest.next_offset == 251
    assert read_output(d, record, 10_000, 5).lines == []


def test_a_job_that_printed_nothing_keeps_nothing_and_offers_no_output(client, tmp_path) -> None:
    store = InMemoryJobStore()
    d = Dispatcher(client, store, DispatcherConfig(checkpoint_dir=str(tmp_path), cluster_secret=SECRET), Clock())
    d.submit(graph(), b"user code")
    assert d.cancel(JOB)
    d._keep_ended_outputs()
    assert store.get_output(JOB) is None and not has_output(d, d.job_record(JOB))
    assert read_output(d, d.job_record(JOB), 0, 10).total == 0
