"""A mini-cluster's collect iterator learns at once that the job ended: it used to wait out its poll
timeout twice after the last record, most of a short job's time in ``millstream run --local``."""
from __future__ import annotations

import threading

from millstream.engine.client.mini_cluster import LocalCollectGateway
from millstream.engine.runtime.collect import CollectEntry


def test_the_end_of_the_job_wakes_an_iterator_waiting_for_entries() -> None:
    gateway = LocalCollectGateway(threading.Event())
    got: list[list[CollectEntry]] = []
    waiter = threading.Thread(target=lambda: got.append(gateway.take(wait_s=60)))
    waiter.start()
    gateway.end()
    waiter.join(10)
    assert not waiter.is_alive() and got == [[]]  # woken with nothing, not after 60 s


def test_entries_published_before_the_end_are_all_taken_and_the_marker_never_is() -> None:
    gateway = LocalCollectGateway(threading.Event(), max_entries=4)
    entries = [object(), object(), object()]
    gateway.publish(entries)  # type: ignore[arg-type]
    gateway.end()
    assert gateway.take(wait_s=0) == entries
    assert gateway.take(wait_s=0) == []
    gateway.publish([object()] * 4)  # type: ignore[list-item]
    gateway.end()  # a full queue: no marker is needed, and the end does not block
    assert len(gateway.take(wait_s=0)) == 4
