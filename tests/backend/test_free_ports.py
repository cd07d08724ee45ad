"""Ports for servers started later come from below the kernel's ephemeral range (which every outgoing
connection draws from), are free when returned, and ``n`` of them are consecutive."""
from __future__ import annotations

import socket

from millstream.backend.free_ports import _ephemeral_range, consecutive_free_ports, free_port


def test_ports_are_free_and_outside_the_ephemeral_range():
    low, high = _ephemeral_range()
    for _ in range(50):
        port = free_port()
        assert not low <= port <= high
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))
    first = consecutive_free_ports(3)
    for port in range(first, first + 3):
        assert not low <= port <= high
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


def test_a_port_taken_is_not_returned(monkeypatch):
    taken = socket.socket()
    taken.bind(("127.0.0.1", free_port()))
    picks = iter([taken.getsockname()[1], taken.getsockname()[1] + 1])
    monkeypatch.setattr("millstream.backend.free_ports.random.randint", lambda lo, hi: next(picks))
    try:
        assert free_port() == taken.getsockname()[1] + 1
    finally:
        taken.close()
