"""Translates a (JobGraph, StreamGraph) into a PySpark RDD pipeline: one function per operator kind.

Each stream node becomes an RDD with as many partitions as the node's
parallelism, so a partition plays the part of a native subtask. Edges become
repartitioning (or nothing); keyed operators route keys to partitions with
the native key-group assignment. Sinks become actions, run by ``SparkPlan.run``.
FileSource and two-phase-commit sinks (FileSink) are in ``files``: Spark reads
the files in splits and writes with its output commit protocol.
Between an operator that stamps event timestamps and the operators that read
them, RDDs hold (value, timestamp) pairs (``timestamps.plan_timestamps``).
Nothing here does I/O beyond Spark itself: collected results go to a callback.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from millstream.engine.common.type_formatting import record_formatter
from millstream.engine.datastream.connectors.collection import CollectionSource
from millstream.engine.datastream.connectors.datagen import DataGeneratorSource
from millstream.engine.datastream.connectors.file_source import FileSource, enumerate_files
from millstream.engine.datastream.connectors.number_seq import NumberSequenceSource
from millstream.engine.datastream.connectors.source import Source
from millstream.engine.datastream.functions import Function
from millstream.engine.graph.forward_groups import adaptive_batch_parallelism
from millstream.engine.graph.job_graph import JobGraph
from millstream.engine.graph.stream_graph import StreamEdge, StreamGraph, StreamNode
from millstream.engine.graph.transformations import OperatorKind, ShipStrategy, Transformation
from millstream.engine.spark import partitions as P
from millstream.engine.spark import co_operators as C
from millstream.engine.spark import files as F
from millstream.engine.spark import windows as W
from millstream.engine.spark.combiner import combine_partition, hashable_keys
from millstream.engine.spark.timestamps import NO_STAMPS, Stamping, plan_timestamps, timestamps_partition, unstamped, value_of
from millstream.engine.spark.validation import UntranslatableJob, check_job_graph, untranslatable_operator

__all__ = ["SparkPlan", "SinkAction", "UntranslatableJob", "translate"]

RDD = Any  # pyspark.RDD; not imported so this module loads without a JVM
COLLECT_BATCH = 1024  # records per collected batch, as the native record writer buffers them


@dataclass
class SinkAction:
    """One sink: ``collect`` hands its records to the driver; otherwise ``run`` executes it."""

    node_id: int
    name: str
    kind: str  # collect | print | function | writer
    rdd: RDD
    run: Callable[[], None] | None = None


@dataclass
class SparkPlan:
    job_id: str
    job_name: str
    actions: list[SinkAction]
    persisted: list[RDD] = field(default_factory=list)

    def run(
        self,
        sc: Any,
        on_collect: Callable[[int, list[Any]], None],
        job_group: str | None = None,
        batch_size: int = COLLECT_BATCH,
    ) -> None:
        """Run every sink in order; collected records reach ``on_collect(node_id, batch)``.

        With ``job_group`` every Spark job runs in that group, so
        ``sc.cancelJobGroup(job_group)`` from another thread cancels the run.
        """
        if job_group is not None:
            sc.setJobGroup(job_group, f"Millstream job {self.job_name}", interruptOnCancel=True)
        try:
            for action in self.actions:
                sc.setJobDescription(f"{self.job_name}: {action.name}")
                if action.kind == "collect":
                    batch: list[Any] = []
                    for v in action.rdd.toLocalIterator():
                        batch.append(v)
                        if len(batch) >= batch_size:
                            on_collect(action.node_id, batch)
                            batch = []
                    if batch:
                        on_collect(action.node_id, batch)
                else:
                    assert action.run is not None
                    action.run()
        finally:
            for rdd in self.persisted:
                rdd.unpersist()


def translate(sc: Any, job_graph: JobGraph, stream_graph: StreamGraph) -> SparkPlan:
    """Build the RDDs of a bounded job; raises UntranslatableJob naming the first operator it cannot map."""
    check_job_graph(job_graph)
    return _Translator(sc, job_graph, stream_graph).build()


# -- sources -----------------------------------------------------------------------
def translate_source(sc: Any, t: Transformation, node: StreamNode) -> RDD:
    source, p = t.function, node.parallelism
    if not isinstance(source, Source) or not source.is_bounded():
        raise untranslatable_operator(f"Source: {node.name}", "it is an unbounded source")
    if isinstance(source, CollectionSource):
        return sc.parallelize(source.values, p)
    if isinstance(source, FileSource):
        # The files the native source would read, cut into splits by Spark rather than one file per subtask.
        return F.read_text_files(sc, enumerate_files(source.paths), source.stream_format.charset, p)
    if isinstance(source, NumberSequenceSource):
        # sc.range slices [start, end] exactly as split_range gives native subtasks their splits.
        return sc.range(source.start, source.end + 1, numSlices=p)
    if isinstance(source, DataGeneratorSource):
        assert source.count is not None
        return sc.range(0, source.count, numSlices=p).mapPartitionsWithIndex(
            P.generator_partition(source.generator_function, source.records_per_second, p), True
        )
    # Any other bounded Source: partition i reads the split of native subtask i.
    return sc.parallelize(range(p), p).mapPartitionsWithIndex(P.source_reader_partition(source, p), True)


# -- one-input operators -------------------------------------------------------------
def translate_map(rdd: RDD, t: Transformation, info: P.TaskInfo, stamping: Stamping = NO_STAMPS) -> RDD:
    return rdd.mapPartitionsWithIndex(P.map_partition(t.function, info, stamping.output))


def translate_flat_map(rdd: RDD, t: Transformation, info: P.TaskInfo, stamping: Stamping = NO_STAMPS) -> RDD:
    return rdd.mapPartitionsWithIndex(P.flat_map_partition(t.function, info, stamping.output))


def translate_filter(rdd: RDD, t: Transformation, info: P.TaskInfo, stamping: Stamping = NO_STAMPS) -> RDD:
    return rdd.mapPartitionsWithIndex(P.filter_partition(t.function, info, stamping.output), True)


def translate_process(rdd: RDD, t: Transformation, info: P.TaskInfo, stamping: Stamping = NO_STAMPS) -> RDD:
    return rdd.mapPartitionsWithIndex(P.process_partition(t.function, info, stamping))


def translate_timestamps(rdd: RDD, t: Transformation, info: P.TaskInfo, stamping: Stamping = NO_STAMPS) -> RDD:
    """The WatermarkStrategy's timestamp assigner; watermarks have no part in BATCH."""
    strategy = t.params["watermark_strategy"]
    return rdd.mapPartitionsWithIndex(timestamps_partition(strategy, info.operator_name, stamping), True)


