"""The ``Authorization: Bearer <token>`` check shared by the REST token middleware and the audit log.

The scheme name is case-insensitive (RFC 7235 section 2.1), so ``bearer`` and ``BEARER``
work as ``Bearer`` does; the token itself is compared exactly and in constant time.
"""
from __future__ import annotations

import hmac


def bearer_matches(header: str | None, token: str) -> bool:
    scheme, _, given = (header or "").strip().partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(given.strip().encode(), token.encode())
