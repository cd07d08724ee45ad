"""DataGeneratorSource: bounded splits, unbounded striding, resume; of the rate limit, only how long an idle poll waits."""
from __future__ import annotations

import pytest

from millstream.engine.datastream.connectors import DataGeneratorSource


def _drain(reader, batch=4):
    out = []
    while (b := reader.poll_batch(batch)) is not None:
        out.extend(b)
    return out


@pytest.mark.parametrize("parallelism", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("count", [0, 1, 7, 50])
def test_bounded_generator_splits_the_indices_exactly_once(count, parallelism):
    src = DataGeneratorSource(lambda i: f"r{i}", count)
    out = [v for i in range(parallelism) for v in _drain(src.create_reader(i, parallelism))]
    assert out == [f"r{i}" for i in range(count)]


def test_bounded_generator_resumes_from_its_snapshot():
    src = DataGeneratorSource(lambda i: i * i, 10)
    reader = src.create_reader(0, 2)  # indices 0..4
    assert reader.poll_batch(2) == [0, 1]
    pos = reader.snapshot()
    assert _drain(src.create_reader(0, 2, position=pos)) == [4, 9, 16]


def test_unbounded_generator_strides_per_subtask_and_never_ends():
    src = DataGeneratorSource(lambda i: i, None)
    assert not src.is_bounded()
    p = 3
    readers = [src.create_reader(i, p) for i in range(p)]
    seen = []
    for _ in range(4):
        for r in readers:
            batch = r.poll_batch(5)
            assert batch is not None and len(batch) == 5
            seen.extend(batch)
    assert sorted(seen) == list(range(60))
    assert readers[1].poll_batch(2) == [61, 64]


def test_unbounded_generator_resumes_from_its_snapshot():
    src = DataGeneratorSource(lambda i: i, None)
    reader = src.create_reader(1, 2)  # 1, 3, 5, ...
    assert reader.poll_batch(3) == [1, 3, 5]
    resumed = src.create_reader(1, 2, position=reader.snapshot())
    assert resumed.poll_batch(2) == [7, 9]


def test_bounded_flag_and_name():
    assert DataGeneratorSource(str, 3).is_bounded()
    assert DataGeneratorSource(str, 3).name() == "Data Generator"


def test_a_paced_reader_with_nothing_due_waits_no_longer_than_the_task_allows():
    """At 10 records/s nothing is due for 100 ms; a reader told (max_idle_s) that the task's next
    buffer flush is 5 ms away returns by then, so records already emitted leave on time, instead of
    napping 50 ms. The fastest of a few tries is compared, so a loaded machine cannot fail it."""
    import time

    def fastest_empty_poll(max_idle_s: float | None) -> float:
        times = []
        for _ in range(4):
            reader = DataGeneratorSource(lambda i: i, None, records_per_second=10).create_reader(0, 1)
            if max_idle_s is not None:
                reader.max_idle_s = max_idle_s
            t0 = time.monotonic()
            assert reader.poll_batch(10) == []
            times.append(time.monotonic() - t0)
        return min(times)

    assert fastest_empty_poll(None) >= 0.045  # without a hint: the reader's own 50 ms cap
    assert fastest_empty_poll(0.005) < 0.03


def test_a_paced_reader_that_fell_behind_emits_at_most_a_second_of_records_at_once():
    """A reader stalled for 5 s (its clock moved back here) does not flood the job with 5 s of records
    in one batch, and whatever is not due any more never comes due: as Flink's rate limiter, at most a
    second of records is stored."""
    reader = DataGeneratorSource(lambda i: i, 10_000, records_per_second=100).create_reader(0, 1)
    reader.poll_batch(10_000)  # starts the reader's clock
    reader.started -= 5.0
    import time

    first = reader.poll_batch(10_000)
    after_first = time.monotonic()
    assert 100 <= len(first) <= 102
    second = reader.poll_batch(10_000)
    # the backlog beyond the burst is gone, not delayed: only what came due since the first batch
    assert len(second) <= 2 + (time.monotonic() - after_first) * 100
