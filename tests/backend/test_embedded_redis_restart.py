"""A restarted embedded Redis waits for its old port: a listener still holding it (a killed server's
socket not yet released) delays the restart instead of making the new server abort."""
from __future__ import annotations

import socket
import threading
import time

from millstream.backend.embedded_redis import _wait_until_port_free


def test_the_restart_waits_until_the_port_is_released() -> None:
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    threading.Timer(0.3, holder.close).start()
    started = time.monotonic()
    _wait_until_port_free("127.0.0.1", port, timeout_s=10)
    assert time.monotonic() - started >= 0.25
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:  # free now, as the server will bind it
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))


def test_a_port_never_released_gives_up_after_the_timeout() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        started = time.monotonic()
        _wait_until_port_free("127.0.0.1", holder.getsockname()[1], timeout_s=0.3)
        assert 0.25 <= time.monotonic() - started < 5
