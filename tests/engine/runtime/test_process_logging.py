"""Process logging: rotation, the job context on task threads, and slot records through the queue."""
from __future__ import annotations

import logging
import multiprocessing
import threading
from pathlib import Path

from millstream.engine.runtime import process_logging
from millstream.engine.runtime.process_logging import configure, listen, log_to_queue, task_log_context


def _slot(queue, job: str) -> None:
    log_to_queue(queue)
    with task_log_context(job, 3):
        logging.getLogger("millstream.task").info("from the slot")
    logging.getLogger("millstream.slot").info("outside any task")


def test_task_lines_name_the_job_and_attempt_and_slot_lines_reach_the_taskmanagers_file(tmp_path: Path) -> None:
    log = tmp_path / "taskmanager.log"
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        configure(str(log))
        queue = multiprocessing.get_context("spawn").Queue()
        listener = listen(queue)
        p = multiprocessing.get_context("spawn").Process(target=_slot, args=(queue, "0123456789abcdef" * 2), name="slot-7")
        p.start()
        p.join(60)
        with task_log_context("fedcba9876543210" * 2, 0):
            logging.getLogger("millstream.tm").info("on a task thread here")
        t = threading.Thread(target=lambda: logging.getLogger("millstream.tm").info("another thread"))
        t.start()
        t.join()
        listener.stop()
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
