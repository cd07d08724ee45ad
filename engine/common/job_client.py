"""``pyflink.common.job_client``: ``JobClient``, what ``execute_async`` returns."""
from engine.client.job_client import JobClient

__all__ = ["JobClient"]
