"""``OutputTag``: names a side output. ``yield tag, value`` sends value there."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from millstream.engine.compat.unsupported import java_only


@dataclass(frozen=True)
class OutputTag:
    tag_id: str
    type_info: Any = None

    # Not a field (no annotation): the dataclass leaves it a class attribute.
    get_java_output_tag = java_only("the OutputTag itself, ctx.output(tag, value) and stream.get_side_output(tag)")

    def __post_init__(self) -> None:
        if not self.tag_id:
            raise ValueError("an OutputTag needs a non-empty id")
