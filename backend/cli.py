"""The ``millstream`` command line: cluster processes and job client commands."""
from __future__ import annotations

import ipaddress
import logging
import os
import runpy
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Optional

import httpx
import typer

from backend.settings import Settings, UnknownSettingError, check_environment

app = typer.Typer(no_args_is_help=True, add_completion=False, help="Millstream: a Flink-style stream processing cluster.")
cluster_app = typer.Typer(no_args_is_help=True, help="Run a local cluster.")
app.add_typer(cluster_app, name="cluster")


@app.callback()
def _refuse_unknown_settings() -> None:
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
    from engine.checkpoint.storage import CheckpointStorageError, FileSystemCheckpointStorage

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


def _storage_path(path: str) -> str:
    """A savepoint directory as the JobManager must get it: a local path made absolute, a URL as given."""
    from engine.checkpoint.filesystem import storage_fs

    return storage_fs(path).absolute(path)


JM_OPTION = typer.Option(
    None, "--jobmanager", "-m",
    help="JobManager REST address; several, comma-separated, are tried in turn [env MILLSTREAM_JOBMANAGER]",
)


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
    from engine.security.mac import unseal_for_benchmark

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
    import uvicorn

    from backend.app import create_app

    overrides = {
        k: v for k, v in {"host": host, "port": port, "high_availability": ha, "log_file": log_file}.items() if v is not None
    }
    settings = Settings(**overrides)
    _check_bind(settings, insecure)
    _require_cluster_secret(settings, "JobManager")
    _check_checkpoint_dir(settings, "JobManager")
    from backend.persistence.database import DatabaseDriverMissing, check_database_driver

    try:
        check_database_driver(settings.resolved_database_url)
    except DatabaseDriverMissing as e:
        typer.echo(str(e), err=True)
        raise typer.Exit(2)
    _benchmark_switch(settings, "JobManager")
    from engine.checkpoint.storage import seal_state_files

    seal_state_files(settings.cluster_secret)  # state files the JobManager writes are sealed like the slots'
    _configure_logging(settings, str(settings.log_file) if settings.log_file else None)
    # log_config=None: uvicorn's own loggers go to the handlers set above (the rotating file), and
    # access lines only on request (MILLSTREAM_ACCESS_LOG), so job events are not buried in them.
    uvicorn.run(
        create_app(settings), host=settings.host, port=settings.port, log_level="info", log_config=None,
        access_log=settings.access_log,
    )


