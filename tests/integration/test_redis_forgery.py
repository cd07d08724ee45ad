"""Issue 14 on a real cluster, second part: what still crossed Redis or disk unsealed, and replays.

The attacker has the Redis URL and can write the savepoint directory, but not the cluster secret.
They write a TaskManager of their own into the registry, task metrics, print lines and a
``_metadata``; and they copy genuine sealed items (a heartbeat, a deploy, a slot_lost report, a
result entry) and push them again later. Nothing they write may count, and no copy may act twice.
Each test would fail without the seal or the replay check it names.
"""
from __future__ import annotations

import json
import re
import signal
import threading
import time
from pathlib import Path
from typing import Callable

import psutil
import pytest
import redis

from millstream.engine import redis_keys
from millstream.engine.taskexecutor import messages
from tests.integration.cluster import Cluster
from tests.integration.slot_lost import capture_slot_lost_report, slot_processes

PROGRAMS = Path(__file__).parent / "programs"
HEADER = 17  # engine/security/mac.py: version byte and tag before the payload


def _attacker(cluster: Cluster) -> redis.Redis:
    return redis.Redis.from_url(cluster.redis_url)


def _job_id(output: str) -> str:
    return re.findall(r"^Job ([0-9a-f]{32}) ", output, re.M)[0]


def _readable(raw: bytes) -> bytes:
    """What an attacker reads in a value: sealing authenticates, it does not hide the payload."""
    return raw[HEADER:] if raw[:1] == b"\xa1" else raw


def _cancel(cluster: Cluster, jid: str) -> None:
    if cluster.job(jid)["state"] not in ("FINISHED", "FAILED", "CANCELED"):
        cluster.http.patch(f"/jobs/{jid}", params={"mode": "cancel"})
    cluster.wait_state(jid, ("CANCELED", "FAILED", "FINISHED"), 30)


def _exceptions(cluster: Cluster, jid: str) -> list[dict]:
    return cluster.http.get(f"/jobs/{jid}/exceptions").json()["exceptionHistory"]["entries"]


def _attempts(cluster: Cluster, jid: str) -> list[int]:
    job = cluster.job(jid)
    return sorted(
        st["attempt"]
        for v in job["vertices"]
        for st in cluster.http.get(f"/jobs/{jid}/vertices/{v['id']}").json()["subtasks"]
    )


def _logged(path: Path, text: str) -> int:
    """How many lines of a process's log contain ``text`` (its refusals are logged and counted)."""
    return sum(text in line for line in path.read_text(errors="replace").splitlines()) if path.exists() else 0


def _taskmanager_logs(cluster: Cluster) -> list[Path]:
    return [cluster.workdir / f"taskmanager-{i}.log" for i in range(len(cluster.taskmanagers))]


