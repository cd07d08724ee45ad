"""The data servers' fingerprint (``ms:data:servers``) against a real valkey: a slot refuses tasks when
the JobManager's differs from its own, so the published one is sealed with the cluster secret. One
written by someone without the secret is ignored and logged, never acted on (issue 14)."""
from __future__ import annotations

import logging
from typing import Iterator

import cloudpickle
import pytest
import redis

from millstream.engine import redis_keys
from millstream.engine.runtime.io import data_servers
from millstream.engine.taskexecutor.gateway import RedisTaskExecutorGateway
from tests.engine.taskexecutor.test_slot_code_signing import SECRET, deploy, job

# A fingerprint no slot of this test has (its slots have no data servers: fingerprint "").
OTHER = data_servers.fingerprint(["redis://elsewhere:6379/0"])


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(redis_url)
    yield c
    c.delete(redis_keys.DATA_SERVERS)
    c.close()


def _deploy_with_published(client: redis.Redis, redis_url: str, published: str) -> dict:
    job_graph, stream_graph = job()
    RedisTaskExecutorGateway(client, SECRET).upload_user_code(job_graph.job_id, cloudpickle.dumps(stream_graph))
    client.set(redis_keys.DATA_SERVERS, published)
    reports = deploy(client, redis_url, job_graph)
    client.delete(redis_keys.JOBMANAGER_INBOX)
    return reports[0]  # the first: deployed (then running, ...) or refused


@pytest.mark.parametrize(
    "forged",
    [OTHER, data_servers.seal_fingerprint("not this cluster's secret", OTHER)],
    ids=["plain", "sealed-with-another-secret"],
)
def test_a_forged_fingerprint_is_ignored_and_logged(
    client: redis.Redis, redis_url: str, forged: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="millstream.slot"):
        report = _deploy_with_published(client, redis_url, forged)
    assert report["state"] == "INITIALIZING", report  # deployed: the forged value changed nothing
    assert any("ignoring the data servers' fingerprint" in r.getMessage() for r in caplog.records), caplog.text


def test_the_jobmanagers_sealed_fingerprint_is_still_enforced(client: redis.Redis, redis_url: str) -> None:
    report = _deploy_with_published(client, redis_url, data_servers.seal_fingerprint(SECRET, OTHER))
    assert (report["state"], report["exception_name"]) == ("FAILED", "DataServersMismatch"), report
    # ... and a matching one runs.
    report = _deploy_with_published(client, redis_url, data_servers.seal_fingerprint(SECRET, ""))
    assert report["state"] == "INITIALIZING", report
