"""NumberSequenceSource: even splits of [start, end] and resumable readers."""
from __future__ import annotations

import pytest

from millstream.engine.datastream.connectors import NumberSequenceSource
from millstream.engine.datastream.connectors.number_seq import split_range


def _drain(reader, batch=3):
    out = []
    while (b := reader.poll_batch(batch)) is not None:
        out.extend(b)
    return out


@pytest.mark.parametrize("parallelism", [1, 2, 3, 4, 5])
@pytest.mark.parametrize(("start", "end"), [(1, 10), (0, 0), (-5, 7), (1, 3), (100, 1099)])
def test_splits_cover_the_range_exactly_once(start, end, parallelism):
    src = NumberSequenceSource(start, end)
    per_subtask = [_drain(src.create_reader(i, parallelism)) for i in range(parallelism)]
    assert [v for part in per_subtask for v in part] == list(range(start, end + 1))
    sizes = [len(p) for p in per_subtask]
    assert max(sizes) - min(sizes) <= 1


def test_split_range_is_half_open_and_contiguous():
    assert [split_range(1, 10, i, 3) for i in range(3)] == [(1, 4), (4, 7), (7, 11)]


def test_reader_resumes_from_its_snapshot():
    src = NumberSequenceSource(1, 20)
    reader = src.create_reader(1, 2)  # owns 11..20
    assert reader.poll_batch(4) == [11, 12, 13, 14]
    pos = reader.snapshot()
    rest = _drain(reader)
    resumed = src.create_reader(1, 2, position=pos)
    assert _drain(resumed) == rest == list(range(15, 21))
    end = resumed.snapshot()
    assert src.create_reader(1, 2, position=end).poll_batch(10) is None


def test_poll_batch_respects_max_records_and_ends_with_none():
    reader = NumberSequenceSource(1, 5).create_reader(0, 1)
    assert reader.poll_batch(2) == [1, 2]
    assert reader.poll_batch(10) == [3, 4, 5]
    assert reader.poll_batch(10) is None
    assert reader.poll_batch(10) is None


def test_bounded_parallel_and_named():
    src = NumberSequenceSource(1, 2)
    assert src.is_bounded() and src.parallel and src.name() == "Sequence Source"


def test_end_before_start_raises():
    with pytest.raises(ValueError):
        NumberSequenceSource(5, 4)
