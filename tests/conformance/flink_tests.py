"""Measure Apache Flink's own PyFlink DataStream tests on Millstream: ``record_pyflink.py --flink-tests``.

Each test method of ``test_data_stream.py`` and ``test_window.py`` becomes a standalone program
(flink_test_programs.py), written to a temporary directory at measure time (upstream code is never
committed here). Each runs under real PyFlink (its output cached under var/flink-tests-cache, keyed by
the program text, since it never changes) and under Millstream in-process and, with ``--cluster``, through
``millstream run`` on a 2-TaskManager local cluster. The table says per program: identical, PyFlink
varies (PyFlink's own runs of the program print different outputs, and Millstream's is one of them or
differs from them only in ``N>`` prefixes), differs only in print form (same records once ``N>``
prefixes, quotes, brackets and Row/kind markers are ignored), differs, fails on PyFlink, fails on
Millstream, or excluded (Table API, external service, Java gateway), with the first difference or
error. A program whose output is not identical to PyFlink's first run gets PYFLINK_RUNS runs of
PyFlink in all (each cached), so a difference PyFlink makes from one run to the next is told apart
from one Millstream makes.

The apache-flink 2.3.0 wheel and sdist do not ship ``pyflink/datastream/tests``; ``--tests-dir``
points at a directory holding the two modules (from Apache Flink's flink-python/pyflink/datastream/tests).
"""
from __future__ import annotations

import hashlib
import json
import re
import subprocess
import tempfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from tests.conformance.flink_test_programs import FlinkTestProgram, extract_programs, parse_test_bases
from tests.conformance.harness import REPO, RunResult, compare, run_local, run_on_cluster

TEST_MODULES = ("test_data_stream", "test_window")
CACHE = REPO / "var" / "flink-tests-cache"
PYFLINK_TAG = "apache-flink 2.3.0"
PYFLINK_RUNS = 5  # PyFlink runs of a program whose output is not identical to the first run's: a rebalance
# from a parallelism-1 source starts at one of two channels at random, so 5 runs all agree by chance 1 time in 16
IDENTICAL, VARIES, PRINT_FORM, DIFFERS, FAILS_PYFLINK, FAILS_OURS, EXCLUDED = (
    "identical", "PyFlink varies", "print form", "differs", "fails on PyFlink", "fails on Millstream", "excluded")
CATEGORIES = (IDENTICAL, VARIES, PRINT_FORM, DIFFERS, FAILS_OURS, FAILS_PYFLINK, EXCLUDED)

_PREFIX = re.compile(r"^\d+>\s?")
_MARKERS = re.compile(r"[+-][IUD]\[|Row\(|Decimal\(|\b\w+=|[\s'\"()\[\]<>{}]")


def print_form_key(line: str) -> str:
    """A line with what only the print form decides taken out: the subtask prefix, quotes,
    brackets, spaces, Row/RowKind/Decimal markers and field names."""
    return _MARKERS.sub("", _PREFIX.sub("", line))


@dataclass(frozen=True)
class Verdict:
    category: str
    detail: str = ""


def _without_prefixes(lines: list[str]) -> Counter:
    return Counter(_PREFIX.sub("", x) for x in lines)


def classify(flink: RunResult | list[RunResult], ours: RunResult) -> Verdict:
    """How Millstream's run of a program compares with PyFlink's: ``flink`` is PyFlink's run, or
    its runs (the first decides unless they disagree among themselves, see pyflink_variation)."""
    runs = flink if isinstance(flink, list) else [flink]
    failed = runs[0].failure()
    if failed:
        return Verdict(FAILS_PYFLINK, failed)
    failed = ours.failure()
    if failed:
        return Verdict(FAILS_OURS, failed)
    why = compare(runs[0].lines(), ours.lines(), ordered=False)
    if why is None:
        return Verdict(IDENTICAL)
    varied = pyflink_variation(runs, ours)
    if varied:
        return varied
    if _without_prefixes(runs[0].lines()) == _without_prefixes(ours.lines()):
        return Verdict(PRINT_FORM, "only the subtask prefixes differ: " + why)
    if Counter(map(print_form_key, runs[0].lines())) == Counter(map(print_form_key, ours.lines())):
        return Verdict(PRINT_FORM, why)
    return Verdict(DIFFERS, why)


