"""SRMP time strings, durations and the timer mapping of reference §3."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from qm.model import INFINITE
from soap.errors import SrmpError
from soap.times import (
    INFINITE_SENTINEL,
    INFINITE_WIRE,
    LayoutMismatch,
    SrmpTime,
    TimerMapping,
    TimerSettings,
    TimerSource,
    epoch_to_srmp,
    outbound_timer_fields,
    parse_duration,
    resolve_timers,
    srmp_to_epoch,
)

SDK_SWAP = TimerSettings()
WIRE_SWAP = TimerSettings(TimerMapping.WIRE_EXAMPLE)
SDK_CLAMP = TimerSettings(on_mismatch=LayoutMismatch.CLAMP)
WIRE_CLAMP = TimerSettings(TimerMapping.WIRE_EXAMPLE, LayoutMismatch.CLAMP)


@pytest.mark.parametrize(
    ("text", "epoch"),
    [
        ("20240311T081500", 1710144900),
        ("20240315T081500", 1710490500),
        ("20240311T093000", 1710149400),
        ("20380119T031407", 2147483647),
        ("20070719T031140", 1184814700),
        ("20070723T031140", 1185160300),
        ("20240311T130000", 1710162000),
        ("19700101T000000", 0),
    ],
)
def test_worked_conversions_of_the_reference(text: str, epoch: int) -> None:
    """Reference §3.4."""
    assert srmp_to_epoch(text) == epoch
    assert epoch_to_srmp(epoch) == text


def test_lenient_forms_of_windows_ce() -> None:
    assert srmp_to_epoch("20240311T08") == srmp_to_epoch("20240311T080000")
    assert srmp_to_epoch("20240311T0815") == srmp_to_epoch("20240311T081500")
    assert srmp_to_epoch("20240311T24") == srmp_to_epoch("20240312T000000")
    assert srmp_to_epoch("20240229T240000") == srmp_to_epoch("20240301T000000")


@pytest.mark.parametrize(
    "text",
    [
        "",
        "2024-03-11T08:15:00",
        "20240311T081500Z",
        "20240311 081500",
        "20240311T0815000",
        "20240311T081",
        "20241311T081500",
        "20240011T081500",
        "20240230T081500",
        "20230229T000000",
        "20240311T250000",
        "20240311T240001",
        "20240311T086000",
        "20240311T081560",
        "19691231T235959",
        "\uff12\uff10\uff12\uff140311T081500",
        "+2024311T081500",
        "99991231T240000",
    ],
)
def test_malformed_times_are_refused(text: str) -> None:
    with pytest.raises(SrmpError) as refused:
        srmp_to_epoch(text)
    assert refused.value.status == 400


def test_srmp_time_values() -> None:
    time = SrmpTime.parse(" 20240311T081500 ")
    assert time == SrmpTime("20240311T081500", 1710144900)
    assert time.utc == datetime(2024, 3, 11, 8, 15, tzinfo=UTC)
    assert not time.infinite
    assert SrmpTime.parse(INFINITE_SENTINEL).infinite
    assert SrmpTime.parse("20990101T000000").infinite
    assert SrmpTime.from_epoch(2**40) == SrmpTime(INFINITE_SENTINEL, INFINITE_WIRE)
    assert SrmpTime.from_datetime(datetime(2024, 3, 11, 8, 15, tzinfo=UTC)) == time
    with pytest.raises(ValueError, match="aware"):
        SrmpTime.from_datetime(datetime(2024, 3, 11))


@given(st.from_regex(r"[0-9]{8}T[0-9]{2}([0-9]{2}([0-9]{2})?)?", fullmatch=True))
def test_any_time_shaped_text_parses_to_a_usable_time_or_is_refused(text: str) -> None:
    try:
        time = SrmpTime.parse(text)
    except SrmpError as error:
        assert error.status == 400
    else:
        assert time.utc.year <= 9999
        assert SrmpTime.from_epoch(time.epoch).epoch == min(time.epoch, INFINITE_WIRE)


def test_the_last_time_there_is() -> None:
    assert SrmpTime.parse("99991231T235959").utc == datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)


@given(st.integers(min_value=0, max_value=INFINITE_WIRE))
def test_format_then_parse_is_identity(epoch: int) -> None:
    assert srmp_to_epoch(epoch_to_srmp(epoch)) == epoch
    assert SrmpTime.parse(SrmpTime.from_epoch(epoch).text) == SrmpTime.from_epoch(epoch)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("PT30S", 30),
        ("PT1H", 3600),
        ("P1D", 86400),
        ("P1DT2H3M4S", 93784),
        ("P1Y", 365 * 86400),
        ("P2M", 60 * 86400),
    ],
)
def test_durations(text: str, seconds: int) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "P", "PT", "P1DT", "1D", "P1.5D", "PT-1S", "P1H", "P" + "9" * 30 + "D"])
def test_malformed_durations_are_refused(text: str) -> None:
    with pytest.raises(SrmpError):
        parse_duration(text)


def lifetimes(sent: str, expires_at: str, ttrq: str | None, settings: TimerSettings) -> tuple[int, int, bool]:
    timers = resolve_timers(
        srmp_to_epoch(sent),
        srmp_to_epoch(expires_at),
        None if ttrq is None else srmp_to_epoch(ttrq),
        settings,
    )
    return timers.time_to_be_received, timers.time_to_reach_queue, timers.layout_mismatch


def test_examples_of_the_reference_helper() -> None:
    """The comments under the reference's `lifetimes` (§3.4)."""
    v04 = ("20240311T093000", "20240311T094000", "20240311T103000")
    assert lifetimes(*v04, SDK_SWAP) == (3600, 600, False)
    assert lifetimes(*v04, WIRE_SWAP) == (3600, 600, True)
    assert lifetimes(*v04, WIRE_CLAMP) == (600, 600, True)
    v13 = ("20240311T130000", "20240311T150000", "20240311T140000")
    assert lifetimes(*v13, SDK_SWAP) == (7200, 3600, True)
    assert lifetimes(*v13, SDK_CLAMP) == (3600, 3600, True)


