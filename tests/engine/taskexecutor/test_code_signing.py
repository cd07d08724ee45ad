"""User code signing: the envelope round-trips, and anything else is refused before unpickling."""
from __future__ import annotations

import pytest

from millstream.engine.taskexecutor.code_signing import MAGIC, TamperedPayload, UnsignedPayload, sign, verify

JOB = "0123456789abcdef0123456789abcdef"
OTHER_JOB = "fedcba9876543210fedcba9876543210"


def test_a_signed_payload_verifies_to_itself():
    envelope = sign("s3cret", JOB, b"payload")
    assert envelope.startswith(MAGIC) and envelope.endswith(b"payload")
    assert verify("s3cret", JOB, envelope) == b"payload"
    assert verify(b"s3cret", JOB, sign(b"s3cret", JOB, b"")) == b""


@pytest.mark.parametrize(
    "mutate",
    [
        lambda e: e[:-1] + bytes([e[-1] ^ 1]),  # payload bit flip
        lambda e: e + b"x",  # payload extended
        lambda e: e[: len(MAGIC)] + bytes([e[len(MAGIC)] ^ 1]) + e[len(MAGIC) + 1 :],  # MAC bit flip
    ],
)
def test_any_change_is_tampering(mutate):
    with pytest.raises(TamperedPayload):
        verify("s3cret", JOB, mutate(sign("s3cret", JOB, b"payload")))


def test_the_job_id_and_the_secret_are_part_of_the_signature():
    envelope = sign("s3cret", JOB, b"payload")
    with pytest.raises(TamperedPayload):
        verify("s3cret", OTHER_JOB, envelope)  # replayed as another job's code
    with pytest.raises(TamperedPayload):
        verify("another-secret", JOB, envelope)


@pytest.mark.parametrize("envelope", [None, b"", b"\x80\x05raw pickle", MAGIC + b"short"])
def test_unsigned_payloads_are_refused(envelope):
    with pytest.raises(UnsignedPayload):
        verify("s3cret", JOB, envelope)


def test_without_a_secret_nothing_is_signed_or_accepted():
    with pytest.raises(UnsignedPayload):
        sign("", JOB, b"payload")
    with pytest.raises(UnsignedPayload):
        verify(None, JOB, sign("s3cret", JOB, b"payload"))