# -- two-input operators: the input holds (input index, record) ----------------------
def translate_co_map(rdd: RDD, t: Transformation, info: P.TaskInfo, stamping: Stamping = NO_STAMPS) -> RDD:
    return rdd.mapPartitionsWithIndex(C.co_map_partition(t.function, info, stamping.output))


def translate_co_flat_map(rdd: RDD, t: Transformation, info: P.TaskInfo, stamping: Stamping = NO_STAMPS) -> RDD:
    return rdd.mapPartitionsWithIndex(C.co_flat_map_partition(t.function, info, stamping.output))


# -- keyed operators -----------------------------------------------------------------
def translate_reduce(
    rdd: RDD, t: Transformation, info: P.TaskInfo, key_selector: Callable[[Any], Any], stamping: Stamping = NO_STAMPS
) -> RDD:
    """BATCH keyed reduce: ``reduceByKey`` (map-side combine), emitting only the final value per key."""
    fn = t.function
    if isinstance(fn, Function) and type(fn).open is not Function.open:
        # Its open() may take keyed state (PyFlink scopes it by key): one key at a time, in order,
        # as the keyed process functions run; no map-side combine, which would mix keys' state.
        sorted_rdd = _sorted_by_key(rdd, info, key_selector, stamped=stamping.input, by_timestamp=stamping.input)
        return sorted_rdd.mapPartitionsWithIndex(P.keyed_reduce_partition(fn, info, stamping.output))
    reduce_fn = getattr(fn, "reduce", fn)
    partitioner = P.KeyPartitioner(info.max_parallelism, info.parallelism, info.key_spec)
    # Our own map-side combine (cheaper per record than reduceByKey's); reduceByKey then merges the partials.
    return (
        rdd.mapPartitions(combine_partition(key_selector, reduce_fn))
        .reduceByKey(reduce_fn, numPartitions=info.parallelism, partitionFunc=partitioner)
        .values()
    )


