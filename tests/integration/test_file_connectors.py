"""FileSource and FileSink on a real cluster: a copy job read mid-file when a TaskManager is SIGKILLed."""
from __future__ import annotations

import os
import random
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

from tests.integration.cluster import Cluster

PROGRAM = Path(__file__).parent / "programs" / "file_copy.py"
LINES_PER_FILE = 20_000


def committed_lines(out: Path) -> list[str]:
    lines: list[str] = []
    for dirpath, _, names in os.walk(out):
        for name in names:
            if not name.startswith("."):
                assert re.fullmatch(r"copy-[0-9a-f]{32}-\d-\d+\.txt", name), name
                lines += Path(dirpath, name).read_text().splitlines()
    return lines


def test_a_file_copy_restored_mid_file_writes_every_line_exactly_once(tmp_path: Path) -> None:
    src, out = tmp_path / "in", tmp_path / "out"
    (src / "nested").mkdir(parents=True)
    expected: list[str] = []
    for i, name in enumerate(["a.txt", "nested/b.txt"]):
        lines = [f"file{i}-line{j}-ünïcode" for j in range(LINES_PER_FILE)]
        (src / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
        expected += [ln.upper() for ln in lines]
    (src / ".hidden.txt").write_text("never read\n")
    (src / "_SUCCESS").write_text("never read\n")
    c = Cluster(tmp_path, heartbeat_timeout_ms=3000)
    try:
        c.start(taskmanagers=2, slots=2)
        run = subprocess.Popen(
            [sys.executable, "-m", "millstream.backend.cli", "run", "-p", "2", str(PROGRAM), str(src), str(out), "300"],
            env=c.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        c.wait_for(lambda: c.http.get("/jobs/overview").json()["jobs"], 30, "the job to be submitted")
        jid = c.http.get("/jobs/overview").json()["jobs"][0]["jid"]
        # Kill once some, not all, lines are committed: both sources are part-way through their file.
        c.wait_for(lambda: len(committed_lines(out)) >= LINES_PER_FILE // 4, 90, "a quarter of a file committed")
        before = len(committed_lines(out))
        assert before < len(expected) // 2
        victim = random.Random(3).choice(c.taskmanagers)
        c.replace_taskmanager(victim, slots=2)
        stdout, stderr = run.communicate(timeout=240)
        assert run.returncode == 0, stderr[-3000:]
        assert c.job(jid)["state"] == "FINISHED"
        stats = c.http.get(f"/jobs/{jid}/checkpoints").json()
        assert stats["counts"]["restored"] >= 1, stats["counts"]
        got = committed_lines(out)
        # Exactly once: nothing lost, nothing twice (a restart from scratch would repeat `before` lines).
        assert len(got) == len(expected), (len(got), len(expected))
        assert Counter(got) == Counter(expected)
        entries = c.http.get(f"/jobs/{jid}/exceptions").json()["exceptionHistory"]["entries"]
        assert any(e["exceptionName"] == "TaskManagerLostException" for e in entries)
    finally:
        c.stop()


def test_a_bounded_file_source_job_without_failures(tmp_path: Path) -> None:
    src, out = tmp_path / "in", tmp_path / "out"
    src.mkdir()
    expected = []
    for i in range(5):  # more files than subtasks: round-robin over sorted paths
        lines = [f"f{i}-{j}" for j in range(100 + i)]
        (src / f"{i}.log").write_text("\n".join(lines))  # no newline after the last line
        expected += [ln.upper() for ln in lines]
    c = Cluster(tmp_path)
    try:
        c.start(taskmanagers=1, slots=2)
        res = c.run(PROGRAM, str(src), str(out), "0", options=("-p", "2"), timeout=120)
        assert res.returncode == 0, res.stderr[-2000:]
        assert sorted(committed_lines(out)) == sorted(expected)
        # Nothing left in progress; each sink subtask marked that it committed everything at its end.
        hidden = sorted(n for n in os.listdir(out) if n.startswith("."))
        assert len(hidden) == 2 and all(n.endswith(".finished") for n in hidden), hidden
    finally:
        c.stop()


def test_a_monitoring_file_source_picks_up_files_added_while_it_runs(tmp_path: Path) -> None:
    src, out = tmp_path / "in", tmp_path / "out"
    src.mkdir()
    (src / "first.txt").write_text("one\ntwo\n")
    c = Cluster(tmp_path)
    try:
        c.start(taskmanagers=2, slots=2)  # 3 slots for the resume at parallelism 3
        run = subprocess.Popen(
            [sys.executable, "-m", "millstream.backend.cli", "run", "--detached", "-p", "2", str(PROGRAM), str(src), str(out), "0", "100"],
            env=c.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        stdout, stderr = run.communicate(timeout=60)
        assert run.returncode == 0, stderr[-2000:]
        jid = re.findall(r"[0-9a-f]{32}", stdout)[0]
        c.wait_for(lambda: sorted(committed_lines(out)) == ["ONE", "TWO"], 60, "the first file committed")
        # A file written in place would be read half-written: write it hidden, then rename, as Flink expects.
        for name, text in (("second.txt", "three\nfour\n"), ("deeper/third.txt", "five\n")):
            (src / name).parent.mkdir(exist_ok=True)
            hidden = (src / name).parent / f".{Path(name).name}"
            hidden.write_text(text)
            os.replace(hidden, src / name)
        c.wait_for(lambda: len(committed_lines(out)) == 5, 60, "the new files committed")
        assert sorted(committed_lines(out)) == ["FIVE", "FOUR", "ONE", "THREE", "TWO"]
        assert c.job(jid)["state"] == "RUNNING"  # unbounded: it waits for more files

        # Stopped at 2 and resumed at 3: every file, read or not, goes to the subtask that owns its
        # path at 3, so no file is read again and new ones are still picked up.
        stop = c.cli("stop", jid, "--savepoint-dir", str(tmp_path / "sp"))
        assert stop.returncode == 0, stop.stdout + stop.stderr
        savepoint = re.findall(r"^Savepoint completed\. Path: (.+)$", stop.stdout, re.M)[-1]
        c.wait_state(jid, ("FINISHED",))
        known = c.job_ids()
        res = c.run(
            PROGRAM, str(src), str(out), "0", "100", options=("--detached", "-p", "3", "--from-savepoint", savepoint)
        )
        assert res.returncode == 0, res.stderr[-3000:]
        jid2 = c.wait_new_job(known)
        c.wait_running(jid2)
        for i in range(6):
            hidden = src / f".later{i}.txt"
            hidden.write_text(f"later{i}\n")
            os.replace(hidden, src / f"later{i}.txt")
        c.wait_for(lambda: len(committed_lines(out)) >= 11, 60, "the files added after the resume committed")
        # Progress, not a pause: three more checkpoints (300 ms apart, the directory rescanned every
        # 100 ms) commit whatever a rescan read again since the lines showed.
        completed = lambda: c.http.get(f"/jobs/{jid2}/checkpoints").json()["counts"]["completed"]  # noqa: E731
        seen = completed()
        c.wait_for(lambda: completed() >= seen + 3, 60, "three more checkpoints")
        assert Counter(committed_lines(out)) == Counter(
            ["FIVE", "FOUR", "ONE", "THREE", "TWO"] + [f"LATER{i}" for i in range(6)]
        )
        c.http.patch(f"/jobs/{jid2}", params={"mode": "cancel"})
        c.wait_state(jid2, ("CANCELED",))
    finally:
        c.stop()


def test_a_file_copy_stopped_at_2_and_resumed_at_3_from_the_savepoint_writes_every_line_once(tmp_path: Path) -> None:
    """The sources' half-read splits are redistributed over 3 subtasks; the sink's committables in the
    savepoint (committed when the stop completed) are committed again, harmlessly, by their new owners."""
    src, out = tmp_path / "in", tmp_path / "out"
    src.mkdir()
    expected: list[str] = []
    for i in range(3):
        lines = [f"f{i}-{j}" for j in range(6000)]
        (src / f"{i}.txt").write_text("\n".join(lines) + "\n")
        expected += [ln.upper() for ln in lines]
    c = Cluster(tmp_path)
    try:
        c.start(taskmanagers=2, slots=2)
        known = c.job_ids()
        first = c.start_run(PROGRAM, str(src), str(out), "300", options=("-p", "2"))
        jid = c.wait_new_job(known)
        c.wait_for(lambda: len(committed_lines(out)) >= 2000, 90, "some lines committed")
        stop = c.cli("stop", jid, "--savepoint-dir", str(tmp_path / "sp"))
        assert stop.returncode == 0, stop.stdout + stop.stderr
        savepoint = re.findall(r"^Savepoint completed\. Path: (.+)$", stop.stdout, re.M)[-1]
        assert first.wait(120) == 0, first.stderr.read()[-3000:] if first.stderr else ""
        assert c.job(jid)["state"] == "FINISHED"
        part_way = len(committed_lines(out))
        # Stopped midway: the resumed job has lines left to read (how far the first run got before the
        # stop landed depends on the machine's load, so only "not done yet" is asserted).
        assert 2000 <= part_way < len(expected), part_way
        known = c.job_ids()
        res = c.run(PROGRAM, str(src), str(out), "0", options=("-p", "3", "--from-savepoint", savepoint), timeout=180)
        assert res.returncode == 0, res.stderr[-3000:]
        jid2 = c.wait_new_job(known)
        assert max(v["parallelism"] for v in c.job(jid2)["vertices"]) == 3
        got = committed_lines(out)
        assert len(got) == len(expected), (len(got), len(expected))
        assert Counter(got) == Counter(expected)
    finally:
        c.stop()


def test_a_failover_after_one_sink_subtask_finished_writes_nothing_twice(tmp_path: Path) -> None:
    """Subtask 0 reads a short file, commits everything at its end and finishes; then the TaskManager
    of subtask 1 dies and every task restarts from a checkpoint taken before subtask 0 finished."""
    src, out = tmp_path / "in", tmp_path / "out"
    src.mkdir()
    expected: list[str] = []
    for name, n in (("a.txt", 6000), ("b.txt", 24000)):  # sorted round-robin: a -> subtask 0, b -> 1
        lines = [f"{name}-{j}" for j in range(n)]
        (src / name).write_text("\n".join(lines) + "\n")
        expected += [ln.upper() for ln in lines]
    c = Cluster(tmp_path, heartbeat_timeout_ms=3000)
    try:
        c.start(taskmanagers=2, slots=2)
        known = c.job_ids()
        run = c.start_run(PROGRAM, str(src), str(out), "300", options=("-p", "2"))
        jid = c.wait_new_job(known)
        vid = c.job(jid)["vertices"][0]["id"]

        def subtasks() -> list[dict]:
            return c.http.get(f"/jobs/{jid}/vertices/{vid}").json()["subtasks"]

        # A checkpoint completes while both run (none can once a subtask finished): the failover restores it.
        c.wait_for(lambda: c.http.get(f"/jobs/{jid}/checkpoints").json()["counts"]["completed"] >= 1, 60, "a checkpoint")
        c.wait_for(lambda: [s["status"] for s in subtasks()] == ["FINISHED", "RUNNING"], 90, "subtask 0 to finish")
        assert any(n.endswith(".finished") for n in os.listdir(out))
        tm = subtasks()[1]["taskmanager-id"]
        pid = int(tm.split(":")[-1].split("-")[0])
        (victim,) = [p for p in c.taskmanagers if p.pid == pid]
        c.replace_taskmanager(victim, slots=2)
        stdout, stderr = run.communicate(timeout=240)
        assert run.returncode == 0, stderr[-3000:]
        assert c.http.get(f"/jobs/{jid}/checkpoints").json()["counts"]["restored"] >= 1
        assert max(s["attempt"] for s in subtasks()) >= 1
        got = committed_lines(out)
        assert len(got) == len(expected), (len(got), len(expected))
        assert Counter(got) == Counter(expected)
    finally:
        c.stop()
