"""JobGraph validation: everything a submitted JobGraph must satisfy before the cluster creates anything for it.

A JobGraph reaches the Dispatcher as client-written JSON (``POST /jobs``), so
nothing in it can be trusted: field types, vertex ids, edges, ship strategies
and the checkpoint config are all checked here, as a pure function, and every
problem is reported in one ``InvalidJobGraph`` message. The submission path
calls this before any job record or slot request exists, so a bad graph is a
400 and never a stuck job.
"""
from __future__ import annotations

import re
from typing import Any, Mapping

from millstream.engine.checkpoint.config import BOOLEAN_STATE_OPTIONS, CheckpointConfig, InvalidCheckpointConfig
from millstream.engine.common.config_options import parse_boolean
from millstream.engine.graph.job_graph import JobGraph
from millstream.engine.graph.stream_graph import UPPER_MAX_PARALLELISM
from millstream.engine.graph.transformations import ShipStrategy

JOB_TYPES = ("STREAMING", "BATCH")
SHIP_STRATEGIES = frozenset(s.value for s in ShipStrategy)
_JOB_ID = re.compile(r"^[0-9a-f]{32}$")
MAX_VERTICES = 10_000  # far beyond any real job; keeps the checks below and the ExecutionGraph small
MAX_PROBLEMS_SHOWN = 10


