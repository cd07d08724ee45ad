"""Issue 14 item 1 on a real cluster: someone who has only the Redis URL pushes code and control.

Each attack writes what it could before authentication existed: a data buffer with a pickle
extension into a live channel, a pickle into a job's collect list, a deploy that reuses the job's
signed code but restores from the attacker's state file, and task_state messages saying every task
FINISHED. The payload would create a marker file; none may appear, the job is not turned FINISHED,
and the cluster keeps its TaskManagers and slots.
"""
from __future__ import annotations

import json
import os
import pickle
import re
import shutil
import time
from collections import Counter
from pathlib import Path

import cloudpickle
import msgpack
import redis

from millstream.engine import redis_keys
from millstream.engine.checkpoint import state_file
from millstream.engine.datastream import StreamExecutionEnvironment
from millstream.engine.datastream.connectors import DataGeneratorSource
from millstream.engine.runtime.deployment import make_tdd
from millstream.engine.taskexecutor import messages
from tests.integration.cluster import Cluster

PROGRAMS = Path(__file__).parent / "programs"


class _Payload:
    """Unpickling it runs a shell command: what an attacker's buffer carries."""

    def __init__(self, mark: Path) -> None:
        self.mark = mark

    def __reduce__(self):
        return (os.system, (f"touch {self.mark}",))


def _job_id(output: str) -> str:
    return re.findall(r"^Job ([0-9a-f]{32}) ", output, re.M)[0]


def _attacker(cluster: Cluster) -> redis.Redis:
    return redis.Redis.from_url(cluster.redis_url)


def _cluster_is_whole(cluster: Cluster) -> None:
    overview = cluster.overview()
    assert (overview["taskmanagers"], overview["slots-total"]) == (2, 4), overview
    assert all(p.poll() is None for p in cluster.taskmanagers)
    assert cluster.jobmanager is not None and cluster.jobmanager.poll() is None


def _exceptions(cluster: Cluster, jid: str) -> list[dict]:
    return cluster.http.get(f"/jobs/{jid}/exceptions").json()["exceptionHistory"]["entries"]


def _refusals(cluster: Cluster) -> Counter:
    """Control messages refused so far, per inbox, as the JobManager and the TaskManagers (their
    slots log through them) logged them."""
    seen: Counter = Counter()
    for log in [cluster.workdir / "jobmanager.log", *cluster.workdir.glob("taskmanager-*.log")]:
        seen.update(re.findall(r"refused an unauthenticated element \(control ([^)]+)\)", log.read_text(errors="replace")))
    return seen


def _cancel(cluster: Cluster, jid: str) -> None:
    if cluster.job(jid)["state"] not in ("FINISHED", "FAILED", "CANCELED"):
        cluster.http.patch(f"/jobs/{jid}", params={"mode": "cancel"})
    cluster.wait_state(jid, ("CANCELED", "FAILED", "FINISHED"), 30)


def test_a_pickle_buffer_pushed_into_a_live_channel_runs_nothing_and_fails_only_that_attempt(
    cluster: Cluster, tmp_path: Path
) -> None:
    mark = tmp_path / "pwned-by-channel"
    res = cluster.run(PROGRAMS / "unbounded.py", options=("-p", "2", "--detached"))
    assert res.returncode == 0, res.stderr
    jid = _job_id(res.stdout)
    cluster.wait_running(jid)
    rds = _attacker(cluster)
    keys: list[bytes] = []
    cluster.wait_for(
        lambda: keys.extend(rds.scan_iter(match=redis_keys.job_channels_pattern(jid), count=1000)) or keys, 30,
        "the job's channel keys",
    )
    buffer = msgpack.packb((0, [msgpack.ExtType(2, pickle.dumps(_Payload(mark)))], None), use_bin_type=True)
    data_keys = {k.decode().replace(":cr:", ":ch:") for k in keys}
    for key in data_keys:
        rds.rpush(key, buffer)
    job = cluster.wait_state(jid, ("FAILED", "RESTARTING", "CANCELED", "FINISHED"), 60)
    assert job["state"] != "FINISHED"
    # Progress, not a pause: a reader took a pushed buffer and refused it (the attempt's failure says
    # so), and once the job is cancelled no task is left that could still read one.
    cluster.wait_for(lambda: any("unauthenticated buffer on channel ms:ch:" + jid in e["stacktrace"] for e in _exceptions(cluster, jid)),
                     60, "the failure naming the pushed buffer")
    _cancel(cluster, jid)
    assert not mark.exists(), "a buffer pushed into Redis ran code in a slot process"
    _cluster_is_whole(cluster)


