"""The HA tests' pause helper sees a real SQLite write lock held by a real stopped process."""
from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.process_pause import holds_sqlite_write_lock, is_stopped, pause_outside_sqlite_write

_WRITER = """
import sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("PRAGMA journal_mode=WAL")
if sys.argv[2] == "write":
    c.execute("BEGIN")
    c.execute("INSERT INTO t VALUES (1)")
else:
    c.execute("SELECT * FROM t").fetchall()
print("ready", flush=True)
time.sleep(60)
"""


def _start(database: Path, mode: str) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", _WRITER, str(database), mode], stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    return p


def test_a_process_inside_a_write_transaction_holds_the_lock_and_a_reader_does_not(tmp_path: Path) -> None:
    database = tmp_path / "jobs.db"
    setup = sqlite3.connect(database)
    setup.execute("PRAGMA journal_mode=WAL")
    setup.execute("CREATE TABLE t (x INTEGER)")
    setup.close()
    writer, reader = _start(database, "write"), _start(database, "read")
    try:
        assert holds_sqlite_write_lock(writer.pid, database)
        assert not holds_sqlite_write_lock(reader.pid, database)
        assert pause_outside_sqlite_write(reader.pid, database) == 1 and is_stopped(reader.pid)
        # A writer frozen inside its transaction is woken again each time, until the tries run out.
        with pytest.raises(AssertionError, match="held the database's write lock at each of 3 pauses"):
            pause_outside_sqlite_write(writer.pid, database, attempts=3)
        assert not is_stopped(writer.pid)
        os.kill(reader.pid, signal.SIGCONT)
    finally:
        for p in (writer, reader):
            p.kill()
            p.wait()
