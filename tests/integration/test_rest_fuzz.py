"""Fuzzing the REST API with schemathesis, generated from the app's own OpenAPI schema, and the
multipart endpoints and dashboard routes with hypothesis-generated requests (mutated JobGraphs,
broken zips, random paths, queries and forms), against a running JobManager with a live
TaskManager: no input may cause a server error (at least MIN_TOTAL_CASES cases in all), and
malformed JSON, wrong types and huge bodies are answered with 4xx."""
from __future__ import annotations

import io
import json
import re
import urllib.parse
import uuid
import zipfile
from pathlib import Path
from typing import Iterator

import pytest
import requests

from tests.integration.cluster import Cluster

schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402  (schemathesis brings hypothesis)
from hypothesis import strategies as st  # noqa: E402
from hypothesis.errors import FlakyStrategyDefinition, Unsatisfiable  # noqa: E402
from schemathesis import GenerationMode  # noqa: E402

pytestmark = pytest.mark.integration

MIN_CASES = 300  # from the schema; the tests below bring the module over MIN_TOTAL_CASES
MIN_TOTAL_CASES = 2000  # issue 14: over every fuzz test of this module
FUZZ_COUNTS: dict[str, int] = {}
EXAMPLES = {GenerationMode.POSITIVE: 6, GenerationMode.NEGATIVE: 4}  # per operation: the module stays near 3 minutes


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("fuzzcluster"))
    try:
        yield c.start(taskmanagers=1, slots=2)
    finally:
        c.stop()


def test_no_generated_request_causes_a_server_error(cluster: Cluster):
    schema = schemathesis.openapi.from_url(f"{cluster.url}/openapi.json")
    session = requests.Session()
    cases: list[str] = []
    server_errors: list[str] = []
    for result in schema.get_all_operations():
        operation = result.ok()
        for mode, examples in EXAMPLES.items():

            @settings(
                max_examples=examples,
                deadline=None,
                database=None,
                derandomize=True,  # the same cases every run: a failure here is reproducible
                phases=[Phase.explicit, Phase.generate],
                suppress_health_check=list(HealthCheck),
            )
            @given(case=operation.as_strategy(generation_mode=mode))
            def call(case) -> None:
                response = case.call(base_url=cluster.url, session=session, timeout=60)
                cases.append(f"{case.method} {case.formatted_path}")
                if response.status_code >= 500:
                    server_errors.append(
                        f"{response.status_code} {case.method} {response.request.url} "
                        f"body={str(case.body)[:200]!r}: {response.text[:300]}"
                    )

            try:
                call()
            except Unsatisfiable:
                pass  # nothing to make invalid (e.g. negative cases of an operation without inputs)
            except FlakyStrategyDefinition:
                pass  # schemathesis's generation, not the server, misbehaved; the cases it sent still count
    assert not server_errors, "\n".join(server_errors[:20])
    FUZZ_COUNTS["schema"] = len(cases)
    assert len(cases) >= MIN_CASES, f"only {len(cases)} cases were generated"
    # The cluster lived through it.
    assert cluster.overview()["taskmanagers"] == 1


def test_malformed_json_wrong_types_and_huge_bodies_get_4xx(cluster: Cluster, tmp_path: Path):
    http = cluster.http
    jar = "0" * 32 + "_p.py"
    bad = [
        http.post(f"/jars/{jar}/run", content=b"{not json", headers={"Content-Type": "application/json"}),
        http.post(f"/jars/{jar}/plan", json={"parallelism": "many", "programArgsList": 7}),
        http.post(f"/jars/{jar}/run", json=[1, 2, 3]),
        http.post("/jobs", data={"jobgraph": "{not json"}, files={"usercode": ("u", b"x")}),
        http.post("/jobs", data={"jobgraph": json.dumps({"job_id": 5, "vertices": "x"})}, files={"usercode": ("u", b"x")}),
        http.post("/jobs", data={"jobgraph": json.dumps([1])}, files={"usercode": ("u", b"x")}),
        http.post("/jobs", content=b"\x00" * 100, headers={"Content-Type": "multipart/form-data; boundary=zz"}),
        http.get("/jobs/" + "z" * 32),
        http.get(f"/jobs/{'0' * 32}/results", params={"offset": "-1"}),
        http.patch(f"/jobs/{'0' * 32}", params={"mode": "stop"}),
        http.post("/jars/upload", files={"jarfile": ("p.exe", b"MZ")}),
        http.post("/jars/upload", content=b"x" * (65 * 1024 * 1024), headers={"Content-Type": "application/octet-stream"}),
    ]
    for r in bad:
        assert 400 <= r.status_code < 500, (r.request.method, r.request.url, r.status_code, r.text[:300])
    assert bad[-1].status_code == 413


