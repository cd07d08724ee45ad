"""ExecutionGraph: expansion of a JobGraph into subtasks and attempts, and their states."""
from __future__ import annotations

import pytest

from millstream.engine.datastream import StreamExecutionEnvironment
from millstream.engine.datastream.connectors import NumberSequenceSource
from millstream.engine.executiongraph.execution_graph import (
    Execution,
    ExecutionGraph,
    ExecutionJobVertex,
    ExecutionVertex,
    now_ms,
)
from millstream.engine.executiongraph.states import ExecutionState, JobStatus

T = ExecutionState


def _job_graph():
    env = StreamExecutionEnvironment().set_parallelism(2)
    env.from_source(NumberSequenceSource(1, 100)).map(str).key_by(len).reduce(lambda a, b: a).set_parallelism(3).print()
    jg, _ = env.get_job_graph("eg")
    return jg


def _vertex_with(states: list[ExecutionState]) -> ExecutionJobVertex:
    jv = _job_graph().vertices[0]
    subtasks = []
    for i, s in enumerate(states):
        ev = ExecutionVertex(jv.id, i)
        ev.new_attempt(0).state = s
        subtasks.append(ev)
    return ExecutionJobVertex(jv, subtasks)


def test_expansion_creates_one_subtask_per_parallel_instance_with_attempt_zero():
    jg = _job_graph()
    eg = ExecutionGraph.from_job_graph(jg, at_ms=1000)
    assert list(eg.vertices) == [v.id for v in jg.vertices]
    assert [len(ejv.subtasks) for ejv in eg.vertices.values()] == [2, 3, 2]
    assert eg.total_subtasks() == 7
    for ejv in eg.vertices.values():
        assert [ev.subtask for ev in ejv.subtasks] == list(range(ejv.job_vertex.parallelism))
        for ev in ejv.subtasks:
            assert ev.job_vertex_id == ejv.job_vertex.id
            assert len(ev.executions) == 1
            assert ev.current.attempt == 0
            assert ev.current.state is T.CREATED
            assert ev.current.timestamps == {"CREATED": 1000}
    assert eg.status is JobStatus.CREATED
    assert eg.timestamps == {"CREATED": 1000}
    assert eg.attempt == 0
    assert eg.task_counts()["CREATED"] == 7
    assert sum(eg.task_counts().values()) == 7


def test_execution_transition_applies_legal_moves_and_records_the_first_time():
    e = Execution(attempt=0)
    assert e.transition(T.SCHEDULED, 10)
    assert e.transition(T.DEPLOYING, 20)
    assert e.transition(T.DEPLOYING, 25)  # a repeat is accepted and changes nothing
    assert e.state is T.DEPLOYING
    assert e.timestamps == {"SCHEDULED": 10, "DEPLOYING": 20}


def test_execution_transition_refuses_illegal_moves_without_change():
    e = Execution(attempt=0)
    for s, t in [(T.SCHEDULED, 1), (T.DEPLOYING, 2), (T.RUNNING, 3), (T.FINISHED, 4)]:
        assert e.transition(s, t)
    assert not e.transition(T.RUNNING, 5)
    assert not e.transition(T.FAILED, 6)
    assert e.state is T.FINISHED
    assert "FAILED" not in e.timestamps
    assert not Execution(attempt=0).transition(T.FINISHED, 1)


def test_job_transition_on_the_graph_refuses_to_leave_a_terminal_state():
    eg = ExecutionGraph.from_job_graph(_job_graph(), 0)
    assert eg.transition(JobStatus.RUNNING, 5)
    assert eg.transition(JobStatus.FINISHED, 9)
    assert not eg.transition(JobStatus.RUNNING, 10)
    assert eg.status is JobStatus.FINISHED
    assert eg.timestamps == {"CREATED": 0, "RUNNING": 5, "FINISHED": 9}


def test_job_restart_cycle_records_the_latest_time_per_status():
    eg = ExecutionGraph.from_job_graph(_job_graph(), 0)
    for status, at in [(JobStatus.RUNNING, 1), (JobStatus.FAILING, 2), (JobStatus.RESTARTING, 3), (JobStatus.RUNNING, 4)]:
        assert eg.transition(status, at)
    assert eg.status is JobStatus.RUNNING
    assert eg.timestamps["RUNNING"] == 4


def test_running_to_created_is_refused():
    eg = ExecutionGraph.from_job_graph(_job_graph(), 0)
    eg.transition(JobStatus.RUNNING, 5)
    assert not eg.transition(JobStatus.CREATED, 6)
    assert eg.status is JobStatus.RUNNING


def test_reset_for_restart_adds_a_fresh_attempt_everywhere_and_keeps_history():
    eg = ExecutionGraph.from_job_graph(_job_graph(), 0)
    for _, ev in eg.all_executions():
        ev.current.transition(T.RUNNING, 10)
    _, failed = eg.all_executions()[0]
    failed.current.transition(T.FAILED, 20)

    eg.reset_for_restart(30)
    assert eg.attempt == 1
    for _, ev in eg.all_executions():
        assert [e.attempt for e in ev.executions] == [0, 1]
        assert ev.current.state is T.CREATED
        assert ev.current.timestamps == {"CREATED": 30}
    assert failed.executions[0].state is T.FAILED  # the old attempt is history, untouched
    assert eg.all_in(T.CREATED)

    eg.reset_for_restart(40)
    assert eg.attempt == 2
    assert all(ev.current.attempt == 2 for _, ev in eg.all_executions())


def test_all_in_and_task_counts_follow_current_attempts():
    eg = ExecutionGraph.from_job_graph(_job_graph(), 0)
    assert eg.all_in(T.CREATED)
    pairs = eg.all_executions()
    pairs[0][1].current.transition(T.RUNNING, 1)
    assert not eg.all_in(T.CREATED)
    assert eg.all_in(T.CREATED, T.RUNNING)
    counts = eg.task_counts()
    assert counts["RUNNING"] == 1 and counts["CREATED"] == 6


@pytest.mark.parametrize(
    ("states", "expected"),
    [
        ([T.CREATED, T.CREATED], T.CREATED),
        ([T.RUNNING, T.RUNNING], T.RUNNING),
        ([T.FINISHED, T.FINISHED], T.FINISHED),
        ([T.RUNNING, T.FINISHED], T.RUNNING),
        ([T.RUNNING, T.FAILED, T.CANCELING], T.FAILED),
        ([T.RUNNING, T.CANCELING, T.CANCELED], T.CANCELING),
        ([T.FINISHED, T.CANCELED], T.CANCELED),
        ([T.CREATED, T.SCHEDULED], T.SCHEDULED),
        ([T.SCHEDULED, T.DEPLOYING], T.DEPLOYING),
    ],
)
def test_aggregate_state(states, expected):
    assert _vertex_with(states).aggregate_state() is expected


def test_aggregate_state_initializing_beats_running():
    assert _vertex_with([T.RUNNING, T.INITIALIZING]).aggregate_state() is T.INITIALIZING


def test_state_counts_cover_every_state():
    ejv = _vertex_with([T.RUNNING, T.RUNNING, T.FAILED])
    counts = ejv.state_counts()
    assert set(counts) == {s.value for s in T}
    assert counts["RUNNING"] == 2 and counts["FAILED"] == 1 and sum(counts.values()) == 3


def test_now_ms_uses_the_given_clock():
    assert now_ms(lambda: 12.3456) == 12345
