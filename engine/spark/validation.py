"""Which jobs can run on Spark, decided from the JobGraph alone.

The Dispatcher calls ``check_job_graph`` at submission without loading user
code, so an untranslatable job is refused with a 400 that names the operator.
The JobGraph does not carry a window's trigger and evictor, so those are
checked when the job is translated (``windows.plan_window``): only the
assigner's default trigger runs (EventTimeTrigger for event-time windows, and
count triggers and CountEvictor for count windows); processing-time windows,
other triggers and other evictors are refused there, by name.
"""
from __future__ import annotations

from engine.graph.job_graph import JobGraph
from engine.graph.transformations import OperatorKind

#: operator kinds the translator knows
SUPPORTED_KINDS = frozenset(
    {
        OperatorKind.SOURCE,
        OperatorKind.MAP,
        OperatorKind.FLAT_MAP,
        OperatorKind.FILTER,
        OperatorKind.PROCESS,
        OperatorKind.KEYED_PROCESS,  # with timers, fired at the end of each key
        OperatorKind.REDUCE,
        OperatorKind.TIMESTAMPS,
        OperatorKind.WINDOW,
        OperatorKind.CO_MAP,  # stateless two-input operators: a union of tagged inputs
        OperatorKind.CO_FLAT_MAP,
        OperatorKind.SINK,
    }
)

#: two-input operators with timers or state (connect().process(), broadcast state): no translation yet
TWO_INPUT_KINDS = frozenset(
    {
        OperatorKind.CO_PROCESS,
        OperatorKind.KEYED_CO_PROCESS,
        OperatorKind.BROADCAST_PROCESS,
        OperatorKind.KEYED_BROADCAST_PROCESS,
    }
)


class UntranslatableJob(ValueError):
    """The job cannot run on Spark; the message names the operator and says why."""


def untranslatable_operator(name: str, why: str) -> UntranslatableJob:
    return UntranslatableJob(f"operator '{name}' cannot run on Spark: {why}")


def check_job_graph(job_graph: JobGraph) -> None:
    """Raise ``UntranslatableJob`` unless every operator of this bounded job has a Spark translation."""
    if job_graph.job_type != "BATCH":
        # A STREAMING job's rolling reduce emits every update; only BATCH semantics are translated.
        raise UntranslatableJob(
            f"job '{job_graph.name}' is a {job_graph.job_type} job; only BATCH jobs run on Spark"
        )
    for vertex in job_graph.vertices:
        if vertex.is_source and not vertex.bounded:
            raise untranslatable_operator(vertex.operators[0].name, "it is an unbounded source")
        for op in vertex.operators:
            try:
                kind = OperatorKind(op.kind)
            except ValueError:
                raise untranslatable_operator(op.name, f"unknown operator kind '{op.kind}'") from None
            if kind in TWO_INPUT_KINDS:
                why = "is a two-input operator with timers or state (connect().process() or broadcast state)"
                raise untranslatable_operator(op.name, f"{kind.value} {why}; it has no Spark translation yet")
            if kind not in SUPPORTED_KINDS:
                raise untranslatable_operator(op.name, f"{kind.value} has no Spark translation yet")
    ops = {op.node_id: op for v in job_graph.vertices for op in v.operators}
    tagged = [(e.source_node, e.output_tag) for e in job_graph.edges if getattr(e, "output_tag", None)]
    tagged += [(c[0], c[2]) for v in job_graph.vertices for c in v.chained_edges if len(c) > 2 and c[2]]
    for node_id, tag in tagged:
        op = ops.get(node_id)
        if op is not None and op.kind == OperatorKind.WINDOW.value:
            continue  # a window's late data: empty in BATCH; any other tag is refused by the translator
        raise untranslatable_operator(op.name if op else str(node_id), f"its side output '{tag}' is not translated yet")
