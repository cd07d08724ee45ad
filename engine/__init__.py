"""Millstream's engine: the DataStream API, graphs, scheduling and the task runtime.

The pure core (graphs, chaining, scheduling decisions, key groups, windows,
watermarks, checkpoint bookkeeping) does no I/O; Redis, SQL and Spark sit
behind small protocols in the runtime, jobmanager and taskexecutor packages.
"""

from millstream.engine.compat.legacy_modules import install as _install_legacy_modules  # noqa: E402

# State written before the packages moved under ``millstream`` names classes as ``engine.…``.
_install_legacy_modules()
