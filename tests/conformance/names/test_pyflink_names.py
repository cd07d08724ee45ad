"""Every public PyFlink name imports from Millstream's ``pyflink`` alias; unsupported ones explain themselves.

Runs without PyFlink: the names come from ``pyflink_names.json``, recorded from
real PyFlink 2.3 by ``dump_pyflink_names.py``.
"""
from __future__ import annotations

import importlib

import pytest

from tests.conformance.names.status import DOCS, all_statuses, load_recorded, render_markdown

RECORDED = load_recorded()["modules"]
NAMES = [(m, n) for m, names in RECORDED.items() for n in sorted(names)]


def test_the_recorded_list_covers_the_user_facing_modules() -> None:
    # A regenerated list that lost modules or names would make every other test here vacuous.
    assert len(RECORDED) >= 50 and len(NAMES) >= 300
    assert "KafkaSource" in RECORDED["pyflink.datastream.connectors.kafka"]
    assert "ProcessAllWindowFunction" in RECORDED["pyflink.datastream.functions"]


@pytest.mark.parametrize("module", sorted(RECORDED))
def test_every_name_imports(module: str) -> None:
    import pyflink  # noqa: F401 (installs the alias)

    mod = importlib.import_module(module)
    missing = [n for n in RECORDED[module] if not hasattr(mod, n)]
    assert not missing, f"{module} lacks {missing}"
    if RECORDED[module]:
        # ``from module import *`` style programs: the star import must not fail either.
        namespace: dict = {}
        exec(f"from {module} import *", namespace)  # noqa: S102 (a fixed module name from the recorded list)


def test_unsupported_names_raise_a_clear_error_naming_an_alternative() -> None:
    from millstream.engine.compat.unsupported import NotSupportedError

    unsupported = [s for s in all_statuses() if s.status == "not supported"]
    assert len(unsupported) >= 80  # connectors, formats, Java-only classes
    for s in unsupported:
        cls = getattr(importlib.import_module(s.module), s.name)
        with pytest.raises(NotSupportedError) as info:
            cls()
        message = str(info.value)
        assert f"{s.name} is not supported by Millstream" in message, message
        assert " Use " in message and message.endswith(" instead."), message
        assert isinstance(info.value, NotImplementedError)
        # Builders are reached through the class: they explain themselves too.
        with pytest.raises(NotSupportedError):
            cls.builder()


def test_connectors_and_formats_point_to_what_millstream_has() -> None:
    from pyflink.datastream.connectors.kafka import KafkaSource
    from pyflink.datastream.formats.csv import CsvReaderFormat

    with pytest.raises(NotImplementedError, match="RedisStreamSource"):
        KafkaSource.builder()
    with pytest.raises(NotImplementedError, match="text_line_format"):
        CsvReaderFormat.for_schema(None)


def test_key_names_are_real_not_placeholders() -> None:
    statuses = {(s.module, s.name): s.status for s in all_statuses()}
    for module, name in [
        ("pyflink.datastream.functions", "ProcessAllWindowFunction"),
        ("pyflink.datastream.functions", "AllWindowFunction"),
        ("pyflink.datastream.window", "SessionWindowTimeGapExtractor"),
        ("pyflink.common", "ExecutionConfig"),
        ("pyflink.datastream.state", "StateTtlConfig"),
        ("pyflink.datastream.state", "MapState"),
        ("pyflink.common.types", "RowKind"),
    ]:
        assert statuses[(module, name)] in ("supported", "partial"), (module, name)


def test_docs_page_is_current() -> None:
    with open(DOCS) as f:
        on_disk = f.read()
    assert on_disk == render_markdown(), "regenerate: .venv/bin/python -m tests.conformance.names.status"
