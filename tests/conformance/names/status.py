"""Where each public PyFlink name stands in Millstream: supported, partial or not supported.

The recorded names (``pyflink_names.json``, dumped from real PyFlink by
``dump_pyflink_names.py``) are looked up through Millstream's ``pyflink``
alias. A placeholder from ``millstream.engine.compat.unsupported`` is "not supported" and
carries its own reason; a real object is "partial" when a note below says so or
when PyFlink's class has public members Millstream's lacks. Run this module to
regenerate ``docs/pyflink-names.md``::

    .venv/bin/python -m tests.conformance.names.status
"""
from __future__ import annotations

import importlib
import json
import os
from dataclasses import dataclass
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
RECORDED = os.path.join(HERE, "pyflink_names.json")
DOCS = os.path.join(HERE, "..", "..", "..", "docs", "pyflink-names.md")

# Members that hand out Java objects through Py4J: meaningless without a JVM. They exist and raise
# NotSupportedError (``java_only`` in millstream.engine.compat.unsupported); the page does not count
# them against a class, which would otherwise make every source, sink and tag "partial".
JAVA_ONLY_MEMBERS = {
    "get_java_function",
    "get_java_object",
    "get_java_output_tag",
    "get_java_slot_sharing_group",
    "get_java_memory_size",
}

# What is partial about names that exist, keyed by the defining module's PyFlink path.
NOTES: dict[str, str] = {
    "pyflink.common.job_client.JobClient": (
        "job id, status, cancel and the execution result as CompletableFutures; trigger_savepoint and "
        "stop_with_savepoint raise (use millstream savepoint / millstream stop or the REST API); no accumulators"
    ),
    "pyflink.common.execution_config.ExecutionConfig": (
        "parallelism, max parallelism, global job parameters, the auto-watermark interval (a chosen interval is "
        "strictly periodic, 0 turns periodic watermarks off) and disable_auto_generated_uids take effect; Kryo/Avro/closure-cleaner/object-reuse/"
        "latency-tracking/compression settings are recorded and returned only"
    ),
    "pyflink.datastream.slot_sharing_group.SlotSharingGroup": (
        "accepted and described; every operator shares the default group, resources are not enforced"
    ),
    "pyflink.datastream.checkpoint_storage.JobManagerCheckpointStorage": (
        "checkpoints go to the default checkpoint directory (a Millstream checkpoint must survive a JobManager restart)"
    ),
    "pyflink.datastream.state_backend.EmbeddedRocksDBStateBackend": (
        "selects Millstream's on-disk backend (LMDB with a write-back cache), not RocksDB; RocksDB options are recorded only"
    ),
    "pyflink.datastream.state_backend.PredefinedOptions": "RocksDB profiles: accepted and recorded, no effect",
    "pyflink.datastream.state.StateTtlConfig": (
        "TTL, update type (Disabled turns TTL off) and visibility take effect; expired entries are dropped when "
        "their key is touched, the cleanup strategies are recorded only"
    ),
    "pyflink.common.input_dependency_constraint.InputDependencyConstraint": "deprecated batch hint: accepted, no effect",
    "pyflink.datastream.window.TimeWindowSerializer": "a marker for custom assigners; windows are pickled",
    "pyflink.datastream.window.CountWindowSerializer": "a marker for custom assigners; windows are pickled",
    "pyflink.datastream.window.GlobalWindowSerializer": "a marker for custom assigners; windows are pickled",
    "pyflink.datastream.data_stream.DataStream": (
        "set_buffer_timeout is accepted but the job's buffer timeout "
        "applies; set_uid_hash matches state as a uid does; cache raises NotSupportedError"
    ),
    "pyflink.datastream.data_stream.KeyedStream": (
        "as DataStream; configuration calls (uid, set_parallelism...) raise TypeError with PyFlink's messages"
    ),
    "pyflink.datastream.stream_execution_environment.StreamExecutionEnvironment": (
        "enable_changelog_state_backend and set_default_local_parallelism are recorded only; add_python_file, "
        "add_python_archive and set_python_requirements ship with the job (archives: not on Spark); add_jars, "
        "add_classpaths, create_input, register_cached_file and set_python_executable raise NotSupportedError"
    ),
    "pyflink.checkpoint.config.CheckpointConfig": (
        "unaligned-checkpoint settings are accepted and stay off (barriers are aligned in exactly-once mode); "
        "set_fail_on_checkpointing_errors sets the tolerable failure number"
    ),
    "pyflink.common.watermark_strategy.WatermarkStrategy": "with_watermark_alignment is recorded; sources are not paused",
    "pyflink.datastream.checkpoint_storage.FileSystemCheckpointStorage": (
        "the path becomes the checkpoint directory; size thresholds and write buffer are recorded only"
    ),
    "pyflink.datastream.connectors.file_system.FileSink": (
        "row formats; for_bulk_format and BulkFormatBuilder raise NotSupportedError"
    ),
    "pyflink.datastream.connectors.file_system.FileSource": (
        "record stream formats (text lines); for_bulk_file_format raises NotSupportedError"
    ),
    "pyflink.common.config_options.ConfigOption": "typed keys; Configuration takes them by key string",
}


