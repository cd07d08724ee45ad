"""In-memory history of records/s per vertex for the Throughput tab.

The dashboard samples the same subtask metrics the REST API serves (via the
live ``JobRecord``) and keeps the last ten minutes per job. Nothing is
persisted: history restarts with the JobManager, as Flink's web UI does.
"""
from __future__ import annotations

import threading
from collections import deque
from collections.abc import Mapping
from typing import Any

from millstream.backend.services import job_views
from millstream.backend.ui.vertex_metrics import vertex_figures
from millstream.engine.jobmanager.job_store import JobRecord

WINDOW_MS = 10 * 60 * 1000
MIN_GAP_MS = 900  # several viewers of one job must not multiply the samples


class ThroughputHistory:
    """Per job: a deque of (ts_ms, {vertex_id: (records_in_per_s, records_out_per_s)})."""

    def __init__(self, window_ms: int = WINDOW_MS, max_jobs: int = 200) -> None:
        self.window_ms = window_ms
        self.max_jobs = max_jobs
        self._lock = threading.Lock()
        self._jobs: dict[str, deque[tuple[int, dict[str, tuple[float, float]]]]] = {}

    def record(self, record: JobRecord, now: int) -> None:
        """Adds a sample of a running job (ignored for ended jobs and when one was just taken)."""
        if job_views.is_terminal(record):
            return
        point = {}
        for v in job_views.vertices_of(record):
            f = vertex_figures(v, live=True)
            point[v["id"]] = (f.rate_in or 0.0, f.rate_out or 0.0)
        with self._lock:
            series = self._jobs.setdefault(record.jid, deque())
            if series and now - series[-1][0] < MIN_GAP_MS:
                return
            series.append((now, point))
            while series and series[0][0] < now - self.window_ms:
                series.popleft()
            if len(self._jobs) > self.max_jobs:  # forget the job sampled longest ago
                oldest = min(self._jobs, key=lambda j: self._jobs[j][-1][0] if self._jobs[j] else 0)
                del self._jobs[oldest]

    def series(self, jid: str, vertex_names: Mapping[str, str]) -> dict[str, Any]:
        """uPlot's columnar shape: ``{"x": [s...], "series": [{"label", "data"}...]}`` with
        one line per vertex for records/s out (records/s in for sinks, which emit nothing)."""
        with self._lock:
            points = list(self._jobs.get(jid, ()))
        xs = [ts / 1000 for ts, _ in points]
        lines = []
        for vid, name in vertex_names.items():
            outs = [p.get(vid, (0.0, 0.0))[1] for _, p in points]
            ins = [p.get(vid, (0.0, 0.0))[0] for _, p in points]
            use_in = not any(outs) and any(ins)
            lines.append({"label": f"{name} ({'in' if use_in else 'out'})", "data": ins if use_in else outs})
        return {"x": xs, "series": lines}



SAMPLE_EVERY_S = 2.0


def start_sampler(state: Any, stop: threading.Event) -> threading.Thread:
    """A daemon thread sampling every running job until ``stop`` is set, so the chart
    has history even for jobs nobody was watching."""
    thread = threading.Thread(target=_sample_loop, args=(state, stop), name="ui-throughput-sampler", daemon=True)
    thread.start()
    return thread


def _sample_loop(state: Any, stop: threading.Event) -> None:
    import time

    while not stop.wait(SAMPLE_EVERY_S):
        try:
            dispatcher = state.dispatcher
            now = int(time.time() * 1000)
            # Only the jobs still running: listing every stored job each tick made the JobManager's
            # memory grow with its history.
            for rec in dispatcher.job_records(unfinished_only=True):
                live = dispatcher.job_record(rec.jid)
                if live is not None:
                    state.ui_throughput.record(live, now)
        except Exception:  # noqa: BLE001 - a sampling hiccup (e.g. Redis away) must not end the history
            continue
