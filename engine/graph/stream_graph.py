"""StreamGraph: physical operators and the edges between them.

Virtual transformations (partitioning, union) are folded into edges here, so
every edge knows its ship strategy and, for HASH edges, its key selector.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from millstream.engine.graph.transformations import (
    ChainingStrategy,
    OperatorKind,
    ShipStrategy,
    Transformation,
)

DEFAULT_MAX_PARALLELISM = 128
UPPER_MAX_PARALLELISM = 32768


def default_max_parallelism_for(parallelism: int) -> int:
    """Flink's rule: 1.5 x parallelism rounded up to a power of two, within [128, 32768]."""
    target = parallelism + parallelism // 2
    power = 1 << max(target - 1, 0).bit_length()
    return min(max(power, DEFAULT_MAX_PARALLELISM), UPPER_MAX_PARALLELISM)


class GraphBuildError(ValueError):
    """The program describes a graph that cannot run; the message says why."""


@dataclass(frozen=True)
class StreamNode:
    id: int
    kind: OperatorKind
    name: str
    parallelism: int
    max_parallelism: int
    uid: str | None
    operator_id: str  # stable 32-hex id used to match state on restore
    chaining: ChainingStrategy
    bounded: bool
    fixed_parallelism: bool = False  # a non-parallel source: never rescaled


@dataclass(frozen=True)
class StreamEdge:
    source: int
    target: int
    ship_strategy: ShipStrategy
    input_index: int = 0  # which logical input of a two-input operator
    output_tag: str | None = None  # a side output of the source operator, or its main output


@dataclass
class StreamGraph:
    """Nodes and edges plus, per node, the transformation holding user code."""

    job_name: str
    nodes: dict[int, StreamNode]
    edges: list[StreamEdge]
    transformations: dict[int, Transformation]
    key_selectors: dict[int, Any] = field(default_factory=dict)  # target node -> selector of its (first) input
    key_selectors2: dict[int, Any] = field(default_factory=dict)  # two-input nodes: the second input's selector
    # Keyed nodes -> their key type's spec (engine.common.key_spec), which decides the key groups.
    key_specs: dict[int, Any] = field(default_factory=dict)
    # (node, input index) -> the CustomPartition of its partition_custom input edge.
    custom_partitions: dict[tuple[int, int], Any] = field(default_factory=dict)
    # (source, target, input index) of a key_by's HASH edge -> the id PyFlink gives its key_by map.
    key_by_plan_ids: dict[tuple[int, int, int], int] = field(default_factory=dict)

    def key_selector_for(self, node_id: int, input_index: int) -> Any:
        return (self.key_selectors if input_index == 0 else self.key_selectors2).get(node_id)

    def key_spec_for(self, node_id: int) -> Any:
        return self.key_specs.get(node_id)

    def custom_partition_for(self, node_id: int, input_index: int) -> Any:
        return self.custom_partitions.get((node_id, input_index))

    def in_edges(self, node_id: int) -> list[StreamEdge]:
        return [e for e in self.edges if e.target == node_id]

    def out_edges(self, node_id: int) -> list[StreamEdge]:
        return [e for e in self.edges if e.source == node_id]


def _operator_id(t: Transformation, position: int, input_ids: list[str]) -> str:
    if t.uid:
        seed = f"uid:{t.uid}"
    else:
        seed = f"gen:{t.kind.value}:{position}:{','.join(input_ids)}"
    return hashlib.md5(seed.encode()).hexdigest()


