"""``pyflink.common.job_status``: ``JobStatus``, the job states the cluster reports."""
from millstream.engine.executiongraph.states import JobStatus

__all__ = ["JobStatus"]
