"""The declared type of each stream: what ``DataStream.get_type()`` answers.

As in PyFlink, an operator's output type is the ``output_type`` it was given, or Python
objects (PICKLED_BYTE_ARRAY) when none was; steps that pass records through unchanged
(filter, partitioning, union, watermarks) keep their input's type, and keyed reduce and
the sum/min/max aggregations keep the type of the stream before ``key_by``. The type only
decides how records are printed and collected; it never changes how they travel.
"""
from __future__ import annotations

from typing import Any, Mapping

from millstream.engine.common.typeinfo import PickledBytesTypeInfo, TypeInformation
from millstream.engine.graph.transformations import OperatorKind, Transformation

# Kinds whose records are their input's records.
_PASS_THROUGH = {
    OperatorKind.FILTER,
    OperatorKind.TIMESTAMPS,
    OperatorKind.PARTITION,
    OperatorKind.UNION,
    OperatorKind.REDUCE,  # reduce, sum, min, max...: the records keep the keyed stream's type
}


def output_type_of(transformations: Mapping[int, Transformation], tid: int) -> TypeInformation:
    """The declared type of the records transformation ``tid`` emits."""
    seen = 0
    while True:
        t = transformations[tid]
        if t.output_type is not None:
            return t.output_type
        if t.kind is OperatorKind.SIDE_OUTPUT:
            declared: Any = t.params.get("type_info")
            return declared if declared is not None else PickledBytesTypeInfo()
        if t.kind in _PASS_THROUGH and t.inputs:
            tid = t.inputs[0]
            seen += 1
            if seen > len(transformations):  # a cycle cannot be built, but never loop forever
                break
            continue
        break
    return PickledBytesTypeInfo()