class InvalidJobGraph(ValueError):
    """The JobGraph cannot run; the message lists what is wrong with it."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        shown = problems[:MAX_PROBLEMS_SHOWN]
        more = f" (and {len(problems) - len(shown)} more)" if len(problems) > len(shown) else ""
        super().__init__("invalid JobGraph: " + "; ".join(shown) + more)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _type_name(v: Any) -> str:
    return type(v).__name__


# -- shape of the raw JSON ---------------------------------------------------------------
_VERTEX_FIELDS: dict[str, tuple[type, ...]] = {
    "id": (str,),
    "name": (str,),
    "parallelism": (int,),
    "max_parallelism": (int,),
    "operators": (list, tuple),
    "chained_edges": (list, tuple),
    "is_source": (bool,),
    "bounded": (bool,),
}
_EDGE_FIELDS: dict[str, tuple[type, ...]] = {
    "index": (int,),
    "source_vertex": (str,),
    "target_vertex": (str,),
    "source_node": (int,),
    "target_node": (int,),
    "ship_strategy": (str,),
}
_OPERATOR_FIELDS: dict[str, tuple[type, ...]] = {
    "node_id": (int,),
    "operator_id": (str,),
    "name": (str,),
    "kind": (str,),
}


def _check_fields(where: str, d: Any, spec: Mapping[str, tuple[type, ...]], problems: list[str]) -> bool:
    if not isinstance(d, dict):
        problems.append(f"{where} must be an object, got {_type_name(d)}")
        return False
    ok = True
    for key, types in spec.items():
        if key not in d:
            problems.append(f"{where} lacks '{key}'")
            ok = False
        elif not isinstance(d[key], types) or (bool not in types and isinstance(d[key], bool)):
            want = " or ".join("array" if t in (list, tuple) else t.__name__ for t in types)
            problems.append(f"{where}.{key} must be {want}, got {d[key]!r:.60}")
            ok = False
    return ok


def _check_shape(d: Any) -> list[str]:
    """Types of every field ``JobGraph.from_dict`` reads, so building it cannot fail half-way."""
    problems: list[str] = []
    if not isinstance(d, dict):
        return [f"the JobGraph must be a JSON object, got {_type_name(d)}"]
    for key in ("job_id", "name"):
        if not isinstance(d.get(key), str):
            problems.append(f"'{key}' must be a string, got {d.get(key)!r:.60}")
    if not isinstance(d.get("config", {}), dict):
        problems.append("'config' must be an object")
    vertices, edges = d.get("vertices"), d.get("edges")
    if not isinstance(vertices, list):
        problems.append(f"'vertices' must be an array, got {vertices!r:.60}")
        vertices = []
    if not isinstance(edges, list):
        problems.append(f"'edges' must be an array, got {edges!r:.60}")
        edges = []
    if len(vertices) > MAX_VERTICES or len(edges) > MAX_VERTICES * 4:
        return problems + [f"the JobGraph has more than {MAX_VERTICES} vertices or {MAX_VERTICES * 4} edges"]
    for i, v in enumerate(vertices):
        if not _check_fields(f"vertices[{i}]", v, _VERTEX_FIELDS, problems):
            continue
        for j, op in enumerate(v["operators"]):
            _check_fields(f"vertices[{i}].operators[{j}]", op, _OPERATOR_FIELDS, problems)
            if isinstance(op, dict) and op.get("window") is not None and not isinstance(op["window"], dict):
                problems.append(f"vertices[{i}].operators[{j}].window must be an object or null")
        for j, ce in enumerate(v["chained_edges"]):
            if (
                not isinstance(ce, (list, tuple))
                or len(ce) != 3
                or not (_is_int(ce[0]) and _is_int(ce[1]))
                or not (ce[2] is None or isinstance(ce[2], str))
            ):
                problems.append(f"vertices[{i}].chained_edges[{j}] must be [source node, target node, tag or null]")
    for i, e in enumerate(edges):
        if _check_fields(f"edges[{i}]", e, _EDGE_FIELDS, problems):
            if not _is_int(e.get("input_index", 0)):
                problems.append(f"edges[{i}].input_index must be an integer")
            if e.get("output_tag") is not None and not isinstance(e["output_tag"], str):
                problems.append(f"edges[{i}].output_tag must be a string or null")
    return problems


def parse_job_graph(data: Any, max_parallelism: int = UPPER_MAX_PARALLELISM) -> JobGraph:
    """A JobGraph from decoded JSON, checked in shape and in meaning; raises InvalidJobGraph."""
    problems = _check_shape(data)
    if problems:
        raise InvalidJobGraph(problems)
    try:
        graph = JobGraph.from_dict(data)
    except (TypeError, ValueError, KeyError, AttributeError) as e:
        # unknown extra fields (e.g. a typo'd key) land here: the dataclasses refuse them
        raise InvalidJobGraph([f"malformed JobGraph: {e}"]) from None
    validate_job_graph(graph, max_parallelism)
    return graph


# -- meaning -----------------------------------------------------------------------------
def validate_job_graph(graph: JobGraph, max_parallelism: int = UPPER_MAX_PARALLELISM) -> None:
    """Raise InvalidJobGraph unless the graph is a runnable DAG within the cluster's limits."""
    problems: list[str] = []
    if not _JOB_ID.match(graph.job_id):
        problems.append("job id must be 32 lowercase hex characters")
    if graph.job_type not in JOB_TYPES:
        problems.append(f"job type must be one of {', '.join(JOB_TYPES)}, got {graph.job_type!r:.40}")
    if not graph.vertices:
        problems.append("the job has no operators")
    ids: set[str] = set()
    node_owner: dict[int, str] = {}
    for v in graph.vertices:
        problems += _vertex_problems(v, max_parallelism)
        if v.id in ids:
            problems.append(f"duplicate vertex id {v.id!r:.40}")
        ids.add(v.id)
        for op in v.operators:
            if op.node_id in node_owner:
                problems.append(f"operator node {op.node_id} appears in more than one place")
            node_owner[op.node_id] = v.id
    problems += _edge_problems(graph, ids, node_owner)
    if not problems:
        cycle = _find_cycle(graph)
        if cycle:
            problems.append("the graph has a cycle: " + " -> ".join(cycle))
    problems += [f"config option {key!r:.80} {why}" for key, why in _bad_config_text(graph.config)]
    problems += _restart_strategy_problems(graph.config.get("restart-strategy"))
    params = graph.config.get("pipeline.global-job-parameters")
    if params is not None and not isinstance(params, dict):
        problems.append("config option 'pipeline.global-job-parameters' must be an object")
    for key in BOOLEAN_STATE_OPTIONS:
        if key in graph.config:
            try:
                parse_boolean(graph.config[key])
            except ValueError as e:
                problems.append(f"config option {key!r}: {e}")
    try:
        CheckpointConfig.from_job_config(graph.config)
    except InvalidCheckpointConfig as e:
        problems.append(str(e))
    except (TypeError, ValueError, AttributeError) as e:
        problems.append(f"invalid checkpoint config: {e}")
    if problems:
        raise InvalidJobGraph(problems)


RESTART_STRATEGY_TYPES = ("none", "fixed-delay", "failure-rate", "fallback")
_RESTART_FIELDS = ("attempts", "delay_ms", "max_failures_per_interval", "failure_interval_ms")


