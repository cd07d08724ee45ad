"""The envelope module alone: sealing, and refusing tampered, misplaced, replayed or foreign elements."""
from __future__ import annotations

import pytest

from millstream.engine.security import mac
from millstream.engine.security.mac import MissingSecret, Sealer, Unauthenticated

SECRET = "unit-secret"


def test_a_sealed_payload_opens_in_its_own_context():
    s = Sealer(SECRET, "buffer", "ms:ch:job:0:1:0:0")
    assert s.open(s.seal(b"payload", 3), 3) == b"payload"
    assert s.open(s.seal(b"")) == b""


@pytest.mark.parametrize("position", [0, 1, 16, 17, -1])
def test_any_changed_byte_is_refused(position: int):
    s = Sealer(SECRET, "control", "ms:jm:inbox")
    sealed = bytearray(s.seal(b"a control message"))
    sealed[position] ^= 0x01
    with pytest.raises(Unauthenticated):
        s.open(bytes(sealed))


def test_replay_into_another_channel_attempt_kind_or_position_is_refused():
    sealed = Sealer(SECRET, "buffer", "ms:ch:job:0:1:0:0").seal(b"x", 5)
    for other in (
        Sealer(SECRET, "buffer", "ms:ch:job:0:1:0:1"),  # another channel
        Sealer(SECRET, "buffer", "ms:ch:job:1:1:0:0"),  # another attempt
        Sealer(SECRET, "collect", "ms:ch:job:0:1:0:0"),  # another kind of element
    ):
        with pytest.raises(Unauthenticated):
            other.open(sealed, 5)
    with pytest.raises(Unauthenticated):
        Sealer(SECRET, "buffer", "ms:ch:job:0:1:0:0").open(sealed, 6)  # replayed later in its own channel


def test_context_parts_cannot_be_resplit():
    sealed = Sealer(SECRET, "control", "ab", "c").seal(b"x")
    with pytest.raises(Unauthenticated):
        Sealer(SECRET, "control", "a", "bc").open(sealed)


def test_another_secret_or_no_envelope_is_refused_and_counted():
    before = mac.refused.get("control", 0)
    with pytest.raises(Unauthenticated, match="MAC does not match"):
        Sealer("other", "control", "inbox").open(Sealer(SECRET, "control", "inbox").seal(b"x"))
    with pytest.raises(Unauthenticated, match="no authentication envelope"):
        Sealer(SECRET, "control", "inbox").open(b"\x80\x04plain pickle")
    with pytest.raises(Unauthenticated):
        Sealer(SECRET, "control", "inbox").open(None)
    assert mac.refused["control"] == before + 3


def test_without_a_secret_nothing_is_sealed_or_opened():
    for secret in (None, "", b""):
        with pytest.raises(MissingSecret, match="MILLSTREAM_CLUSTER_SECRET"):
            Sealer(secret, "buffer", "k")


def test_clear_per_element_context_is_covered_and_derived_keys_are_per_use():
    s = Sealer(SECRET, "collect", "ms:collect:j")
    sealed = s.seal(b"entry", 3, b"writer-1")
    assert s.open(sealed, 3, b"writer-1") == b"entry"
    for seq, extra in ((3, b"writer-2"), (4, b"writer-1"), (3, b"")):
        with pytest.raises(Unauthenticated):
            s.open(sealed, seq, extra)
    a, b = mac.derive(SECRET, "stdout", "job-a"), mac.derive(SECRET, "stdout", "job-b")
    assert a != b and a == mac.derive(SECRET, "stdout", "job-a") and SECRET not in a
    assert mac.derive("another secret", "stdout", "job-a") != a
