"""State larger than memory (issue 16): the keyed count over N distinct keys on TaskManagers each
confined by a kernel memory limit, on the on-disk backend (LMDB) and on the heap backend.

Each TaskManager starts through ``--exec-in CGROUP -- CMD``: this script moves its own process
into the cgroup and then execs the TaskManager, so the TaskManager and every process it starts
(slot processes, forked snapshot writers) are charged to that cgroup and share its limit. cgroup
v2 is used when its memory controller is there (``memory.max``, ``memory.swap.max`` 0), else the
v1 memory controller (``memory.limit_in_bytes``, ``memory.memsw.limit_in_bytes``: no swap). The
cgroups are made under this process's own memory cgroup, so whatever limits the caller already
has still apply, and they are removed at the end. Needs root. Only the v1 path has run so far (the
development VM mounts cgroup v2 without its memory controller).

Three phases, each on a fresh local cluster of TASKMANAGERS x 1 slot, parallelism TASKMANAGERS:

1. calibration: the heap backend at CALIBRATE_KEYS keys without a limit; the cgroups' peak memory
   against the same run's peak with 1,000 keys gives the heap backend's bytes per key (with a
   forked snapshot's copy-on-write growth only if a checkpoint completed during that run).
2. on-disk: ``rocksdb`` at KEYS keys under the limit, checkpoints every INTERVAL_MS: wall time,
   checkpoints completed/failed, each cgroup's peak and OOM kills, LMDB's file size, the last
   checkpoint's size, and the job's exact check (every key counted once).
3. heap: ``hashmap`` at HEAP_KEYS keys under the same limit, stopped at its first OOM kill (or
   when the job fails, or after HEAP_TIMEOUT seconds).

``python benchmarks/larger_than_memory.py [--keys 20000000] [--limit-mb 512] [--interval-ms 10000]
[--heap-keys N] [--calibrate-keys 1000000] [--skip-heap] [--skip-calibration]``.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import machine  # noqa: E402
from run import free_port  # noqa: E402

JOB = Path(__file__).with_name("larger_than_memory_job.py")
MB = 1 << 20


# -- memory cgroups ------------------------------------------------------------------


def _own_cgroup(controller: str) -> str | None:
    """This process's cgroup path in the hierarchy of ``controller`` ("" for the v2 unified one)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controllers.split(",") == [controller] or (controller == "" and controllers == ""):
            return path
    return None


def _mounts(fstype: str) -> list[tuple[str, str]]:
    """(mount point, options) of every mount of ``fstype``."""
    out = []
    for line in Path("/proc/mounts").read_text().splitlines():
        _, point, kind, opts, *_ = line.split()
        if kind == fstype:
            out.append((point, opts))
    return out


def cgroup_parent() -> tuple[str, Path]:
    """("v2" or "v1", the directory new memory cgroups go under): this process's own cgroup."""
    for point, _ in _mounts("cgroup2"):
        own = _own_cgroup("")
        if own is None:
            continue
        parent = Path(point) / own.lstrip("/")
        if "memory" in (parent / "cgroup.controllers").read_text().split():
            # v2 only hands a controller to children listed in the parent's subtree_control.
            if "memory" not in (parent / "cgroup.subtree_control").read_text().split():
                try:
                    (parent / "cgroup.subtree_control").write_text("+memory")
                except OSError as e:
                    # v2's "no internal processes" rule: a non-root cgroup holding processes (this
                    # one) cannot hand controllers to its children.
                    raise RuntimeError(
                        f"cannot enable the memory controller for the children of {parent} ({e}): cgroup v2 allows "
                        "it only in a cgroup with no processes of its own; start this script from a cgroup whose parent "
                        "already delegates the memory controller"
                    ) from e
            return "v2", parent
    for point, opts in _mounts("cgroup"):
        if "memory" in opts.split(","):
            own = _own_cgroup("memory")
            if own is not None:
                return "v1", Path(point) / own.lstrip("/")
    raise RuntimeError("no memory cgroup controller (v2 memory.max or v1 memory.limit_in_bytes) on this machine")


