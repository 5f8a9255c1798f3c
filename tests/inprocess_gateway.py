"""The app under a real uvicorn server on a loopback socket, in a thread of the test process:
real HTTP for synchronous clients (zeep) without the start-up cost of a new process."""

from __future__ import annotations

import socket
import threading
import time

import uvicorn

from app.http_protocol import OneWriteHttpToolsProtocol
from app.main import create_app
from app.settings import Settings

READY_ATTEMPTS = 1000
READY_INTERVAL_S = 0.01
"""Readiness probe: at most READY_ATTEMPTS looks at uvicorn's `started`, READY_INTERVAL_S apart."""
STOP_TIMEOUT_S = 30.0


class InProcessGateway:
    def __init__(self, settings: Settings) -> None:
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind(("127.0.0.1", 0))
        self.port: int = self._socket.getsockname()[1]
        self.base_url = f"http://127.0.0.1:{self.port}"
        # No websockets: their implementations warn on import, and warnings are errors here.
        config = uvicorn.Config(
            create_app(settings),
            log_level="warning",
            ws="none",
            lifespan="on",
            http=OneWriteHttpToolsProtocol,  # as `serve` runs it
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, name="uvicorn", daemon=True
        )

    def start(self) -> None:
        self._thread.start()
        for _ in range(READY_ATTEMPTS):
            if self._server.started:
                return
            if not self._thread.is_alive():
                break
            time.sleep(READY_INTERVAL_S)
        self.stop()
        raise AssertionError("the in-process gateway did not start (see the captured log)")

    def stop(self) -> None:
        self._server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(STOP_TIMEOUT_S)
        self._socket.close()
