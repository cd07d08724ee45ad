"""``OutputTag``: names a side output. ``yield tag, value`` sends value there."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class OutputTag:
    tag_id: str
    type_info: Any = None

    def __post_init__(self) -> None:
        if not self.tag_id:
            raise ValueError("an OutputTag needs a non-empty id")
