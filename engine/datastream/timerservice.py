"""``pyflink.datastream.timerservice``: ``TimerService`` (defined with the functions that use it)."""
from millstream.engine.datastream.functions import TimerService

__all__ = ["TimerService"]