def pyflink_variation(runs: list[RunResult], ours: RunResult) -> Verdict | None:
    """VARIES, with the evidence, when PyFlink's own runs of a program printed different outputs and
    Millstream's output is one of them or has the same records as all of them under other ``N>``
    prefixes (which subtask gets a record after a rebalance from a parallelism-1 source depends on
    the random channel Flink's RebalancePartitioner starts at). None otherwise."""
    outputs = [Counter(r.lines()) for r in runs if not r.failure()]
    distinct: list[Counter] = []
    for out in outputs:
        if out not in distinct:
            distinct.append(out)
    if len(distinct) < 2:
        return None
    mine = Counter(ours.lines())
    matched = [i + 1 for i, out in enumerate(outputs) if out == mine]
    same_records = all(_without_prefixes(list(out.elements())) == _without_prefixes(ours.lines()) for out in outputs)
    if not matched and not same_records:
        return None
    a = sorted((distinct[0] - distinct[1]).elements())
    b = sorted((distinct[1] - distinct[0]).elements())
    example = f"one run printed {a[:2]!r}, another {b[:2]!r}" if a and b else "their line counts differ"
    ours_said = (f"Millstream's output is that of PyFlink run {', '.join(map(str, matched))}" if matched
                 else "Millstream's has the same records under other subtask prefixes")
    return Verdict(VARIES, f"PyFlink's own output varies here: {len(outputs)} PyFlink runs printed "
                           f"{len(distinct)} different outputs ({example}); {ours_said}")


def pyflink_site(python: Path) -> Path:
    out = subprocess.run([str(python), "-c", "import pyflink, os; print(os.path.dirname(pyflink.__file__))"],
                         capture_output=True, text=True, check=True).stdout.strip()
    return Path(out)


def load_programs(python: Path, tests_dir: Path | None) -> list[FlinkTestProgram]:
    site = pyflink_site(python)
    directory = tests_dir or site / "datastream" / "tests"
    missing = [m for m in TEST_MODULES if not (directory / f"{m}.py").exists()]
    if missing:
        raise SystemExit(
            f"{directory} lacks {', '.join(m + '.py' for m in missing)}: the apache-flink wheel and sdist do not "
            "ship pyflink/datastream/tests. Put test_data_stream.py and test_window.py from Apache Flink's "
            "flink-python/pyflink/datastream/tests in a directory and pass it with --tests-dir."
        )
    bases = parse_test_bases((site / "testing" / "test_case_utils.py").read_text())
    programs: list[FlinkTestProgram] = []
    for module in TEST_MODULES:
        programs += extract_programs((directory / f"{module}.py").read_text(), module, bases)
    return programs


def cached_run(program: Path, run: Callable[[Path], RunResult], tag: str) -> RunResult:
    """PyFlink's result for a program, from the cache when this exact text ran before."""
    key = hashlib.sha256((tag + "\0" + program.read_text()).encode()).hexdigest()[:32]
    entry = CACHE / f"{key}.json"
    if entry.exists():
        d = json.loads(entry.read_text())
        return RunResult(d["returncode"], d["stdout"], d["stderr"])
    r = run(program)
    if r.returncode is not None:  # a timeout on a loaded machine proves nothing: do not keep it
        CACHE.mkdir(parents=True, exist_ok=True)
        entry.write_text(json.dumps({"returncode": r.returncode, "stdout": r.stdout, "stderr": r.stderr}))
    return r


