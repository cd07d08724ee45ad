"""The Spark driver reads user code from Redis only when it is signed with the cluster secret."""
from __future__ import annotations

import argparse
from pathlib import Path

import pytest
import redis

from millstream.engine import redis_keys
from millstream.engine.spark.driver import _load_user_code
from millstream.engine.taskexecutor.code_signing import TamperedPayload, UnsignedPayload, sign

JOB = "0123456789abcdef0123456789abcdef"


def ns(secret_file: Path | None) -> argparse.Namespace:
    return argparse.Namespace(job_id=JOB, user_code=None, cluster_secret_file=str(secret_file) if secret_file else None)


@pytest.fixture
def client(redis_url: str):
    c = redis.Redis.from_url(redis_url)
    yield c
    c.close()


def test_signed_code_from_redis_is_loaded(client: redis.Redis, tmp_path: Path):
    (tmp_path / "secret").write_text("s3cret\n")
    client.set(redis_keys.job_user_code(JOB), sign("s3cret", JOB, b"the pickle"))
    assert _load_user_code(ns(tmp_path / "secret"), client) == b"the pickle"


def test_forged_or_unsigned_code_from_redis_is_refused(client: redis.Redis, tmp_path: Path):
    (tmp_path / "secret").write_text("s3cret")
    client.set(redis_keys.job_user_code(JOB), sign("guessed", JOB, b"the pickle"))
    with pytest.raises(TamperedPayload):
        _load_user_code(ns(tmp_path / "secret"), client)
    client.set(redis_keys.job_user_code(JOB), b"the pickle")
    with pytest.raises(UnsignedPayload):
        _load_user_code(ns(tmp_path / "secret"), client)
    client.set(redis_keys.job_user_code(JOB), sign("s3cret", JOB, b"the pickle"))
    with pytest.raises(UnsignedPayload):  # no secret given: nothing from Redis is trusted
        _load_user_code(ns(None), client)