@pytest.mark.parametrize(
    ("expires_after", "ttrq_after", "swap", "sdk_clamp", "wire_clamp"),
    [
        (345600, None, (INFINITE, 345600), (INFINITE, 345600), (345600, 345600)),
        (600, 3600, (3600, 600), (3600, 600), (600, 600)),
        (None, 345600, (INFINITE, 345600), (345600, 345600), (INFINITE, 345600)),
        (7200, 3600, (7200, 3600), (3600, 3600), (7200, 3600)),
        (86400, 86400, (86400, 86400), (86400, 86400), (86400, 86400)),
    ],
)
def test_the_settings_table_of_the_reference(
    expires_after: int | None,
    ttrq_after: int | None,
    swap: tuple[int, int],
    sdk_clamp: tuple[int, int],
    wire_clamp: tuple[int, int],
) -> None:
    """Reference §3.4, 'The settings applied to the vectors' (None = the sentinel)."""
    sent = 1710144900
    expires = INFINITE_WIRE if expires_after is None else sent + expires_after
    ttrq = INFINITE_WIRE if ttrq_after is None else sent + ttrq_after
    for settings, wanted in (
        (SDK_SWAP, swap),
        (WIRE_SWAP, swap),
        (SDK_CLAMP, sdk_clamp),
        (WIRE_CLAMP, wire_clamp),
    ):
        timers = resolve_timers(sent, expires, ttrq, settings)
        assert (timers.time_to_be_received, timers.time_to_reach_queue) == wanted, settings


def test_without_msmq_expires_at_bounds_both_under_every_setting() -> None:
    for settings in (SDK_SWAP, WIRE_SWAP, SDK_CLAMP, WIRE_CLAMP):
        timers = resolve_timers(1000, 87400, None, settings)
        assert (timers.time_to_be_received, timers.time_to_reach_queue) == (86400, 86400)
        assert timers.ttbr_source is timers.ttrq_source is TimerSource.EXPIRES_AT
        assert not timers.layout_mismatch


