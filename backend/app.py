"""The FastAPI application: the Dispatcher's REST API (and, later, the dashboard).

``create_app`` wires settings, Redis, SQL and the engine's Dispatcher; every
router is mounted twice, bare and under ``/v1``, as Flink does. Errors use
Flink's ``{"errors": [...]}`` body.
"""
from __future__ import annotations

import logging
import secrets
from contextlib import asynccontextmanager
from typing import AsyncIterator

import redis
from fastapi import FastAPI, Request
from sqlalchemy.exc import InterfaceError, OperationalError
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse, RedirectResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from millstream.backend.audit import AuditMiddleware
from millstream.backend.bearer_auth import bearer_matches
from millstream.backend.leader_forwarding import LeaderForwarding
from millstream.backend.leadership import make_leadership
from millstream.backend.limits import RequestSizeLimit
from millstream.backend.origin_guard import OriginGuard
from millstream.backend.persistence.audit_log import AuditLog
from millstream.backend.persistence.database import make_engine, make_session_factory, upgrade_database
from millstream.backend.persistence.jar_store import JarRepository
from millstream.backend.persistence.leader_fence import SqlLeaderFence
from millstream.backend.persistence.sql_job_store import SqlJobStore
from millstream.backend.persistence.taskmanager_history import TaskManagerHistory
from millstream.backend.persistence.ui_sessions import UISessionStore
from millstream.backend.services.flame_graphs import FlameGraphService
from millstream.backend.services.programs import ProgramService
from millstream.backend.settings import Settings, check_environment
from millstream.backend.ui.security import logged_in
from millstream.engine.jobmanager.dispatcher import (
    Dispatcher,
    DispatcherConfig,
    DuplicateJobSubmission,
    JobSubmissionError,
    OperationRejected,
    TooManyJobs,
    UnknownJob,
)
from millstream.engine.jobmanager.job_store import StoreUnavailable
from millstream.engine.jobmanager.leader_election import FencedOut
from millstream.engine.jobmanager.savepoints import StateRoots

log = logging.getLogger("millstream.app")

VERSION = "0.1.0"


def _routers():
    from millstream.backend.api import (
        audit, checkpoints, cluster, jars, job_output, jobs, metrics, savepoints, submission, taskmanagers, vertices,
    )
    from millstream.backend.api import jobmanager_leader

    return [
        metrics.router,  # first: /jobs/metrics and /taskmanagers/metrics before /jobs/{jid} and /taskmanagers/{tmid}
        cluster.router,
        jobs.router,
        submission.router,
        vertices.router,
        checkpoints.router,
        savepoints.router,  # after checkpoints: /checkpoints/{triggerid} must not shadow /checkpoints/config
        taskmanagers.router,
        jars.router,
        audit.router,
        job_output.router,
        jobmanager_leader.router,
    ]


