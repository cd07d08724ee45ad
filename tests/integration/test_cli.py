"""The ``millstream`` client commands as a user types them, against a real cluster (2 TaskManagers x 2
slots): what ``run`` says and when, its exit codes for user mistakes, and Flink's ``info``, ``list
-r/-s/-a``, ``savepoint -d``, ``cancel`` of an ended job, ``--version`` and help texts."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path


from tests.integration.cluster import Cluster, free_port

PROGRAMS = Path(__file__).parent / "programs"
JOB_LINE = re.compile(r"^Job ([0-9a-f]{32}) (\w+)$", re.M)

ARGS_PROGRAM = '''
import json, sys
from pyflink.datastream import StreamExecutionEnvironment
env = StreamExecutionEnvironment.get_execution_environment()
env.from_collection([1, 2, 3]).map(lambda x: x * 2).print()
print(json.dumps({"argv": sys.argv[1:], "parallelism": env.get_parallelism()}))
env.execute("args")
'''

NO_EXECUTE = '''
from pyflink.datastream import StreamExecutionEnvironment
env = StreamExecutionEnvironment.get_execution_environment()
env.from_collection([1, 2, 3]).print()
'''

BAD_GRAPH = '''
from pyflink.datastream import StreamExecutionEnvironment
env = StreamExecutionEnvironment.get_execution_environment()
env.from_collection([1, 2, 3]).map(lambda x: x).set_parallelism(0)
env.execute("bad")
'''


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def host_port(cluster: Cluster) -> str:
    return cluster.url.removeprefix("http://")


def test_run_says_at_once_where_the_job_is_and_takes_flinks_host_port(cluster: Cluster, tmp_path: Path) -> None:
    program = write(tmp_path, "args.py", ARGS_PROGRAM)
    # Flink's -m form (no scheme); options before the program are the CLI's, everything after it the program's.
    res = cluster.run(program, "x", "-p", "3", options=("-m", host_port(cluster), "-p", "2"))
    assert res.returncode == 0, res.stdout + res.stderr
    (jid, state), = JOB_LINE.findall(res.stdout)
    assert state == "FINISHED"
    assert f"Job has been submitted with JobID {jid}" in res.stderr
    assert f"{cluster.url}/ui/jobs/{jid}" in res.stderr
    said = json.loads(next(ln for ln in res.stdout.splitlines() if ln.startswith("{")))
    assert said == {"argv": ["x", "-p", "3"], "parallelism": 2}
    assert max(v["parallelism"] for v in cluster.job(jid)["vertices"]) == 2
    # stdout keeps the program's and the job's own lines and the state line only.
    assert "submitted" not in res.stdout

    detached = cluster.run(program, options=("--detached",))
    assert detached.returncode == 0, detached.stderr
    (jid2, state2), = JOB_LINE.findall(detached.stdout)
    assert state2 == "SUBMITTED"
    assert f"Job has been submitted with JobID {jid2}" in detached.stderr
    assert f"{cluster.url}/ui/jobs/{jid2}" in detached.stderr
    cluster.wait_state(jid2, ("FINISHED",))


def test_a_job_that_gets_no_slots_is_given_up_and_cancelled(cluster: Cluster) -> None:
    known = cluster.job_ids()
    started = time.monotonic()
    res = cluster.run(PROGRAMS / "unbounded.py", options=("-p", "9", "--slot-timeout", "3"), timeout=120)
    took = time.monotonic() - started
    assert res.returncode == 5, res.stdout + res.stderr
    assert "is waiting for slots: 9 slots needed" in res.stderr, res.stderr
    assert "got no slots within the slot request timeout of 3 s" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr
    (jid,) = cluster.job_ids() - known
    assert cluster.job(jid)["state"] == "CANCELED"  # nothing left behind holding a place in the queue
    assert took < 60


def no_traceback(res: subprocess.CompletedProcess) -> str:
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert "Traceback" not in res.stderr and len(lines) == 1, res.stderr
    return lines[0]


def test_user_mistakes_give_one_line_and_their_exit_code(cluster: Cluster, tmp_path: Path) -> None:
    program = write(tmp_path, "args.py", ARGS_PROGRAM)
    # Nothing listens: it is waited for (a JobManager may be restarting), then given up on.
    unreachable = subprocess.run(
        [sys.executable, "-m", "millstream.backend.cli", "run", "-m", f"127.0.0.1:{free_port()}", str(program)],
        env={**cluster.env, "MILLSTREAM_CLIENT_RETRY_TIMEOUT_S": "1"}, capture_output=True, text=True, timeout=60,
    )
    assert unreachable.returncode == 3 and "Traceback" not in unreachable.stderr, unreachable.stderr
    note, last = unreachable.stderr.strip().splitlines()
    assert "the JobManager is unreachable" in note and "retrying the submission for up to 1 s" in note
    assert last.startswith("cannot reach the JobManager at 127.0.0.1:"), last

    # Something answers HTTP at the address, but it is no JobManager.
    web = subprocess.Popen(
        [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port := free_port())],
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        cluster.wait_for(lambda: subprocess.run(
            [sys.executable, "-c", f"import urllib.request as u; u.urlopen('http://127.0.0.1:{port}/')"],
            capture_output=True).returncode == 0, 30, "the web server")
        wrong = cluster.run(program, options=("-m", f"127.0.0.1:{port}"))
    finally:
        web.kill()
        web.wait()
    assert wrong.returncode == 3
    assert "not as a Millstream JobManager" in no_traceback(wrong)

    malformed = cluster.run(program, options=("-m", "http://:80"))
    assert malformed.returncode == 2 and "names no host" in no_traceback(malformed)

    broken = cluster.run(PROGRAMS / "broken_graph.py")
    assert broken.returncode == 4
    line = no_traceback(broken)
    assert "the program failed before submitting a job: RuntimeError: the configuration file" in line, line
    assert "(broken_graph.py, line 6)" in line

    bad_graph = cluster.run(write(tmp_path, "bad_graph.py", BAD_GRAPH))
    assert bad_graph.returncode == 4 and "the program failed before submitting a job" in no_traceback(bad_graph)

    never = cluster.run(write(tmp_path, "never.py", NO_EXECUTE))
    assert never.returncode == 0 and "never called execute()" in no_traceback(never)  # said, as Flink runs it


def test_info_prints_the_plan_and_submits_nothing(cluster: Cluster, tmp_path: Path) -> None:
    known = cluster.job_ids()
    res = cluster.cli("info", "-p", "3", str(write(tmp_path, "args.py", ARGS_PROGRAM)))
    assert res.returncode == 0, res.stderr
    plan = json.loads(res.stdout[res.stdout.index("{\n"):] if "{\n" in res.stdout else res.stdout)
    contents = [n["contents"] for n in plan["nodes"]]
    assert any("Map" in c for c in contents), contents
    assert {n["parallelism"] for n in plan["nodes"] if "Map" in n["contents"]} == {3}
    never = cluster.cli("info", str(write(tmp_path, "never.py", NO_EXECUTE)))
    assert never.returncode == 4 and "there is no plan" in never.stderr
    assert cluster.job_ids() == known


def sections(listing: str) -> dict[str, set[str]]:
    """``millstream list`` output as {section title: job ids}, plus the "No ... jobs." lines as empty ones."""
    found: dict[str, set[str]] = {}
    title = None
    for line in listing.splitlines():
        if m := re.match(r"^-+ (.+) -+$", line):
            title = m.group(1)
            found[title] = set()
        elif m := re.match(r"^No (\w+) jobs\.$", line):
            found[m.group(1)] = set()
        elif title and (m := re.search(r" : ([0-9a-f]{32}) : .+ \((\w+)\)$", line)):
            found[title].add(m.group(1))
    return found


def test_list_cancel_and_savepoint_dispose_as_flinks(cluster: Cluster, tmp_path: Path) -> None:
    done = cluster.run(write(tmp_path, "args.py", ARGS_PROGRAM))
    (finished, _), = JOB_LINE.findall(done.stdout)
    running = JOB_LINE.findall(cluster.run(PROGRAMS / "unbounded.py", options=("-p", "1", "-d")).stdout)[0][0]
    waiting = JOB_LINE.findall(cluster.run(PROGRAMS / "unbounded.py", options=("-p", "9", "-d")).stdout)[0][0]
    try:
        cluster.wait_running(running)
        default = cluster.cli("list")
        assert default.returncode == 0, default.stderr
        got = sections(default.stdout)
        assert running in got["Running/Restarting Jobs"] and waiting in got["Scheduled Jobs"], default.stdout
        assert finished not in default.stdout
        only_running = sections(cluster.cli("list", "-r").stdout)
        assert set(only_running) == {"Running/Restarting Jobs"} and running in only_running["Running/Restarting Jobs"]
        only_scheduled = sections(cluster.cli("list", "--scheduled").stdout)
        assert set(only_scheduled) == {"Scheduled Jobs"} and waiting in only_scheduled["Scheduled Jobs"]
        everything = sections(cluster.cli("list", "-a").stdout)
        assert finished in everything["Terminated Jobs"]

        refused = cluster.cli("cancel", finished)
        assert refused.returncode == 1
        assert f"Job {finished} has already ended (FINISHED)" in no_traceback(refused)
        unknown = cluster.cli("cancel", "0" * 32)
        assert unknown.returncode == 1 and "no job" in no_traceback(unknown)

        taken = cluster.cli("savepoint", running, str(tmp_path / "sp"))
        assert taken.returncode == 0, taken.stdout + taken.stderr
        path = re.findall(r"^Savepoint completed\. Path: (.+)$", taken.stdout, re.M)[-1]
        assert (Path(path) / "_metadata").is_file()
        disposed = cluster.cli("savepoint", "-d", path)
        assert disposed.returncode == 0, disposed.stdout + disposed.stderr
        assert f"Savepoint '{path}' disposed." in disposed.stdout
        assert not Path(path).exists()
        again = cluster.cli("savepoint", "-d", path)
        assert again.returncode == 1 and "does not exist" in again.stderr, again.stderr
        # Only savepoints this cluster wrote, under its state directories, are ever deleted.
        impostor = tmp_path / "savepoint-impostor"
        impostor.mkdir()
        (impostor / "keep.txt").write_text("x")
        assert cluster.cli("savepoint", "-d", str(impostor)).returncode == 1
        outside = Path(os.path.realpath("/tmp")) / f"savepoint-outside-{os.getpid()}"
        outside.mkdir(exist_ok=True)
        try:
            far = cluster.cli("savepoint", "-d", str(outside))
            assert far.returncode == 1 and "not under a state directory" in far.stderr, far.stderr
            assert impostor.exists() and outside.exists()
        finally:
            outside.rmdir()
    finally:
        for jid in (running, waiting):
            assert cluster.cli("cancel", jid).returncode == 0
        for jid in (running, waiting):
            cluster.wait_state(jid, ("CANCELED",))


def test_version_and_help_keep_their_bracketed_notes() -> None:
    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "millstream.backend.cli", *args], capture_output=True, text=True, timeout=60)

    version = cli("--version")
    assert version.returncode == 0 and re.match(r"^Millstream \d+\.\d+", version.stdout), version.stdout
    tm = " ".join(cli("taskmanager", "--help").stdout.split())
    assert "[env MILLSTREAM_SLOTS, default 2]" in tm, tm
    assert "[env MILLSTREAM_TASKMANAGER_METRICS_PORT, default 0]" in tm
    run = " ".join(cli("run", "--help").stdout.split())
    assert "[env MILLSTREAM_JOBMANAGER]" in run and "[env MILLSTREAM_SLOT_REQUEST_TIMEOUT_S, default 300]" in run
    assert "Exit codes: 0" in run and "5 a job got no slots" in run


def test_a_spark_job_shows_its_stages_on_a_terminal(cluster: Cluster) -> None:
    """stderr on a pseudo-terminal: the Spark progress line is drawn (off a TTY nothing is: see
    test_cluster_jobs' Spark test)."""
    import pty
    import threading

    master, slave = pty.openpty()
    shown: list[bytes] = []

    def read() -> None:
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # the slave side closed
                return
            if not chunk:
                return
            shown.append(chunk)

    proc = subprocess.Popen(
        [sys.executable, "-m", "millstream.backend.cli", "run", str(PROGRAMS / "slow_batch.py"), "40"],
        env=cluster.env, stdout=subprocess.PIPE, stderr=slave, text=True,
    )
    os.close(slave)
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        out, _ = proc.communicate(timeout=240)
    finally:
        reader.join(10)
        os.close(master)
    terminal = b"".join(shown).decode(errors="replace")
    assert proc.returncode == 0, terminal
    assert re.search(r"\[Stage \d+:[=> ]+ \d+\+\d+/\d+\]", terminal), terminal
    assert "[Stage" not in out  # stdout stays the job's


def test_run_says_live_that_its_job_waits_for_slots_and_when_it_gets_them(cluster: Cluster) -> None:
    # Last in this module: it adds a TaskManager to the module's cluster (4 slots, now 5).
    known = cluster.job_ids()
    run = cluster.start_run(PROGRAMS / "rolling_count.py", "3000", "10", "print", options=("-p", "5"))
    lines: list[str] = []
    # The client's stderr as it comes: the slots arrive only once it said, live, that the job waits.
    reader = threading.Thread(target=lambda: lines.extend(iter(run.stderr.readline, "")), daemon=True)
    reader.start()
    try:
        jid = cluster.wait_new_job(known)
        cluster.wait_for(lambda: any("is waiting for slots" in ln for ln in lines), 60, "the client to say the job waits")
        cluster.start_taskmanager(slots=1)
        out = run.stdout.read()
        run.wait(120)
        reader.join(10)
    finally:
        if run.poll() is None:
            run.kill()
    err = "".join(lines)
    assert run.returncode == 0, err
    waiting = err.index(f"Job {jid} is waiting for slots: 5 slots needed")
    got = re.search(rf"Job {jid} got its slots and is (RUNNING|FINISHED)", err)  # a short job may end between looks
    assert got and got.start() > waiting, err
    assert JOB_LINE.findall(out) == [(jid, "FINISHED")]
