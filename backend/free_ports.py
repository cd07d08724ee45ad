"""Ports free now for a server that binds them a little later (an embedded Redis, test clusters).

Picked at random below the kernel's ephemeral range, not by binding port 0: the kernel hands a port-0
socket a port from the same range it gives every outgoing connection, so in the time between the pick
and the server's bind (and again when a server is restarted on its port after a crash) a client's
connection may take it, and the server fails with "address already in use"."""
from __future__ import annotations

import random
import socket

_LINUX_DEFAULT = (32768, 60999)


def _ephemeral_range() -> tuple[int, int]:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = map(int, f.read().split())
        return low, high
    except (OSError, ValueError):  # not Linux: its default range is as good a guess as any
        return _LINUX_DEFAULT


def consecutive_free_ports(n: int = 1, host: str = "127.0.0.1") -> int:
    """The first of ``n`` consecutive ports of ``host`` that are free now, outside the ephemeral range."""
    low, high = _ephemeral_range()
    lo, hi = (10_000, low - n) if low - n > 10_000 else (high + 1, 65_535 - n)
    for _ in range(200):
        first = random.randint(lo, hi)
        try:
            for port in range(first, first + n):
                with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                    s.bind((host, port))
        except OSError:
            continue
        return first
    raise RuntimeError(f"no {n} consecutive free ports on {host} in {lo}-{hi + n - 1}")


def free_port(host: str = "127.0.0.1") -> int:
    """A port of ``host`` that is free now, outside the ephemeral range."""
    return consecutive_free_ports(1, host)
