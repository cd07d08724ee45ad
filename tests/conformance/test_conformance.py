"""PyFlink conformance: every program under programs/ must print what real PyFlink 2.3.0 printed
(fixtures/<name>.out, recorded by record_pyflink.py), run in-process (`python prog.py`) and on a
real cluster (`millstream run prog.py`).

Programs real PyFlink could not run are skipped with its error. Programs Millstream does not pass
yet are listed in known_failures.txt and xfail strictly, so a fix that makes one pass fails the
suite until its line is removed. Runs go through a small pool of subprocesses (and of concurrent
submissions to one cluster) so the module stays within a few minutes on two cores.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from tests.conformance.harness import (
    LazyRuns,
    RunResult,
    load_fixture,
    load_known_failures,
    program_paths,
    run_local,
    run_on_cluster,
    verdict,
)
from tests.integration.cluster import Cluster

LOCAL_WORKERS = 3  # program subprocesses at once: each is a short Python process
CLUSTER_SUBMISSIONS = 3  # concurrent `millstream run`s: the 4 slots take about two jobs at parallelism 2

KNOWN = load_known_failures()


def _cases(mode: str) -> list:
    cases = []
    for program in program_paths():
        fixture = load_fixture(program.stem)
        marks = []
        if fixture.pyflink_failure:
            marks.append(pytest.mark.skip(reason=f"real PyFlink cannot run it: {fixture.pyflink_failure}"))
        elif not fixture.recorded:
            marks.append(pytest.mark.skip(reason="no fixture yet: run tests/conformance/record_pyflink.py"))
        elif (program.stem, mode) in KNOWN:
            marks.append(pytest.mark.xfail(reason=KNOWN[(program.stem, mode)], strict=True))
        cases.append(pytest.param(program, id=program.stem, marks=marks))
    return cases


def _selected(request: pytest.FixtureRequest, test_name: str) -> list[Path]:
    """The programs this session will run through ``test_name`` (honours -k and skips), in order,
    so the pool can work ahead of the test that reports."""
    chosen = []
    for item in request.session.items:
        if getattr(item, "originalname", None) == test_name and item.get_closest_marker("skip") is None:
            chosen.append(item.callspec.params["program"])
    return chosen


@pytest.fixture(scope="module")
def local_runs(request: pytest.FixtureRequest) -> Iterator[LazyRuns]:
    if _selected(request, "test_on_cluster"):
        # Start the cluster and its submissions first: they wait on the cluster's processes much of
        # the time, so they overlap well with the in-process runs instead of following them.
        request.getfixturevalue("cluster_runs")
    runs = LazyRuns(run_local, LOCAL_WORKERS)
    runs.start(_selected(request, "test_in_process"))
    try:
        yield runs
    finally:
        runs.close()


@pytest.fixture(scope="module")
def cluster_runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LazyRuns]:
    cluster = Cluster(tmp_path_factory.mktemp("conformance-cluster")).start(taskmanagers=2, slots=2)
    runs = LazyRuns(lambda p: run_on_cluster(p, cluster.env), CLUSTER_SUBMISSIONS)
    try:
        runs.start(_selected(request, "test_on_cluster"))
        yield runs
    finally:
        runs.close()
        cluster.stop()


def _check(program: Path, result: RunResult) -> None:
    fixture = load_fixture(program.stem)
    why = verdict(fixture, program, result)
    if why is not None:
        stderr_tail = "\n".join(result.stderr.splitlines()[-30:])
        pytest.fail(f"{program.name} differs from real PyFlink: {why}\n--- stderr (tail)\n{stderr_tail}", pytrace=False)


@pytest.mark.parametrize("program", _cases("local"))
def test_in_process(program: Path, local_runs: LazyRuns) -> None:
    _check(program, local_runs.get(program))


@pytest.mark.parametrize("program", _cases("cluster"))
def test_on_cluster(program: Path, cluster_runs: LazyRuns) -> None:
    _check(program, cluster_runs.get(program))


def test_known_failures_name_runnable_programs() -> None:
    """Every line of known_failures.txt names a program that exists and has a PyFlink fixture, so
    the list cannot keep entries nothing checks any more."""
    names = {p.stem for p in program_paths()}
    for (name, mode), reason in KNOWN.items():
        assert name in names, f"known_failures.txt names {name!r}, which is not a program"
        assert load_fixture(name).lines is not None, f"known_failures.txt names {name!r}, which has no fixture to fail"