@dataclass(frozen=True)
class NameStatus:
    module: str
    name: str
    status: str  # supported | partial | not supported
    detail: str


def load_recorded() -> dict[str, Any]:
    with open(RECORDED) as f:
        return json.load(f)


def _defining_path(obj: Any, module: str, name: str) -> str:
    """PyFlink's path of the module that defines ``obj`` (for notes shared by re-exports)."""
    mod = getattr(obj, "__module__", None) or ""
    return f"{mod.replace('millstream.engine.', 'pyflink.', 1)}.{name}" if mod.startswith("millstream.engine.") else f"{module}.{name}"


def classify(module: str, name: str, entry: dict[str, Any]) -> NameStatus:
    from millstream.engine.compat.unsupported import is_unsupported

    mod = importlib.import_module(module)
    if not hasattr(mod, name):
        return NameStatus(module, name, "missing", "not defined")
    obj = getattr(mod, name)
    if is_unsupported(obj):
        return NameStatus(module, name, "not supported", obj.__not_supported__)
    notes = []
    note = NOTES.get(_defining_path(obj, module, name)) or NOTES.get(f"{module}.{name}")
    if note:
        notes.append(note)
    members = entry.get("members", [])
    missing = [m for m in members if not hasattr(obj, m)]
    if missing:
        notes.append("missing: " + ", ".join(missing))
    refused = [m for m in members if m not in JAVA_ONLY_MEMBERS and m not in missing and _raises_not_supported(obj, m)]
    if refused:
        notes.append("raise NotSupportedError: " + ", ".join(refused))
    return NameStatus(module, name, "partial" if notes else "supported", "; ".join(notes))


def _raises_not_supported(cls: Any, member: str) -> bool:
    """A member defined as an ``unsupported_method``: it exists, and calling it raises NotSupportedError."""
    from millstream.engine.compat.unsupported import unsupported_method

    for klass in getattr(cls, "__mro__", ()):
        if member in vars(klass):
            return isinstance(vars(klass)[member], unsupported_method)
    return False


def all_statuses() -> list[NameStatus]:
    import pyflink  # noqa: F401 (installs the alias)

    recorded = load_recorded()
    return [
        classify(module, name, entry)
        for module, names in recorded["modules"].items()
        for name, entry in sorted(names.items())
    ]


def render_markdown() -> str:
    statuses = all_statuses()
    version = load_recorded().get("pyflink_version")
    counts: dict[str, int] = {}
    for s in statuses:
        counts[s.status] = counts.get(s.status, 0) + 1
    lines = [
        "# PyFlink names in Millstream",
        "",
        f"Every public name of PyFlink {version}'s `pyflink.datastream` and `pyflink.common` packages, the",
        "submodules programs import from, and `pyflink.java_gateway`, and where it stands in Millstream. Generated by",
        "`.venv/bin/python -m tests.conformance.names.status` from `tests/conformance/names/pyflink_names.json`",
        "(recorded from real PyFlink by `dump_pyflink_names.py`; the `pyflink.java_gateway` entry was written from",
        "PyFlink's source, `flink-python/pyflink/java_gateway.py`, since the recording ran without it);",
        "`tests/conformance/names/test_pyflink_names.py` checks that this page is current, that every name",
        "imports and that every member PyFlink's classes have is there.",
        "",
        "- **supported**: behaves as in PyFlink.",
        "- **partial**: exists and works; the note says what differs, which PyFlink methods are missing or",
        "  which raise `NotSupportedError` (methods that only hand out Java objects, `get_java_*`, exist and",
        "  raise it with what to use instead; they are not counted).",
        "- **not supported**: importable, so a program that mentions it loads, but using it raises",
        "  `NotSupportedError` (a `NotImplementedError`) with the reason and what to use instead.",
        "",
        "Totals: " + ", ".join(f"{counts.get(k, 0)} {k}" for k in ("supported", "partial", "not supported", "missing")),
        "",
    ]
    current = None
    for s in statuses:
        if s.module != current:
            current = s.module
            lines += ["", f"## `{current}`", "", "| name | status | notes |", "|---|---|---|"]
        detail = s.detail.replace("|", "\\|")
        lines.append(f"| `{s.name}` | {s.status} | {detail} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    text = render_markdown()
    with open(DOCS, "w") as f:
        f.write(text)
    print(f"wrote {os.path.normpath(DOCS)}")


if __name__ == "__main__":
    main()
