"""Channel protocols: one channel per (edge, producer subtask, consumer subtask, attempt).

A ``ChannelWriter`` is the producer end: it spends one credit per data buffer
and blocks when it has none. An ``InputGate`` is the consumer end over all of
a task's input channels; ``ack`` returns a credit once a buffer is processed.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class ChannelId:
    job_id: str
    edge: int
    src: int
    dst: int
    attempt: int


class ChannelWriter(Protocol):
    blocked_since: float | None  # monotonic time a credit wait began, while it lasts

    def send(self, payload: bytes, is_data: bool) -> float:
        """Append a buffer (it may still be on its way); returns seconds spent blocked waiting for credit."""

    def close(self) -> None:
        """Wait until every buffer sent has reached the channel."""


class InputGate(Protocol):
    bytes_received: int  # bytes of every element taken from the channels so far (numBytesIn)

    def poll(self, timeout: float) -> tuple[int, bytes] | None:
        """The next buffer from any unblocked channel, as (channel index, bytes)."""

    def ack(self, channel_index: int) -> None:
        """The buffer from this channel was consumed: return one credit."""

    def block(self, channel_index: int) -> None:
        """Stop reading this channel (barrier alignment, end of partition)."""

    def unblock(self, channel_index: int) -> None: ...

    def close(self) -> None: ...


class ChannelFactory(Protocol):
    def writer(self, channel: ChannelId) -> ChannelWriter: ...

    def gate(self, channels: list[ChannelId]) -> InputGate: ...


class TaskCancelled(Exception):
    """Raised inside a task's blocking waits once the task is cancelled."""


class UnauthenticatedBuffer(RuntimeError):
    """A channel element that was not sealed for that channel by this cluster: the task fails, undecoded."""
