"""Flink's JSONGenerator: ``env.get_execution_plan()`` as the StreamGraph JSON Flink prints.

One node per operator (before chaining), each with ``id``, ``type`` (the
operator's name), ``pact`` (Data Source / Operator / Data Sink), ``contents``
(its description), ``parallelism`` and, except for sources, ``predecessors``
(``id``, ``ship_strategy``, ``side``). The order is Flink's: operators by id,
sinks last. The REST ``/jobs/{id}/plan`` shape (chained vertices) is
``JobGraph.to_plan``.
"""
from __future__ import annotations

from typing import Any

from engine.graph.job_graph import display_name
from engine.graph.stream_graph import StreamGraph
from engine.graph.transformations import OperatorKind


def _pact(kind: OperatorKind) -> str:
    if kind is OperatorKind.SOURCE:
        return "Data Source"
    if kind is OperatorKind.SINK:
        return "Data Sink"
    return "Operator"


def stream_graph_json(graph: StreamGraph) -> dict[str, Any]:
    order = sorted(graph.nodes, key=lambda i: (graph.nodes[i].kind is OperatorKind.SINK, i))
    nodes = []
    for node_id in order:
        node = graph.nodes[node_id]
        name = display_name(node)
        entry: dict[str, Any] = {
            "id": node.id,
            "type": name,
            "pact": _pact(node.kind),
            "contents": name,
            "parallelism": node.parallelism,
        }
        if node.kind is not OperatorKind.SOURCE:
            # Flink writes "second" for every input (its generator checks the size after adding).
            entry["predecessors"] = [
                {"id": e.source, "ship_strategy": e.ship_strategy.value, "side": "second"}
                for e in sorted(graph.in_edges(node_id), key=lambda e: e.input_index)
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


def execution_plan(graph: StreamGraph) -> str:
    return jackson_pretty(stream_graph_json(graph))
