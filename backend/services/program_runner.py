"""Runs an uploaded program in a subprocess to obtain its JobGraph.

The program is user code: it runs in its own process with a timeout, so a
crash, a hang or a sys.exit cannot affect the JobManager. A failure is
reported with the last line of the traceback, as Flink reports a jar's.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from engine.graph.job_graph import JobGraph


class ProgramFailed(ValueError):
    def __init__(self, summary: str, output: str) -> None:
        super().__init__(summary)
        self.output = output


@dataclass(frozen=True)
class CapturedJob:
    job_graph: JobGraph
    user_code: bytes


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "no output"


def capture_job(program: Path, args: list[str], parallelism: int | None, timeout_s: float) -> CapturedJob:
    with tempfile.TemporaryDirectory(prefix="millstream-plan-") as out:
        cmd = [sys.executable, "-m", "engine.client.plan_capture", "--out", out]
        if parallelism:
            cmd += ["--parallelism", str(parallelism)]
        cmd += [str(program), *args]
        try:
            proc = subprocess.run(
                cmd, cwd=str(program.parent), capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL
            )
        except subprocess.TimeoutExpired:
            raise ProgramFailed(f"the program did not submit a job within {timeout_s:g} s", "")
        if proc.returncode != 0:
            raise ProgramFailed(_last_line(proc.stderr or proc.stdout), proc.stderr[-20000:])
        graph = JobGraph.from_dict(json.loads((Path(out) / "jobgraph.json").read_text()))
        code = (Path(out) / "usercode.bin").read_bytes()
        return CapturedJob(graph, code)