def test_a_pickle_pushed_into_the_collect_list_never_reaches_the_client(cluster: Cluster, tmp_path: Path) -> None:
    mark, out = tmp_path / "pwned-by-collect", tmp_path / "out.json"
    known = cluster.job_ids()
    run = cluster.start_run(PROGRAMS / "collected_count.py", "100000000", "200", str(out), options=("-p", "2"))
    try:
        jid = cluster.wait_new_job(known)
        cluster.wait_running(jid)
        rds = _attacker(cluster)
        cluster.wait_for(lambda: rds.llen(redis_keys.collect(jid)) > 0 or rds.exists(redis_keys.collect_meta(jid)),
                         30, "the first results")
        # A well-formed RECORDS entry [kind, attempt, seq, buffer, gated] whose buffer holds a pickle extension.
        body = msgpack.packb((0, [msgpack.ExtType(2, pickle.dumps(_Payload(mark)))], None), use_bin_type=True)
        rds.rpush(redis_keys.collect(jid), msgpack.packb([1, 0, 0, body, False], use_bin_type=True))
        _, stderr = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert not mark.exists(), "a collect entry pushed into Redis ran code in millstream run"
    assert run.returncode != 0
    assert "this cluster did not write" in " ".join(stderr.split()), stderr[-2000:]  # rich wraps lines
    _cancel(cluster, jid)
    _cluster_is_whole(cluster)


def test_forged_deploy_and_task_state_messages_are_dropped(cluster: Cluster, tmp_path: Path) -> None:
    mark = tmp_path / "pwned-by-deploy"
    env = StreamExecutionEnvironment().set_parallelism(2)
    env.from_source(DataGeneratorSource(lambda i: i, None, records_per_second=500), None, "gen").uid("gen") \
        .key_by(lambda x: x % 5).map(lambda x: x).filter(lambda x: x < 0).print()
    job_graph, stream_graph = env.get_job_graph("attacked")
    r = cluster.http.post(
        "/jobs",
        data={"jobgraph": json.dumps(job_graph.to_dict())},
        files={"usercode": ("code", cloudpickle.dumps(stream_graph))},
    )
    assert r.status_code == 202, r.text
    jid = r.json()["jobid"]
    job = cluster.wait_running(jid)

    # A "checkpoint" of the attacker's: a completed-looking directory whose state file is a payload.
    chk = tmp_path / "evil" / "chk-1"
    chk.mkdir(parents=True)
    (chk / "gen-x-0.state").write_bytes(pickle.dumps(_Payload(mark)))
    (chk / "_metadata").write_text(json.dumps({"checkpoint_id": 1, "operators": []}))
    source = job_graph.vertices[0]
    subtasks = cluster.http.get(f"/jobs/{jid}/vertices/{source.id}").json()["subtasks"]
    attempt = subtasks[0]["attempt"]
    operator_id = source.operators[0].operator_id
    restore = {
        "checkpoint_id": 1, "is_savepoint": True, "external_path": str(chk),
        "operators": {
            operator_id: {
                "operator_id": operator_id, "subtask": 0, "parallelism": 2, "old_parallelism": 2,
                "max_parallelism": 128, "handles": [[0, str(chk / "gen-x-0.state")]], "source_offsets": [],
                "peer_handles": [],
            }
        },
    }
    tdd = make_tdd(job_graph, source.id, 0, attempt)
    forged_deploy = messages.pack(messages.deploy({**tdd.to_dict(), "restore": restore}))
    rds = _attacker(cluster)
    tms = [tm["id"] for tm in cluster.http.get("/taskmanagers").json()["taskmanagers"]]
    refusals_before = _refusals(cluster)
    for tm in tms:
        for slot in range(2):
            rds.rpush(redis_keys.slot_inbox(tm, slot), forged_deploy)
    # And every task of the job reported FINISHED, as each TaskManager would say it.
    forged_states = 0
    for v in job["vertices"]:
        for st in cluster.http.get(f"/jobs/{jid}/vertices/{v['id']}").json()["subtasks"]:
            forged = messages.task_state(
                jid, v["id"], st["subtask"], st["attempt"], "FINISHED", tms[0], 0, int(time.time() * 1000)
            )
            rds.rpush(redis_keys.JOBMANAGER_INBOX, messages.pack(forged))
            forged_states += 1
    # Progress, not a pause: every slot and the JobManager took what was pushed into its inbox and
    # logged refusing it (refused before anything in it was decoded).
    inboxes = [redis_keys.slot_inbox(tm, slot) for tm in tms for slot in range(2)]

    def all_refused() -> bool:
        now = _refusals(cluster)
        return (
            all(now[i] - refusals_before[i] >= 1 for i in inboxes)
            and now[redis_keys.JOBMANAGER_INBOX] - refusals_before[redis_keys.JOBMANAGER_INBOX] >= forged_states
        )

    cluster.wait_for(all_refused, 60, "every forged message to be refused")
    assert not mark.exists(), "a forged deploy made a TaskManager unpickle the attacker's file"
    job = cluster.job(jid)
    assert job["state"] == "RUNNING", job["state"]
    assert job["status-counts"].get("RUNNING") == 4, job["status-counts"]
    _cancel(cluster, jid)
    assert cluster.job(jid)["state"] == "CANCELED"
    _cluster_is_whole(cluster)


