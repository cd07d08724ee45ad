"""``pyflink.datastream.checkpoint_config``: ``CheckpointConfig`` (it lives with the coordinator's code)."""
from millstream.engine.checkpoint.config import CheckpointConfig, CheckpointingMode, ExternalizedCheckpointRetention

__all__ = ["CheckpointConfig", "CheckpointingMode", "ExternalizedCheckpointRetention"]
