"""What operators and orchestrators ask of a running gateway: GET /metrics (Prometheus), GET
/livez and GET /readyz (Kubernetes probes). docs/operations.md has the metric list."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from app import answers as a
from app.errors import PROBLEM_JSON
from app.metrics import CONTENT_TYPE, ProcessMetrics, exposition
from qm.errors import MqErrorCode
from storage.errors import DATABASE_ERRORS
from storage.observation import SqlObservation

METRICS_PATH = "/metrics"

metrics_router = APIRouter(tags=["operations"])
"""/metrics alone: the one path a `metrics` right is attached to, and what moves to
MSMQGW_METRICS_PORT when that is set."""
router = APIRouter(tags=["operations"])


@dataclass
class Operations:
    """What the probes and the scrape read, set up by the lifespan."""

    metrics: ProcessMetrics
    observation: SqlObservation
    pool_size: int
    schema_head: str
    tasks: list[asyncio.Task[None]] = field(default_factory=list)


def operations_of(request: Request) -> Operations:
    found: Operations = request.app.state.operations
    return found


METRICS_EXAMPLE = """\
# HELP msmqgw_messages_in_queue Messages in the queue (MSMQ Queue\\\\Messages in Queue)
# TYPE msmqgw_messages_in_queue gauge
msmqgw_messages_in_queue{name="private$\\\\orders"} 1234
# HELP msmqgw_bytes_in_queue Body bytes in the queue (MSMQ Queue\\\\Bytes in Queue)
# TYPE msmqgw_bytes_in_queue gauge
msmqgw_bytes_in_queue{name="private$\\\\orders"} 5039616
"""


@metrics_router.get(
    METRICS_PATH,
    summary="Metrics in the Prometheus text format",
    description="Queue, journal, dead-letter and outgoing-queue gauges read from the store, and "
    "what the gateway's processes did (requests, SRMP outcomes, group commits, trigger "
    "invocations), summed over every worker process. See docs/operations.md.",
    response_class=Response,
    responses={
        200: {
            "description": "The metrics",
            "content": {CONTENT_TYPE: {"schema": {"type": "string"}, "example": METRICS_EXAMPLE}},
        },
        **a.answers({}),
    },
)
async def metrics(request: Request) -> Response:
    operations = operations_of(request)
    body = await exposition(operations.metrics, operations.observation, operations.pool_size)
    return Response(body, media_type=CONTENT_TYPE)


@router.get(
    "/livez",
    summary="Liveness: the process answers",
    description="Touches nothing else (not the store): restart the process only when this fails.",
    responses=a.answers(a.ok({"status": "alive"}), store=False),
)
async def livez() -> dict[str, str]:
    return {"status": "alive"}


READY_EXAMPLE = {"status": "ready", "checks": {"store": "ok", "schema": "ok", "background_tasks": "ok"}}
NOT_READY_EXAMPLE = {
    "type": f"urn:msmq-gateway:error:{MqErrorCode.MQ_ERROR_SERVICE_NOT_AVAILABLE.name}",
    "title": MqErrorCode.MQ_ERROR_SERVICE_NOT_AVAILABLE.name,
    "status": 503,
    "detail": "not ready: schema",
    "mq_error": MqErrorCode.MQ_ERROR_SERVICE_NOT_AVAILABLE.name,
    "mq_error_code": MqErrorCode.MQ_ERROR_SERVICE_NOT_AVAILABLE.hex,
    "checks": {"store": "ok", "schema": "at 0007, this code needs 0008", "background_tasks": "ok"},
}


@router.get(
    "/readyz",
    summary="Readiness: the store is reachable, its schema current, the background tasks running",
    description="503 (problem+json, with each check's result) while any check fails: send no "
    "traffic to this process until it passes.",
    responses={
        200: {"description": "Ready", "content": {"application/json": {"example": READY_EXAMPLE}}},
        503: {
            "description": "Not ready",
            "content": {PROBLEM_JSON: {"schema": a.PROBLEM_REF, "example": NOT_READY_EXAMPLE}},
        },
    },
)
async def readyz(request: Request) -> JSONResponse:
    checks = await readiness(operations_of(request))
    failed = [name for name, result in checks.items() if result != "ok"]
    if not failed:
        return JSONResponse({"status": "ready", "checks": checks})
    code = MqErrorCode.MQ_ERROR_SERVICE_NOT_AVAILABLE
    body: dict[str, Any] = {
        "type": f"urn:msmq-gateway:error:{code.name}",
        "title": code.name,
        "status": HTTPStatus.SERVICE_UNAVAILABLE.value,
        "detail": "not ready: " + ", ".join(failed),
        "mq_error": code.name,
        "mq_error_code": code.hex,
        "checks": checks,
    }
    return JSONResponse(body, status_code=HTTPStatus.SERVICE_UNAVAILABLE, media_type=PROBLEM_JSON)


async def readiness(operations: Operations) -> dict[str, str]:
    checks = {"store": "ok", "schema": "ok", "background_tasks": "ok"}
    try:
        revision = await operations.observation.schema_revision()
    except DATABASE_ERRORS as error:
        checks["store"] = f"unreachable ({type(error).__name__})"
        checks["schema"] = "unknown"
    else:
        if revision != operations.schema_head:
            checks["schema"] = f"at {revision or 'no revision'}, this code needs {operations.schema_head}"
    stopped = [task.get_name() for task in operations.tasks if task.done()]
    if stopped:
        checks["background_tasks"] = "stopped: " + ", ".join(stopped)
    return checks