def translate_keyed_process(
    rdd: RDD, t: Transformation, info: P.TaskInfo, key_selector: Callable[[Any], Any], stamping: Stamping = NO_STAMPS
) -> RDD:
    """Flink's BATCH keyed processing: records grouped by key, by timestamp (if any) then input order
    within a key; each key's timers fire when its records end."""
    sorted_rdd = _sorted_by_key(rdd, info, key_selector, stamped=stamping.input, by_timestamp=stamping.input)
    return sorted_rdd.mapPartitionsWithIndex(P.keyed_process_partition(t.function, info, stamping.output))


def translate_window(
    rdd: RDD, t: Transformation, info: P.TaskInfo, key_selector: Callable[[Any], Any], stamping: Stamping = NO_STAMPS
) -> RDD:
    """Keyed windows in BATCH: grouping by (key, window), or per key for session and count windows."""
    plan = W.plan_window(info.operator_name, t.params)
    fns = W.WindowFunctions(t.params, t.function, info)
    p = info.parallelism
    if plan.shape == W.BY_WINDOW:
        combine = plan.incremental and fns.can_merge()
        assign = W.assign_windows_partition(key_selector, t.params["assigner"], info.operator_name, combine)
        partitioner = W.WindowKeyPartitioner(info.max_parallelism, p, info.key_spec)
        by_window = rdd.mapPartitionsWithIndex(assign)
        if combine:  # aggregateByKey's shape, the first record creating the accumulator
            combined = by_window.combineByKey(
                fns.create, fns.add, fns.merge, numPartitions=p, partitionFunc=partitioner
            )
            return combined.mapPartitionsWithIndex(W.fire_accumulators_partition(fns, stamping.output))
        grouped = by_window.groupByKey(numPartitions=p, partitionFunc=partitioner)
        return grouped.mapPartitionsWithIndex(W.fire_groups_partition(fns, stamping.output))
    if plan.shape == W.MERGING:
        sorted_rdd = _sorted_by_key(rdd, info, key_selector, stamped=stamping.input, by_timestamp=True)
        run = W.merging_windows_partition(fns, t.params["assigner"], info.operator_name, stamping.output)
        return sorted_rdd.mapPartitionsWithIndex(run)
    sorted_rdd = _sorted_by_key(rdd, info, key_selector, stamped=stamping.input, by_timestamp=False)
    run = W.count_windows_partition(fns, t.params, plan.incremental, stamping.output)
    return sorted_rdd.mapPartitionsWithIndex(run)


def _sorted_by_key(
    rdd: RDD, info: P.TaskInfo, key_selector: Callable[[Any], Any], stamped: bool, by_timestamp: bool
) -> RDD:
    """Records routed to the instance owning their key group, sorted there as Flink's BATCH keyed input."""
    return rdd.mapPartitionsWithIndex(
        P.sort_keyed_partition(key_selector, info.max_parallelism, stamped, by_timestamp, info.key_spec)
    ).repartitionAndSortWithinPartitions(
        numPartitions=info.parallelism,
        partitionFunc=P.SortKeyPartitioner(info.max_parallelism, info.parallelism),
    )


# -- edges -----------------------------------------------------------------------------
def translate_edge(
    rdd: RDD,
    strategy: ShipStrategy,
    node: StreamNode,
    key_selector: Any = None,
    stamped: bool = False,
    key_spec: Any = None,
    custom: Any = None,
) -> RDD:
    """Re-distribute an upstream RDD over the target's ``parallelism`` partitions as the edge says."""
    p = node.parallelism
    if strategy is ShipStrategy.FORWARD:
        return rdd
    if strategy in (ShipStrategy.REBALANCE, ShipStrategy.SHUFFLE):
        return rdd.repartition(p)
    if strategy is ShipStrategy.RESCALE:
        # Rescale keeps data local when narrowing; Spark can only widen with a shuffle.
        return rdd.coalesce(p) if rdd.getNumPartitions() >= p else rdd.repartition(p)
    if strategy is ShipStrategy.BROADCAST:
        # Every downstream instance sees every record once, as the native BROADCAST edge delivers it.
        return (
            rdd.flatMap(lambda v: ((i, v) for i in range(p)))
            .partitionBy(p, partitionFunc=_identity)
            .values()
        )
    if strategy is ShipStrategy.HASH:
        # A keyed stream feeding a non-keyed operator (key_by(...).map(...)): route by key group only.
        partitioner = P.KeyPartitioner(node.max_parallelism, p, key_spec)
        key_of = (lambda r: key_selector(r[0])) if stamped else key_selector
        return rdd.map(lambda r: (partitioner(key_of(r)), r)).partitionBy(p, _identity).values()
    if strategy is ShipStrategy.CUSTOM and custom is not None:
        value_of = (lambda r: r[0]) if stamped else (lambda r: r)
        return rdd.map(lambda r: (custom.channel(value_of(r), p), r)).partitionBy(p, _identity).values()
    raise untranslatable_operator(node.name, f"unknown ship strategy {strategy}")


