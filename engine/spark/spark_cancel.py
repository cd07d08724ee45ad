"""The Spark cancel key: how the JobManager tells a BATCH job's driver process to cancel its Spark job.

The driver polls the key (``millstream.engine.redis_keys.spark_cancel``). Its value is sealed with the cluster
secret for that job (engine/security/mac.py), so a key set by someone with only the Redis URL cancels
nothing; a driver started without a secret (tests run it alone) honours any value, as before.
"""
from __future__ import annotations

from millstream.engine.security.mac import Sealer, Unauthenticated


def spark_cancel_value(secret: str | bytes | None, job_id: str) -> bytes:
    return Sealer(secret, "spark-cancel", job_id).seal(b"cancel") if secret else b"1"


def spark_cancel_requested(value: bytes | None, secret: str | bytes | None, job_id: str) -> bool:
    if value is None:
        return False
    if not secret:
        return True
    try:
        Sealer(secret, "spark-cancel", job_id).open(value)
    except Unauthenticated:
        return False  # not the JobManager's: logged and counted, ignored
    return True
