"""The Grafana dashboard (monitoring/grafana/dashboards/millstream.json) against a real Prometheus: every
panel's query, with the dashboard's variables substituted as Grafana substitutes them, evaluated by
Prometheus while a real cluster runs a job with checkpoints, a keyed event-time window and late records,
must return data; every template variable's query must list that job. Grafana itself is not run here
(no registry carries it), so what it would send is built from the dashboard's JSON below."""
from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest
import yaml

from millstream.engine.metrics.prometheus_reporter import label_value
from tests.integration.cluster import Cluster
from tests.integration.prometheus_server import prometheus, requires_prometheus, wait_targets_up  # noqa: F401 (a fixture)

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "monitoring" / "grafana" / "dashboards" / "millstream.json"
DATASOURCES = ROOT / "monitoring" / "grafana" / "provisioning" / "datasources" / "prometheus.yml"
PROGRAM = Path(__file__).parent / "programs" / "dashboard_load.py"
JOB_NAME = "dashboard"  # the name dashboard_load.py gives its job

# Panels that cannot have data while dashboard_load.py runs, by title, each with the reason. Their
# queries are still sent to Prometheus (so bad PromQL fails), but need not return a series. Every
# panel of the dashboard has data in that job today, so the list is empty; a title named here that
# the dashboard no longer has fails the test, so the list cannot go stale.
NO_DATA_EXPECTED: dict[str, str] = {}

# Grafana's own defaults, used where the dashboard or data source sets nothing.
GRAFANA_DEFAULT_SCRAPE_INTERVAL_S = 15  # the Prometheus data source's "Scrape interval" (jsonData.timeInterval)
MAX_DATA_POINTS = 1000  # Grafana asks for about one point per pixel of the panel's width; a wide panel

# Characters Grafana's Prometheus data source escapes in the value of a multi-value or "All" variable
# (prometheusSpecialRegexEscape): the value lands in a `=~"..."` matcher, so it must match literally.
_REGEX_SPECIAL = re.compile(r"[$^*{}\[\]'+?.()|]")
_VARIABLE = re.compile(r"\$\{(\w+)\}|\$(\w+)|\[\[(\w+)\]\]")
_LABEL_VALUES = re.compile(r"^\s*label_values\(\s*(?:(?P<selector>.+?)\s*,\s*)?(?P<label>\w+)\s*\)\s*$", re.S)
_DURATION = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


# --------------------------------------------------------------------------- Grafana's side, pure


def seconds(duration: str) -> float:
    """A Grafana/Prometheus duration such as ``15s`` or ``1h30m``, in seconds."""
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)", duration)
    if not parts or "".join(n + u for n, u in parts) != duration:
        raise ValueError(f"not a duration: {duration!r}")
    return sum(float(n) * _DURATION[u] for n, u in parts)


def time_range(dashboard: dict[str, Any], now: float) -> tuple[float, float]:
    """The dashboard's default time range (``now-15m`` .. ``now``) as epoch seconds."""
    def at(text: str) -> float:
        if text == "now":
            return now
        match = re.fullmatch(r"now-(.+)", text)
        assert match, f"the dashboard's time range uses {text!r}, which this test does not read"
        return now - seconds(match.group(1))

    return at(dashboard["time"]["from"]), at(dashboard["time"]["to"])


def regex_escape(value: str) -> str:
    r"""As Grafana escapes a multi-value variable's value for a PromQL regex inside a string literal:
    ``a.b`` becomes ``a\\.b`` (the string literal's ``\\`` is the regex's ``\``)."""
    return _REGEX_SPECIAL.sub(lambda m: "\\\\" + m.group(0), value.replace("\\", "\\\\\\\\"))


def variable_text(variable: dict[str, Any], values: list[str]) -> str:
    """What Grafana puts in a query for ``variable`` with ``values`` selected: a multi-value or
    include-All variable's values regex-escaped, several as ``(a|b)``; "All" as the variable's
    ``allValue`` verbatim."""
    if values == ["$__all"]:
        assert variable.get("allValue"), f"variable {variable['name']}: 'All' without an allValue"
        return variable["allValue"]
    if not (variable.get("multi") or variable.get("includeAll")):
        (value,) = values
        return value.replace("\\", "\\\\").replace("'", "\\\\'")  # prometheusRegularEscape
    escaped = [regex_escape(v) for v in values]
    return escaped[0] if len(escaped) == 1 else "(" + "|".join(escaped) + ")"


