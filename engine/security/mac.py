"""Authenticated envelopes: one MAC, keyed with the cluster secret, per element that crosses Redis.

Anyone who can write to Redis could otherwise push a data buffer a slot process decodes (its pickle
fallback runs code), a collect entry ``millstream run`` decodes, or a control message that deploys,
cancels or finishes tasks. Every such element is sealed here and opened before it is decoded:

    envelope = VERSION (1 byte) | tag (16 bytes) | payload

The tag is keyed BLAKE2b over a *context* (the kind of element and the names that place it: job,
attempt, channel or inbox key, and for data buffers the element's sequence number in its channel)
and the payload. The context is not sent; the receiver rebuilds it from where it read the element,
so an element replayed into another channel, inbox, job or attempt (or out of order in its own
channel) fails, as does a changed byte or another cluster's secret. One MAC per buffer, not per
record: keyed BLAKE2b costs about a microsecond plus ~1 ns/byte (benchmarks/mac_cost.py).

Values that Lua scripts compare as strings or that people read with redis-cli (the HA leader lease,
the data servers' fingerprint) are sealed as text instead: ``sealed1:<hex tag>:<text>``
(:func:`seal_text`, :func:`open_text`), with the same key and contexts.
"""
from __future__ import annotations

import functools
import hashlib
import hmac
import logging
from typing import Union

VERSION = 0xA1  # a byte that starts neither msgpack's array/map nor a frame nor a pickle
TAG_BYTES = 16
HEADER_BYTES = 1 + TAG_BYTES
_PERSON = b"millstream-mac1"  # BLAKE2b personalisation: these keys never collide with another use

Part = Union[str, int, bytes]

log = logging.getLogger("millstream.security")

#: elements refused per kind in this process (logged too): a count the tests and operators can read
refused: dict[str, int] = {}

# Benchmark only (benchmarks/seal_cost.py): True once ``unseal_for_benchmark`` ran in this process.
_UNSEALED = False


class Unauthenticated(Exception):
    """An element that was not sealed with this cluster's secret for this context; never decode it."""


class MissingSecret(Unauthenticated):
    """No cluster secret is configured: nothing can be sealed or opened."""


@functools.lru_cache(maxsize=8)
def _key(secret: str | bytes) -> bytes:
    if not secret:
        raise MissingSecret(
            "no cluster secret is configured (MILLSTREAM_CLUSTER_SECRET): refusing to exchange "
            "unauthenticated data or control messages through Redis"
        )
    raw = secret.encode() if isinstance(secret, str) else bytes(secret)
    # Derived once, so a long secret costs nothing per element and the raw secret is hashed in one place.
    return hashlib.blake2b(raw, digest_size=32, person=b"millstream-key1").digest()


def _context_bytes(kind: str, parts: tuple[Part, ...]) -> bytes:
    # Length-prefixed, so ("a", "bc") and ("ab", "c") are different contexts.
    out = bytearray()
    for p in (kind, *parts):
        b = p if isinstance(p, bytes) else str(p).encode()
        out += len(b).to_bytes(4, "big") + b
    return bytes(out)


def describe(kind: str, parts: tuple[Part, ...]) -> str:
    return f"{kind} " + "/".join(p.decode(errors="replace") if isinstance(p, bytes) else str(p) for p in parts)


class Sealer:
    """Seals and opens the envelopes of one context, e.g. ``Sealer(secret, "buffer", channel_key)``.

    The keyed hash of the context is computed once; each element costs one copy and one pass over
    its payload. ``seq`` (optional) is mixed in per element: a channel's n-th element must carry n.
    """

    def __init__(self, secret: str | bytes | None, kind: str, *context: Part) -> None:
        self.kind = kind
        self.context = context
        self._base = hashlib.blake2b(key=_key(secret or ""), digest_size=TAG_BYTES, person=_PERSON)
        self._base.update(_context_bytes(kind, context))

    def _tag(self, payload: bytes | memoryview, seq: int | None, extra: bytes = b"") -> bytes:
        h = self._base.copy()
        if seq is not None:
            h.update(seq.to_bytes(8, "big", signed=True))
        if extra:  # per-element context sent in clear next to the envelope (e.g. a collect entry's writer)
            h.update(len(extra).to_bytes(4, "big") + extra)
        h.update(payload)
        return h.digest()

    def seal(self, payload: bytes, seq: int | None = None, extra: bytes = b"") -> bytes:
        if _UNSEALED:
            return payload
        return bytes((VERSION,)) + self._tag(payload, seq, extra) + payload

    def open(self, envelope: bytes | None, seq: int | None = None, extra: bytes = b"") -> bytes:
        """The payload of ``envelope``; raises Unauthenticated (logged and counted) before decoding anything."""
        if _UNSEALED and envelope is not None:
            return envelope
        if not isinstance(envelope, (bytes, bytearray)) or len(envelope) < HEADER_BYTES or envelope[0] != VERSION:
            self._refuse("it carries no authentication envelope")
        view = memoryview(envelope)
        if not hmac.compare_digest(view[1:HEADER_BYTES], self._tag(view[HEADER_BYTES:], seq, extra)):
            self._refuse("its MAC does not match (altered, replayed from elsewhere, or sealed with another cluster secret)")
        return bytes(view[HEADER_BYTES:])

    def try_open(self, envelope: bytes) -> bytes | None:
        """The payload, or None if ``envelope`` was not sealed for this context; nothing is logged or
        counted (for a reader that tries one format, then an older one)."""
        if _UNSEALED:
            return envelope
        if len(envelope) < HEADER_BYTES or envelope[0] != VERSION:
            return None
        view = memoryview(envelope)
        if not hmac.compare_digest(view[1:HEADER_BYTES], self._tag(view[HEADER_BYTES:], None)):
            return None
        return bytes(view[HEADER_BYTES:])

    def _refuse(self, why: str) -> None:
        refused[self.kind] = refused.get(self.kind, 0) + 1
        where = describe(self.kind, self.context)
        log.warning("refused an unauthenticated element (%s): %s", where, why)
        raise Unauthenticated(f"unauthenticated {where}: {why}")


