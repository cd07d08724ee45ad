"""The ``millstream`` command line: the cluster's processes here, the job client commands from backend/cli_client.py."""
from __future__ import annotations

import ipaddress
import os
import signal
import socket
import sys
from pathlib import Path
from typing import Optional

import typer

from millstream.backend.cli_client import _fail, client_app
from millstream.backend.settings import Settings, UnknownSettingError, check_environment

# rich_markup_mode=None: plain help, so the "[env ...]" and "[default ...]" notes are not taken for
# rich markup and swallowed.
app = typer.Typer(
    no_args_is_help=True, add_completion=False, rich_markup_mode=None,
    help="Millstream: a Flink-style stream processing cluster.",
)
cluster_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="Run a local cluster.")
app.add_typer(cluster_app, name="cluster")
app.add_typer(client_app)  # run, info, list, cancel, savepoint, stop


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("millstream")
    except PackageNotFoundError:
        return "unknown (not installed as a package)"


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"Millstream {_version()}")
        raise typer.Exit()


@app.callback()
def _refuse_unknown_settings(
    version: bool = typer.Option(
        False, "--version", is_eager=True, callback=_print_version, help="Print the version and exit"
    ),
) -> None:
    """Millstream: a Flink-style stream processing cluster."""
    # Every command, before it starts anything: a misspelt MILLSTREAM_* variable would otherwise be
    # ignored in silence, e.g. a TaskManager writing checkpoints where the JobManager never looks.
    try:
        check_environment()
    except UnknownSettingError as e:
        typer.echo(str(e), err=True)
        raise typer.Exit(2)


def _check_checkpoint_dir(settings: Settings, who: str) -> str:
    """Create the checkpoint directory and prove it writable, or exit 2 saying why; its absolute path."""
    from millstream.engine.checkpoint.storage import CheckpointStorageError, FileSystemCheckpointStorage

    directory = settings.resolved_checkpoint_dir
    try:
        FileSystemCheckpointStorage(directory).check_writable()  # a local directory or an fsspec URL
    except (CheckpointStorageError, ImportError, ValueError) as e:
        typer.echo(
            f"the {who} cannot write to its checkpoint directory {directory} (MILLSTREAM_CHECKPOINT_DIR): {e}. "
            "The JobManager and every TaskManager must share this directory.",
            err=True,
        )
        raise typer.Exit(2)
    return str(directory)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _check_bind(settings: Settings, insecure: bool) -> None:
    if not _is_loopback(settings.host) and not settings.auth_token:
        if not insecure:
            typer.echo(
                f"refusing to bind to {settings.host} without MILLSTREAM_AUTH_TOKEN: anyone who can reach the "
                "REST API could run code on this cluster. Set a token, or pass --insecure to accept the risk.",
                err=True,
            )
            raise typer.Exit(2)
        typer.echo(f"WARNING: serving on {settings.host} without authentication (--insecure)", err=True)


def _benchmark_switch(settings: Settings, who: str) -> bool:
    """Whether this process runs unsealed, for benchmarks/seal_cost.py only; refuses to start when the
    switch is set without the benchmark flag, or on a cluster that could be reached from elsewhere."""
    if not settings.benchmark_unsealed:
        return False
    if not settings.benchmark:
        typer.echo(
            f"refusing to start the {who}: MILLSTREAM_BENCHMARK_UNSEALED turns authentication off and is for "
            "benchmarks only; it needs MILLSTREAM_BENCHMARK=1 as well", err=True,
        )
        raise typer.Exit(2)
    if settings.auth_token or settings.host not in ("127.0.0.1", "localhost", "::1"):
        typer.echo(f"refusing to start the {who} unsealed on a cluster bound beyond loopback or with a token", err=True)
        raise typer.Exit(2)
    from millstream.engine.security.mac import unseal_for_benchmark

    unseal_for_benchmark()
    return True


def _require_cluster_secret(settings: Settings, who: str) -> None:
    # Without a shared secret a TaskManager could not tell the JobManager's code from code
    # anyone with access to Redis planted there, so neither side starts without one.
    if not settings.cluster_secret:
        typer.echo(
            f"refusing to start the {who} without MILLSTREAM_CLUSTER_SECRET: it signs the user code the "
            "JobManager puts in Redis, and TaskManagers run only code signed with it. Set the same random "
            "value (e.g. `python -c 'import secrets; print(secrets.token_hex(32))'`) on the JobManager and every "
            "TaskManager; `millstream cluster start` generates one for its own processes.",
            err=True,
        )
        raise typer.Exit(2)


# glibc's mmap threshold, fixed from the process's start: the large transient blocks of each job (its
# JobGraph and user code, SQL rows, Redis replies) then stay out of the threads' malloc arenas, whose
# fragmentation grew the JobManager ~25 KiB per job (docs/performance.md, "JobManager memory per job").
# Set later with mallopt it did not help, so the process re-executes itself with it in the environment.
MMAP_THRESHOLD = "131072"


