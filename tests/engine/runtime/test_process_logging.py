"""Process logging: rotation, the job context on task threads, and slot records through their pipes."""
from __future__ import annotations

import logging
import multiprocessing
import threading
import time
from pathlib import Path

from millstream.engine.runtime import process_logging
from millstream.engine.runtime.process_logging import configure, forward, log_to_pipe, task_log_context

SPAWN = multiprocessing.get_context("spawn")


def _slot(conn, job: str) -> None:
    log_to_pipe(conn)
    with task_log_context(job, 3):
        logging.getLogger("millstream.task").info("from the slot")
    logging.getLogger("millstream.slot").info("outside any task")


def _chatty_slot(conn, name: str, stop) -> None:
    log_to_pipe(conn)
    n = 0
    while not stop.is_set():
        logging.getLogger("millstream.slot").info("%s line %d %s", name, n, "x" * 500)
        n += 1


def _start(target, *args, name: str, handlers: list[logging.Handler]):
    reader, writer = SPAWN.Pipe(duplex=False)
    p = SPAWN.Process(target=target, args=(writer, *args), name=name)
    p.start()
    writer.close()
    return p, forward(reader, handlers, name)


def test_task_lines_name_the_job_and_attempt_and_slot_lines_reach_the_taskmanagers_file(tmp_path: Path) -> None:
    log = tmp_path / "taskmanager.log"
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        configure(str(log))
        p, reader = _start(_slot, "0123456789abcdef" * 2, name="slot-7", handlers=list(root.handlers))
        p.join(60)
        reader.join(10)  # the slot's end closed: everything it logged is in
        with task_log_context("fedcba9876543210" * 2, 0):
            logging.getLogger("millstream.tm").info("on a task thread here")
        t = threading.Thread(target=lambda: logging.getLogger("millstream.tm").info("another thread"))
        t.start()
        t.join()
        for h in root.handlers:
            h.flush()
        lines = log.read_text().splitlines()
        assert any(l.endswith("millstream.task slot-7 [job 01234567 #3] from the slot") for l in lines), lines
        assert any(l.endswith("millstream.slot slot-7 outside any task") for l in lines), lines
        assert any("[job fedcba98 #0] on a task thread here" in l for l in lines), lines
        assert any(l.endswith("millstream.tm another thread") for l in lines), lines  # not the other thread's job
    finally:
        for h in root.handlers:
            h.close()
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])


def test_the_log_file_rotates_by_size(tmp_path: Path) -> None:
    log = tmp_path / "jobmanager.log"
    handler = process_logging.file_handler(str(log), max_bytes=2000, backups=2)
    logger = logging.getLogger("millstream.rotation-test")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        for i in range(200):
            logger.warning("line %d %s", i, "x" * 40)
    finally:
        handler.close()
        logger.removeHandler(handler)
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["jobmanager.log", "jobmanager.log.1", "jobmanager.log.2"], files
    assert all(p.stat().st_size <= 2100 for p in tmp_path.iterdir())
    assert "line 199" in log.read_text()


def test_a_slot_killed_mid_line_leaves_the_other_slots_logging(tmp_path: Path) -> None:
    """One SIGKILLed slot must not silence its neighbours: with one queue shared by every slot, a slot
    killed while holding the queue's write lock left the others' lines stuck behind it for good."""
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    # An event each: a multiprocessing Event's is_set() takes a lock shared by the processes holding it,
    # and a victim killed inside it would stop the other slot there (the test's own fault, not the logs').
    stops = [SPAWN.Event(), SPAWN.Event()]
    victim, victim_reader = _start(_chatty_slot, "victim", stops[0], name="slot-0", handlers=[Collect()])
    other, other_reader = _start(_chatty_slot, "other", stops[1], name="slot-1", handlers=[Collect()])
    try:
        for _ in range(5):  # kill it mid-stream a few times over: whatever it held, it held alone
            deadline = time.monotonic() + 60
            while sum(1 for l in lines if l.startswith("victim")) < 50 and time.monotonic() < deadline:
                time.sleep(0.01)
            victim.kill()
            victim.join(10)
            victim_reader.join(10)
            assert not victim_reader.is_alive(), "the dead slot's reader did not end"
            seen = sum(1 for l in lines if l.startswith("other"))
            deadline = time.monotonic() + 30
            while sum(1 for l in lines if l.startswith("other")) < seen + 200 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert sum(1 for l in lines if l.startswith("other")) >= seen + 200, "the other slot stopped logging"
            lines[:] = [l for l in lines if l.startswith("other")]
            stops.append(SPAWN.Event())
            victim, victim_reader = _start(_chatty_slot, "victim", stops[-1], name="slot-0", handlers=[Collect()])
    finally:
        # Only the live slots' events: a killed victim may have died inside its own event's lock
        # (is_set() takes it), and setting that event would wait on the dead process for good.
        for p, stop in ((victim, stops[-1] if len(stops) > 2 else stops[0]), (other, stops[1])):
            if p.is_alive():
                stop.set()
        for p in (victim, other):
            p.join(10)
            if p.is_alive():
                p.kill()
