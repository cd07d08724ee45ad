"""Millstream across three hosts, made with Linux network namespaces (root only): host A runs Redis
and the JobManager on their own address, hosts B and C a TaskManager each, every process with its
own data directory and only the checkpoint directory shared, as a network filesystem would be. A
checkpointed job whose key function is in a module installed nowhere (shipped by add_python_file)
and needs a requirement installed nowhere either (shipped by set_python_requirements with its wheel,
installed on each TaskManager host for the job) writes to the exactly-once FileSink and to its client while the TaskManager hosts are SIGKILLed
and restarted; every update is committed and received exactly once, and REST and the dashboard
show each TaskManager's address and log."""
from __future__ import annotations

import json
import os
import random
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Iterator

import httpx
import pytest
from markupsafe import escape  # what Jinja escapes with

from tests.integration.test_recovery import committed_counts

PROGRAM = Path(__file__).parent / "programs" / "chaos_count.py"
N, RATE = 6000, 200  # 30 s of input: enough for two host failures midway
KEYS = 20

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("ip") is None or shutil.which("redis-server") is None,
    reason="network namespaces need root, iproute2 and redis-server",
)


def _sh(*cmd: str) -> None:
    subprocess.run(cmd, check=True, capture_output=True)


class Hosts:
    """Namespaces ``<tag>a``..``<tag>c`` on a bridge, addresses 10.<x>.<y>.1-3; the test runs on
    the bridge's own address (.254), as an operator's machine on the same network would."""

    def __init__(self) -> None:
        r = random.Random(os.getpid() ^ time.time_ns())
        self.tag = f"ms{os.getpid() % 10000}"
        self.subnet = f"10.{r.randint(100, 250)}.{r.randint(0, 250)}"
        self.bridge = f"{self.tag}br"
        self.names = {h: f"{self.tag}{h}" for h in "abc"}

    def address(self, host: str) -> str:
        return f"{self.subnet}.{'abc'.index(host) + 1}"

    def up(self) -> None:
        _sh("ip", "link", "add", self.bridge, "type", "bridge")
        _sh("ip", "link", "set", self.bridge, "up")
        _sh("ip", "addr", "add", f"{self.subnet}.254/24", "dev", self.bridge)
        for h, ns in self.names.items():
            _sh("ip", "netns", "add", ns)
            _sh("ip", "link", "add", f"{ns}v", "type", "veth", "peer", "name", "eth0", "netns", ns)
            _sh("ip", "link", "set", f"{ns}v", "master", self.bridge, "up")
            _sh("ip", "netns", "exec", ns, "ip", "addr", "add", f"{self.address(h)}/24", "dev", "eth0")
            _sh("ip", "netns", "exec", ns, "ip", "link", "set", "eth0", "up")
            _sh("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
        # On a machine that runs Docker, bridged traffic passes through iptables (br_netfilter) and
        # Docker sets the FORWARD policy to DROP, which would cut the hosts off from each other:
        # traffic within this bridge is let through explicitly (no iptables, nothing to do).
        self.forward_rule = shutil.which("iptables") is not None and subprocess.run(
            ["iptables", "-I", "FORWARD", "-i", self.bridge, "-o", self.bridge, "-j", "ACCEPT"], capture_output=True
        ).returncode == 0

    def down(self) -> None:
        if getattr(self, "forward_rule", False):
            subprocess.run(["iptables", "-D", "FORWARD", "-i", self.bridge, "-o", self.bridge, "-j", "ACCEPT"], capture_output=True)
        for ns in self.names.values():
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)

    def spawn(self, host: str, cmd: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
        out = open(log, "ab")
        return subprocess.Popen(
            ["ip", "netns", "exec", self.names[host], *cmd], env=env, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,  # a host failure kills the whole process group
        )


@pytest.fixture
def hosts() -> Iterator[Hosts]:
    h = Hosts()
    try:
        h.up()
    except subprocess.CalledProcessError as e:
        h.down()
        pytest.skip(f"cannot make network namespaces here: {e.stderr.decode(errors='replace').strip()}")
    try:
        yield h
    finally:
        h.down()


def _kill_host(p: subprocess.Popen) -> None:
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    p.wait(10)


def test_exactly_once_across_three_hosts_with_taskmanager_hosts_killed(hosts: Hosts, tmp_path: Path) -> None:
    a = hosts.address("a")
    password, token, secret = secrets.token_hex(16), secrets.token_hex(16), secrets.token_hex(32)
    shared = tmp_path / "shared"  # the network filesystem: checkpoints and the sink's output
    (shared / "checkpoints").mkdir(parents=True)
    deps = tmp_path / "client-only"  # on the client's machine only
    deps.mkdir()
    # The requirement is imported where the key function runs, on the TaskManager hosts, never by the client.
    (deps / "chaos_keys.py").write_text(
        f"def key_of(i):\n    import msreqdemo\n    return ('k%d' % (i % {KEYS}), msreqdemo.ANSWER // 42)\n"
    )
    from tests.engine.runtime.test_python_dependencies import _wheel

    wheels = _wheel(deps)
    (deps / "requirements.txt").write_text("msreqdemo==0.1\n")
    redis_port, rest_port = 6390, 8090
    base = {k: v for k, v in os.environ.items() if not k.startswith("MILLSTREAM_") and k not in ("REDIS_URL", "DATABASE_URL")}
    base.update(PYTHONUNBUFFERED="1", MILLSTREAM_CLUSTER_SECRET=secret, MILLSTREAM_CHECKPOINT_DIR=str(shared / "checkpoints"))
    redis_url = f"redis://:{password}@{a}:{redis_port}/0"
    procs: list[subprocess.Popen] = []
    run = None
    try:
        procs.append(hosts.spawn("a", [
            "redis-server", "--bind", a, "--port", str(redis_port), "--requirepass", password,
            "--save", "", "--appendonly", "no", "--dir", str(tmp_path),
        ], base, tmp_path / "redis.log"))
        (tmp_path / "a").mkdir()
        jm_env = dict(
            base, REDIS_URL=redis_url, MILLSTREAM_HOST=a, MILLSTREAM_PORT=str(rest_port), MILLSTREAM_AUTH_TOKEN=token,
            MILLSTREAM_DATA_DIR=str(tmp_path / "a"), MILLSTREAM_HEARTBEAT_TIMEOUT_MS="3000",
            MILLSTREAM_HEARTBEAT_INTERVAL_MS="500", MILLSTREAM_STATE_DIRS=str(shared),
        )
        procs.append(hosts.spawn("a", [sys.executable, "-m", "millstream.backend.cli", "jobmanager"], jm_env, tmp_path / "jobmanager.log"))

        def tm_env(host: str) -> dict[str, str]:
            (tmp_path / host).mkdir(exist_ok=True)
            return dict(
                base, REDIS_URL=redis_url, MILLSTREAM_DATA_DIR=str(tmp_path / host),
                MILLSTREAM_HEARTBEAT_TIMEOUT_MS="3000", MILLSTREAM_HEARTBEAT_INTERVAL_MS="500",
            )

        def start_tm(host: str) -> subprocess.Popen:
            cmd = [sys.executable, "-m", "millstream.backend.cli", "taskmanager", "--slots", "2", "--host", hosts.address(host)]
            return hosts.spawn(host, cmd, tm_env(host), tmp_path / f"taskmanager-{host}.log")

        tms = {h: start_tm(h) for h in "bc"}
        url = f"http://{a}:{rest_port}"
        http = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30)

        def wait_for(pred, timeout: float, what: str) -> None:
            deadline = time.time() + timeout
            while time.time() < deadline:
                try:
                    if pred():
                        return
                except (httpx.HTTPError, KeyError, ValueError):
                    pass
                time.sleep(0.3)
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")

        def taskmanagers() -> list[dict]:
            return http.get("/taskmanagers").json()["taskmanagers"]

        wait_for(lambda: len(taskmanagers()) == 2, 90, "both TaskManager hosts to register")
        paths = sorted(t["path"] for t in taskmanagers())
        assert any(hosts.address("b") in p for p in paths) and any(hosts.address("c") in p for p in paths), paths

        out, collected = shared / "out", tmp_path / "collected.json"
        client_env = dict(base, MILLSTREAM_JOBMANAGER=url, MILLSTREAM_AUTH_TOKEN=token)
        run = subprocess.Popen(
            [sys.executable, "-m", "millstream.backend.cli", "run", "-p", "2", str(PROGRAM), str(N), str(RATE), str(out),
             str(collected), str(deps)],
            env=client_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )

        def jobs() -> list[dict]:
            return http.get("/jobs/overview").json()["jobs"]

        def completed(jid: str) -> int:
            return http.get(f"/jobs/{jid}/checkpoints").json()["counts"]["completed"]

        wait_for(lambda: len(jobs()) == 2 and all(j["state"] == "RUNNING" for j in jobs()), 90, "the two jobs to run")
        for host in ("b", "c"):  # each TaskManager host fails once, at a moment between checkpoints
            ids = [j["jid"] for j in jobs()]
            before = {j: completed(j) for j in ids}
            wait_for(lambda: all(completed(j) > before[j] for j in ids), 60, "a checkpoint of each job")
            # Checkpoints go where MILLSTREAM_CHECKPOINT_DIR says, on the shared filesystem (they are
            # discarded once the jobs finish, as in Flink).
            assert list((shared / "checkpoints").rglob("_metadata"))
            time.sleep(random.uniform(0.1, 0.6))
            _kill_host(tms[host])
            tms[host] = start_tm(host)  # the host's supervisor brings it back
            wait_for(lambda: all(completed(j) > before[j] + 1 for j in ids), 90, f"checkpoints after host {host} died")

        stdout, stderr = run.communicate(timeout=300)
        assert run.returncode == 0, stderr[-3000:]
        want = list(range(1, N // KEYS + 1))
        received = [tuple(u) for u in json.loads(collected.read_text())]
        dupes = [u for u, n in Counter(received).items() if n > 1]
        assert not dupes, f"client: {len(received) - len(set(received))} duplicates"
        per_key: dict[str, list[int]] = {}
        for key, n in received:
            per_key.setdefault(key, []).append(n)
        assert {k: v for k, v in per_key.items() if v != want} == {}, "client: missing or reordered updates"
        files = committed_counts(out)
        assert sorted(files) == sorted(f"k{k}" for k in range(KEYS))
        assert {k: len(v) for k, v in files.items() if sorted(v) != want} == {}, "sink: updates missing or twice"
        restores = [http.get(f"/jobs/{j['jid']}/checkpoints").json()["counts"]["restored"] for j in jobs()]
        assert all(r >= 1 for r in restores), restores
        # Each TaskManager's address and log, from the JobManager on host A: through REST, and on the
        # dashboard's pages, which render them from their own code path (the log of a TaskManager on
        # another host is the one its processes ship through Redis; no file of it is on host A).
        tm_list = taskmanagers()
        page = http.get("/ui/taskmanagers")
        assert page.status_code == 200, page.status_code
        advertised = set()
        for t in tm_list:
            (addr,) = [hosts.address(h) for h in "bc" if hosts.address(h) in t["path"]]
            advertised.add(addr)
            log = http.get(f"/taskmanagers/{t['id']}/log")
            assert log.status_code == 200 and "starting with 2 slots" in log.text, (t["id"], log.status_code)
            # The TaskManagers list: this TaskManager's row names its host's address, not 127.0.0.1.
            row = rf">{re.escape(str(escape(t['id'])))}</a></td>\s*<td>{re.escape(addr)}</td>"
            assert re.search(row, page.text), (t["id"], addr, page.text[-3000:])
            # Its page tails the same log (the last 200 lines, so the start-up line may have scrolled
            # off): the newest line REST served is there. The job has ended, so nothing pushes it out.
            last = log.text.rstrip("\n").splitlines()[-1]
            detail = http.get(f"/ui/taskmanagers/{t['id']}")
            assert detail.status_code == 200 and str(escape(last)) in detail.text, (t["id"], last, detail.text[-3000:])
        assert advertised == {hosts.address("b"), hosts.address("c")}, advertised
        assert "<td>127.0.0.1</td>" not in page.text
    finally:
        if run is not None and run.poll() is None:
            run.kill()
        for p in [*procs, *locals().get("tms", {}).values()]:
            _kill_host(p)
