"""JobGraph: operators chained into JobVertices, and Flink's plan JSON.

Two operators are fused into one JobVertex when the edge between them is
FORWARD, both have the same parallelism, the downstream operator has exactly
one input, and neither side has chaining disabled.
"""
from __future__ import annotations

import uuid
from dataclasses import asdict, dataclass, field
from typing import Any

from millstream.engine.graph.stream_graph import StreamEdge, StreamGraph, StreamNode
from millstream.engine.graph.transformations import ChainingStrategy, OperatorKind, ShipStrategy, WindowDescriptor


@dataclass(frozen=True)
class OperatorDescriptor:
    node_id: int
    operator_id: str
    name: str
    kind: str
    uid: str | None
    window: WindowDescriptor | None = None  # WINDOW operators: assigner, trigger and evictor by class name

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "OperatorDescriptor":
        window = d.get("window")
        return OperatorDescriptor(**{**d, "window": WindowDescriptor.from_dict(window) if window else None})


@dataclass(frozen=True)
class JobVertex:
    id: str
    name: str
    parallelism: int
    max_parallelism: int
    operators: tuple[OperatorDescriptor, ...]  # topological order, head first
    chained_edges: tuple[tuple[int, int, str | None], ...]  # (source node, target node, side output tag)
    is_source: bool
    bounded: bool
    # Runs at parallelism 1 whatever the job's parallelism (a non-parallel source): a resume
    # at a new parallelism leaves it alone. JobGraphs stored before this field read as False.
    fixed_parallelism: bool = False

    @property
    def head_node(self) -> int:
        return self.operators[0].node_id


@dataclass(frozen=True)
class JobEdge:
    index: int
    source_vertex: str
    target_vertex: str
    source_node: int  # the operator inside the source chain that emits
    target_node: int  # the head of the target chain
    ship_strategy: str
    input_index: int = 0
    output_tag: str | None = None


@dataclass(frozen=True)
class JobGraph:
    """The unit of submission. JSON-able; user code travels beside it as bytes."""

    job_id: str
    name: str
    vertices: tuple[JobVertex, ...]
    edges: tuple[JobEdge, ...]
    job_type: str = "STREAMING"  # STREAMING | BATCH
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def max_parallelism(self) -> int:
        return max(v.parallelism for v in self.vertices)

    def vertex(self, vertex_id: str) -> JobVertex:
        for v in self.vertices:
            if v.id == vertex_id:
                return v
        raise KeyError(vertex_id)

    def in_edges(self, vertex_id: str) -> list[JobEdge]:
        return [e for e in self.edges if e.target_vertex == vertex_id]

    def out_edges(self, vertex_id: str) -> list[JobEdge]:
        return [e for e in self.edges if e.source_vertex == vertex_id]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "JobGraph":
        vertices = tuple(
            JobVertex(
                **{
                    **v,
                    "operators": tuple(OperatorDescriptor.from_dict(o) for o in v["operators"]),
                    "chained_edges": tuple(tuple(e) for e in v["chained_edges"]),
                }
            )
            for v in d["vertices"]
        )
        edges = tuple(JobEdge(**e) for e in d["edges"])
        return JobGraph(
            job_id=d["job_id"],
            name=d["name"],
            vertices=vertices,
            edges=edges,
            job_type=d.get("job_type", "STREAMING"),
            config=dict(d.get("config", {})),
        )

    def to_plan(self) -> dict[str, Any]:
        """Flink's ``/jobs/{id}/plan`` shape."""
        nodes = []
        for v in self.vertices:
            node: dict[str, Any] = {
                "id": v.id,
                "parallelism": v.parallelism,
                "operator": v.name,
                "operator_strategy": "",
                "description": v.name,
                "optimizer_properties": {},
            }
            inputs = [
                {
                    "num": num,
                    "id": e.source_vertex,
                    "ship_strategy": e.ship_strategy,
                    "exchange": "pipelined_bounded",
                }
                for num, e in enumerate(self.in_edges(v.id))
            ]
            if inputs:
                node["inputs"] = inputs
            nodes.append(node)
        return {"jid": self.job_id, "name": self.name, "type": self.job_type, "nodes": nodes}