def _configure_logging(settings: Settings, log_file: str | None) -> None:
    from engine.runtime import process_logging

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
    from engine.taskexecutor.task_executor import TaskManagerConfig, run_taskmanager

    settings = Settings()
    url = redis_url or settings.redis_url
    if not url:
        typer.echo("REDIS_URL is not set: a TaskManager needs the cluster's Redis", err=True)
        raise typer.Exit(2)
    _require_cluster_secret(settings, "TaskManager")
    checkpoint_dir = _check_checkpoint_dir(settings, "TaskManager")
    unsealed = _benchmark_switch(settings, "TaskManager")
    log_path = log_file or (str(settings.log_file) if settings.log_file else None)
    _configure_logging(settings, log_path)
    run_taskmanager(
        TaskManagerConfig(
            redis_url=url,
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
) -> None:
    """Start a JobManager and TaskManagers here; Ctrl-C stops them all."""
    from backend.cluster_launcher import LocalCluster

    overrides = {k: v for k, v in {"host": host, "port": port}.items() if v is not None}
    settings = Settings(**overrides)
    _check_bind(settings, insecure=False)
    cluster = LocalCluster(
        settings, taskmanagers or settings.taskmanagers, slots or settings.slots, restart_taskmanagers, jobmanagers
    )
    signal.signal(signal.SIGINT, cluster.stop)
    signal.signal(signal.SIGTERM, cluster.stop)
    ready = False
    try:
        redis_url = cluster.start()
        from backend.api.cluster import masked

        typer.echo(f"Redis: {masked('redis', redis_url)}")  # the generated password stays off the console
        ready = cluster.wait_ready()
        if ready:
            rest = ", ".join(cluster.jobmanager_urls)
            typer.echo(
                f"Millstream is up: REST on {rest} with "
                f"{cluster.taskmanagers} TaskManagers x {cluster.slots} slots. Logs in {settings.data_dir.resolve() / 'log'}. "
                "Ctrl-C stops it."
            )
        else:
            typer.echo(f"the cluster did not come up; see {settings.data_dir.resolve() / 'log'}", err=True)
            cluster.stop()
        cluster.supervise()
    finally:
        cluster.shutdown()
    if not ready:
        raise typer.Exit(1)  # a cluster that never came up is a failure for scripts and make


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def run(
    ctx: typer.Context,
    program: Path = typer.Argument(..., exists=True, dir_okay=False, help="A Python DataStream program"),
    parallelism: Optional[int] = typer.Option(None, "--parallelism", "-p", min=1, help="Default parallelism"),
    detached: bool = typer.Option(False, "--detached", "-d", help="Submit and return without waiting"),
    local: bool = typer.Option(False, "--local", help="Run in this process on a mini-cluster"),
    engine: Optional[str] = typer.Option(
        None, "--engine", help="Where a BATCH job runs: spark (the default) or native (the streaming runtime)"
    ),
    from_savepoint: Optional[str] = typer.Option(
        None, "--from-savepoint", "-s", help="Start the job from this savepoint (or retained checkpoint) directory"
    ),
    allow_non_restored_state: bool = typer.Option(
        False, "--allow-non-restored-state", "-n",
        help="Skip savepoint state that no operator of the program takes, instead of refusing the job",
    ),
    jobmanager_url: Optional[str] = JM_OPTION,
) -> None:
    """Run PROGRAM against the cluster (or locally); extra arguments go to the program."""
    from engine.client.context import LocalContext, set_context
    from engine.client.remote import RemoteContext, SubmissionFailed
    from engine.common.job_execution_result import JobExecutionException
    from engine.compat.pyflink_alias import install

    from engine.compat.apache_flink import coexistence_note

    settings = Settings()
    note = coexistence_note()  # before install(), which would make every pyflink import ours
    if note:
        typer.echo(note, err=True)
    install()
    program_dir = str(program.resolve().parent)
    sys.path.insert(0, program_dir)
    sys.argv = [str(program), *ctx.args]
    remote = None
    if allow_non_restored_state and not from_savepoint:
        typer.echo("--allow-non-restored-state only makes sense with --from-savepoint", err=True)
        raise typer.Exit(2)
    if local:
        if from_savepoint:
            typer.echo("--from-savepoint needs a cluster; it cannot be combined with --local", err=True)
            raise typer.Exit(2)
        set_context(LocalContext(parallelism))
    else:
        if engine not in (None, "spark", "native"):
            typer.echo(f"--engine must be spark or native, not {engine}", err=True)
            raise typer.Exit(2)
        remote = RemoteContext(
            jobmanager_url or settings.jobmanager, parallelism, detached, settings.auth_token, program_dir, engine,
            from_savepoint, allow_non_restored_state,
        )
        set_context(remote)
    failed = False
    try:
        runpy.run_path(str(program), run_name="__main__")
    except JobExecutionException as e:
        typer.echo(f"Job {e.job_id} {e.status}", err=True)
        if e.cause:
            typer.echo(e.cause.rstrip(), err=True)
        failed = True
    except SubmissionFailed as e:
        typer.echo(str(e), err=True)
        failed = True
    except httpx.ConnectError:
        typer.echo(f"cannot reach the JobManager at {remote.http.base_url if remote else '?'}; is the cluster running?", err=True)
        failed = True
    if remote is not None:
        from engine.client import job_output

        job_output.finish_all()  # print() output not yet shown (execute_and_collect, execute_async)
        for job_id in remote.submitted:
            state = "SUBMITTED" if detached else _job_state(remote.http, job_id)
            typer.echo(f"Job {job_id} {state}")
            failed = failed or state == "FAILED" or (state == "CANCELED" and job_id not in remote.cancelled)
        if not remote.submitted and not failed:
            typer.echo("the program did not submit a job (no execute() call)", err=True)
    raise typer.Exit(1 if failed else 0)


def _job_state(http: httpx.Client, job_id: str) -> str:
    r = http.get(f"/jobs/{job_id}")
    return r.json().get("state", "UNKNOWN") if r.status_code == 200 else "UNKNOWN"


def _client(jobmanager_url: Optional[str]) -> httpx.Client:
    from engine.client.failover import failover_client

    settings = Settings()
    headers = {"Authorization": f"Bearer {settings.auth_token}"} if settings.auth_token else {}
    return failover_client(jobmanager_url or settings.jobmanager, headers=headers, timeout=30)


@app.command("list")
def list_jobs(jobmanager_url: Optional[str] = JM_OPTION) -> None:
    """List jobs, newest first."""
    with _client(jobmanager_url) as http:
        try:
            jobs = http.get("/jobs/overview").json()["jobs"]
        except httpx.ConnectError:
            typer.echo("cannot reach the JobManager; is the cluster running?", err=True)
            raise typer.Exit(2)
    if not jobs:
        typer.echo("No jobs.")
        return
    typer.echo(f"{'JOB ID':32}  {'STATE':10}  NAME")
    for j in jobs:
        typer.echo(f"{j['jid']:32}  {j['state']:10}  {j['name']}")


@app.command()
def cancel(job_id: str, jobmanager_url: Optional[str] = JM_OPTION) -> None:
    """Cancel a job."""
    with _client(jobmanager_url) as http:
        r = http.patch(f"/jobs/{job_id}", params={"mode": "cancel"})
    if r.status_code >= 400:
        typer.echo("; ".join(r.json().get("errors", [r.text])), err=True)
        raise typer.Exit(1)
    typer.echo(f"Cancellation of job {job_id} requested.")


def _errors_of(r: httpx.Response) -> str:
    try:
        return "; ".join(r.json().get("errors", [])) or r.text
    except ValueError:
        return r.text


def _await_savepoint(http: httpx.Client, job_id: str, request_id: str, timeout: float) -> str:
    """Poll the savepoint request until it completes; its path, or exit 1 with the failure cause."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            r = http.get(f"/jobs/{job_id}/savepoints/{request_id}")
        except httpx.TransportError:  # a JobManager restart: savepoint requests are kept in SQL
            time.sleep(1.0)
            continue
        if r.status_code >= 400:
            typer.echo(f"cannot read the savepoint's status: {_errors_of(r)}", err=True)
            raise typer.Exit(1)
        body = r.json()
        if body["status"]["id"] == "COMPLETED":
            operation = body.get("operation") or {}
            if "failure-cause" in operation:
                cause = operation["failure-cause"].get("stack-trace") or "unknown cause"
                typer.echo(f"The savepoint of job {job_id} failed: {cause}", err=True)
                raise typer.Exit(1)
            return operation["location"]
        time.sleep(0.5)
    typer.echo(
        f"the savepoint of job {job_id} did not complete within {timeout:.0f} s; it may still complete. "
        f"Poll GET /jobs/{job_id}/savepoints/{request_id}",
        err=True,
    )
    raise typer.Exit(1)


def _post_operation(http: httpx.Client, path: str, body: dict) -> str:
    try:
        r = http.post(path, json=body)
    except httpx.ConnectError:
        typer.echo("cannot reach the JobManager; is the cluster running?", err=True)
        raise typer.Exit(2)
    if r.status_code >= 400:
        typer.echo(_errors_of(r), err=True)
        raise typer.Exit(1)
    return r.json()["request-id"]


TRIGGER_ID_OPTION = typer.Option(
    None, "--trigger-id", help="An id of your choice: running the command again with it takes no second savepoint"
)
TIMEOUT_OPTION = typer.Option(600.0, "--timeout", help="Seconds to wait for the savepoint")


@app.command()
def savepoint(
    job_id: str = typer.Argument(..., help="The job's id"),
    target_directory: Optional[str] = typer.Argument(
        None, help="Where to write it [default: the job's state.savepoints.dir, else MILLSTREAM_SAVEPOINT_DIR]"
    ),
    trigger_id: Optional[str] = TRIGGER_ID_OPTION,
    timeout: float = TIMEOUT_OPTION,
    jobmanager_url: Optional[str] = JM_OPTION,
) -> None:
    """Take a savepoint of a running job, wait for it, and print its path."""
    body = {"target-directory": os.path.abspath(target_directory) if target_directory else None, "triggerId": trigger_id}
    with _client(jobmanager_url) as http:
        request_id = _post_operation(http, f"/jobs/{job_id}/savepoints", body)
        typer.echo(f"Triggering savepoint for job {job_id} (request {request_id}); waiting for it to complete...")
        path = _await_savepoint(http, job_id, request_id, timeout)
    typer.echo(f"Savepoint completed. Path: {path}")
    typer.echo(f"Resume the program from it with: millstream run --from-savepoint {path} <program.py>")


@app.command()
def stop(
    job_id: str = typer.Argument(..., help="The job's id"),
    savepoint_dir: Optional[str] = typer.Option(
        None, "--savepoint-dir", "-p", help="Where to write the final savepoint [default: as for `savepoint`]"
    ),
    drain: bool = typer.Option(
        False, "--drain", "-d", help="Send MAX_WATERMARK first, firing every event-time timer and window"
    ),
    trigger_id: Optional[str] = TRIGGER_ID_OPTION,
    timeout: float = TIMEOUT_OPTION,
    jobmanager_url: Optional[str] = JM_OPTION,
) -> None:
    """Stop a job with a final savepoint (the job ends FINISHED) and print the savepoint's path."""
    body = {
        "targetDirectory": _storage_path(savepoint_dir) if savepoint_dir else None,
        "drain": drain,
        "triggerId": trigger_id,
    }
    with _client(jobmanager_url) as http:
        request_id = _post_operation(http, f"/jobs/{job_id}/stop", body)
        typer.echo(f"Suspending job {job_id} with a savepoint (request {request_id})...")
        path = _await_savepoint(http, job_id, request_id, timeout)
    typer.echo(f"Savepoint completed. Path: {path}")
    typer.echo(f"Resume the program from it with: millstream run --from-savepoint {path} <program.py>")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
