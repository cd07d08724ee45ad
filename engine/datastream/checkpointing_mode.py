"""``pyflink.datastream.checkpointing_mode``: ``CheckpointingMode``."""
from millstream.engine.checkpoint.config import CheckpointingMode

__all__ = ["CheckpointingMode"]