# -- multipart endpoints and the dashboard, beyond the schema -----------------------------------
def _settings(examples: int):
    return settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=True,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70) | st.text(max_size=20)
    | st.sampled_from(["", "FORWARD", "HASH", "\x00", "\ud800", "0" * 32, "1 ms", "-1"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)


def _base_graph() -> tuple[dict, bytes]:
    import cloudpickle

    from millstream.engine.datastream import StreamExecutionEnvironment

    env = StreamExecutionEnvironment().set_parallelism(1)
    env.from_collection([1, 2, 3]).map(str).set_parallelism(2).key_by(len).map(str).print()
    jg, sg = env.get_job_graph("fuzz")
    return json.loads(json.dumps(jg.to_dict())), cloudpickle.dumps(sg)


def _paths(node, prefix=()):
    """Every (container path) in a JSON document, to pick a place to mutate."""
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, prefix + (i,))


def _mutate(doc, data) -> None:
    paths = [p for p in _paths(doc) if p]
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        path = data.draw(st.sampled_from(paths), label="path")
        parent = doc
        try:
            for key in path[:-1]:
                parent = parent[key]
            key = path[-1]
            action = data.draw(st.sampled_from(["set", "delete", "copy-id", "duplicate"]), label="action")
            if action == "set":
                parent[key] = data.draw(JSON_VALUES, label="value")
            elif action == "delete":
                del parent[key]
            elif action == "copy-id":  # ids from elsewhere in the graph make dangling, cyclic or duplicate edges
                parent[key] = data.draw(st.sampled_from([v["id"] for v in doc["vertices"]]), label="id")
            elif isinstance(parent, list):
                parent.append(json.loads(json.dumps(parent[key])))
        except (KeyError, IndexError, TypeError):
            pass  # an earlier mutation removed the place: the document is still worth sending


def _count(name: str, status: int, what: str, server_errors: list[str], text: str) -> None:
    FUZZ_COUNTS[name] = FUZZ_COUNTS.get(name, 0) + 1
    if status >= 500:
        server_errors.append(f"{status} {what}: {text[:300]}")


def test_mutated_jobgraphs_and_uploads_cause_no_server_error(cluster: Cluster):
    base, code = _base_graph()
    session = requests.Session()
    server_errors: list[str] = []

    @_settings(850)
    @given(data=st.data())
    def post_job(data) -> None:
        doc = json.loads(json.dumps(base))
        doc["job_id"] = uuid.UUID(int=data.draw(st.integers(0, 2**128 - 1), label="jid")).hex
        _mutate(doc, data)
        # Unescaped, a lone surrogate goes out as the invalid UTF-8 a careless client would send.
        body = json.dumps(doc, ensure_ascii=data.draw(st.booleans(), label="ascii")).encode("utf-8", "surrogatepass")
        r = session.post(f"{cluster.url}/jobs", data={"jobgraph": body}, files={"usercode": ("u", code)}, timeout=60)
        _count("jobs", r.status_code, f"POST /jobs jobgraph={body[:300]!r}", server_errors, r.text)

    good_zip = io.BytesIO()
    with zipfile.ZipFile(good_zip, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("main.py", "print('hi')\n" * 50)

    @_settings(300)
    @given(
        name=st.sampled_from(["p.zip", "p.py", "p.ZIP", "../p.zip", "p.exe", "", "\x00.zip", "p.zip\u202e"])
        | st.text(max_size=30),
        content=st.binary(max_size=300)
        | st.builds(lambda flips, data: _flip(good_zip.getvalue(), flips), st.lists(st.integers(0, 10**6), max_size=4), st.none()),
        dashboard=st.booleans(),
    )
    def upload(name: str, content: bytes, dashboard: bool) -> None:
        path = "/ui/submit/upload" if dashboard else "/jars/upload"
        r = session.post(f"{cluster.url}{path}", files={"jarfile": (name, content)}, headers={"HX-Request": "true"},
                         timeout=60)
        _count("uploads", r.status_code, f"POST {path} name={name!r} content={content[:60]!r}", server_errors, r.text)

    post_job()
    upload()
    assert not server_errors, "\n".join(server_errors[:20])
    assert cluster.overview()["taskmanagers"] == 1


def _flip(data: bytes, positions: list[int]) -> bytes:
    """A real zip with some bytes changed: gets past the magic number, breaks inside."""
    out = bytearray(data)
    for p in positions:
        out[p % len(out)] ^= 0xFF
    return bytes(out)


UI_SEGMENT = st.sampled_from(["0" * 32, "f" * 32, "graph", "subtasks", "checkpoints", "stream", "x", "..", "%00", "-1"]) | st.text(
    alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="/?#"), min_size=1, max_size=12
)


