"""Source positions as lists of split states: a job stopped part way at one parallelism and resumed
at another reads every record exactly once (2 -> 3 and 3 -> 1), through ``redistribute_splits``."""
from __future__ import annotations

import msgpack
import pytest

from millstream.engine.checkpoint.rescale import StateRestoreError, redistribute_splits
from millstream.engine.datastream.connectors import DataGeneratorSource, NumberSequenceSource
from millstream.engine.datastream.connectors.collection import CollectionSource


def _drain(reader, limit=None, batch=7):
    out = []
    while limit is None or len(out) < limit:
        b = reader.poll_batch(batch if limit is None else min(batch, limit - len(out)))
        if not b:  # the end, or an unbounded subtask left without splits
            break
        out.extend(b)
    return out


def _run_in_stages(source, stages, reads):
    """Read ``reads[i]`` records per subtask at parallelism ``stages[i]`` (None: to the end), snapshot,
    and resume the next stage from the redistributed splits."""
    seen = []
    positions = None
    for parallelism, limit in zip(stages, reads):
        old = positions
        positions = {}
        for i in range(parallelism):
            splits = None if old is None else redistribute_splits(old, i, parallelism, len(old))
            reader = source.create_reader(i, parallelism, splits)
            seen.extend(_drain(reader, limit))
            snap = reader.snapshot()
            assert msgpack.unpackb(msgpack.packb(snap)) == snap, "split states must be msgpack-able"
            positions[i] = snap
    return seen


@pytest.mark.parametrize("stages", [(2, 3, 1), (3, 1), (2, 3), (1, 4, 2)])
def test_number_sequence_reads_every_number_once_across_rescales(stages):
    src = NumberSequenceSource(1, 1000)
    seen = _run_in_stages(src, stages, [37] * (len(stages) - 1) + [None])
    assert sorted(seen) == list(range(1, 1001))


@pytest.mark.parametrize("stages", [(2, 3, 1), (3, 1)])
def test_bounded_generator_reads_every_index_once_across_rescales(stages):
    src = DataGeneratorSource(lambda i: i * 10, 500)
    seen = _run_in_stages(src, stages, [23] * (len(stages) - 1) + [None])
    assert sorted(seen) == [i * 10 for i in range(500)]


def test_unbounded_generator_keeps_every_stride_after_2_to_3_and_3_to_1():
    src = DataGeneratorSource(lambda i: i, None)
    seen = _run_in_stages(src, (2, 3, 1), [10, 12, 40])
    assert len(seen) == len(set(seen)), "an index was generated twice"
    # Each original stride (evens, odds) went on where it stopped: each is a gapless prefix.
    evens, odds = sorted(v for v in seen if v % 2 == 0), sorted(v for v in seen if v % 2)
    assert evens == list(range(0, 2 * len(evens), 2)) and odds == list(range(1, 2 * len(odds), 2))
    assert len(evens) > 22 and len(odds) > 22, "both strides were read after the rescales"


def test_collection_resumes_its_one_split():
    src = CollectionSource(list("abcdefg"))
    reader = src.create_reader(0, 1)
    assert reader.poll_batch(3) == list("abc")
    assert src.create_reader(0, 1, reader.snapshot()).poll_batch(10) == list("defg")


def test_a_subtask_given_no_splits_reads_nothing():
    assert NumberSequenceSource(1, 10).create_reader(2, 3, []).poll_batch(5) is None


def test_bad_positions_are_refused_clearly():
    with pytest.raises(TypeError, match="Sequence Source.*list of split states"):
        NumberSequenceSource(1, 10).create_reader(0, 1, 5)
    with pytest.raises(TypeError, match=r"\[next, end\]"):
        NumberSequenceSource(1, 10).create_reader(0, 1, [[1, 2, 3]])
    with pytest.raises(TypeError, match=r"\[k, stride, residue\]"):
        DataGeneratorSource(lambda i: i, None).create_reader(0, 1, [[0, 1]])
    with pytest.raises(StateRestoreError, match="older version"):
        redistribute_splits({0: 17}, 0, 2, 1)