def _repeat(action: Callable[[], None], every_s: float) -> Callable[[], None]:
    """Run ``action`` every ``every_s`` in a thread until the returned function is called."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            action()
            stop.wait(every_s)

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    return lambda: (stop.set(), t.join(5))


def test_a_taskmanager_written_into_redis_gets_no_slots(cluster: Cluster) -> None:
    rds = _attacker(cluster)
    info = {"id": "evil:1", "host": "10.6.6.6", "pid": 1, "slots": 64, "started": int(time.time() * 1000),
            "cpu_cores": 64, "physical_memory": 1 << 40, "log_file": "/etc/shadow"}

    def forge() -> None:
        pipe = rds.pipeline(transaction=False)
        pipe.hset(redis_keys.TASKMANAGERS, "evil:1", messages.pack(info))
        pipe.set(redis_keys.taskmanager_heartbeat("evil:1"), int(time.time() * 1000), px=5000)
        pipe.execute()

    refusal = "refused an unauthenticated element (registration evil:1)"
    log = cluster.workdir / "jobmanager.log"
    seen = _logged(log, refusal)
    stop = _repeat(forge, 0.2)
    try:
        # Three membership passes that read the forged entry and refused it (one log line each).
        cluster.wait_for(lambda: _logged(log, refusal) >= seen + 3, 30, "the JobManager to refuse the forged TaskManager")
        overview = cluster.overview()
        ids = [tm["id"] for tm in cluster.http.get("/taskmanagers").json()["taskmanagers"]]
    finally:
        stop()
        rds.delete(redis_keys.taskmanager_heartbeat("evil:1"))
    assert (overview["taskmanagers"], overview["slots-total"]) == (2, 4), overview
    assert "evil:1" not in ids


def test_forged_task_metrics_never_show(cluster: Cluster) -> None:
    res = cluster.run(PROGRAMS / "unbounded.py", options=("-p", "2", "--detached"))
    assert res.returncode == 0, res.stderr
    jid = _job_id(res.stdout)
    cluster.wait_running(jid)
    rds = _attacker(cluster)
    key = redis_keys.task_metrics(jid)
    cluster.wait_for(lambda: rds.hlen(key) >= 4, 30, "the tasks' first metrics")
    fields = list(rds.hgetall(key))

    def forge() -> None:
        for field in fields:  # the genuine sample, read and rewritten with huge counters
            sample = messages.unpack(_readable(rds.hget(key, field)))
            sample.update({name: 987654321 for name in ("read-records", "write-records", "read-bytes", "write-bytes")})
            rds.hset(key, field, messages.pack(sample))

    def forged() -> bool:
        values = [rds.hget(key, f) for f in fields]
        return all(v is not None and messages.unpack(_readable(v)).get("read-records") == 987654321 for v in values)

    seen: list[str] = []
    proven = 0  # reads made while every field held a forged sample, from before the read to after it
    deadline = time.monotonic() + 60
    while proven < 5:
        assert time.monotonic() < deadline, f"only {proven} reads met the forged samples: the tasks overwrote them first"
        forge()
        pages = [cluster.http.get(f"/jobs/{jid}/vertices/{v['id']}").text for v in cluster.job(jid)["vertices"]]
        seen += pages
        proven += forged()
    assert seen and not any("987654321" in page for page in seen), "a forged metric sample was shown"
    assert cluster.job(jid)["state"] == "RUNNING"
    _cancel(cluster, jid)


def test_an_older_metrics_sample_put_back_never_shows(cluster: Cluster) -> None:
    """Genuine sealed samples copied early and written back later: the counters shown never go back."""
    res = cluster.run(PROGRAMS / "unbounded.py", options=("-p", "2", "--detached"))
    assert res.returncode == 0, res.stderr
    jid = _job_id(res.stdout)
    cluster.wait_running(jid)
    rds = _attacker(cluster)
    key = redis_keys.task_metrics(jid)
    cluster.wait_for(lambda: rds.hlen(key) >= 4, 30, "the tasks' first metrics")
    old = rds.hgetall(key)

    def counters() -> dict[tuple[str, int], int]:
        out = {}
        for v in cluster.job(jid)["vertices"]:
            for st in cluster.http.get(f"/jobs/{jid}/vertices/{v['id']}").json()["subtasks"]:
                m = st["metrics"]
                out[(v["id"], st["subtask"])] = int(m.get("read-records", 0)) + int(m.get("write-records", 0))
        return out

    def copied(field: bytes) -> int:
        m = messages.unpack(_readable(old[field]))
        return int(m.get("read-records", 0)) + int(m.get("write-records", 0))

    fields = {(f.decode().rpartition(":")[0], int(f.decode().rpartition(":")[2])): f for f in old}

    def moved_on() -> bool:
        """The counters moved on from the copied samples: each subtask shows more than its copy holds."""
        now = counters()
        return set(now) == set(fields) and all(n > copied(fields[k]) for k, n in now.items())

    cluster.wait_for(moved_on, 30, "the counters to move on")
    before = counters()
    went_back = []
    proven = 0  # reads made while every field held its old copy, from before the read to after it
    deadline = time.monotonic() + 60
    while proven < 10:
        assert time.monotonic() < deadline, f"only {proven} reads met the old samples: the tasks overwrote them first"
        rds.hset(key, mapping=old)
        now = counters()
        went_back += [(k, before[k], n) for k, n in now.items() if n < before.get(k, 0)]
        proven += all(rds.hget(key, f) == v for f, v in old.items())
    assert not went_back, f"an older sample was shown: {went_back[:3]}"
    _cancel(cluster, jid)


def test_forged_print_lines_never_reach_the_client(cluster: Cluster) -> None:
    res = cluster.run(PROGRAMS / "printing.py", "streaming", "200", options=("--detached",))
    assert res.returncode == 0, res.stderr
    jid = _job_id(res.stdout)
    cluster.wait_state(jid, ("FINISHED",), 60)
    rds = _attacker(cluster)
    genuine = cluster.http.get(f"/jobs/{jid}/stdout").json()
    assert "map saw 50" in " ".join(genuine["lines"])
    rds.rpush(redis_keys.job_stdout(jid), "FORGED: transfer complete")
    rds.incr(redis_keys.job_stdout_total(jid))
    after = cluster.http.get(f"/jobs/{jid}/stdout").json()
    assert not any("FORGED" in line for line in after["lines"]), after["lines"][-3:]
    assert after["lines"] == genuine["lines"]
    # The job ended: once its output is kept in SQL that answers and the stream's count no longer moves
    # (before that, Redis answers and counts the forged entry's position without showing it).
    assert after["total"] in (genuine["total"], genuine["total"] + 1)


def test_a_copied_print_line_shows_once(cluster: Cluster) -> None:
    res = cluster.run(PROGRAMS / "printing.py", "streaming", "200", options=("--detached",))
    assert res.returncode == 0, res.stderr
    jid = _job_id(res.stdout)
    cluster.wait_state(jid, ("FINISHED",), 60)
    rds = _attacker(cluster)
    genuine = cluster.http.get(f"/jobs/{jid}/stdout").json()
    stream = redis_keys.job_stdout(jid)
    for _ in range(3):  # a genuine sealed line, pushed again
        rds.rpush(stream, rds.lindex(stream, 0))
        rds.incr(redis_keys.job_stdout_total(jid))
    after = cluster.http.get(f"/jobs/{jid}/stdout").json()  # read again from 0: each line once
    assert after["lines"] == genuine["lines"]
    assert after["total"] in (genuine["total"], genuine["total"] + 3)  # SQL's kept output, or the stream's count
    rest = cluster.http.get(f"/jobs/{jid}/stdout", params={"offset": genuine["total"]}).json()
    assert rest["lines"] == [], rest["lines"]


def _savepoint(cluster: Cluster, tmp_path: Path) -> Path:
    known = cluster.job_ids()
    run = cluster.start_run(PROGRAMS / "rescaled_count.py", "100000000", "500", options=("-p", "2"))
    try:
        jid = cluster.wait_new_job(known)
        cluster.wait_running(jid)
        taken = cluster.cli("savepoint", jid, str(tmp_path / "sp"))
        assert taken.returncode == 0, taken.stderr
        return Path(re.findall(r"^Savepoint completed\. Path: (.+)$", taken.stdout, re.M)[-1])
    finally:
        cluster.http.patch(f"/jobs/{jid}")
        run.communicate(timeout=60)


def test_an_altered_or_unsealed_metadata_is_refused(cluster: Cluster, tmp_path: Path) -> None:
    path = _savepoint(cluster, tmp_path)
    sealed = (path / "_metadata").read_bytes()
    assert sealed[:1] == b"\xa1"
    meta = json.loads(sealed[HEADER:])
    cases = {
        # What an older Millstream wrote, or anyone who can write the directory: plain JSON.
        "is not sealed": json.dumps(meta).encode(),
        # The envelope kept, one value changed (the checkpoint id) under it.
        "is not sealed with this cluster's secret": sealed[:HEADER] + json.dumps({**meta, "checkpoint_id": 999}).encode(),
    }
    for why, content in cases.items():
        (path / "_metadata").write_bytes(content)
        known = cluster.job_ids()
        res = cluster.run(PROGRAMS / "rescaled_count.py", "1000", "0", options=("-p", "2", "--from-savepoint", str(path)),
                          timeout=120)
        said = " ".join((res.stdout + res.stderr).split())  # rich wraps lines
        assert res.returncode != 0, said[-2000:]
        assert f"_metadata {why}" in said, said[-2000:]
        assert all(cluster.job(j)["state"] != "RUNNING" for j in cluster.job_ids() - known)


def test_a_replayed_deploy_deploys_nothing(cluster: Cluster, tmp_path: Path) -> None:
    slots = slot_processes(cluster)
    assert len(slots) == 4
    rds = _attacker(cluster)
    tms = [tm["id"] for tm in cluster.http.get("/taskmanagers").json()["taskmanagers"]]
    inboxes = [redis_keys.slot_inbox(tm, s) for tm in tms for s in range(2)]
    jid = None
    for p in slots:  # the slots stop reading their inboxes for a moment: the deploys wait there
        p.send_signal(signal.SIGSTOP)
    try:
        res = cluster.run(PROGRAMS / "unbounded.py", options=("-p", "2", "--detached"))
        assert res.returncode == 0, res.stderr
        jid = _job_id(res.stdout)
        # One deploy message per slot the job got: two, or four when its tasks were spread over every
        # slot. Slots are taken before their deploys are sent: every slot taken has its deploy waiting.
        def every_deploy_waits() -> bool:
            taken = len(slots) - cluster.overview()["slots-available"]
            return taken >= 2 and sum(rds.llen(k) for k in inboxes) >= taken

        cluster.wait_for(every_deploy_waits, 60, "a deploy in the inbox of every slot the job took")
        captured = {k: rds.lrange(k, 0, -1) for k in inboxes}
    except BaseException:
        for p in slots:
            p.send_signal(signal.SIGCONT)
        if jid is not None:  # the module's other tests need its slots
            _cancel(cluster, jid)
        raise
    for p in slots:
        p.send_signal(signal.SIGCONT)
    cluster.wait_running(jid)
    cluster.wait_processing(jid)
    before = _attempts(cluster, jid)
    replayed = "refused a replayed control message"
    refused = sum(_logged(p, replayed) for p in _taskmanager_logs(cluster))
    pushed = 0
    for inbox, items in captured.items():  # the same sealed deploys, pushed again
        for item in items:
            rds.rpush(inbox, item)
            pushed += 1
    # Every copy was read by its slot and refused (one log line each): they had their chance to act.
    cluster.wait_for(
        lambda: sum(_logged(p, replayed) for p in _taskmanager_logs(cluster)) >= refused + pushed, 30,
        "the slots to refuse the replayed deploys",
    )
    assert cluster.job(jid)["state"] == "RUNNING"
    assert not _exceptions(cluster, jid), _exceptions(cluster, jid)[-1]["stacktrace"][-2000:]
    assert _attempts(cluster, jid) == before
    _cancel(cluster, jid)


def test_a_replayed_slot_lost_report_fails_nothing(cluster: Cluster) -> None:
    res = cluster.run(PROGRAMS / "unbounded_restarting.py", options=("-p", "4", "--detached"))
    assert res.returncode == 0, res.stderr
    jid = _job_id(res.stdout)
    try:  # the job holds every slot: it is cancelled whatever happens, or the module's later tests starve
        cluster.wait_running(jid)
        rds = _attacker(cluster)
        report = capture_slot_lost_report(cluster)  # the JobManager acts on the genuine one: the job fails over
        cluster.wait_for(lambda: _exceptions(cluster, jid), 30, "the genuine slot loss")
        cluster.wait_running(jid, 60)
        cluster.wait_processing(jid)
        before, failures = _attempts(cluster, jid), len(_exceptions(cluster, jid))
        assert max(before) >= 1
        log = cluster.workdir / "jobmanager.log"
        replayed = f"refused a replayed control message in {redis_keys.JOBMANAGER_INBOX}"
        refused = _logged(log, replayed)
        rds.rpush(redis_keys.JOBMANAGER_INBOX, report)  # the same report, pushed again
        # The JobManager read it and refused it: it had its chance to act on it.
        cluster.wait_for(lambda: _logged(log, replayed) > refused, 30, "the JobManager to refuse the replayed report")
        assert cluster.job(jid)["state"] == "RUNNING"
        assert _attempts(cluster, jid) == before
        assert len(_exceptions(cluster, jid)) == failures
    finally:
        _cancel(cluster, jid)


def test_a_replayed_result_entry_is_left_out_and_the_client_goes_on(cluster: Cluster, tmp_path: Path) -> None:
    """A genuine entry pushed again while the client reads: it reaches the client once, and one copy
    no longer fails the whole collect (it is logged by the JobManager instead)."""
    out = tmp_path / "out.json"
    known = cluster.job_ids()
    run = cluster.start_run(PROGRAMS / "collected_count.py", "2000", "300", str(out), options=("-p", "2"))
    try:
        jid = cluster.wait_new_job(known)
        cluster.wait_running(jid)
        rds = _attacker(cluster)
        copied: list[bytes] = []
        cluster.wait_for(lambda: copied.extend(rds.lrange(redis_keys.collect(jid), 0, 0)) or copied, 30, "an entry")
        rds.rpush(redis_keys.collect(jid), copied[0])  # a genuine sealed entry, pushed again
        _, stderr = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 0, " ".join(stderr.split())[-2000:]
    received = [tuple(u) for u in json.loads(out.read_text())]
    assert sorted(received) == sorted((f"k{k}", n) for k in range(40) for n in range(1, 51))  # each once
    assert _logged(cluster.workdir / "jobmanager.log", "left out a replayed entry of job " + jid) == 1


def _entry_kind(raw: bytes) -> int:
    """An entry's kind, read in clear: writer id and index (16 bytes), envelope header, msgpack array."""
    return raw[16 + HEADER + 1]


