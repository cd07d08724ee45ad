"""``pyflink.datastream.time_domain``: ``TimeDomain`` (defined with the functions that use it)."""
from millstream.engine.datastream.functions import TimeDomain

__all__ = ["TimeDomain"]
