"""CollectionSource: a fixed list read by a single subtask."""
from __future__ import annotations

from millstream.engine.datastream.connectors.collection import CollectionSource


def test_reads_all_values_in_order_in_batches():
    reader = CollectionSource(["a", "b", "c", "d", "e"]).create_reader(0, 1)
    assert reader.poll_batch(2) == ["a", "b"]
    assert reader.poll_batch(2) == ["c", "d"]
    assert reader.poll_batch(2) == ["e"]
    assert reader.poll_batch(2) is None


def test_resumes_from_its_snapshot():
    src = CollectionSource(list(range(10)))
    reader = src.create_reader(0, 1)
    reader.poll_batch(4)
    assert reader.snapshot() == [[4, 10]]  # one split: [next index, end index]
    assert src.create_reader(0, 1, position=[[4, 10]]).poll_batch(100) == [4, 5, 6, 7, 8, 9]


def test_copies_its_input():
    values = [1, 2]
    src = CollectionSource(values)
    values.append(3)
    assert src.create_reader(0, 1).poll_batch(10) == [1, 2]


def test_empty_collection_ends_at_once():
    assert CollectionSource([]).create_reader(0, 1).poll_batch(10) is None


def test_is_bounded_and_non_parallel():
    src = CollectionSource([1])
    assert src.is_bounded()
    assert src.parallel is False
    assert src.name() == "Collection Source"
