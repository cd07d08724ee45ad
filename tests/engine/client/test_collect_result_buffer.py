"""The client's collect buffer: which records a user sees, across attempts, gated and not."""
from __future__ import annotations

from engine.client.collect_result_buffer import CollectResultBuffer
from engine.runtime import collect


def feed(buf: CollectResultBuffer, *entries: collect.CollectEntry) -> list:
    return list(buf.add(entries))


def test_gated_records_wait_for_their_commit() -> None:
    buf = CollectResultBuffer()
    assert feed(buf, collect.start(0, 0, True), collect.records(0, 0, ["a", "b", "c"])) == []
    assert buf.pending == 3
    assert feed(buf, collect.commit(0, 2)) == ["a", "b"]
    assert feed(buf, collect.records(0, 3, ["d"]), collect.commit(0, 4)) == ["c", "d"]


def test_a_new_attempt_drops_the_uncommitted_tail_and_releases_what_its_restore_covers() -> None:
    buf = CollectResultBuffer()
    got = feed(
        buf,
        collect.start(0, 0, True),
        collect.records(0, 0, ["a", "b", "c", "d"]),
        collect.commit(0, 1),
        # checkpoint 2 covered 3 records and completed, but attempt 0 died before its COMMIT
        collect.start(1, 3, True),
        collect.records(0, 4, ["zombie"]),  # the failed attempt still writing: ignored
        collect.records(1, 3, ["d'", "e"]),
        collect.commit(0, 5),  # ignored too
        collect.commit(1, 5),
    )
    assert got == ["a", "b", "c", "d'", "e"]


def test_positions_already_delivered_are_skipped_after_a_restore_to_an_older_position() -> None:
    buf = CollectResultBuffer()
    feed(buf, collect.start(0, 0, True), collect.records(0, 0, ["a", "b", "c"]))
    assert feed(buf, collect.commit(0, 3)) == ["a", "b", "c"]  # e.g. the input ended
    got = feed(buf, collect.start(1, 1, True), collect.records(1, 1, ["b", "c", "d"]), collect.commit(1, 4))
    assert got == ["d"]


def test_ungated_records_are_final_at_once_and_come_again_after_a_restart() -> None:
    buf = CollectResultBuffer()
    assert feed(buf, collect.start(0, 0, False), collect.records(0, 0, [1, 2])) == [1, 2]
    assert feed(buf, collect.start(1, 0, False), collect.records(1, 0, [1, 2, 3])) == [1, 2, 3]


def test_a_finished_job_releases_what_its_last_attempt_wrote() -> None:
    buf = CollectResultBuffer()
    feed(buf, collect.start(0, 0, True), collect.records(0, 0, ["x", "y"]))
    assert list(buf.finish()) == ["x", "y"]


def test_entries_round_trip_with_rows_and_bytes() -> None:
    from engine.common import Row
    from engine.runtime.io.serialization import MsgpackSerializer

    ser = MsgpackSerializer()
    e = collect.records(3, 7, [Row(a=1, b="x"), b"\x00raw", (1, [2, 3])])
    back = collect.CollectEntry.decode(e.encode(ser), ser)
    assert (back.kind, back.attempt, back.seq) == (collect.RECORDS, 3, 7)
    assert back.values[0] == Row(a=1, b="x") and back.values[1] == b"\x00raw"
    s = collect.CollectEntry.decode(collect.start(2, 5, True).encode(ser), ser)
    assert (s.kind, s.attempt, s.seq, s.gated) == (collect.START, 2, 5, True)
