"""A real `msmq-gateway serve` process on a free loopback port, for tests that need sockets,
signals or restarts. Readiness is a bounded /healthz probe, never a fixed sleep."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx

from tests.integration.support import gateway_command

READY_WITHIN_S = 90.0
READY_INTERVAL_S = 0.05
"""Readiness probe: poll /healthz every READY_INTERVAL_S for at most READY_WITHIN_S (a start-up
takes about a second, far longer on a loaded 2-core CI machine)."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class GatewayProcess:
    """`serve --no-migrate` on an already migrated database, with `MSMQGW_*` settings given."""

    def __init__(
        self,
        database_url: str,
        settings: dict[str, str],
        log: Path,
        port: int | None = None,
        workers: int = 1,
    ) -> None:
        self.log = log
        self.port = port or free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        environment = {name: value for name, value in os.environ.items() if not name.startswith("MSMQGW_")}
        environment |= {"MSMQGW_DATABASE_URL": database_url, **settings}
        command = [
            *gateway_command(),
            "serve",
            "--no-migrate",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--workers",
            str(workers),
        ]
        with log.open("ab") as output:
            self.process = subprocess.Popen(
                [*command, "--log-level", "warning"], env=environment, stdout=output, stderr=subprocess.STDOUT
            )

    def wait_ready(self) -> None:
        """Poll /healthz a bounded number of times: a readiness probe, not synchronisation."""
        with httpx.Client(base_url=self.base_url, timeout=5) as probe:
            deadline = time.monotonic() + READY_WITHIN_S
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    break
                try:
                    if probe.get("/healthz").status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                time.sleep(READY_INTERVAL_S)
        raise AssertionError(f"the server did not become ready:\n{self.log_text()}")

    def stop(self) -> None:
        """SIGTERM and a clean shutdown; SIGKILL if it does not come."""
        if self.process.poll() is None:
            self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        """SIGKILL: no shutdown, no flush, no lifespan exit."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")