def _restart_strategy_problems(raw: Any) -> list[str]:
    """The JobMaster builds its restart strategy from this when the job starts and compares its numbers
    on every failure: a wrong type there would fail the submission or, later, the failover."""
    if not raw:
        return []
    where = "config option 'restart-strategy'"
    if not isinstance(raw, dict):
        return [f"{where} must be an object, got {raw!r:.60}"]
    out = []
    if raw.get("type") not in RESTART_STRATEGY_TYPES:
        out.append(f"{where}: type must be one of {', '.join(RESTART_STRATEGY_TYPES)}, got {raw.get('type')!r:.40}")
    unknown = sorted(str(k) for k in set(raw) - {"type", *_RESTART_FIELDS})
    if unknown:
        out.append(f"{where}: unknown keys {', '.join(unknown)[:200]}")
    for key in _RESTART_FIELDS:
        value = raw.get(key, 0)
        if not _is_int(value) or value < 0:
            out.append(f"{where}: {key} must be a non-negative integer, got {value!r:.40}")
    return out


def text_problem(value: str) -> str | None:
    """Why a string cannot become a path or a command-line argument, or None: paths such as a savepoint
    directory come from config and reach the file system, which refuses NUL and lone surrogates."""
    if "\x00" in value:
        return "contains a NUL character"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "contains a lone surrogate (not valid Unicode text)"
    return None


def _bad_config_text(config: Mapping[str, Any], depth: int = 0) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for key, value in config.items():
        why = text_problem(key) if isinstance(key, str) else None
        if why is None and isinstance(value, str):
            why = text_problem(value)
        if why is not None:
            out.append((str(key), why))
        elif isinstance(value, dict) and depth < 3:
            out += _bad_config_text(value, depth + 1)
    return out


def _vertex_problems(v: Any, cluster_max: int) -> list[str]:
    out: list[str] = []
    name = f"'{v.name:.60}'"
    if not v.id:
        out.append(f"vertex {name} has an empty id")
    if not v.operators:
        out.append(f"vertex {name} has no operators")
    if not 1 <= v.max_parallelism <= UPPER_MAX_PARALLELISM:
        out.append(f"max parallelism of {name} must be between 1 and {UPPER_MAX_PARALLELISM}, got {v.max_parallelism}")
    if v.parallelism < 1:
        out.append(f"parallelism of {name} must be at least 1, got {v.parallelism}")
    elif v.parallelism > v.max_parallelism:
        out.append(f"parallelism {v.parallelism} of {name} exceeds its max parallelism {v.max_parallelism}")
    elif v.parallelism > cluster_max:
        out.append(f"parallelism {v.parallelism} of {name} exceeds the cluster limit {cluster_max} (max_parallelism)")
    members = {op.node_id for op in v.operators}
    for src, dst, _tag in v.chained_edges:
        if src not in members or dst not in members:
            out.append(f"a chained edge {src} -> {dst} of {name} leaves the vertex")
        elif src == dst:
            out.append(f"a chained edge of {name} loops on operator {src}")
    return out


def _edge_problems(graph: JobGraph, ids: set[str], node_owner: dict[int, str]) -> list[str]:
    out: list[str] = []
    for e in graph.edges:
        where = f"edge {e.index}"
        if e.ship_strategy not in SHIP_STRATEGIES:
            out.append(f"{where} has an unknown ship strategy {e.ship_strategy!r:.40} "
                       f"(one of {', '.join(sorted(SHIP_STRATEGIES))})")
        missing = [x for x in (e.source_vertex, e.target_vertex) if x not in ids]
        if missing:
            out.append(f"{where} refers to a vertex that does not exist: {missing[0]!r:.40}")
            continue
        if e.source_vertex == e.target_vertex:
            out.append(f"{where} is a self-loop on vertex {e.source_vertex!r:.40}")
        if node_owner.get(e.source_node) != e.source_vertex:
            out.append(f"{where}: operator {e.source_node} is not in its source vertex")
        target = graph.vertex(e.target_vertex)
        if target.operators and target.head_node != e.target_node:
            out.append(f"{where}: operator {e.target_node} is not the head of its target vertex")
        if e.input_index not in (0, 1):
            out.append(f"{where}: input index must be 0 or 1, got {e.input_index}")
        if target.is_source:
            out.append(f"{where} leads into source vertex {target.name!r:.60}")
    return out


def _find_cycle(graph: JobGraph) -> list[str] | None:
    """Vertex ids along one cycle, or None for a DAG (iterative DFS: deep graphs do not recurse)."""
    succ: dict[str, list[str]] = {v.id: [] for v in graph.vertices}
    for e in graph.edges:
        succ[e.source_vertex].append(e.target_vertex)
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    for start in succ:
        if start in state:
            continue
        path = [start]
        iters = [iter(succ[start])]
        state[start] = 1
        while iters:
            nxt = next(iters[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                iters.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            elif nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                iters.append(iter(succ[nxt]))
    return None
