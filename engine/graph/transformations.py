"""Transformations: the immutable description a DataStream program builds.

Each API call appends one ``Transformation``. Nothing here executes; the
runtime instantiates operators from these descriptions inside a task.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class OperatorKind(str, Enum):
    SOURCE = "Source"
    MAP = "Map"
    FLAT_MAP = "FlatMap"
    FILTER = "Filter"
    PROCESS = "Process"
    KEYED_PROCESS = "KeyedProcess"
    REDUCE = "Reduce"
    SINK = "Sink"
    TIMESTAMPS = "Timestamps/Watermarks"
    WINDOW = "Window"
    CO_MAP = "CoMap"
    CO_FLAT_MAP = "CoFlatMap"
    CO_PROCESS = "CoProcess"
    KEYED_CO_PROCESS = "KeyedCoProcess"
    BROADCAST_PROCESS = "BroadcastProcess"
    KEYED_BROADCAST_PROCESS = "KeyedBroadcastProcess"
    # Virtual kinds only shape edges; they never become operators.
    PARTITION = "Partition"
    UNION = "Union"
    SIDE_OUTPUT = "SideOutput"

    @property
    def is_virtual(self) -> bool:
        return self in (OperatorKind.PARTITION, OperatorKind.UNION, OperatorKind.SIDE_OUTPUT)


class ShipStrategy(str, Enum):
    """How records travel over an edge; the names Flink shows in plans."""

    FORWARD = "FORWARD"
    REBALANCE = "REBALANCE"
    HASH = "HASH"
    BROADCAST = "BROADCAST"
    RESCALE = "RESCALE"
    SHUFFLE = "SHUFFLE"


class ChainingStrategy(str, Enum):
    ALWAYS = "ALWAYS"  # may chain to its predecessor and successors
    HEAD = "HEAD"  # start_new_chain(): never chained to its predecessor
    NEVER = "NEVER"  # disable_chaining(): chained to nothing


@dataclass(frozen=True)
class Transformation:
    """One step of a program. Immutable: the API replaces, never mutates."""

    id: int
    kind: OperatorKind
    name: str
    inputs: tuple[int, ...] = ()
    parallelism: int | None = None  # None: the environment's default
    max_parallelism: int | None = None
    uid: str | None = None
    function: Any = None  # the user function, source or sink object
    params: dict[str, Any] = field(default_factory=dict)
    chaining: ChainingStrategy = ChainingStrategy.ALWAYS
    output_type: Any = None
    # Only for PARTITION transformations:
    ship_strategy: ShipStrategy | None = None
    key_selector: Any = None
    bounded: bool = True  # for sources: does the source end?
    fixed_parallelism: int | None = None  # non-parallel sources pin this to 1

    def __hash__(self) -> int:
        return hash(self.id)
