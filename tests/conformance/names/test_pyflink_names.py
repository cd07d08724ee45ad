"""Every public PyFlink name imports from Millstream's ``pyflink`` alias; unsupported ones explain themselves.

Runs without PyFlink: the names come from ``pyflink_names.json``, recorded from
real PyFlink 2.3 by ``dump_pyflink_names.py``.
"""
from __future__ import annotations

import importlib
import inspect

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
        obj = getattr(importlib.import_module(s.module), s.name)
        with pytest.raises(NotSupportedError) as info:
            obj()
        _assert_explains(str(info.value), s.name)
        assert isinstance(info.value, NotImplementedError)
        if inspect.isclass(obj):
            # Builders are reached through the class: they explain themselves too.
            with pytest.raises(NotSupportedError):
                obj.builder()


def _assert_explains(message: str, name: str) -> None:
    assert f"{name} is not supported by Millstream" in message, message
    assert " Use " in message and message.endswith(" instead."), message


CLASSES = [
    (m, n, entry["members"]) for m, names in RECORDED.items() for n, entry in sorted(names.items()) if entry.get("members")
]


@pytest.mark.parametrize(("module", "name", "members"), CLASSES, ids=[f"{m}.{n}" for m, n, _ in CLASSES])
def test_every_member_of_a_class_exists_or_explains_itself(module: str, name: str, members: list[str]) -> None:
    """Each method, nested class and enum member PyFlink's class has is there: a program may call it,
    subclass it or compare with it. Unsupported ones raise NotSupportedError, never AttributeError."""
    from millstream.engine.compat.unsupported import NotSupportedError, is_unsupported

    import pyflink  # noqa: F401 (installs the alias)

    cls = getattr(importlib.import_module(module), name)
    missing = []
    for member in members:
        try:
            getattr(cls, member)
        except NotSupportedError as e:
            # Only a placeholder class refuses the lookup itself; it says why.
            assert is_unsupported(cls), f"{module}.{name}.{member}: {e}"
            _assert_explains(str(e), name)
        except AttributeError:
            missing.append(member)
    assert not missing, f"{module}.{name} lacks {missing}"


def test_the_member_check_has_members_to_check() -> None:
    # Without recorded members the test above would pass over nothing.
    assert len(CLASSES) >= 150 and sum(len(ms) for _, _, ms in CLASSES) >= 1000
    assert "register_next_fire_timestamp" in RECORDED["pyflink.datastream.window"]["ContinuousEventTimeTrigger"]["members"]


def test_java_only_members_raise_with_the_alternative() -> None:
    """PyFlink's get_java_* hand out the Py4J object behind a Python one: Millstream's raise and say what to use."""
    from millstream.engine.compat.unsupported import NotSupportedError, is_unsupported

    from tests.conformance.names.status import JAVA_ONLY_MEMBERS

    import pyflink  # noqa: F401 (installs the alias)

    checked = 0
    for module, name, members in CLASSES:
        cls = getattr(importlib.import_module(module), name)
        if is_unsupported(cls):
            continue  # the class itself refuses (test_unsupported_names_raise_a_clear_error_naming_an_alternative)
        for member in set(members) & JAVA_ONLY_MEMBERS:
            if name == "TypeInformation" or name.endswith("TypeInfo"):
                continue  # get_java_type_info: Millstream's type information answers it itself
            with pytest.raises(NotSupportedError) as info:
                getattr(cls, member)()
            message = str(info.value)
            assert f"{name}.{member} is not supported by Millstream" in message, message
            assert " Use " in message and message.endswith(" instead."), message
            checked += 1
    assert checked >= 13


def test_java_gateway_get_gateway_says_there_is_no_jvm() -> None:
    # Apache Flink's own tests call get_gateway() to reach Java classes; here it explains instead.
    from millstream.engine.compat.unsupported import NotSupportedError

    from pyflink.java_gateway import get_gateway, import_flink_view

    with pytest.raises(NotSupportedError, match="Millstream runs no JVM"):
        get_gateway()
    with pytest.raises(NotSupportedError, match="import_flink_view is not supported"):
        import_flink_view(object())  # PyFlink's signature: the refusal, not a TypeError


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
