"""``pyflink.common.job_id``: ``JobID``, a job's 32-hex-digit id."""
from __future__ import annotations

import uuid

__all__ = ["JobID"]


class JobID:
    def __init__(self, hex_string: str | None = None) -> None:
        value = hex_string if hex_string is not None else uuid.uuid4().hex
        if len(value) != 32 or any(c not in "0123456789abcdefABCDEF" for c in value):
            raise ValueError(f"a JobID is 32 hex digits, got {value!r}")
        self._hex = value.lower()

    @staticmethod
    def from_hex_string(hex_string: str) -> "JobID":
        return JobID(hex_string)

    def to_hex_string(self) -> str:
        return self._hex

    def __str__(self) -> str:
        return self._hex

    def __repr__(self) -> str:
        return f"JobID({self._hex})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, JobID) and other._hex == self._hex

    def __hash__(self) -> int:
        return hash(self._hex)