@dataclass
class MemoryCgroup:
    """One memory cgroup with a hard limit and no swap (limit 0: none), v1 or v2."""

    path: Path
    version: str
    limit: int
    samples_peak: int = 0  # the highest usage sampled (v1 has max_usage_in_bytes, v2 memory.peak on newer kernels)

    @classmethod
    def create(cls, name: str, limit: int) -> "MemoryCgroup":
        version, parent = cgroup_parent()
        path = parent / name
        path.mkdir()
        cg = cls(path, version, limit)
        if limit:
            if version == "v2":
                (path / "memory.max").write_text(str(limit))
                (path / "memory.swap.max").write_text("0")
            else:
                (path / "memory.limit_in_bytes").write_text(str(limit))
                try:  # memory+swap no higher than memory: no swap (absent when swap accounting is off)
                    (path / "memory.memsw.limit_in_bytes").write_text(str(limit))
                except OSError:
                    pass
        return cg

    def _read(self, name: str) -> str:
        return (self.path / name).read_text()

    def current(self) -> int:
        n = int(self._read("memory.current" if self.version == "v2" else "memory.usage_in_bytes"))
        self.samples_peak = max(self.samples_peak, n)
        return n

    def peak(self) -> int:
        try:
            return max(self.samples_peak, int(self._read("memory.peak" if self.version == "v2" else "memory.max_usage_in_bytes")))
        except OSError:
            return self.samples_peak

    def oom_kills(self) -> int:
        text = self._read("memory.events" if self.version == "v2" else "memory.oom_control")
        m = re.search(r"^oom_kill (\d+)", text, re.M)
        return int(m.group(1)) if m else 0

    def stat(self, key_v2: str, key_v1: str) -> int:
        m = re.search(rf"^{key_v2 if self.version == 'v2' else key_v1} (\d+)", self._read("memory.stat"), re.M)
        return int(m.group(1)) if m else 0

    def file_cache(self) -> int:
        """Page cache charged here now (LMDB's file pages): reclaimable, unlike anonymous memory."""
        return self.stat("file", "cache")

    def anon(self) -> int:
        """Anonymous memory charged here now (Python heaps): what the kernel cannot evict without swap."""
        return self.stat("anon", "rss")

    def remove(self) -> None:
        # The processes are gone by now; a cgroup with none left is removed with rmdir.
        for _ in range(50):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.1)


def exec_in(cgroup: str, cmd: list[str]) -> None:
    """Join ``cgroup``, then become ``cmd``: everything it starts is in the cgroup from its first instruction."""
    Path(cgroup, "cgroup.procs").write_text(str(os.getpid()))
    os.execv(cmd[0], cmd)


# -- the cluster ---------------------------------------------------------------------


@dataclass
class Limited:
    """A running local cluster whose TaskManagers each run in their own memory cgroup."""

    url: str
    env: dict[str, str]
    data_dir: Path
    cgroups: list[MemoryCgroup] = field(default_factory=list)


@contextmanager
def limited_cluster(taskmanagers: int, limit: int, tag: str) -> Iterator[Limited]:
    from millstream.backend.cluster_launcher import LocalCluster, _Child
    from millstream.backend.settings import Settings

    cgroups: list[MemoryCgroup] = []
    with tempfile.TemporaryDirectory(prefix="millstream-ltm-") as tmp:
        settings = Settings(port=free_port(), data_dir=Path(tmp), redis_url=None, database_url=None)
        # The JobManager and Redis start as usual; the TaskManagers are started below, each wrapped.
        cluster = LocalCluster(settings, taskmanagers=0, slots=1, restart_taskmanagers=False)
        try:
            cluster.start()
            logs = Path(tmp).resolve() / "log"
            for i in range(taskmanagers):
                cg = MemoryCgroup.create(f"millstream-ltm-{os.getpid()}-{tag}-tm{i}", limit)
                cgroups.append(cg)
                tm = [sys.executable, "-m", "millstream.backend.cli", "taskmanager", "--slots", "1", "--log-file", str(logs / f"taskmanager-{i}.log")]
                child = _Child(f"taskmanager-{i}", [sys.executable, str(Path(__file__).resolve()), "--exec-in", str(cg.path), "--", *tm], logs / f"taskmanager-{i}.out")
                cluster.children.append(child)  # so that shutdown() stops it
                child.start(cluster.env)
            cluster.taskmanagers = taskmanagers  # what wait_ready waits for
            if not cluster.wait_ready():
                raise RuntimeError(f"the cluster did not start; see {tmp}/log")
            env = dict(cluster.env, MILLSTREAM_JOBMANAGER=f"http://127.0.0.1:{settings.port}")
            yield Limited(env["MILLSTREAM_JOBMANAGER"], env, Path(tmp), cgroups)
        finally:
            cluster.shutdown()
            for cg in cgroups:
                cg.remove()


# -- one run ---------------------------------------------------------------------------


@dataclass
class Outcome:
    line: str  # the job's result line, or why it failed
    seconds: float
    completed: int = 0
    failed: int = 0
    restarts: int = 0
    last_state_size: int = 0
    peaks: list[int] = field(default_factory=list)
    oom_kills: list[int] = field(default_factory=list)
    file_cache_max: list[int] = field(default_factory=list)
    anon_max: list[int] = field(default_factory=list)
    lmdb_bytes_max: int = 0
    copies_bytes_max: int = 0


