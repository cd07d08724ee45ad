"""``pyflink.datastream.externalized_checkpoint_retention``: ``ExternalizedCheckpointRetention``."""
from millstream.engine.checkpoint.config import ExternalizedCheckpointRetention

__all__ = ["ExternalizedCheckpointRetention"]
