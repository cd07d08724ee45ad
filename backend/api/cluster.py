"""Cluster-wide REST resources: dashboard config, cluster overview, JobManager config and log."""
from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from fastapi import APIRouter, HTTPException
from fastapi.responses import PlainTextResponse
from typing_extensions import TypedDict

from millstream.backend.api.taskmanagers import LOG_TAIL_BYTES, read_tail
from millstream.backend.deps import DispatcherDep, SettingsDep
from millstream.backend.services.taskmanager_views import LogList, log_list
from millstream.backend.settings import Settings
from millstream.engine.spark.availability import spark_available, spark_unavailable_reason

router = APIRouter(tags=["cluster"])

FLINK_REVISION = "unknown"
_SECRET_WORDS = ("token", "password", "secret", "key")
MASK = "******"


def flink_version() -> str:
    from millstream.backend.app import VERSION  # deferred: backend.app imports this module's package

    return f"millstream-{VERSION}"


DashboardConfig = TypedDict(
    "DashboardConfig",
    {
        "refresh-interval": int,
        "timezone-name": str,
        "timezone-offset": int,
        "flink-version": str,
        "flink-revision": str,
        "features": dict[str, bool],
    },
)
ClusterOverview = TypedDict(
    "ClusterOverview",
    {
        "taskmanagers": int,
        "slots-total": int,
        "slots-available": int,
        "jobs-running": int,
        "jobs-finished": int,
        "jobs-cancelled": int,
        "jobs-failed": int,
        "flink-version": str,
        "flink-commit": str,
    },
)


class ConfigEntry(TypedDict):
    key: str
    value: str


@router.get("/config", summary="Dashboard configuration")
def dashboard_config() -> DashboardConfig:
    """Refresh interval, time zone, version and the features this cluster's dashboard offers."""
    local = datetime.now().astimezone()
    offset = local.utcoffset()
    return {
        "refresh-interval": 3000,
        "timezone-name": local.tzname() or "UTC",
        "timezone-offset": int(offset.total_seconds() * 1000) if offset else 0,
        "flink-version": flink_version(),
        "flink-revision": FLINK_REVISION,
        "features": {
            "web-submit": True, "web-cancel": True, "web-rescale": False, "web-history": False,
            "spark": spark_available(),  # a Millstream addition: BATCH jobs can run on Spark (millstream[spark])
        },
    }


@router.get("/overview", summary="Cluster overview")
def cluster_overview(dispatcher: DispatcherDep) -> ClusterOverview:
    """TaskManagers, slots, and job counts by outcome."""
    counts: Any = dispatcher.overview()
    return {**counts, "flink-version": flink_version(), "flink-commit": FLINK_REVISION}


class DataServerEntry(TypedDict):
    index: int
    address: str
    status: str
    since: int | None
    lastCheck: int | None
    latencyMs: float | None
    error: str | None


class DataServers(TypedDict):
    servers: list[DataServerEntry]
    down: int
    checkIntervalMs: int


@router.get("/cluster/data-servers", summary="The data Redis servers and whether they answer")
def data_servers(dispatcher: DispatcherDep) -> DataServers:
    """Millstream's: each server of MILLSTREAM_DATA_REDIS_URLS as the leading JobManager's last PING saw it
    (``UP``, ``DOWN`` with the error, or ``UNKNOWN`` before the first check); ``servers`` is empty when
    channels live on the control Redis."""
    states = dispatcher.data_server_states()
    return {
        "servers": [s.to_dict() for s in states],  # type: ignore[misc]
        "down": sum(1 for s in states if s.status == "DOWN"),
        "checkIntervalMs": dispatcher.config.data_server_check_interval_ms,
    }


@router.get("/jobmanager/config", summary="JobManager configuration")
def jobmanager_config(settings: SettingsDep) -> list[ConfigEntry]:
    """Every setting as ``{key, value}``; tokens and passwords (also inside URLs) are masked."""
    values: dict[str, Any] = settings.model_dump()
    values["database_url"] = settings.resolved_database_url
    values["checkpoint_dir"] = settings.resolved_checkpoint_dir
    # Not a setting, but what decides whether BATCH jobs can run on Spark here.
    values["spark_available"] = "true" if spark_available() else f"false: {spark_unavailable_reason()}"
    return [{"key": k, "value": masked(k, v)} for k, v in sorted(values.items())]


def masked(key: str, value: Any) -> str:
    """The value as a string, with secrets replaced by ``******``."""
    if value is None:
        return ""
    if any(word in key.lower() for word in _SECRET_WORDS):
        return MASK
    text = str(value)
    if "://" in text:
        parts = urlsplit(text)
        if parts.password is not None:
            host = parts.netloc.rpartition("@")[2]
            user = parts.username or ""
            return urlunsplit(parts._replace(netloc=f"{user}:{MASK}@{host}"))
    return text


def _jobmanager_log(settings: Settings) -> Path:
    return settings.jobmanager_log_file


@router.get("/jobmanager/logs", summary="The JobManager's log files")
def jobmanager_logs(settings: SettingsDep) -> LogList:
    """``{logs: [{name, size, mtime}]}``; empty when the JobManager does not log to a file."""
    path = _jobmanager_log(settings)
    if not path.is_file():
        return log_list(None, None)
    st = path.stat()
    return log_list(path, {"size": st.st_size, "mtime": int(st.st_mtime * 1000)})


@router.get("/jobmanager/log", summary="The end of the JobManager's log", response_class=PlainTextResponse)
def jobmanager_log(settings: SettingsDep) -> PlainTextResponse:
    """The last MiB of ``<data_dir>/log/jobmanager.log``, as written by ``millstream cluster start``."""
    path = _jobmanager_log(settings)
    if not path.is_file():
        raise HTTPException(404, "the JobManager has no log file (it logs to the console)")
    return PlainTextResponse(read_tail(path, LOG_TAIL_BYTES))
