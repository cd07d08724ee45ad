"""CheckpointConfig: PyFlink's setters, validation, and the JSON round trip through the JobGraph config."""
from __future__ import annotations

import json

import pytest

from millstream.engine.checkpoint.config import (
    JOB_CONFIG_KEY,
    CheckpointConfig,
    CheckpointingMode,
    ExternalizedCheckpointCleanup,
    ExternalizedCheckpointRetention,
    InvalidCheckpointConfig,
    parse_duration_ms,
)


def test_defaults_follow_flink() -> None:
    c = CheckpointConfig()
    assert not c.is_checkpointing_enabled()
    assert c.interval_ms == -1
    assert c.mode is CheckpointingMode.EXACTLY_ONCE
    assert c.timeout_ms == 600_000
    assert (c.min_pause_ms, c.max_concurrent, c.tolerable_failures, c.retained) == (0, 1, 0, 1)
    assert c.externalized is ExternalizedCheckpointRetention.NO_EXTERNALIZED_CHECKPOINTS
    assert not c.is_externalized_checkpoints_enabled()


def test_pyflink_setters_chain_and_getters_read_back() -> None:
    c = (
        CheckpointConfig()
        .set_checkpoint_interval(5000)
        .set_checkpointing_mode(CheckpointingMode.AT_LEAST_ONCE)
        .set_checkpoint_timeout(60_000)
        .set_min_pause_between_checkpoints(500)
        .set_max_concurrent_checkpoints(3)
        .set_tolerable_checkpoint_failure_number(2)
        .set_num_retained_checkpoints(4)
        .set_externalized_checkpoint_cleanup(ExternalizedCheckpointCleanup.RETAIN_ON_CANCELLATION)
        .set_checkpoint_storage_dir("file:///var/ckpt")
    )
    assert c.is_checkpointing_enabled()
    assert c.get_checkpoint_interval() == 5000
    assert c.get_checkpointing_mode() is CheckpointingMode.AT_LEAST_ONCE
    assert c.get_checkpoint_timeout() == 60_000
    assert c.get_min_pause_between_checkpoints() == 500
    assert c.get_max_concurrent_checkpoints() == 3
    assert c.get_tolerable_checkpoint_failure_number() == 2
    assert c.get_num_retained_checkpoints() == 4
    assert c.get_externalized_checkpoint_cleanup() is ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION
    assert c.is_externalized_checkpoints_enabled()
    assert c.get_checkpoint_storage_dir() == "/var/ckpt"


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"interval_ms": 5}, "interval must be -1 (disabled) or at least 10 ms, got 5"),
        ({"interval_ms": 0}, "interval must be -1"),
        ({"timeout_ms": 1}, "timeout must be at least 10 ms"),
        ({"min_pause_ms": -1}, "minimum pause between checkpoints must be at least 0"),
        ({"max_concurrent": 0}, "maximum concurrent checkpoints must be at least 1"),
        ({"tolerable_failures": -1}, "tolerable checkpoint failure number must be at least 0"),
        ({"retained": 0}, "number of retained checkpoints must be at least 1"),
        ({"interval_ms": "1000"}, "checkpoint interval must be an integer"),
        ({"mode": "SOMETIMES"}, "checkpointing mode must be one of EXACTLY_ONCE, AT_LEAST_ONCE"),
        ({"externalized": "KEEP"}, "externalized checkpoint retention must be one of"),
        ({"storage_dir": "  "}, "storage directory must be a non-empty path"),
    ],
)
def test_invalid_values_are_rejected_with_clear_errors(changes: dict, message: str) -> None:
    with pytest.raises(InvalidCheckpointConfig, match=message.replace("(", r"\(").replace(")", r"\)")):
        CheckpointConfig(**changes)


def test_a_rejected_setter_leaves_the_config_unchanged() -> None:
    c = CheckpointConfig(interval_ms=1000)
    with pytest.raises(InvalidCheckpointConfig):
        c.set_checkpoint_interval(3)
    assert c.interval_ms == 1000


def test_json_round_trip_through_the_job_graph_config() -> None:
    c = CheckpointConfig(
        interval_ms=2000,
        mode=CheckpointingMode.AT_LEAST_ONCE,
        retained=3,
        externalized=ExternalizedCheckpointRetention.DELETE_ON_CANCELLATION,
        storage_dir="/tmp/ck",
    )
    job_config = json.loads(json.dumps({JOB_CONFIG_KEY: c.to_dict()}))
    back = CheckpointConfig.from_job_config(job_config)
    assert back == c
    assert back.mode is CheckpointingMode.AT_LEAST_ONCE


def test_from_dict_names_unknown_keys() -> None:
    with pytest.raises(InvalidCheckpointConfig, match="unknown checkpoint config keys: intervall"):
        CheckpointConfig.from_dict({"intervall": 5})


def test_flink_option_keys_override_and_parse_durations() -> None:
    c = CheckpointConfig.from_job_config(
        {
            "execution.checkpointing.interval": "10 s",
            "execution.checkpointing.timeout": "2 min",
            "execution.checkpointing.min-pause": "500ms",
            "execution.checkpointing.mode": "at_least_once",
            "state.checkpoints.num-retained": "3",
            "state.checkpoints.dir": "file:///data/ck",
        }
    )
    assert (c.interval_ms, c.timeout_ms, c.min_pause_ms, c.retained) == (10_000, 120_000, 500, 3)
    assert c.mode is CheckpointingMode.AT_LEAST_ONCE
    assert c.storage_dir == "/data/ck"


def test_bad_flink_option_names_the_key() -> None:
    with pytest.raises(InvalidCheckpointConfig, match="execution.checkpointing.interval: not a duration"):
        CheckpointConfig.from_job_config({"execution.checkpointing.interval": "soon"})


def test_parse_duration_units() -> None:
    assert parse_duration_ms(250) == 250
    assert parse_duration_ms("3 h") == 3 * 3_600_000
    assert parse_duration_ms("1d") == 86_400_000
