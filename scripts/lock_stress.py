"""Adversarial concurrency stress of gateway processes sharing one PostgreSQL database,
through the REST API and SRMP (each SRMP message POSTed twice at once, as a resend), with
exact per-message accounting.

Every message body is "S|<tag>" with a unique tag, and (almost) every message asks for a
dead-letter copy (MQMSG_DEADLETTER), so that every way a message can leave its queue
leaves a trace: a confirmed receive (kept here), the message itself still in a queue, or a
dead-letter copy (system$;deadletter / system$;deadxact) whose class says why. At the end
the traffic stops, locks and transactions are left to expire, every queue is listed, and
each tag is reconciled against what the gateway acknowledged.

Start the gateways with MSMQGW_TRANSACTION_TIMEOUT_S shorter than --settle (5, say): the
transactions it forgets on purpose must have been aborted by housekeeping before the queues are
listed, or a message one of them received shows as a purge's dead letter without its NACK (the
admin queue listed before the abort, the dead-letter queue after).

    PYTHONPATH=. .venv/bin/python scripts/lock_stress.py --url http://127.0.0.1:18081 \
        --url http://127.0.0.1:18082 --duration 300 --workers 24 --out /tmp/stress.json

Not a test: a tool for hunting deadlocks and lost or duplicated messages. Pair it with the
PostgreSQL server log ("deadlock detected").
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import collections
import json
import random
import struct
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from soap.build import build_request
from soap.envelope import Msmq, Path, Properties, Services, SrmpEnvelope
from soap.ids import MessageId
from soap.times import SrmpTime

DEADLETTER, JOURNAL = 1, 2
POS_ARRIVAL, POS_RECEIVE, NEG_ARRIVAL, NEG_RECEIVE = 1, 2, 4, 8
INFINITE = 4294967295
SRMP_SENDER = uuid.uuid4()  # a queue manager of its own per run: its message IDs are new keys

PLAIN = ["private$/p0", "private$/p1", "private$/p2", "private$/p3"]
TXQ = ["private$/t0", "private$/t1", "private$/t2"]
EPHEMERAL = ["private$/e0", "private$/e1"]
TX_EPHEMERAL = ["private$/te0"]
ADMIN, TADMIN = "private$/admin", "private$/tadmin"
ADMIN_FN, TADMIN_FN = "DIRECT=OS:.\\private$\\admin", "DIRECT=OS:.\\private$\\tadmin"
JOURNALED = {"private$/p1", "private$/t1"}
SPECS: dict[str, dict[str, Any]] = {
    **{p: {} for p in PLAIN + EPHEMERAL},
    **{p: {"transactional": True} for p in TXQ + TX_EPHEMERAL},
    ADMIN: {},
    TADMIN: {"transactional": True},
}
for _p in JOURNALED:
    SPECS[_p] = {**SPECS[_p], "journal": True}
TRANSACTIONAL = set(TXQ + TX_EPHEMERAL + [TADMIN])


@dataclass
class Sent:
    tag: str
    queue: str
    status: str  # acked | refused | unknown | tx (fate by its transaction)
    journal: int
    acknowledge: int
    admin: str | None
    txid: str | None = None
    message_id: str | None = None
    lookup_id: str | None = None
    ttrq: int = INFINITE
    ttbr: int = INFINITE


@dataclass
class Ledger:
    sent: dict[str, Sent] = field(default_factory=dict)
    received: collections.defaultdict[str, list[str]] = field(
        default_factory=lambda: collections.defaultdict(list)
    )
    maybe_received: collections.defaultdict[str, list[str]] = field(
        default_factory=lambda: collections.defaultdict(list)
    )
    tx_state: dict[str, str] = field(default_factory=dict)  # open|committed|aborted|unknown
    tx_received: collections.defaultdict[str, list[str]] = field(
        default_factory=lambda: collections.defaultdict(list)
    )
    by_message_id: dict[str, str] = field(default_factory=dict)
    errors5xx: list[dict[str, Any]] = field(default_factory=list)
    transport_errors: collections.Counter[str] = field(default_factory=collections.Counter)
    ops: collections.Counter[str] = field(default_factory=collections.Counter)
    statuses: collections.Counter[str] = field(default_factory=collections.Counter)
    purges: list[tuple[float, str]] = field(default_factory=list)
    deletions: list[tuple[float, str]] = field(default_factory=list)
    trace: collections.defaultdict[str, list[str]] = field(
        default_factory=lambda: collections.defaultdict(list)
    )

    def note(self, tag: str, event: str) -> None:
        self.trace[tag].append(f"{time.time():.3f} {event}")


class Driver:
    def __init__(self, urls: list[str], ledger: Ledger, seed: int) -> None:
        self.urls = urls
        self.ledger = ledger
        self.rng = random.Random(seed)
        self.clients = [
            httpx.AsyncClient(
                base_url=url, timeout=httpx.Timeout(120.0), limits=httpx.Limits(max_connections=64)
            )
            for url in urls
        ]
        self.counter = 0
        self.run = f"r{seed}x{int(time.time()) % 100000}"
        self.stop = asyncio.Event()
        self.quota_locked: set[str] = set()
        self.deep = False

    async def close(self) -> None:
        for client in self.clients:
            await client.aclose()

    async def call(self, op: str, method: str, path: str, **kw: Any) -> httpx.Response | None:
        client = self.rng.choice(self.clients)
        self.ledger.ops[op] += 1
        try:
            response = await client.request(method, path, **kw)
        except httpx.HTTPError as error:
            self.ledger.transport_errors[f"{op}:{type(error).__name__}"] += 1
            return None
        self.ledger.statuses[f"{op}:{response.status_code}"] += 1
        if response.status_code >= 500:
            self.ledger.errors5xx.append(
                {
                    "op": op,
                    "path": path,
                    "status": response.status_code,
                    "body": response.text[:500],
                    "t": time.time(),
                }
            )
        return response

    def tag(self, worker: int) -> str:
        self.counter += 1
        return f"{self.run}w{worker}-{self.counter}"

    # -- message properties ------------------------------------------------------------

    def properties(self, queue: str, in_tx: bool) -> dict[str, Any]:
        r = self.rng
        props: dict[str, Any] = {"journal": DEADLETTER | (JOURNAL if r.random() < 0.1 else 0)}
        roll = r.random()
        if roll < 0.25:
            props["admin_queue"], props["acknowledge"] = ADMIN_FN, r.choice([POS_RECEIVE | NEG_RECEIVE, 15])
        elif roll < 0.4:
            props["admin_queue"], props["acknowledge"] = TADMIN_FN, r.choice([POS_RECEIVE, NEG_RECEIVE, 15])
        if r.random() < 0.15:
            props["time_to_be_received"] = r.randint(1, 4)
        if in_tx and r.random() < 0.15:
            props["time_to_reach_queue"] = 1
        if not in_tx:
            props["priority"] = r.randint(0, 7)
        if r.random() < 0.2:
            props["delivery"] = "express"
        return props

    def record(self, tag: str, queue: str, props: dict[str, Any], status: str, txid: str | None) -> Sent:
        sent = Sent(
            tag,
            queue,
            status,
            props.get("journal", 0),
            props.get("acknowledge", 0),
            props.get("admin_queue"),
            txid,
            ttrq=props.get("time_to_reach_queue", INFINITE),
            ttbr=props.get("time_to_be_received", INFINITE),
        )
        self.ledger.sent[tag] = sent
        return sent

    async def send(self, worker: int, queue: str, txid: str | None = None, raw: bool = False) -> str | None:
        in_tx = txid is not None
        props = self.properties(queue, in_tx and txid != "single")
        tag = self.tag(worker)
        params = {"transaction": txid} if txid else {}
        if raw:
            headers = {"Content-Type": "text/plain"}
            names = {
                "journal": "X-Msmq-Journal",
                "acknowledge": "X-Msmq-Acknowledge",
                "admin_queue": "X-Msmq-Admin-Queue",
                "time_to_be_received": "X-Msmq-Time-To-Be-Received",
                "time_to_reach_queue": "X-Msmq-Time-To-Reach-Queue",
                "priority": "X-Msmq-Priority",
                "delivery": "X-Msmq-Delivery",
            }
            for key, value in props.items():
                headers[names[key]] = str(value)
            op = "send_raw"
            response = await self.call(
                op,
                "POST",
                f"/api/queues/{queue}/messages",
                params=params,
                content=f"S|{tag}".encode(),
                headers=headers,
            )
        else:
            op = "send_tx" if in_tx and txid != "single" else ("send_single" if txid else "send")
            response = await self.call(
                op, "POST", f"/api/queues/{queue}/messages", params=params, json={"body": f"S|{tag}", **props}
            )
        if response is not None and response.status_code == 507:  # quota: refused, dead-lettered (0x8003)
            self.record(tag, queue, props, "refused", None)
            return None
        if response is None or response.status_code >= 500:
            self.record(tag, queue, props, "unknown", txid if txid != "single" else None)
            return None
        if response.status_code == 201:
            data = response.json()
            status = "tx" if in_tx and txid != "single" else "acked"
            sent = self.record(tag, queue, props, status, txid if status == "tx" else None)
            sent.message_id, sent.lookup_id = data["message_id"], data["lookup_id"]
            self.ledger.by_message_id[data["message_id"]] = tag
            return tag
        return None

    # -- reading -------------------------------------------------------------------------

    def got(self, how: str, message: dict[str, Any], confirmed: bool = True) -> str | None:
        body = message.get("body") or ""
        if not body.startswith("S|"):
            return None
        tag = body[2:]
        (self.ledger.received if confirmed else self.ledger.maybe_received)[tag].append(how)
        return tag

    async def srmp_send(self, worker: int, queue: str) -> None:
        """An SRMP arrival (the sender's message ID, a duplicate key) POSTed twice at once, as a
        sender resending after a lost answer: stored once, or dead-lettered once (quota)."""
        tag = self.tag(worker)
        content_type, body = _srmp_request(queue, self.counter, f"S|{tag}".encode())
        headers = {"Content-Type": content_type}
        responses = await asyncio.gather(
            *(
                self.call("srmp_send", "POST", f"/msmq/{queue}", content=body, headers=headers)
                for _ in range(2)
            )
        )
        props = {"journal": DEADLETTER}
        if any(response is not None and response.status_code == 200 for response in responses):
            self.record(tag, queue, props, "acked", None)
        elif any(response is None or response.status_code >= 500 for response in responses):
            self.record(tag, queue, props, "unknown", None)

    async def receive(self, queue: str) -> None:
        timeout = self.rng.choice([0, 0, 200, 1500])
        response = await self.call(
            "receive", "POST", f"/api/queues/{queue}/receive", params={"timeout_ms": timeout}
        )
        if response is not None and response.status_code == 200:
            self.got("receive", response.json())

    async def receive_raw(self, queue: str) -> None:
        response = await self.call(
            "receive_raw",
            "POST",
            f"/api/queues/{queue}/receive",
            headers={"Accept": "application/octet-stream"},
        )
        if response is not None and response.status_code == 200:
            self.got("receive_raw", {"body": response.content.decode(errors="replace")})

    async def receive_batch(self, queue: str) -> None:
        params = {"max_messages": self.rng.randint(2, 20), "timeout_ms": self.rng.choice([0, 500])}
        response = await self.call("receive_batch", "POST", f"/api/queues/{queue}/receive", params=params)
        if response is not None and response.status_code == 200:
            for message in response.json()["messages"]:
                self.got("receive_batch", message)

    async def peek(self, queue: str) -> None:
        choice = self.rng.random()
        if choice < 0.3:
            await self.call(
                "peek", "GET", f"/api/queues/{queue}/peek", params={"timeout_ms": self.rng.choice([0, 300])}
            )
        elif choice < 0.6:
            await self.call(
                "peek_first", "GET", f"/api/queues/{queue}/messages/{self.rng.choice(['first', 'last'])}"
            )
        else:
            await self.call("list", "GET", f"/api/queues/{queue}/messages", params={"limit": 20})

    async def receive_by_lookup(self, queue: str, txid: str | None = None) -> str | None:
        listed = await self.call("list", "GET", f"/api/queues/{queue}/messages", params={"limit": 10})
        if listed is None or listed.status_code != 200:
            return None
        messages = listed.json()["messages"]
        if not messages:
            return None
        target = self.rng.choice(messages)["lookup_id"]
        suffix = self.rng.choice(["", "", "/next", "/previous"])
        params = {"transaction": txid} if txid else {}
        response = await self.call(
            "receive_lookup", "POST", f"/api/queues/{queue}/messages/{target}{suffix}/receive", params=params
        )
        if response is not None and response.status_code == 200:
            if txid:
                body = response.json().get("body") or ""
                if body.startswith("S|"):
                    self.ledger.tx_received[txid].append(body[2:])
                    return body[2:]
                return None
            return self.got("receive_lookup", response.json())
        return None

    async def two_phase(self, queue: str) -> None:
        lock_ms = self.rng.choice([300, 600, 1000, 1000, 2000])
        params = {"two_phase": "true", "lock_timeout_ms": lock_ms, "timeout_ms": self.rng.choice([0, 300])}
        response = await self.call("two_phase_begin", "POST", f"/api/queues/{queue}/receive", params=params)
        if response is None or response.status_code != 200:
            return
        message = response.json()
        tag = message["lock_tag"]
        body = message.get("body") or ""
        mtag = body[2:] if body.startswith("S|") else "?"
        self.ledger.note(mtag, f"2pc-begin {queue} lock={lock_ms}ms expires={message.get('lock_expires_at')}")
        # end around the expiry: before, at, or after it (housekeeping races end_lock)
        await asyncio.sleep(
            max(
                0.0,
                lock_ms / 1000 * self.rng.choice([0.0, 0.5, 0.95, 1.0, 1.02, 1.1, 1.5])
                + self.rng.uniform(-0.03, 0.03),
            )
        )
        commit = self.rng.random() < 0.8
        self.ledger.note(mtag, f"2pc-{'commit' if commit else 'abort'}-request")
        end = await self.call(
            "two_phase_" + ("commit" if commit else "abort"),
            "POST",
            f"/api/locks/{tag}/{'commit' if commit else 'abort'}",
        )
        self.ledger.note(mtag, f"2pc-end {None if end is None else end.status_code}")
        if commit and end is not None and end.status_code == 204:
            self.got("two_phase", message)
        elif commit and (end is None or end.status_code >= 500):
            self.got("two_phase?", message, confirmed=False)

    async def transaction(self, worker: int) -> None:
        response = await self.call("tx_begin", "POST", "/api/transactions")
        if response is None or response.status_code != 201:
            return
        txid = response.json()["id"]
        self.ledger.tx_state[txid] = "open"
        queues = TXQ + TX_EPHEMERAL + [TADMIN]
        steps = self.rng.randint(1, 5)
        for _ in range(steps):
            queue = self.rng.choice(queues)
            roll = self.rng.random()
            if roll < 0.5:
                await self.send(worker, queue, txid)
            elif roll < 0.85:
                r = await self.call(
                    "tx_receive",
                    "POST",
                    f"/api/queues/{queue}/receive",
                    params={"transaction": txid, "timeout_ms": self.rng.choice([0, 0, 300])},
                )
                if r is not None and r.status_code == 200:
                    body = r.json().get("body") or ""
                    if body.startswith("S|"):
                        self.ledger.tx_received[txid].append(body[2:])
                        self.ledger.note(body[2:], f"tx-receive {txid}")
            else:
                await self.receive_by_lookup(queue, txid)
        roll = self.rng.random()
        if roll < 0.08:
            return  # forgotten: housekeeping aborts it (MSMQGW_TRANSACTION_TIMEOUT_S)
        if roll < 0.3:
            await asyncio.sleep(self.rng.uniform(0, 0.5))
        commit = roll < 0.8
        end = await self.call(
            "tx_" + ("commit" if commit else "abort"),
            "POST",
            f"/api/transactions/{txid}/{'commit' if commit else 'abort'}",
        )
        if end is None or end.status_code >= 500:
            self.ledger.tx_state[txid] = "unknown"
        elif end.status_code == 204:
            self.ledger.tx_state[txid] = "committed" if commit else "aborted"
        elif end.status_code == 409:
            self.ledger.tx_state[txid] = "aborted"  # timed out: aborted by housekeeping
        else:
            self.ledger.tx_state[txid] = "unknown"

    # -- administration -------------------------------------------------------------------

    async def purge(self) -> None:
        queue = self.rng.choice(PLAIN + TXQ + EPHEMERAL + TX_EPHEMERAL + [TADMIN])
        self.ledger.purges.append((time.time(), queue))
        response = await self.call("purge", "POST", f"/api/queues/{queue}/purge")
        self.ledger.purges.append(
            (time.time(), f"{queue} done {None if response is None else response.text}")
        )

    async def recreate(self) -> None:
        queue = self.rng.choice(EPHEMERAL + TX_EPHEMERAL)
        self.ledger.deletions.append((time.time(), queue))
        await self.call("delete", "DELETE", f"/api/queues/{queue}")
        await asyncio.sleep(self.rng.uniform(0, 0.2))
        await self.call("create", "POST", "/api/queues", json={"path": queue, **SPECS[queue]})

    async def quota(self) -> None:
        queue = self.rng.choice([q for q in PLAIN + TXQ if q not in self.quota_locked])
        self.quota_locked.add(queue)
        try:
            await self.call(
                "quota", "PATCH", f"/api/queues/{queue}", json={"quota_kb": self.rng.choice([1, 2])}
            )
            await asyncio.sleep(self.rng.uniform(0.2, 1.5))
            await self.call("quota", "PATCH", f"/api/queues/{queue}", json={"quota_kb": INFINITE})
        finally:
            self.quota_locked.discard(queue)

    # -- workers ---------------------------------------------------------------------------

    async def worker(self, worker: int) -> None:
        r = self.rng
        ops: list[tuple[float, Callable[[], Awaitable[Any]]]] = [
            (18, lambda: self.send(worker, r.choice(PLAIN + EPHEMERAL))),
            (6, lambda: self.send(worker, r.choice(PLAIN + EPHEMERAL), raw=True)),
            (6, lambda: self.srmp_send(worker, r.choice(PLAIN))),
            (8, lambda: self.send(worker, r.choice(TXQ + TX_EPHEMERAL + [TADMIN]), "single")),
            (10, lambda: self.receive(r.choice(PLAIN + EPHEMERAL + TXQ))),
            (2, lambda: self.receive_raw(r.choice(PLAIN + TXQ))),
            (4, lambda: self.receive_batch(r.choice(PLAIN + EPHEMERAL + TXQ))),
            (5, lambda: self.peek(r.choice(PLAIN + TXQ + EPHEMERAL))),
            (4, lambda: self.receive_by_lookup(r.choice(PLAIN + EPHEMERAL))),
            (8, lambda: self.two_phase(r.choice(PLAIN + TXQ + EPHEMERAL))),
            (10, lambda: self.transaction(worker)),
            (0.6, self.purge),
            (0.3, self.recreate),
            (0.3, self.quota),
        ]
        weights = [w for w, _ in ops]
        if self.deep:  # fewer receives: queues fill up and reach their quotas
            for index in (3, 4, 5, 7, 8):
                weights[index] /= 4
        while not self.stop.is_set():
            _, op = r.choices(ops, weights)[0]
            try:
                await op()
            except Exception as error:
                self.ledger.transport_errors[f"client:{type(error).__name__}:{error}"[:120]] += 1


def _srmp_request(queue: str, sequence: int, body: bytes) -> tuple[str, bytes]:
    """`(Content-Type, body)` of a recoverable SRMP message asking for a dead-letter copy, its
    message ID unique to this run and `sequence`."""
    sent = int(time.time())
    envelope = SrmpEnvelope(
        path=Path(
            action="MSMQ:stress", to=f"http://127.0.0.1/msmq/{queue}", id=MessageId(SRMP_SENDER, sequence)
        ),
        properties=Properties(SrmpTime.from_epoch(sent + 3600), SrmpTime.from_epoch(sent)),
        services=Services(durable=True),
        msmq=Msmq(
            message_class=0,
            priority=3,
            body_type=0,
            source_qm_guid=SRMP_SENDER,
            ttrq=SrmpTime.from_epoch(sent + 7200),
            dead_letter=True,
        ),
        body=body,
    )
    return build_request(envelope)


# -- set-up and final accounting ---------------------------------------------------------


async def setup(client: httpx.AsyncClient) -> None:
    for path, spec in SPECS.items():
        response = await client.post("/api/queues", json={"path": path, **spec})
        assert response.status_code in (201, 409), response.text


async def list_all(client: httpx.AsyncClient) -> dict[str, list[dict[str, Any]]]:
    queues = (await client.get("/api/queues")).json()
    queues = queues["queues"] if isinstance(queues, dict) else queues
    found: dict[str, list[dict[str, Any]]] = {}
    for queue in queues:
        path = queue["path"]
        messages: list[dict[str, Any]] = []
        after = None
        while True:
            params: dict[str, Any] = {"limit": 1000}
            if after is not None:
                params["after"] = after
            page = (await client.get(f"/api/queues/{path}/messages", params=params)).json()
            messages.extend(page["messages"])
            after = page.get("next_after")
            if not page["messages"] or after is None:
                break
        found[path] = messages
        if queue["message_count"] != len(messages):
            found.setdefault("__count_mismatch__", []).append(
                {"queue": path, "message_count": queue["message_count"], "listed": len(messages)}
            )
    return found


def correlation_tag(ledger: Ledger, correlation_b64: str | None) -> str | None:
    if not correlation_b64:
        return None
    raw = base64.b64decode(correlation_b64)
    guid, sequence = uuid.UUID(bytes_le=raw[:16]), struct.unpack("<I", raw[16:])[0]
    return ledger.by_message_id.get(f"{{{guid}}}\\{sequence}")


def reconcile(ledger: Ledger, listing: dict[str, list[dict[str, Any]]], run: str) -> dict[str, Any]:
    in_queue: collections.defaultdict[str, list[str]] = collections.defaultdict(list)
    dead: collections.defaultdict[str, list[int]] = collections.defaultdict(list)
    journaled: collections.defaultdict[str, list[str]] = collections.defaultdict(list)
    acks: collections.defaultdict[str, list[int]] = collections.defaultdict(list)
    for path, messages in listing.items():
        if path.startswith("__"):
            continue
        for message in messages:
            body = message.get("body") or ""
            tag = body[2:] if body.startswith("S|") and body[2:].startswith(run) else None
            if path in (ADMIN, TADMIN) and message["message_class"] != 0:
                ack_tag = tag or correlation_tag(ledger, message.get("correlation_id"))
                if ack_tag:
                    acks[ack_tag].append(message["message_class"])
                continue
            if tag is None:
                continue
            if path in ("system$;deadletter", "system$;deadxact"):
                dead[tag].append(message["message_class"])
            elif path.endswith(";journal"):
                journaled[tag].append(path)
            else:
                in_queue[tag].append(path)
    problems: list[dict[str, Any]] = []
    unknown_present: list[dict[str, Any]] = []
    fates: collections.Counter[str] = collections.Counter()
    receiving_txs: collections.defaultdict[str, list[str]] = collections.defaultdict(list)
    for tx, tags in ledger.tx_received.items():
        for received_tag in tags:
            receiving_txs[received_tag].append(tx)
    for tag, sent in ledger.sent.items():
        received = ledger.received.get(tag, [])
        maybe = ledger.maybe_received.get(tag, [])
        txs = receiving_txs.get(tag, [])
        tx_recv = [tx for tx in txs if ledger.tx_state.get(tx) == "committed"]
        tx_maybe = [tx for tx in txs if ledger.tx_state.get(tx) in ("unknown", "open")]
        places = in_queue.get(tag, [])
        deaths = dead.get(tag, [])
        traces = len(received) + len(tx_recv) + len(places) + len(deaths)
        status = sent.status
        if status == "tx":
            state = ledger.tx_state.get(sent.txid or "", "unknown")
            status = {"committed": "acked", "aborted": "aborted"}.get(state, "unknown")
        info: dict[str, Any] = {
            "tag": tag,
            "sent": sent.__dict__,
            "status": status,
            "received": received,
            "tx_received": tx_recv,
            "maybe": maybe + tx_maybe,
            "in_queue": places,
            "dead": [hex(c) for c in deaths],
            "acks": [hex(c) for c in acks.get(tag, [])],
            "journal": journaled.get(tag, []),
            "trace": ledger.trace.get(tag, []),
            "purges_of_queue": [p for p in ledger.purges if p[1].startswith(sent.queue)][-6:],
        }
        if status == "acked":
            if traces == 1:
                fates[
                    "acked:"
                    + ("received" if received or tx_recv else "queued" if places else f"dead{hex(deaths[0])}")
                ] += 1
            elif traces == 0 and (maybe or tx_maybe):
                fates["acked:maybe-received"] += 1
            elif traces == 0:
                problems.append({"kind": "LOST", **info})
            else:
                problems.append({"kind": "DUPLICATE", **info})
        elif status == "refused":
            if sent.journal & DEADLETTER and (deaths != [0x8003] or places or received or tx_recv):
                problems.append({"kind": "REFUSED-MISMATCH", **info})
            else:
                fates["refused"] += 1
        elif status == "aborted":
            if traces:
                problems.append({"kind": "ABORTED-BUT-PRESENT", **info})
            else:
                fates["aborted"] += 1
        else:
            if traces > 1:
                problems.append({"kind": "DUPLICATE(unknown-send)", **info})
            else:
                fates[f"unknown:{traces}"] += 1
                if traces:
                    info["tx_state"] = ledger.tx_state.get(sent.txid or "")
                    unknown_present.append(info)
        # acknowledgments into the non-transactional admin queue
        if sent.admin == ADMIN_FN and status == "acked" and traces == 1:
            receive_acks = [c for c in acks.get(tag, []) if c in (0x4000, 0xC000, 0xC001, 0xC002)]
            expected: list[int] = []
            if (received or tx_recv) and sent.acknowledge & POS_RECEIVE:
                expected = [0x4000]
            elif deaths and deaths[0] in (0xC000, 0xC001, 0xC002) and sent.acknowledge & NEG_RECEIVE:
                expected = [deaths[0]]
            if receive_acks != expected:
                problems.append({"kind": "ACK-MISMATCH", "expected": [hex(c) for c in expected], **info})
    unknown_tags = [t for t in set(in_queue) | set(dead) if t not in ledger.sent]
    if unknown_tags:
        problems.append({"kind": "UNKNOWN-TAGS", "tags": unknown_tags[:50]})
    received_unsent = [t for t in ledger.received if t not in ledger.sent]
    if received_unsent:
        problems.append({"kind": "RECEIVED-UNSENT", "tags": received_unsent[:50]})
    return {
        "fates": dict(fates),
        "problems": problems,
        "unknown_present": unknown_present,
        "count_mismatch": listing.get("__count_mismatch__", []),
    }


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", action="append", required=True)
    parser.add_argument("--duration", type=float, default=120)
    parser.add_argument("--workers", type=int, default=24)
    parser.add_argument("--settle", type=float, default=12.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", default="/tmp/lock_stress.json")
    parser.add_argument("--deep", action="store_true", help="fewer receives: deeper queues, quotas reached")
    arguments = parser.parse_args()
    ledger = Ledger()
    driver = Driver(arguments.url, ledger, arguments.seed)
    driver.deep = arguments.deep
    await setup(driver.clients[0])
    started = time.time()
    workers = [asyncio.create_task(driver.worker(i)) for i in range(arguments.workers)]

    async def progress() -> None:
        while not driver.stop.is_set():
            await asyncio.sleep(30)
            elapsed = time.time() - started
            print(
                f"[{elapsed:6.0f}s] ops={sum(ledger.ops.values())} sent={len(ledger.sent)} "
                f"5xx={len(ledger.errors5xx)} transport={sum(ledger.transport_errors.values())}",
                flush=True,
            )

    reporter = asyncio.create_task(progress())
    await asyncio.sleep(arguments.duration)
    driver.stop.set()
    await asyncio.gather(*workers)
    reporter.cancel()
    elapsed = time.time() - started
    # open transactions time out, locks expire, short TTBRs pass, sweeper and housekeeping run
    await asyncio.sleep(arguments.settle)
    listing = await list_all(driver.clients[0])
    result = reconcile(ledger, listing, driver.run)
    await driver.close()
    summary = {
        "elapsed_s": round(elapsed, 1),
        "ops": dict(ledger.ops),
        "ops_per_s": round(sum(ledger.ops.values()) / elapsed, 1),
        "statuses": dict(sorted(ledger.statuses.items())),
        "sent": len(ledger.sent),
        "transactions": dict(collections.Counter(ledger.tx_state.values())),
        "transport_errors": dict(ledger.transport_errors),
        "errors5xx": ledger.errors5xx,
        "purges": len(ledger.purges),
        "deletions": len(ledger.deletions),
        **result,
    }
    with open(arguments.out, "w") as out:  # noqa: ASYNC230 - once, at the end
        json.dump(
            {
                "tx_state": ledger.tx_state,
                "purge_log": ledger.purges,
                "deletion_log": ledger.deletions,
                "summary": summary,
                "listing_sizes": {k: len(v) for k, v in listing.items()},
            },
            out,
            indent=1,
            default=str,
        )
    brief = {k: v for k, v in summary.items() if k not in ("problems", "errors5xx")}
    print(json.dumps(brief, indent=1, default=str))
    print("problems:", len(result["problems"]), collections.Counter(p["kind"] for p in result["problems"]))
    print("5xx:", len(ledger.errors5xx))
    for error in ledger.errors5xx[:10]:
        print("  ", error)
    for problem in result["problems"][:20]:
        print(json.dumps(problem, default=str))


if __name__ == "__main__":
    asyncio.run(main())