def _lmdb_bytes(data_dir: Path) -> tuple[int, int]:
    """Bytes on disk (allocated blocks) of the LMDB working copies under the cluster's state dir, and
    of the copies snapshots are read from (``<working copy>/snapshots/``, there while one is written)."""
    live = copies = 0
    for f in (data_dir / "state").rglob("data.mdb"):
        try:
            size = f.stat().st_blocks * 512
        except OSError:
            continue
        if "snapshots" in f.parts:
            copies += size
        else:
            live += size
    return live, copies


def run_job(c: Limited, keys: int, backend: str, interval_ms: int, timeout: float, stop_at_oom: bool = False) -> Outcome:
    """Runs the job with the CLI, sampling the cgroups and the checkpoint counts every second."""
    cmd = [sys.executable, "-m", "millstream.backend.cli", "run", str(JOB), str(keys), str(len(c.cgroups)), backend, str(interval_ms)]
    out = Outcome("", 0.0, file_cache_max=[0] * len(c.cgroups), anon_max=[0] * len(c.cgroups))
    http = httpx.Client(base_url=c.url, timeout=10)
    jid: str | None = None
    started = time.time()
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen(cmd, env=c.env, stdout=log, stderr=subprocess.STDOUT, text=True)
        why = ""
        while proc.poll() is None:
            for i, cg in enumerate(c.cgroups):
                cg.current()
                out.file_cache_max[i] = max(out.file_cache_max[i], cg.file_cache())
                out.anon_max[i] = max(out.anon_max[i], cg.anon())
            live, copies = _lmdb_bytes(c.data_dir)
            out.lmdb_bytes_max = max(out.lmdb_bytes_max, live)
            out.copies_bytes_max = max(out.copies_bytes_max, copies)
            try:
                if jid is None:
                    running = [j["jid"] for j in http.get("/jobs/overview").json()["jobs"] if j["state"] in ("RUNNING", "RESTARTING")]
                    jid = running[0] if running else None
                if jid is not None:
                    _checkpoints(http, jid, out)
            except (httpx.HTTPError, KeyError, ValueError):
                pass
            if stop_at_oom and any(cg.oom_kills() for cg in c.cgroups):
                why = "stopped at the first OOM kill"
            elif time.time() - started > timeout:
                why = f"stopped after {timeout:.0f} s"
            if why:
                proc.kill()
                if jid is not None:
                    try:  # cancel it, so that the cluster does not go on restarting it while it shuts down
                        http.patch(f"/jobs/{jid}", params={"mode": "cancel"})
                    except httpx.HTTPError:
                        pass
                break
            time.sleep(1.0)
        proc.wait()
        out.seconds = time.time() - started
        log.seek(0)
        text = log.read()
    m = re.search(r"Job (\w+)", text)
    jid = jid or (m.group(1) if m else None)
    if jid is not None:
        try:
            _checkpoints(http, jid, out)
        except (httpx.HTTPError, KeyError, ValueError):
            pass
    http.close()
    lines = [ln for ln in text.splitlines() if ln.startswith("larger-than-memory ")]
    if lines and proc.returncode == 0:
        out.line = lines[-1]
    else:
        tail = [ln for ln in text.strip().splitlines() if ln.strip()][-1:]
        out.line = f"failed ({why or f'exit {proc.returncode}'}): {tail}"
    out.peaks = [cg.peak() for cg in c.cgroups]
    out.oom_kills = [cg.oom_kills() for cg in c.cgroups]
    return out


def _checkpoints(http: httpx.Client, jid: str, out: Outcome) -> None:
    stats = http.get(f"/jobs/{jid}/checkpoints").json()
    out.completed, out.failed = stats["counts"]["completed"], stats["counts"]["failed"]
    latest = (stats.get("latest") or {}).get("completed")
    if latest:
        out.last_state_size = latest["state_size"]
    for m in http.get(f"/jobs/{jid}/metrics", params={"get": "numRestarts"}).json():
        if m.get("id") == "numRestarts":
            out.restarts = max(out.restarts, int(float(m["value"])))