def intervals(scrape_interval_s: float, range_s: float) -> dict[str, str]:
    """Grafana's built-in interval variables for a Prometheus panel: ``$__interval`` is the range over
    the panel's points, never below the data source's scrape interval; ``$__rate_interval`` is
    max($__interval + scrape interval, 4 x scrape interval), so a rate() always spans several samples."""
    interval = max(range_s / MAX_DATA_POINTS, scrape_interval_s)
    rate = max(interval + scrape_interval_s, 4 * scrape_interval_s)
    return {
        "__interval": f"{round(interval * 1000)}ms",
        "__interval_ms": str(round(interval * 1000)),
        "__rate_interval": f"{round(rate * 1000)}ms",
        "__range": f"{round(range_s)}s",
        "__range_s": str(round(range_s)),
        "__range_ms": str(round(range_s * 1000)),
    }


def interpolate(expr: str, values: dict[str, str]) -> str:
    """``expr`` with every ``$name``, ``${name}`` and ``[[name]]`` replaced; a variable the dashboard
    does not define fails here rather than reaching Prometheus as text."""
    def one(match: re.Match[str]) -> str:
        name = next(g for g in match.groups() if g)
        assert name in values, f"{expr!r} uses ${name}, which neither the dashboard nor Grafana defines"
        return values[name]

    return _VARIABLE.sub(one, expr)


def variable_query(variable: dict[str, Any]) -> str:
    query = variable["query"]
    return query["query"] if isinstance(query, dict) else query


def panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel that queries, including those inside a collapsed row."""
    for panel in dashboard["panels"]:
        if panel.get("type") == "row":
            yield from panels({"panels": panel.get("panels", [])})
        else:
            yield panel


def test_interpolation_as_grafana_does_it() -> None:
    """Guards the substitution the test below relies on, without Prometheus."""
    multi = {"name": "task_name", "multi": True, "includeAll": True, "allValue": ".*"}
    assert variable_text(multi, ["$__all"]) == ".*"
    assert variable_text(multi, ["Source:_events"]) == "Source:_events"
    assert variable_text(multi, ["a.b", "c"]) == r"(a\\.b|c)"
    assert variable_text({"name": "x"}, ["a.b"]) == "a.b"  # a single-value variable is not a regex
    assert interpolate('m{a=~"$x", b="${y}"}[$__rate_interval]', {"x": "1", "y": "2", "__rate_interval": "20s"}) == (
        'm{a=~"1", b="2"}[20s]'
    )
    with pytest.raises(AssertionError, match="neither the dashboard"):
        interpolate('m{a=~"$undefined"}', {})
    assert intervals(5, 900) == {
        "__interval": "5000ms", "__interval_ms": "5000", "__rate_interval": "20000ms",
        "__range": "900s", "__range_s": "900", "__range_ms": "900000",
    }
    assert intervals(15, 86400)["__rate_interval"] == "101400ms"  # 86.4 s points + 15 s
    assert seconds("1h30m") == 5400 and seconds("500ms") == 0.5
    nested = {"panels": [{"type": "row", "panels": [{"title": "a"}]}, {"type": "row"}, {"title": "b"}]}
    assert [p["title"] for p in panels(nested)] == ["a", "b"]


# --------------------------------------------------------------------------- against Prometheus


def _query(api: httpx.Client, expr: str, at: float) -> list[dict[str, Any]]:
    """An instant query, as a Grafana stat or table panel sends it; a PromQL error fails at once."""
    response = api.get("/api/v1/query", params={"query": expr, "time": at})
    body = response.json()
    assert response.status_code == 200 and body["status"] == "success", f"Prometheus refused {expr!r}: {body}"
    return body["data"]["result"]


def _label_values(api: httpx.Client, query: str, start: float, end: float) -> list[str]:
    """A ``label_values(...)`` variable query, as Grafana's Prometheus data source runs it when the
    data source names no Prometheus version: the matching series over the time range, then the label's
    distinct values (``label_values(label)`` alone: the label values endpoint)."""
    match = _LABEL_VALUES.match(query)
    assert match, f"a variable query this test does not read: {query!r}"
    label, selector = match.group("label"), match.group("selector")
    if selector is None:
        body = api.get(f"/api/v1/label/{label}/values", params={"start": start, "end": end}).json()
        assert body["status"] == "success", body
        return sorted(body["data"])
    body = api.get("/api/v1/series", params={"match[]": selector, "start": start, "end": end}).json()
    assert body["status"] == "success", f"Prometheus refused {selector!r}: {body}"
    return sorted({s[label] for s in body["data"] if label in s})


def _has_data(series: list[dict[str, Any]]) -> bool:
    """At least one series, and not only Flink's -1 for "none yet" (``lastCheckpointDuration`` before the
    first checkpoint completes): a panel showing only that has nothing real to show."""
    return any(float(s["value"][1]) != -1 for s in series)


def _scrape_interval_s() -> float:
    """The data source's scrape interval, which Grafana's interval variables start from."""
    (source,) = yaml.safe_load(DATASOURCES.read_text())["datasources"]
    text = (source.get("jsonData") or {}).get("timeInterval")
    return seconds(text) if text else GRAFANA_DEFAULT_SCRAPE_INTERVAL_S


@requires_prometheus
def test_every_dashboard_panel_has_data_from_a_running_job(cluster: Cluster, prometheus: httpx.Client) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    variables = dashboard["templating"]["list"]
    targets = [(p["title"], t) for p in panels(dashboard) for t in p.get("targets", []) if not t.get("hide")]
    titles = {title for title, _ in targets}
    stale = set(NO_DATA_EXPECTED) - titles
    assert not stale, f"allowlisted panels the dashboard does not have: {stale}"

    known = cluster.job_ids()
    run = cluster.start_run(PROGRAM, options=("-p", "2", "--detached"))
    jid = cluster.wait_new_job(known)
    try:
        job = cluster.wait_running(jid)
        wait_targets_up(cluster, prometheus, 3)  # the JobManager and 2 TaskManagers
        task_names = sorted(label_value(v["name"]) for v in job["vertices"])

        def evaluate() -> tuple[dict[str, list[str]], list[tuple[str, str, list[dict[str, Any]]]]]:
            """Each variable's options, then each panel target's query and result, as Grafana would get them
            with the job selected in $job_name and every task it lists selected in $task_name."""
            now = time.time()
            start, end = time_range(dashboard, now)
            values = intervals(_scrape_interval_s(), end - start)
            options: dict[str, list[str]] = {}
            # Variables in the dashboard's order: a later one's query may use an earlier one (task_name's
            # query filters on $job_name), as Grafana refreshes them.
            for variable in variables:
                assert variable["type"] == "query", f"variable {variable['name']}: a {variable['type']} variable"
                query = interpolate(variable_query(variable), values)
                options[variable["name"]] = _label_values(prometheus, query, start, end)
                selected = [JOB_NAME] if variable["name"] == "job_name" else options[variable["name"]]
                values[variable["name"]] = variable_text(variable, selected or ["$__all"])
            results = []
            for title, target in targets:
                expr = interpolate(target["expr"], values)
                results.append((title, expr, _query(prometheus, expr, end)))
            return options, results

        def complete() -> bool:
            options, results = evaluate()
            return JOB_NAME in options["job_name"] and options.get("task_name") == task_names and all(
                _has_data(series) or title in NO_DATA_EXPECTED for title, _, series in results
            )

        try:
            cluster.wait_for(complete, 120, "every panel of the dashboard to have data")
        except AssertionError:
            pass  # the assertions below say what is missing
        options, results = evaluate()

        print(f"\n{'panel':<50} {'series':>6}  query")
        for title, expr, series in results:
            print(f"{title:<50} {len(series):>6}  {expr}")
        print(f"variables: {options}")

        assert JOB_NAME in options["job_name"], f"$job_name does not list the running job: {options['job_name']}"
        # Every task of the job is listed, and nothing else: the variable's query filters on $job_name.
        assert options["task_name"] == task_names, (options["task_name"], task_names)
        empty = [
            f"{title}: {expr} -> {series}" for title, expr, series in results
            if not _has_data(series) and title not in NO_DATA_EXPECTED
        ]
        assert not empty, "panels without data while the job runs:\n" + "\n".join(empty)
        for title, expr, series in results:
            # A job-scoped panel shows the selected job only.
            for s in series:
                assert s["metric"].get("job_name", JOB_NAME) == JOB_NAME, (title, s["metric"])
        # The late records reached the window and were dropped there, not merely a series of zeros.
        late = [s for title, _, series in results if title == "Late records dropped" for s in series]
        assert any(float(s["value"][1]) > 0 for s in late), late
    finally:
        cluster.http.patch(f"/jobs/{jid}", params={"mode": "cancel"})
        cluster.wait_state(jid, ("CANCELED", "FAILED", "FINISHED"))
        run.wait(60)