def build_stream_graph(
    transformations: list[Transformation],
    job_name: str,
    default_parallelism: int,
    default_max_parallelism: int | None = None,
) -> StreamGraph:
    """Resolve parallelism and edges for every physical transformation."""
    by_id = {t.id: t for t in transformations}
    env_max = default_max_parallelism
    nodes: dict[int, StreamNode] = {}
    edges: list[StreamEdge] = []
    key_selectors: dict[int, Any] = {}
    key_selectors2: dict[int, Any] = {}
    key_specs: dict[int, list[Any]] = {}
    custom_partitions: dict[tuple[int, int], Any] = {}
    key_by_plan_ids: dict[tuple[int, int, int], int] = {}
    position = 0
    for t in sorted(transformations, key=lambda x: x.id):
        if t.kind.is_virtual:
            continue
        parallelism = t.fixed_parallelism or t.parallelism or default_parallelism
        max_par = t.max_parallelism if t.max_parallelism is not None else (env_max or default_max_parallelism_for(parallelism))
        if not 1 <= max_par <= UPPER_MAX_PARALLELISM:
            raise GraphBuildError(
                f"max parallelism of '{t.name}' must be between 1 and {UPPER_MAX_PARALLELISM}, got {max_par}"
            )
        if parallelism < 1:
            raise GraphBuildError(f"parallelism of '{t.name}' must be at least 1, got {parallelism}")
        if parallelism > max_par:
            raise GraphBuildError(
                f"parallelism {parallelism} of '{t.name}' exceeds its max parallelism {max_par}"
            )
        resolved: list[tuple[int, ShipStrategy | None, Any, int, str | None]] = []
        for input_index, input_id in enumerate(t.inputs):
            _resolve(by_id, input_id, None, None, input_index, None, resolved)
        input_ids = [nodes[r[0]].operator_id for r in resolved]
        node = StreamNode(
            id=t.id,
            kind=t.kind,
            name=t.name,
            parallelism=parallelism,
            max_parallelism=max_par,
            uid=t.uid,
            operator_id=_operator_id(t, position, input_ids),
            chaining=t.chaining,
            bounded=t.bounded,
            fixed_parallelism=t.fixed_parallelism is not None,
        )
        position += 1
        clash = next((n for n in nodes.values() if n.operator_id == node.operator_id), None)
        if clash is not None:
            raise GraphBuildError(
                f"operators '{clash.name}' and '{t.name}' have the same uid '{t.uid}'; uids must be unique"
            )
        nodes[t.id] = node
        for src, strategy, selector, input_index, tag in resolved:
            up = nodes[src]
            if strategy is None:
                strategy = (
                    ShipStrategy.FORWARD if up.parallelism == parallelism else ShipStrategy.REBALANCE
                )
            elif strategy is ShipStrategy.FORWARD and up.parallelism != parallelism:
                raise GraphBuildError(
                    f"forward partitioning does not allow a change of parallelism: "
                    f"'{up.name}' ({up.parallelism}) -> '{t.name}' ({parallelism}); use rebalance()"
                )
            if strategy is ShipStrategy.HASH:
                selector, spec, plan_id = selector
                if plan_id is not None:
                    key_by_plan_ids[(src, t.id, input_index)] = plan_id
                (key_selectors if input_index == 0 else key_selectors2)[t.id] = selector
                key_specs.setdefault(t.id, []).append(spec)
            elif strategy is ShipStrategy.CUSTOM:
                custom_partitions[(t.id, input_index)] = selector[0]
            edges.append(StreamEdge(src, t.id, strategy, input_index, tag))
    # Both inputs of a keyed two-input operator must route a key alike: with different key types
    # (Flink refuses those) both hash as untyped keys.
    specs = {node: (found[0] if len(set(map(repr, found))) == 1 else None) for node, found in key_specs.items()}
    return StreamGraph(
        job_name, nodes, edges, by_id, key_selectors, key_selectors2, specs, custom_partitions, key_by_plan_ids
    )


def _resolve(
    by_id: dict[int, Transformation],
    tid: int,
    strategy: ShipStrategy | None,
    selector: Any,
    input_index: int,
    tag: str | None,
    out: list[tuple[int, ShipStrategy | None, Any, int, str | None]],
) -> None:
    t = by_id[tid]
    if t.kind is OperatorKind.PARTITION:
        # The partitioning closest to the consumer wins, as in Flink.
        if strategy is None:  # the selector travels with the declared key type's spec
            strategy, selector = t.ship_strategy, (t.key_selector, t.params.get("key_spec"), t.params.get("plan_map_id"))
        for i in t.inputs:
            _resolve(by_id, i, strategy, selector, input_index, tag, out)
    elif t.kind is OperatorKind.SIDE_OUTPUT:
        for i in t.inputs:
            _resolve(by_id, i, strategy, selector, input_index, t.params["tag_id"], out)
    elif t.kind is OperatorKind.UNION:
        for i in t.inputs:
            _resolve(by_id, i, strategy, selector, input_index, tag, out)
    else:
        out.append((tid, strategy, selector, input_index, tag))
