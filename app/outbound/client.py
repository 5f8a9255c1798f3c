"""One HTTP client for everything the gateway POSTs as an SRMP sender."""

from __future__ import annotations

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

    def __init__(self, timeout_s: float) -> None:
        self._client = httpx.AsyncClient(timeout=timeout_s, follow_redirects=False, trust_env=False)

    async def post(self, url: str, envelope: SrmpEnvelope) -> PostResult:
        content_type, body = build_request(envelope)
        try:
            response = await self._client.post(url, content=body, headers={"Content-Type": content_type})
        except httpx.HTTPError as error:
            return PostResult(Verdict.RETRY, None, f"{type(error).__name__}: {error}".rstrip(": "))
        return PostResult(verdict(response.status_code), response.status_code)

    async def close(self) -> None:
        await self._client.aclose()