def _fix_malloc_mmap_threshold() -> None:
    """Re-execute this ``millstream jobmanager`` with MALLOC_MMAP_THRESHOLD_ set, unless the environment
    sets one (a user's own setting wins). The same process id: a supervisor sees nothing."""
    if "MALLOC_MMAP_THRESHOLD_" in os.environ or not sys.platform.startswith("linux"):
        return
    if "jobmanager" not in sys.argv[1:]:  # called in-process (a test's CliRunner): nothing to re-execute
        return
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_=MMAP_THRESHOLD)
    os.execve(sys.executable, [sys.executable, "-m", "millstream.backend.cli", *sys.argv[1:]], env)


@app.command()
def jobmanager(
    host: Optional[str] = typer.Option(None, help="Bind address [env MILLSTREAM_HOST, default 127.0.0.1]"),
    port: Optional[int] = typer.Option(None, help="REST port [env MILLSTREAM_PORT, default 8081]"),
    insecure: bool = typer.Option(False, help="Allow a non-loopback bind without an auth token"),
    ha: Optional[bool] = typer.Option(
        None, "--ha/--no-ha",
        help="High availability: elect a leader among the JobManagers sharing this Redis and database; "
        "the others stand by [env MILLSTREAM_HIGH_AVAILABILITY]",
    ),
    log_file: Optional[str] = typer.Option(
        None, help="Log to this file, rotated by size, instead of stderr [env MILLSTREAM_LOG_FILE]"
    ),
) -> None:
    """Run the JobManager: Dispatcher, REST API and scheduler."""
    _fix_malloc_mmap_threshold()
    import uvicorn

    from millstream.backend.app import create_app

    overrides = {
        k: v for k, v in {"host": host, "port": port, "high_availability": ha, "log_file": log_file}.items() if v is not None
    }
    settings = Settings(**overrides)
    _check_bind(settings, insecure)
    _require_cluster_secret(settings, "JobManager")
    _check_checkpoint_dir(settings, "JobManager")
    from millstream.backend.persistence.database import DatabaseDriverMissing, check_database_driver

    try:
        check_database_driver(settings.resolved_database_url)
    except DatabaseDriverMissing as e:
        typer.echo(str(e), err=True)
        raise typer.Exit(2)
    _benchmark_switch(settings, "JobManager")
    # After the last exec (_fix_malloc_mmap_threshold) and once the settings hold the secrets: the
    # programs this JobManager plans must not read them from its /proc/<pid>/environ or mem.
    from millstream.engine.security.process_hardening import harden_process

    harden_process()
    from millstream.engine.checkpoint.storage import seal_state_files

    seal_state_files(settings.cluster_secret)  # state files the JobManager writes are sealed like the slots'
    _configure_logging(settings, str(settings.log_file) if settings.log_file else None)
    # log_config=None: uvicorn's own loggers go to the handlers set above (the rotating file), and
    # access lines only on request (MILLSTREAM_ACCESS_LOG), so job events are not buried in them.
    uvicorn.run(
        create_app(settings), host=settings.host, port=settings.port, log_level="info", log_config=None,
        access_log=settings.access_log,
    )


def _configure_logging(settings: Settings, log_file: str | None) -> None:
    from millstream.engine.runtime import process_logging

    if log_file:
        Path(log_file).parent.mkdir(parents=True, exist_ok=True)
    process_logging.configure(log_file, max_bytes=settings.log_max_bytes, backups=settings.log_backups)


@app.command()
def taskmanager(
    slots: Optional[int] = typer.Option(None, help="Task slots [env MILLSTREAM_SLOTS, default 2]"),
    redis_url: Optional[str] = typer.Option(None, help="Redis URL [env REDIS_URL]"),
    log_file: Optional[str] = typer.Option(None, help="Where this process logs, shown by the REST API"),
    host: Optional[str] = typer.Option(
        None,
        help="The host name or address this TaskManager advertises, or auto for this machine's host name "
        "[env MILLSTREAM_TASKMANAGER_HOST, default 127.0.0.1]",
    ),
    metrics_port: Optional[int] = typer.Option(
        None, min=-1, max=65535,
        help="Port of this TaskManager's Prometheus endpoint, bound on its host; 0 picks a free one, -1 serves "
        "none [env MILLSTREAM_TASKMANAGER_METRICS_PORT, default 0]",
    ),
) -> None:
    """Run a TaskManager that offers SLOTS task slots."""
    from millstream.engine.taskexecutor.task_executor import TaskManagerConfig, run_taskmanager

    settings = Settings()
    url = redis_url or settings.redis_url
    if not url:
        typer.echo("REDIS_URL is not set: a TaskManager needs the cluster's Redis", err=True)
        raise typer.Exit(2)
    _require_cluster_secret(settings, "TaskManager")
    checkpoint_dir = _check_checkpoint_dir(settings, "TaskManager")
    unsealed = _benchmark_switch(settings, "TaskManager")
    # The slots get what they need in their SlotConfig; user code in them must not find the secrets
    # in this process's environment (inherited by the slots too) or its /proc/<pid>/environ and mem.
    from millstream.engine.security.process_hardening import harden_process

    harden_process()
    log_path = log_file or (str(settings.log_file) if settings.log_file else None)
    _configure_logging(settings, log_path)
    run_taskmanager(
        TaskManagerConfig(
            redis_url=url,
            data_redis_urls=tuple(settings.data_redis_url_list),
            slots=slots or settings.slots,
            heartbeat_interval_ms=settings.heartbeat_interval_ms,
            heartbeat_timeout_ms=settings.heartbeat_timeout_ms,
            credits=settings.credits,
            buffer_records=settings.buffer_records,
            log_file=os.path.abspath(log_path) if log_path else None,
            state_dir=str((settings.data_dir / "state").resolve()),
            cluster_secret=settings.cluster_secret,
            host=_advertised_host(host or settings.taskmanager_host),
            checkpoint_dir=checkpoint_dir,
            unsealed_benchmark=unsealed,
            metrics_port=_metrics_port(settings.taskmanager_metrics_port if metrics_port is None else metrics_port),
            # The endpoint is a read: it needs the REST API's token exactly when reads do.
            metrics_token=settings.auth_token if settings.auth_reads else None,
        )
    )


