"""/api/redrives/{batch_id}: dead letters the pipeline staged, re-sent through the queue
manager's send path (docs/pipeline.md). The gateway's background pass applies staged batches
by itself; POST .../apply does it now and answers the outcome."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Path
from pydantic import BaseModel, Field

from app import answers as a
from app.gateway import GatewayDep
from qm.redrives import RedriveBatch

router = APIRouter(tags=["redrives"])

BatchId = Annotated[
    str,
    Path(
        pattern="^[0-9A-Za-z_-]{1,64}$",
        description="The batch ID `msmq-gateway pipeline redrive --execute` printed",
    ),
]
EXAMPLE = {
    "batch_id": "7f89db67e06f457396fe75abab5d3971",
    "status": "applied",
    "staged_count": 2,
    "resent_count": 2,
    "skipped_count": 0,
    "error": None,
    "staged_at": "2026-11-27T13:40:02.125000Z",
    "finished_at": "2026-11-27T13:40:02.431000Z",
}
NO_BATCH = a.Problem(a.E.MQ_ERROR_INVALID_HANDLE, "no redrive batch '7f89db67e06f457396fe75abab5d3971'")


class RedriveBatchOut(BaseModel):
    batch_id: str = Field(description="As `pipeline redrive --execute` printed it")
    status: str = Field(
        description="`staging` (the pipeline is still writing it), `staged` (waiting for the gateway), "
        "`applied`, or `failed` (`error` says what to do; the dead letters not re-sent stay where they were)"
    )
    staged_count: int = Field(description="Dead letters the pipeline staged")
    resent_count: int = Field(description="Re-sent as new messages of their target queues")
    skipped_count: int = Field(description="Redriven already (by an earlier batch): not sent again")
    error: str | None = Field(description="Why the batch failed or waits (throttled); null otherwise")
    staged_at: datetime = Field(description="UTC; when the pipeline began staging it")
    finished_at: datetime | None = Field(description="UTC; when it was applied or failed")

    @classmethod
    def of(cls, batch: RedriveBatch) -> RedriveBatchOut:
        return cls(
            batch_id=batch.batch_id,
            status=batch.status,
            staged_count=batch.staged_count,
            resent_count=batch.resent_count,
            skipped_count=batch.skipped_count,
            error=batch.error,
            staged_at=batch.staged_at,
            finished_at=batch.finished_at,
        )


@router.get(
    "/api/redrives/{batch_id}",
    summary="A staged redrive batch and what became of it",
    responses=a.answers(a.ok(EXAMPLE), a.INVALID_PARAMETER, NO_BATCH),
)
async def show_redrive(batch_id: BatchId, gateway: GatewayDep) -> RedriveBatchOut:
    return RedriveBatchOut.of(await gateway.manager.redrives.batch(batch_id))


@router.post(
    "/api/redrives/{batch_id}/apply",
    summary="Re-send a staged batch now (the background pass would within MSMQGW_REDRIVE_INTERVAL_S)",
    responses=a.answers(a.ok(EXAMPLE), a.INVALID_PARAMETER, NO_BATCH, a.QUOTA),
)
async def apply_redrive(batch_id: BatchId, gateway: GatewayDep) -> RedriveBatchOut:
    return RedriveBatchOut.of(await gateway.manager.redrives.apply(batch_id))
