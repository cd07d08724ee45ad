"""The Timestamps/Watermarks operator: assigns event timestamps and emits watermarks.

A watermark goes out after every batch in which it advanced (batches are at
most ~1000 records, so this is finer than Flink's 200 ms periodic default and
makes lateness reproducible), and on idle ticks. With ``with_idleness`` a subtask that sees no
records for the timeout declares itself idle, so downstream minimums skip it.
"""
from __future__ import annotations

from millstream.engine.common.watermark_strategy import WatermarkStrategy
from millstream.engine.runtime.operators.base import StreamOperator
from millstream.engine.runtime.watermarks import MAX_WATERMARK, TimestampExtractor, WatermarkGenerator

AUTO_WATERMARK_INTERVAL_MS = 200


class TimestampsAndWatermarksOperator(StreamOperator):
    wants_ticks = True

    def open(self) -> None:
        super().open()
        strategy: WatermarkStrategy = self.params["watermark_strategy"]
        fn = strategy.extract_timestamp_fn()
        self.extractor = TimestampExtractor(fn, self.ctx.operator_name) if fn else None
        self.generator = (
            WatermarkGenerator(strategy.max_out_of_orderness_ms) if strategy.kind in ("monotonous", "bounded") else None
        )
        self.idleness_ms = strategy.idleness_ms
        self.emitted = -(2**63)
        self.last_emit_ms = 0
        self.last_record_ms = self.ctx.clock()
        self.idle = False
        # env.get_config().set_auto_watermark_interval(); 0 turns periodic watermarks off, as in Flink.
        self.interval_ms = int(self.params.get("auto_watermark_interval", AUTO_WATERMARK_INTERVAL_MS))
        # A program-chosen interval is honoured strictly (periodic, as Flink); by default a watermark
        # also follows every batch, which keeps lateness reproducible.
        self.periodic_only = bool(self.params.get("auto_watermark_interval_explicit", False))

    def process_batch(self, values, timestamps):
        if self.extractor is not None:
            timestamps = self.extractor.extract(values, timestamps)
        elif timestamps is None and self.generator is not None:
            raise TypeError(
                f"'{self.ctx.operator_name}': records carry no timestamps; "
                "give the WatermarkStrategy a timestamp assigner (with_timestamp_assigner)"
            )
        gen = self.generator
        if gen is not None and timestamps:
            newest = max(timestamps)
            gen.on_event(newest)
        now = self.ctx.clock()
        self.last_record_ms = now
        if self.idle:
            self.idle = False
            self.output.emit_status(False)
        self.output.emit(values, timestamps)
        if self.interval_ms > 0 and (not self.periodic_only or now - self.last_emit_ms >= self.interval_ms):
            self._emit_watermark(now)

    def _emit_watermark(self, now: int) -> None:
        self.last_emit_ms = now
        if self.generator is None:
            return
        wm = self.generator.current()
        if wm > self.emitted:
            self.emitted = wm
            self.ctx.metrics.current_output_watermark = wm
            self.output.emit_watermark(wm)

    def on_tick(self, now_ms: int) -> None:
        if self.interval_ms > 0 and now_ms - self.last_emit_ms >= self.interval_ms:
            self._emit_watermark(now_ms)
        if self.idleness_ms is not None and not self.idle and now_ms - self.last_record_ms >= self.idleness_ms:
            self.idle = True
            self.output.emit_status(True)

    def process_watermark(self, watermark: int) -> None:
        # Upstream watermarks are replaced by this strategy's, except the final one at end of input.
        if watermark == MAX_WATERMARK:
            self.emitted = MAX_WATERMARK
            self.output.emit_watermark(watermark)
