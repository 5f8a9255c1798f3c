"""One HTTP client for everything the gateway POSTs as an SRMP sender."""

from __future__ import annotations

import asyncio
import functools
import ssl
from dataclasses import dataclass

import httpx

from qm.outbound import Verdict, verdict
from soap import SrmpEnvelope, build_request


@dataclass(frozen=True, slots=True)
class PostResult:
    verdict: Verdict
    status: int | None
    error: str | None = None

    def describe(self) -> str:
        return self.error or f"HTTP {self.status}"


class SrmpClient:
    """POSTs envelopes; never follows redirects (targets were checked against the allow-list)."""

    def __init__(self, timeout_s: float, verify: ssl.SSLContext | bool = True) -> None:
        self._timeout_s = timeout_s
        self._client = httpx.AsyncClient(
            timeout=timeout_s, follow_redirects=False, trust_env=False, verify=verify
        )

    async def post(self, url: str, envelope: SrmpEnvelope) -> PostResult:
        """`timeout_s` bounds the whole POST (httpx's own timeouts bound each read or write only):
        a sending lease relies on it (qm.outbound.lease_needs_renewal)."""
        content_type, body = build_request(envelope)
        try:
            async with asyncio.timeout(self._timeout_s):
                response = await self._client.post(url, content=body, headers={"Content-Type": content_type})
        except TimeoutError:
            return PostResult(Verdict.RETRY, None, f"no answer within {self._timeout_s:g} s")
        except httpx.HTTPError as error:
            return PostResult(Verdict.RETRY, None, f"{type(error).__name__}: {error}".rstrip(": "))
        return PostResult(verdict(response.status_code), response.status_code)

    async def close(self) -> None:
        await self._client.aclose()


def outbound_verification(ca_file: str) -> ssl.SSLContext:
    """How outbound HTTPS is verified: against `ca_file` (MSMQGW_OUTBOUND_CA_FILE) when given,
    else against httpx's default bundle. Never off: a sender-supplied URL must not reach a
    server that cannot prove its name."""
    if not ca_file:
        return default_verification()
    return ssl.create_default_context(cafile=ca_file)


@functools.cache
def default_verification() -> ssl.SSLContext:
    """httpx's default verification (its CA bundle), made once per process: loading the bundle
    takes about 30 ms, which every app start paid for its SRMP client (the tests start
    hundreds). A context is safe to share between clients."""
    return httpx.create_ssl_context(trust_env=False)  # as the clients, which ignore SSL_CERT_FILE
