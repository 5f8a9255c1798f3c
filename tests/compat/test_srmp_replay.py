"""Every SRMP vector replayed byte-exactly over TCP to a real `msmq-gateway serve` process.

The `.http` files are read in place (tests/compat/vectors.py) and written to a socket unchanged;
what the gateway stored is read back over the REST API. Per store, one module-wide set of server
processes, each with a database of its own, started together:

* one per combination of MSMQGW_SRMP_TIMER_MAPPING and MSMQGW_SRMP_TIMER_LAYOUT_MISMATCH: each
  valid vector is replayed there exactly once (properties, timers, the mismatch log line). Under
  `swap` both mappings yield the same lifetimes (reference §3.3), so the mapping shows in the log
  line under `swap` and in the lifetimes only under `clamp`;
* `misc`: duplicate elimination, malformed and re-addressed requests, HTTP connection handling;
* `fuzz`: truncated and corrupted vectors, whose accepted variants must not disturb other tests.

Every server takes gw01.example.net (the vectors' gateway) and wks-sales07.example.net (where
the receipt vectors 09 and 10 are addressed, and the admin queue of 05 and 06) as local names.
No server has `private$/order_queue$`, the queue vector 09 is addressed to: its stream is not
one these servers send, so the receipt is answered 200 and dropped, and no queue appears
(reference §4.3, §4.7).
"""

from __future__ import annotations

import base64
import hashlib
import random
import re
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.compat.replay_support import Connection, Server, replay
from tests.compat.vectors import Vector, load, malformed_names, sha256, valid_names
from tests.databases import PostgresDatabases, SqliteDatabases

pytestmark = pytest.mark.slow

STORES = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
LOCAL_HOST_NAMES = "gw01.example.net,wks-sales07.example.net"
QUEUES = {
    "private$/orders": False,
    "private$/orders_tx": True,
    "private$/acks": False,
}
ORDERS = "private$/orders"
GUID_NULL = "00000000-0000-0000-0000-000000000000"
GUID_NULL_ID = f"{{{GUID_NULL}}}\\1"
"""Vector 02's message ID (no <Msmq>): never deduplicated."""
NULL_ID_VECTOR = "02-minimal-no-msmq-element"
INFINITE = 0xFFFFFFFF
TIMER_SLACK_S = 5
"""A timer read back may be up to this much below its lifetime: the listing shows what remains
of the TTBR (the lifetime minus the seconds since arrival)."""
ACK_FLAGS = {"AckPosArrival": 0x01, "AckPosReceive": 0x02, "AckNegReceive": 0x08}
ACK_REACH_QUEUE = 2
SAME_VALUES = {
    "priority": "priority",
    "class": "message_class",
    "app_specific": "app_specific",
    "body_type": "body_type",
    "journal_property": "journal",
    "positive_journaling": "positive_journaling",
    "negative_journaling": "negative_journaling",
    "ack_property_value": "acknowledge",
    "extension": "extension",
}
"""Vector `expected` keys whose value the listing shows as is (under another name)."""
FUZZ_SEED = 20240311


@dataclass(frozen=True)
class TimerSettings:
    mapping: str
    on_mismatch: str

    def __str__(self) -> str:
        return f"{self.mapping}+{self.on_mismatch}"


COMBINATIONS = [TimerSettings(m, h) for h in ("swap", "clamp") for m in ("sdk", "wire-example")]
MISC, FUZZ = "misc", "fuzz"
ROLES: dict[str, dict[str, str]] = {
    **{
        str(timers): {
            "MSMQGW_SRMP_TIMER_MAPPING": timers.mapping,
            "MSMQGW_SRMP_TIMER_LAYOUT_MISMATCH": timers.on_mismatch,
        }
        for timers in COMBINATIONS
    },
    MISC: {},
    # No TTBR sweeps after start-up: a corrupted sentAt can store an already expired message,
    # and its removal would change the counts the fuzz tests compare.
    FUZZ: {"MSMQGW_SWEEP_INTERVAL_S": "3600"},
}


# -- the servers ---------------------------------------------------------------------------


@dataclass
class Site:
    store: str
    servers: dict[str, Server]


