"""ReplayWindow alone: a sender's message is accepted once, out of order within the window, never when old."""
from __future__ import annotations

import os

import pytest

from millstream.engine.security.replay import ReplayError, ReplayWindow, stamp


def test_each_message_is_accepted_once_even_out_of_order():
    w = ReplayWindow("inbox", window=8, clock=lambda: 1000.0)
    for seq in (1, 3, 2, 5, 4):
        w.check("a", seq, 1_000_000)
    for seq in (1, 2, 3, 4, 5):
        with pytest.raises(ReplayError, match="accepted before"):
            w.check("a", seq, 1_000_000)
    w.check("b", 1, 1_000_000)  # another sender's numbers are its own
    w.check("a", 20, 1_000_000)
    with pytest.raises(ReplayError):  # fell out of the window below 20: cannot be told apart from a replay
        w.check("a", 11, 1_000_000)
    w.check("a", 13, 1_000_000)


def test_old_or_unstamped_messages_are_refused_and_silent_senders_forgotten():
    now = [1000.0]
    w = ReplayWindow("inbox", max_age_s=60, clock=lambda: now[0], max_senders=2)
    with pytest.raises(ReplayError, match="older than the replay window"):
        w.check("a", 1, 1000_000 - 61_000)
    with pytest.raises(ReplayError, match="no sender"):
        w.check(None, None, None)
    for s in ("a", "b", "c"):
        w.check(s, 1, 1_000_000)
    assert len(w._senders) == 2  # bounded; "a" is forgotten, and its old messages are refused by age


def test_stamps_are_unique_per_process_and_increasing():
    a, b = stamp(), stamp()
    assert a[0] == b[0] and b[1] == a[1] + 1
    r, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.write(wfd, stamp()[0].encode())
        os._exit(0)
    os.waitpid(pid, 0)
    assert os.read(r, 64).decode() != a[0]  # a forked child never reuses its parent's numbers


def test_a_message_sealed_for_an_earlier_epoch_of_its_receiver_is_refused_however_young():
    from millstream.engine.taskexecutor import messages

    secret, inbox = "s", "ms:jm:inbox"
    before = messages.seal({"type": "slot_lost", "tm": "t", "slot": 0}, secret, inbox, epoch=6)
    unstamped = messages.seal({"type": "slot_lost", "tm": "t", "slot": 0}, secret, inbox)
    restarted = ReplayWindow(inbox, epoch=7)  # a new process: its window is empty
    with pytest.raises(ReplayError, match="epoch 6 of its receiver, which is at epoch 7"):
        messages.open_message(before, secret, inbox, restarted)
    with pytest.raises(ReplayError, match="epoch None"):
        messages.open_message(unstamped, secret, inbox, restarted)
    now = messages.seal({"type": "slot_lost", "tm": "t", "slot": 0}, secret, inbox, epoch=7)
    assert messages.open_message(now, secret, inbox, restarted)["epoch"] == 7
    assert messages.open_message(before, secret, inbox, ReplayWindow(inbox))["type"] == "slot_lost"  # unchecked
