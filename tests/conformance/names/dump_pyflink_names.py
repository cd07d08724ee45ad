"""Dump the public names of real PyFlink's user-facing modules to ``pyflink_names.json``.

Run it with the interpreter of a real PyFlink install (not Millstream's venv), e.g.::

    /tmp/pyflink/bin/python tests/conformance/names/dump_pyflink_names.py

A module's names are its ``__all__`` when it has one, else the public classes,
functions and constants it defines itself. For classes the public members
(methods, nested classes, enum members) are recorded too, so the docs can say
which methods are missing. The output is a recorded fact about PyFlink; the
test that reads it runs without PyFlink.
"""
from __future__ import annotations

import enum
import importlib
import inspect
import json
import os
import sys

MODULES = [
    "pyflink.common",
    "pyflink.common.configuration",
    "pyflink.common.config_options",
    "pyflink.common.execution_config",
    "pyflink.common.input_dependency_constraint",
    "pyflink.common.job_client",
    "pyflink.common.job_execution_result",
    "pyflink.common.job_id",
    "pyflink.common.job_status",
    "pyflink.common.restart_strategy",
    "pyflink.common.serialization",
    "pyflink.common.time",
    "pyflink.common.typeinfo",
    "pyflink.common.types",
    "pyflink.common.watermark_strategy",
    "pyflink.datastream",
    "pyflink.datastream.async_data_stream",
    "pyflink.datastream.async_retry_predicates",
    "pyflink.datastream.async_retry_strategies",
    "pyflink.datastream.checkpoint_config",
    "pyflink.datastream.checkpoint_storage",
    "pyflink.datastream.checkpointing_mode",
    "pyflink.datastream.data_stream",
    "pyflink.datastream.execution_mode",
    "pyflink.datastream.externalized_checkpoint_retention",
    "pyflink.datastream.functions",
    "pyflink.datastream.output_tag",
    "pyflink.datastream.slot_sharing_group",
    "pyflink.datastream.state",
    "pyflink.datastream.state_backend",
    "pyflink.datastream.stream_execution_environment",
    "pyflink.datastream.time_domain",
    "pyflink.datastream.timerservice",
    "pyflink.datastream.window",
    "pyflink.datastream.connectors",
    "pyflink.datastream.connectors.base",
    "pyflink.datastream.connectors.cassandra",
    "pyflink.datastream.connectors.dynamic_kafka",
    "pyflink.datastream.connectors.elasticsearch",
    "pyflink.datastream.connectors.file_system",
    "pyflink.datastream.connectors.hybrid_source",
    "pyflink.datastream.connectors.jdbc",
    "pyflink.datastream.connectors.kafka",
    "pyflink.datastream.connectors.kinesis",
    "pyflink.datastream.connectors.number_seq",
    "pyflink.datastream.connectors.pulsar",
    "pyflink.datastream.connectors.rabbitmq",
    "pyflink.datastream.formats",
    "pyflink.datastream.formats.avro",
    "pyflink.datastream.formats.csv",
    "pyflink.datastream.formats.json",
    "pyflink.datastream.formats.orc",
    "pyflink.datastream.formats.parquet",
    # Not DataStream API, but Flink's own tests call get_gateway(): Millstream has the module, which explains.
    "pyflink.java_gateway",
]


def _kind(obj: object) -> str:
    if inspect.isclass(obj):
        return "enum" if issubclass(obj, enum.Enum) else "class"
    if inspect.isfunction(obj) or inspect.isbuiltin(obj):
        return "function"
    if inspect.ismodule(obj):
        return "module"
    return "constant"


def _members(cls: type) -> list[str]:
    if issubclass(cls, enum.Enum):
        return sorted(m.name for m in cls)
    names = set()
    for klass in cls.__mro__:
        if klass.__module__.split(".")[0] != "pyflink":
            continue  # object, ABC, Generic, Enum...: not PyFlink's API
        names.update(n for n in vars(klass) if not n.startswith("_"))
    return sorted(names)


def public_names(module_name: str) -> dict[str, dict]:
    module = importlib.import_module(module_name)
    if hasattr(module, "__all__"):
        names = list(module.__all__)
    else:
        names = [
            n
            for n, v in vars(module).items()
            if not n.startswith("_")
            and (inspect.isclass(v) or inspect.isfunction(v))
            and getattr(v, "__module__", None) == module_name
        ]
    out = {}
    for name in sorted(set(names)):
        obj = getattr(module, name)
        entry = {"kind": _kind(obj)}
        if inspect.isclass(obj):
            entry["members"] = _members(obj)
        out[name] = entry
    return out


def main() -> None:
    import pyflink

    result = {"pyflink_version": getattr(pyflink, "__version__", None), "modules": {}}
    try:
        from pyflink.version import __version__

        result["pyflink_version"] = __version__
    except ImportError:
        pass
    for module_name in MODULES:
        result["modules"][module_name] = public_names(module_name)
    target = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pyflink_names.json")
    with open(target, "w") as f:
        json.dump(result, f, indent=1, sort_keys=True)
        f.write("\n")
    total = sum(len(v) for v in result["modules"].values())
    print(f"{total} names in {len(MODULES)} modules -> {target}", file=sys.stderr)


if __name__ == "__main__":
    main()