@pytest.fixture(scope="module", params=STORES)
def site(
    request: pytest.FixtureRequest,
    sqlite_databases: SqliteDatabases,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Site]:
    """All server processes of one store, started together, each with its own database."""
    databases: SqliteDatabases | PostgresDatabases = (
        sqlite_databases if request.param == "sqlite" else request.getfixturevalue("postgres_databases")
    )
    logs = tmp_path_factory.mktemp(f"srmp-replay-{request.param}")
    with ExitStack() as stack:
        servers: dict[str, Server] = {}
        for role, settings in ROLES.items():
            database_url = stack.enter_context(databases.dedicated_database())
            settings = {"MSMQGW_LOCAL_HOST_NAMES": LOCAL_HOST_NAMES, **settings}
            servers[role] = Server(database_url, settings, logs / f"{role}.log")
            stack.callback(servers[role].stop)
        for server in servers.values():
            server.wait_ready()
            for path, transactional in QUEUES.items():
                server.create_queue(path, transactional)
        yield Site(request.param, servers)


# -- what the vectors expect -------------------------------------------------------------


def intact(name: str) -> Vector:
    """The vector, checked against its JSON's size and hash: what goes out is the file as is."""
    vector = load(name)
    spec = vector.spec
    assert (len(vector.raw), sha256(vector.raw)) == (spec["file_size_bytes"], spec["file_sha256"])
    return vector


def split(raw: bytes) -> tuple[bytes, bytes]:
    head, separator, body = raw.partition(b"\r\n\r\n")
    assert separator
    return head, body


def with_body(head: bytes, body: bytes) -> bytes:
    """The request with another body and the HTTP Content-Length that matches it."""
    head, replaced = re.subn(rb"(?im)^(content-length:[ \t]*)\d+", rb"\g<1>%d" % len(body), head)
    assert replaced == 1
    return head + b"\r\n\r\n" + body


def rewritten(vector: Vector, *replacements: tuple[bytes, bytes]) -> bytes:
    """A multipart vector with text of its envelope replaced; the envelope part's and the HTTP
    Content-Length follow."""
    head, body = split(vector.raw)
    envelope_length = re.search(rb"Content-Length: (\d+)", body)  # the first part's: the envelope
    assert envelope_length is not None
    delta = 0
    for old, new in replacements:
        assert body.count(old) == 1 and body.index(old) > envelope_length.end(), old
        body = body.replace(old, new)
        delta += len(new) - len(old)
    length = b"%d" % (int(envelope_length[1]) + delta)
    body = body[: envelope_length.start(1)] + length + body[envelope_length.end(1) :]
    return with_body(head, body)


def readdressed(vector: Vector, to: str) -> bytes:
    """The vector with another `<to>`."""
    old = re.search(rb"<to>[^<]*</to>", vector.raw)
    assert old is not None
    return rewritten(vector, (old[0], f"<to>{to}</to>".encode()))


def target_queue(vector: Vector) -> str:
    """The queue named by the vector's `<to>` (queue names are case-insensitive)."""
    to = re.search(rb"<to>([^<]*)</to>", vector.raw)
    assert to is not None
    _virtual_directory, queue = urlsplit(to[1].decode()).path.strip("/").split("/", 1)
    return queue.lower()


def message_id(expected: dict[str, Any]) -> str:
    forms = expected["message_id"]
    return f"{{{forms['lineage_guid']}}}\\{forms['uniquifier']}"


def digest(data: bytes | None) -> tuple[int, str]:
    data = data or b""
    return len(data), hashlib.sha256(data).hexdigest()


def correlation(hex_bytes: str | None) -> str | None:
    return None if hex_bytes is None else base64.b64encode(bytes.fromhex(hex_bytes)).decode()


def wanted_properties(expected: dict[str, Any]) -> dict[str, Any]:
    """The message listing's view of every property the vector states."""
    wanted: dict[str, Any] = {
        "message_id": message_id(expected),
        "label": expected["label"],
        "body": expected["body"] or {"length": 0, "sha256": hashlib.sha256(b"").hexdigest()},
        "sent_time": expected["sent_at_utc"],
    }
    wanted |= {name: expected[key] for key, name in SAME_VALUES.items() if key in expected}
    if "delivery" in expected:  # 07/08: "recoverable (stream messages are always durable)"
        wanted["delivery"] = expected["delivery"].split()[0]
    if "correlation_id_hex" in expected:
        wanted["correlation_id"] = correlation(expected["correlation_id_hex"])
    if "source_qm_guid" in expected:
        wanted["source_machine"] = expected["source_qm_guid"] or GUID_NULL
    for queue in ("admin_queue", "response_queue"):
        if queue in expected:
            wanted[queue] = None if expected[queue] is None else "DIRECT=" + expected[queue]
    if "acknowledgements_requested" in expected:
        flags = sum(ACK_FLAGS[name] for name in expected["acknowledgements_requested"])
        assert flags == expected.get("ack_property_value", flags)
        wanted["acknowledge"] = flags
    if "stream" not in expected:  # stream vectors: test_stream_message_keeps_its_transaction_boundaries
        wanted["transaction_boundaries"] = (False, False)
    return wanted


