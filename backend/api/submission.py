"""Job submission by JobGraph (``POST /jobs``) and result streaming for ``execute_and_collect``."""
from __future__ import annotations

import json

import msgpack
from fastapi import APIRouter, File, Form, HTTPException, Query, Response, UploadFile
from pydantic import BaseModel

from millstream.backend.deps import DispatcherDep, SettingsDep
from millstream.engine.graph.validation import InvalidJobGraph, parse_job_graph
from millstream.engine.runtime.collect import Ack
from millstream.engine.runtime.io.redis_collect import ResultOffsetError

MAX_OFFSET = 2**53  # exact in the Lua that trims the results; no job writes more entries

router = APIRouter(tags=["jobs"])


class JobSubmitResponse(BaseModel):
    jobid: str
    jobUrl: str


@router.post("/jobs", status_code=202, response_model=JobSubmitResponse, summary="Submit a JobGraph")
async def submit_job(
    dispatcher: DispatcherDep,
    settings: SettingsDep,
    jobgraph: str = Form(..., description="The JobGraph as JSON (JobGraph.to_dict())"),
    usercode: UploadFile = File(..., description="The cloudpickled StreamGraph carrying the user functions"),
) -> JobSubmitResponse:
    """The graph is validated in full (engine/graph/validation.py) before the Dispatcher creates a job
    record or asks for a slot: a bad graph answers 400 naming every problem and leaves nothing behind."""
    try:
        data = json.loads(jobgraph)
    except RecursionError:
        raise HTTPException(400, "malformed JobGraph: the JSON is nested too deeply")
    except ValueError as e:
        raise HTTPException(400, f"malformed JobGraph: {e}")
    try:
        graph = parse_job_graph(data, settings.max_parallelism)
    except InvalidJobGraph as e:
        raise HTTPException(400, str(e))
    code = await usercode.read(settings.max_upload_bytes + 1)
    if len(code) > settings.max_upload_bytes:
        raise HTTPException(413, f"user code exceeds the limit of {settings.max_upload_bytes} bytes")
    job_id = dispatcher.submit(graph, code)
    return JobSubmitResponse(jobid=job_id, jobUrl=f"/jobs/{job_id}")


@router.get(
    "/jobs/{jid}/results",
    summary="Entries collected by execute_and_collect from an offset, acknowledging those before it (msgpack)",
    response_class=Response,
    responses={200: {"content": {"application/x-msgpack": {}}}},
)
def job_results(
    dispatcher: DispatcherDep,
    jid: str,
    offset: int = Query(0, ge=0, le=MAX_OFFSET, description="Entries the client has read: those before it are dropped"),
    attempt: int | None = Query(None, ge=0, le=MAX_OFFSET, description="With acked: the attempt whose records the client holds"),
    acked: int | None = Query(
        None, ge=0, le=MAX_OFFSET, description="The client holds every record before this position: the sink may forget them"
    ),
) -> Response:
    if (attempt is None) != (acked is None):
        raise HTTPException(400, "attempt and acked go together")
    ack = Ack(attempt, acked) if attempt is not None and acked is not None else None
    try:
        entries, ended, next_offset = dispatcher.collect(jid, offset, ack)
    except ResultOffsetError as e:
        raise HTTPException(400, str(e))
    record = dispatcher.job_record(jid)
    body = msgpack.packb(
        # next-offset: a replayed entry left out still counts, so the client must not count what it got
        {"batches": entries, "ended": ended, "next-offset": next_offset, "state": record.state if record else "UNKNOWN"},
        use_bin_type=True,
    )
    return Response(body, media_type="application/x-msgpack")
