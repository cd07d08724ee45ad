"""Tasks that finish while no JobManager leads (issue 18), on real processes: two JobManagers with
``--ha`` and a 5 s lease, one TaskManager, and a bounded, sleep-paced exactly-once keyed count writing
to the FileSink. The leader is SIGKILLed once the job has a completed checkpoint and the standby is
held (SIGSTOP) until the input has run out, so every task reports FINISHED to nobody (sealed
for the dead leader's epoch, which the new leader's inbox refuses). The slots keep those final states
and offer them to the new leader when it asks what they run: the job is adopted as finished, with
no restart, and its output is committed exactly once."""
from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.integration.chaos import subtasks as _subtasks
from tests.integration.cluster import Cluster, consecutive_free_ports
from tests.integration.test_jobmanager_ha_adoption import _latest_completed, _role
from tests.integration.test_recovery import committed_counts

PROGRAM = Path(__file__).parent / "programs" / "recovering_count.py"
N = 1200
RATE = 300  # records per second: 4 s of input
LEASE_MS = 5000


def test_tasks_that_finish_while_no_jobmanager_leads_finish_the_job_without_a_restart(tmp_path: Path) -> None:
    c = Cluster(tmp_path, heartbeat_timeout_ms=3000)
    port = consecutive_free_ports(2)
    urls = [f"http://127.0.0.1:{port + i}" for i in range(2)]
    c.env.update(MILLSTREAM_HIGH_AVAILABILITY="true", MILLSTREAM_LEADER_LEASE_MS=str(LEASE_MS),
                 MILLSTREAM_JOBMANAGER=",".join(urls))
    jms: list[subprocess.Popen] = []
    logs = [tmp_path / f"jobmanager-{i}.log" for i in range(2)]

    def start_jobmanager(i: int) -> None:
        env = {**c.env, "MILLSTREAM_PORT": str(port + i)}
        jms.append(subprocess.Popen([sys.executable, "-m", "millstream.backend.cli", "jobmanager"], env=env,
                                    stdout=open(logs[i], "ab"), stderr=subprocess.STDOUT))

    out = tmp_path / "out"
    run = None
    try:
        start_jobmanager(0)
        c.wait_for(lambda: _role(urls[0]) == "leader", 60, "the first JobManager to lead")
        start_jobmanager(1)
        c.http.close()
        c.http = httpx.Client(base_url=urls[0], timeout=10)
        c.start_taskmanager(2)
        c.wait_for(lambda: c.overview()["taskmanagers"] == 1, 60, "the TaskManager")
        c.wait_for(lambda: _role(urls[1]) == "standby", 60, "the second to stand by")
        run = c.start_run(PROGRAM, str(N), str(RATE), str(out), options=("-p", "1"))
        submitted = time.monotonic()
        c.wait_for(lambda: c.job_ids(), 60, "the job")
        (jid,) = c.job_ids()
        c.wait_for(lambda: _latest_completed(c, jid) >= 1, 30, "a completed checkpoint")
        assert c.job(jid)["state"] == "RUNNING"
        jms[0].send_signal(signal.SIGKILL)
        # The standby is held (SIGSTOP) until the input has surely run out, so the tasks end while no
        # JobManager leads however slowly a loaded machine moves (the lease alone would leave a race).
        jms[1].send_signal(signal.SIGSTOP)
        killed = time.monotonic()
        time.sleep(max(0.0, submitted + N / RATE + 6 - time.monotonic()))
        jms[1].send_signal(signal.SIGCONT)
        c.wait_for(lambda: _role(urls[1]) == "leader", 30, "the standby to take over")
        took = time.monotonic() - killed
        c.http.close()
        c.http = httpx.Client(base_url=urls[1], timeout=10)
        c.wait_state(jid, ("FINISHED", "FAILED", "CANCELED"), 60)
        _, stderr = run.communicate(timeout=60)
        log = logs[1].read_text()
        # The input ran out while no JobManager led: the tasks' FINISHED reports found nobody.
        assert f"job {jid}: adopted attempt 0" in log and "finished while no JobManager led" in log, log[-3000:]
        assert "resumes as attempt" not in log and "restarts as attempt" not in log, log[-3000:]
        assert c.job(jid)["state"] == "FINISHED"
        assert {st["attempt"] for st in _subtasks(c, jid)} == {0}
        assert run.returncode == 0, stderr[-3000:]
        files = committed_counts(out)
        want = list(range(1, N // 40 + 1))
        assert sorted(files) == sorted(f"k{k}" for k in range(40))
        wrong = {k: (len(v), len(set(v))) for k, v in files.items() if sorted(v) != want}
        assert not wrong, f"keys whose updates were not committed exactly once: {wrong}"
        print(f"\nleader SIGKILLed, standby held until the input ran out: it led {took:.1f} s after the kill and finished the job "
              f"without a restart", flush=True)
    except BaseException:
        for p in [*logs, *sorted(tmp_path.glob("taskmanager-*.log"))]:
            if p.exists():
                lines = [ln for ln in p.read_text(errors="replace").splitlines() if "HTTP/1.1" not in ln]
                print(f"--- {p.name}", *lines[-40:], sep="\n")
        raise
    finally:
        if run is not None and run.poll() is None:
            run.kill()
        for p in jms:
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.send_signal(signal.SIGTERM)
        for p in jms:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        c.stop()