def create_app(settings: Settings | None = None) -> FastAPI:
    if settings is None:
        # Built from the environment (``uvicorn --factory millstream.backend.app:create_app``, not the CLI, which
        # checks first): a misspelt MILLSTREAM_* variable must not be ignored in silence here either.
        check_environment()
        settings = Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if not settings.redis_url:
            raise RuntimeError("REDIS_URL is not set; `millstream cluster start` provides one")
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        settings.upload_dir.mkdir(parents=True, exist_ok=True)
        url = settings.resolved_database_url
        upgrade_database(url)
        engine = make_engine(url)
        sessions = make_session_factory(engine)
        client = redis.Redis.from_url(settings.redis_url, socket_keepalive=True)
        dispatcher = Dispatcher(
            client,
            SqlJobStore(sessions),
            DispatcherConfig(
                heartbeat_interval_ms=settings.heartbeat_interval_ms,
                heartbeat_timeout_ms=settings.heartbeat_timeout_ms,
                batch_engine=settings.batch_engine,
                spark_master=settings.spark_master,
                spark_conf=settings.spark_conf,
                redis_url=settings.redis_url,
                checkpoint_dir=str(settings.resolved_checkpoint_dir),
                savepoint_dir=str(settings.resolved_savepoint_dir),
                cluster_secret=cluster_secret(settings),
                max_parallelism=settings.max_parallelism,
                max_concurrent_jobs=settings.max_concurrent_jobs,
                archive_after_ms=settings.job_archive_after_ms,
                checkpoints_history=settings.checkpoints_history,
                latency_interval_ms=settings.latency_interval_ms,
                data_redis_urls=tuple(settings.data_redis_url_list),
                data_server_check_interval_ms=settings.data_redis_check_interval_ms,
                slot_request_timeout_ms=int(settings.slot_request_timeout_s * 1000),
            ),
            # Without HA, this start's epoch (with HA, each term's Dispatcher takes its lease's token).
            epoch=None if settings.high_availability else SqlLeaderFence(sessions).next_epoch(),
        )
        dispatcher.state_roots = StateRoots.of(*settings.state_roots)  # what REST callers may point it at
        # Without HA it just runs the Dispatcher; with HA the Dispatcher is a standby's, and each term of
        # leadership gets a new one like it (backend/leadership.py).
        leadership = app.state.leadership = make_leadership(app.state, settings, client, sessions, dispatcher)
        # With HA, what a JobManager writes to the shared stores is fenced as job writes are: a deposed
        # leader (paused past its lease) changes none of them (backend/persistence/leader_fence.py).
        fence = leadership if leadership.high_availability else None
        app.state.audit = AuditLog(
            sessions, settings.audit_retention_days, settings.audit_refusals_per_minute, fence=fence
        )
        app.state.ui_sessions = UISessionStore(sessions, settings.session_ttl_s, fence=fence)
        app.state.settings = settings
        app.state.dispatcher = dispatcher
        app.state.flame_graphs = FlameGraphService(dispatcher)
        app.state.jars = JarRepository(sessions, fence=fence)
        app.state.tm_history = TaskManagerHistory(sessions)
        app.state.programs = ProgramService(
            app.state.jars, settings.upload_dir, settings.max_upload_bytes, settings.plan_timeout_s,
            settings.max_concurrent_plans, settings.parallelism_default,
        )
        _build_routes(app)
        leadership.start()
        log.info("JobManager REST API on http://%s:%d", settings.host, settings.port)
        try:
            yield
        finally:
            leadership.stop()
            client.close()
            engine.dispose()

    app = FastAPI(
        title="Millstream",
        version=VERSION,
        description="A Flink-style stream processing cluster. REST paths and fields follow Flink's REST API; "
        "every path is also served under /v1.",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.leadership = None  # set at start-up (backend/leadership.py)
    for router in _routers():
        app.include_router(router)
        app.include_router(router, prefix="/v1", include_in_schema=False)
    _install_error_handlers(app)
    app.add_middleware(RequestSizeLimit, max_bytes=settings.max_request_bytes)
    if settings.auth_token:
        _require_token_for_mutations(app, settings.auth_token, settings.auth_reads)
    else:
        # No token: loopback is the only barrier, so browsers and rebinding names are kept out.
        app.add_middleware(OriginGuard, allowed_hosts=settings.allowed_host_list, allowed_origins=settings.cors_origin_list)
    app.add_middleware(AuditMiddleware)  # outside the token check, so refusals are recorded too
    if settings.cors_origin_list:
        app.add_middleware(
            CORSMiddleware, allow_origins=settings.cors_origin_list, allow_methods=["*"],
            allow_headers=["Authorization", "Content-Type"],
        )
    from millstream.backend.ui import install_ui  # deferred: backend.ui imports backend.api

    install_ui(app)
    # Outermost: a standby hands requests to the leader, which applies its own token, audit and limits;
    # it does nothing without high availability.
    app.add_middleware(
        LeaderForwarding, max_body_bytes=settings.max_request_bytes,
        guard_hosts=None if settings.auth_token else settings.allowed_host_list,
        allowed_origins=settings.cors_origin_list,
    )
    return app


def _build_routes(app: FastAPI) -> None:
    """Build every route's request and response validators now, not on a job's first calls.

    FastAPI builds an included router's routes (pydantic validators for each) when the first request
    reaches that router: about 100 ms of the JobManager's CPU on this machine, spent while the first
    job's tasks were reporting to it, which made the first job on a fresh cluster the slowest. Routing
    a path that no route serves walks, and so builds, every router."""
    scope = {"type": "http", "method": "GET", "path": "/\x00", "root_path": "", "query_string": b"", "headers": []}
    for route in app.router.routes:
        route.matches(dict(scope))


def cluster_secret(settings: Settings) -> str:
    """The secret that signs user code. The CLI refuses to start without one; an app built
    without it (tests, embedding) gets a random one, so its code is never unsigned and only
    TaskManagers that share the secret will run it."""
    if settings.cluster_secret:
        return settings.cluster_secret
    log.warning("MILLSTREAM_CLUSTER_SECRET is not set: signing user code with a random secret no TaskManager knows")
    return secrets.token_hex(32)


def _require_token_for_mutations(app: FastAPI, token: str, reads: bool = False) -> None:
    """Every mutating request needs ``Authorization: Bearer <token>`` once a token is configured;
    with ``reads`` every other request does too, and the dashboard's pages need its login."""
    @app.middleware("http")
    async def check_token(request: Request, call_next):
        path = request.url.path
        if path.startswith("/ui/"):
            # Dashboard forms check CSRF and the login session themselves; its pages and
            # streams are reads, open only after the login when reads are protected.
            public = path == "/ui/login" or path.startswith("/ui/static/")
            if reads and request.method in ("GET", "HEAD") and not public and not logged_in(request, token):
                return RedirectResponse("/ui/login", status_code=303)
            return await call_next(request)
        if request.method in ("POST", "PUT", "PATCH", "DELETE") or (reads and path != "/"):
            if not bearer_matches(request.headers.get("authorization"), token):
                return JSONResponse(
                    {"errors": ["a valid 'Authorization: Bearer <token>' header is required"]},
                    status_code=401,
                    headers={"WWW-Authenticate": "Bearer"},
                )
        return await call_next(request)


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(redis.RedisError)
    async def redis_unavailable(_: Request, exc: redis.RedisError) -> JSONResponse:
        # Redis away or restarting: clients retry a 503 (engine/client/remote.py) rather than fail.
        return JSONResponse({"errors": [f"Redis is unavailable: {exc}"]}, status_code=503)

    @app.exception_handler(StoreUnavailable)
    async def store_unavailable(_: Request, exc: StoreUnavailable) -> JSONResponse:
        # SQL away: running jobs go on (their writes wait in memory); what needs SQL is retried later.
        return JSONResponse(
            {"errors": [f"{exc}; running jobs are not affected, and their changes are stored once it is back"]},
            status_code=503, headers={"Retry-After": "5"},
        )

    async def sql_unavailable(_: Request, exc: Exception) -> JSONResponse:
        # Outside the job store (uploaded programs, dashboard logins): the same answer, not a traceback.
        first = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
        return JSONResponse(
            {"errors": [f"the SQL database is unavailable: {first}"]}, status_code=503, headers={"Retry-After": "5"}
        )

    app.add_exception_handler(OperationalError, sql_unavailable)
    app.add_exception_handler(InterfaceError, sql_unavailable)

    @app.exception_handler(FencedOut)
    async def fenced_out(_: Request, exc: FencedOut) -> JSONResponse:
        # This JobManager lost the leadership while serving the request; nothing was written. A retry
        # is forwarded to the new leader (backend/leader_forwarding.py).
        return JSONResponse({"errors": [f"{exc}; retry"]}, status_code=503, headers={"Retry-After": "1"})

    @app.exception_handler(UnknownJob)
    async def unknown_job(_: Request, exc: UnknownJob) -> JSONResponse:
        return JSONResponse({"errors": [f"Job {exc.args[0]} not found"]}, status_code=404)

    @app.exception_handler(TooManyJobs)
    async def too_many_jobs(_: Request, exc: TooManyJobs) -> JSONResponse:
        return JSONResponse({"errors": [str(exc)]}, status_code=429)

    @app.exception_handler(DuplicateJobSubmission)
    async def duplicate_job(_: Request, exc: DuplicateJobSubmission) -> JSONResponse:
        return JSONResponse({"errors": [str(exc)]}, status_code=409)

    @app.exception_handler(OperationRejected)
    async def rejected_operation(_: Request, exc: OperationRejected) -> JSONResponse:
        return JSONResponse({"errors": [str(exc)]}, status_code=exc.status)

    @app.exception_handler(JobSubmissionError)
    async def bad_job(_: Request, exc: JobSubmissionError) -> JSONResponse:
        return JSONResponse({"errors": [str(exc)]}, status_code=400)

    @app.exception_handler(RequestValidationError)
    async def bad_request(_: Request, exc: RequestValidationError) -> JSONResponse:
        msgs = [f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg')}" for e in exc.errors()]
        return JSONResponse({"errors": msgs or ["bad request"]}, status_code=400)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return JSONResponse({"errors": [str(exc.detail)]}, status_code=exc.status_code, headers=exc.headers)
