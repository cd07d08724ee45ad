"""The client's collect buffer: which records a user sees, across attempts, gated and not."""
from __future__ import annotations

import pytest

from millstream.engine.client.collect_result_buffer import CollectResultBuffer, ResultsMissing
from millstream.engine.runtime import collect


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


def test_the_end_of_the_input_releases_what_its_attempt_wrote_and_a_finished_job_needs_it() -> None:
    buf = CollectResultBuffer()
    feed(buf, collect.start(0, 0, True), collect.records(0, 0, ["x", "y"]))
    with pytest.raises(ResultsMissing, match="end of its results never arrived"):
        list(buf.finish())  # the END was deleted: the client cannot know it has everything
    assert feed(buf, collect.end(0, 2)) == ["x", "y"]
    assert list(buf.finish()) == []


def test_a_restored_attempt_writes_again_what_a_lost_list_held_and_the_client_skips_what_it_has() -> None:
    buf = CollectResultBuffer()
    got = feed(buf, collect.start(0, 0, True), collect.records(0, 0, ["a", "b"]), collect.commit(0, 1))
    assert got == ["a"] and buf.ack() == collect.Ack(0, 2)  # "b" is held, not final
    # Redis restarted: entries 2..5 of attempt 0 (records c, d and a COMMIT) never reached the client.
    # Attempt 1 restored a checkpoint covering 4 records, keeping from position 1 (the last ack it saw).
    got = feed(
        buf,
        collect.start(1, 4, True, origin=1),
        collect.records(1, 1, ["b", "c", "d"]),
        collect.records(1, 4, ["e"]),
    )
    assert got == ["b", "c", "d"]  # final: the restored checkpoint covered them
    assert feed(buf, collect.end(1, 5)) == ["e"]
    assert buf.ack() == collect.Ack(1, 5)


def test_an_ungated_restart_replays_kept_records_then_comes_again_from_its_position() -> None:
    buf = CollectResultBuffer()
    assert feed(buf, collect.start(0, 0, False), collect.records(0, 0, [1, 2])) == [1, 2]
    # Lost with Redis: records 3 and 4. The at-least-once checkpoint covered 3 records, kept from 2.
    got = feed(buf, collect.start(1, 3, False, origin=2), collect.records(1, 2, [3]), collect.records(1, 3, [4, 5]))
    assert got == [3, 4, 5]


def test_missing_entries_are_found_not_skipped() -> None:
    # RECORDS deleted from the middle (or an edited offset that skips entries)
    buf = CollectResultBuffer()
    feed(buf, collect.start(0, 0, True), collect.records(0, 0, ["a"]))
    with pytest.raises(ResultsMissing, match="positions 1 to 2 of the results never arrived"):
        feed(buf, collect.records(0, 3, ["d"]))
    # a COMMIT past the records that arrived
    buf = CollectResultBuffer()
    feed(buf, collect.start(0, 0, True), collect.records(0, 0, ["a"]))
    with pytest.raises(ResultsMissing, match="committed but never arrived"):
        feed(buf, collect.commit(0, 3))
    # a newer attempt's START deleted
    buf = CollectResultBuffer()
    feed(buf, collect.start(0, 0, True), collect.records(0, 0, ["a"]))
    with pytest.raises(ResultsMissing, match="without its start"):
        feed(buf, collect.records(1, 1, ["b"]))
    # a restored sink that no longer keeps what this client lacks (its acknowledgements were forged)
    buf = CollectResultBuffer()
    feed(buf, collect.start(0, 0, True), collect.records(0, 0, ["a"]))
    with pytest.raises(ResultsMissing, match="positions 1 to 2 of the results are lost"):
        feed(buf, collect.start(1, 5, True, origin=3))


def test_the_first_start_a_client_sees_sets_where_its_results_begin() -> None:
    """A job resumed from a savepoint starts at the savepoint's position; a list lost before the
    client read anything is written again from the kept records' origin."""
    buf = CollectResultBuffer()
    assert feed(buf, collect.start(0, 7, True), collect.records(0, 7, ["h"]), collect.end(0, 8)) == ["h"]
    buf = CollectResultBuffer()
    got = feed(buf, collect.records(0, 5, ["stale"]), collect.start(1, 2, True, origin=0), collect.records(1, 0, ["a", "b", "c"]))
    assert got == ["a", "b"]


def test_entries_round_trip_with_rows_and_bytes() -> None:
    from millstream.engine.common import Row
    from millstream.engine.runtime.io.serialization import MsgpackSerializer

    ser = MsgpackSerializer()
    e = collect.records(3, 7, [Row(a=1, b="x"), b"\x00raw", (1, [2, 3])])
    back = collect.CollectEntry.decode(e.encode(ser), ser)
    assert (back.kind, back.attempt, back.seq) == (collect.RECORDS, 3, 7)
    assert back.values[0] == Row(a=1, b="x") and back.values[1] == b"\x00raw"
    s = collect.CollectEntry.decode(collect.start(2, 5, True).encode(ser), ser)
    assert (s.kind, s.attempt, s.seq, s.gated, s.first) == (collect.START, 2, 5, True, 5)
    s = collect.CollectEntry.decode(collect.start(2, 5, True, origin=3).encode(ser), ser)
    assert s.first == 3
    kept = collect.encode_values(ser, ["k"])
    assert list(collect.CollectEntry.decode(collect.records(1, 4, (), kept).encode(ser), ser).values) == ["k"]
