"""The job client commands of ``millstream``, in the manner of Flink's ``bin/flink``: ``run``,
``info``, ``list``, ``cancel``, ``savepoint`` (and ``-d`` to dispose of one) and ``stop``. They talk to a
JobManager over REST; backend/cli.py adds them to the ``millstream`` command.
"""
from __future__ import annotations

import runpy
import sys
import time
from pathlib import Path
from typing import Any, Callable, Optional

import httpx
import typer

from millstream.backend.settings import Settings

client_app = typer.Typer(rich_markup_mode=None)  # rich markup would swallow the "[env ...]" notes

JM_OPTION = typer.Option(
    None, "--jobmanager", "-m",
    help="JobManager REST address, host:port (as Flink's -m) or a URL; several, comma-separated, are tried in turn [env MILLSTREAM_JOBMANAGER]",
)


# Exit codes of the client commands (documented in `millstream run --help` and the README).
EXIT_JOB_FAILED = 1  # the job failed, was cancelled by someone else, or the JobManager refused it
EXIT_USAGE = 2  # a bad command line, address or setting
EXIT_UNREACHABLE = 3  # no JobManager answered at the address, or what answered is not one
EXIT_PROGRAM = 4  # the program raised or exited non-zero
EXIT_NO_SLOTS = 5  # the job got no slots within the slot request timeout and was cancelled

EXIT_CODES_HELP = (
    "Exit codes: 0 every job finished (or, with --detached, was submitted); 1 a job failed or was cancelled, "
    "or the JobManager refused it; 2 a bad command line; 3 no JobManager answered at the address; "
    "4 the program failed; 5 a job got no slots within the slot request timeout."
)

# Everything after the program path is the program's own: "run prog.py -p 3" gives "-p 3" to the
# program, as Flink's CLI does, and "run -p 2 prog.py x" sets the parallelism.
PROGRAM_CONTEXT = {"allow_extra_args": True, "ignore_unknown_options": True, "allow_interspersed_args": False}



def _storage_path(path: str) -> str:
    """A savepoint directory as the JobManager must get it: a local path made absolute, a URL as given."""
    from millstream.engine.checkpoint.filesystem import storage_fs

    return storage_fs(path).absolute(path)

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


def _run_program(
    program: Path, args: list[str], verbose: bool, submitted: Callable[[], bool], python_path: list[str] | None = None
) -> str | None:
    """Run the user program as ``__main__`` with ``args``; None if it ran through, else one line saying
    how it failed (with ``verbose``, its traceback is printed first). ``python_path``: entries (from
    ``-pyfs``) put on the import path after the program's directory."""
    from millstream.engine.client.plan_capture import ProgramAbort

    for entry in reversed(python_path or []):
        sys.path.insert(0, entry)
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
        from millstream.engine.client.remote import SubmissionFailed
        from millstream.engine.common.job_execution_result import JobExecutionException

        if isinstance(e, (JobExecutionException, SubmissionFailed, httpx.TransportError)):
            raise  # about the job or the cluster, not the program: the caller says what
        if verbose:
            import traceback

            traceback.print_exc()
        return _program_error(e, program, submitted())
    return None


