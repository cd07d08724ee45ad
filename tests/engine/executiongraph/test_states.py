"""Job and task state machines: the one transition function per kind."""
from __future__ import annotations

import itertools

import pytest

from millstream.engine.executiongraph.states import (
    ExecutionState,
    IllegalTransition,
    JobStatus,
    job_transition,
    task_transition,
)

J = JobStatus
T = ExecutionState

# The job transitions this engine allows (self-transitions are no-ops and listed separately).
JOB_LEGAL = {
    (J.CREATED, J.RUNNING), (J.CREATED, J.CANCELLING), (J.CREATED, J.CANCELED), (J.CREATED, J.FAILED),
    (J.CREATED, J.FAILING), (J.CREATED, J.SUSPENDED),
    (J.RUNNING, J.FINISHED), (J.RUNNING, J.FAILING), (J.RUNNING, J.CANCELLING), (J.RUNNING, J.RESTARTING),
    (J.RUNNING, J.SUSPENDED),
    (J.FAILING, J.FAILED), (J.FAILING, J.RESTARTING), (J.FAILING, J.CANCELLING), (J.FAILING, J.SUSPENDED),
    (J.RESTARTING, J.CREATED), (J.RESTARTING, J.RUNNING), (J.RESTARTING, J.FAILED),
    (J.RESTARTING, J.CANCELLING), (J.RESTARTING, J.CANCELED), (J.RESTARTING, J.SUSPENDED),
    (J.CANCELLING, J.CANCELED), (J.CANCELLING, J.SUSPENDED),
    (J.SUSPENDED, J.CREATED), (J.SUSPENDED, J.RUNNING), (J.SUSPENDED, J.CANCELED), (J.SUSPENDED, J.FAILED),
    # Flink's RECONCILING (nothing moves a Millstream job there): it ends running, failing or cancelled.
    (J.RECONCILING, J.RUNNING), (J.RECONCILING, J.FAILING), (J.RECONCILING, J.FAILED),
    (J.RECONCILING, J.CANCELLING), (J.RECONCILING, J.SUSPENDED),
}

LIFECYCLE = [T.CREATED, T.SCHEDULED, T.DEPLOYING, T.INITIALIZING, T.RUNNING]


def _task_legal(cur: ExecutionState, tgt: ExecutionState) -> bool:
    """The task rules, stated independently of the implementation."""
    if cur.is_terminal():
        return False
    if tgt in LIFECYCLE:
        return cur in LIFECYCLE and LIFECYCLE.index(tgt) > LIFECYCLE.index(cur)
    if tgt is T.FINISHED:
        return cur in (T.DEPLOYING, T.INITIALIZING, T.RUNNING)
    return tgt in (T.CANCELING, T.CANCELED, T.FAILED)


def test_terminal_states():
    assert {s for s in J if s.is_terminal()} == {J.CANCELED, J.FINISHED, J.FAILED}
    assert {s for s in T if s.is_terminal()} == {T.FINISHED, T.CANCELED, T.FAILED}


def test_statuses_are_str_enums():
    assert J.RUNNING == "RUNNING" and T.INITIALIZING == "INITIALIZING"
    assert J("FAILING") is J.FAILING


@pytest.mark.parametrize(("cur", "tgt"), list(itertools.product(J, J)))
def test_every_job_transition(cur, tgt):
    if cur is tgt:
        assert job_transition(cur, tgt) is cur
    elif (cur, tgt) in JOB_LEGAL:
        assert job_transition(cur, tgt) is tgt
    else:
        with pytest.raises(IllegalTransition):
            job_transition(cur, tgt)


@pytest.mark.parametrize(("cur", "tgt"), list(itertools.product(T, T)))
def test_every_task_transition(cur, tgt):
    if cur is tgt:
        assert task_transition(cur, tgt) is cur
    elif _task_legal(cur, tgt):
        assert task_transition(cur, tgt) is tgt
    else:
        with pytest.raises(IllegalTransition):
            task_transition(cur, tgt)


@pytest.mark.parametrize("terminal", [s for s in J if s.is_terminal()])
def test_a_terminal_job_state_cannot_be_left(terminal):
    for tgt in J:
        if tgt is not terminal:
            with pytest.raises(IllegalTransition, match=terminal.value):
                job_transition(terminal, tgt)


@pytest.mark.parametrize("terminal", [s for s in T if s.is_terminal()])
def test_a_terminal_task_state_cannot_be_left(terminal):
    for tgt in T:
        if tgt is not terminal:
            with pytest.raises(IllegalTransition):
                task_transition(terminal, tgt)


def test_task_lifecycle_never_goes_backwards():
    for i, later in enumerate(LIFECYCLE):
        for earlier in LIFECYCLE[:i]:
            with pytest.raises(IllegalTransition):
                task_transition(later, earlier)


def test_canceling_cannot_resume_the_lifecycle():
    for tgt in LIFECYCLE:
        with pytest.raises(IllegalTransition):
            task_transition(T.CANCELING, tgt)


def test_a_task_may_skip_lifecycle_steps_forwards():
    assert task_transition(T.CREATED, T.RUNNING) is T.RUNNING
    assert task_transition(T.SCHEDULED, T.INITIALIZING) is T.INITIALIZING


def test_a_task_cannot_finish_before_it_is_deployed():
    for cur in (T.CREATED, T.SCHEDULED, T.CANCELING):
        with pytest.raises(IllegalTransition):
            task_transition(cur, T.FINISHED)


def _walk(transition, start, path):
    state = start
    for nxt in path:
        state = transition(state, nxt)
    return state


def test_typical_job_paths():
    assert _walk(job_transition, J.CREATED, [J.RUNNING, J.FINISHED]) is J.FINISHED
    assert _walk(job_transition, J.CREATED, [J.RUNNING, J.FAILING, J.RESTARTING, J.RUNNING, J.FINISHED]) is J.FINISHED
    assert _walk(job_transition, J.CREATED, [J.RUNNING, J.FAILING, J.FAILED]) is J.FAILED
    assert _walk(job_transition, J.CREATED, [J.RUNNING, J.CANCELLING, J.CANCELED]) is J.CANCELED


def test_every_live_job_state_can_still_reach_an_end():
    graph = {s: {t for (c, t) in JOB_LEGAL if c is s} for s in J}
    for start in J:
        if start.is_terminal():
            continue
        seen, todo = {start}, [start]
        while todo:
            for nxt in graph[todo.pop()] - seen:
                seen.add(nxt)
                todo.append(nxt)
        assert any(s.is_terminal() for s in seen), start
