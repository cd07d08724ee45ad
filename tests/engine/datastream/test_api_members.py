"""Smaller PyFlink methods added for issue 12: what they do here, or how they refuse."""
from __future__ import annotations

import pytest

from millstream.engine.common.configuration import Configuration
from millstream.engine.common.restart_strategy import RestartStrategies, RestartStrategyConfiguration
from millstream.engine.common.time import Duration
from millstream.engine.common.watermark_strategy import WatermarkStrategy
from millstream.engine.compat.unsupported import NotSupportedError
from millstream.engine.datastream.checkpoint_storage import FileSystemCheckpointStorage, JobManagerCheckpointStorage
from millstream.engine.datastream.stream_execution_environment import StreamExecutionEnvironment
from millstream.engine.windowing.assigners import TumblingEventTimeWindows


def test_streams_know_their_environment_and_config():
    env = StreamExecutionEnvironment.get_execution_environment()
    ds = env.from_collection([1])
    assert ds.get_execution_environment() is env and ds.get_execution_config() is env.get_config()
    windowed = ds.key_by(lambda x: x).window(TumblingEventTimeWindows.of(10))
    assert windowed.get_execution_environment() is env
    assert windowed.get_input_type() is not None


def test_set_uid_hash_names_the_operator_state_like_a_uid():
    env = StreamExecutionEnvironment.get_execution_environment()
    m = env.from_collection([1]).map(str).set_uid_hash("2c5cf3c1e1ba1e1c5bc04d8e9d4c6b8a")
    assert m._t.uid == "uid-hash:2c5cf3c1e1ba1e1c5bc04d8e9d4c6b8a"
    m.print()
    again = StreamExecutionEnvironment.get_execution_environment()
    again.from_collection([1]).map(str).set_uid_hash("2c5cf3c1e1ba1e1c5bc04d8e9d4c6b8a").print()
    ids = lambda e: sorted(n.operator_id for n in e.get_stream_graph().nodes.values())  # noqa: E731
    assert ids(env) == ids(again)


def test_unsupported_stream_and_environment_calls_say_what_to_use():
    env = StreamExecutionEnvironment.get_execution_environment()
    ds = env.from_collection([1])
    with pytest.raises(NotSupportedError, match="FileSink"):
        ds.cache()
    with pytest.raises(TypeError, match="Cache for KeyedStream is not supported."):
        ds.key_by(lambda x: x).cache()
    with pytest.raises(TypeError, match="Set uid for KeyedStream is not supported."):
        ds.key_by(lambda x: x).uid("u")
    for call in (lambda: env.add_jars("a.jar"), lambda: env.add_classpaths("x"), lambda: env.create_input(None),
                 lambda: env.register_cached_file("f", "n"), lambda: env.set_python_executable("python3")):
        with pytest.raises(NotSupportedError, match=" instead."):
            call()


def test_environment_settings_pyflink_has():
    env = StreamExecutionEnvironment.get_execution_environment()
    env.enable_checkpointing(1000)
    assert env.get_checkpointing_mode() == env.get_checkpoint_config().get_checkpointing_mode()
    assert env.is_unaligned_checkpoints_enabled() is False
    env.set_default_savepoint_directory("/tmp/savepoints")
    assert env.get_default_savepoint_directory() == "/tmp/savepoints"
    assert env.is_changelog_state_backend_enabled() is None
    env.enable_changelog_state_backend(True)
    assert env.is_changelog_state_backend_enabled() is True
    env.set_default_local_parallelism(3)
    assert env.get_default_local_parallelism() == 3
    assert env.register_slot_sharing_group(object()) is env
    env.close()


def test_checkpoint_storage_objects_set_the_directory():
    env = StreamExecutionEnvironment.get_execution_environment()
    config = env.get_checkpoint_config()
    config.set_checkpoint_storage(FileSystemCheckpointStorage("file:///tmp/chk"))
    assert config.get_checkpoint_storage_dir() == "/tmp/chk"
    config.set_checkpoint_storage(JobManagerCheckpointStorage())
    assert config.get_checkpoint_storage_dir() is None  # the cluster's default directory


def test_configuration_methods():
    c = Configuration.from_dict({"a": "1"})
    c.set_float("f", 2.5).set_bytearray("b", b"\x00\x01")
    assert c.get_float("f") == 2.5 and c.get_bytearray("b") == bytearray(b"\x00\x01")
    assert c.key_set() == {"a", "f", "b"} and c.remove_config("a") and not c.remove_config("a")
    target: dict = {}
    c.add_all_to_dict(target)
    assert set(target) == {"f", "b"}
    assert Configuration.parse_list_value("[x, 'y z']") == ["x", "y z"]
    assert Configuration.parse_list_value("x;y") == ["x", "y"] and Configuration.parse_list_value("") == []


def test_restart_strategy_classes_and_time_helpers():
    fixed = RestartStrategies.fixed_delay_restart(3, Duration.of_seconds(2))
    assert isinstance(fixed, RestartStrategies.FixedDelayRestartStrategyConfiguration)
    assert fixed.get_restart_attempts() == 3 and fixed.get_delay_between_attempts_interval() == Duration.of_millis(2000)
    assert RestartStrategyConfiguration.from_dict(fixed.to_dict()) == fixed
    assert isinstance(RestartStrategies.no_restart(), RestartStrategies.NoRestartStrategyConfiguration)
    assert "fixed delay" in fixed.get_description()
    assert Duration.of_nanos(5_000_000) == Duration.of_millis(5)
    aligned = WatermarkStrategy.for_monotonous_timestamps().with_watermark_alignment("g", Duration.of_seconds(1))
    assert aligned.alignment == ("g", 1000, 1000) and aligned.kind == "monotonous"


def test_checkpoint_config_accepts_pyflinks_unaligned_and_failure_settings():
    env = StreamExecutionEnvironment.get_execution_environment()
    config = env.get_checkpoint_config()
    config.enable_unaligned_checkpoints()
    config.set_force_unaligned_checkpoints(True)
    config.set_alignment_timeout(Duration.of_seconds(1))
    assert not config.is_unaligned_checkpoints_enabled() and not config.is_force_unaligned_checkpoints()
    assert config.get_alignment_timeout() == Duration.of_millis(0)
    config.set_fail_on_checkpointing_errors(False)
    assert not config.is_fail_on_checkpointing_errors() and config.get_tolerable_checkpoint_failure_number() == 2**31 - 1
    config.set_fail_on_checkpointing_errors(True)
    assert config.is_fail_on_checkpointing_errors() and config.get_tolerable_checkpoint_failure_number() == 0


def test_async_io_is_real_and_python_dependency_calls_refuse_clearly():
    from millstream.engine.datastream import AsyncDataStream
    from millstream.engine.datastream.functions import AsyncFunction

    class Lookup(AsyncFunction[str, str]):  # subscripted in a class statement, as PyFlink's example does
        async def async_invoke(self, value):
            return [value]

    Lookup()  # the async I/O names are real classes now (tests/engine/runtime/test_async_wait.py runs them)
    with pytest.raises(TypeError, match="AsyncDataStream expects a DataStream"):
        AsyncDataStream.unordered_wait(None, Lookup(), None)
    env = StreamExecutionEnvironment.get_execution_environment()
    with pytest.raises(FileNotFoundError, match="x.py"):  # shipped since issue 15: a missing file is named
        env.add_python_file("x.py")
    with pytest.raises(FileNotFoundError, match="requirements.txt"):
        env.set_python_requirements("requirements.txt")
    with pytest.raises(FileNotFoundError, match="a.zip"):
        env.add_python_archive("a.zip")
