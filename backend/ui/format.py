"""Number, size, duration and time formatting for the dashboard (Jinja filters).

Pure functions: every figure on a page goes through one of these, so rates,
bytes and durations read the same everywhere.
"""
from __future__ import annotations

import time
from datetime import datetime
from typing import Any

_SI = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))
_BYTES = ((1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB"))


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def fmt_count(value: Any) -> str:
    """Counters: 1234 -> '1,234', 12_345_678 -> '12.3 M'; '–' when unknown."""
    v = _num(value)
    if v is None:
        return "–"
    if abs(v) < 1e6:
        return f"{int(round(v)):,}"
    for limit, unit in _SI:
        if abs(v) >= limit:
            return f"{v / limit:.1f} {unit}"
    return f"{v:,.0f}"  # pragma: no cover - covered by the branch above


def fmt_rate(value: Any) -> str:
    """Per-second rates: 0 -> '0/s', 12.34 -> '12.3/s', 45_600 -> '45.6 k/s'."""
    v = _num(value)
    if v is None:
        return "–"
    for limit, unit in _SI:
        if abs(v) >= limit:
            return f"{v / limit:.1f} {unit}/s"
    if v == 0:
        return "0/s"
    return f"{v:.1f}/s" if abs(v) < 100 else f"{v:.0f}/s"


def fmt_bytes(value: Any) -> str:
    """Sizes in binary units: 1536 -> '1.5 KiB'."""
    v = _num(value)
    if v is None or v < 0:
        return "–"
    for limit, unit in _BYTES:
        if v >= limit:
            return f"{v / limit:.1f} {unit}"
    return f"{int(v)} B"


def fmt_duration(ms: Any) -> str:
    """Durations in ms: 850 -> '850 ms', 75_000 -> '1m 15s', 3_700_000 -> '1h 1m'; negative = unknown."""
    v = _num(ms)
    if v is None or v < 0:
        return "–"
    if v < 1000:
        return f"{int(v)} ms"
    s = int(v // 1000)
    d, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    if d:
        return f"{d}d {h}h"
    if h:
        return f"{h}h {m}m"
    if m:
        return f"{m}m {s}s"
    return f"{s}s" if v >= 10_000 else f"{v / 1000:.1f}s"


def fmt_time(epoch_ms: Any) -> str:
    """An epoch-ms instant in the server's local time; '–' for 0 / -1 (never)."""
    v = _num(epoch_ms)
    if v is None or v <= 0:
        return "–"
    return datetime.fromtimestamp(v / 1000).strftime("%Y-%m-%d %H:%M:%S")


def fmt_ago(epoch_ms: Any, now_ms: int | None = None) -> str:
    """How long ago an epoch-ms instant was: '3.2s ago'."""
    v = _num(epoch_ms)
    if v is None or v <= 0:
        return "never"
    now = now_ms if now_ms is not None else int(time.time() * 1000)
    return f"{fmt_duration(max(now - v, 0))} ago"


def fmt_pct(ratio: Any) -> str:
    """A 0..1 ratio as a whole percentage: 0.256 -> '26%'."""
    v = _num(ratio)
    if v is None:
        return "–"
    return f"{round(v * 100)}%"


def fmt_watermark(value: Any) -> str:
    """Watermarks are epoch ms; absent means the vertex has seen none yet."""
    v = _num(value)
    if v is None:
        return "No watermark"
    if v >= 2**63 - 1:  # MAX_WATERMARK: the input ended (a finished bounded job), no date exists for it
        return "End of input (MAX_WATERMARK)"
    return f"{fmt_time(v)} ({int(v)})"


def fmt_watermark_short(value: Any) -> str:
    """A watermark for a graph node's one line: the time alone (``fmt_watermark`` adds the raw ms)."""
    v = _num(value)
    if v is None:
        return "None yet"
    if v >= 2**63 - 1:
        return "End of input"
    return fmt_time(v)


FILTERS = {
    "count": fmt_count,
    "rate": fmt_rate,
    "bytes": fmt_bytes,
    "duration": fmt_duration,
    "time": fmt_time,
    "ago": fmt_ago,
    "pct": fmt_pct,
    "watermark": fmt_watermark,
    "watermark_short": fmt_watermark_short,
}
