"""Forward groups of a StreamGraph, and the parallelism Flink's adaptive batch scheduler gives a
vertex of a small bounded job.

Operators joined by FORWARD edges form a forward group and must share one parallelism (Flink's
ForwardGroup). In BATCH mode, Flink 2.x decides the parallelism of a group in which the user set
none (neither on an operator nor by a parallel source, which runs at the default) from the amount of
data it receives: 16 MiB per subtask by default, so the small inputs of tests and examples get one
subtask, and a print() sink there writes no ``<subtask>> `` prefix. Recorded from PyFlink 2.3.0:
``from_collection(...).map(f).print()`` prints ``0``, ``map(f).set_parallelism(2).print()`` prints
``1> 0``. The data volume is not estimated here: this is the small-input answer.
"""
from __future__ import annotations

from millstream.engine.graph.stream_graph import StreamGraph
from millstream.engine.graph.transformations import OperatorKind, ShipStrategy


def forward_group(graph: StreamGraph, node_id: int) -> set[int]:
    """The nodes joined to ``node_id`` by FORWARD edges, in either direction."""
    group, todo = {node_id}, [node_id]
    while todo:
        n = todo.pop()
        for e in graph.edges:
            if e.ship_strategy is not ShipStrategy.FORWARD:
                continue
            for a, b in ((e.source, e.target), (e.target, e.source)):
                if a == n and b not in group:
                    group.add(b)
                    todo.append(b)
    return group


def _parallelism_is_set(graph: StreamGraph, node_id: int) -> bool:
    t = graph.transformations[node_id]
    if t.parallelism is not None:
        return True
    # A parallel source runs at the default parallelism; a non-parallel one is not "set" by the user,
    # and its FORWARD consumers (also at 1) are decided all the same.
    return t.kind is OperatorKind.SOURCE and t.fixed_parallelism is None


def adaptive_batch_parallelism(graph: StreamGraph, node_id: int) -> int:
    """The parallelism Flink would run ``node_id`` at in a small BATCH job."""
    group = forward_group(graph, node_id)
    if any(_parallelism_is_set(graph, n) for n in group):
        return graph.nodes[node_id].parallelism
    return 1
