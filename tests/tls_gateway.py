"""A real `msmq-gateway serve` process speaking HTTPS only, and clients that trust its CA
(with a client certificate of their own, or without)."""

from __future__ import annotations

import ssl
import time
from pathlib import Path

import httpx

from tests.gateway_process import READY_INTERVAL_S, READY_WITHIN_S, GatewayProcess

TIMEOUT_S = 10.0


class TlsGateway(GatewayProcess):
    """A `serve` process speaking HTTPS only."""

    def __init__(self, database_url: str, settings: dict[str, str], log: Path, ca: Path) -> None:
        super().__init__(database_url, settings, log)
        self.base_url = f"https://localhost:{self.port}"
        self.ca = ca

    def client(
        self, cert: tuple[str | Path, str | Path] | None = None, headers: dict[str, str] | None = None
    ) -> httpx.Client:
        context = ssl.create_default_context(cafile=str(self.ca))
        if cert is not None:
            context.load_cert_chain(*map(str, cert))
        return httpx.Client(
            base_url=self.base_url, verify=context, timeout=TIMEOUT_S, trust_env=False, headers=headers
        )

    def wait_ready(self) -> None:
        with self.client() as probe:
            deadline = time.monotonic() + READY_WITHIN_S
            while time.monotonic() < deadline and self.process.poll() is None:
                try:
                    if probe.get("/healthz").status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                time.sleep(READY_INTERVAL_S)
        raise AssertionError(f"the server did not become ready:\n{self.log_text()}")
