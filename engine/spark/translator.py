"""Translates a (JobGraph, StreamGraph) into a PySpark RDD pipeline: one function per operator kind.

Each stream node becomes an RDD with as many partitions as the node's
parallelism, so a partition plays the part of a native subtask. Edges become
repartitioning (or nothing); keyed operators route keys to partitions with
the native key-group assignment. Sinks become actions, run by ``SparkPlan.run``.
Nothing here does I/O beyond Spark itself: collected results go to a callback.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from engine.datastream.connectors.collection import CollectionSource
from engine.datastream.connectors.datagen import DataGeneratorSource
from engine.datastream.connectors.number_seq import NumberSequenceSource
from engine.datastream.connectors.source import Source
from engine.datastream.functions import Function
from engine.graph.job_graph import JobGraph
from engine.graph.stream_graph import StreamGraph, StreamNode
from engine.graph.transformations import OperatorKind, ShipStrategy, Transformation
from engine.spark import partitions as P
from engine.spark.validation import UntranslatableJob, check_job_graph, untranslatable_operator

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
def translate_map(rdd: RDD, t: Transformation, info: P.TaskInfo) -> RDD:
    return rdd.mapPartitionsWithIndex(P.map_partition(t.function, info))


def translate_flat_map(rdd: RDD, t: Transformation, info: P.TaskInfo) -> RDD:
    return rdd.mapPartitionsWithIndex(P.flat_map_partition(t.function, info))


def translate_filter(rdd: RDD, t: Transformation, info: P.TaskInfo) -> RDD:
    return rdd.mapPartitionsWithIndex(P.filter_partition(t.function, info), True)


def translate_process(rdd: RDD, t: Transformation, info: P.TaskInfo) -> RDD:
    return rdd.mapPartitionsWithIndex(P.process_partition(t.function, info))


# -- keyed operators -----------------------------------------------------------------
def translate_reduce(rdd: RDD, t: Transformation, info: P.TaskInfo, key_selector: Callable[[Any], Any]) -> RDD:
    """BATCH keyed reduce: ``reduceByKey`` (map-side combine), emitting only the final value per key."""
    fn = t.function
    if isinstance(fn, Function) and type(fn).open is not Function.open:
        reduce_fn: Callable[[Any, Any], Any] = P.ReduceCall(fn, info)  # it needs open() in each task
    else:
        reduce_fn = getattr(fn, "reduce", fn)
    partitioner = P.KeyPartitioner(info.max_parallelism, info.parallelism)
    return (
        rdd.map(lambda v: (key_selector(v), v))
        .reduceByKey(reduce_fn, numPartitions=info.parallelism, partitionFunc=partitioner)
        .values()
    )


def translate_keyed_process(
    rdd: RDD, t: Transformation, info: P.TaskInfo, key_selector: Callable[[Any], Any]
) -> RDD:
    """Flink's BATCH keyed processing: records grouped by key, in input order within a key."""
    sorted_rdd = rdd.mapPartitionsWithIndex(
        P.sort_keyed_partition(key_selector, info.max_parallelism)
    ).repartitionAndSortWithinPartitions(
        numPartitions=info.parallelism,
        partitionFunc=P.SortKeyPartitioner(info.max_parallelism, info.parallelism),
    )
    return sorted_rdd.mapPartitionsWithIndex(P.keyed_process_partition(t.function, info))


# -- edges -----------------------------------------------------------------------------
def translate_edge(rdd: RDD, strategy: ShipStrategy, node: StreamNode, key_selector: Any = None) -> RDD:
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
        partitioner = P.KeyPartitioner(node.max_parallelism, p)
        return rdd.map(lambda v: (partitioner(key_selector(v)), v)).partitionBy(p, _identity).values()
    raise untranslatable_operator(node.name, f"unknown ship strategy {strategy}")


def _identity(i: int) -> int:
    return i