def _identity(i: int) -> int:
    return i


def _tag(input_index: int) -> Callable[[Any], tuple[int, Any]]:
    def tag(record: Any) -> tuple[int, Any]:
        return input_index, record

    return tag


# -- sinks --------------------------------------------------------------------------------
def translate_sink(
    rdd: RDD, t: Transformation, node: StreamNode, info: P.TaskInfo, stamping: Stamping = NO_STAMPS, job_id: str = "",
    print_parallelism: int | None = None,
) -> SinkAction:
    kind = t.params.get("sink")
    name = f"Sink: {node.name}"
    if kind == "collect":
        return SinkAction(node.id, name, "collect", rdd)
    if kind == "print":
        fmt = record_formatter(t.params.get("type_info"))
        # Prefixed as PyFlink's BATCH run prints it (engine/graph/forward_groups.py), not by Spark's partitions.
        fn = P.print_partition(t.params.get("identifier"), print_parallelism or node.parallelism, fmt=fmt)
    elif kind == "function":
        fn = P.sink_function_partition(t.function, info, stamping.input)
    elif kind == "writer":
        # Spark's output commit protocol: tasks hand back commit messages, the driver commits them.
        context = F.WriterContext(node.parallelism, job_id, str(node.id))
        return SinkAction(node.id, name, kind, rdd, run=lambda: F.write_and_commit(rdd, t.function, context, name))
    else:
        raise untranslatable_operator(name, f"unknown sink '{kind}'")
    return SinkAction(node.id, name, kind, rdd, run=lambda: rdd.foreachPartition(_with_partition_index(fn)))


def _with_partition_index(fn: Callable[[int, Any], None]) -> Callable[[Any], None]:
    def run(it: Any) -> None:
        from pyspark import TaskContext

        fn(TaskContext.get().partitionId(), it)

    return run


_ONE_INPUT: dict[OperatorKind, Callable[[RDD, Transformation, P.TaskInfo, Stamping], RDD]] = {
    OperatorKind.MAP: translate_map,
    OperatorKind.FLAT_MAP: translate_flat_map,
    OperatorKind.FILTER: translate_filter,
    OperatorKind.PROCESS: translate_process,
    OperatorKind.TIMESTAMPS: translate_timestamps,
}

_TWO_INPUT: dict[OperatorKind, Callable[[RDD, Transformation, P.TaskInfo, Stamping], RDD]] = {
    OperatorKind.CO_MAP: translate_co_map,
    OperatorKind.CO_FLAT_MAP: translate_co_flat_map,
}

_KEYED: dict[OperatorKind, Callable[[RDD, Transformation, P.TaskInfo, Callable[[Any], Any], Stamping], RDD]] = {
    OperatorKind.REDUCE: translate_reduce,
    OperatorKind.KEYED_PROCESS: translate_keyed_process,
    OperatorKind.WINDOW: translate_window,
}