def seal(secret: str | bytes | None, kind: str, context: tuple[Part, ...], payload: bytes) -> bytes:
    return Sealer(secret, kind, *context).seal(payload)


def open_envelope(secret: str | bytes | None, kind: str, context: tuple[Part, ...], envelope: bytes | None) -> bytes:
    return Sealer(secret, kind, *context).open(envelope)


def derive(secret: str | bytes | None, kind: str, *context: Part) -> str:
    """A key for ``kind`` elements of ``context`` only (hex), derived from the cluster secret: given to a
    process that must seal one kind of element of one job (a Spark executor's print lines) and
    nothing else, so the cluster secret itself never leaves the cluster's own processes."""
    return hashlib.blake2b(
        _context_bytes(kind, context), key=_key(secret or ""), digest_size=32, person=b"millstream-sub1"
    ).hexdigest()


def unseal_for_benchmark() -> None:
    """Turn sealing and checking off in this process, to measure what sealing costs end to end.

    Benchmark only: the CLI calls it only when both ``MILLSTREAM_BENCHMARK=1`` and
    ``MILLSTREAM_BENCHMARK_UNSEALED=1`` are set on a loopback-only cluster without a token, and
    every process of that cluster must do the same (a sealing process and an unsealed one refuse
    each other's elements). Anyone with the Redis URL then runs code in that cluster."""
    global _UNSEALED
    log.warning("BENCHMARK ONLY: nothing crossing Redis or disk is sealed or checked in this process")
    _UNSEALED = True


def is_unsealed() -> bool:
    return _UNSEALED


def check_secret(secret: str | bytes | None) -> None:
    """Raise MissingSecret unless ``secret`` can key envelopes (processes call it before starting a data plane)."""
    _key(secret or "")


TEXT_PREFIX = "sealed1:"  # a sealed text value: "sealed1:<hex tag>:<text>"


def seal_text(secret: str | bytes | None, kind: str, context: tuple[Part, ...], text: str) -> str:
    """``text`` with a tag in front, as text: for Redis values that scripts compare as strings (the
    leader lease) or that people read with redis-cli, where a binary envelope would be awkward."""
    if _UNSEALED:
        return text
    tag = Sealer(secret, kind, *context)._tag(text.encode(), None)
    return f"{TEXT_PREFIX}{tag.hex()}:{text}"


def open_text(secret: str | bytes | None, kind: str, context: tuple[Part, ...], value: str | bytes | None) -> str:
    """The text sealed in ``value`` by :func:`seal_text`; raises Unauthenticated (counted, not logged:
    these values are polled, so callers log once per distinct value) for anything else."""
    if value is None:
        raise Unauthenticated(f"unauthenticated {describe(kind, context)}: nothing is there")
    try:
        raw = value.decode() if isinstance(value, bytes) else value
    except UnicodeDecodeError:
        raw = ""
    if _UNSEALED:
        return raw
    tag_hex, sep, text = raw[len(TEXT_PREFIX):].partition(":") if raw.startswith(TEXT_PREFIX) else ("", "", "")
    expected = Sealer(secret, kind, *context)._tag(text.encode(), None)
    try:
        tag = bytes.fromhex(tag_hex)
    except ValueError:
        tag = b""
    if not sep or not hmac.compare_digest(tag, expected):
        refused[kind] = refused.get(kind, 0) + 1
        why = "it is not sealed" if not raw.startswith(TEXT_PREFIX) else "its MAC does not match"
        raise Unauthenticated(f"unauthenticated {describe(kind, context)}: {why} with this cluster's secret")
    return text