def stored_properties(message: dict[str, Any], keys: set[str]) -> dict[str, Any]:
    def sized(data: bytes) -> dict[str, Any]:
        length, sha = digest(data)
        return {"length": length, "sha256": sha}

    # An answer holds the body once: as text when it is UTF-8, else in base64.
    body = base64.b64decode(message["body_base64"]) if message["body"] is None else message["body"].encode()
    view = dict(message)
    view |= {
        "body": sized(body),
        "extension": sized(base64.b64decode(message["extension_base64"])),
        "positive_journaling": bool(message["journal"] & 2),
        "negative_journaling": bool(message["journal"] & 1),
        "transaction_boundaries": (message["first_in_transaction"], message["last_in_transaction"]),
    }
    return {key: view[key] for key in keys}


def wanted_timers(expected: dict[str, Any], timers: TimerSettings) -> dict[str, Any]:
    """The vectors README's table: which block holds the timer keys of a combination."""
    if timers.on_mismatch == "swap":
        block = {} if timers.mapping == "sdk" else expected["wire_example_mapping"]
    else:
        block = expected["layout_mismatch_clamp"][timers.mapping]
    merged = expected | block
    assert (merged["timer_mapping"], merged["timer_layout_mismatch_handling"]) == (
        timers.mapping,
        timers.on_mismatch,
    )
    return merged


def check_timer(name: str, actual: int, wanted: int | str) -> None:
    if isinstance(wanted, str):
        assert wanted.startswith("INFINITE") and actual == INFINITE, (name, actual, wanted)
    else:
        assert wanted - TIMER_SLACK_S <= actual <= wanted, (name, actual, wanted)


def lookup_ids(messages: list[dict[str, Any]]) -> set[str]:
    return {message["lookup_id"] for message in messages}


def with_id(server: Server, queue: str, wanted_id: str) -> list[dict[str, Any]]:
    return [message for message in server.messages(queue) if message["message_id"] == wanted_id]


def arrival_acks(server: Server, expected: dict[str, Any]) -> list[dict[str, Any]]:
    """The gateway's own delivery acknowledgments of this vector's message, in its admin queue
    (local here). Vector 10 is such a receipt too, but from another queue manager."""
    if expected.get("admin_queue") is None:
        return []
    admin = urlsplit(expected["admin_queue"]).path.split("/", 2)[2]
    own_id = correlation(expected["message_id"]["bytes_hex"])
    gateway = server.api.get("/api/queue-manager").json()["guid"]
    return [
        message
        for message in server.messages(admin)
        if (message["message_class"], message["correlation_id"], message["source_machine"])
        == (ACK_REACH_QUEUE, own_id, gateway)
    ]


# -- valid vectors -------------------------------------------------------------------------

STREAM_PREDECESSORS = {"08-stream-second": "07-stream-first"}


def in_stream_order(server: Server, name: str) -> None:
    """Vector 08 continues the stream vector 07 starts, and a receiver accepts it only after 07
    (reference §4.2): replay 07 first (a no-op where it was accepted already)."""
    predecessor = STREAM_PREDECESSORS.get(name)
    if predecessor is not None:
        assert replay(server, intact(predecessor).raw).status == 200


def stray_receipt(expected: dict[str, Any]) -> bool:
    """A stream receipt for a stream the receiving gateway does not send (vector 09 here)."""
    return bool(expected.get("message_type") == "stream receipt")


def stray_receipts(server: Server) -> int:
    counted: int = server.api.get("/api/srmp/statistics").json()["stray_stream_receipts"]
    return counted


STORED_VECTORS = [name for name in valid_names() if not stray_receipt(load(name).spec["expected"])]
STRAY_RECEIPT_VECTORS = [name for name in valid_names() if stray_receipt(load(name).spec["expected"])]


