"""Boolean options read as Flink reads them: true or false in any case, anything else an error."""
from __future__ import annotations

import pytest

from millstream.engine.common.config_options import ConfigOptions, parse_boolean
from millstream.engine.common.configuration import Configuration
from millstream.engine.runtime.operator_chain import _flag


@pytest.mark.parametrize("text,expected", [("true", True), ("TRUE", True), (" True ", True), ("false", False), ("False", False), (True, True)])
def test_true_and_false_in_any_case(text, expected) -> None:
    assert parse_boolean(text) is expected


@pytest.mark.parametrize("text", ["yes", "1", "", "on", "truee"])
def test_anything_else_is_an_error_not_a_silent_false(text) -> None:
    with pytest.raises(ValueError, match="Expected either true or false"):
        parse_boolean(text)
    with pytest.raises(ValueError, match="Expected either true or false"):
        Configuration().set_string("k", text).get_boolean("k")
    with pytest.raises(ValueError, match="Expected either true or false"):
        ConfigOptions.key("k").boolean_type().default_value(False).parse(text)
    # a job option the task reads: the failure names the option
    with pytest.raises(ValueError, match="job option state.backend.incremental"):
        _flag({"state.backend.incremental": text}, "state.backend.incremental")


def test_an_absent_option_takes_its_default() -> None:
    assert _flag({}, "state.backend.incremental") is False
    assert _flag({}, "x", default=True) is True
    assert Configuration().get_boolean("k", True) is True


def test_a_local_run_refuses_a_bad_flag_before_any_task_starts() -> None:
    """In-process execution refuses what a cluster's REST submission refuses, with the same message."""
    from millstream.engine.datastream import StreamExecutionEnvironment
    from millstream.engine.graph.validation import InvalidJobGraph

    ran: list[int] = []
    env = StreamExecutionEnvironment().set_parallelism(1)
    env.configure(Configuration().set_string("state.backend.incremental", "yes"))
    env.from_collection([1, 2]).map(lambda x: ran.append(x) or x).print()
    with pytest.raises(InvalidJobGraph, match="config option 'state.backend.incremental': Unrecognized option for boolean"):
        env.execute("bad flag")
    assert ran == []