def describe(o: Outcome, limit: int) -> str:
    lim = f"{limit / MB:.0f} MiB" if limit else "no limit"
    return (
        f"{o.line}; wall {o.seconds:.0f} s; checkpoints completed {o.completed}, failed {o.failed}; "
        f"cgroup limit {lim} per TaskManager, peak {', '.join(f'{p / MB:.0f}' for p in o.peaks)} MiB "
        f"(sampled each second: page cache at most {', '.join(f'{p / MB:.0f}' for p in o.file_cache_max)} MiB, "
        f"anonymous at most {', '.join(f'{p / MB:.0f}' for p in o.anon_max)} MiB), "
        f"oom_kill {', '.join(map(str, o.oom_kills))}; LMDB files {o.lmdb_bytes_max / MB:.0f} MiB on disk "
        f"(at most, and at most {o.copies_bytes_max / MB:.0f} MiB of copies that snapshots were read from); "
        f"last completed checkpoint {o.last_state_size / MB:.0f} MiB; job restarts {o.restarts}"
    )


def main() -> None:
    if len(sys.argv) > 3 and sys.argv[1] == "--exec-in":
        exec_in(sys.argv[2], sys.argv[sys.argv.index("--") + 1:])
    for line in measure(parser().parse_args()):
        print(line, flush=True)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=20_000_000, help="distinct keys of the on-disk run (the issue: 20,000,000)")
    ap.add_argument("--limit-mb", type=int, default=512, help="memory limit of each TaskManager's process tree")
    ap.add_argument("--taskmanagers", type=int, default=2, help="TaskManagers x 1 slot; the job's parallelism")
    ap.add_argument("--interval-ms", type=int, default=10_000, help="checkpoint interval")
    ap.add_argument("--disk-backend", default="rocksdb", help="rocksdb (full checkpoints) or rocksdb-incremental")
    ap.add_argument("--disk-without-checkpoints", action="store_true", help="also run the on-disk backend under the limit without checkpoints")
    ap.add_argument("--timeout", type=float, default=3600, help="give the on-disk run up to this long")
    ap.add_argument("--heap-keys", type=int, default=0, help="keys of the heap run under the limit (0: as --keys)")
    ap.add_argument("--heap-timeout", type=float, default=600, help="stop the heap run after this long")
    ap.add_argument("--calibrate-keys", type=int, default=1_000_000, help="keys of the unlimited heap run that measures bytes per key")
    ap.add_argument("--skip-calibration", action="store_true")
    ap.add_argument("--skip-disk", action="store_true")
    ap.add_argument("--skip-heap", action="store_true")
    return ap


def measure(args: argparse.Namespace) -> Iterator[str]:
    limit = args.limit_mb * MB
    tms = args.taskmanagers
    yield f"machine: {machine()}"
    if not args.skip_calibration:
        peaks, cps = {}, 0
        with limited_cluster(tms, 0, "cal") as c:
            for k in (1_000, args.calibrate_keys):
                for cg in c.cgroups:  # v1 max_usage can be reset; the sampled peak is per run
                    cg.samples_peak = 0
                    if cg.version == "v1":
                        (cg.path / "memory.max_usage_in_bytes").write_text("0")
                o = run_job(c, k, "hashmap", args.interval_ms, args.timeout)
                peaks[k] = max(o.peaks)
                cps = o.completed
                yield f"calibration, heap backend, {k:,} keys, no limit: " + describe(o, 0)
        per_key = (peaks[args.calibrate_keys] - peaks[1_000]) / (args.calibrate_keys / tms)
        need = peaks[1_000] + per_key * args.keys / tms
        yield (
            f"heap backend: {per_key:.0f} bytes per key at peak (a TaskManager's tree; {cps} checkpoints completed in that run, "
            "so a forked snapshot's copy-on-write growth is " + ("in it" if cps else "not in it") + "); "
            f"{args.keys:,} keys on {tms} TaskManagers would need about {need / MB:,.0f} MiB each, against a limit of {args.limit_mb} MiB"
        )
    if not args.skip_disk:
        intervals = [args.interval_ms] + ([0] if args.disk_without_checkpoints else [])
        for interval in intervals:
            with limited_cluster(tms, limit, "disk") as c:
                # An OOM kill fails the target: stop there rather than watch the job restart.
                o = run_job(c, args.keys, args.disk_backend, interval, args.timeout, stop_at_oom=True)
                every = f"checkpoints every {interval} ms" if interval else "no checkpoints"
                yield f"on-disk backend (LMDB, {args.disk_backend}), {args.keys:,} keys, {every}: " + describe(o, limit)
    if not args.skip_heap:
        keys = args.heap_keys or args.keys
        with limited_cluster(tms, limit, "heap") as c:
            o = run_job(c, keys, "hashmap", args.interval_ms, args.heap_timeout, stop_at_oom=True)
            yield f"heap backend, {keys:,} keys, checkpoints every {args.interval_ms} ms, same limit: " + describe(o, limit)


if __name__ == "__main__":
    main()
