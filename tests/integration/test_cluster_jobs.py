"""Jobs on a real cluster: a JobManager and two TaskManager processes exchanging data through Redis."""
from __future__ import annotations

import json
import re
import time
from collections import defaultdict
from pathlib import Path

import pytest

from tests.integration.cluster import Cluster

PROGRAMS = Path(__file__).parent / "programs"
EXAMPLES = Path(__file__).parents[2] / "examples"


def job_ids(output: str) -> list[str]:
    return re.findall(r"^Job ([0-9a-f]{32}) ", output, re.M)


@pytest.mark.parametrize("parallelism", [1, 2, 4])
def test_rolling_count_is_exact(cluster: Cluster, parallelism: int) -> None:
    n, keys = 30_000, 100
    res = cluster.run(PROGRAMS / "rolling_count.py", str(n), str(keys), options=("-p", str(parallelism)))
    assert res.returncode == 0, res.stderr
    updates: dict[str, list[int]] = defaultdict(list)
    for line in res.stdout.splitlines():
        if line.startswith("["):
            word, count = json.loads(line)
            updates[word].append(count)
    # Every key saw each intermediate count exactly once: no loss, no duplicates.
    assert len(updates) == keys
    for word, counts in updates.items():
        assert sorted(counts) == list(range(1, n // keys + 1)), word
    (jid,) = job_ids(res.stdout)
    job = cluster.job(jid)
    assert job["state"] == "FINISHED"
    assert max(v["parallelism"] for v in job["vertices"]) == parallelism


def test_batch_mode_reduce_emits_only_final_values(cluster: Cluster) -> None:
    res = cluster.run(PROGRAMS / "batch_reduce.py", options=("-p", "2"))
    assert res.returncode == 0, res.stderr
    result = json.loads(next(ln for ln in res.stdout.splitlines() if ln.startswith("[")))
    assert result == [["a", 500], ["b", 350], ["c", 200]]
    (jid,) = job_ids(res.stdout)
    assert cluster.job(jid)["job-type"] == "BATCH"


def test_pyflink_programs_run_unchanged(cluster: Cluster) -> None:
    res = cluster.run(PROGRAMS / "pyflink_features.py", options=("-p", "2"))
    assert res.returncode == 0, res.stderr
    out = json.loads(next(ln for ln in res.stdout.splitlines() if ln.startswith("{")))
    assert out["wordcount"] == [
        ["a", 1], ["a", 2], ["a", 3], ["a", 4], ["b", 1], ["b", 2], ["c", 1], ["c", 2], ["d", 1], ["e", 1]
    ]
    assert out["dedup"] == ["A", "B", "C", "D", "E"]
    assert out["union"] == [2, 4, 6, 8, 20, 40, 60]
    assert out["max"] == [["x", 5], ["x", 5], ["x", 7], ["y", 1], ["y", 9]]
    assert out["shuffled_evens"] == list(range(0, 20, 2))
    assert out["broadcast"] == [1, 1, 2, 2]  # one copy per parallel subtask
    assert len(job_ids(res.stdout)) == 6


def test_examples_wordcount_prints_counts(cluster: Cluster) -> None:
    res = cluster.run(EXAMPLES / "wordcount.py", options=("-p", "2"))
    assert res.returncode == 0, res.stderr
    (jid,) = job_ids(res.stdout)
    assert cluster.job(jid)["state"] == "FINISHED"


def _window_lines(cluster: Cluster, jid: str) -> list[tuple[str, int, int, int, float]]:
    lines = cluster.http.get(f"/jobs/{jid}/stdout", params={"maxLines": 10_000}).json()["lines"]
    out = []
    for line in lines:
        m = re.fullmatch(r"(?:\d+> )?\((sensor-\d),(\d+),(\d+),(\d+),([\d.]+)\)", line.strip())
        if m:
            out.append((m[1], int(m[2]), int(m[3]), int(m[4]), float(m[5])))
    return out


def test_examples_sensor_windows_runs_until_stopped_and_resumes_from_its_savepoint(cluster: Cluster) -> None:
    """The README's quick start on the long-running example: run detached, savepoint, stop with a
    savepoint, resume rescaled from it. Windows go on where they stopped, each fired once."""
    example = EXAMPLES / "sensor_windows.py"
    res = cluster.run(example, "400", options=("-p", "2", "--detached"))
    assert res.returncode == 0, res.stderr
    (jid,) = job_ids(res.stdout)
    cluster.wait_running(jid)
    cluster.wait_for(lambda: len(_window_lines(cluster, jid)) >= 16, 60, "two rounds of windows")
    savepoint = cluster.cli("savepoint", jid)
    assert savepoint.returncode == 0, savepoint.stdout + savepoint.stderr
    stop = cluster.cli("stop", jid)
    assert stop.returncode == 0, stop.stdout + stop.stderr
    path = re.findall(r"^Savepoint completed\. Path: (.+)$", stop.stdout, re.M)[-1]
    assert cluster.wait_state(jid, ("FINISHED",), 60)["state"] == "FINISHED"
    before = _window_lines(cluster, jid)
    assert all(n == 25 for _, _, _, n, _ in before), before  # 10 s of event time, 8 sensors, 50 ms apart
    res = cluster.run(example, "400", options=("-p", "3", "--detached", "--from-savepoint", path))
    assert res.returncode == 0, res.stderr
    (resumed,) = job_ids(res.stdout)
    cluster.wait_running(resumed)
    cluster.wait_for(lambda: len(_window_lines(cluster, resumed)) >= 16, 60, "windows after the resume")
    assert cluster.cli("cancel", resumed).returncode == 0
    after = _window_lines(cluster, resumed)
    fired = [(s, start) for s, start, *_ in before + after]
    assert len(fired) == len(set(fired)), "a window fired twice across the stop and the resume"
    last = max(start for _, start, *_ in before)
    assert min(start for _, start, *_ in after) == last + 10_000, "the resumed job went on where the stop left off"
    assert all(n == 25 for _, _, _, n, _ in after), after


def test_cancel_running_job(cluster: Cluster) -> None:
    res = cluster.run(PROGRAMS / "unbounded.py", options=("-p", "2", "--detached"))
    assert res.returncode == 0, res.stderr
    (jid,) = job_ids(res.stdout)
    cluster.wait_for(lambda: cluster.job(jid)["status-counts"]["RUNNING"] == 4, 60, "all tasks running")
    before = cluster.overview()["slots-available"]
    cancel = cluster.http.patch(f"/jobs/{jid}", params={"mode": "cancel"})
    assert cancel.status_code == 202
    job = cluster.wait_state(jid, ("CANCELED", "FAILED", "FINISHED"), 30)
    assert job["state"] == "CANCELED"
    assert all(v["status"] == "CANCELED" for v in job["vertices"])
    assert cluster.overview()["slots-available"] == before + 2


def test_user_function_exception_fails_only_its_job(cluster: Cluster) -> None:
    bystander = job_ids(cluster.run(PROGRAMS / "unbounded.py", options=("-p", "1", "--detached")).stdout)[0]
    cluster.wait_state(bystander, ("RUNNING",), 30)
    res = cluster.run(PROGRAMS / "failing.py", options=("-p", "2"))
    assert res.returncode != 0
    assert "record 777 is cursed" in res.stderr
    (jid,) = job_ids(res.stdout)
    assert cluster.job(jid)["state"] == "FAILED"
    history = cluster.http.get(f"/jobs/{jid}/exceptions").json()["exceptionHistory"]["entries"]
    assert history, "the failure must be recorded"
    entry = history[-1]
    assert entry["exceptionName"] == "ValueError"
    assert "record 777 is cursed" in entry["stacktrace"]
    assert "Map" in entry["taskName"]
    assert entry["taskManagerId"]
    # The other job never noticed.
    assert cluster.job(bystander)["state"] == "RUNNING"
    cluster.http.patch(f"/jobs/{bystander}", params={"mode": "cancel"})
    cluster.wait_state(bystander, ("CANCELED",), 30)
    # The JobManager's log tells each job's lifecycle, as Flink's does, with the failure's cause.
    log = (cluster.workdir / "jobmanager.log").read_text()
    assert f"job {jid} (" in log and "submitted: STREAMING" in log
    assert f"({jid}) switched from state RUNNING to FAILING" in log
    failed = next(ln for ln in log.splitlines() if f"({jid}) switched from state FAILING to FAILED" in ln)
    assert "record 777 is cursed" in failed
    assert f"({bystander}) switched from state CANCELLING to CANCELED" in log


def test_rest_upload_and_run(cluster: Cluster) -> None:
    with open(EXAMPLES / "wordcount.py", "rb") as f:
        up = cluster.http.post("/jars/upload", files={"jarfile": ("wordcount.py", f, "text/x-python")})
    assert up.status_code == 200 and up.json()["status"] == "success"
    jar_id = up.json()["filename"]
    assert jar_id in [j["id"] for j in cluster.http.get("/jars").json()["files"]]
    plan = cluster.http.post(f"/jars/{jar_id}/plan", json={"parallelism": 2}).json()["plan"]
    assert {n["parallelism"] for n in plan["nodes"]} == {1, 2}
    run = cluster.http.post(f"/jars/{jar_id}/run", json={"parallelism": 2})
    assert run.status_code == 200, run.text
    job = cluster.wait_state(run.json()["jobid"], ("FINISHED", "FAILED", "CANCELED"), 60)
    assert job["state"] == "FINISHED"
    assert cluster.http.delete(f"/jars/{jar_id}").status_code == 200
    assert cluster.http.post(f"/jars/{jar_id}/run", json={}).status_code == 404


def test_program_that_raises_while_building_gets_400(cluster: Cluster) -> None:
    with open(PROGRAMS / "broken_graph.py", "rb") as f:
        jar_id = cluster.http.post("/jars/upload", files={"jarfile": ("broken.py", f)}).json()["filename"]
    r = cluster.http.post(f"/jars/{jar_id}/run", json={})
    assert r.status_code == 400
    assert "RuntimeError: the configuration file settings.ini is missing" in r.json()["errors"][0]
    assert cluster.overview()["taskmanagers"] == 2  # the cluster is fine


def test_bad_requests_are_refused_clearly(cluster: Cluster) -> None:
    assert cluster.http.get("/jobs/" + "0" * 32).status_code == 404
    with open(PROGRAMS / "rolling_count.py", "rb") as f:
        jar_id = cluster.http.post("/jars/upload", files={"jarfile": ("r.py", f)}).json()["filename"]
    assert cluster.http.post(f"/jars/{jar_id}/run", json={"parallelism": 0}).status_code == 400
    r = cluster.http.post(f"/jars/{jar_id}/run", json={"parallelism": 40000, "programArgsList": ["10"]})
    assert r.status_code == 400 and "max parallelism" in r.json()["errors"][0]
    assert cluster.http.post("/jars/upload", files={"jarfile": ("evil.sh", b"rm -rf /")}).status_code == 400


def test_slow_consumer_backpressures_the_source_and_redis_stays_bounded(cluster: Cluster) -> None:
    import redis

    res = cluster.run(PROGRAMS / "backpressure.py", options=("-p", "2", "--detached"))
    (jid,) = job_ids(res.stdout)
    cluster.wait_for(lambda: cluster.job(jid)["status-counts"]["RUNNING"] == 4, 60, "all tasks running")
    client = redis.Redis.from_url(cluster.redis_url)
    source = next(v for v in cluster.job(jid)["vertices"] if v["name"].startswith("Source"))
    deepest = 0
    deadline = time.time() + 8
    while time.time() < deadline:
        for key in client.scan_iter(match=f"ms:ch:{jid}:*"):
            deepest = max(deepest, client.llen(key))
        time.sleep(0.2)
    # At most `credits` (8) unread data buffers per channel, whatever the producer's speed.
    assert 0 < deepest <= 8
    bp = cluster.http.get(f"/jobs/{jid}/vertices/{source['id']}/backpressure").json()
    assert bp["status"] == "ok"
    assert bp["backpressure-level"] == "high", bp
    assert all(st["ratio"] > 0.5 for st in bp["subtasks"])
    # The source emits only as fast as the slow map consumes: about 2 x 500 records/s.
    written = cluster.job(jid)["vertices"][0]["metrics"]["write-records"]
    assert written < 2 * 500 * 60
    cluster.http.patch(f"/jobs/{jid}", params={"mode": "cancel"})
    cluster.wait_state(jid, ("CANCELED",), 30)


def test_batch_jobs_run_on_spark_unless_native_is_asked_for(cluster: Cluster) -> None:
    on_spark = cluster.run(PROGRAMS / "batch_reduce.py", options=("-p", "2"))
    assert on_spark.returncode == 0, on_spark.stderr
    (jid,) = job_ids(on_spark.stdout)
    job = cluster.job(jid)
    assert job["job-type"] == "BATCH"
    assert job["spark"]["stages"], "a Spark job shows its stages"
    assert "[Stage" not in on_spark.stderr and "Spark:" not in on_spark.stderr  # the progress line is for a TTY only
    native = cluster.run(PROGRAMS / "batch_reduce.py", options=("-p", "2", "--engine", "native"))
    assert native.returncode == 0, native.stderr
    (native_jid,) = job_ids(native.stdout)
    assert "spark" not in cluster.job(native_jid)
    # The same program gives the same result on both engines.
    first = lambda out: next(ln for ln in out.splitlines() if ln.startswith("["))  # noqa: E731
    assert first(on_spark.stdout) == first(native.stdout)


def test_operator_spark_cannot_run_is_refused_by_name(cluster: Cluster, tmp_path: Path) -> None:
    program = tmp_path / "windows_in_batch.py"
    program.write_text(
        "from pyflink.datastream import StreamExecutionEnvironment, RuntimeExecutionMode\n"
        "from pyflink.datastream.connectors import DataGeneratorSource\n"
        "from pyflink.common import WatermarkStrategy\n"
        "env = StreamExecutionEnvironment.get_execution_environment()\n"
        "env.set_runtime_mode(RuntimeExecutionMode.BATCH)\n"
        "src = DataGeneratorSource(lambda i: i, None)\n"
        "env.from_source(src, WatermarkStrategy.no_watermarks(), 'endless').print()\n"
        "env.execute('refused')\n"
    )
    res = cluster.run(program)
    assert res.returncode != 0
    assert "endless" in res.stderr and "400" in res.stderr


def test_a_jobmanager_started_by_hand_runs_with_a_fixed_malloc_mmap_threshold(cluster: Cluster) -> None:
    """The fixture starts ``millstream jobmanager`` as a user would, without the variable: the command
    re-executes itself with it (the fix for the JobManager's per-job growth), keeping its process id."""
    assert "MALLOC_MMAP_THRESHOLD_" not in cluster.env
    environ = Path(f"/proc/{cluster.jobmanager.pid}/environ").read_bytes().split(b"\0")
    assert b"MALLOC_MMAP_THRESHOLD_=131072" in environ
    assert cluster.overview()["taskmanagers"] == 2  # the same process answers, after the re-execution
