"""Number formatting of the dashboard: rates, counts, bytes, durations, ratios."""
from millstream.backend.ui.format import fmt_bytes, fmt_count, fmt_duration, fmt_pct, fmt_rate, fmt_time, fmt_watermark, fmt_watermark_short


def test_rates_use_si_units_and_keep_small_rates_readable() -> None:
    assert fmt_rate(0) == "0/s"
    assert fmt_rate(12.34) == "12.3/s"
    assert fmt_rate(512) == "512/s"
    assert fmt_rate(45_600) == "45.6 k/s"
    assert fmt_rate(2_500_000) == "2.5 M/s"
    assert fmt_rate(None) == "–"


def test_counts_group_thousands_until_millions() -> None:
    assert fmt_count(1234) == "1,234"
    assert fmt_count(12_345_678) == "12.3 M"
    assert fmt_count("x") == "–"


def test_bytes_use_binary_units() -> None:
    assert fmt_bytes(512) == "512 B"
    assert fmt_bytes(1536) == "1.5 KiB"
    assert fmt_bytes(3 * (1 << 30)) == "3.0 GiB"
    assert fmt_bytes(-1) == "–"


def test_durations_pick_the_two_largest_units() -> None:
    assert fmt_duration(850) == "850 ms"
    assert fmt_duration(2_500) == "2.5s"
    assert fmt_duration(75_000) == "1m 15s"
    assert fmt_duration(3_700_000) == "1h 1m"
    assert fmt_duration(2 * 86_400_000 + 3_600_000) == "2d 1h"
    assert fmt_duration(-1) == "–"


def test_ratios_times_and_watermarks() -> None:
    assert fmt_pct(0.256) == "26%"
    assert fmt_pct(None) == "–"
    assert fmt_time(-1) == "–" and fmt_time(0) == "–"
    assert fmt_time(1_700_000_000_000).startswith("2023-11-")
    assert fmt_watermark(None) == "No watermark"
    assert fmt_watermark(1_700_000_000_000).endswith("(1700000000000)")
    # A finished bounded job's watermark: no date exists for it (the graph page of an ended job crashed on it).
    assert fmt_watermark(2**63 - 1) == "End of input (MAX_WATERMARK)"
    # A graph node's line: the time alone, which fits beside its label.
    assert fmt_watermark_short(1_435_000) == fmt_time(1_435_000) and len(fmt_watermark_short(1_435_000)) == 19
    assert (fmt_watermark_short(None), fmt_watermark_short(2**63 - 1)) == ("None yet", "End of input")
