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
from typing import Any, Callable, Optional

import httpx
import typer

from backend.settings import Settings, UnknownSettingError, check_environment

# rich_markup_mode=None: plain help, so the "[env ...]" and "[default ...]" notes are not taken for
# rich markup and swallowed.
app = typer.Typer(
    no_args_is_help=True, add_completion=False, rich_markup_mode=None,
    help="Millstream: a Flink-style stream processing cluster.",
)
cluster_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="Run a local cluster.")
app.add_typer(cluster_app, name="cluster")


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
    directory = settings.resolved_checkpoint_dir
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe = directory / f".probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        typer.echo(
            f"the {who} cannot write to its checkpoint directory {directory} (MILLSTREAM_CHECKPOINT_DIR): {e}. "
            "The JobManager and every TaskManager must share this directory.",
            err=True,
        )
        raise typer.Exit(2)
    return str(directory)


JM_OPTION = typer.Option(
    None, "--jobmanager", "-m",
    help="JobManager REST address, host:port (as Flink's -m) or a URL; several, comma-separated, are tried in turn [env MILLSTREAM_JOBMANAGER]",
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
            cluster.supervise()
        else:
            typer.echo(f"the cluster did not come up: {cluster.failure}", err=True)
    finally:
        cluster.shutdown(say=True)
    if not ready or cluster.failure:
        raise typer.Exit(1)  # a cluster that never came up (or gave up) is a failure for scripts and make


# Exit codes of the client commands (documented in `millstream run --help` and the README).
EXIT_JOB_FAILED = 1  # the job failed, was cancelled by someone else, or the JobManager refused it
EXIT_USAGE = 2  # a bad command line, address or setting
EXIT_UNREACHABLE = 3  # no JobManager answered at the address, or what answered is not one
EXIT_PROGRAM = 4  # the program raised, exited non-zero, or never called execute()
EXIT_NO_SLOTS = 5  # the job got no slots within the slot request timeout and was cancelled

EXIT_CODES_HELP = (
    "Exit codes: 0 every job finished (or, with --detached, was submitted); 1 a job failed or was cancelled, "
    "or the JobManager refused it; 2 a bad command line; 3 no JobManager answered at the address; "
    "4 the program failed or never called execute(); 5 a job got no slots within the slot request timeout."
)

# Everything after the program path is the program's own: "run prog.py -p 3" gives "-p 3" to the
# program, as Flink's CLI does, and "run -p 2 prog.py x" sets the parallelism.
PROGRAM_CONTEXT = {"allow_extra_args": True, "ignore_unknown_options": True, "allow_interspersed_args": False}


def _fail(message: str, code: int) -> typer.Exit:
    typer.echo(message, err=True)
    return typer.Exit(code)


def _program_error(e: BaseException, program: Path, submitted: bool) -> str:
    """One line for an exception the program raised: type, message and where in the program."""
    import traceback

    where = ""
    target = str(program.resolve())
    for frame in reversed(traceback.extract_tb(e.__traceback__)):
        if frame.filename == target:
            where = f" ({program.name}, line {frame.lineno})"
            break
    text = str(e).strip().splitlines()
    what = f"{type(e).__name__}: {text[0]}" if text else type(e).__name__
    when = "the program failed" if submitted else "the program failed before submitting a job"
    return f"{when}: {what}{where}"


def _run_program(program: Path, args: list[str], verbose: bool, submitted: Callable[[], bool]) -> str | None:
    """Run the user program as ``__main__`` with ``args``; None if it ran through, else one line saying
    how it failed (with ``verbose``, its traceback is printed first)."""
    from engine.client.plan_capture import ProgramAbort

    sys.path.insert(0, str(program.resolve().parent))
    sys.argv = [str(program), *args]
    try:
        runpy.run_path(str(program), run_name="__main__")
    except ProgramAbort:
        return None
    except SystemExit as e:
        if e.code in (0, None):
            return None
        return f"the program exited with status {e.code}"
    except Exception as e:  # noqa: BLE001 - the user's program: one line, not our traceback
        from engine.client.remote import SubmissionFailed
        from engine.common.job_execution_result import JobExecutionException

        if isinstance(e, (JobExecutionException, SubmissionFailed, httpx.TransportError)):
            raise  # about the job or the cluster, not the program: the caller says what
        if verbose:
            import traceback

            traceback.print_exc()
        return _program_error(e, program, submitted())
    return None


def _probe_jobmanager(http: httpx.Client, addresses: str) -> None:
    """Exit 3 with one line unless a Millstream JobManager answers at ``addresses``."""
    try:
        r = http.get("/overview", timeout=10)
    except httpx.TransportError as e:
        raise _fail(
            f"cannot reach the JobManager at {addresses}: {e or type(e).__name__}. Is the cluster running? "
            "(Set the address with -m host:port or MILLSTREAM_JOBMANAGER.)",
            EXIT_UNREACHABLE,
        )
    if r.status_code in (401, 403):
        raise _fail(
            f"the JobManager at {addresses} refused the request ({r.status_code}): set MILLSTREAM_AUTH_TOKEN "
            "to the cluster's token",
            EXIT_UNREACHABLE,
        )
    try:
        ok = r.status_code == 200 and "taskmanagers" in r.json()
    except ValueError:
        ok = False
    if not ok:
        raise _fail(
            f"{addresses} answers, but not as a Millstream JobManager (GET /overview gave {r.status_code}); "
            "check the address (-m host:port, MILLSTREAM_JOBMANAGER)",
            EXIT_UNREACHABLE,
        )


@app.command(context_settings=PROGRAM_CONTEXT, epilog=EXIT_CODES_HELP)
def run(
    ctx: typer.Context,
    program: Path = typer.Argument(
        ..., exists=True, dir_okay=False, help="A Python DataStream program; what follows it is its arguments"
    ),
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
    slot_timeout: Optional[float] = typer.Option(
        None, "--slot-timeout", min=1,
        help="Seconds an attached run lets its job wait for slots before cancelling it (Flink's "
        "slot.request.timeout) [env MILLSTREAM_SLOT_REQUEST_TIMEOUT_S, default 300]",
    ),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show the program's traceback when it fails"),
    jobmanager_url: Optional[str] = JM_OPTION,
) -> None:
    """Run PROGRAM against the cluster (or locally); the arguments after PROGRAM go to the program.

    It prints "Job has been submitted with JobID <id>" and the job's dashboard URL on stderr as soon as
    the JobManager has the job; attached, it says while the job waits for slots, shows the job's print()
    output on stdout, and ends with a line "Job <id> <STATE>" on stdout.
    """
    from engine.client.context import LocalContext, set_context
    from engine.client.failover import BadAddress
    from engine.client.remote import NoResourceAvailable, RemoteContext, SubmissionFailed
    from engine.common.job_execution_result import JobExecutionException
    from engine.compat.pyflink_alias import install

    from engine.compat.apache_flink import coexistence_note

    settings = Settings()
    if allow_non_restored_state and not from_savepoint:
        raise _fail("--allow-non-restored-state only makes sense with --from-savepoint", EXIT_USAGE)
    if engine not in (None, "spark", "native"):
        raise _fail(f"--engine must be spark or native, not {engine}", EXIT_USAGE)
    if local and from_savepoint:
        raise _fail("--from-savepoint needs a cluster; it cannot be combined with --local", EXIT_USAGE)
    remote = None
    if not local:
        addresses = jobmanager_url or settings.jobmanager
        try:
            remote = RemoteContext(
                addresses, parallelism, detached, settings.auth_token, str(program.resolve().parent), engine,
                from_savepoint, allow_non_restored_state,
                slot_timeout if slot_timeout is not None else settings.slot_request_timeout_s,
            )
        except BadAddress as e:
            raise _fail(str(e), EXIT_USAGE)
        # Before the program runs: a wrong address is one line now, not a traceback after the graph is built.
        _probe_jobmanager(remote.http, addresses)
    note = coexistence_note()  # before install(), which would make every pyflink import ours
    if note:
        typer.echo(note, err=True)
    install()
    set_context(remote if remote is not None else LocalContext(parallelism))
    code = 0
    try:
        failure = _run_program(program, ctx.args, verbose, lambda: bool(remote and remote.submitted))
        if failure:
            typer.echo(failure, err=True)
            code = EXIT_PROGRAM
    except NoResourceAvailable as e:
        typer.echo(str(e), err=True)
        code = EXIT_NO_SLOTS
    except JobExecutionException as e:
        typer.echo(f"Job {e.job_id} {e.status}", err=True)
        if e.cause:
            typer.echo(e.cause.rstrip(), err=True)
        code = EXIT_JOB_FAILED
    except SubmissionFailed as e:
        typer.echo(str(e), err=True)
        code = EXIT_JOB_FAILED
    except httpx.TransportError as e:
        where = remote.http.current_address if remote else "?"
        typer.echo(f"lost the JobManager at {where}: {e or type(e).__name__}", err=True)
        code = EXIT_UNREACHABLE
    if remote is not None:
        from engine.client import job_output

        job_output.finish_all()  # print() output not yet shown (execute_and_collect, execute_async)
        for job_id in remote.submitted:
            state = "SUBMITTED" if detached else _job_state(remote.http, job_id)
            typer.echo(f"Job {job_id} {state}")
            if code == 0 and (state == "FAILED" or (state == "CANCELED" and job_id not in remote.cancelled)):
                code = EXIT_JOB_FAILED
        if not remote.submitted and code == 0:
            typer.echo("the program did not submit a job: it never called execute() or execute_and_collect()", err=True)
            code = EXIT_PROGRAM
    raise typer.Exit(code)


@app.command(context_settings=PROGRAM_CONTEXT)
def info(
    ctx: typer.Context,
    program: Path = typer.Argument(
        ..., exists=True, dir_okay=False, help="A Python DataStream program; what follows it is its arguments"
    ),
    parallelism: Optional[int] = typer.Option(None, "--parallelism", "-p", min=1, help="Default parallelism"),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show the program's traceback when it fails"),
) -> None:
    """Print the execution plan of PROGRAM's first job as JSON (as PyFlink's get_execution_plan), without
    submitting it."""
    from engine.client.context import set_context
    from engine.client.plan_capture import ExecutionPlanContext
    from engine.compat.pyflink_alias import install

    install()
    context = ExecutionPlanContext(parallelism, sys.stdout)
    set_context(context)
    failure = _run_program(program, ctx.args, verbose, lambda: context.printed)
    if failure:
        raise _fail(failure, EXIT_PROGRAM)
    if not context.printed:
        raise _fail("the program never called execute() or execute_and_collect(): there is no plan", EXIT_PROGRAM)


def _job_state(http: httpx.Client, job_id: str) -> str:
    try:
        r = http.get(f"/jobs/{job_id}")
    except httpx.TransportError:
        return "UNKNOWN"
    return r.json().get("state", "UNKNOWN") if r.status_code == 200 else "UNKNOWN"


def _client(jobmanager_url: Optional[str]) -> httpx.Client:
    from engine.client.failover import BadAddress, failover_client

    settings = Settings()
    headers = {"Authorization": f"Bearer {settings.auth_token}"} if settings.auth_token else {}
    try:
        return failover_client(jobmanager_url or settings.jobmanager, headers=headers, timeout=30)
    except BadAddress as e:
        raise _fail(str(e), EXIT_USAGE)


def _call(http: httpx.Client, method: str, path: str, **kwargs: Any) -> httpx.Response:
    """One REST call; a JobManager that cannot be reached is one line and exit 3."""
    try:
        return http.request(method, path, **kwargs)
    except httpx.TransportError as e:
        raise _fail(
            f"cannot reach the JobManager at {http.base_url}: {e or type(e).__name__}. Is the cluster running?",
            EXIT_UNREACHABLE,
        )


SCHEDULED_STATES = frozenset({"CREATED", "INITIALIZING"})
ENDED_STATES = frozenset({"FINISHED", "FAILED", "CANCELED", "SUSPENDED"})


@app.command("list")
def list_jobs(
    running: bool = typer.Option(False, "--running", "-r", help="Only running (and restarting) jobs"),
    scheduled: bool = typer.Option(False, "--scheduled", "-s", help="Only jobs waiting to be scheduled"),
    all_jobs: bool = typer.Option(False, "--all", "-a", help="Every job, ended ones too"),
    jobmanager_url: Optional[str] = JM_OPTION,
) -> None:
    """List running and scheduled jobs, as Flink's `flink list` (newest first); -a adds the ended ones."""
    with _client(jobmanager_url) as http:
        r = _call(http, "GET", "/jobs/overview")
    if r.status_code != 200:
        raise _fail(f"cannot list the jobs ({r.status_code}): {_errors_of(r)}", EXIT_JOB_FAILED)
    jobs = sorted(r.json()["jobs"], key=lambda j: j.get("start-time", 0), reverse=True)
    if not (running or scheduled):
        running = scheduled = True
    if all_jobs:
        running = scheduled = True
    sections = []
    if running:
        sections.append(("Running/Restarting Jobs", "No running jobs.",
                         [j for j in jobs if j["state"] not in SCHEDULED_STATES | ENDED_STATES]))
    if scheduled:
        sections.append(("Scheduled Jobs", "No scheduled jobs.", [j for j in jobs if j["state"] in SCHEDULED_STATES]))
    if all_jobs:
        sections.append(("Terminated Jobs", "No terminated jobs.", [j for j in jobs if j["state"] in ENDED_STATES]))
    for title, none, chosen in sections:
        if not chosen:
            typer.echo(none)
            continue
        typer.echo(f" {title} ".center(62, "-"))
        for j in chosen:
            typer.echo(f"{_flink_time(j.get('start-time'))} : {j['jid']} : {j['name']} ({j['state']})")
        typer.echo("-" * 62)


def _flink_time(ms: Any) -> str:
    """A start time as Flink's list prints it (dd.MM.yyyy HH:mm:ss, local time)."""
    if not isinstance(ms, (int, float)) or ms <= 0:
        return "-" * 19
    return time.strftime("%d.%m.%Y %H:%M:%S", time.localtime(ms / 1000))


@app.command()
def cancel(job_id: str, jobmanager_url: Optional[str] = JM_OPTION) -> None:
    """Cancel a running job; a job that has already ended is refused (exit 1)."""
    with _client(jobmanager_url) as http:
        r = _call(http, "GET", f"/jobs/{job_id}")
        if r.status_code == 404:
            raise _fail(f"there is no job {job_id} on this cluster", EXIT_JOB_FAILED)
        if r.status_code >= 400:
            raise _fail(_errors_of(r), EXIT_JOB_FAILED)
        state = r.json().get("state")
        if state in ENDED_STATES:
            raise _fail(f"Job {job_id} has already ended ({state}); there is nothing to cancel.", EXIT_JOB_FAILED)
        r = _call(http, "PATCH", f"/jobs/{job_id}", params={"mode": "cancel"})
    if r.status_code >= 400:
        raise _fail(_errors_of(r), EXIT_JOB_FAILED)
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
    r = _call(http, "POST", path, json=body)
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
    job_id: Optional[str] = typer.Argument(None, help="The job's id"),
    target_directory: Optional[str] = typer.Argument(
        None, help="Where to write it [default: the job's state.savepoints.dir, else MILLSTREAM_SAVEPOINT_DIR]"
    ),
    dispose: Optional[str] = typer.Option(
        None, "--dispose", "-d", help="Dispose (delete) the savepoint at this path instead of taking one"
    ),
    trigger_id: Optional[str] = TRIGGER_ID_OPTION,
    timeout: float = TIMEOUT_OPTION,
    jobmanager_url: Optional[str] = JM_OPTION,
) -> None:
    """Take a savepoint of a running job, wait for it, and print its path; or, with -d PATH, dispose of
    a savepoint."""
    if dispose is not None:
        if job_id is not None:
            raise _fail("give either a job id (to take a savepoint) or -d PATH (to dispose of one), not both", EXIT_USAGE)
        _dispose_savepoint(dispose, timeout, jobmanager_url)
        return
    if job_id is None:
        raise _fail("missing the job's id (or -d PATH to dispose of a savepoint)", EXIT_USAGE)
    body = {"target-directory": os.path.abspath(target_directory) if target_directory else None, "triggerId": trigger_id}
    with _client(jobmanager_url) as http:
        request_id = _post_operation(http, f"/jobs/{job_id}/savepoints", body)
        typer.echo(f"Triggering savepoint for job {job_id} (request {request_id}); waiting for it to complete...")
        path = _await_savepoint(http, job_id, request_id, timeout)
    typer.echo(f"Savepoint completed. Path: {path}")
    typer.echo(f"Resume the program from it with: millstream run --from-savepoint {path} <program.py>")