@pytest.mark.parametrize("name", STRAY_RECEIPT_VECTORS)
def test_a_stream_receipt_for_a_stream_not_sent_here_is_answered_and_dropped(site: Site, name: str) -> None:
    vector, server = intact(name), site.servers[MISC]
    before, counted = server.counts(), stray_receipts(server)

    statuses = [replay(server, vector.raw).status for _ in range(2)]

    assert statuses == [vector.spec["expected_http_response"]["status"]] * 2
    assert server.counts() == before
    assert server.api.get(f"/api/queues/{target_queue(vector)}").status_code == 404
    assert stray_receipts(server) == counted + 2


@pytest.mark.parametrize("timers", COMBINATIONS, ids=str)
@pytest.mark.parametrize("name", STORED_VECTORS)
def test_valid_vector_is_stored_with_its_properties(site: Site, name: str, timers: TimerSettings) -> None:
    vector, server = intact(name), site.servers[str(timers)]
    in_stream_order(server, name)
    expected = vector.spec["expected"]
    queue = target_queue(vector)
    before = lookup_ids(server.messages(queue))

    answer = replay(server, vector.raw)

    assert (answer.status, answer.body) == (vector.spec["expected_http_response"]["status"], b"")
    new = [message for message in server.messages(queue) if message["lookup_id"] not in before]
    assert [message["message_id"] for message in new] == [message_id(expected)]
    wanted = wanted_properties(expected)
    assert stored_properties(new[0], set(wanted)) == wanted
    timer_keys = wanted_timers(expected, timers)
    check_timer("time_to_be_received", new[0]["time_to_be_received"], timer_keys["time_to_be_received_s"])
    check_timer("time_to_reach_queue", new[0]["time_to_reach_queue"], timer_keys["time_to_reach_queue_s"])
    logged = [
        line
        for line in server.log_text().splitlines()
        if "timer layout mismatch" in line and f"(message {message_id(expected)})" in line
    ]
    assert len(logged) == int(timer_keys["timer_layout_mismatch"]), logged
    arrival_requested = wanted.get("acknowledge", 0) & ACK_FLAGS["AckPosArrival"]
    assert len(arrival_acks(server, expected)) == (1 if arrival_requested else 0)


@pytest.mark.parametrize("name", STORED_VECTORS)
def test_replaying_a_valid_vector_twice_stores_it_once(site: Site, name: str) -> None:
    """A sender that retries (no answer seen) must not get a second copy, except for GUID_NULL\\1."""
    vector, server = intact(name), site.servers[MISC]
    in_stream_order(server, name)
    expected = vector.spec["expected"]
    queue, own_id = target_queue(vector), message_id(expected)
    before = with_id(server, queue, own_id)

    statuses = [replay(server, vector.raw).status for _ in range(2)]

    assert statuses == [200, 200]
    after = with_id(server, queue, own_id)
    if own_id == GUID_NULL_ID:
        assert len(after) == len(before) + 2
    else:
        assert len(before) <= 1 and len(after) == 1  # stored by this test or by an earlier one here
        if expected.get("ack_property_value", 0) & ACK_FLAGS["AckPosArrival"]:
            assert len(arrival_acks(server, expected)) == 1


@pytest.mark.parametrize("name", ["07-stream-first", "08-stream-second"])
def test_stream_message_keeps_its_transaction_boundaries(site: Site, name: str) -> None:
    vector, server = intact(name), site.servers[MISC]
    in_stream_order(server, name)
    expected = vector.spec["expected"]
    assert replay(server, vector.raw).status == 200
    [stored] = with_id(server, target_queue(vector), message_id(expected))
    assert (stored["first_in_transaction"], stored["last_in_transaction"]) == (
        expected["first_in_transaction"],
        expected["last_in_transaction"],
    )


# -- malformed and re-addressed requests ------------------------------------------------------


@pytest.mark.parametrize("name", malformed_names())
def test_malformed_vector_is_refused_and_stores_nothing(site: Site, name: str) -> None:
    """m07 declares 9,999,999,999 bytes: only the file's bytes are sent, the answer comes from the head."""
    vector, server = intact(name), site.servers[MISC]
    before = server.counts()

    answer = replay(server, vector.raw)

    assert answer.status == vector.spec["expected_rejection"]["http_status"]
    if answer.status == 405:
        assert "POST" in answer.headers["allow"]
    else:
        assert answer.body == b""
    assert server.counts() == before


