"""POST /soap and GET /soap?wsdl: the SOAP API for clients that are not MSMQ (SOAP 1.1,
document/literal, described by WSDL).

Thin like the REST routes: soap.service decodes, one queue-manager call per operation, soap.service
encodes. Every failure is a SOAP fault, answered with HTTP 500 as WS-I Basic Profile R1126 asks,
its faultcode saying who is to blame (Client or Server, by the one table in app/errors.py) and
its detail carrying the MQ_ERROR name and code.
"""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import Any

from fastapi import APIRouter, Request, Response

from app.access_rules import SOAP_RULES
from app.admin_queues import authorize_admin_queues
from app.auth import audit, authorize, caller, give_ownership, queue_deleted
from app.docs import SOAP_FAULT_EXAMPLE, SOAP_REQUEST_BODY, SOAP_RESPONSE_EXAMPLE, WSDL_EXAMPLE
from app.errors import HTTP_STATUS, HttpMqError
from app.gateway import Gateway, GatewayDep, canonical_queue, check_wait
from app.http import read_capped
from app.message_schemas import decoded_fields
from app.parameters import stored_lookup_id
from app.routes.messages import _receive_while_connected
from qm.errors import MqError, MqErrorCode
from qm.store import Seek
from soap.service import (
    Call,
    FaultCode,
    ServiceFault,
    calls,
    fault_envelope,
    message_values,
    parse_call,
    queue_values,
    request_limits,
    request_size_limit,
    response_envelope,
    sent_values,
    transaction_values,
    wsdl_document,
)
from storage.errors import DATABASE_ERRORS, is_unavailable

router = APIRouter(tags=["soap"])
log = logging.getLogger(__name__)
TEXT_XML = "text/xml; charset=utf-8"
WSDL_PARAMETER = {
    "name": "wsdl",
    "in": "query",
    "required": False,
    "description": "Written without a value, as SOAP tools do: `/soap?wsdl` (any GET of /soap serves it)",
    "schema": {"type": "string"},
    "allowEmptyValue": True,
}
Values = dict[str, Any]


@router.get(
    "/soap",
    summary="The WSDL of the SOAP API",
    description="WSDL 1.1 (SOAP 1.1, document/literal wrapped). Its `soap:address` is this URL as the "
    "client reached it, so `zeep.Client('http://gw01:8080/soap?wsdl')` calls the same gateway.",
    response_class=Response,
    openapi_extra={"parameters": [WSDL_PARAMETER]},
    responses={
        200: {
            "description": "The WSDL",
            "content": {"text/xml": {"schema": {"type": "string"}, "example": WSDL_EXAMPLE}},
        }
    },
)
async def get_wsdl(request: Request) -> Response:
    return Response(wsdl_document(str(request.url_for("soap_call"))), media_type=TEXT_XML)


@router.post(
    "/soap",
    name="soap_call",
    summary="Call an operation of the SOAP API",
    description="A SOAP 1.1 envelope whose Body holds one operation element of namespace "
    "`urn:msmq-gateway:soap:v1`: Send, Receive, Peek, ReceiveByLookupId, PeekByLookupId, CreateQueue, "
    "GetQueue, ListQueues, DeleteQueue, PurgeQueue, BeginTransaction, CommitTransaction, "
    "AbortTransaction. See the WSDL at `GET /soap?wsdl`.",
    response_class=Response,
    openapi_extra=SOAP_REQUEST_BODY,
    responses={
        200: {"description": "The operation's response", "content": {"text/xml": SOAP_RESPONSE_EXAMPLE}},
        500: {
            "description": "A SOAP fault: faultcode Client (the request) or Server (the gateway), "
            "detail MqError with MSMQ's error name and code",
            "content": {"text/xml": SOAP_FAULT_EXAMPLE},
        },
    },
)
async def soap_call(request: Request, gateway: GatewayDep) -> Response:
    try:
        limit = request_size_limit(gateway.settings.max_body_bytes)
        payload = await read_capped(request, limit)
        call = parse_call(
            payload, request.headers.get("content-type"), request_limits(gateway.settings.max_body_bytes)
        )
        values = await _checked(call, request, gateway)
        return Response(response_envelope(call.operation, values), media_type=TEXT_XML)
    except ServiceFault as fault:
        return _fault(fault)
    except MqError as error:
        return _fault(ServiceFault(_blame(error), error))
    except DATABASE_ERRORS as error:
        log.exception("SOAP call failed in the message store")
        code = MqErrorCode.MQ_ERROR_SERVICE_NOT_AVAILABLE if is_unavailable(error) else MqErrorCode.MQ_ERROR
        return _fault(ServiceFault(FaultCode.SERVER, MqError(code, "the message store failed")))
    except Exception:  # a SOAP client must get a fault, not a bare 500 page
        log.exception("SOAP call failed")
        failure = MqError(MqErrorCode.MQ_ERROR, "the gateway failed; see its log")
        return _fault(ServiceFault(FaultCode.SERVER, failure))


