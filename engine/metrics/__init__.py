"""User metrics, under PyFlink's names (``pyflink.metrics`` resolves here)."""
from millstream.engine.metrics.metricbase import Counter, Distribution, Meter, Metric, MetricGroup

__all__ = ["MetricGroup", "Metric", "Counter", "Meter", "Distribution"]
