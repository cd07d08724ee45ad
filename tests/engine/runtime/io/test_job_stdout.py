"""The job's print stream in a real Redis: order, the cap and its dropped count, expiry, the forwarder."""
from __future__ import annotations

import redis

from millstream.engine import redis_keys
from millstream.engine.runtime.io.job_stdout import StdoutForwarder, append_lines, read_lines


def test_lines_read_back_in_order_from_any_offset(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    append_lines(client, "j", ["a", "b"])
    append_lines(client, "j", ["c"])
    chunk = read_lines(client, "j", 0)
    assert (chunk.lines, chunk.offset, chunk.next_offset, chunk.dropped, chunk.total) == (["a", "b", "c"], 0, 3, 0, 3)
    assert read_lines(client, "j", 1, max_lines=1).lines == ["b"]
    assert read_lines(client, "j", 3).lines == []
    assert read_lines(client, "other", 0).total == 0


def test_the_cap_drops_the_oldest_lines_and_says_how_many(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    for i in range(10):
        append_lines(client, "j", [f"l{i}a", f"l{i}b"], max_lines=5)
    assert client.llen(redis_keys.job_stdout("j")) == 5
    chunk = read_lines(client, "j", 0)
    assert chunk.dropped == 15 and chunk.offset == 15 and chunk.total == 20
    assert chunk.lines == ["l7b", "l8a", "l8b", "l9a", "l9b"]
    # A reader that kept up loses nothing.
    assert read_lines(client, "j", 17).dropped == 0
    # One call printing more than the cap keeps its newest lines and counts them all.
    append_lines(client, "k", [str(i) for i in range(8)], max_lines=5)
    chunk = read_lines(client, "k", 0)
    assert (chunk.lines, chunk.dropped) == (["3", "4", "5", "6", "7"], 3)


def test_both_keys_expire(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    append_lines(client, "j", ["a"], ttl_s=100)
    assert 0 < client.ttl(redis_keys.job_stdout("j")) <= 100
    assert 0 < client.ttl(redis_keys.job_stdout_total("j")) <= 100


def test_forwarder_flush_means_every_queued_line_is_in_redis(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    fwd = StdoutForwarder(client)
    for i in range(500):
        fwd.write("j1" if i % 2 else "j2", [str(i)])
    assert fwd.flush()
    assert read_lines(client, "j1", 0).lines == [str(i) for i in range(1, 500, 2)]
    assert read_lines(client, "j2", 0).lines == [str(i) for i in range(0, 500, 2)]


def test_an_offset_far_beyond_the_stream_reads_nothing(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    append_lines(client, "j", ["a"])
    for offset in (10**15, 2**53):
        chunk = read_lines(client, "j", offset)
        # Past the total (the keys expired and the job printed again): read on from what is there.
        assert (chunk.lines, chunk.next_offset, chunk.dropped) == ([], 0, 0)


def test_sealed_lines_hide_what_someone_else_pushed(redis_url: str) -> None:
    from millstream.engine.runtime.io.job_stdout import stdout_key

    client = redis.Redis.from_url(redis_url)
    key = stdout_key("a-secret", "sj")
    append_lines(client, "sj", ["genuine 1"], key=key)
    client.rpush(redis_keys.job_stdout("sj"), "forged")  # written with only the Redis URL
    client.rpush(redis_keys.job_stdout("sj"), client.lindex(redis_keys.job_stdout("sj"), 0).replace(b"1", b"2"))
    client.incrby(redis_keys.job_stdout_total("sj"), 2)
    append_lines(client, "sj", ["genuine 2"], key=stdout_key("a-secret", "sj"))
    chunk = read_lines(client, "sj", 0, key=key)
    assert chunk.lines == ["genuine 1", "genuine 2"]
    assert (chunk.next_offset, chunk.total) == (4, 4)  # offsets still count the list's positions
    assert read_lines(client, "sj", 0, key=stdout_key("a-secret", "other")).lines == []  # another job's key


def test_a_copied_line_is_left_out_while_reading_again_shows_every_line(redis_url: str) -> None:
    from millstream.engine.runtime.io.job_stdout import LineNumbering, stdout_key
    from millstream.engine.security.replay import ElementPositions

    client = redis.Redis.from_url(redis_url)
    key, stream = stdout_key("a-secret", "cj"), redis_keys.job_stdout("cj")
    writer = LineNumbering()
    append_lines(client, "cj", ["one", "two"], key=key, numbering=writer)
    positions = ElementPositions()
    assert read_lines(client, "cj", 0, key=key, positions=positions).lines == ["one", "two"]
    client.rpush(stream, client.lindex(stream, 0))  # a genuine sealed line, pushed again
    client.incr(redis_keys.job_stdout_total("cj"))
    append_lines(client, "cj", ["three"], key=key, numbering=writer)
    append_lines(client, "cj", ["other writer"], key=key)  # a writer of its own, numbered from 0 too
    assert read_lines(client, "cj", 2, key=key, positions=positions).lines == ["three", "other writer"]
    # A retried request or a second client reads the same positions again: the same lines.
    assert read_lines(client, "cj", 0, key=key, positions=positions).lines == ["one", "two", "three", "other writer"]
    # Without the positions (nothing remembered) the copy would show: what the numbering is for.
    assert read_lines(client, "cj", 0, key=key).lines == ["one", "two", "one", "three", "other writer"]


def test_a_reader_that_starts_afresh_past_the_first_line_still_knows_a_copy(redis_url: str) -> None:
    """A JobManager restarted (its positions are new) and a client goes on from where it was: a line
    it read before the restart, copied to the end since, is left out; new lines still show."""
    from millstream.engine.runtime.io.job_stdout import LineNumbering, stdout_key
    from millstream.engine.security.replay import ElementPositions

    client = redis.Redis.from_url(redis_url)
    key, stream = stdout_key("a-secret", "rj"), redis_keys.job_stdout("rj")
    writer = LineNumbering()
    append_lines(client, "rj", [f"line {i}" for i in range(25_000)], key=key, numbering=writer)
    assert len(read_lines(client, "rj", 0, 30_000, key=key, positions=ElementPositions()).lines) == 25_000
    client.rpush(stream, client.lindex(stream, 3))  # a genuine line read before, pushed again
    client.incr(redis_keys.job_stdout_total("rj"))
    append_lines(client, "rj", ["after"], key=key, numbering=writer)
    restarted = ElementPositions()
    assert read_lines(client, "rj", 25_000, key=key, positions=restarted).lines == ["after"]
    # The same read by fresh positions that did not take in the lines before the offset: the copy shows.
    unprimed = ElementPositions()
    unprimed.primed = True
    assert read_lines(client, "rj", 25_000, key=key, positions=unprimed).lines == ["line 3", "after"]
