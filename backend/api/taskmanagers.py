"""TaskManager REST resources: the registered TaskManagers, their slots, metrics and logs.

Logs are addressed by TaskManager id, never by path. The file a TaskManager
announces is served only from the cluster's log directory, so a registry entry
cannot make the JobManager read an arbitrary file; a TaskManager whose file is
not here (another host) is served from the log lines it ships through Redis.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated, Any

import redis
from fastapi import APIRouter, HTTPException, Path as PathParam
from fastapi.responses import PlainTextResponse

from millstream.backend.deps import DispatcherDep, SettingsDep
from millstream.backend.services.taskmanager_views import LogList, TaskManagers, log_list, taskmanager_detail, taskmanagers_list
from millstream.backend.settings import Settings
from millstream.engine.jobmanager.dispatcher import Dispatcher
from millstream.engine.resourcemanager.slot_pool import TaskManagerInfo
from millstream.engine.taskexecutor.log_shipper import read_log

router = APIRouter(tags=["taskmanagers"])

LOG_TAIL_BYTES = 1 << 20
_TM_ID = re.compile(r"[A-Za-z0-9._:\-\[\]]{1,200}")
TaskManagerId = Annotated[str, PathParam(description="The TaskManager id, as listed by GET /taskmanagers")]


def read_tail(path: Path, limit: int) -> str:
    """The last ``limit`` bytes of a text file, starting at a whole line when cut."""
    with path.open("rb") as f:
        size = f.seek(0, os.SEEK_END)
        f.seek(max(size - limit, 0))
        data = f.read(limit)
    if size > limit:
        data = data.partition(b"\n")[2]
    return data.decode("utf-8", errors="replace")


def _taskmanager(dispatcher: Dispatcher, tm_id: str) -> TaskManagerInfo:
    tm = dispatcher.slot_pool_snapshot().taskmanagers.get(tm_id) if _TM_ID.fullmatch(tm_id) else None
    if tm is None:
        raise HTTPException(404, f"TaskManager {tm_id} not found")
    return tm


def _log_file(settings: Settings, tm: TaskManagerInfo) -> Path | None:
    announced = tm.details.get("log_file")
    if not announced:
        return None
    path = Path(announced).resolve()
    if not path.is_relative_to(settings.log_dir.resolve()) or not path.is_file():
        return None
    return path


@router.get("/taskmanagers", summary="Registered TaskManagers")
def list_taskmanagers(dispatcher: DispatcherDep) -> TaskManagers:
    """Every live TaskManager with its slots and hardware."""
    pool = dispatcher.slot_pool_snapshot()
    metrics = {tm: dispatcher.taskmanager_metrics(tm) for tm in pool.taskmanagers}
    return taskmanagers_list(pool, metrics)


@router.get("/taskmanagers/{tmid}", summary="One TaskManager")
def get_taskmanager(dispatcher: DispatcherDep, tmid: TaskManagerId) -> dict[str, Any]:
    """The TaskManager's summary plus ``allocatedSlots [{jobId, resource}]`` and its latest ``metrics``."""
    tm = _taskmanager(dispatcher, tmid)
    return taskmanager_detail(tm, dispatcher.slot_pool_snapshot(), dispatcher.taskmanager_metrics(tm.id))


@router.get("/taskmanagers/{tmid}/logs", summary="The TaskManager's log files")
def taskmanager_logs(dispatcher: DispatcherDep, settings: SettingsDep, tmid: TaskManagerId) -> LogList:
    """``{logs: [{name, size, mtime}]}``; empty when the TaskManager logs to no file we can serve."""
    path = _log_file(settings, _taskmanager(dispatcher, tmid))
    if path is None:
        return log_list(None, None)
    st = path.stat()
    return log_list(path, {"size": st.st_size, "mtime": int(st.st_mtime * 1000)})


def _tail(dispatcher: Dispatcher, settings: Settings, tmid: str) -> PlainTextResponse:
    tm = _taskmanager(dispatcher, tmid)
    path = _log_file(settings, tm)
    if path is None:
        raise HTTPException(
            404, f"TaskManager {tm.id} has no log file in {settings.log_dir} (start it with --log-file there)"
        )
    return PlainTextResponse(read_tail(path, LOG_TAIL_BYTES))


def shipped_log(dispatcher: Dispatcher, tm_id: str) -> str | None:
    """What a TaskManager's processes logged, from Redis (engine/taskexecutor/log_shipper.py): how
    the log of a TaskManager on another host reaches this JobManager."""
    try:
        return read_log(dispatcher.client, tm_id, dispatcher.config.cluster_secret)
    except redis.RedisError:
        return None


@router.get("/taskmanagers/{tmid}/log", summary="The end of the TaskManager's log", response_class=PlainTextResponse)
def taskmanager_log(dispatcher: DispatcherDep, settings: SettingsDep, tmid: TaskManagerId) -> PlainTextResponse:
    """The last MiB of the TaskManager's log file when it is on this host; otherwise the log lines
    its processes shipped through Redis (the file also holds their print() output)."""
    tm = _taskmanager(dispatcher, tmid)
    if _log_file(settings, tm) is None:
        text = shipped_log(dispatcher, tm.id)
        if text is not None:
            return PlainTextResponse(text[-LOG_TAIL_BYTES:])
    return _tail(dispatcher, settings, tmid)


@router.get(
    "/taskmanagers/{tmid}/stdout", summary="The end of the TaskManager's stdout", response_class=PlainTextResponse
)
def taskmanager_stdout(dispatcher: DispatcherDep, settings: SettingsDep, tmid: TaskManagerId) -> PlainTextResponse:
    """The last MiB of the TaskManager's output; its stdout (print sinks) goes to the same file as its log."""
    return _tail(dispatcher, settings, tmid)