def test_a_swap_exchanges_the_sources_and_a_clamp_keeps_them() -> None:
    swapped = resolve_timers(0, 7200, 3600, SDK_SWAP)
    assert (swapped.ttbr_source, swapped.ttrq_source) == (TimerSource.EXPIRES_AT, TimerSource.TTRQ)
    assert swapped.fields_swapped and not swapped.ttrq_clamped_to_ttbr
    clamped = resolve_timers(0, 7200, 3600, SDK_CLAMP)
    assert (clamped.ttbr_source, clamped.ttrq_source) == (TimerSource.TTRQ, TimerSource.EXPIRES_AT)
    assert clamped.ttrq_clamped_to_ttbr and not clamped.fields_swapped
    assert clamped.ttbr_deadline == clamped.ttrq_deadline == datetime.fromtimestamp(3600, UTC)


def test_lifetimes_are_never_negative_and_later_than_sentinel_is_infinite() -> None:
    timers = resolve_timers(5000, 1000, 2000, SDK_SWAP)
    assert (timers.time_to_be_received, timers.time_to_reach_queue) == (0, 0)
    beyond = resolve_timers(0, INFINITE_WIRE + 10, INFINITE_WIRE, SDK_SWAP)
    assert not beyond.layout_mismatch
    assert beyond.ttbr_deadline is None and beyond.ttrq_deadline is None
    assert beyond.time_to_be_received == beyond.time_to_reach_queue == INFINITE


epochs = st.integers(min_value=0, max_value=INFINITE_WIRE + 100)
all_settings = st.sampled_from([SDK_SWAP, WIRE_SWAP, SDK_CLAMP, WIRE_CLAMP])


@given(epochs, epochs, st.none() | epochs, all_settings)
def test_timer_invariants(sent: int, expires: int, ttrq: int | None, settings: TimerSettings) -> None:
    timers = resolve_timers(sent, expires, ttrq, settings)
    assert 0 <= timers.time_to_reach_queue <= timers.time_to_be_received <= INFINITE
    assert timers.layout_mismatch == (timers.fields_swapped or timers.ttrq_clamped_to_ttbr)
    assert not (timers.fields_swapped and timers.ttrq_clamped_to_ttbr)
    if settings.on_mismatch is LayoutMismatch.SWAP and ttrq is not None:
        later, earlier = max(min(expires, INFINITE_WIRE), min(ttrq, INFINITE_WIRE)), min(expires, ttrq)
        assert timers.time_to_be_received == (INFINITE if later >= INFINITE_WIRE else max(0, later - sent))
        assert timers.time_to_reach_queue == (
            INFINITE if earlier >= INFINITE_WIRE else max(0, earlier - sent)
        )


@given(st.integers(min_value=0, max_value=INFINITE_WIRE - 1), st.sampled_from(list(TimerMapping)))
def test_outbound_fields_are_read_back_consistently(sent: int, mapping: TimerMapping) -> None:
    """What the gateway writes is consistent under its own mapping, and keeps TTRQ <= TTBR."""
    for ttbr, ttrq in ((INFINITE, 345600), (3600, 600), (600, 3600), (INFINITE, INFINITE), (0, 0)):
        expires_at, ttrq_field = outbound_timer_fields(sent, ttbr, ttrq, mapping)
        timers = resolve_timers(
            sent, expires_at.epoch, ttrq_field.epoch, TimerSettings(mapping, LayoutMismatch.CLAMP)
        )
        assert not timers.layout_mismatch
        if all(value == INFINITE or sent + value < INFINITE_WIRE for value in (ttbr, ttrq)):
            assert timers.time_to_be_received == ttbr
            assert timers.time_to_reach_queue == min(ttrq, ttbr)


def test_outbound_layouts() -> None:
    sent = 1710144900
    sdk = outbound_timer_fields(sent, INFINITE, 345600, TimerMapping.SDK)
    assert (sdk[0].text, sdk[1].text) == ("20240315T081500", INFINITE_SENTINEL)
    wire = outbound_timer_fields(sent, INFINITE, 345600, TimerMapping.WIRE_EXAMPLE)
    assert (wire[0].text, wire[1].text) == (INFINITE_SENTINEL, "20240315T081500")
