"""Record what real PyFlink prints for each conformance program, as the suite's fixtures.

    python tests/conformance/record_pyflink.py [--venv DIR] [--missing] [NAME ...]
    python tests/conformance/record_pyflink.py --examples [--cluster]
    python tests/conformance/record_pyflink.py --flink-tests --tests-dir DIR [--cluster] [--only TEXT ...]

Installs apache-flink==2.3.0 into a virtualenv of its own (default var/pyflink-venv; ``--venv
/tmp/pyflink`` reuses one), finds a Java 17, runs each program under real PyFlink (at most two at a
time: each starts a JVM) and writes tests/conformance/fixtures/<name>.out with PyFlink/Beam noise
lines removed. When PyFlink itself fails on a program it writes <name>.status and <name>.err instead,
so the suite skips that program with the reason.

``--examples`` measures rather than records: it runs the DataStream examples shipped in the wheel
(those that need no Kafka, Pulsar, Elasticsearch or Table API) under PyFlink and under Millstream
in-process (and, with ``--cluster``, through ``millstream run`` on a local cluster) and prints a table.
``--flink-tests`` does the same for each test method of Apache Flink's test_data_stream.py and
test_window.py, made standalone programs at measure time (flink_tests.py). Both together also print
the total.
"""
from __future__ import annotations

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script from anywhere

from tests.conformance.harness import (  # noqa: E402
    FIXTURES,
    REPO,
    RunResult,
    run_command,
    clean_output,
    compare,
    program_paths,
    run_local,
    run_on_cluster,
)

PYFLINK_VERSION = "2.3.0"
DEFAULT_VENV = REPO / "var" / "pyflink-venv"
PARALLEL_JVMS = 2  # each PyFlink run starts a JVM and a Python worker: more would thrash 2 cores
# Wheel examples that need an external service or the Table API.
EXAMPLE_SKIP = ("connectors", "asyncio", "streaming_word_count")


def java_version(java: Path) -> str | None:
    try:
        out = subprocess.run([str(java), "-version"], capture_output=True, text=True, timeout=30).stderr
    except (OSError, subprocess.TimeoutExpired):
        return None
    first = out.splitlines()[0] if out else ""
    return first.split('"')[1] if first.count('"') >= 2 else None


def find_java17() -> Path:
    """JAVA_HOME of a Java 17: $JAVA_HOME if it is one, else the usual install places."""
    candidates = []
    if os.environ.get("JAVA_HOME"):
        candidates.append(os.environ["JAVA_HOME"])
    candidates += sorted(glob.glob("/usr/lib/jvm/*17*")) + sorted(glob.glob("/usr/lib/jvm/*"))
    candidates += sorted(glob.glob("/opt/java/*")) + sorted(glob.glob("/opt/*jdk*"))
    on_path = shutil.which("java")
    if on_path:
        candidates.append(str(Path(on_path).resolve().parent.parent))
    for home in candidates:
        v = java_version(Path(home) / "bin" / "java")
        if v and (v == "17" or v.startswith("17.")):
            return Path(home)
    raise SystemExit(
        "Java 17 is missing: PyFlink 2.3.0 runs on a JVM. Install a JDK 17 "
        "(e.g. apt-get install openjdk-17-jdk-headless) or point JAVA_HOME at one."
    )


