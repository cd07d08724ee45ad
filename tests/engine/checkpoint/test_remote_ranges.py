"""Ranged reads from a remote store (``RemoteFileSystem.read_ranges``): the ranges of a file that lie
close together go in one request (``coalesced``), and a file's spans go to the store together.

The spans are checked as a pure function; the reads through fsspec's in-memory file system, with the
requests it serves counted (a subclass registered under a protocol of its own), and against a real
S3-compatible server in ``tests/integration/test_remote_ranges.py``."""
from __future__ import annotations

import random

import fsspec
import pytest
from fsspec.implementations.memory import MemoryFileSystem
from hypothesis import given
from hypothesis import strategies as st

from millstream.engine.checkpoint.filesystem import RANGE_GAP, RemoteFileSystem, coalesced

RANGES = st.lists(st.tuples(st.integers(0, 5_000_000), st.integers(0, 300_000)), max_size=60)


@given(RANGES, st.integers(0, 1_000_000))
def test_every_range_lies_in_its_span_and_spans_far_apart_stay_apart(ranges, gap) -> None:
    spans = coalesced(ranges, gap)
    assert sorted(i for _, _, members in spans for i in members) == list(range(len(ranges)))
    for start, end, members in spans:
        for i in members:
            offset, length = ranges[i]
            assert start <= offset and offset + length <= end
    for (_, end, _), (start, _, _) in zip(spans, spans[1:]):
        assert start > end + gap  # else they would have been one request


class CountingMemoryFileSystem(MemoryFileSystem):
    """fsspec's memory file system, counting the reads it serves."""

    protocol = "millstream-counting-memory"
    requests: list[tuple[int, int]] = []

    def cat_file(self, path, start=None, end=None, **kwargs):  # type: ignore[no-untyped-def]
        type(self).requests.append((start, end))
        return super().cat_file(path, start=start, end=end, **kwargs)


@pytest.fixture
def counting():
    fsspec.register_implementation(CountingMemoryFileSystem.protocol, CountingMemoryFileSystem, clobber=True)
    CountingMemoryFileSystem.requests = []
    yield CountingMemoryFileSystem.requests


def test_a_restores_parts_of_a_file_come_in_one_request_and_are_the_files_bytes(counting) -> None:
    fs = RemoteFileSystem(f"{CountingMemoryFileSystem.protocol}://store")
    data = random.Random(1).randbytes(3_000_000)
    path = f"{CountingMemoryFileSystem.protocol}://store/shared/op-1.delta"
    fs.write_atomic(path, data)
    # 128 key groups' parts of about 20 KB, one after the other: a subtask owning 40-103 reads 64 of them
    bounds = [(kg * 20_000, 20_000 - kg) for kg in range(128)]
    wanted = bounds[40:104]
    counting.clear()
    got = fs.read_ranges(path, wanted)
    assert got == [data[o : o + n] for o, n in wanted]
    assert len(counting) == 1  # 64 requests before
    # Two runs far apart, out of order, one range inside another: two requests, each range its bytes
    far = [(2_900_000, 50_000), (10, 100), (0, 1_000), (2_950_000, 10)]
    counting.clear()
    assert fs.read_ranges(path, far) == [data[o : o + n] for o, n in far]
    assert len(counting) == 2 and RANGE_GAP < 2_900_000 - 1_000
    # a range past the end comes back short, as a single read did (the caller's check refuses it)
    assert fs.read_ranges(path, [(2_999_990, 100)]) == [data[2_999_990:]]
    assert fs.read_ranges(path, []) == []
