"""``pyflink.datastream.checkpointing_mode``: ``CheckpointingMode``."""
from engine.checkpoint.config import CheckpointingMode

__all__ = ["CheckpointingMode"]
