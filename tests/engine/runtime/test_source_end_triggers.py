"""A source that reaches the end of its input never leaves a checkpoint trigger unanswered (issue 13,
item 4): a trigger that came with the last batch is taken, one that comes after the loop ended is
declined at once as "not ready", so the coordinator fails it fast without counting it."""
from __future__ import annotations

import threading
from typing import Any

from millstream.engine.datastream.connectors.datagen import DataGeneratorSource
from millstream.engine.datastream.stream_execution_environment import StreamExecutionEnvironment
from tests.engine.runtime.task_harness import TaskHarness, collect_sink

N = 300
_end_reached: dict[str, Any] = {}  # hook the test sets: called on the reader's thread at end of input


class _EndHookSource(DataGeneratorSource):
    """A bounded generator whose reader calls a hook when it reports the end of its input."""

    def create_reader(self, subtask: int, parallelism: int, position: Any = None) -> Any:
        reader = super().create_reader(subtask, parallelism, position)
        poll = reader.poll_batch

        def poll_batch(max_records: int) -> Any:
            batch = poll(max_records)
            hook = _end_reached.get("hook")
            if batch is None and hook is not None:
                hook()
            return batch

        reader.poll_batch = poll_batch
        return reader


def _job() -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    from millstream.engine.common.watermark_strategy import WatermarkStrategy

    ds = env.from_source(_EndHookSource(lambda i: i, N), WatermarkStrategy.no_watermarks(), "numbers")
    collect_sink(ds.map(lambda x: x * 2))
    return env


def test_a_trigger_that_arrives_with_the_end_of_input_is_taken(tmp_path) -> None:
    h = TaskHarness(_job(), str(tmp_path))
    fired = threading.Event()

    def at_end() -> None:
        if not fired.is_set():
            fired.set()
            h.trigger(1)  # lands in the source's trigger queue after its last poll

    _end_reached["hook"] = at_end
    try:
        h.start()
        done = h.await_checkpoint(1)  # before the fix: never acknowledged, the checkpoint timed out
        results = h.join()
    finally:
        _end_reached.clear()
    assert fired.is_set()
    assert sorted(results) == [2 * i for i in range(N)]
    assert done.checkpoint_id == 1 and not h.declines and not h.not_ready


def test_a_trigger_after_the_source_ended_is_declined_at_once_as_not_ready(tmp_path) -> None:
    h = TaskHarness(_job(), str(tmp_path)).start()
    assert sorted(h.join()) == [2 * i for i in range(N)]
    h.trigger(2)  # the slot still holds the finished task for a moment: it must answer anyway
    assert [cid for cid, _ in h.not_ready] == [2]
    assert "end of its input" in h.not_ready[0][1]
    assert not h.declines and 2 not in h.acks