def ensure_venv(venv: Path) -> Path:
    """The venv's python, with apache-flink==2.3.0 installed (installing it if needed)."""
    python = venv / "bin" / "python"
    check = [str(python), "-c", "import importlib.metadata as m; print(m.version('apache-flink'))"]
    if python.exists():
        got = subprocess.run(check, capture_output=True, text=True).stdout.strip()
        if got == PYFLINK_VERSION:
            return python
        print(f"{venv} has apache-flink {got or 'missing'}; installing {PYFLINK_VERSION}", file=sys.stderr)
    else:
        print(f"creating {venv} with apache-flink=={PYFLINK_VERSION} (a few minutes)", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", f"apache-flink=={PYFLINK_VERSION}"], check=True)
    return python


def pyflink_env(venv: Path, java_home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(
        JAVA_HOME=str(java_home),
        PATH=f"{venv / 'bin'}:{java_home / 'bin'}:{env.get('PATH', '')}",
        PYTHONUNBUFFERED="1",
    )
    return env


def run_pyflink(python: Path, env: dict[str, str], program: Path, timeout: float = 300) -> RunResult:
    """Run a copy of the program from an empty directory, so nothing of this repository (such as
    Millstream's ``pyflink`` alias) is importable."""
    with tempfile.TemporaryDirectory(prefix="pyflink-run-") as tmp:
        copy = Path(tmp) / program.name
        shutil.copy(program, copy)
        return run_command([str(python), str(copy)], env, Path(tmp), timeout)


def record(python: Path, env: dict[str, str], program: Path, timeout: float) -> str:
    r = run_pyflink(python, env, program, timeout)
    name = program.stem
    paths = {ext: FIXTURES / f"{name}.{ext}" for ext in ("out", "err", "status")}
    for p in paths.values():
        p.unlink(missing_ok=True)
    failed = r.failure()
    if r.returncode is None:
        # On a loaded machine a slow run is not proof PyFlink cannot run the program: record nothing,
        # so --missing tries it again.
        return f"{name}: timed out after {timeout:.0f} s, not recorded (retry with a longer --timeout)"
    if failed:
        paths["status"].write_text(f"PyFlink exit status {r.returncode}\n")
        err = clean_output(r.stderr)
        paths["err"].write_text("\n".join(err[-60:]) + "\n")
        return f"{name}: PyFlink FAILED ({failed})"
    lines = clean_output(r.stdout)
    paths["out"].write_text("".join(ln + "\n" for ln in lines))
    return f"{name}: {len(lines)} lines"


def recorded(program: Path) -> bool:
    return any((FIXTURES / f"{program.stem}.{ext}").exists() for ext in ("out", "status"))


def record_programs(python: Path, env: dict[str, str], names: list[str], missing_only: bool, timeout: float) -> None:
    FIXTURES.mkdir(parents=True, exist_ok=True)
    programs = program_paths(names)
    if missing_only:
        # x_* programs belong to other engineers: recorded only when named
        programs = [p for p in programs if (names or not p.stem.startswith("x_")) and not recorded(p)]
    with ThreadPoolExecutor(PARALLEL_JVMS) as pool:
        for line in pool.map(lambda p: record(python, env, p, timeout), programs):
            print(line, flush=True)


def millstream_python() -> str:
    return str(REPO / ".venv" / "bin" / "python") if (REPO / ".venv").exists() else sys.executable


def example_programs(python: Path) -> list[Path]:
    site = subprocess.run(
        [str(python), "-c", "import pyflink, os; print(os.path.dirname(pyflink.__file__))"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()
    root = Path(site) / "examples" / "datastream"
    found = []
    for p in sorted(root.rglob("*.py")):
        rel = p.relative_to(root).as_posix()
        if p.name == "__init__.py" or any(s in rel for s in EXAMPLE_SKIP) or "pyflink.table" in p.read_text():
            continue
        found.append(p)
    return found


def compare_examples(python: Path, env: dict[str, str], with_cluster: bool) -> dict[str, int]:
    examples = example_programs(python)
    with tempfile.TemporaryDirectory(prefix="examples-") as tmp:
        copies = []
        for p in examples:  # copies: each example runs from a directory holding only itself
            d = Path(tmp) / p.parent.name / p.stem
            d.mkdir(parents=True)
            copies.append(Path(shutil.copy(p, d / p.name)))
        with ThreadPoolExecutor(PARALLEL_JVMS) as pool:
            flink = list(pool.map(lambda p: run_pyflink(python, env, p), copies))
        local = [run_local(p, python=millstream_python()) for p in copies]
        on_cluster: list[RunResult | None] = [None] * len(copies)
        if with_cluster:
            on_cluster = run_examples_on_cluster(copies, millstream_python())
    print(f"{'example':45} {'PyFlink':12} {'in-process':28} {'cluster':28}")
    same = {"local": 0, "cluster": 0}
    for p, f, loc, clu in zip(examples, flink, local, on_cluster):
        rel = p.relative_to(p.parents[1] if p.parent.name != "datastream" else p.parent).as_posix()
        if f.failure():
            print(f"{rel:45} {'fails':12} {'-':28} {'-':28}")
            continue
        cells = []
        for mode, r in (("local", loc), ("cluster", clu)):
            if r is None:
                cells.append("not run")
                continue
            why = r.failure() or compare(f.lines(), r.lines(), ordered=False)
            same[mode] += why is None
            cells.append("same" if why is None else ("fails" if r.failure() else "differs"))
        print(f"{rel:45} {str(len(f.lines())) + ' lines':12} {cells[0]:28} {cells[1]:28}")
    print(f"\n{len(examples)} examples; same output as PyFlink: in-process {same['local']}"
          + (f", on a cluster {same['cluster']}" if with_cluster else ""))
    return {"programs": len(examples), **same}


def run_examples_on_cluster(programs: list[Path], python: str) -> list[RunResult | None]:
    from tests.integration.cluster import Cluster  # needs Millstream's dependencies: run with .venv/bin/python

    with tempfile.TemporaryDirectory(prefix="examples-cluster-") as work:
        cluster = Cluster(Path(work)).start(taskmanagers=2, slots=2)
        try:
            return [run_on_cluster(p, cluster.env, python=python) for p in programs]
        finally:
            cluster.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help="programs to record (default: all)")
    ap.add_argument("--venv", type=Path, default=DEFAULT_VENV, help="virtualenv holding apache-flink 2.3.0")
    ap.add_argument("--missing", action="store_true", help="record only programs that have no fixture yet")
    ap.add_argument("--timeout", type=float, default=300, help="seconds before a PyFlink run counts as hung")
    ap.add_argument("--examples", action="store_true", help="compare the wheel's DataStream examples instead")
    ap.add_argument("--cluster", action="store_true", help="with --examples/--flink-tests: also run on a local cluster")
    ap.add_argument("--flink-tests", action="store_true",
                    help="compare Apache Flink's test_data_stream.py and test_window.py test methods instead")
    ap.add_argument("--tests-dir", type=Path, help="with --flink-tests: directory holding those two modules")
    ap.add_argument("--only", nargs="*", default=[], help="with --flink-tests: programs whose name contains one of these")
    args = ap.parse_args()
    java_home = find_java17()
    python = ensure_venv(args.venv.resolve())
    env = pyflink_env(args.venv.resolve(), java_home)
    if args.examples or args.flink_tests:
        totals = compare_examples(python, env, args.cluster) if args.examples else None
        if args.flink_tests:
            from tests.conformance.flink_tests import IDENTICAL, measure

            counts = measure(python, lambda p: run_pyflink(python, env, p), PARALLEL_JVMS, millstream_python(),
                             args.tests_dir, args.cluster, args.only)
            if totals:
                n = totals["programs"] + sum(counts["local"].values())
                print(f"\nexamples + test methods: {n} programs; identical to PyFlink in-process "
                      f"{totals['local'] + counts['local'][IDENTICAL]}"
                      + (f", on a cluster {totals['cluster'] + counts['cluster'][IDENTICAL]}" if args.cluster else ""))
    else:
        record_programs(python, env, args.names, args.missing, args.timeout)


if __name__ == "__main__":
    main()
