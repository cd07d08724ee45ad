"""The execution context: decides where ``execute()`` sends a job.

Like Flink's ContextEnvironment, the launcher (the CLI, or the Dispatcher's
plan capture) installs a context before running a user program; a program
run directly with ``python job.py`` gets the in-process MiniCluster.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from millstream.engine.client.python_options import PythonDependencyOptions
    from millstream.engine.datastream.stream_execution_environment import StreamExecutionEnvironment
    from millstream.engine.graph.job_graph import JobGraph
    from millstream.engine.graph.stream_graph import StreamGraph


class ExecutionContext(Protocol):
    def configure(self, env: "StreamExecutionEnvironment") -> None:
        """Apply launcher settings (e.g. ``--parallelism``) to a new environment."""

    def submit(self, job_graph: "JobGraph", stream_graph: "StreamGraph") -> Any:
        """Start the job; return a JobClient."""


class LocalContext:
    def __init__(self, parallelism: int | None = None, python_dependencies: "PythonDependencyOptions | None" = None) -> None:
        # As Flink's local environment: without a parallelism, one subtask per CPU core.
        self.parallelism = parallelism or os.cpu_count() or 1
        self.python_dependencies = python_dependencies  # -pyfs/-pyarch/-pyreq of `millstream run --local`

    def configure(self, env: "StreamExecutionEnvironment") -> None:
        if self.parallelism:
            env.set_parallelism(self.parallelism)
        if self.python_dependencies:
            self.python_dependencies.apply(env)

    def submit(self, job_graph: "JobGraph", stream_graph: "StreamGraph") -> Any:
        from millstream.engine.client.mini_cluster import MiniCluster

        return MiniCluster().submit(job_graph, stream_graph)


def apply_parallelism(env: "StreamExecutionEnvironment", parallelism: int | None, default: int | None) -> None:
    """A launcher's parallelism settings on a new environment, in Flink's order: ``parallelism`` (``-p``)
    wins; ``default`` (the cluster's ``parallelism.default``) applies only when the program's own
    Configuration names none. What the program sets later (``env.set_parallelism``) wins over both."""
    if parallelism:
        env.set_parallelism(parallelism)
    elif default and not env._config.contains_key("parallelism.default"):
        env.set_parallelism(default)


_current: ExecutionContext = LocalContext()


def current_context() -> ExecutionContext:
    return _current


def set_context(ctx: ExecutionContext) -> ExecutionContext:
    """Install a context; returns the previous one so callers can restore it."""
    global _current
    previous = _current
    _current = ctx
    return previous
