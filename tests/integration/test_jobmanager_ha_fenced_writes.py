"""A leader paused past its lease writes nothing to the shared stores once it wakes (issue 18), on real
processes: two JobManagers with ``--ha`` (a 2 s lease) and an access token, sharing one SQLite database.

Two requests are in the leader's hands when it is SIGSTOPped: a program upload and a dashboard login,
each with its body half sent, so the handler runs only when the rest arrives. The standby takes over;
the old leader gets SIGCONT and then the rest of both bodies. Each write it would make (the program's
row and files, the session row, and the audit entries of both requests) is refused by the leader fence:
both requests get 503 and nothing lands. Requests sent to the woken process afterwards (delete a
program, log out) are forwarded to the new leader, which makes the writes and records them."""
from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
from sqlalchemy import create_engine, text

from tests.integration.cluster import Cluster, consecutive_free_ports
from tests.integration.process_pause import pause_outside_sqlite_write
from tests.integration.test_jobmanager_ha_adoption import _role

LEASE_MS = 2000
TOKEN = "fence-test-token"
BOUNDARY = "millstreamfence"


class HalfSent:
    """A request whose headers and first half of body went out on a raw socket; ``finish`` sends the rest."""

    def __init__(self, port: int, method: str, path: str, headers: dict[str, str], body: bytes) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=20)
        self.body = body
        head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        self.sock.sendall(head.encode() + body[: len(body) // 2])

    def finish(self) -> tuple[int, str]:
        self.sock.sendall(self.body[len(self.body) // 2:])
        answer = b""
        while chunk := self.sock.recv(65536):
            answer += chunk
        self.sock.close()
        status = int(answer.split(b" ", 2)[1])
        return status, answer.decode(errors="replace")


def _multipart(name: str, content: bytes) -> bytes:
    return (
        f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"jarfile\"; filename=\"{name}\"\r\n"
        f"Content-Type: text/x-python\r\n\r\n".encode() + content + f"\r\n--{BOUNDARY}--\r\n".encode()
    )


def test_a_paused_leader_woken_with_requests_in_hand_writes_no_audit_session_or_program(tmp_path: Path) -> None:
    c = Cluster(tmp_path, heartbeat_timeout_ms=3000)
    port = consecutive_free_ports(2)
    urls = [f"http://127.0.0.1:{port + i}" for i in range(2)]
    c.env.update(MILLSTREAM_HIGH_AVAILABILITY="true", MILLSTREAM_LEADER_LEASE_MS=str(LEASE_MS),
                 MILLSTREAM_JOBMANAGER=",".join(urls), MILLSTREAM_AUTH_TOKEN=TOKEN)
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    dashboard = {"HX-Request": "true"}
    jms: list[subprocess.Popen] = []
    logs = [tmp_path / f"jobmanager-{i}.log" for i in range(2)]

    def start_jobmanager(i: int) -> None:
        env = {**c.env, "MILLSTREAM_PORT": str(port + i)}
        jms.append(subprocess.Popen([sys.executable, "-m", "millstream.backend.cli", "jobmanager"], env=env,
                                    stdout=open(logs[i], "ab"), stderr=subprocess.STDOUT))

    db = create_engine(f"sqlite:///{tmp_path / 'var' / 'millstream.db'}")

    def rows(sql: str) -> list[tuple]:
        with db.connect() as conn:
            return [tuple(r) for r in conn.execute(text(sql))]

    paused = False
    try:
        start_jobmanager(0)
        c.wait_for(lambda: _role(urls[0]) == "leader", 60, "the first JobManager to lead")
        start_jobmanager(1)
        c.wait_for(lambda: _role(urls[1]) == "standby", 60, "the second to stand by")
        old, new = urls
        # Before the pause, through the leader: a program and a dashboard session.
        r = httpx.post(f"{old}/jars/upload", headers=bearer, files={"jarfile": ("kept.py", b"print(1)\n")}, timeout=10)
        assert r.status_code == 200, r.text
        kept = r.json()["filename"]
        r = httpx.post(f"{old}/ui/login", headers=dashboard, data={"token": TOKEN}, timeout=10)
        assert r.status_code == 200 and "millstream_ui_session" in r.cookies, (r.status_code, r.text)
        cookies = dict(r.cookies)
        sessions_before = rows("SELECT id_hash FROM ui_sessions")
        assert len(sessions_before) == 1
        # The audit entry is written after the answer went out.
        c.wait_for(lambda: len(rows("SELECT id FROM audit_log")) == 2, 10, "both requests in the audit log")
        audit_before = rows("SELECT id FROM audit_log")

        upload = HalfSent(port, "POST", "/jars/upload", {**bearer, "Content-Type": f"multipart/form-data; boundary={BOUNDARY}"},
                          _multipart("late.py", b"print('written by a deposed leader')\n" * 50))
        login = HalfSent(port, "POST", "/ui/login", {**dashboard, "Content-Type": "application/x-www-form-urlencoded"},
                         f"token={TOKEN}".encode())
        time.sleep(0.5)  # both are in the leader's app, waiting for the rest of their bodies
        # Outside a database write: frozen inside one, it would hold SQLite's write lock and no standby
        # could take over until it woke (tests/integration/process_pause.py).
        pause_outside_sqlite_write(jms[0].pid, tmp_path / "var" / "millstream.db")
        paused = True
        stopped = time.monotonic()
        c.wait_for(lambda: _role(new) == "leader", 30, "the standby to take over from the paused leader")
        time.sleep(max(0.0, LEASE_MS / 1000 + 0.5 - (time.monotonic() - stopped)))
        jms[0].send_signal(signal.SIGCONT)
        paused = False
        woke = time.monotonic()

        # The writes the old leader had in hand are refused by the fence: 503, nothing written.
        for request in (upload, login):
            status, answer = request.finish()
            # Refused by the SQL fence (its token is stale) or, if the election thread stepped down
            # first, before asking SQL: either way FencedOut, answered 503.
            assert status == 503 and ("is stale" in answer or "not the leader" in answer), answer[-500:]
        assert "set-cookie" not in answer.lower()
        assert rows("SELECT id FROM jars") == [(kept,)]
        assert sorted(p.name for p in (tmp_path / "var" / "uploads").iterdir()) == [kept]
        assert rows("SELECT id_hash FROM ui_sessions") == sessions_before
        assert rows("SELECT id FROM audit_log") == audit_before, rows("SELECT method, path, status FROM audit_log")
        c.wait_for(lambda: logs[0].read_text().count("not recorded in the audit log") >= 2, 10,
                   "the old leader to log the two audit entries it could not record")

        # Requests the woken process gets now are the new leader's to serve: forwarded, written, recorded.
        c.wait_for(lambda: _role(old) == "standby", 20, "the woken JobManager to answer as a standby")
        r = httpx.delete(f"{old}/jars/{kept}", headers=bearer, timeout=10)
        assert r.status_code == 200 and r.headers["x-millstream-served-by"] == new, (r.status_code, r.text)
        r = httpx.post(f"{old}/ui/logout", headers=dashboard, cookies=cookies, timeout=10)
        assert r.status_code == 200 and r.headers["x-millstream-served-by"] == new, (r.status_code, r.text)
        assert rows("SELECT id FROM jars") == [] and rows("SELECT id_hash FROM ui_sessions") == []

        def recorded() -> list[tuple]:
            return rows(f"SELECT method, path, status FROM audit_log WHERE id > {max(i for (i,) in audit_before)} ORDER BY id")

        c.wait_for(lambda: len(recorded()) >= 2, 10, "the new leader to record both requests")
        assert recorded() == [("DELETE", f"/jars/{kept}", 200), ("POST", "/ui/logout", 200)], recorded()
        print(f"\npaused leader woke with two requests in hand: both refused (503) "
              f"{time.monotonic() - woke:.1f} s after SIGCONT, nothing written", flush=True)
    except BaseException:
        for p in logs:
            if p.exists():
                lines = [ln for ln in p.read_text(errors="replace").splitlines() if "HTTP/1.1" not in ln]
                print(f"--- {p.name}", *lines[-40:], sep="\n")
        raise
    finally:
        if paused:
            jms[0].send_signal(signal.SIGCONT)
        for p in jms:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in jms:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        db.dispose()
        c.stop()