def _blame(error: MqError) -> FaultCode:
    """Server for what the REST API answers with a 5xx (store down, quota), else Client."""
    status = error.status if isinstance(error, HttpMqError) else HTTP_STATUS.get(error.code)
    return FaultCode.SERVER if status is not None and status >= 500 else FaultCode.CLIENT


def _fault(fault: ServiceFault) -> Response:
    return Response(fault_envelope(fault), status_code=HTTPStatus.INTERNAL_SERVER_ERROR, media_type=TEXT_XML)


async def _checked(call: Call, request: Request, gateway: Gateway) -> Values:
    """The operation's right (app/access_rules.py) checked before anything is done; changes of
    state that are not message traffic recorded in the audit log, refused or not."""
    right, audited = SOAP_RULES[call.operation]
    queue = _queue_of(call)
    action, target = f"SOAP {call.operation}", f"queue={queue}" if queue else ""
    try:
        await authorize(request, right, queue)
    except MqError:
        if audited and caller(request).authenticated:
            await audit(request, action, target, "denied")
        raise
    if not audited:
        return await _perform(call, request, gateway)
    try:
        values = await _perform(call, request, gateway)
    except MqError as error:
        await audit(request, action, target, f"failed {error.code.name}")
        raise
    if isinstance(call, calls.CreateQueue):
        await give_ownership(request, call.path)
    if isinstance(call, calls.DeleteQueue):
        await queue_deleted(request, call.path)
    await audit(request, action, target, "allowed")
    return values


def _queue_of(call: Call) -> str | None:
    match call:
        case calls.Send() | calls.Receive() | calls.Peek() | calls.ByLookupId():
            return call.queue
        case calls.CreateQueue() | calls.GetQueue() | calls.DeleteQueue() | calls.PurgeQueue():
            return call.path
    return None


async def _perform(call: Call, request: Request, gateway: Gateway) -> Values:
    match call:
        case calls.Send() | calls.Receive() | calls.Peek() | calls.ByLookupId():
            return await _message_call(call, request, gateway)
        case _:
            return await _administration_call(call, gateway)


async def _message_call(
    call: calls.Send | calls.Receive | calls.Peek | calls.ByLookupId, request: Request, gateway: Gateway
) -> Values:
    queue = canonical_queue(gateway, call.queue)  # before a receive: nothing taken, then failed
    match call:
        case calls.Send():
            _check_body_size(call, gateway.settings.max_body_bytes)
            await authorize_admin_queues(request, [call.properties])
            return sent_values(
                await gateway.manager.send(call.queue, call.properties, call.transaction), queue
            )
        case calls.Receive():
            wait = check_wait(gateway, call.timeout_ms, SOAP_WAIT)
            message = await _receive_while_connected(request, gateway, call.queue, wait, call.transaction)
        case calls.Peek():
            message = await gateway.reader.peek(call.queue, check_wait(gateway, call.timeout_ms, SOAP_WAIT))
        case calls.ByLookupId():
            seek = Seek(call.action.value)
            message = await gateway.reader.by_lookup_id(
                call.queue, seek, stored_lookup_id(call.lookup_id), call.receive, call.transaction
            )
    if message is None:
        return {"message": None}
    return {"message": message_values(message, queue, decoded_fields(message) if call.decode else None)}


SOAP_WAIT = ("<timeout>", "call again after an answer without a <message>")
"""The wait in the SOAP API's words (REST's are `timeout_ms` and a 204)."""


def _check_body_size(call: calls.Send, max_body_bytes: int) -> None:
    """A body over the cap is the request's fault (REST's 413), not a full store's."""
    size = len(call.properties.body)
    if size > max_body_bytes:
        raise HttpMqError(
            MqErrorCode.MQ_ERROR_INSUFFICIENT_RESOURCES,
            f"the message body has {size} bytes; at most {max_body_bytes} are accepted",
            HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
        )


async def _administration_call(call: Call, gateway: Gateway) -> Values:
    manager = gateway.manager
    match call:
        case calls.CreateQueue():
            return {"queue": queue_values(await manager.create_queue(call.path, call.settings))}
        case calls.GetQueue():
            return {"queue": queue_values(await manager.get_queue(call.path))}
        case calls.ListQueues():
            return {"queue": [queue_values(queue) for queue in await manager.list_queues()]}
        case calls.DeleteQueue():
            return {"messagesDropped": await manager.delete_queue(call.path)}
        case calls.PurgeQueue():
            return {"purged": await manager.purge_queue(call.path)}
        case calls.BeginTransaction():
            record = await manager.begin_transaction()
            return {"transaction": transaction_values(record.id, record.created_at, record.expires_at)}
        case calls.EndTransaction():
            await (manager.commit if call.commit else manager.abort)(call.transaction)
            return {}
    raise AssertionError(f"unhandled SOAP call {call!r}")