def test_wrong_method_is_answered_without_a_body(site: Site) -> None:
    answer = replay(site.servers[MISC], load("m15-wrong-method").raw)
    assert (answer.status, answer.body) == (405, b"")


REFUSED_DESTINATIONS = [
    pytest.param(NULL_ID_VECTOR, "http://gw99.example.net/msmq/private$/orders", id="host-not-local"),
    pytest.param(NULL_ID_VECTOR, "http://gw01.example.net/queues/private$/orders", id="other-virtual-dir"),
    pytest.param(NULL_ID_VECTOR, "http://gw01.example.net/msmq/private$/missing", id="no-such-queue"),
    pytest.param(NULL_ID_VECTOR, "http://gw01.example.net/msmq/private$/orders;journal", id="subqueue"),
    pytest.param(NULL_ID_VECTOR, "http://gw01.example.net/msmq/private$/orders_tx", id="plain-to-tx-queue"),
    pytest.param("07-stream-first", "http://gw01.example.net/msmq/private$/orders", id="stream-to-plain"),
]


@pytest.mark.parametrize(("name", "to"), REFUSED_DESTINATIONS)
def test_message_for_a_queue_not_served_here_is_refused(site: Site, name: str, to: str) -> None:
    """The destination is `<to>`, not the request line (which still names a queue that exists)."""
    server = site.servers[MISC]
    before = server.counts()
    answer = replay(server, readdressed(load(name), to))
    assert (answer.status, answer.body) == (400, b"")
    assert server.counts() == before


@pytest.mark.parametrize(
    "to",
    ["HTTP://GW01.EXAMPLE.NET/MSMQ/PRIVATE$/ORDERS", "http://wks-sales07.example.net/msmq/private$/orders"],
    ids=["case-insensitive", "second-local-name"],
)
def test_readdressed_vector_for_a_local_queue_is_stored(site: Site, to: str) -> None:
    """The control for the refusals above: the rewriting itself keeps the request valid."""
    vector, server = load(NULL_ID_VECTOR), site.servers[MISC]
    assert readdressed(vector, "http://gw01.example.net/msmq/private$/orders") == vector.raw
    before = len(with_id(server, ORDERS, GUID_NULL_ID))
    assert replay(server, readdressed(vector, to)).status == 200
    assert len(with_id(server, ORDERS, GUID_NULL_ID)) == before + 1


@contextmanager
def no_space(server: Server, limit: str, queue: str) -> Iterator[None]:
    """The queue's quota at 0 KB, or the queue manager throttled, for the duration."""
    if limit == "queue-quota":
        changed = server.api.patch(f"/api/queues/{queue}", json={"quota_kb": 0})
    else:
        changed = server.api.patch("/api/queue-manager", json={"throttled": True})
    assert changed.status_code == 200, changed.text
    try:
        yield
    finally:
        if limit == "queue-quota":
            restored = server.api.patch(f"/api/queues/{queue}", json={"quota_kb": INFINITE})
        else:
            restored = server.api.patch("/api/queue-manager", json={"throttled": False})
        assert restored.status_code == 200, restored.text


SPACE_LIMITS = [
    pytest.param("queue-quota", 503, id="queue-quota-503"),
    pytest.param("throttled", 500, id="throttled-500"),
]


def refused_for_space(server: Server, limit: str, status: int, sequence: int) -> tuple[str, bytes, str]:
    """Vector 04 with a message ID of its own, for a queue of its own, refused once for lack of
    space (the sender will retry: 5xx). Returns the queue, the request and the message ID."""
    queue = f"private$/space_{limit.replace('-', '_')}_{sequence}"
    server.create_queue(queue, transactional=False)
    vector = load("04-ttbr-ttrq-unicode")
    request = rewritten(
        vector,
        (
            b"<to>http://gw01.example.net/msmq/private$/orders</to>",
            f"<to>http://gw01.example.net/msmq/{queue}</to>".encode(),
        ),
        (b"<id>uuid:7003@", b"<id>uuid:%d@" % sequence),
    )
    own_id = f"{{{vector.spec['expected']['message_id']['lineage_guid']}}}\\{sequence}"
    before = server.counts()
    with no_space(server, limit, queue):
        answer = replay(server, request)
    assert (answer.status, answer.body) == (status, b"")
    assert server.counts() == before  # nothing stored (no dead-letter copy: 04 has no DeadLetter)
    return queue, request, own_id


