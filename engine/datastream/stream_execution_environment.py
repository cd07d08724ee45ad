"""``StreamExecutionEnvironment``: where a program declares sources and runs its job.

Where a job runs is decided by the execution context (``millstream.engine.client.context``):
in-process by default, a remote cluster under ``millstream run``, or plan
capture when the Dispatcher runs an uploaded program.
"""
from __future__ import annotations

import os
from dataclasses import replace
from typing import Any, Iterable

from millstream.engine.checkpoint.config import CheckpointConfig, CheckpointingMode
from millstream.engine.common.configuration import Configuration
from millstream.engine.common.execution_config import ExecutionConfig
from millstream.engine.compat.unsupported import not_supported
from millstream.engine.common.restart_strategy import RestartStrategyConfiguration
from millstream.engine.common.watermark_strategy import WatermarkStrategy
from millstream.engine.datastream.connectors.collection import CollectionSource
from millstream.engine.datastream.connectors.source import Source
from millstream.engine.datastream.connectors.source_function import SourceFunction, SourceFunctionSource
from millstream.engine.datastream.data_stream import DataStream
from millstream.engine.datastream.execution_mode import RuntimeExecutionMode
from millstream.engine.datastream.state_backend import StateBackend
from millstream.engine.graph.job_graph import JobGraph, build_job_graph
from millstream.engine.graph.stream_graph import build_stream_graph
from millstream.engine.graph.transformations import OperatorKind, Transformation

DEFAULT_BUFFER_TIMEOUT_MS = 10


