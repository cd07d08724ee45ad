"""Issue 14 item 2 in real Chromium: a page from another origin cannot drive a token-less cluster.

The cluster's JobManager listens on 127.0.0.1:P; the attacker's page is served from
127.0.0.2:Q (another origin, and another site) and fires what a web page can send
without any CORS grant: ``fetch(..., {mode: "no-cors"})`` with a multipart body, and
a plain HTML form post. None of them may submit a job or upload a program. The same
cluster, asked with a rebinding ``Host`` name, refuses too (httpx).
"""
from __future__ import annotations

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

import cloudpickle
import httpx
import pytest

from millstream.engine.datastream import StreamExecutionEnvironment
from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS
from tests.integration.cluster import Cluster

pytestmark = pytest.mark.integration

PROGRAM = "from pyflink.datastream import StreamExecutionEnvironment\nprint('pwned')\n"
ATTACK_PAGE = b"""<!doctype html><html><body>
<form id="upload" method="post" enctype="multipart/form-data"><input type="file" name="jarfile"></form>
</body></html>"""


@pytest.fixture(scope="module")
def jobmanager(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("xorigin"))
    try:
        c.start_jobmanager()
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def attacker_origin() -> Iterator[str]:
    class Page(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(ATTACK_PAGE)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.2", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.2:{server.server_address[1]}"
    finally:
        server.shutdown()


@pytest.fixture(scope="module")
def chromium():
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


def job_payload() -> tuple[str, str]:
    env = StreamExecutionEnvironment()
    env.from_collection([1, 2, 3]).map(lambda x: x * 2).print()
    job_graph, stream_graph = env.get_job_graph("cross-origin-attack")
    return json.dumps(job_graph.to_dict()), base64.b64encode(cloudpickle.dumps(stream_graph)).decode()


ATTACK_JS = """async ([target, jobgraph, code, program]) => {
  const bytes = Uint8Array.from(atob(code), c => c.charCodeAt(0));
  const job = new FormData();
  job.append("jobgraph", jobgraph);
  job.append("usercode", new Blob([bytes]), "usercode.bin");
  const jar = new FormData();
  jar.append("jarfile", new Blob([program]), "evil.py");
  const sent = [];
  for (const [path, body] of [["/jobs", job], ["/v1/jobs", job], ["/jars/upload", jar]]) {
    try { await fetch(target + path, {method: "POST", mode: "no-cors", body}); sent.push(path); }
    catch (e) { sent.push(path + " failed: " + e); }
  }
  return sent;
}"""

FORM_JS = """([target, program]) => {
  const form = document.getElementById("upload");
  form.action = target + "/jars/upload";
  const files = new DataTransfer();
  files.items.add(new File([program], "evil.py", {type: "text/x-python"}));
  form.querySelector("input").files = files.files;
  form.submit();
}"""


def test_a_cross_origin_page_cannot_submit_jobs_or_upload_programs(
    jobmanager: Cluster, attacker_origin: str, chromium
) -> None:
    context = chromium.new_context()
    page = context.new_page()
    try:
        page.goto(attacker_origin + "/")
        jobgraph, code = job_payload()
        sent = page.evaluate(ATTACK_JS, [jobmanager.url, jobgraph, code, PROGRAM])
        assert len(sent) == 3, sent  # the browser did send them: an opaque answer is no error
        with page.expect_navigation():
            page.evaluate(FORM_JS, [jobmanager.url, PROGRAM])
        # The form's answer is the guard's refusal, shown to the user as a page.
        assert "cross-site requests are refused" in page.content()
    finally:
        context.close()
    assert jobmanager.http.get("/jobs/overview").json()["jobs"] == []
    assert jobmanager.http.get("/jars").json()["files"] == []
    # Each attempt was refused and audited as such.
    audit = jobmanager.http.get("/audit").json()
    refused = [e for e in audit.get("entries", audit) if isinstance(e, dict) and e.get("status") == 403]
    assert len(refused) >= 4, audit


def test_the_same_origin_still_works(jobmanager: Cluster, chromium) -> None:
    """The guard refuses by origin, not by being a browser: from the cluster's own origin
    the same no-cors upload goes through."""
    context = chromium.new_context()
    page = context.new_page()
    try:
        page.goto(jobmanager.url + "/ui/submit")
        status = page.evaluate(
            """async ([program]) => {
                const jar = new FormData();
                jar.append("jarfile", new Blob([program]), "fine.py");
                return (await fetch("/jars/upload", {method: "POST", body: jar})).status;
            }""",
            [PROGRAM],
        )
    finally:
        context.close()
    assert status == 200
    files = jobmanager.http.get("/jars").json()["files"]
    assert [f["name"] for f in files] == ["fine.py"]
    jobmanager.http.delete(f"/jars/{files[0]['id']}")


def test_a_rebinding_host_name_is_refused(jobmanager: Cluster) -> None:
    """DNS rebinding: the attacker's name resolves to 127.0.0.1, so the request arrives on
    the loopback port but carries the attacker's Host."""
    jobgraph, code = job_payload()
    files = {"jobgraph": (None, jobgraph), "usercode": ("usercode.bin", base64.b64decode(code))}
    with httpx.Client(base_url=jobmanager.url, timeout=30) as http:
        for host in ("attacker.example", "attacker.example:" + str(jobmanager.port), "192.168.1.7", "127.0.0.1.nip.io"):
            assert http.get("/overview", headers={"Host": host}).status_code == 403, host
            r = http.post("/jobs", files=files, headers={"Host": host})
            assert r.status_code == 403, host
            assert host not in r.text  # the refusal does not echo the name back
        for host in (f"127.0.0.1:{jobmanager.port}", f"localhost:{jobmanager.port}", f"[::1]:{jobmanager.port}"):
            assert http.get("/overview", headers={"Host": host}).status_code == 200, host
    assert jobmanager.http.get("/jobs/overview").json()["jobs"] == []
