"""Memory stays bounded while a real server is fed malformed SRMP for thousands of requests.

One `msmq-gateway serve` process gets the same mix of bad requests round after round:
truncations and byte flips of every valid vector (read in place), hypothesis-generated
envelopes, a huge MIME part header, a huge SOAP header, a huge HTTP header, deep nesting,
10,000 attributes, an envelope referencing a missing part, a boundary that never ends and a
declared length over the limit. Every request must be refused (the codec decides beforehand
which variants are malformed, so nothing is stored). The server's resident set size
(VmRSS, /proc) is read after warm-up rounds and again after the measured rounds; its growth
must stay far below what keeping anything per request would cost. Then a valid message is
still stored.

Each answer is awaited before the next request is sent, and RSS is read between rounds, when
no request is in flight: nothing here waits on time.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from soap.errors import SrmpError
from soap.limits import Limits
from soap.parse import parse_request
from tests.compat.replay_support import Connection, Server
from tests.compat.vectors import load, valid_names
from tests.databases import SqliteDatabases
from tests.unit.soap.srmp_samples import envelope, multipart

pytestmark = pytest.mark.slow

SEED = 20261124
KIB, MIB = 1024, 1024 * 1024
TARGET = "/msmq/private$/orders"
LOCAL_HOST_NAMES = "gw01.example.net,wks-sales07.example.net"
WARM_UP_ROUNDS = 3
MEASURED_ROUNDS = 16
GROWTH_PER_REQUEST_BYTES = 512
"""The bound: RSS may grow by at most this much per measured request (plus SLACK_BYTES): about
11.6 MiB over the 6,848 requests. Keeping the body of each request would cost its average size,
about 11 KiB (the test prints it), over 20 times the bound; any leak of more than about 1.7 KiB
a request fails. Measured without a leak: +0.5 MiB (79 B/request); with a deliberate one (a
module-level list of bodies in the SRMP route): +75 MiB, failed."""
SLACK_BYTES = 8 * MIB
"""Allocator noise: arenas and caches that settle unevenly between two readings."""

Case = tuple[str, bytes]
"""A label and the whole request, HTTP head included."""


def http_request(body: bytes, content_type: str, *extra_headers: str) -> bytes:
    head = [
        f"POST {TARGET} HTTP/1.1",
        "Host: gw01.example.net",
        f"Content-Type: {content_type}",
        f"Content-Length: {len(body)}",
        'SOAPAction: "MSMQMessage"',
        *extra_headers,
    ]
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body


def refused_by_codec(body: bytes, content_type: str) -> bool:
    try:
        parse_request(body, content_type)
    except SrmpError:
        return True
    return False


def vector_cases(rng: random.Random, per_vector: int) -> list[Case]:
    """Random truncations and 1-4 byte flips of every valid vector, kept if the codec refuses them."""
    cases = []
    for name in valid_names():
        vector = load(name)
        body, content_type = vector.request.body, vector.content_type or "text/xml"
        for _ in range(per_vector):
            cut = body[: rng.randrange(len(body))]
            if refused_by_codec(cut, content_type):
                cases.append((f"{name} cut", http_request(cut, content_type)))
            flipped = bytearray(body)
            for _ in range(rng.randint(1, 4)):
                flipped[rng.randrange(len(flipped))] ^= rng.randint(1, 255)
            if refused_by_codec(bytes(flipped), content_type):
                cases.append((f"{name} flipped", http_request(bytes(flipped), content_type)))
    return cases


def hypothesis_cases(count: int) -> list[Case]:
    """Envelopes hypothesis writes: the hand-written envelope with random text or bytes spliced
    in, or random header blocks; only those the codec refuses."""
    found: list[Case] = []
    base = envelope().encode()

    @settings(
        max_examples=count,
        database=None,
        derandomize=True,
        phases=[Phase.generate],
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(
        at=st.integers(0, len(base)),
        cut=st.integers(0, 64),
        inserted=st.one_of(st.binary(max_size=200), st.text(max_size=200).map(str.encode)),
        block=st.text(min_size=1, max_size=100),
    )
    def generate(at: int, cut: int, inserted: bytes, block: str) -> None:
        spliced = base[:at] + inserted + base[at + cut :]
        headers = envelope(f"<{block}/>").encode("utf-8", "replace")
        for label, body in (("spliced", spliced), ("random header", headers)):
            content_type, request_body = multipart(body)
            if refused_by_codec(request_body, content_type):
                found.append((f"hypothesis {label}", http_request(request_body, content_type)))

    generate()
    return found


def hostile_cases() -> list[Case]:
    """The hostile shapes of reference §10, each refused by a limit before any expansion."""
    deep = envelope().replace(
        "<se:Body></se:Body>", "<se:Body>" + "<a>" * 20_000 + "</a>" * 20_000 + "</se:Body>"
    )
    attributes = " ".join(f'a{index}="v"' for index in range(10_000))
    signature = (
        '<Signature xmlns="http://www.w3.org/2000/02/xmldsig#"><SignedInfo>'
        '<Reference URI="cid:body@5b0c7e1a-2f3d-4c8e-9a61-0d4f2b7c8e93"/></SignedInfo></Signature>'
    )
    boundary = 'multipart/related; boundary="B"'
    cases = [
        ("deep nesting", multipart(deep.encode())),
        ("10,000 attributes", ("text/xml", envelope(f"<Noise xmlns='urn:x' {attributes}/>").encode())),
        ("missing part", multipart(envelope(signature).encode(), ("extension@x", b"e"))),
        (
            "huge SOAP header",
            multipart(envelope("<Noise xmlns='urn:x'>" + "n" * (2 * MIB) + "</Noise>").encode()),
        ),
        (
            "huge part header",
            (boundary, b"--B\r\nContent-Type: text/xml\r\nX-Junk: " + b"j" * MIB + b"\r\n\r\n<e/>--B--\r\n"),
        ),
        (
            "boundary never ends",
            (boundary, b"--B\r\nContent-Type: text/xml\r\n\r\n<e>" + b"x" * MIB + b"--C--"),
        ),
    ]
    requests = [(label, http_request(body, content_type)) for label, (content_type, body) in cases]
    huge_http_header = http_request(b"", "text/xml", "X-Junk: " + "h" * (64 * KIB))
    return [*requests, ("huge HTTP header", huge_http_header)]


def too_large_head() -> bytes:
    """Only the head: its Content-Length is over the limit, so the body is never read."""
    declared = Limits().max_request_bytes + 1
    return http_request(b"", 'multipart/related; boundary="B"').replace(
        b"Content-Length: 0", f"Content-Length: {declared}".encode()
    )


def campaign_round(server: Server, cases: list[Case]) -> Counter[int]:
    """Each case on a connection of its own; every answer is a refusal with no body."""
    statuses: Counter[int] = Counter()
    for label, request in cases:
        with Connection(server.port) as connection:
            connection.send(request)
            answer = connection.answer()
        # SRMP refusals have no body; h11 refuses the huge HTTP header itself, with a short text
        assert answer.status == 400 and answer.body in (b"", b"Invalid HTTP request received."), (
            label,
            answer,
        )
        statuses[answer.status] += 1
    with Connection(server.port) as connection:
        connection.send(too_large_head())
        assert connection.answer().status == 413
    statuses[413] += 1
    return statuses


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * KIB
    raise AssertionError(f"no VmRSS for process {pid}")


@pytest.fixture(scope="module")
def server(sqlite_databases: SqliteDatabases, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    log = tmp_path_factory.mktemp("memory") / "server.log"
    with sqlite_databases.dedicated_database() as database:
        started = Server(database, {"MSMQGW_LOCAL_HOST_NAMES": LOCAL_HOST_NAMES}, log)
        try:
            started.wait_ready()
            started.create_queue("private$/orders", transactional=False)
            yield started
        finally:
            started.stop()


def test_memory_stays_bounded_over_thousands_of_malformed_requests(server: Server) -> None:
    cases = vector_cases(random.Random(SEED), per_vector=12) + hypothesis_cases(60) + hostile_cases()
    random.Random(SEED).shuffle(cases)
    mix_bytes = sum(len(request) for _label, request in cases)
    for _ in range(WARM_UP_ROUNDS):
        campaign_round(server, cases)
    before = rss_bytes(server.process.pid)
    statuses: Counter[int] = Counter()
    for _ in range(MEASURED_ROUNDS):
        statuses += campaign_round(server, cases)
    after = rss_bytes(server.process.pid)
    requests = sum(statuses.values())
    bound = SLACK_BYTES + GROWTH_PER_REQUEST_BYTES * requests
    report = (
        f"{requests} requests ({statuses}), mix of {len(cases)} averaging "
        f"{mix_bytes / len(cases) / KIB:.1f} KiB; RSS {before / MIB:.1f} -> {after / MIB:.1f} MiB "
        f"(+{(after - before) / KIB:.0f} KiB, {(after - before) / requests:.0f} B/request); "
        f"bound +{bound / KIB:.0f} KiB"
    )
    print(report)
    assert requests >= 3000, report
    assert after - before < bound, report
    assert server.alive(), server.log_text()[-3000:]
    assert server.messages("private$/orders") == []  # every request of the campaign was refused
    vector = load("01-express-basic")
    with Connection(server.port) as connection:
        connection.send(vector.raw)
        assert connection.answer().status == 200
    assert [message["label"] for message in server.messages("private$/orders")] == ["order-created"]
