"""Pure rules of SRMP streams (reference §4.2-§4.3) and of the gateway as a sender (§2.2)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from app.settings import Settings
from qm import streams
from qm.outbound import Verdict, lease_needs_renewal, new_stream_id, outbound_target, retry_delay, verdict
from qm.streams import StreamPosition, accepts, receipt_due
from soap.ids import StreamId

T0 = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def position(current: int, previous: int | None = None, start: bool = False) -> StreamPosition:
    return StreamPosition(
        "uid:x\\1", current, previous, "http://s/msmq/private$/order_queue$" if start else None
    )


@pytest.mark.parametrize(
    ("last_accepted", "message", "accepted"),
    [
        (None, position(1, start=True), True),
        (None, position(1), False),  # a stream is known only from its <start>
        (None, position(2, start=True), False),
        (1, position(1, start=True), False),  # the first message again
        (1, position(2), True),
        (1, position(3), False),  # out of order
        (3, position(2), False),  # duplicate
        (3, position(6, previous=3), True),  # gap declared by the sender
        (3, position(6, previous=2), True),
        (3, position(6, previous=4), False),  # claims a message the receiver never had
        (3, position(3, previous=1), False),
    ],
)
def test_acceptance_rule(last_accepted: int | None, message: StreamPosition, accepted: bool) -> None:
    assert accepts(last_accepted, message) is accepted


def test_receipt_follows_a_burst_but_never_later_than_ten_seconds() -> None:
    assert receipt_due(None, T0) == T0 + timedelta(milliseconds=500)
    assert receipt_due(T0, T0 + timedelta(seconds=3)) == T0 + timedelta(seconds=3.5)
    assert receipt_due(T0, T0 + timedelta(seconds=9.9)) == T0 + timedelta(seconds=10)


def test_outgoing_stream_ids_are_unguessable() -> None:
    """A stream receipt settles the messages of the stream it names, so its ID is the only
    credential a receipt carries: 122 random bits, nothing derived from the queue manager's
    GUID or the clock alone (issue 18 item 7). Still the `uid:<guid>\\<uint64>` form (§5.8)."""
    ids = {new_stream_id(T0) for _ in range(1000)}
    assert len(ids) == 1000
    guids = {StreamId.parse(text).sender_qm for text in ids}
    assert len(guids) == 1000 and all(guid.version == 4 for guid in guids)
    assert all(text.startswith("uid:") for text in ids)


@pytest.mark.parametrize(
    ("url", "allowed", "target"),
    [
        ("http://winbox/msmq/private$/order_queue$", ["winbox"], "http://winbox/msmq/private$/order_queue$"),
        ("http://WINBOX:80/msmq/q", ["winbox"], "http://WINBOX:80/msmq/q"),
        ("http://winbox/msmq/q", ["other"], None),
        ("http://169.254.169.254/latest/meta-data", ["winbox"], None),
        ("http://anything/msmq/q", ["*"], "http://anything/msmq/q"),
        ("file:///etc/passwd", ["*"], None),
        ("gopher://winbox/", ["winbox"], None),
        ("http://winbox/msmq/q", [], None),
    ],
)
def test_outbound_targets_pass_the_allow_list(url: str, allowed: list[str], target: str | None) -> None:
    assert outbound_target(url, {}, allowed) == target


@pytest.mark.parametrize(
    ("url", "allowed", "target"),
    [
        ("http://winbox:18251/stolen", ["winbox"], None),  # a bare host allows its scheme's default port
        ("http://winbox:443/msmq/q", ["winbox"], None),
        ("https://winbox/msmq/q", ["winbox"], "https://winbox/msmq/q"),
        ("https://winbox:443/msmq/q", ["winbox"], "https://winbox:443/msmq/q"),
        ("http://winbox:8080/msmq/q", ["winbox:8080"], "http://winbox:8080/msmq/q"),
        ("http://winbox/msmq/q", ["winbox:8080"], None),
        ("http://winbox:18251/msmq/q", ["winbox:*"], "http://winbox:18251/msmq/q"),
        ("https://winbox/msmq/q", ["http://winbox"], None),  # a scheme given is the only one
        ("http://winbox/msmq/q", ["http://winbox"], "http://winbox/msmq/q"),
        ("https://winbox:8443/q", ["https://WinBox:8443"], "https://winbox:8443/q"),
        ("http://[::1]:8080/q", ["[::1]:8080"], "http://[::1]:8080/q"),
        ("http://[::1]/q", ["::1"], "http://[::1]/q"),
        ("http://[::1]:8080/q", ["::1"], None),
        ("http://anything:1/q", ["*"], "http://anything:1/q"),
    ],
)
def test_outbound_allow_list_checks_scheme_host_and_port(
    url: str, allowed: list[str], target: str | None
) -> None:
    assert outbound_target(url, {}, allowed) == target


MALFORMED_ENTRIES = ["winbox:abc", "ftp://winbox", "winbox:70000", "http://winbox/path", "[::1"]


@pytest.mark.parametrize("entry", MALFORMED_ENTRIES)
def test_a_malformed_outbound_allow_list_entry_stops_the_start(entry: str) -> None:
    with pytest.raises(ValidationError):
        Settings(srmp_outbound_hosts=f"ok.example,{entry}")


def test_rewrites_apply_before_the_host_check() -> None:
    rewrites = {"http://winbox/": "http://10.0.0.7:8080/"}
    wanted = "http://10.0.0.7:8080/msmq/private$/order_queue$"
    assert outbound_target("http://WinBox/msmq/private$/order_queue$", rewrites, ["10.0.0.7:8080"]) == wanted
    assert outbound_target("http://WinBox/msmq/private$/order_queue$", rewrites, ["10.0.0.7"]) is None
    assert outbound_target("http://winbox/msmq/q", rewrites, ["winbox"]) is None


@pytest.mark.parametrize(
    ("status", "wanted"),
    [
        (200, Verdict.DELIVERED),
        (204, Verdict.DELIVERED),
        (400, Verdict.REFUSED),
        (404, Verdict.REFUSED),
        (302, Verdict.REFUSED),
        (408, Verdict.RETRY),
        (429, Verdict.RETRY),
        (500, Verdict.RETRY),
        (503, Verdict.RETRY),
        (None, Verdict.RETRY),
    ],
)
def test_what_an_answer_means_to_the_sender(status: int | None, wanted: Verdict) -> None:
    assert verdict(status) is wanted


@pytest.mark.parametrize(
    ("failures", "seconds"),
    [(0, 1), (1, 1), (2, 5), (3, 30), (4, 300), (5, 300), (6, 300), (1000, 300)],
)
def test_a_failed_stream_receipt_waits_its_step_of_the_schedule_then_the_last_one(
    failures: int, seconds: float
) -> None:
    # An off-by-one here once raised IndexError on the fourth failed receipt.
    assert streams.retry_delay(failures) == timedelta(seconds=seconds)


def test_retries_back_off_exponentially_up_to_the_maximum() -> None:
    delays = [retry_delay(attempt, 1.0, 20.0).total_seconds() for attempt in range(1, 8)]
    assert delays == [1, 2, 4, 8, 16, 20, 20]


@pytest.mark.parametrize(
    ("held_for_s", "renew"),
    [(None, True), (90.0, False), (61.0, False), (59.0, True), (0.0, True), (-5.0, True)],
)
def test_a_sending_lease_is_renewed_when_less_than_two_thirds_is_left(
    held_for_s: float | None, renew: bool
) -> None:
    held_until = None if held_for_s is None else T0 + timedelta(seconds=held_for_s)
    assert lease_needs_renewal(held_until, T0, 90.0) is renew


def test_a_post_must_fit_in_half_an_outgoing_lease() -> None:
    assert Settings(srmp_send_timeout_s=45, srmp_outgoing_lease_s=90).srmp_outgoing_lease_s == 90
    with pytest.raises(ValidationError, match="at most half of srmp_outgoing_lease_s"):
        Settings(srmp_send_timeout_s=46, srmp_outgoing_lease_s=90)