def _sealed(data: bytes) -> bool:
    """A sealed state file: sealed whole (the single-blob format), or key-grouped with its head sealed
    (engine/checkpoint/state_file.py; each part is sealed on its own too)."""
    if state_file.is_key_grouped(data):
        return data[state_file.PREFIX_BYTES : state_file.PREFIX_BYTES + 1] == b"\xa1"
    return data[:1] == b"\xa1"


def test_a_state_file_replaced_in_a_savepoint_is_refused_before_it_is_unpickled(cluster: Cluster, tmp_path: Path) -> None:
    mark = tmp_path / "pwned-by-state"
    rescaled = PROGRAMS / "rescaled_count.py"
    known = cluster.job_ids()
    run = cluster.start_run(rescaled, "100000000", "500", options=("-p", "2"))
    try:
        jid = cluster.wait_new_job(known)
        cluster.wait_running(jid)
        taken = cluster.cli("savepoint", jid, str(tmp_path / "sp"))
        assert taken.returncode == 0, taken.stderr
        path = Path(re.findall(r"^Savepoint completed\. Path: (.+)$", taken.stdout, re.M)[-1])
    finally:
        cluster.http.patch(f"/jobs/{jid}")
        run.communicate(timeout=60)
    states = list(path.glob("*.state"))
    assert states and all(_sealed(f.read_bytes()) for f in states)  # sealed, not bare pickles
    for f in states:  # someone who can write the savepoint directory swaps every state file
        f.write_bytes(pickle.dumps(_Payload(mark)))
    known = cluster.job_ids()
    resumed = cluster.start_run(rescaled, "1000", "0", options=("-p", "2", "--from-savepoint", str(path)))
    try:
        jid = cluster.wait_new_job(known)
        cluster.wait_for(lambda: _exceptions(cluster, jid), 60, "a failure")
        entries = _exceptions(cluster, jid)
        assert any("not sealed with this cluster's secret" in e["stacktrace"] for e in entries), entries[-1]["stacktrace"]
        assert cluster.job(jid)["state"] != "FINISHED"
        # Cancelled, no task is left that could still open one of the swapped files: none did.
        _cancel(cluster, jid)
        assert not mark.exists(), "a swapped state file was unpickled"
    finally:
        resumed.kill()
        resumed.communicate(timeout=60)
    _cluster_is_whole(cluster)


def test_a_genuine_state_file_copied_from_another_savepoint_of_the_job_is_refused(cluster: Cluster, tmp_path: Path) -> None:
    """Sealed files are bound to the job and checkpoint that wrote them, not only to their name: a
    genuine file of the job's first savepoint put into its second under the same name is refused by
    the restoring task, saying so; the untouched second savepoint restores into a new job, rescaled."""
    rescaled = PROGRAMS / "rescaled_count.py"
    known = cluster.job_ids()
    run = cluster.start_run(rescaled, "100000000", "500", options=("-p", "2"))
    paths = []
    try:
        jid = cluster.wait_new_job(known)
        cluster.wait_running(jid)
        for n in range(2):
            taken = cluster.cli("savepoint", jid, str(tmp_path / f"sp{n}"))
            assert taken.returncode == 0, taken.stderr
            paths.append(Path(re.findall(r"^Savepoint completed\. Path: (.+)$", taken.stdout, re.M)[-1]))
    finally:
        cluster.http.patch(f"/jobs/{jid}")
        run.communicate(timeout=60)
    first, second = paths
    tampered = tmp_path / "tampered"
    shutil.copytree(second, tampered / second.name)
    states = sorted(p.name for p in second.glob("*.state"))
    assert states and states == sorted(p.name for p in first.glob("*.state"))  # the same names in both
    for name in states:
        (tampered / second.name / name).write_bytes((first / name).read_bytes())
    known = cluster.job_ids()
    resumed = cluster.start_run(rescaled, "1000", "0", options=("-p", "3", "--from-savepoint", str(tampered / second.name)))
    try:
        bad = cluster.wait_new_job(known)
        cluster.wait_for(lambda: _exceptions(cluster, bad), 60, "a failure")
        trace = _exceptions(cluster, bad)[-1]["stacktrace"]
        assert "copied from another checkpoint or job" in trace, trace[-2000:]
        assert "not sealed with this cluster's secret" in trace
        assert cluster.job(bad)["state"] != "FINISHED"
        _cancel(cluster, bad)
    finally:
        resumed.kill()
        resumed.communicate(timeout=60)
    # The untouched savepoint restores into a new job at another parallelism: the counts go on from it.
    known = cluster.job_ids()
    good = cluster.start_run(rescaled, "100000000", "500", options=("-p", "3", "--from-savepoint", str(second)))
    try:
        jid = cluster.wait_new_job(known)
        assert good.stdout is not None
        line = good.stdout.readline()
        while line and not line.startswith("["):
            line = good.stdout.readline()
        assert line, "the restored job printed nothing"
        assert json.loads(line)[1] > 1, line  # a key's count restored, not started again from 1
        assert not _exceptions(cluster, jid)
        _cancel(cluster, jid)
    finally:
        good.kill()
        good.communicate(timeout=60)
    _cluster_is_whole(cluster)
