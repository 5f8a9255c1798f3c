"""The one table from MQ_ERROR codes to HTTP statuses, and problem+json responses."""

from __future__ import annotations

import logging
from http import HTTPStatus

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from qm.errors import MqError, MqErrorCode
from storage.errors import DATABASE_ERRORS, is_unavailable

PROBLEM_JSON = "application/problem+json"
log = logging.getLogger(__name__)

HTTP_STATUS: dict[MqErrorCode, HTTPStatus] = {
    MqErrorCode.MQ_ERROR_QUEUE_NOT_FOUND: HTTPStatus.NOT_FOUND,
    MqErrorCode.MQ_ERROR_MESSAGE_NOT_FOUND: HTTPStatus.NOT_FOUND,
    MqErrorCode.MQ_ERROR_INVALID_HANDLE: HTTPStatus.NOT_FOUND,
    MqErrorCode.MQ_ERROR_QUEUE_EXISTS: HTTPStatus.CONFLICT,
    MqErrorCode.MQ_ERROR_TRANSACTION_SEQUENCE: HTTPStatus.CONFLICT,
    MqErrorCode.MQ_ERROR_TRANSACTION_USAGE: HTTPStatus.CONFLICT,
    MqErrorCode.MQ_ERROR_ILLEGAL_CURSOR_ACTION: HTTPStatus.CONFLICT,
    MqErrorCode.MQ_ERROR_MESSAGE_LOCKED_UNDER_TRANSACTION: HTTPStatus.CONFLICT,
    MqErrorCode.MQ_ERROR_ILLEGAL_OPERATION: HTTPStatus.CONFLICT,
    MqErrorCode.MQ_ERROR_MESSAGE_ALREADY_RECEIVED: HTTPStatus.GONE,
    MqErrorCode.MQ_ERROR_ACCESS_DENIED: HTTPStatus.FORBIDDEN,
    MqErrorCode.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION: HTTPStatus.FORBIDDEN,
    MqErrorCode.MQ_ERROR_INSUFFICIENT_RESOURCES: HTTPStatus.INSUFFICIENT_STORAGE,
    MqErrorCode.MQ_ERROR_SERVICE_NOT_AVAILABLE: HTTPStatus.SERVICE_UNAVAILABLE,
    MqErrorCode.MQ_ERROR_MESSAGE_STORAGE_FAILED: HTTPStatus.SERVICE_UNAVAILABLE,
    MqErrorCode.MQ_ERROR: HTTPStatus.INTERNAL_SERVER_ERROR,
}
"""Codes not listed are caller errors: 400 Bad Request."""


def status_of(code: MqErrorCode) -> HTTPStatus:
    """The HTTP status of an MQ_ERROR code (the OpenAPI document declares the same)."""
    return HTTP_STATUS.get(code, HTTPStatus.BAD_REQUEST)


def problem(error: MqError, status: HTTPStatus | None = None) -> JSONResponse:
    status = status or status_of(error.code)
    return JSONResponse(
        {
            "type": f"urn:msmq-gateway:error:{error.code.name}",
            "title": error.code.name,
            "status": int(status),
            "detail": error.detail,
            "mq_error": error.code.name,
            "mq_error_code": error.code.hex,
        },
        status_code=int(status),
        media_type=PROBLEM_JSON,
    )


class HttpMqError(MqError):
    """An MqError whose HTTP status is not the table's (a body refused as too large: 413)."""

    def __init__(self, code: MqErrorCode, detail: str, status: HTTPStatus) -> None:
        super().__init__(code, detail)
        self.status = status


async def _on_mq_error(_request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, MqError)
    return problem(error, error.status if isinstance(error, HttpMqError) else None)


async def _on_validation_error(_request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, RequestValidationError)
    details = "; ".join(_describe(item) for item in error.errors())
    return problem(MqError(MqErrorCode.MQ_ERROR_INVALID_PARAMETER, details))


def _describe(item: dict[str, object]) -> str:
    if item.get("type") == "json_invalid":
        return "the request body is not valid JSON"
    parts = [str(part) for part in item.get("loc", ()) if part != "body"]  # type: ignore[attr-defined]
    location = ".".join(parts) or "request body"
    return f"{location}: {item.get('msg')}"


async def _on_http_error(_request: Request, error: Exception) -> JSONResponse:
    """Routing errors (no such endpoint 404, wrong method 405) as problem+json too."""
    assert isinstance(error, HTTPException)
    status = HTTPStatus(error.status_code)
    if status in (HTTPStatus.NOT_FOUND, HTTPStatus.METHOD_NOT_ALLOWED):
        code = MqErrorCode.MQ_ERROR_UNSUPPORTED_OPERATION
    else:
        code = MqErrorCode.MQ_ERROR if status >= 500 else MqErrorCode.MQ_ERROR_INVALID_PARAMETER
    response = problem(MqError(code, str(error.detail)), status)
    response.headers.update(error.headers or {})
    return response


async def _on_database_error(_request: Request, error: Exception) -> JSONResponse:
    log.exception("database failure", exc_info=error)
    if is_unavailable(error):
        return problem(
            MqError(MqErrorCode.MQ_ERROR_SERVICE_NOT_AVAILABLE, "the message store is unavailable")
        )
    return problem(MqError(MqErrorCode.MQ_ERROR, "the message store failed; see the gateway log"))


def install(app: FastAPI) -> None:
    app.add_exception_handler(MqError, _on_mq_error)
    app.add_exception_handler(RequestValidationError, _on_validation_error)
    app.add_exception_handler(HTTPException, _on_http_error)
    for error_type in DATABASE_ERRORS:
        app.add_exception_handler(error_type, _on_database_error)
