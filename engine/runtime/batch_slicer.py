"""BatchSlicer: how many records of an input buffer a task hands its operators at a time.

A buffer carries up to ``taskmanager.buffer-records`` records. Handing them over whole is cheapest,
but a task counts its input records per hand-over, so for a slow operator (2 ms a record: two
seconds a buffer) the per-second rates would show 0 and 1,024 in turns. Flink counts each record as
it is processed; here a buffer is handed over in slices sized to take about ``TARGET_S`` each, from
the time the previous hand-overs took per record: fast operators keep whole buffers, slow ones are
counted as they go. Pure bookkeeping, no I/O.
"""
from __future__ import annotations

TARGET_S = 0.05  # what one slice may take: rates sampled every second then move smoothly
MIN_SLICE = 1


class BatchSlicer:
    def __init__(self, target_s: float = TARGET_S) -> None:
        self.target_s = target_s
        self.per_record_s = 0.0  # a moving estimate of the operators' time per record

    def slice_size(self, n: int) -> int:
        """Records to hand over at once from a buffer of ``n``."""
        if self.per_record_s <= 0.0 or n * self.per_record_s <= self.target_s:
            return n
        return max(MIN_SLICE, min(n, int(self.target_s / self.per_record_s)))

    def took(self, records: int, seconds: float) -> None:
        """A hand-over of ``records`` took ``seconds``: update the estimate (recent ones weigh more)."""
        if records <= 0:
            return
        sample = max(seconds, 0.0) / records
        self.per_record_s = sample if self.per_record_s == 0.0 else 0.7 * self.per_record_s + 0.3 * sample