def pyflink_runs(paths: list[Path], first: list[RunResult], ours: list[list[RunResult | None]],
                 run_pyflink: Callable[[Path], RunResult], workers: int) -> list[list[RunResult]]:
    """PyFlink's runs of each program: its first run, and PYFLINK_RUNS - 1 more (cached like the
    first) for each program where some Millstream run in ``ours`` (one list per mode) is not
    identical to it, so classify can tell whether PyFlink itself prints the same every time."""
    def reproduced(i: int) -> bool:
        return all(r is None or classify(first[i], r).category in (IDENTICAL, FAILS_OURS, FAILS_PYFLINK)
                   for r in (mode[i] for mode in ours))

    todo = [(i, k) for i in range(len(paths)) if not reproduced(i) for k in range(2, PYFLINK_RUNS + 1)]
    with ThreadPoolExecutor(workers) as pool:
        extra = list(pool.map(lambda ik: cached_run(paths[ik[0]], run_pyflink, f"{PYFLINK_TAG} run {ik[1]}"), todo))
    runs = [[r] for r in first]
    for (i, _), r in zip(todo, extra):
        runs[i].append(r)
    return runs


def measure(python: Path, run_pyflink: Callable[[Path], RunResult], pyflink_workers: int,
            millstream_python: str, tests_dir: Path | None, with_cluster: bool, only: list[str]) -> dict[str, Counter]:
    programs = load_programs(python, tests_dir)
    if only:
        programs = [p for p in programs if any(o in p.name for o in only)]
    runnable = [p for p in programs if p.source is not None]
    with tempfile.TemporaryDirectory(prefix="flink-tests-") as tmp:
        paths = []
        for p in runnable:  # each in a directory of its own, as a user would keep a program
            d = Path(tmp) / p.name
            d.mkdir()
            path = d / f"{p.method}.py"
            path.write_text(p.source or "")
            paths.append(path)
        with ThreadPoolExecutor(pyflink_workers) as pool:
            first = list(pool.map(lambda q: cached_run(q, run_pyflink, PYFLINK_TAG), paths))
        with ThreadPoolExecutor(2) as pool:
            local = list(pool.map(lambda q: run_local(q, timeout=120, python=millstream_python), paths))
        on_cluster: list[RunResult | None] = [None] * len(paths)
        if with_cluster:
            on_cluster = _run_on_cluster(paths, millstream_python)
        flink = pyflink_runs(paths, first, [local, on_cluster], run_pyflink, pyflink_workers)
    results = {p.name: (f, loc, clu) for p, f, loc, clu in zip(runnable, flink, local, on_cluster)}
    return _report(programs, results, with_cluster)


def _run_on_cluster(paths: list[Path], python: str) -> list[RunResult | None]:
    from tests.integration.cluster import Cluster  # needs Millstream's dependencies: run with .venv/bin/python

    with tempfile.TemporaryDirectory(prefix="flink-tests-cluster-") as work:
        cluster = Cluster(Path(work)).start(taskmanagers=2, slots=2)
        try:
            with ThreadPoolExecutor(2) as pool:
                return list(pool.map(lambda q: run_on_cluster(q, cluster.env, python=python), paths))
        finally:
            cluster.stop()


def _report(programs: list[FlinkTestProgram], results: dict, with_cluster: bool) -> dict[str, Counter]:
    counts = {"local": Counter(), "cluster": Counter()}
    print(f"{'program':76} {'in-process':20} {'cluster':20} first difference or error")
    for p in programs:
        if p.source is None:
            for mode in counts:
                counts[mode][EXCLUDED] += 1
            print(f"{p.name:76} {'excluded':20} {'excluded':20} {p.excluded}")
            continue
        flink, loc, clu = results[p.name]
        cells, details = [], []
        for mode, r in (("local", loc), ("cluster", clu)):
            if r is None:
                cells.append("not run")
                continue
            v = classify(flink, r)
            counts[mode][v.category] += 1
            cells.append(v.category)
            if v.detail and v.detail not in details:
                details.append(v.detail)
        print(f"{p.name:76} {cells[0]:20} {cells[1]:20} {' | '.join(d[:400] for d in details)}")
    print(f"\n{len(programs)} test methods of {', '.join(m + '.py' for m in TEST_MODULES)}:")
    for mode in ("local", "cluster") if with_cluster else ("local",):
        c = counts[mode]
        print(f"  {'in-process' if mode == 'local' else 'on a 2-TaskManager cluster'}: "
              + ", ".join(f"{c[k]} {k}" for k in CATEGORIES))
    return counts