def display_name(node: StreamNode) -> str:
    if node.kind is OperatorKind.SOURCE:
        return f"Source: {node.name}"
    if node.kind is OperatorKind.SINK:
        return f"Sink: {node.name}"
    return node.name


def _window_of(graph: StreamGraph, node_id: int) -> WindowDescriptor | None:
    t = graph.transformations.get(node_id)
    return t.params.get("window_descriptor") if t is not None else None


def is_chainable(graph: StreamGraph, edge: StreamEdge, chaining_enabled: bool = True) -> bool:
    up: StreamNode = graph.nodes[edge.source]
    down: StreamNode = graph.nodes[edge.target]
    return (
        chaining_enabled
        and edge.ship_strategy is ShipStrategy.FORWARD
        and up.parallelism == down.parallelism
        and len(graph.in_edges(down.id)) == 1
        and down.chaining is ChainingStrategy.ALWAYS
        and up.chaining is not ChainingStrategy.NEVER
        and down.kind is not OperatorKind.SOURCE
    )


def build_job_graph(
    graph: StreamGraph,
    job_type: str = "STREAMING",
    config: dict[str, Any] | None = None,
    chaining_enabled: bool = True,
    job_id: str | None = None,
) -> JobGraph:
    """Chain the StreamGraph into JobVertices and connect them with JobEdges."""
    head_of: dict[int, int] = {}
    for node_id in sorted(graph.nodes):
        ins = graph.in_edges(node_id)
        if len(ins) == 1 and is_chainable(graph, ins[0], chaining_enabled):
            head_of[node_id] = head_of[ins[0].source]
        else:
            head_of[node_id] = node_id
    chains: dict[int, list[int]] = {}
    for node_id in sorted(graph.nodes):
        chains.setdefault(head_of[node_id], []).append(node_id)

    vertex_id_of_head = {head: graph.nodes[head].operator_id for head in chains}
    vertices = []
    for head, members in chains.items():
        nodes = [graph.nodes[m] for m in members]
        member_set = set(members)
        chained = tuple(
            (e.source, e.target, e.output_tag)
            for e in graph.edges
            if e.source in member_set and e.target in member_set and head_of[e.target] == head
            and e.target != head
        )
        vertices.append(
            JobVertex(
                id=vertex_id_of_head[head],
                name=" -> ".join(display_name(n) for n in nodes),
                parallelism=nodes[0].parallelism,
                max_parallelism=nodes[0].max_parallelism,
                operators=tuple(
                    OperatorDescriptor(
                        n.id,
                        n.operator_id,
                        display_name(n),
                        n.kind.value,
                        n.uid,
                        _window_of(graph, n.id),
                    )
                    for n in nodes
                ),
                chained_edges=chained,
                is_source=nodes[0].kind is OperatorKind.SOURCE,
                bounded=nodes[0].bounded,
                fixed_parallelism=any(n.fixed_parallelism for n in nodes),
            )
        )
    edges = []
    for e in graph.edges:
        if head_of[e.target] == e.target and head_of[e.source] != e.target:
            edges.append(
                JobEdge(
                    index=len(edges),
                    source_vertex=vertex_id_of_head[head_of[e.source]],
                    target_vertex=vertex_id_of_head[e.target],
                    source_node=e.source,
                    target_node=e.target,
                    ship_strategy=e.ship_strategy.value,
                    input_index=e.input_index,
                    output_tag=e.output_tag,
                )
            )
    return JobGraph(
        job_id=job_id or uuid.uuid4().hex,
        name=graph.job_name,
        vertices=tuple(vertices),
        edges=tuple(edges),
        job_type=job_type,
        config=dict(config or {}),
    )