def _dispose_savepoint(path: str, timeout: float, jobmanager_url: Optional[str]) -> None:
    """Flink's ``POST /savepoint-disposal`` and a poll of its status; the JobManager deletes the files."""
    path = os.path.abspath(path)
    with _client(jobmanager_url) as http:
        request_id = _post_operation(http, "/savepoint-disposal", {"savepoint-path": path})
        typer.echo(f"Disposing savepoint '{path}'.")
        deadline = time.monotonic() + timeout
        while True:
            r = _call(http, "GET", f"/savepoint-disposal/{request_id}")
            if r.status_code >= 400:
                raise _fail(f"cannot read the disposal's status: {_errors_of(r)}", EXIT_JOB_FAILED)
            body = r.json()
            if body["status"]["id"] == "COMPLETED":
                failure = (body.get("operation") or {}).get("failure-cause")
                if failure:
                    raise _fail(f"Disposing savepoint '{path}' failed: {failure.get('stack-trace')}", EXIT_JOB_FAILED)
                break
            if time.monotonic() > deadline:
                raise _fail(f"the disposal of '{path}' did not complete within {timeout:.0f} s", EXIT_JOB_FAILED)
            time.sleep(0.3)
    typer.echo(f"Savepoint '{path}' disposed.")


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
        "targetDirectory": os.path.abspath(savepoint_dir) if savepoint_dir else None,
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
