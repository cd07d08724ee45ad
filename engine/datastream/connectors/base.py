"""``pyflink.datastream.connectors.base``: the Source/Sink base names and ``DeliveryGuarantee``."""
from enum import Enum

from millstream.engine.compat.unsupported import declare_unsupported
from millstream.engine.datastream.connectors.sink import Sink
from millstream.engine.datastream.connectors.source import Source


class DeliveryGuarantee(Enum):
    """A sink's guarantee, as connectors are configured with it. Millstream's sinks state theirs
    themselves (FileSink and RedisStreamSink are exactly-once through two-phase commit)."""

    EXACTLY_ONCE = 0
    AT_LEAST_ONCE = 1
    NONE = 2


__all__ = ["DeliveryGuarantee", "Sink", "Source", "StreamTransformer", "SupportsPreprocessing"]

declare_unsupported(
    globals(),
    ["StreamTransformer", "SupportsPreprocessing"],
    why="sink pre-processing topologies (Java sink transformers) are not implemented",
    instead="ordinary DataStream operators before sink_to()",
)