@pytest.mark.parametrize(("limit", "status"), SPACE_LIMITS)
def test_message_refused_for_lack_of_space_is_answered_with_a_retry_status(
    site: Site, limit: str, status: int
) -> None:
    """Queue quota: 503, a documented deviation (MSMQ leaves it unspecified), so that the sender
    retries instead of dropping the message; throttled or machine quota: 500 (reference §1.7)."""
    refused_for_space(site.servers[MISC], limit, status, 9100 + status)


@pytest.mark.parametrize(("limit", "status"), SPACE_LIMITS)
def test_message_refused_for_lack_of_space_is_stored_when_the_sender_retries(
    site: Site, limit: str, status: int
) -> None:
    server = site.servers[MISC]
    queue, request, own_id = refused_for_space(server, limit, status, 9200 + status)
    assert replay(server, request).status == 200
    assert [message["message_id"] for message in server.messages(queue)] == [own_id]


REQUEST_TARGETS = [
    pytest.param(b"/MSMQ/PRIVATE$/ORDERS", id="upper-case"),
    pytest.param(b"/msmq/private$%5Corders", id="percent-encoded-backslash"),
    pytest.param(
        b"/msmq\\private$\\orders",
        id="backslashes",
    ),
    pytest.param(
        b"http://gw01.example.net/msmq/private$/orders",
        id="absolute-form",
    ),
]


@pytest.mark.parametrize("target", REQUEST_TARGETS)
def test_request_target_forms_reach_the_route(site: Site, target: bytes) -> None:
    server, raw = site.servers[MISC], load(NULL_ID_VECTOR).raw
    before = len(with_id(server, ORDERS, GUID_NULL_ID))
    answer = replay(server, raw.replace(b" /msmq/private$/orders ", b" " + target + b" ", 1))
    assert (answer.status, answer.body) == (200, b"")
    assert len(with_id(server, ORDERS, GUID_NULL_ID)) == before + 1


# -- HTTP connection handling (reference §2.3) -------------------------------------------------


def wanted_status(name: str) -> int:
    spec = load(name).spec
    status: int = (
        spec["expected_rejection"]["http_status"]
        if spec["kind"] == "malformed"
        else spec["expected_http_response"]["status"]
    )
    return status


@pytest.mark.parametrize(
    "names",
    [
        (NULL_ID_VECTOR, "m12-priority-out-of-range"),
        ("m01-bad-xml", NULL_ID_VECTOR),
        ("01-express-basic", "13-timer-layout-mismatch"),
        (NULL_ID_VECTOR, "m15-wrong-method", "m06-truncated-mime", NULL_ID_VECTOR),
    ],
    ids="+".join,
)
def test_pipelined_requests_are_answered_in_order(site: Site, names: tuple[str, ...]) -> None:
    server = site.servers[MISC]
    null_before = len(with_id(server, ORDERS, GUID_NULL_ID))
    with Connection(server.port) as connection:
        connection.send(b"".join(load(name).raw for name in names))  # one write, before any answer
        statuses = [connection.answer().status for _ in names]
    assert statuses == [wanted_status(name) for name in names]
    assert len(with_id(server, ORDERS, GUID_NULL_ID)) == null_before + names.count(NULL_ID_VECTOR)
    for name in {name for name in names if name[0] != "m" and name != NULL_ID_VECTOR}:
        assert len(with_id(server, ORDERS, message_id(load(name).spec["expected"]))) == 1


def test_one_connection_carries_several_requests(site: Site) -> None:
    server = site.servers[MISC]
    null_before = len(with_id(server, ORDERS, GUID_NULL_ID))
    exchanges = [
        (load(NULL_ID_VECTOR).raw, 200),
        (load("m12-priority-out-of-range").raw, 400),
        (load(NULL_ID_VECTOR).raw, 200),
        (load("m15-wrong-method").raw, 405),
        (b"GET /healthz HTTP/1.1\r\nHost: gw01.example.net\r\n\r\n", 200),
        (load(NULL_ID_VECTOR).raw, 200),
    ]
    with Connection(server.port) as connection:
        for request, status in exchanges:
            connection.send(request)
            answer = connection.answer()
            assert answer.status == status, request[:60]
            assert answer.headers.get("connection", "keep-alive").lower() != "close"
    assert len(with_id(server, ORDERS, GUID_NULL_ID)) == null_before + 3