def _run_behind(cluster: Cluster, tmp_path: Path, tamper: Callable[[redis.Redis, str], None]) -> str:
    """A short collected count whose client stops reading after 100 updates; ``tamper`` works on
    its results list meanwhile; then the client reads on. Returns its stderr."""
    paused, resume = tmp_path / "paused", tmp_path / "resume"
    known = cluster.job_ids()
    run = cluster.start_run(
        PROGRAMS / "slow_collected_count.py", "4000", "2000", str(tmp_path / "out.json"), "100", str(paused),
        str(resume), options=("-p", "2"),
    )
    try:
        jid = cluster.wait_new_job(known)
        cluster.wait_for(paused.exists, 60, "the client to stop reading")
        rds = _attacker(cluster)
        cluster.wait_state(jid, ("FINISHED",), 60)  # every result written, most of them unread
        assert rds.llen(redis_keys.collect(jid)) > 40
        tamper(rds, jid)
        resume.touch()
        _, stderr = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode != 0, "the client lost results silently"
    return " ".join(stderr.split())


def test_deleted_result_entries_fail_the_client_clearly(cluster: Cluster, tmp_path: Path) -> None:
    def delete_records(rds: redis.Redis, jid: str) -> None:
        key = redis_keys.collect(jid)
        entries = rds.lrange(key, 0, -1)
        at = next(i for i in range(len(entries) // 2, len(entries)) if _entry_kind(entries[i]) == 1)  # RECORDS
        rds.lset(key, at, b"gone")
        rds.lrem(key, 1, b"gone")

    said = _run_behind(cluster, tmp_path, delete_records)
    assert "went missing" in said, said[-2000:]


def test_an_edited_acknowledged_count_fails_the_client_clearly(cluster: Cluster, tmp_path: Path) -> None:
    """``acked`` is where the list starts for the client's offsets: lowered, the next read trims
    entries the client never got (it is unsealed, so only the record positions can tell)."""
    said = _run_behind(cluster, tmp_path, lambda rds, jid: rds.hincrby(redis_keys.collect_meta(jid), "acked", -20))
    assert "went missing" in said, said[-2000:]


_DELETE_CREDITS = """
local n = 0
for _, k in ipairs(redis.call('KEYS', ARGV[1])) do n = n + redis.call('DEL', k) end
return n
"""


def test_credit_tokens_deleted_while_a_job_runs_stall_nothing(cluster: Cluster, tmp_path: Path) -> None:
    """Someone with write access to Redis deletes every credit token, over and over, while a job's
    records cross two network hops: the job still finishes, with exact totals (it stalled for good
    once its producers had lost all their credit)."""
    n, keys = 48_000, 8
    out = tmp_path / "totals.json"
    known = cluster.job_ids()
    run = cluster.start_run(PROGRAMS / "credit_starved.py", str(n), "8000", str(out))
    deleted = 0
    try:
        jid = cluster.wait_new_job(known)
        cluster.wait_running(jid)
        rds = _attacker(cluster)
        delete = rds.register_script(_DELETE_CREDITS)
        pattern = redis_keys.CREDIT.format(job=jid, attempt="*", edge="*", src="*", dst="*")
        until = time.monotonic() + 4
        while time.monotonic() < until and run.poll() is None:
            deleted += delete(args=[pattern])
        stdout, stderr = run.communicate(timeout=90)
    except BaseException:
        run.kill()
        raise
    assert run.returncode == 0, (stdout + stderr)[-3000:]
    assert deleted > 0, "no credit token was there to delete"
    expected = [[k, n // keys, sum(range(k, n, keys))] for k in range(keys)]
    assert json.loads(out.read_text()) == expected
    assert not _exceptions(cluster, jid)


def test_a_spark_cancel_key_set_by_someone_else_cancels_nothing(cluster: Cluster) -> None:
    res = cluster.run(PROGRAMS / "slow_batch.py", "40", options=("--detached",))
    assert res.returncode == 0, res.stderr
    jid = _job_id(res.stdout)
    rds = _attacker(cluster)
    # The key the JobManager sets to make a BATCH job's Spark driver cancel it, set all along.
    stop = _repeat(lambda: rds.set(redis_keys.spark_cancel(jid), "1", ex=60), 0.2)
    try:
        job = cluster.wait_state(jid, ("FINISHED", "FAILED", "CANCELED"), 120)
    finally:
        stop()
    assert job["state"] == "FINISHED", _exceptions(cluster, jid)[-1:]


def test_a_replayed_heartbeat_keeps_no_dead_taskmanager(cluster: Cluster) -> None:
    """Last: it kills a TaskManager (and starts another one after)."""
    rds = _attacker(cluster)
    victim = cluster.taskmanagers[0]
    tm_id = next(
        tm["id"] for tm in cluster.http.get("/taskmanagers").json()["taskmanagers"]
        if tm["id"].split(":")[-1].startswith(f"{victim.pid}-")
    )
    beat = rds.get(redis_keys.taskmanager_heartbeat(tm_id))
    assert beat is not None
    for p in [psutil.Process(victim.pid), *psutil.Process(victim.pid).children(recursive=True)]:
        p.kill()
    victim.wait()
    # The captured genuine heartbeat, set again and again as the TaskManager would.
    stop = _repeat(lambda: rds.set(redis_keys.taskmanager_heartbeat(tm_id), beat, px=3000), 0.2)
    try:
        cluster.wait_for(lambda: cluster.overview()["taskmanagers"] == 1, 15, "the dead TaskManager to be lost")
    finally:
        stop()
    cluster.taskmanagers.remove(victim)
    cluster.start_taskmanager()
    cluster.wait_for(lambda: cluster.overview()["taskmanagers"] == 2, 60, "a new TaskManager")


@pytest.fixture(autouse=True)
def _no_stopped_processes(cluster: Cluster):
    yield
    for p in [*(psutil.Process(tm.pid) for tm in cluster.taskmanagers if tm.poll() is None), *slot_processes(cluster)]:
        try:
            if p.status() == psutil.STATUS_STOPPED:
                p.send_signal(signal.SIGCONT)
        except psutil.Error:
            pass
