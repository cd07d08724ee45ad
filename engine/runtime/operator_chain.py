"""OperatorChain: the operators of one task and how their outputs are wired (Flink's OperatorChain).

Each chained operator gets its context (the head also its key selectors and the keyed state
backend), and each output edge of the task a RecordWriter over one channel per connected
consumer subtask, partitioned by the edge's ship strategy. An operator's output is then the
next chained operator, the record writers of its edges, or both; side outputs are routed by tag.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from millstream.engine.checkpoint.config import INCREMENTAL_CHECKPOINTS_KEY
from millstream.engine.common.config_options import parse_boolean
from millstream.engine.graph.forward_groups import adaptive_batch_parallelism
from millstream.engine.graph.stream_graph import StreamGraph
from millstream.engine.graph.transformations import OperatorKind
from millstream.engine.runtime.deployment import TaskDeploymentDescriptor
from millstream.engine.runtime.io.channel import ChannelId
from millstream.engine.runtime.io.record_writer import RecordWriter
from millstream.engine.runtime.io.serialization import BufferSerializer
from millstream.engine.runtime.operators.base import ChainingOutput, FanOut, OperatorContext, Output, StreamOperator
from millstream.engine.runtime.operators.factory import create_operator
from millstream.engine.runtime.operators.sinks import PrintSinkOperator
from millstream.engine.runtime.partitioner import create_partitioner
from millstream.engine.runtime.state.backend import WHOLE_FROM_CHANGES, create_keyed_backend
from millstream.engine.runtime.state.operator_state import FunctionStateHandler
from millstream.engine.runtime.task_metrics import TaskIOMetrics

if TYPE_CHECKING:  # the task module imports this one
    from millstream.engine.runtime.stream_task import TaskEnvironment


@dataclass
class OperatorChain:
    keyed_backend: Any  # the head's keyed state backend, or None for a task without keys
    operators: dict[int, StreamOperator]  # stream node id -> operator (a source head has none)
    function_states: dict[int, FunctionStateHandler]  # CheckpointedFunction / CheckpointListener users
    writers: list[RecordWriter]  # one per output edge of the task
    outputs: dict[int, Output]  # stream node id -> its main output
    # partition_custom routes of the output edges, each with the context of the operator producing
    # into it: the task opens their user functions with it and closes them at the end.
    custom_partitions: list[tuple[Any, OperatorContext]] = field(default_factory=list)


def build_operator_chain(
    tdd: TaskDeploymentDescriptor,
    graph: StreamGraph,
    env: "TaskEnvironment",
    task_name: str,
    metrics: TaskIOMetrics,
    serializer: BufferSerializer,
    buffer_records: int,
    buffer_timeout_ms: int,
) -> OperatorChain:
    head = tdd.operators[0]
    selector = graph.key_selectors.get(head)
    selector2 = graph.key_selectors2.get(head)
    backend = _keyed_backend(tdd, env, graph.key_spec_for(head)) if selector is not None or selector2 is not None else None
    operators: dict[int, StreamOperator] = {}
    function_states: dict[int, FunctionStateHandler] = {}

    def context(node_id: int) -> OperatorContext:
        return OperatorContext(
            job_id=tdd.job_id,
            task_name=task_name,
            operator_name=graph.transformations[node_id].name,
            subtask=tdd.subtask,
            parallelism=tdd.parallelism,
            max_parallelism=tdd.max_parallelism,
            attempt=tdd.attempt,
            job_type=str(tdd.config.get("job_type", "STREAMING")),
            metrics=metrics,
            print_line=env.print_line,
            collect=env.collect,
            key_selector=selector if node_id == head else None,
            key_selector2=selector2 if node_id == head else None,
            keyed_backend=backend if node_id == head else None,
            job_parameters=dict(tdd.config.get("pipeline.global-job-parameters", {})),
        )

    for node_id in tdd.operators:
        t = graph.transformations[node_id]
        if t.kind is OperatorKind.SOURCE:
            continue
        ctx = context(node_id)
        operators[node_id] = create_operator(t, ctx)
        if ctx.is_batch and isinstance(operators[node_id], PrintSinkOperator):
            operators[node_id].print_parallelism = adaptive_batch_parallelism(graph, node_id)
        handler = FunctionStateHandler(t.function, t.name)
        if handler.checkpointed or handler.listener:
            function_states[node_id] = handler

    writers: list[RecordWriter] = []
    writers_by_node: dict[tuple[int, str | None], list[Output]] = {}
    custom_partitions: list[tuple[Any, OperatorContext]] = []
    for spec in tdd.outputs:
        custom = graph.custom_partition_for(spec.target_node, spec.target_input)
        if custom is not None and custom.functions:
            custom_partitions.append((custom, context(spec.source_node)))
        channel_writers = [
            env.channels.writer(ChannelId(tdd.job_id, spec.edge, tdd.subtask, dst, tdd.attempt)) for dst in spec.targets
        ]
        partitioner = create_partitioner(
            spec.ship_strategy,
            len(channel_writers),
            graph.key_selector_for(spec.target_node, spec.target_input),
            spec.target_max_parallelism,
            start=tdd.subtask,
            key_spec=graph.key_spec_for(spec.target_node),
            custom=custom,
        )
        rw = RecordWriter(partitioner, channel_writers, serializer, metrics, buffer_records, buffer_timeout_ms)
        writers.append(rw)
        writers_by_node.setdefault((spec.source_node, spec.output_tag), []).append(rw)

    # Each operator's outputs, split into the main output and its side outputs by tag.
    routes: dict[tuple[int, str | None], list[Output]] = {}
    for src, dst, tag in tdd.chained_edges:
        routes.setdefault((src, tag), []).append(ChainingOutput(operators[dst]))
    for (src, tag), node_writers in writers_by_node.items():
        routes.setdefault((src, tag), []).extend(node_writers)
    outputs: dict[int, Output] = {}
    for node_id in tdd.operators:
        main = routes.get((node_id, None), [])
        out: Output = main[0] if len(main) == 1 else FanOut(main)
        outputs[node_id] = out
        op = operators.get(node_id)
        if op is not None:
            op.output = out
            for (src, tag), outs in routes.items():
                if src == node_id and tag is not None:
                    op.side_outputs[tag] = outs[0] if len(outs) == 1 else FanOut(outs)
    return OperatorChain(backend, operators, function_states, writers, outputs, custom_partitions)


def _flag(config: Any, key: str, default: bool = False) -> bool:
    """A boolean job option of the TaskDeploymentDescriptor's string config (``parse_boolean``: a
    value other than true or false fails the task with that said, as Flink fails the job)."""
    value = config.get(key)
    if value is None:
        return default
    try:
        return parse_boolean(value)
    except ValueError as e:
        raise ValueError(f"job option {key}: {e}") from None


def _keyed_backend(tdd: TaskDeploymentDescriptor, env: "TaskEnvironment", key_spec: Any) -> Any:
    kind = str(tdd.config.get("state.backend", "hashmap"))
    directory = None
    if kind.strip().lower() != "hashmap":
        if env.state_dir is None:
            raise ValueError(f"state.backend={kind} needs a TaskManager state directory")
        # One directory per attempt: an LMDB environment must never be opened twice.
        directory = os.path.join(env.state_dir, tdd.job_id, f"{tdd.vertex_id}-{tdd.subtask}-{tdd.attempt}")
    # Tracking what changed costs memory, and pays only with periodic checkpoints to take deltas.
    incremental = tdd.periodic_checkpoints and _flag(tdd.config, INCREMENTAL_CHECKPOINTS_KEY)
    # Whole heap checkpoints built from the previous one and the changes, not from a forked child.
    whole = tdd.periodic_checkpoints and not incremental and _flag(tdd.config, WHOLE_FROM_CHANGES, default=True)
    backend = create_keyed_backend(
        kind, tdd.max_parallelism, directory, key_spec=key_spec, incremental=incremental, whole_from_changes=whole
    )
    # the operator's subtasks compact their chains in turns, so that no checkpoint rewrites several
    # subtasks' key groups at once (rolled_compaction)
    backend.rolled.take_turns(tdd.subtask, tdd.parallelism)
    return backend
