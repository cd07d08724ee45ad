"""Redis keys of the Spark runner (to be merged into ``engine.redis_keys``).

Like every Millstream key they hold short-lived, rebuildable data.
"""
from __future__ import annotations

from engine.redis_keys import PREFIX

SPARK_PROGRESS = PREFIX + ":spark:{job}:progress"  # JSON: application id, UI URL, Spark jobs and stages
SPARK_CANCEL = PREFIX + ":spark:{job}:cancel"  # string: present once cancellation was requested

PROGRESS_TTL_S = 3600  # long enough for a finished job's page to still show its stages


def spark_progress(job: str) -> str:
    return SPARK_PROGRESS.format(job=job)


def spark_cancel(job: str) -> str:
    return SPARK_CANCEL.format(job=job)