class StreamExecutionEnvironment:
    """The entry point of every DataStream program."""

    def __init__(self, configuration: Configuration | None = None) -> None:
        self._config = Configuration(configuration) if configuration else Configuration()
        self._transformations: dict[int, Transformation] = {}
        # Transformations from this id on were added since the last execution: the next job runs them
        # and everything upstream of them, as Flink walks a job from its new transformations.
        self._pending_from = 1
        self._next_id = 1
        self._parallelism = self._config.get_integer("parallelism.default", 1)
        self._max_parallelism: int | None = None
        self._runtime_mode = RuntimeExecutionMode.STREAMING
        self._buffer_timeout_ms = DEFAULT_BUFFER_TIMEOUT_MS
        self._chaining = True
        self._job_parameters: dict[str, str] = {}
        self._checkpoint_config = CheckpointConfig()
        self._restart_strategy: RestartStrategyConfiguration | None = None
        self._execution_config = ExecutionConfig(self)
        self._python_files: list[str] = []  # add_python_file: shipped with every job (engine/runtime/python_dependencies.py)
        self._python_requirements: tuple[str, str | None] | None = None  # set_python_requirements
        self._python_archives: list[tuple[str, str]] = []  # add_python_archive: (zip path, target dir)

    @staticmethod
    def get_execution_environment(configuration: Configuration | None = None) -> "StreamExecutionEnvironment":
        from millstream.engine.client.context import current_context

        env = StreamExecutionEnvironment(configuration)
        current_context().configure(env)
        return env

    # -- settings ----------------------------------------------------------
    def set_parallelism(self, parallelism: int) -> "StreamExecutionEnvironment":
        if parallelism < 1:
            raise ValueError(f"parallelism must be at least 1, got {parallelism}")
        self._parallelism = int(parallelism)
        return self

    def get_parallelism(self) -> int:
        return self._parallelism

    def set_max_parallelism(self, max_parallelism: int) -> "StreamExecutionEnvironment":
        if not 0 < max_parallelism <= 32768:
            raise ValueError(f"max parallelism must be in 1..32768, got {max_parallelism}")
        self._max_parallelism = int(max_parallelism)
        return self

    def get_max_parallelism(self) -> int:
        from millstream.engine.graph.stream_graph import default_max_parallelism_for

        return self._max_parallelism or default_max_parallelism_for(self._parallelism)

    def set_runtime_mode(self, execution_mode: RuntimeExecutionMode) -> "StreamExecutionEnvironment":
        self._runtime_mode = RuntimeExecutionMode(execution_mode)
        return self

    def set_buffer_timeout(self, timeout_millis: int) -> "StreamExecutionEnvironment":
        # -1 in Flink means "flush only when full"; we keep it as a very long timeout.
        self._buffer_timeout_ms = int(timeout_millis)
        return self

    def get_buffer_timeout(self) -> int:
        return self._buffer_timeout_ms

    def disable_operator_chaining(self) -> "StreamExecutionEnvironment":
        self._chaining = False
        return self

    def is_chaining_enabled(self) -> bool:
        return self._chaining

    def enable_checkpointing(
        self, interval: int, mode: CheckpointingMode | None = None
    ) -> "StreamExecutionEnvironment":
        """Exactly-once (default) or at-least-once checkpoints every ``interval`` ms."""
        self._checkpoint_config.set_checkpoint_interval(interval)
        if mode is not None:
            self._checkpoint_config.set_checkpointing_mode(mode)
        return self

    def set_restart_strategy(self, restart_strategy_configuration: RestartStrategyConfiguration) -> None:
        self._restart_strategy = restart_strategy_configuration

    def get_restart_strategy(self) -> RestartStrategyConfiguration | None:
        return self._restart_strategy

    def get_checkpoint_config(self) -> CheckpointConfig:
        return self._checkpoint_config

    def get_checkpoint_interval(self) -> int:
        return self._checkpoint_config.interval_ms

    def set_state_backend(self, state_backend: "StateBackend") -> "StreamExecutionEnvironment":
        if not isinstance(state_backend, StateBackend):
            raise TypeError(f"expected a StateBackend, got {type(state_backend).__name__}")
        self._config.set_string("state.backend", state_backend.kind)
        if state_backend.is_incremental_checkpoints_enabled():
            self._config.set_string("state.backend.incremental", "true")
        threads = getattr(state_backend, "transfer_threads", None)
        if threads is not None:  # EmbeddedRocksDBStateBackend.set_number_of_transfer_threads
            self._config.set_string("state.backend.rocksdb.checkpoint.transfer.thread.num", str(threads))
        return self

    def get_config(self) -> ExecutionConfig:
        return self._execution_config

    def configure(self, configuration: Configuration) -> "StreamExecutionEnvironment":
        """Apply Flink options; later settings in the program still win."""
        self._config.add_all(configuration)
        if configuration.contains_key("parallelism.default"):
            self.set_parallelism(configuration.get_integer("parallelism.default"))
        return self

    def set_job_parameter(self, key: str, value: str) -> None:
        self._job_parameters[key] = value

    # -- PyFlink's other settings --------------------------------------------
    def get_checkpointing_mode(self) -> CheckpointingMode:
        return self._checkpoint_config.get_checkpointing_mode()

    get_checkpointing_consistency_mode = get_checkpointing_mode

    def is_unaligned_checkpoints_enabled(self) -> bool:
        return False  # checkpoints are always aligned (exactly-once) or unblocked (at-least-once)

    def is_force_unaligned_checkpoints(self) -> bool:
        return False

    def enable_changelog_state_backend(self, enabled: bool) -> "StreamExecutionEnvironment":
        # Recorded only: state is snapshot whole (by key group) at every checkpoint.
        self._changelog = bool(enabled)
        return self

    def is_changelog_state_backend_enabled(self) -> bool | None:
        return getattr(self, "_changelog", None)

    def set_default_savepoint_directory(self, directory: str) -> "StreamExecutionEnvironment":
        self._config.set_string("execution.checkpointing.savepoint-dir", directory)
        return self

    def get_default_savepoint_directory(self) -> str | None:
        return self._config.get_string("execution.checkpointing.savepoint-dir", "") or None

    def get_default_local_parallelism(self) -> int:
        return getattr(self, "_default_local_parallelism", self._parallelism)

    def set_default_local_parallelism(self, parallelism: int) -> "StreamExecutionEnvironment":
        """A local (in-process) environment's parallelism, as in Flink; a cluster's jobs keep theirs."""
        self._default_local_parallelism = int(parallelism)
        return self

    def is_chaining_of_operators_with_different_max_parallelism_enabled(self) -> bool:
        return True  # chaining looks at parallelism only

    def register_slot_sharing_group(self, slot_sharing_group: Any) -> "StreamExecutionEnvironment":
        return self  # every operator shares the default group (see slot_sharing_group.py)

    def close(self) -> None:
        pass  # nothing to release: jobs run in their own processes or the mini cluster's threads

    def add_jars(self, *jars_path: str) -> None:
        raise not_supported("add_jars", "Millstream runs no JVM, so jars cannot be loaded", "Python sources, sinks and functions")

    def add_classpaths(self, *classpaths: str) -> None:
        raise not_supported("add_classpaths", "Millstream runs no JVM", "Python sources, sinks and functions")

    def create_input(self, input_format: Any, type_info: Any = None) -> DataStream:
        raise not_supported("create_input", "Java InputFormats need a JVM", "from_source(FileSource...) or a custom Source")

    def register_cached_file(self, file_path: str, name: str, executable: bool = False) -> None:
        raise not_supported(
            "register_cached_file", "files are not shipped to TaskManagers", "a path on a volume every TaskManager mounts"
        )

    def add_python_file(self, file_path: str) -> None:
        """Ship a ``.py`` file, a package or other directory, or a ``.zip``/``.whl``/``.egg`` with the
        job: every TaskManager (and Spark executor) puts it on the import path before the job's code
        is loaded, as PyFlink puts it on the Python worker's PYTHONPATH."""
        if not isinstance(file_path, str) or not file_path:
            raise TypeError(f"add_python_file needs a path, got {file_path!r}")
        path = os.path.abspath(os.path.expanduser(file_path))
        if not os.path.exists(path):
            raise FileNotFoundError(f"add_python_file: {file_path!r} does not exist")
        if path not in self._python_files:
            self._python_files.append(path)

    def add_python_archive(self, archive_path: str, target_dir: str | None = None) -> None:
        """Ship a zip file with the job, extracted into the working directory of its tasks under
        ``target_dir`` (or the archive's file name), so functions open its files by relative path."""
        path = os.path.abspath(os.path.expanduser(archive_path))
        if not os.path.isfile(path):
            raise FileNotFoundError(f"add_python_archive: {archive_path!r} does not exist")
        import zipfile

        if not zipfile.is_zipfile(path):
            raise ValueError(f"add_python_archive: {archive_path!r} is not a zip file (only zip archives are supported, as in PyFlink)")
        target = target_dir if target_dir is not None else os.path.basename(path)
        if not target or os.path.isabs(target) or ".." in target.replace("\\", "/").split("/"):
            raise ValueError(f"add_python_archive: target_dir must be a relative directory name, got {target_dir!r}")
        self._python_archives.append((path, target))

    def set_python_requirements(self, requirements_file_path: str, requirements_cache_dir: str | None = None) -> None:
        """Install a requirements file's packages for the job's code on every TaskManager (pip, into a
        directory cached per requirements content). With ``requirements_cache_dir`` (wheels and
        sdists, e.g. from ``pip download -d``) they are installed from it alone, with no index."""
        for what, path in (("requirements file", requirements_file_path), ("requirements cache directory", requirements_cache_dir)):
            if path is not None and not os.path.exists(os.path.expanduser(path)):
                raise FileNotFoundError(f"set_python_requirements: the {what} {path!r} does not exist")
        self._python_requirements = (
            os.path.abspath(os.path.expanduser(requirements_file_path)),
            os.path.abspath(os.path.expanduser(requirements_cache_dir)) if requirements_cache_dir else None,
        )

    def set_python_executable(self, python_exec: str) -> None:
        raise not_supported(
            "set_python_executable", "tasks run in the TaskManager's own interpreter", "starting the TaskManagers with that Python"
        )

    # -- sources -----------------------------------------------------------
    def _reserve_id(self) -> int:
        """A transformation id for an operator PyFlink adds (key_by's map, print()'s conversion) that
        only the execution plan shows, so the plan's ids are PyFlink's."""
        tid = self._next_id
        self._next_id += 1
        return tid

    def _add(self, kind: OperatorKind, name: str, inputs: tuple[int, ...], **fields: Any) -> int:
        tid = self._next_id
        self._next_id += 1
        fields.setdefault("params", {})
        self._transformations[tid] = Transformation(id=tid, kind=kind, name=name, inputs=inputs, **fields)
        return tid

    def from_source(
        self,
        source: Source,
        watermark_strategy: WatermarkStrategy | None = None,
        source_name: str | None = None,
        type_info: Any = None,
    ) -> DataStream:
        if not isinstance(source, Source):
            raise TypeError(f"from_source expects a Source, got {type(source).__name__}")
        tid = self._add(
            OperatorKind.SOURCE,
            source_name or source.name(),
            (),
            function=source,
            output_type=type_info,
            bounded=source.is_bounded(),
            fixed_parallelism=None if source.parallel else 1,
        )
        stream = DataStream(self, tid)
        strategy = watermark_strategy or WatermarkStrategy.no_watermarks()
        if strategy.kind != "none" or strategy.timestamp_assigner is not None:
            # Flink stamps records inside the source; here a chained operator does it.
            stream = stream.assign_timestamps_and_watermarks(strategy)
        return stream

    def from_collection(self, collection: Iterable[Any], type_info: Any = None) -> DataStream:
        return self.from_source(CollectionSource(list(collection), type_info), None, "Collection Source", type_info)

    def add_source(self, source_func: SourceFunction, source_name: str = "Custom Source", type_info: Any = None) -> DataStream:
        if not isinstance(source_func, SourceFunction):
            raise TypeError(f"add_source expects a SourceFunction, got {type(source_func).__name__}")
        return self.from_source(SourceFunctionSource(source_func), None, source_name, type_info)

    # -- building ------------------------------------------------------------
    def _job_type(self) -> str:
        if self._runtime_mode is RuntimeExecutionMode.BATCH:
            return "BATCH"
        if self._runtime_mode is RuntimeExecutionMode.AUTOMATIC:
            sources = [t for t in self._job_transformations() if t.kind is OperatorKind.SOURCE]
            if sources and all(t.bounded for t in sources):
                return "BATCH"
        return "STREAMING"

    def _job_config(self) -> dict[str, Any]:
        return {
            "execution.runtime-mode": self._runtime_mode.value,
            "execution.buffer-timeout": self._buffer_timeout_ms,
            "parallelism.default": self._parallelism,
            "pipeline.max-parallelism": self.get_max_parallelism(),
            "pipeline.operator-chaining": self._chaining,
            "pipeline.global-job-parameters": dict(self._job_parameters),
            "execution.checkpointing": self._checkpoint_config.to_dict(),
            "restart-strategy": self._restart_strategy.to_dict() if self._restart_strategy else None,
            **self._execution_config.to_job_config(),
            **self._config.to_dict(),
        }

    def _sinks(self) -> list[Transformation]:
        return [t for t in self._job_transformations() if t.kind is OperatorKind.SINK]

    def _job_transformations(self) -> list[Transformation]:
        """What the next execution runs: the transformations added since the last one and all their
        upstreams. Streams stay usable after an execution (shared sources and operators are built
        again), while sinks an earlier execution ran are not run again."""
        todo = [tid for tid in self._transformations if tid >= self._pending_from]
        seen: set[int] = set()
        while todo:
            tid = todo.pop()
            if tid not in seen:
                seen.add(tid)
                todo.extend(self._transformations[tid].inputs)
        return [self._transformations[tid] for tid in sorted(seen)]

    def _executed(self) -> None:
        self._pending_from = self._next_id

    def _final_transformations(self) -> list[Transformation]:
        """The transformations with the environment's settings that operators need baked in."""
        interval = self._execution_config.get_auto_watermark_interval()
        out = []
        for t in self._job_transformations():
            if not self._execution_config.has_auto_generated_uids_enabled() and not t.kind.is_virtual and not t.uid:
                # Flink's rule: with auto-generated uids off, state could not be matched on restore.
                raise RuntimeError(
                    f"Auto generated UIDs have been disabled but no UID or hash has been assigned to operator '{t.name}'"
                )
            if t.kind is OperatorKind.TIMESTAMPS:
                explicit = self._execution_config.auto_watermark_interval_is_set()
                t = replace(t, params={**t.params, "auto_watermark_interval": interval, "auto_watermark_interval_explicit": explicit})
            out.append(t)
        return out

    def get_stream_graph(self, job_name: str = "Flink Streaming Job"):
        graph = build_stream_graph(self._final_transformations(), job_name, self._parallelism, self._max_parallelism)
        graph.python_files = list(self._python_files)  # read at submission, which packs them with the code
        graph.python_requirements = self._python_requirements
        graph.python_archives = list(self._python_archives)
        return graph

    def get_job_graph(self, job_name: str | None = None) -> tuple[JobGraph, Any]:
        """The JobGraph plus the stream graph that carries the user code."""
        if not self._job_transformations():
            raise RuntimeError("no operators defined in streaming topology; cannot execute")
        if not self._sinks():
            raise RuntimeError("no sinks defined in streaming topology; add print(), add_sink() or sink_to()")
        stream_graph = self.get_stream_graph(job_name or "Flink Streaming Job")
        job_graph = build_job_graph(stream_graph, self._job_type(), self._job_config(), self._chaining)
        return job_graph, stream_graph

    def get_execution_plan(self) -> str:
        """The program's operators as Flink's StreamGraph JSON (``nodes`` with ``pact``, ``contents``,
        ``predecessors``...), like PyFlink's; the job's transformations stay, so ``execute`` still runs it."""
        from millstream.engine.graph.json_generator import execution_plan

        if not self._transformations:
            raise RuntimeError("no operators defined in streaming topology; cannot execute")
        return execution_plan(self.get_stream_graph(), self._chaining, self._next_id)

    # -- execution -----------------------------------------------------------
    def execute(self, job_name: str | None = None):
        """Run the job and wait for it to end (in the remote case: as the context decides)."""
        from millstream.engine.client.context import current_context

        job_graph, stream_graph = self.get_job_graph(job_name)
        self._executed()  # as in Flink: the next execution runs only what is added from now on
        client = current_context().submit(job_graph, stream_graph)
        return client.get_job_execution_result()

    def execute_async(self, job_name: str | None = None):
        from millstream.engine.client.context import current_context

        from millstream.engine.common.job_client import JobClient

        job_graph, stream_graph = self.get_job_graph(job_name)
        self._executed()
        return JobClient(current_context().submit(job_graph, stream_graph))

    def _execute_and_collect(self, tid: int, job_name: str | None, limit: int | None):
        from millstream.engine.client.context import current_context

        if limit is not None and limit <= 0:
            raise ValueError(f"limit must be greater than 0, got {limit}")  # as Flink's executeAndCollect
        # One collect sink subtask, as in Flink: the client's positions and commits are for one stream.
        collect_tid = self._add(
            OperatorKind.SINK, "Collect Sink", (tid,), params={"sink": "collect"}, parallelism=1
        )
        # As PyFlink 2.3: the job is the collected stream alone; sinks declared and not yet executed
        # are dropped, not run (neither by this job nor by the next execute()).
        self._pending_from = collect_tid
        job_graph, stream_graph = self.get_job_graph(job_name)
        self._executed()
        client = current_context().submit(job_graph, stream_graph)
        results = client.collect(collect_tid, limit)
        if limit is None:
            return results
        with results:  # PyFlink returns the first ``limit`` records as a list, then cancels the job
            return list(results)
