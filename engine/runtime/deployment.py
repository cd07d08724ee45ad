"""Task deployment descriptors: what one subtask needs to know to run, derived purely from the JobGraph."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from millstream.engine.graph.job_graph import JobGraph
from millstream.engine.runtime.partitioner import connected_sources, connected_targets


@dataclass(frozen=True)
class InputSpec:
    edge: int
    input_index: int
    source_vertex: str
    sources: tuple[int, ...]  # connected producer subtasks


@dataclass(frozen=True)
class OutputSpec:
    edge: int
    source_node: int
    target_vertex: str
    target_node: int
    ship_strategy: str
    targets: tuple[int, ...]  # connected consumer subtasks, in channel order
    target_max_parallelism: int
    output_tag: str | None = None
    target_input: int = 0  # which input of a two-input target operator this edge feeds


@dataclass(frozen=True)
class TaskDeploymentDescriptor:
    job_id: str
    job_name: str
    vertex_id: str
    vertex_name: str
    subtask: int
    parallelism: int
    max_parallelism: int
    attempt: int
    inputs: tuple[InputSpec, ...]
    outputs: tuple[OutputSpec, ...]
    operators: tuple[int, ...] = ()  # stream node ids of the chain, head first
    chained_edges: tuple[tuple[int, int, str | None], ...] = ()
    config: dict[str, Any] = field(default_factory=dict)
    restore: Any = None  # the state to restore from, once checkpoints exist
    # Restored from a completed stop-with-savepoint: its barrier (wire form); the task ends at once,
    # as it would have after that savepoint completed.
    finish_barrier: tuple[Any, ...] | None = None

    @property
    def periodic_checkpoints(self) -> bool:
        """Whether the job takes periodic checkpoints (not only savepoints)."""
        return int((self.config.get("execution.checkpointing") or {}).get("interval_ms", -1)) != -1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "TaskDeploymentDescriptor":
        return TaskDeploymentDescriptor(
            **{
                **d,
                "inputs": tuple(InputSpec(**{**i, "sources": tuple(i["sources"])}) for i in d["inputs"]),
                "outputs": tuple(OutputSpec(**{**o, "targets": tuple(o["targets"])}) for o in d["outputs"]),
                "operators": tuple(d.get("operators", ())),
                "chained_edges": tuple(tuple(e) for e in d.get("chained_edges", ())),
            }
        )


def make_tdd(
    job_graph: JobGraph,
    vertex_id: str,
    subtask: int,
    attempt: int,
    restore: dict[str, Any] | None = None,
    finish_barrier: tuple[Any, ...] | None = None,
) -> TaskDeploymentDescriptor:
    v = job_graph.vertex(vertex_id)
    inputs = []
    for e in job_graph.in_edges(vertex_id):
        src = job_graph.vertex(e.source_vertex)
        inputs.append(
            InputSpec(
                e.index,
                e.input_index,
                e.source_vertex,
                tuple(connected_sources(e.ship_strategy, subtask, src.parallelism, v.parallelism)),
            )
        )
    outputs = []
    for e in job_graph.out_edges(vertex_id):
        dst = job_graph.vertex(e.target_vertex)
        outputs.append(
            OutputSpec(
                e.index,
                e.source_node,
                e.target_vertex,
                e.target_node,
                e.ship_strategy,
                tuple(connected_targets(e.ship_strategy, subtask, v.parallelism, dst.parallelism)),
                dst.max_parallelism,
                e.output_tag,
                e.input_index,
            )
        )
    return TaskDeploymentDescriptor(
        job_id=job_graph.job_id,
        job_name=job_graph.name,
        vertex_id=vertex_id,
        vertex_name=v.name,
        subtask=subtask,
        parallelism=v.parallelism,
        max_parallelism=v.max_parallelism,
        attempt=attempt,
        inputs=tuple(inputs),
        outputs=tuple(outputs),
        operators=tuple(o.node_id for o in v.operators),
        chained_edges=tuple(v.chained_edges),
        config=dict(job_graph.config, **{"job_type": job_graph.job_type}),
        restore=restore,
        finish_barrier=tuple(finish_barrier) if finish_barrier is not None else None,
    )