@client_app.command(context_settings=PROGRAM_CONTEXT, epilog=EXIT_CODES_HELP)
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
    py_files: Optional[str] = typer.Option(
        None, "--pyFiles", "-pyfs",
        help="Comma-separated .py files, directories, .zip/.whl/.egg files shipped with every job and put on "
        "the import path of its tasks (as env.add_python_file)",
    ),
    py_archives: Optional[str] = typer.Option(
        None, "--pyArchives", "-pyarch",
        help="Comma-separated zip archives, each archive.zip or archive.zip#target_dir, extracted per job into "
        "the working directory of its tasks (as env.add_python_archive)",
    ),
    py_requirements: Optional[str] = typer.Option(
        None, "--pyRequirements", "-pyreq",
        help="requirements.txt or requirements.txt#cached_dir: installed per job on every TaskManager, from "
        "cached_dir alone (offline) when given (as env.set_python_requirements)",
    ),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show the program's traceback when it fails"),
    jobmanager_url: Optional[str] = JM_OPTION,
) -> None:
    """Run PROGRAM against the cluster (or locally); the arguments after PROGRAM go to the program.

    It prints "Job has been submitted with JobID <id>" and the job's dashboard URL on stderr as soon as
    the JobManager has the job; attached, it says while the job waits for slots, shows the job's print()
    output on stdout, and ends with a line "Job <id> <STATE>" on stdout.
    """
    from millstream.engine.client.context import LocalContext, set_context
    from millstream.engine.client.failover import BadAddress
    from millstream.engine.client.remote import JobManagerUnreachable, NoResourceAvailable, RemoteContext, SubmissionFailed
    from millstream.engine.common.job_execution_result import JobExecutionException
    from millstream.engine.compat.pyflink_alias import install

    from millstream.engine.compat.apache_flink import coexistence_note
    from millstream.engine.client.python_options import BadDependencyOption, parse as parse_dependencies

    settings = Settings()
    try:
        dependencies = parse_dependencies(py_files, py_archives, py_requirements)
    except BadDependencyOption as e:
        raise _fail(str(e), EXIT_USAGE)
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
                settings.client_retry_timeout_s, dependencies,
            )
        except BadAddress as e:
            raise _fail(str(e), EXIT_USAGE)
        # Before the program runs: a wrong address is one line now, not a traceback after the graph is built.
        try:
            remote.check_jobmanager()
        except JobManagerUnreachable as e:
            raise _fail(str(e), EXIT_UNREACHABLE)
    note = coexistence_note()  # before install(), which would make every pyflink import ours
    if note:
        typer.echo(note, err=True)
    install()
    set_context(remote if remote is not None else LocalContext(parallelism, dependencies))
    code = 0
    try:
        failure = _run_program(
            program, ctx.args, verbose, lambda: bool(remote and remote.submitted), dependencies.client_path()
        )
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
        from millstream.engine.client import job_output

        job_output.finish_all()  # print() output not yet shown (execute_and_collect, execute_async)
        for job_id in remote.submitted:
            state = "SUBMITTED" if detached else _job_state(remote.http, job_id)
            typer.echo(f"Job {job_id} {state}")
            if code == 0 and (state == "FAILED" or (state == "CANCELED" and job_id not in remote.cancelled)):
                code = EXIT_JOB_FAILED
        if not remote.submitted and code == 0:
            # Said, not failed: a program may only print its plan (get_execution_plan), as under Flink's
            # `flink run`, which submits nothing then either.
            typer.echo("the program did not submit a job: it never called execute() or execute_and_collect()", err=True)
    raise typer.Exit(code)


@client_app.command(context_settings=PROGRAM_CONTEXT)
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
    from millstream.engine.client.context import set_context
    from millstream.engine.client.plan_capture import ExecutionPlanContext
    from millstream.engine.compat.pyflink_alias import install

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
    from millstream.engine.client.failover import BadAddress, failover_client

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


@client_app.command("list")
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


@client_app.command()
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


@client_app.command()
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
    body = {"target-directory": _storage_path(target_directory) if target_directory else None, "triggerId": trigger_id}
    with _client(jobmanager_url) as http:
        request_id = _post_operation(http, f"/jobs/{job_id}/savepoints", body)
        typer.echo(f"Triggering savepoint for job {job_id} (request {request_id}); waiting for it to complete...")
        path = _await_savepoint(http, job_id, request_id, timeout)
    typer.echo(f"Savepoint completed. Path: {path}")
    typer.echo(f"Resume the program from it with: millstream run --from-savepoint {path} <program.py>")


def _dispose_savepoint(path: str, timeout: float, jobmanager_url: Optional[str]) -> None:
    """Flink's ``POST /savepoint-disposal`` and a poll of its status; the JobManager deletes the files."""
    path = _storage_path(path)
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


@client_app.command()
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