def test_http_1_0_request_with_content_length_is_stored(site: Site) -> None:
    server = site.servers[MISC]
    raw = load(NULL_ID_VECTOR).raw
    assert raw.startswith(b"POST /msmq/private$/orders HTTP/1.1\r\n")
    null_before = len(with_id(server, ORDERS, GUID_NULL_ID))
    with Connection(server.port) as connection:
        connection.send(raw.replace(b" HTTP/1.1\r\n", b" HTTP/1.0\r\n", 1))
        answer = connection.answer()
        assert (answer.status, answer.body) == (200, b"")
        assert connection.closed_by_server()  # HTTP/1.0 without keep-alive
    assert len(with_id(server, ORDERS, GUID_NULL_ID)) == null_before + 1


# -- truncated and corrupted vectors -----------------------------------------------------------

Case = tuple[str, bytes]


def truncated_cases(rng: random.Random, count: int) -> list[Case]:
    """Bodies cut short, with the HTTP Content-Length telling the truth about the cut."""
    cases = []
    for _ in range(count):
        name = rng.choice(valid_names())
        head, body = split(load(name).raw)
        cut = rng.randrange(len(body))
        cases.append((f"{name} cut to {cut} bytes", with_body(head, body[:cut])))
    return cases


def corrupted_cases(rng: random.Random, count: int) -> list[Case]:
    """1-4 bytes of the body changed to any other value, or 1-2 of the Content-Type value to
    other printable characters (so that the HTTP head itself stays well-formed)."""
    cases = []
    for number in range(count):
        name = rng.choice(valid_names())
        raw = bytearray(load(name).raw)
        head, _ = split(bytes(raw))
        if number % 4:
            positions = [rng.randrange(len(head) + 4, len(raw)) for _ in range(rng.randint(1, 4))]
            for position in positions:
                raw[position] = (raw[position] + rng.randint(1, 255)) % 256
        else:
            value = re.search(rb"(?im)^content-type:[ \t]*([^\r]*)", head)
            assert value is not None
            positions = [rng.randrange(value.start(1), value.end(1)) for _ in range(rng.randint(1, 2))]
            for position in positions:
                raw[position] = rng.choice([c for c in range(0x20, 0x7F) if c != raw[position]])
        cases.append((f"{name} changed at {sorted(positions)}", bytes(raw)))
    return cases


def check_answers(server: Server, cases: list[Case]) -> Counter[int]:
    """Each case on its own connection: 200 or 400 with no body; a 400 stores nothing."""
    statuses: Counter[int] = Counter()
    counts = server.counts()
    for label, request in cases:
        answer = replay(server, request)
        statuses[answer.status] += 1
        where = f"seed {FUZZ_SEED}, {label}"
        assert (answer.status in (200, 400), answer.body) == (True, b""), f"{where}: {answer}"
        now = server.counts()
        if answer.status != 200:
            assert now == counts, f"{where}: refused with {answer.status} but stored"
        counts = now
    assert server.alive(), server.log_text()[-3000:]
    return statuses


def test_truncated_vectors_are_refused_without_storing(site: Site) -> None:
    statuses = check_answers(site.servers[FUZZ], truncated_cases(random.Random(FUZZ_SEED), 60))
    assert statuses[400] >= 50, statuses


def test_corrupted_vectors_never_crash_the_server_nor_store_when_refused(site: Site) -> None:
    statuses = check_answers(site.servers[FUZZ], corrupted_cases(random.Random(FUZZ_SEED + 1), 120))
    assert statuses[400] >= 30, statuses  # the corruption did reach the parser


def test_requests_abandoned_mid_body_store_nothing(site: Site) -> None:
    """The sender closes the connection before the declared Content-Length has arrived."""
    server, rng = site.servers[FUZZ], random.Random(FUZZ_SEED + 2)
    counts = server.counts()
    for _ in range(20):
        raw = load(rng.choice(valid_names())).raw
        with Connection(server.port) as connection:
            connection.send(raw[: rng.randrange(len(raw))])
    assert server.alive(), server.log_text()[-3000:]
    assert server.counts() == counts
