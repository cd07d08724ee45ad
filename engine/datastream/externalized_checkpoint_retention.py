"""``pyflink.datastream.externalized_checkpoint_retention``: ``ExternalizedCheckpointRetention``."""
from engine.checkpoint.config import ExternalizedCheckpointRetention

__all__ = ["ExternalizedCheckpointRetention"]
