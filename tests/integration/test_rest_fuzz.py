"""Fuzzing the REST API with schemathesis, generated from the app's own OpenAPI schema,
against a running JobManager with a live TaskManager: no input may cause a server error,
and malformed JSON, wrong types and huge bodies are answered with 4xx."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import pytest
import requests

from tests.integration.cluster import Cluster

schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402  (schemathesis brings hypothesis)
from hypothesis.errors import Unsatisfiable  # noqa: E402
from schemathesis import GenerationMode  # noqa: E402

pytestmark = pytest.mark.integration

MIN_CASES = 500
EXAMPLES = {GenerationMode.POSITIVE: 30, GenerationMode.NEGATIVE: 20}  # per operation


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
    assert not server_errors, "\n".join(server_errors[:20])
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
