"""Shared stream ticks: many viewers of one job tab cost one render per tick."""
from __future__ import annotations

import threading
import time

from millstream.backend.ui.sse import SharedTicks


def test_viewers_of_one_subject_share_a_render_until_it_is_stale() -> None:
    now = [100.0]
    ticks = SharedTicks(max_age_s=0.9, clock=lambda: now[0])
    renders: list[str] = []

    def render(name: str):
        return lambda: (renders.append(name) or [("body", f"{name} {len(renders)}")], False)

    assert ticks.get("a", render("a")) == ([("body", "a 1")], False)
    assert ticks.get("a", render("a")) == ([("body", "a 1")], False)  # a second viewer, same tick
    assert ticks.get("b", render("b"))[0] == [("body", "b 2")]  # another tab renders its own
    now[0] += 1.0
    assert ticks.get("a", render("a"))[0] == [("body", "a 3")]  # next tick: fresh figures
    assert renders == ["a", "b", "a"]


def test_concurrent_viewers_wait_for_the_one_render() -> None:
    ticks = SharedTicks(max_age_s=5)
    calls = []

    def slow():
        calls.append(1)
        time.sleep(0.2)
        return [("header", "h")], False

    threads = [threading.Thread(target=ticks.get, args=("job", slow)) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1


def test_a_failed_render_is_not_kept() -> None:
    ticks = SharedTicks()

    def boom():
        raise KeyError("gone")

    for _ in range(2):
        try:
            ticks.get("x", boom)
        except KeyError:
            pass
        else:
            raise AssertionError("the failure must reach every viewer")
    assert ticks.get("x", lambda: ([], True)) == ([], True)
