"""The SOAP API answers in its own words, not REST's (issue 17 item 7)."""

from __future__ import annotations

import httpx
import pytest

from soap.namespaces import SOAP_ENV
from soap.service import TARGET_NAMESPACE
from tests.integration.support import MAX_WAIT_MS

pytestmark = pytest.mark.anyio


async def _call(client: httpx.AsyncClient, body: str, prolog: str = "") -> str:
    envelope = (
        f'{prolog}<s:Envelope xmlns:s="{SOAP_ENV}" xmlns:gw="{TARGET_NAMESPACE}"><s:Body>{body}'
        "</s:Body></s:Envelope>"
    )
    response = await client.post(
        "/soap", content=envelope.encode(), headers={"content-type": "text/xml; charset=utf-8"}
    )
    assert response.status_code == 500, response.text  # a SOAP 1.1 fault
    return response.text


@pytest.mark.parametrize("operation", ["Receive", "Peek"])
async def test_a_wait_above_the_limit_is_told_in_soap_words(
    client: httpx.AsyncClient, operation: str
) -> None:
    assert (await client.post("/api/queues", json={"path": "private$/orders"})).status_code == 201
    fault = await _call(
        client,
        f"<gw:{operation}><gw:queue>private$/orders</gw:queue>"
        f"<gw:timeout>{MAX_WAIT_MS + 1}</gw:timeout></gw:{operation}>",
    )
    assert "MQ_ERROR_INVALID_PARAMETER" in fault
    assert f"&lt;timeout&gt; is {MAX_WAIT_MS + 1}" in fault
    assert "timeout_ms" not in fault and "204" not in fault


async def test_a_dtd_in_a_soap_api_request_is_refused_as_one(client: httpx.AsyncClient) -> None:
    fault = await _call(client, "<gw:ListQueues/>", prolog='<!DOCTYPE x [<!ENTITY a "b">]>')
    assert "MQ_ERROR_BAD_XML_FORMAT" in fault
    assert "SOAP API requests" in fault and "SRMP" not in fault
