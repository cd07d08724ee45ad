"""Record what real PyFlink prints for each conformance program, as the suite's fixtures.

    python tests/conformance/record_pyflink.py [--venv DIR] [--missing] [NAME ...]
    python tests/conformance/record_pyflink.py --examples [--cluster [-p N]]
    python tests/conformance/record_pyflink.py --flink-tests --tests-dir DIR [--cluster] [--only TEXT ...]

Installs apache-flink==2.3.0 into a virtualenv of its own (default var/pyflink-venv; ``--venv
/tmp/pyflink`` reuses one), finds a Java 17, runs each program under real PyFlink (at most two at a
time: each starts a JVM) and writes tests/conformance/fixtures/<name>.out with PyFlink/Beam noise
lines removed. When PyFlink itself fails on a program it writes <name>.status and <name>.err instead,
so the suite skips that program with the reason.

``--examples`` measures rather than records: it runs the DataStream examples shipped in the wheel
(those that need no Kafka, Pulsar, Elasticsearch or Table API) under PyFlink and under Millstream
in-process (and, with ``--cluster``, through ``millstream run`` on a local cluster, and with ``-p N``
through ``millstream run -p N`` too) and prints a table. PyFlink's runs are cached as
flink_tests.py caches them, and repeated where Millstream's output differs, to tell PyFlink's own
run-to-run variation from Millstream's differences.
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


def compare_examples(python: Path, env: dict[str, str], with_cluster: bool, parallelism: int | None) -> dict[str, int]:
    """Run the wheel's DataStream examples under PyFlink (cached like the test methods, and run again
    where Millstream's output differs, to see whether PyFlink's own varies) and under Millstream
    in-process and, with ``with_cluster``, through ``millstream run`` (and ``millstream run -p
    parallelism`` when given); print a table; return how many each mode got identical."""
    from tests.conformance.flink_tests import IDENTICAL, PYFLINK_TAG, cached_run, classify, pyflink_runs

    examples = example_programs(python)

    def run(program: Path) -> RunResult:
        return run_pyflink(python, env, program)

    with tempfile.TemporaryDirectory(prefix="examples-") as tmp:
        copies = []
        for p in examples:  # copies: each example runs from a directory holding only itself
            d = Path(tmp) / p.parent.name / p.stem
            d.mkdir(parents=True)
            copies.append(Path(shutil.copy(p, d / p.name)))
        with ThreadPoolExecutor(PARALLEL_JVMS) as pool:
            first = list(pool.map(lambda p: cached_run(p, run, PYFLINK_TAG), copies))
        ours: dict[str, list[RunResult]] = {"in-process": [run_local(p, python=millstream_python()) for p in copies]}
        if with_cluster:
            ours.update(run_examples_on_cluster(copies, millstream_python(), parallelism))
        flink = pyflink_runs(copies, first, list(ours.values()), run, PARALLEL_JVMS)
    print(f"{'example':45} {'PyFlink':12} " + " ".join(f"{m:16}" for m in ours))
    same = dict.fromkeys(ours, 0)
    details = []
    for p, f, *mine in zip(examples, flink, *ours.values()):
        rel = p.relative_to(p.parents[1] if p.parent.name != "datastream" else p.parent).as_posix()
        if f[0].failure():
            print(f"{rel:45} {'fails':12} " + " ".join(f"{'-':16}" for _ in ours))
            continue
        cells = []
        for mode, r in zip(ours, mine):
            v = classify(f, r)
            same[mode] += v.category == IDENTICAL
            cells.append(v.category)
            if v.detail:
                details.append(f"{rel} ({mode}): {v.detail[:300]}")
        print(f"{rel:45} {str(len(f[0].lines())) + ' lines':12} " + " ".join(f"{c:16}" for c in cells))
    print("".join("\n  " + d for d in details))
    print(f"\n{len(examples)} examples; same output as PyFlink: " + ", ".join(f"{m} {n}" for m, n in same.items()))
    return {"programs": len(examples), **same}


def run_examples_on_cluster(programs: list[Path], python: str, parallelism: int | None) -> dict[str, list[RunResult]]:
    """``millstream run`` of each program on a fresh 2-TaskManager cluster, at the cluster's default
    parallelism and, when ``parallelism`` is given, again with ``-p parallelism``."""
    from tests.integration.cluster import Cluster  # needs Millstream's dependencies: run with .venv/bin/python

    modes = {"cluster": []} | ({f"cluster -p {parallelism}": ["-p", str(parallelism)]} if parallelism else {})
    with tempfile.TemporaryDirectory(prefix="examples-cluster-") as work:
        cluster = Cluster(Path(work)).start(taskmanagers=2, slots=2)
        try:
            return {mode: [run_on_cluster(p, cluster.env, python=python, args=args) for p in programs]
                    for mode, args in modes.items()}
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
    ap.add_argument("--parallelism", "-p", type=int, metavar="N",
                    help="with --examples --cluster: also run each example with `millstream run -p N` "
                         "(PyFlink's local runs use one subtask per core)")
    ap.add_argument("--flink-tests", action="store_true",
                    help="compare Apache Flink's test_data_stream.py and test_window.py test methods instead")
    ap.add_argument("--tests-dir", type=Path, help="with --flink-tests: directory holding those two modules")
    ap.add_argument("--only", nargs="*", default=[], help="with --flink-tests: programs whose name contains one of these")
    args = ap.parse_args()
    java_home = find_java17()
    python = ensure_venv(args.venv.resolve())
    env = pyflink_env(args.venv.resolve(), java_home)
    if args.examples or args.flink_tests:
        totals = compare_examples(python, env, args.cluster, args.parallelism) if args.examples else None
        if args.flink_tests:
            from tests.conformance.flink_tests import IDENTICAL, measure

            counts = measure(python, lambda p: run_pyflink(python, env, p), PARALLEL_JVMS, millstream_python(),
                             args.tests_dir, args.cluster, args.only)
            if totals:
                n = totals["programs"] + sum(counts["local"].values())
                print(f"\nexamples + test methods: {n} programs; identical to PyFlink in-process "
                      f"{totals['in-process'] + counts['local'][IDENTICAL]}"
                      + (f", on a cluster {totals['cluster'] + counts['cluster'][IDENTICAL]}" if args.cluster else ""))
    else:
        record_programs(python, env, args.names, args.missing, args.timeout)


if __name__ == "__main__":
    main()
