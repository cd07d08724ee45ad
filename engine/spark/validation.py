"""Which jobs can run on Spark, decided from the JobGraph alone.

The Dispatcher calls ``check_job_graph`` at submission without loading user
code, so an untranslatable job is refused with a 400 that names the operator.
A window operator's descriptor names its assigner, effective trigger and
evictor; ``window_shape`` decides from it: event-time windows run with their
EventTimeTrigger and no evictor, count windows with count triggers and a
CountEvictor; processing-time windows, other triggers and other evictors are
refused, by name. The translator applies the same rule again to the real
objects (``windows.plan_window``), so a JobGraph that lies cannot slip past.
"""
from __future__ import annotations

from millstream.engine.graph.job_graph import JobGraph
from millstream.engine.graph.transformations import OperatorKind, WindowDescriptor

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


BY_WINDOW, MERGING, COUNT = "by_window", "merging", "count"
FUNCTION_KINDS = ("reduce", "aggregate", "process", "apply")

_TRIGGERS = "millstream.engine.windowing.triggers."
EVENT_TIME_TRIGGER = _TRIGGERS + "EventTimeTrigger"
#: a count window fires by count or, for a bare GlobalWindows, never (all at the end of input)
COUNT_TRIGGERS = frozenset({_TRIGGERS + "CountTrigger", _TRIGGERS + "NeverTrigger"})
PURGING_TRIGGER = _TRIGGERS + "PurgingTrigger"
COUNT_EVICTOR = "millstream.engine.windowing.evictors.CountEvictor"


class UntranslatableJob(ValueError):
    """The job cannot run on Spark; the message names the operator and says why."""


def untranslatable_operator(name: str, why: str) -> UntranslatableJob:
    return UntranslatableJob(f"operator '{name}' cannot run on Spark: {why}")


def _short(type_name: str) -> str:
    return type_name.rsplit(".", 1)[-1]


def window_shape(operator_name: str, window: WindowDescriptor) -> str:
    """How a WINDOW operator runs on Spark (BY_WINDOW, MERGING or COUNT); raises naming what has no translation."""
    if window.function_kind not in FUNCTION_KINDS:
        raise untranslatable_operator(operator_name, f"the window function kind '{window.function_kind}' is unknown")
    trigger = _short(window.trigger[0]) if window.trigger else "none"
    if window.global_windows:  # count windows, and GlobalWindows with a count trigger
        inner = list(window.trigger)
        if inner and inner[0] == PURGING_TRIGGER:
            inner = inner[1:]
        if len(inner) != 1 or inner[0] not in COUNT_TRIGGERS:
            why = f"the trigger {trigger} is not translated; count windows take a CountTrigger"
            raise untranslatable_operator(operator_name, why)
        if window.evictor is not None and window.evictor != COUNT_EVICTOR:
            why = f"the evictor {_short(window.evictor)} is not translated; count windows take a CountEvictor"
            raise untranslatable_operator(operator_name, why)
        return COUNT
    if not window.event_time:
        raise untranslatable_operator(
            operator_name,
            f"{_short(window.assigner)} assigns by the wall clock; a BATCH job on Spark takes event-time windows",
        )
    if window.trigger != (EVENT_TIME_TRIGGER,):
        raise untranslatable_operator(
            operator_name,
            f"the trigger {trigger} is not translated; event-time windows fire once, with the default EventTimeTrigger",
        )
    if window.evictor is not None:
        why = f"the evictor {_short(window.evictor)} is not translated; only count windows take an evictor"
        raise untranslatable_operator(operator_name, why)
    return MERGING if window.merging else BY_WINDOW


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
            if kind is OperatorKind.WINDOW:
                if op.window is None:
                    raise untranslatable_operator(op.name, "the JobGraph does not describe its window")
                window_shape(op.name, op.window)
    ops = {op.node_id: op for v in job_graph.vertices for op in v.operators}
    tagged = [(e.source_node, e.output_tag) for e in job_graph.edges if getattr(e, "output_tag", None)]
    tagged += [(c[0], c[2]) for v in job_graph.vertices for c in v.chained_edges if len(c) > 2 and c[2]]
    for node_id, tag in tagged:
        op = ops.get(node_id)
        if op is not None and op.kind == OperatorKind.WINDOW.value:
            continue  # a window's late data: empty in BATCH; any other tag is refused by the translator
        raise untranslatable_operator(op.name if op else str(node_id), f"its side output '{tag}' is not translated yet")
