"""FastAPI dependencies as named ``Annotated`` aliases."""
from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from millstream.backend.persistence.jar_store import JarRepository
from millstream.backend.persistence.taskmanager_history import TaskManagerHistory
from millstream.backend.services.flame_graphs import FlameGraphService
from millstream.backend.settings import Settings
from millstream.engine.jobmanager.dispatcher import Dispatcher


def get_dispatcher(request: Request) -> Dispatcher:
    return request.app.state.dispatcher


def get_settings_dep(request: Request) -> Settings:
    return request.app.state.settings


def get_jars(request: Request) -> JarRepository:
    return request.app.state.jars


def get_flame_graphs(request: Request) -> FlameGraphService:
    return request.app.state.flame_graphs


def get_tm_history(request: Request) -> TaskManagerHistory:
    return request.app.state.tm_history


DispatcherDep = Annotated[Dispatcher, Depends(get_dispatcher)]
SettingsDep = Annotated[Settings, Depends(get_settings_dep)]
JarsDep = Annotated[JarRepository, Depends(get_jars)]
TaskManagerHistoryDep = Annotated[TaskManagerHistory, Depends(get_tm_history)]
FlameGraphsDep = Annotated[FlameGraphService, Depends(get_flame_graphs)]
