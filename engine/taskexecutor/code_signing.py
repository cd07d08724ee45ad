"""Signed user code: the envelope the JobManager puts in Redis and TaskManagers check before unpickling.

Anyone who can write to Redis could otherwise plant a pickle that a TaskManager
runs. The envelope is ``MAGIC | HMAC-SHA256 | payload``; the MAC covers the job
id too, so code signed for one job cannot be replayed as another job's code.
"""
from __future__ import annotations

import hashlib
import hmac

MAGIC = b"MSUC1\0"  # "Millstream signed user code", format 1
MAC_BYTES = hashlib.sha256().digest_size
_CONTEXT = b"millstream-user-code-v1\0"


class CodeSigningError(Exception):
    """User code that must not be unpickled; the message says why."""


class UnsignedPayload(CodeSigningError):
    """The payload carries no signature (or no cluster secret is configured to check one)."""


class TamperedPayload(CodeSigningError):
    """The signature does not match: the payload, the job id or the secret differ."""


def _key(secret: str | bytes) -> bytes:
    return secret.encode() if isinstance(secret, str) else secret


def _mac(secret: str | bytes, job_id: str, payload: bytes) -> bytes:
    # The job id is length-prefixed so (job, payload) pairs cannot be re-split.
    job = job_id.encode()
    msg = _CONTEXT + len(job).to_bytes(4, "big") + job + payload
    return hmac.new(_key(secret), msg, hashlib.sha256).digest()


def sign(secret: str | bytes, job_id: str, payload: bytes) -> bytes:
    if not secret:
        raise UnsignedPayload("no cluster secret is configured: user code cannot be signed")
    return MAGIC + _mac(secret, job_id, payload) + payload


def verify(secret: str | bytes | None, job_id: str, envelope: bytes | None) -> bytes:
    """The payload inside ``envelope`` if it was signed for ``job_id`` with ``secret``."""
    if not secret:
        raise UnsignedPayload("no cluster secret is configured on this process: refusing to load user code")
    if envelope is None or not envelope.startswith(MAGIC) or len(envelope) < len(MAGIC) + MAC_BYTES:
        raise UnsignedPayload(f"the user code of job {job_id} is not signed: refusing to load it")
    given = envelope[len(MAGIC) : len(MAGIC) + MAC_BYTES]
    payload = envelope[len(MAGIC) + MAC_BYTES :]
    if not hmac.compare_digest(given, _mac(secret, job_id, payload)):
        raise TamperedPayload(
            f"the signature of job {job_id}'s user code does not match: it was altered, "
            "or signed with another cluster secret (MILLSTREAM_CLUSTER_SECRET)"
        )
    return payload