class _Translator:
    def __init__(self, sc: Any, job_graph: JobGraph, stream_graph: StreamGraph) -> None:
        self.sc = sc
        self.jg = job_graph
        self.sg = stream_graph
        self.rdds: dict[int, RDD] = {}
        self.vertex_name = {op.node_id: v.name for v in job_graph.vertices for op in v.operators}
        self.job_parameters = dict(job_graph.config.get("pipeline.global-job-parameters", {}))
        self.stamping = plan_timestamps(stream_graph)

    def info(self, node: StreamNode) -> P.TaskInfo:
        return P.TaskInfo(
            vertex_name=self.vertex_name.get(node.id, node.name),
            operator_name=node.name,
            parallelism=node.parallelism,
            max_parallelism=node.max_parallelism,
            job_parameters=self.job_parameters,
            key_spec=self.sg.key_spec_for(node.id),
        )

    def build(self) -> SparkPlan:
        actions: list[SinkAction] = []
        persisted: list[RDD] = []
        # Node ids follow program order, so inputs always come first.
        for node_id in sorted(self.sg.nodes):
            node = self.sg.nodes[node_id]
            t = self.sg.transformations[node_id]
            if node.kind is OperatorKind.SINK:
                sink = translate_sink(
                    self._input(node), t, node, self.info(node), self.stamping[node_id], self.jg.job_id,
                    adaptive_batch_parallelism(self.sg, node_id),
                )
                actions.append(sink)
                continue
            rdd = self._translate(node, t)
            rdd.setName(node.name)
            if len(self.sg.out_edges(node_id)) > 1:
                # Several consumers mean several Spark actions; compute user functions once.
                from pyspark import StorageLevel

                rdd.persist(StorageLevel.MEMORY_AND_DISK)
                persisted.append(rdd)
            self.rdds[node_id] = rdd
        return SparkPlan(self.jg.job_id, self.jg.name, actions, persisted)

    def _translate(self, node: StreamNode, t: Transformation) -> RDD:
        if node.kind is OperatorKind.SOURCE:
            return translate_source(self.sc, t, node)
        stamping = self.stamping[node.id]
        if node.kind in _KEYED:
            selector = hashable_keys(self.sg.key_selectors.get(node.id))
            return _KEYED[node.kind](self._keyed_input(node), t, self.info(node), selector, stamping)
        if node.kind in _ONE_INPUT:
            return _ONE_INPUT[node.kind](self._input(node), t, self.info(node), stamping)
        if node.kind in _TWO_INPUT:
            return _TWO_INPUT[node.kind](self._input(node, tagged=True), t, self.info(node), stamping)
        raise untranslatable_operator(node.name, f"{node.kind.value} has no Spark translation yet")

    def _keyed_input(self, node: StreamNode) -> RDD:
        """The raw union of a keyed operator's inputs; its own shuffle does the routing."""
        edges = self.sg.in_edges(node.id)
        if not edges or any(e.ship_strategy is not ShipStrategy.HASH for e in edges) or node.id not in self.sg.key_selectors:
            raise untranslatable_operator(node.name, "a keyed operator needs key_by() on every input")
        return self._union([self._upstream(e, node) for e in edges])

    def _input(self, node: StreamNode, tagged: bool = False) -> RDD:
        """The node's input over its parallelism; ``tagged`` records become (input index, record)."""
        edges = self.sg.in_edges(node.id)
        if not edges:
            raise untranslatable_operator(node.name, "it has no input")
        stamped = self.stamping[node.id].input
        rdds = []
        for e in edges:
            selector = self.sg.key_selector_for(node.id, e.input_index)
            rdd = translate_edge(
                self._upstream(e, node),
                e.ship_strategy,
                node,
                selector,
                stamped,
                self.sg.key_spec_for(node.id),
                self.sg.custom_partition_for(node.id, e.input_index),
            )
            rdds.append(rdd.map(_tag(e.input_index), True) if tagged else rdd)
        rdd = self._union(rdds)
        if rdd.getNumPartitions() > node.parallelism:
            # A union of forwarded inputs: each instance reads several upstream partitions, as in native.
            rdd = rdd.coalesce(node.parallelism)
        return rdd

    def _upstream(self, edge: StreamEdge, node: StreamNode) -> RDD:
        """The edge's source RDD, with timestamps stripped or added as ``node`` takes its input."""
        if edge.output_tag is not None:
            return self._side_output(edge, node)
        rdd = self.rdds[edge.source]
        produced, wanted = self.stamping[edge.source].output, self.stamping[node.id].input
        if produced and not wanted:
            return rdd.map(value_of, True)
        if wanted and not produced:
            return rdd.map(unstamped, True)
        return rdd

    def _side_output(self, edge: StreamEdge, node: StreamNode) -> RDD:
        source = self.sg.nodes[edge.source]
        params = self.sg.transformations[edge.source].params
        if source.kind is OperatorKind.WINDOW and edge.output_tag == params.get("late_tag"):
            # In BATCH every record is on time (Flink's batch semantics): late data never exists.
            return self.sc.parallelize([], node.parallelism)
        raise untranslatable_operator(source.name, f"its side output '{edge.output_tag}' is not translated yet")

    def _union(self, rdds: list[RDD]) -> RDD:
        return rdds[0] if len(rdds) == 1 else self.sc.union(rdds)
