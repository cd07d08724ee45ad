"""Credit announcements between a channel's consumer and its producer: what a token means, and when
the consumer announces its credit again.

A credit token is sealed (engine/security/mac.py) for its channel's credit key and carries a number:
token n says "the consumer has taken n + 1 elements from this channel in all". The count is
cumulative, as Flink's receiver announces its credit rather than handing out loose permits, so:

- a token lost on the way (deleted from Redis by someone with write access to it) costs nothing
  once any later one arrives: the later one carries the lost one's credit too;
- a token read twice (a genuine one copied and pushed again, or announced again below) grants
  nothing the second time: the producer counts only the part of a number past what it counted.

That leaves one stall: every token after some point deleted while the producer waits for credit and
the consumer, having taken everything, has nothing to acknowledge. So the consumer announces its
latest number again when a channel it reads has been quiet for a while (``CreditAnnouncer``), with
a growing pause while it stays quiet; a channel whose producer is blocked on lost credit is quiet by
construction. Announcing again is harmless to a producer that is not blocked (it counts nothing).
This module is pure bookkeeping: the Redis side is engine/runtime/io/redis_channels.py.
"""
from __future__ import annotations

#: a channel quiet this long (s) gets its consumer's credit announced again; the pause doubles while
#: it stays quiet, up to ``REANNOUNCE_MAX_S`` (an idle job costs one small write per channel per pause)
REANNOUNCE_AFTER_S = 0.5
REANNOUNCE_MAX_S = 8.0
#: how often (s) the consumer looks for quiet channels (a comparison per poll otherwise)
REANNOUNCE_CHECK_S = 0.25


class CreditLedger:
    """The producer's side: how much credit a channel has, from the numbered tokens it reads."""

    def __init__(self, initial: int) -> None:
        self.initial = initial
        self.counted = 0  # elements the consumer is known to have taken (the highest number + 1)

    def count(self, number: int) -> int:
        """New credits that token ``number`` grants (0 for a number counted before)."""
        if number < self.counted:
            return 0
        granted = number + 1 - self.counted
        self.counted = number + 1
        return granted


class CreditAnnouncer:
    """The consumer's side for one gate: the number each channel's next token carries, and which
    quiet channels are due to have their latest number announced again."""

    def __init__(
        self, channels: int, now: float, after_s: float = REANNOUNCE_AFTER_S, max_s: float = REANNOUNCE_MAX_S,
        check_s: float = REANNOUNCE_CHECK_S,
    ) -> None:
        self.taken = [0] * channels  # elements acknowledged per channel: the next token's number + 1
        self.after_s = after_s
        self.max_s = max_s
        self.check_s = check_s
        self._quiet_since = [now] * channels
        self._pause = [after_s] * channels
        self._received = [0] * channels  # elements each channel had delivered at the last look
        self._next_check = now + check_s

    def acknowledge(self, channel: int) -> int:
        """One more element of ``channel`` taken: the number its token carries."""
        self.taken[channel] += 1
        return self.taken[channel] - 1

    def due(self, now: float, skip: "set[int]", received: "list[int]") -> list[tuple[int, int]]:
        """(channel, latest number) for each channel quiet past its pause, not in ``skip`` (blocked
        channels: aligning, or ended) and with something acknowledged; each such channel's pause grows.
        ``received``: the elements each channel has delivered so far (a channel whose count moved
        since the last look is not quiet). Looks at most every ``check_s``, so a poll costs a comparison."""
        if now < self._next_check:
            return []
        self._next_check = now + self.check_s
        out = []
        for i, taken in enumerate(self.taken):
            if received[i] != self._received[i]:
                self._received[i] = received[i]
                self._quiet_since[i] = now
                self._pause[i] = self.after_s
                continue
            if taken and i not in skip and now - self._quiet_since[i] >= self._pause[i]:
                out.append((i, taken - 1))
                self._quiet_since[i] = now
                self._pause[i] = min(self._pause[i] * 2, self.max_s)
        return out
