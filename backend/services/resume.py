"""Resume a job's program from one of its savepoints as a new job, optionally at a new
parallelism: the dashboard's "Resume from this savepoint", which rescales a job in two clicks.

The rewrite works on the stored JobGraph dict only. The program (a cloudpickled
StreamGraph) goes back to the Dispatcher as opaque bytes: the JobManager never
unpickles user code, and tasks take their parallelism from the JobGraph through
their deployment descriptors, so a rewritten JobGraph really runs at the new
parallelism.
"""
from __future__ import annotations

import copy
import uuid
from dataclasses import dataclass
from typing import Any

from millstream.engine.graph.job_graph import JobGraph
from millstream.engine.jobmanager.dispatcher import Dispatcher

# The old run's savepoint options; the Dispatcher sets the chosen savepoint's own.
SAVEPOINT_OPTIONS = ("execution.savepoint.path", "execution.savepoint.ignore-unclaimed-state")


class ResumeRefused(ValueError):
    """A resume that must not start; the message is for the user and says what to change."""


@dataclass(frozen=True)
class Rescaled:
    job_graph: dict[str, Any]
    parallelism: int | None  # the new default parallelism, None when unchanged
    kept: tuple[str, ...]  # vertices left at their own parallelism, by name


def rescale_job_graph(job_graph: dict[str, Any], parallelism: int | None, new_job_id: str) -> Rescaled:
    """The JobGraph dict under ``new_job_id``, with ``parallelism`` applied to the vertices that
    ran at the job's default parallelism.

    Left alone, as Flink leaves them: vertices with a parallelism of their own, and non-parallel
    sources (``fixed_parallelism``), since a non-parallel source run N times reads its input N
    times. A JobGraph stored before that flag existed does not say which sources are
    non-parallel, so there every source at parallelism 1 in a job whose default is 1 stays.
    Vertices joined by a FORWARD edge keep equal parallelism, so one kept vertex keeps its
    whole FORWARD group. Max parallelism never changes: restored key groups must match."""
    g = copy.deepcopy(job_graph)
    config = {k: v for k, v in (g.get("config") or {}).items() if k not in SAVEPOINT_OPTIONS}
    g["config"], g["job_id"] = config, new_job_id
    vertices: list[dict[str, Any]] = g["vertices"]
    if parallelism is None:
        return Rescaled(g, None, ())
    if parallelism < 1:
        raise ResumeRefused(f"Parallelism must be at least 1, not {parallelism}.")
    default = _default_parallelism(config, vertices)
    eligible = {
        v["id"] for v in vertices
        if v["parallelism"] == default and not is_fixed_parallelism(v)
    }
    groups = _forward_groups(vertices, g.get("edges", []))
    rescaled = {vid for vid in eligible if groups[vid] <= eligible}
    too_small = [v for v in vertices if v["id"] in rescaled and parallelism > v["max_parallelism"]]
    if too_small:
        v = min(too_small, key=lambda v: v["max_parallelism"])
        raise ResumeRefused(
            f"Parallelism {parallelism} is above the max parallelism {v['max_parallelism']} of '{v['name']}'. "
            f"Max parallelism stays with the job's state (keyed state is split into that many key groups), "
            f"so choose at most {v['max_parallelism']}."
        )
    for v in vertices:
        if v["id"] in rescaled:
            v["parallelism"] = parallelism
    config["parallelism.default"] = parallelism
    kept = tuple(v["name"] for v in vertices if v["id"] not in rescaled and v["parallelism"] != parallelism)
    return Rescaled(g, parallelism, kept)


def is_fixed_parallelism(v: dict[str, Any]) -> bool:
    """Whether a JobGraph vertex dict stays at its parallelism whatever the job's (a non-parallel source)."""
    if "fixed_parallelism" in v:
        return bool(v["fixed_parallelism"])
    return bool(v.get("is_source")) and v["parallelism"] == 1  # an older JobGraph: cannot tell


def _default_parallelism(config: dict[str, Any], vertices: list[dict[str, Any]]) -> int:
    value = config.get("parallelism.default")
    if isinstance(value, int) and value >= 1:
        return value
    return max(v["parallelism"] for v in vertices)  # a graph built without the option: the widest


def _forward_groups(vertices: list[dict[str, Any]], edges: list[dict[str, Any]]) -> dict[str, frozenset[str]]:
    """Each vertex's set of vertices reachable over FORWARD edges (either direction)."""
    parent = {v["id"]: v["id"] for v in vertices}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for e in edges:
        if e.get("ship_strategy") == "FORWARD":
            parent[find(e["source_vertex"])] = find(e["target_vertex"])
    members: dict[str, set[str]] = {}
    for vid in parent:
        members.setdefault(find(vid), set()).add(vid)
    return {vid: frozenset(members[find(vid)]) for vid in parent}


@dataclass(frozen=True)
class Resumed:
    job_id: str
    savepoint_path: str
    parallelism: int | None
    kept: tuple[str, ...]


def resume_from_savepoint(
    dispatcher: Dispatcher, jid: str, request_id: str, parallelism: int | None, allow_non_restored_state: bool
) -> Resumed:
    """Start job ``jid``'s program again as a new job from its savepoint ``request_id``.
    Raises ResumeRefused, or the Dispatcher's JobSubmissionError (a missing or corrupt savepoint,
    state no operator takes without ``allow_non_restored_state``); either way nothing starts."""
    savepoint = dispatcher.savepoint_status(jid, request_id)  # UnknownJob for an unknown job
    if savepoint is None:
        raise ResumeRefused(f"Job {jid} has no savepoint request {request_id}.")
    if savepoint.status != "COMPLETED" or not savepoint.path:
        state = savepoint.status.lower().replace("_", " ")
        raise ResumeRefused(f"Savepoint {request_id} is {state}: only a completed savepoint can be resumed.")
    record = dispatcher.store.get_job(jid)
    if record is None or not record.user_code:
        raise ResumeRefused(
            f"This cluster does not hold the program of job {jid}. Upload it on the Submit page and give "
            f"the savepoint path {savepoint.path} there."
        )
    plan = rescale_job_graph(record.job_graph, parallelism, uuid.uuid4().hex)
    new_id = dispatcher.submit(
        JobGraph.from_dict(plan.job_graph), record.user_code,
        savepoint_path=savepoint.path, allow_non_restored_state=allow_non_restored_state,
    )
    return Resumed(new_id, savepoint.path, plan.parallelism, plan.kept)