def test_dashboard_routes_cause_no_server_error(cluster: Cluster):
    """Every /ui route (not in the OpenAPI schema), with random path parameters, query strings and forms."""
    session = requests.Session()
    server_errors: list[str] = []
    routes = _ui_routes()
    assert len(routes) > 20, routes
    # Real ids too, so the fuzz reaches past "not found": a job, a program, a TaskManager.
    base, code = _base_graph()
    assert session.post(f"{cluster.url}/jobs", data={"jobgraph": json.dumps(base)},
                        files={"usercode": ("u", code)}, timeout=60).status_code == 202
    jar = session.post(f"{cluster.url}/jars/upload", files={"jarfile": ("p.py", b"print(1)")}, timeout=60).json()
    tms = [tm["id"] for tm in session.get(f"{cluster.url}/taskmanagers", timeout=10).json()["taskmanagers"]]
    segment = st.sampled_from([base["job_id"], jar["filename"], *tms]) | UI_SEGMENT

    @_settings(550)
    @given(
        route=st.sampled_from(routes),
        segments=st.lists(segment, min_size=4, max_size=4),
        query=st.dictionaries(st.sampled_from(["view", "page", "offset", "limit", "tab", "next", "q"]),
                              st.text(max_size=10) | st.integers(-(2**70), 2**70).map(str), max_size=3),
        form=st.dictionaries(st.sampled_from(["args", "parallelism", "savepoint_path", "allow_non_restored_state",
                                              "token", "target_directory", "drain"]),
                             st.text(max_size=20) | st.sampled_from(["99999999999999999999", "-1", "0", "\x00"]),
                             max_size=4),
    )
    def call(route, segments, query, form) -> None:
        method, template = route
        parts = iter(segments)
        path = re.sub(r"\{[^}]+\}", lambda _: urllib.parse.quote(next(parts), safe=""), template)
        r = session.request(method, f"{cluster.url}{path}", params=query, data=form if method == "POST" else None,
                            headers={"HX-Request": "true"}, timeout=60, stream=True, allow_redirects=False)
        r.close()  # a live stream answers forever: its status is what counts
        _count("dashboard", r.status_code, f"{method} {path} {query} {form}", server_errors, "")

    call()
    assert not server_errors, "\n".join(server_errors[:20])
    assert cluster.overview()["taskmanagers"] == 1


def _ui_routes() -> list[tuple[str, str]]:
    """(method, path template) of every dashboard route, from the routers backend/ui installs."""
    from millstream.backend.ui.routes import actions, audit, job, pages, savepoints, submit

    return sorted(
        (method, route.path)
        for module in (pages, savepoints, job, actions, submit, audit)
        for route in module.router.routes
        for method in (getattr(route, "methods", None) or set()) - {"HEAD"}
    )


def test_at_least_the_issue_14_number_of_cases_ran():
    """Runs last (file order): the fuzz tests above together sent MIN_TOTAL_CASES requests or more."""
    if len(FUZZ_COUNTS) < 4:
        pytest.skip(f"not every fuzz test of this module ran: {sorted(FUZZ_COUNTS)}")
    assert sum(FUZZ_COUNTS.values()) >= MIN_TOTAL_CASES, FUZZ_COUNTS
