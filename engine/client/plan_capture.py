"""Runs a user program only to capture its JobGraph, as Flink does with an uploaded jar.

Used by the Dispatcher in a subprocess: ``python -m millstream.engine.client.plan_capture
--out DIR [--parallelism N] [--default-parallelism N] [--python-dependencies JSON] program.py [args...]``
(the JSON: resolved ``-pyfs/-pyarch/-pyreq`` options, PythonDependencyOptions.to_dict()). The first ``execute()``
writes ``jobgraph.json`` and ``usercode.bin`` to DIR and stops the program.
Exit codes: 0 captured, 2 the program raised, 3 it never called execute().
"""
from __future__ import annotations

import argparse
import json
import os
import runpy
import sys
import traceback
from typing import TYPE_CHECKING, Any


from millstream.engine.client.context import apply_parallelism, set_context
from millstream.engine.client.python_options import PythonDependencyOptions
from millstream.engine.client.remote import register_program_modules
from millstream.engine.compat.pyflink_alias import install as install_pyflink_alias
from millstream.engine.runtime.python_dependencies import user_code_of

if TYPE_CHECKING:
    from millstream.engine.datastream.stream_execution_environment import StreamExecutionEnvironment


class ProgramAbort(BaseException):
    """Stops the user program after its job was captured (not an Exception, so user code cannot swallow it)."""


class PlanCaptureContext:
    def __init__(
        self,
        out_dir: str,
        parallelism: int | None,
        program_dir: str,
        default_parallelism: int | None = None,
        python_dependencies: PythonDependencyOptions | None = None,
    ) -> None:
        self.out_dir = out_dir
        self.parallelism = parallelism
        self.program_dir = program_dir
        self.default_parallelism = default_parallelism  # the JobManager's MILLSTREAM_PARALLELISM_DEFAULT
        self.python_dependencies = python_dependencies  # -pyfs/-pyarch/-pyreq from the run request

    def configure(self, env: "StreamExecutionEnvironment") -> None:
        apply_parallelism(env, self.parallelism, self.default_parallelism)
        if self.python_dependencies:  # as RemoteContext does for `millstream run`
            self.python_dependencies.apply(env)

    def submit(self, job_graph: Any, stream_graph: Any) -> Any:
        register_program_modules(self.program_dir)
        with open(os.path.join(self.out_dir, "usercode.bin"), "wb") as f:
            f.write(user_code_of(stream_graph))
        with open(os.path.join(self.out_dir, "jobgraph.json"), "w") as f:
            json.dump(job_graph.to_dict(), f)
        raise ProgramAbort()


class ExecutionPlanContext:
    """``millstream info``: the first ``execute()`` prints the job's execution plan (the JSON PyFlink's
    ``get_execution_plan`` gives) to ``out`` and stops the program; nothing is submitted."""

    def __init__(self, parallelism: int | None, out: Any) -> None:
        self.parallelism = parallelism
        self.out = out
        self.printed = False

    def configure(self, env: "StreamExecutionEnvironment") -> None:
        if self.parallelism:
            env.set_parallelism(self.parallelism)

    def submit(self, job_graph: Any, stream_graph: Any) -> Any:
        from millstream.engine.graph.json_generator import execution_plan

        self.out.write(execution_plan(stream_graph) + "\n")
        self.out.flush()
        self.printed = True
        raise ProgramAbort()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--parallelism", type=int, default=None)
    ap.add_argument("--default-parallelism", type=int, default=None)
    ap.add_argument("--python-dependencies", type=json.loads, default=None)
    ap.add_argument("program")
    ap.add_argument("args", nargs=argparse.REMAINDER)
    ns = ap.parse_args(argv)
    install_pyflink_alias()
    program_dir = os.path.dirname(os.path.abspath(ns.program))
    deps = PythonDependencyOptions.from_dict(ns.python_dependencies) if ns.python_dependencies else None
    # As `millstream run`: the -pyfs entries are importable by the program too, after its own directory.
    for entry in reversed(deps.client_path() if deps else []):
        sys.path.insert(0, entry)
    sys.path.insert(0, program_dir)
    sys.argv = [ns.program, *ns.args]
    set_context(PlanCaptureContext(ns.out, ns.parallelism, program_dir, ns.default_parallelism, deps))
    try:
        runpy.run_path(ns.program, run_name="__main__")
    except ProgramAbort:
        return 0
    except SystemExit as e:
        if e.code not in (0, None):
            print(f"the program exited with status {e.code} before submitting a job", file=sys.stderr)
            return 2
    except BaseException:
        traceback.print_exc()
        return 2
    print("the program finished without calling execute() or execute_and_collect()", file=sys.stderr)
    return 3


if __name__ == "__main__":
    sys.exit(main())
