"""Savepoint actions of the dashboard: trigger a savepoint, stop with a savepoint, and resume a
new job from a completed savepoint. CSRF-checked and login-checked like Cancel; each answers
with an inline result and a ``job-action`` ``HX-Trigger`` event carrying the request id."""
from __future__ import annotations

from fastapi import APIRouter, Form, Request
from fastapi.responses import Response

from millstream.backend.deps import DispatcherDep, SettingsDep
from millstream.backend.services.resume import ResumeRefused, resume_from_savepoint
from millstream.backend.ui.routes.actions import refuse_job_action, result
from millstream.engine.checkpoint.rescale import NonRestoredStateError
from millstream.engine.jobmanager.dispatcher import JobSubmissionError, UnknownJob
from millstream.engine.jobmanager.savepoints import OperationRejected

router = APIRouter(prefix="/ui/jobs", include_in_schema=False)


def _tab_link(jid: str) -> tuple[str, str]:
    return f"/ui/jobs/{jid}/savepoints", "Open the Savepoints tab"


def _start(
    request: Request, dispatcher: DispatcherDep, token: str | None, jid: str, target_directory: str, stop: bool,
    drain: bool,
) -> Response:
    action = "stop" if stop else "savepoint"
    if (refused := refuse_job_action(request, token, jid, action)) is not None:
        return refused
    jid = jid.lower()
    directory = target_directory.strip() or None
    try:
        if stop:
            request_id = dispatcher.stop_with_savepoint(jid, directory, drain=drain)
        else:
            request_id = dispatcher.trigger_savepoint(jid, directory)
    except UnknownJob:
        return result(request, False, f"There is no job {jid}.", action, 404)
    except OperationRejected as e:
        return result(request, False, f"Refused: {e}.", action, e.status)
    what = "Stop with savepoint" if stop else "Savepoint"
    then = " The job ends FINISHED once it completes." if stop else ""
    return result(
        request, True, f"{what} requested (request {request_id}).{then}", action,
        extra={"requestId": request_id}, link=_tab_link(jid),
    )


@router.post("/{jid}/savepoint")
def trigger_savepoint(
    request: Request, dispatcher: DispatcherDep, settings: SettingsDep, jid: str, target_directory: str = Form("")
) -> Response:
    return _start(request, dispatcher, settings.auth_token, jid, target_directory, stop=False, drain=False)


@router.post("/{jid}/stop")
def stop_with_savepoint(
    request: Request, dispatcher: DispatcherDep, settings: SettingsDep, jid: str,
    target_directory: str = Form(""), drain: bool = Form(False),
) -> Response:
    return _start(request, dispatcher, settings.auth_token, jid, target_directory, stop=True, drain=drain)


@router.post("/{jid}/savepoints/{request_id}/resume")
def resume(
    request: Request, dispatcher: DispatcherDep, settings: SettingsDep, jid: str, request_id: str,
    parallelism: str = Form(""), allow_non_restored_state: bool = Form(False),
) -> Response:
    """Start a new job of the same program from this savepoint, then open its page."""
    if (refused := refuse_job_action(request, settings.auth_token, jid, "resume")) is not None:
        return refused
    try:
        wanted = int(parallelism) if parallelism.strip() else None
    except ValueError:
        return result(request, False, f"Parallelism must be a whole number, not “{parallelism[:40]}”.", "resume", 400)
    try:
        resumed = resume_from_savepoint(dispatcher, jid.lower(), request_id, wanted, allow_non_restored_state)
    except UnknownJob:
        return result(request, False, f"There is no job {jid}.", "resume", 404)
    except ResumeRefused as e:
        return result(request, False, f"Nothing was started: {e}", "resume", 400)
    except JobSubmissionError as e:  # a missing or corrupt savepoint, unmatched state, the cluster's limits
        unmatched = isinstance(e.__cause__, NonRestoredStateError)
        hint = " Tick “Allow non-restored state” to start without it." if unmatched else ""
        return result(request, False, f"Nothing was started: {str(e).rstrip('.')}.{hint}", "resume", 400)
    kept = (
        f" Left at their own parallelism: {', '.join(resumed.kept)} (set apart in the program, or a source"
        " that is non-parallel)." if resumed.kept else ""
    )
    resp = result(
        request, True, f"Started job {resumed.job_id} from {resumed.savepoint_path}.{kept}", "resume",
        extra={"jobId": resumed.job_id, "requestId": request_id},
    )
    resp.headers["HX-Redirect"] = f"/ui/jobs/{resumed.job_id}/graph"  # open the new job's page
    return resp
