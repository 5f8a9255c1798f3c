"""/api/transactions: internal transactions across queues (MQBeginTransaction)."""

from __future__ import annotations

from fastapi import APIRouter, status

from app import answers as a
from app.docs import TRANSACTION_EXAMPLE
from app.gateway import GatewayDep
from app.schemas import TransactionOut

router = APIRouter(prefix="/api/transactions", tags=["transactions"])


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    summary="Begin a transaction",
    responses=a.answers(a.ok(TRANSACTION_EXAMPLE, "Begun", 201)),
)
async def begin(gateway: GatewayDep) -> TransactionOut:
    return TransactionOut.of(await gateway.manager.begin_transaction())


@router.get(
    "/{transaction_id}",
    summary="Show an active transaction",
    responses=a.answers(a.ok(TRANSACTION_EXAMPLE), a.TRANSACTION_SEQUENCE),
)
async def show(transaction_id: str, gateway: GatewayDep) -> TransactionOut:
    return TransactionOut.of(await gateway.manager.transaction(transaction_id))


@router.post(
    "/{transaction_id}/commit",
    status_code=204,
    summary="Commit: sends appear, receives are final",
    responses=a.answers(a.done("Committed"), a.TRANSACTION_SEQUENCE),
)
async def commit(transaction_id: str, gateway: GatewayDep) -> None:
    await gateway.manager.commit(transaction_id)


@router.post(
    "/{transaction_id}/abort",
    status_code=204,
    summary="Abort: sends vanish, receives go back",
    responses=a.answers(a.done("Aborted"), a.TRANSACTION_SEQUENCE),
)
async def abort(transaction_id: str, gateway: GatewayDep) -> None:
    await gateway.manager.abort(transaction_id)
