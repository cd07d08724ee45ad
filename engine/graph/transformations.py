"""Transformations: the immutable description a DataStream program builds.

Each API call appends one ``Transformation``. Nothing here executes; the
runtime instantiates operators from these descriptions inside a task.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
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
    ASYNC_WAIT = "AsyncWait"  # AsyncDataStream: an AsyncFunction with calls in flight
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
    CUSTOM = "CUSTOM"  # partition_custom: a user Partitioner picks the subtask


class ChainingStrategy(str, Enum):
    ALWAYS = "ALWAYS"  # may chain to its predecessor and successors
    HEAD = "HEAD"  # start_new_chain(): never chained to its predecessor
    NEVER = "NEVER"  # disable_chaining(): chained to nothing


def type_name(obj: Any) -> str:
    """``module.QualName`` of an object's class: the descriptor's way to name user code without loading it."""
    cls = type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


@dataclass(frozen=True)
class WindowDescriptor:
    """What a WINDOW operator is made of, by class name, so a job can be judged without its user code.

    The JobGraph carries it beside the operator, as Flink's plan carries an
    operator's description; the Spark validator refuses an untranslatable
    trigger or evictor at submission with it, before any driver starts.
    """

    assigner: str  # module.QualName of the WindowAssigner
    event_time: bool
    merging: bool
    global_windows: bool  # GlobalWindows and the count window assigners
    trigger: tuple[str, ...]  # the effective trigger (the assigner's default if none is set), outermost first
    evictor: str | None
    function_kind: str  # reduce | aggregate | process | apply

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "WindowDescriptor":
        """Parse the JSON a client sent; a malformed descriptor is a ValueError saying what is wrong."""
        names = {f.name for f in fields(WindowDescriptor)}
        if not isinstance(d, dict) or set(d) != names:
            got = sorted(d) if isinstance(d, dict) else type(d).__name__
            raise ValueError(f"a window descriptor needs the fields {sorted(names)}, got {got}")
        if not isinstance(d["trigger"], (list, tuple)) or not all(isinstance(t, str) for t in d["trigger"]):
            raise ValueError(f"a window descriptor's trigger is a list of class names, got {d['trigger']!r}")
        return WindowDescriptor(**{**d, "trigger": tuple(d["trigger"])})


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
