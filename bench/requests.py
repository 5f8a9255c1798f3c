"""Prepared requests: SRMP envelopes as Windows sends them, REST sends and receives."""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime, timedelta

from bench.http_load import Counter, request_bytes
from soap.build import build_request
from soap.envelope import Msmq, Path, Properties, Services, SrmpEnvelope
from soap.ids import MessageId
from soap.times import SrmpTime

BODY_SIZE = 1024
SENDER = uuid.UUID("6b1d2f3e-8a9c-4d5e-9f00-b3e4c5d6a7b8")


def body(size: int = BODY_SIZE) -> bytes:
    return (b"msmq-gateway bench " * (size // 19 + 1))[:size]


def srmp_requests(port: int, queue: str, count: int, recoverable: bool, first: int = 1) -> list[bytes]:
    """`count` distinct SRMP messages (each its own message ID, as a real sender's are)."""
    now = datetime.now(UTC)
    expires = SrmpTime.from_datetime(now + timedelta(days=1))
    payload = body()
    prepared = []
    for sequence in range(first, first + count):
        envelope = SrmpEnvelope(
            path=Path(
                action="MSMQ:bench",
                to=f"http://127.0.0.1:{port}/msmq/{queue}",
                id=MessageId(SENDER, sequence),
            ),
            properties=Properties(expires_at=expires, sent_at=SrmpTime.from_datetime(now)),
            services=Services(durable=True) if recoverable else None,
            msmq=Msmq(message_class=0, priority=3, body_type=0, source_qm_guid=SENDER, ttrq=expires),
            body=payload,
        )
        content_type, data = build_request(envelope)
        prepared.append(
            request_bytes("POST", f"/msmq/{queue}", data, {"Content-Type": content_type, "SOAPAction": '""'})
        )
    return prepared


def rest_send(queue: str, payload: bytes | None = None, express: bool = False) -> bytes:
    headers = {"Content-Type": "application/octet-stream"}
    if express:
        headers["X-Msmq-Delivery"] = "express"
    return request_bytes("POST", f"/api/queues/{queue}/messages", payload or body(), headers)


def rest_receive(queue: str, timeout_ms: int = 0, max_messages: int = 1, decode: bool | None = None) -> bytes:
    """`decode` None: the raw answer; False or True: the JSON answer without or with `decoded`."""
    query = f"timeout_ms={timeout_ms}"
    if decode is not None:
        query += "&decode=true" if decode else ""
        return request_bytes(
            "POST", f"/api/queues/{queue}/receive?{query}", b"", {"Accept": "application/json"}
        )
    if max_messages > 1:
        query += f"&max_messages={max_messages}"
        return request_bytes(
            "POST", f"/api/queues/{queue}/receive?{query}", b"", {"Accept": "application/json"}
        )
    return request_bytes(
        "POST", f"/api/queues/{queue}/receive?{query}", b"", {"Accept": "application/octet-stream"}
    )


def received_count(status: int, answer: bytes) -> int:
    """A single receive carries one message (200); a batched one a JSON list."""
    if status != 200:
        return 0
    if answer[:1] == b"{":
        return len(json.loads(answer).get("messages", [None]))
    return 1


single_received: Counter = lambda status, _answer: 1 if status == 200 else 0  # noqa: E731


def stamped_body() -> bytes:
    """A body that starts with its send time, for send-to-receive latency."""
    return f"{time.perf_counter():.9f}".encode().ljust(BODY_SIZE, b".")
