"""Flink's JSONGenerator: ``env.get_execution_plan()`` as the StreamGraph JSON Flink prints.

One node per operator (before chaining), each with ``id``, ``type`` (the
operator's name), ``pact`` (Data Source / Operator / Data Sink), ``contents``
(its description), ``parallelism`` and, except for sources, ``predecessors``
(``id``, ``ship_strategy``, ``side``). The order is Flink's: operators by id,
sinks last. Like PyFlink, consecutive Python functions that would chain are
shown fused into one node ("Map, Filter") with a fresh id. The REST
``/jobs/{id}/plan`` shape (chained vertices) is ``JobGraph.to_plan``.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from millstream.engine.graph.job_graph import display_name
from millstream.engine.graph.stream_graph import StreamEdge, StreamGraph
from millstream.engine.graph.transformations import ChainingStrategy, OperatorKind, ShipStrategy


def _pact(kind: OperatorKind) -> str:
    if kind is OperatorKind.SOURCE:
        return "Data Source"
    if kind is OperatorKind.SINK:
        return "Data Sink"
    return "Operator"


# PyFlink fuses consecutive Python functions into one operator before the plan is printed; these
# kinds are the ones it fuses (stateless, one input).
_FUSABLE = (OperatorKind.MAP, OperatorKind.FLAT_MAP, OperatorKind.FILTER, OperatorKind.PROCESS, OperatorKind.ASYNC_WAIT)
# Python operators that head a fused run without joining one as its downstream (measured: a window
# followed by a map shows as "GlobalWindows, Map", described as the window).
_FUSABLE_HEADS = _FUSABLE + (OperatorKind.WINDOW,)


def _python(graph: StreamGraph, node_id: int) -> bool:
    """Whether PyFlink runs the operator as a Python function (only those fuse)."""
    if graph.nodes[node_id].name == REMOVE_TIMESTAMP_NAME:
        return False  # a Java map
    t = graph.transformations.get(node_id)
    return not getattr(getattr(t, "function", None), "java_operator", False)


def _fused_chains(graph: StreamGraph, chaining: bool) -> list[list[int]]:
    """Runs of fusable operators joined by a FORWARD edge at equal parallelism, each link being the
    upstream's only output and the downstream's only input (PyFlink's Python operator chaining)."""
    if not chaining:
        return []

    def link(up: int) -> int | None:
        outs = graph.out_edges(up)
        if len(outs) != 1:
            return None
        e = outs[0]
        down = graph.nodes[e.target]
        ok = (
            _python(graph, up) and _python(graph, e.target)
            and e.ship_strategy is ShipStrategy.FORWARD
            and e.output_tag is None
            and down.kind in _FUSABLE
            and len(graph.in_edges(e.target)) == 1
            and down.parallelism == graph.nodes[up].parallelism
            and down.chaining is ChainingStrategy.ALWAYS
            and graph.nodes[up].chaining is not ChainingStrategy.NEVER
        )
        return e.target if ok else None

    chains, seen = [], set()
    for node_id in sorted(graph.nodes):
        if node_id in seen or graph.nodes[node_id].kind not in _FUSABLE_HEADS:
            continue
        ins = graph.in_edges(node_id)
        if len(ins) == 1 and ins[0].source in graph.nodes and graph.nodes[ins[0].source].kind in _FUSABLE and link(ins[0].source) == node_id:
            continue  # not the head of its run
        chain = [node_id]
        while (nxt := link(chain[-1])) is not None:
            chain.append(nxt)
        seen.update(chain)
        if len(chain) > 1:
            chains.append(chain)
    return chains


EXTRACT_TIMESTAMP_NAME = "Extract-Timestamp"  # the Python process function PyFlink adds for an assigner
REMOVE_TIMESTAMP_NAME = "Remove-Timestamp"  # the Java map that drops the timestamp it added


def _with_timestamp_assigners(graph: StreamGraph) -> StreamGraph:
    """The graph as PyFlink's plan has it: ``assign_timestamps_and_watermarks`` with a Python
    TimestampAssigner is a Python process function that pairs each record with its timestamp, Java's
    Timestamps/Watermarks operator at that function's parallelism, and a Java map that unpairs them,
    each FORWARD to the next, under the ids the API reserved for them."""
    nodes, edges, key_by_ids = dict(graph.nodes), list(graph.edges), dict(graph.key_by_plan_ids)
    for node_id in sorted(graph.nodes):
        t = graph.transformations.get(node_id)
        if t is None or t.kind is not OperatorKind.TIMESTAMPS or "plan_extract_id" not in t.params:
            continue
        extract_id, remove_id = t.params["plan_extract_id"], t.params["plan_remove_id"]
        if extract_id in nodes or remove_id in nodes:
            continue  # ids taken (cannot happen through the API): show the one operator
        node = graph.nodes[node_id]
        nodes[extract_id] = replace(node, id=extract_id, kind=OperatorKind.PROCESS, name=EXTRACT_TIMESTAMP_NAME,
                                    uid=None, operator_id=f"{node.operator_id}-extract", chaining=ChainingStrategy.ALWAYS)
        nodes[remove_id] = replace(node, id=remove_id, kind=OperatorKind.MAP, name=REMOVE_TIMESTAMP_NAME,
                                   uid=None, operator_id=f"{node.operator_id}-remove", chaining=ChainingStrategy.ALWAYS)
        edges = [
            replace(e, target=extract_id) if e.target == node_id
            else replace(e, source=remove_id) if e.source == node_id
            else e
            for e in edges
        ]
        edges += [StreamEdge(extract_id, node_id, ShipStrategy.FORWARD, 0, None),
                  StreamEdge(node_id, remove_id, ShipStrategy.FORWARD, 0, None)]
        # a key_by of the stamped stream reads from the map now
        key_by_ids = {(remove_id if src == node_id else src, dst, i): v for (src, dst, i), v in key_by_ids.items()}
    return replace(graph, nodes=nodes, edges=edges, key_by_plan_ids=key_by_ids)


KEY_BY_MAP_NAME = "_stream_key_by_map_operator"  # PythonConfigUtil.STREAM_KEY_BY_MAP_OPERATOR_NAME


def _with_key_by_maps(graph: StreamGraph, fresh: int) -> tuple[StreamGraph, int, int]:
    """The graph as PyFlink's plan has it: ``key_by`` adds a Python map (Row(key, value)) at its
    input's parallelism, forwarded from the input, before the HASH edge; one per key_by call (the
    consumers of one KeyedStream share it). Also returns how many it added."""
    nodes, edges = dict(graph.nodes), []
    maps: dict[tuple[int, str | None, int], int] = {}  # (input, output tag, id of the selector) -> map node
    for e in graph.edges:
        if e.ship_strategy is not ShipStrategy.HASH:
            edges.append(e)
            continue
        selector = graph.key_selector_for(e.target, e.input_index)
        group = (e.source, e.output_tag, id(selector))
        if group not in maps:
            up = graph.nodes[e.source]
            map_id = graph.key_by_plan_ids.get((e.source, e.target, e.input_index))
            if map_id is None or map_id in nodes:
                map_id, fresh = fresh, fresh + 1
            maps[group] = map_id
            nodes[map_id] = replace(
                up, id=map_id, kind=OperatorKind.MAP, name=KEY_BY_MAP_NAME, uid=None,
                operator_id=f"{up.operator_id}-key-by", chaining=ChainingStrategy.ALWAYS,
            )
            edges.append(StreamEdge(e.source, map_id, ShipStrategy.FORWARD, 0, e.output_tag))
        edges.append(replace(e, source=maps[group], output_tag=None))
    return replace(graph, nodes=nodes, edges=edges), fresh, len(maps)


PRINT_CONVERSION_NAME = "Map"  # the map DataStream._align_output_type adds


def converts_to_string(type_info: Any) -> bool:
    """print() of these records goes through a Python map that makes each a string first: untyped
    (pickled) records and Rows. Typed records reach the Java print sink as they are."""
    if type_info is None:
        return True
    name = type(type_info).__name__
    if name == "ExternalTypeInfo":
        return True
    return name in ("PickledBytesTypeInfo", "RowTypeInfo")


def _with_print_conversions(graph: StreamGraph, fresh: int) -> tuple[StreamGraph, int]:
    """The graph as PyFlink's plan has it: a print sink of untyped records or Rows reads from a
    Python map (at the sink's parallelism, FORWARD) that its input edges now feed."""
    nodes, edges = dict(graph.nodes), list(graph.edges)
    for node_id in sorted(graph.nodes):
        t = graph.transformations.get(node_id)
        if t is None or t.kind is not OperatorKind.SINK or t.params.get("sink") != "print":
            continue
        if not converts_to_string(t.params.get("type_info")):
            continue
        sink = graph.nodes[node_id]
        map_id = t.params.get("plan_map_id")
        if map_id is None or map_id in nodes:
            map_id, fresh = fresh, fresh + 1
        nodes[map_id] = replace(sink, id=map_id, kind=OperatorKind.MAP, name=PRINT_CONVERSION_NAME, uid=None,
                                operator_id=f"{sink.operator_id}-print-map", chaining=ChainingStrategy.ALWAYS)
        edges = [replace(e, target=map_id) if e.target == node_id else e for e in edges]
        edges.append(StreamEdge(map_id, node_id, ShipStrategy.FORWARD, 0, None))
    return replace(graph, nodes=nodes, edges=edges), fresh


def _plan_name(graph: StreamGraph, node_id: int) -> str:
    """The node's name in the plan: a window operator's is its assigner's."""
    params = getattr(graph.transformations.get(node_id), "params", None) or {}
    return params.get("plan_name", display_name(graph.nodes[node_id]))


def stream_graph_json(graph: StreamGraph, chaining: bool = True, next_id: int | None = None) -> dict[str, Any]:
    """``next_id``: the id PyFlink would give the first fused operator (its next transformation id)."""
    fresh = next_id if next_id is not None else max(graph.nodes, default=0) + 1
    graph = _with_timestamp_assigners(graph)
    graph, fresh, key_bys = _with_key_by_maps(graph, fresh)
    graph, fresh = _with_print_conversions(graph, fresh)
    # PyFlink 2.3 takes one more transformation id per key_by while it builds the plan, before the
    # fused operators get theirs (measured: 1 for one key_by with one or two consumers or a window,
    # 2 for two connected key_bys), so fused ids start that much later.
    fresh += key_bys
    renamed: dict[int, int] = {}  # fused member -> fused node id
    fused: dict[int, tuple[str, list[int]]] = {}
    # PyFlink fuses a run pair by pair (its optimizer walks the transformations in creation order and
    # fuses each one with its input), each pair taking a new id: a run of k operators shows under the
    # id its last pair got, k - 1 ids after the ids taken before it.
    chains = _fused_chains(graph, chaining)
    pair_ids = {down: i for i, down in enumerate(sorted(n for c in chains for n in c[1:]), start=fresh)}
    for chain in chains:
        fused_id = pair_ids[chain[-1]]
        fused[fused_id] = (", ".join(_plan_name(graph, n) for n in chain), chain)
        renamed.update({n: fused_id for n in chain})
    ids = [i for i in graph.nodes if i not in renamed] + list(fused)
    kind_of = {i: graph.nodes[i].kind for i in graph.nodes if i not in renamed}
    kind_of.update({f: OperatorKind.MAP for f in fused})
    order = sorted(ids, key=lambda i: (kind_of[i] is OperatorKind.SINK, i))
    nodes = []
    for node_id in order:
        if node_id in fused:
            name, chain = fused[node_id]
            head, tail = graph.nodes[chain[0]], chain[0]
            parallelism, kind, inputs = head.parallelism, OperatorKind.MAP, graph.in_edges(tail)
            head_params = getattr(graph.transformations.get(tail), "params", None) or {}
            contents = head_params.get("plan_description", name)  # a window head keeps its description
        else:
            node = graph.nodes[node_id]
            name, parallelism, kind, inputs = display_name(node), node.parallelism, node.kind, graph.in_edges(node_id)
            params = getattr(graph.transformations.get(node_id), "params", None) or {}
            # A window operator: PyFlink names it by its assigner and describes it in full.
            name, contents = params.get("plan_name", name), params.get("plan_description", name)
        entry: dict[str, Any] = {
            "id": node_id,
            "type": name,
            "pact": _pact(kind),
            "contents": contents,
            "parallelism": parallelism,
        }
        if kind is not OperatorKind.SOURCE:
            # Flink writes "second" for every input (its generator checks the size after adding).
            entry["predecessors"] = [
                {"id": renamed.get(e.source, e.source), "ship_strategy": e.ship_strategy.value, "side": "second"}
                for e in sorted(inputs, key=lambda e: e.input_index)
            ]
        nodes.append(entry)
    return {"nodes": nodes}


def jackson_pretty(value: Any, indent: int = 0) -> str:
    """JSON as Jackson's default pretty printer writes it (``"id" : 1``, arrays as ``[ {...}, {...} ]``),
    so a program that prints its plan prints what PyFlink's does."""
    import json

    pad = " " * indent
    if isinstance(value, dict):
        if not value:
            return "{ }"
        inner = " " * (indent + 2)
        items = [f"{inner}{json.dumps(str(k))} : {jackson_pretty(v, indent + 2)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(value, (list, tuple)):
        if not value:
            return "[ ]"
        return "[ " + ", ".join(jackson_pretty(v, indent) for v in value) + " ]"
    return json.dumps(value)


def execution_plan(graph: StreamGraph, chaining: bool = True, next_id: int | None = None) -> str:
    return jackson_pretty(stream_graph_json(graph, chaining, next_id))
