"""FileSource and FileSink at fsspec URLs on a real cluster: a copy job from a real S3-compatible
server (moto's server mode) or FTP server to the same store, with a TaskManager SIGKILLed mid-file,
writes every line exactly once. On a store the sink closes its parts at every checkpoint, uploads
them whole as hidden objects, and moves them to their final names once the checkpoint completes."""
from __future__ import annotations

import random
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

from tests.integration.cluster import Cluster
from tests.integration.stores import Store, ftp, s3, store  # noqa: F401 (fixtures)

PROGRAM = Path(__file__).parent / "programs" / "file_copy.py"
LINES_PER_FILE = 20_000


def committed_lines(store: Store) -> list[str]:
    lines: list[str] = []
    # Files only: when s3fs's listing of a prefix comes back empty it asks for the prefix itself, and
    # if the sink's first objects appeared in between, it lists the directory "out" (a CI run saw it).
    for path, info in store.fs.find(store.path("out"), detail=True).items():
        if info.get("type") == "directory":
            continue
        name = path.rsplit("/", 1)[-1]
        if not name.startswith("."):
            assert re.fullmatch(r"copy-[0-9a-f]{32}-\d-\d+\.txt", name), name
            lines += store.read_text(path).splitlines()
    return lines


def test_a_file_copy_between_urls_restored_mid_file_writes_every_line_exactly_once(tmp_path: Path, store: Store) -> None:
    expected: list[str] = []
    for i, name in enumerate(["a.txt", "nested/b.txt"]):
        lines = [f"file{i}-line{j}-ünïcode" for j in range(LINES_PER_FILE)]
        store.fs.makedirs(store.path(f"in/{name}").rsplit("/", 1)[0], exist_ok=True)
        store.fs.pipe_file(store.path(f"in/{name}"), ("\n".join(lines) + "\n").encode("utf-8"))
        expected += [ln.upper() for ln in lines]
    store.fs.pipe_file(store.path("in/.hidden.txt"), b"never read\n")
    store.fs.pipe_file(store.path("in/_SUCCESS"), b"never read\n")
    c = Cluster(tmp_path, heartbeat_timeout_ms=3000)
    c.env.update(store.env)
    try:
        c.start(taskmanagers=2, slots=2)
        run = subprocess.Popen(
            [sys.executable, "-m", "millstream.backend.cli", "run", "-p", "2", str(PROGRAM), f"{store.url}/in", f"{store.url}/out", "300"],
            env=c.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        jid = c.wait_new_job(set())
        c.wait_running(jid)
        # Kill once some, not all, lines are committed: both sources are part-way through their file.
        c.wait_for(lambda: len(committed_lines(store)) >= LINES_PER_FILE // 4, 120, "a quarter of a file committed")
        assert len(committed_lines(store)) < len(expected) // 2
        victim = random.Random(3).choice(c.taskmanagers)
        c.replace_taskmanager(victim, slots=2)
        stdout, stderr = run.communicate(timeout=300)
        assert run.returncode == 0, stderr[-3000:]
        assert c.job(jid)["state"] == "FINISHED"
        assert c.http.get(f"/jobs/{jid}/checkpoints").json()["counts"]["restored"] >= 1
        got = committed_lines(store)
        # Exactly once: nothing lost, nothing twice.
        assert len(got) == len(expected), (len(got), len(expected))
        assert Counter(got) == Counter(expected)
        # Each sink subtask marked on the store that it committed everything at its end.
        hidden = [p.rsplit("/", 1)[-1] for p in store.fs.find(store.path("out"))]
        assert sum(n.endswith(".finished") for n in hidden) == 2, hidden
    finally:
        c.stop()
