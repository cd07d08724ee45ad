"""Whether this host can run BATCH jobs on Spark: PySpark is the optional extra ``millstream[spark]``."""
from __future__ import annotations

import importlib.util

INSTALL_HINT = "install millstream[spark] (pip install 'millstream[spark]') on the JobManager's host"


def spark_available() -> bool:
    """True when PySpark can be imported here; looked up, not imported (importing it takes seconds)."""
    return importlib.util.find_spec("pyspark") is not None


def spark_unavailable_reason() -> str | None:
    """Why BATCH jobs cannot run on Spark here, or None when they can."""
    if spark_available():
        return None
    return f"Spark is not available: PySpark is not installed; {INSTALL_HINT}"