def _metrics_port(port: int) -> int | None:
    return None if port < 0 else port


def _advertised_host(host: str) -> str:
    """The name a TaskManager shows; ``auto`` is this machine's host name (a container's, in compose)."""
    return socket.gethostname() if host == "auto" else host


@cluster_app.command("start")
def cluster_start(
    host: Optional[str] = typer.Option(None, help="REST bind address [default 127.0.0.1]"),
    port: Optional[int] = typer.Option(None, help="REST port [default 8081]"),
    taskmanagers: Optional[int] = typer.Option(None, help="Number of TaskManagers [default 2]"),
    jobmanagers: int = typer.Option(
        1, min=1, help="JobManagers: more than one runs one leader and standbys on consecutive ports from --port",
    ),
    slots: Optional[int] = typer.Option(None, help="Slots per TaskManager [default 2]"),
    restart_taskmanagers: bool = typer.Option(True, help="Start a TaskManager again when it dies"),
    data_redis: int = typer.Option(
        0, min=0,
        help="Embedded Redis servers for the data channels (MILLSTREAM_DATA_REDIS_URLS), started again when "
        "they die; 0 keeps the channels on REDIS_URL",
    ),
) -> None:
    """Start a JobManager and TaskManagers here; Ctrl-C stops them all."""
    from millstream.backend.cluster_launcher import LocalCluster
    from millstream.backend.embedded_redis import redis_url_of

    overrides = {k: v for k, v in {"host": host, "port": port}.items() if v is not None}
    settings = Settings(**overrides)
    _check_bind(settings, insecure=False)
    cluster = LocalCluster(
        settings, taskmanagers or settings.taskmanagers, slots or settings.slots, restart_taskmanagers, jobmanagers,
        data_redis,
    )
    # The launcher is an ancestor of every program the cluster plans or runs: it keeps the secrets
    # it passes on out of its own environment and /proc files (engine/security/process_hardening.py).
    from millstream.engine.security.process_hardening import harden_process

    cluster.inherited_secrets = harden_process()
    taken = cluster.taken_port()
    if taken:
        # Before anything starts: another server on the port must not be taken for this cluster.
        raise _fail(f"the cluster did not come up: {taken}", 1)
    signal.signal(signal.SIGINT, cluster.stop)
    signal.signal(signal.SIGTERM, cluster.stop)
    ready = False
    try:
        try:
            redis_url = cluster.start()
        except Exception as e:  # noqa: BLE001 - the embedded Redis or a process could not start: say why
            cluster.failure = f"{type(e).__name__}: {e}"
        else:
            from millstream.backend.api.cluster import masked

            typer.echo(f"Redis: {masked('redis', redis_url)}")  # the generated password stays off the console
            if cluster.data_redis:
                urls = ", ".join(masked("redis", redis_url_of(s)) for s in cluster.data_redis)
                typer.echo(f"Data Redis servers: {urls}")
            ready = cluster.wait_ready()
        if ready:
            rest = ", ".join(cluster.jobmanager_urls)
            typer.echo(
                f"Millstream is up: REST on {rest} with "
                f"{cluster.taskmanagers} TaskManagers x {cluster.slots} slots. Logs in {settings.data_dir.resolve() / 'log'}. "
                "Ctrl-C stops it."
            )
            cluster.supervise()
        else:
            typer.echo(f"the cluster did not come up: {cluster.failure}", err=True)
    finally:
        cluster.shutdown(say=True)
    if not ready or cluster.failure:
        raise typer.Exit(1)  # a cluster that never came up (or gave up) is a failure for scripts and make


def main() -> None:
    app()


if __name__ == "__main__":
    main()
