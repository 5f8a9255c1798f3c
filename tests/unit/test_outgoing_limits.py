"""Outgoing queues made for anonymous SRMP senders: who a sender is counted as, and when one
more queue may be made (qm.outbound)."""

from __future__ import annotations

import pytest

from qm.outbound import OutgoingQueueLimits, OutgoingRefusal, outbound_target, srmp_source


@pytest.mark.parametrize(
    ("client_host", "source"),
    [
        ("192.0.2.10", "192.0.2.10"),
        ("::ffff:192.0.2.10", "192.0.2.10"),  # IPv4-mapped: the IPv4 sender it is
        ("2001:db8:1:2::1", "2001:db8:1:2::/64"),
        ("2001:DB8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::/64"),  # the same /64
        ("[2001:db8:1:3::1]", "2001:db8:1:3::/64"),
        ("fe80::1%eth0", "fe80::/64"),
        ("testclient", "testclient"),  # not an address (a Unix socket, a test client)
        ("x" * 100, "x" * 64),
        ("", ""),
    ],
)
def test_a_sender_is_counted_by_its_address_and_ipv6_by_its_64(client_host: str, source: str) -> None:
    assert srmp_source(client_host) == source


@pytest.mark.parametrize(
    ("made_for_source", "made_for_all", "refusal"),
    [
        (0, 0, None),
        (1, 4, None),
        (2, 2, OutgoingRefusal.SOURCE_LIMIT),
        (1, 5, OutgoingRefusal.TOTAL_LIMIT),
        (2, 5, OutgoingRefusal.SOURCE_LIMIT),  # the sender's own limit is named first
    ],
)
def test_one_more_queue_fits_both_limits_or_is_refused(
    made_for_source: int, made_for_all: int, refusal: OutgoingRefusal | None
) -> None:
    assert OutgoingQueueLimits(per_source=2, total=5).refusal(made_for_source, made_for_all) is refusal


def test_no_limit_refuses_nothing() -> None:
    assert OutgoingQueueLimits().refusal(10**9, 10**9) is None


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("http://remote.example./q", "remote.example"),  # a trailing dot is another spelling
        ("http://remote.example@10.0.0.1/q", "remote.example"),  # user information, then the host
        ("http://remote.example:80@10.0.0.1/q", "remote.example"),
        ("http://[0:0:0:0:0:0:0:1]:8080/q", "[::1]:8080"),  # spellings are compared as written
        ("http://[::ffff:10.0.0.1]/q", "10.0.0.1"),
        ("http://xn--bcher-kva.example/q", "bücher.example"),
        ("http://bücher.example/q", "xn--bcher-kva.example"),
        ("http://remote.example:8080/q", "remote.example"),
        ("https://remote.example:80/q", "remote.example"),
    ],
)
def test_another_spelling_of_an_allowed_host_is_refused(url: str, allowed: str) -> None:
    """Refusing what matches only after normalising is the safe side: list the spelling the
    senders use."""
    assert outbound_target(url, {}, [allowed]) is None


@pytest.mark.parametrize(
    "url", ["http://REMOTE.EXAMPLE/q", "http://remote.example:80/q", "http://remote.example:0080/q"]
)
def test_case_and_a_spelled_out_default_port_are_the_allowed_host(url: str) -> None:
    assert outbound_target(url, {}, ["remote.example"]) == url
