"""Counts for the README: how many conformance programs Millstream runs exactly as PyFlink does.

    .venv/bin/python tests/conformance/report.py [--no-cluster] [--suggest] [NAME ...]

Runs every program with a fixture in-process and (unless --no-cluster) through `millstream run` on
a local cluster, then prints: programs, those real PyFlink cannot run, passing in-process, passing
on the cluster, and the known failures grouped by reason. It also names entries of
known_failures.txt that have gone stale (the program passes now) and failures missing from it;
--suggest prints ready-to-paste lines for the latter.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.conformance.harness import (  # noqa: E402
    LazyRuns,
    load_fixture,
    load_known_failures,
    program_paths,
    run_local,
    run_on_cluster,
    verdict,
)


def run_mode(mode: str, programs: list[Path], workers: int, env: dict[str, str] | None = None) -> dict[str, str | None]:
    runner = LazyRuns(run_local if mode == "local" else (lambda p: run_on_cluster(p, env or {})), workers)
    runner.start(programs)
    try:
        return {p.stem: verdict(load_fixture(p.stem), p, runner.get(p)) for p in programs}
    finally:
        runner.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*")
    ap.add_argument("--no-cluster", action="store_true", help="in-process runs only")
    ap.add_argument("--suggest", action="store_true", help="print known_failures.txt lines for new failures")
    args = ap.parse_args()

    all_programs = program_paths(args.names)
    fixtures = {p.stem: load_fixture(p.stem) for p in all_programs}
    unrecorded = [p.stem for p in all_programs if not fixtures[p.stem].recorded]
    pyflink_fails = [p.stem for p in all_programs if fixtures[p.stem].pyflink_failure]
    runnable = [p for p in all_programs if fixtures[p.stem].lines is not None]

    results = {"local": run_mode("local", runnable, 3)}
    if not args.no_cluster:
        from tests.integration.cluster import Cluster  # needs Millstream's dependencies

        with tempfile.TemporaryDirectory(prefix="conformance-report-") as work:
            cluster = Cluster(Path(work)).start(taskmanagers=2, slots=2)
            try:
                results["cluster"] = run_mode("cluster", runnable, 3, cluster.env)
            finally:
                cluster.stop()

    known = load_known_failures()
    print(f"programs: {len(all_programs)} ({len(runnable)} with a PyFlink fixture, "
          f"{len(pyflink_fails)} real PyFlink cannot run, {len(unrecorded)} not recorded yet)")
    for mode, verdicts in results.items():
        passing = sum(v is None for v in verdicts.values())
        print(f"passing {'in-process' if mode == 'local' else 'on a cluster'}: {passing}/{len(runnable)}")
    reasons = Counter(reason for (name, _mode), reason in known.items() if name in fixtures)
    print("known failures by reason (program x mode):")
    for reason, n in reasons.most_common():
        print(f"  {n:3}  {reason}")

    stale, missing = [], []
    for mode, verdicts in results.items():
        for name, why in verdicts.items():
            if why is None and (name, mode) in known:
                stale.append(f"{name}@{mode}")
            elif why is not None and (name, mode) not in known:
                missing.append((name, mode, why))
    if stale:
        print("passing now, remove from known_failures.txt:", " ".join(stale))
    if missing:
        print("failing but not in known_failures.txt:")
        for name, mode, why in missing:
            print(f"  {name}@{mode}: {why}")
        if args.suggest:
            print("\n# suggested lines (edit the reasons into causes)")
            modes_of: dict[str, list[tuple[str, str]]] = {}
            for name, mode, why in missing:
                modes_of.setdefault(name, []).append((mode, why.splitlines()[0][:150]))
            for name, failures in modes_of.items():
                if len(failures) == len(results):  # fails in every mode run: one line for both
                    print(f"{name}  {failures[0][1]}")
                else:
                    for mode, why in failures:
                        print(f"{name}@{mode}  {why}")


if __name__ == "__main__":
    main()
