"""Uploads (a snapshot's uploads of shared files at a URL, several at a time): they run together,
``wait`` returns only once every one has ended, even after one failed, and raises that failure; with
one thread an upload runs where it is handed over, as before. The uploads here are functions; a real
S3 server's are in tests/integration/test_remote_uploads.py."""
from __future__ import annotations

import threading
import time

import pytest

from millstream.engine.runtime.state.state_uploader import Uploads


def test_uploads_run_together() -> None:
    gate = threading.Barrier(3)  # passes only once three uploads are running at the same time
    done: list[int] = []

    def upload(i: int) -> None:
        gate.wait(10)
        done.append(i)

    uploads = Uploads(3)
    for i in range(3):
        uploads.submit(lambda i=i: upload(i))
    uploads.wait()
    assert sorted(done) == [0, 1, 2]


def test_one_thread_uploads_where_handed_over() -> None:
    seen: list[str] = []
    uploads = Uploads(1)
    uploads.submit(lambda: seen.append(threading.current_thread().name))
    assert seen == [threading.current_thread().name]  # already ran, on this thread
    uploads.wait()


def test_wait_raises_a_failure_only_after_every_upload_ended() -> None:
    release = threading.Event()
    landed: list[str] = []

    def fails() -> None:
        raise OSError("the store refused it")

    def slow() -> None:
        release.wait(10)
        landed.append("slow")

    uploads = Uploads(2)
    uploads.submit(fails)
    uploads.submit(slow)
    waiter_error: list[BaseException] = []

    def waiter() -> None:
        try:
            uploads.wait()
        except OSError as e:
            waiter_error.append(e)

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.2)
    assert t.is_alive(), "wait returned while an upload was still running"
    release.set()
    t.join(10)
    assert landed == ["slow"]
    assert [str(e) for e in waiter_error] == ["the store refused it"]


def test_wait_with_nothing_handed_over_returns() -> None:
    uploads = Uploads(4)
    uploads.wait()
    assert uploads.pending == 0


@pytest.mark.parametrize("threads", [0, -3])
def test_fewer_than_one_thread_is_one(threads: int) -> None:
    ran: list[bool] = []
    uploads = Uploads(threads)
    uploads.submit(lambda: ran.append(True))
    assert ran == [True]