# -- sinks --------------------------------------------------------------------------------
def translate_sink(rdd: RDD, t: Transformation, node: StreamNode, info: P.TaskInfo) -> SinkAction:
    kind = t.params.get("sink")
    name = f"Sink: {node.name}"
    if kind == "collect":
        return SinkAction(node.id, name, "collect", rdd)
    if kind == "print":
        fn = P.print_partition(t.params.get("identifier"), node.parallelism)
    elif kind == "function":
        fn = P.sink_function_partition(t.function, info)
    elif kind == "writer":
        fn = P.writer_partition(t.function, node.parallelism)
    else:
        raise untranslatable_operator(name, f"unknown sink '{kind}'")
    return SinkAction(node.id, name, kind, rdd, run=lambda: rdd.foreachPartition(_with_partition_index(fn)))


def _with_partition_index(fn: Callable[[int, Any], None]) -> Callable[[Any], None]:
    def run(it: Any) -> None:
        from pyspark import TaskContext

        fn(TaskContext.get().partitionId(), it)

    return run


_ONE_INPUT: dict[OperatorKind, Callable[[RDD, Transformation, P.TaskInfo], RDD]] = {
    OperatorKind.MAP: translate_map,
    OperatorKind.FLAT_MAP: translate_flat_map,
    OperatorKind.FILTER: translate_filter,
    OperatorKind.PROCESS: translate_process,
}

_KEYED: dict[OperatorKind, Callable[[RDD, Transformation, P.TaskInfo, Callable[[Any], Any]], RDD]] = {
    OperatorKind.REDUCE: translate_reduce,
    OperatorKind.KEYED_PROCESS: translate_keyed_process,
}


class _Translator:
    def __init__(self, sc: Any, job_graph: JobGraph, stream_graph: StreamGraph) -> None:
        self.sc = sc
        self.jg = job_graph
        self.sg = stream_graph
        self.rdds: dict[int, RDD] = {}
        self.vertex_name = {op.node_id: v.name for v in job_graph.vertices for op in v.operators}
        self.job_parameters = dict(job_graph.config.get("pipeline.global-job-parameters", {}))

    def info(self, node: StreamNode) -> P.TaskInfo:
        return P.TaskInfo(
            vertex_name=self.vertex_name.get(node.id, node.name),
            operator_name=node.name,
            parallelism=node.parallelism,
            max_parallelism=node.max_parallelism,
            job_parameters=self.job_parameters,
        )

    def build(self) -> SparkPlan:
        actions: list[SinkAction] = []
        persisted: list[RDD] = []
        # Node ids follow program order, so inputs always come first.
        for node_id in sorted(self.sg.nodes):
            node = self.sg.nodes[node_id]
            t = self.sg.transformations[node_id]
            if node.kind is OperatorKind.SINK:
                actions.append(translate_sink(self._input(node), t, node, self.info(node)))
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
        if node.kind in _KEYED:
            return _KEYED[node.kind](self._keyed_input(node), t, self.info(node), self.sg.key_selectors[node.id])
        if node.kind in _ONE_INPUT:
            return _ONE_INPUT[node.kind](self._input(node), t, self.info(node))
        raise untranslatable_operator(node.name, f"{node.kind.value} has no Spark translation yet")

    def _keyed_input(self, node: StreamNode) -> RDD:
        """The raw union of a keyed operator's inputs; its own shuffle does the routing."""
        edges = self.sg.in_edges(node.id)
        if not edges or any(e.ship_strategy is not ShipStrategy.HASH for e in edges) or node.id not in self.sg.key_selectors:
            raise untranslatable_operator(node.name, "a keyed operator needs key_by() on every input")
        return self._union([self.rdds[e.source] for e in edges])

    def _input(self, node: StreamNode) -> RDD:
        edges = self.sg.in_edges(node.id)
        if not edges:
            raise untranslatable_operator(node.name, "it has no input")
        selector = self.sg.key_selectors.get(node.id)
        rdd = self._union([translate_edge(self.rdds[e.source], e.ship_strategy, node, selector) for e in edges])
        if rdd.getNumPartitions() > node.parallelism:
            # A union of forwarded inputs: each instance reads several upstream partitions, as in native.
            rdd = rdd.coalesce(node.parallelism)
        return rdd

    def _union(self, rdds: list[RDD]) -> RDD:
        return rdds[0] if len(rdds) == 1 else self.sc.union(rdds)
