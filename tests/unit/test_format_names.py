from __future__ import annotations

import uuid

import pytest

from qm.errors import MqError, MqErrorCode
from qm.format_names import FormatKind, LocalIdentity, local_queue_path, parse_format_name
from qm.paths import QueueKind, QueuePath, SystemQueue, system_queue_path

OUR_GUID = uuid.UUID("c4a19f02-7d3e-4b1a-8f55-2e9d6a0b7c31")
IDENTITY = LocalIdentity(OUR_GUID, frozenset({"gw01", "gw01.example.net", "127.0.0.1"}))


@pytest.mark.parametrize(
    ("text", "kind", "host", "path"),
    [
        ("DIRECT=OS:.\\private$\\admin", FormatKind.DIRECT_OS, ".", QueuePath(QueueKind.PRIVATE, "admin")),
        ("direct=os:GW01\\orders", FormatKind.DIRECT_OS, "GW01", QueuePath(QueueKind.PUBLIC, "orders")),
        (
            "DIRECT=TCP:127.0.0.1\\private$\\a;journal",
            FormatKind.DIRECT_TCP,
            "127.0.0.1",
            QueuePath(QueueKind.PRIVATE, "a", journal=True),
        ),
        (
            "DIRECT=OS:gw01\\SYSTEM$;DEADLETTER",
            FormatKind.DIRECT_OS,
            "gw01",
            system_queue_path(SystemQueue.DEADLETTER),
        ),
        (
            "DIRECT=http://gw01.example.net/msmq/private$/orders",
            FormatKind.DIRECT_HTTP,
            "gw01.example.net",
            QueuePath(QueueKind.PRIVATE, "orders"),
        ),
        (
            "DIRECT=HTTPS://GW01.example.net:8443/MSMQ/Private$/Orders",
            FormatKind.DIRECT_HTTP,
            "gw01.example.net",
            QueuePath(QueueKind.PRIVATE, "Orders"),
        ),
        (
            "MSMQ:DIRECT=http://gw01/msmq/private$%5Corders",
            FormatKind.DIRECT_HTTP,
            "gw01",
            QueuePath(QueueKind.PRIVATE, "orders"),
        ),
        ("FormatName:DIRECT=OS:.\\private$\\x", FormatKind.DIRECT_OS, ".", QueuePath(QueueKind.PRIVATE, "x")),
    ],
)
def test_direct_format_names_parse_to_host_and_queue(
    text: str, kind: FormatKind, host: str, path: QueuePath
) -> None:
    name = parse_format_name(text)
    assert (name.kind, name.host, name.path) == (kind, host, path)


def test_queue_paths_in_format_names_compare_case_insensitively() -> None:
    upper = parse_format_name("DIRECT=HTTP://GW01/MSMQ/PRIVATE$/ORDERS").path
    lower = parse_format_name("DIRECT=http://gw01/msmq/private$/orders").path
    assert upper is not None and lower is not None and upper.key == lower.key


@pytest.mark.parametrize("suffix", ["DEADLETTER", "DEADXACT", "JOURNAL"])
def test_machine_format_names_designate_system_queues(suffix: str) -> None:
    name = parse_format_name(f"MACHINE={OUR_GUID};{suffix}")
    assert name.kind is FormatKind.MACHINE and name.machine == OUR_GUID
    assert local_queue_path(name, IDENTITY) == system_queue_path(SystemQueue(suffix.lower()))


def test_a_machine_format_name_of_another_queue_manager_is_not_local() -> None:
    assert local_queue_path(parse_format_name(f"MACHINE={uuid.uuid4()};DEADLETTER"), IDENTITY) is None


def test_private_format_names_keep_the_hex_queue_number() -> None:
    name = parse_format_name(f"PRIVATE={OUR_GUID}\\0000001a")
    assert (name.kind, name.machine, name.private_id) == (FormatKind.PRIVATE, OUR_GUID, 26)


@pytest.mark.parametrize(
    ("text", "local"),
    [
        ("DIRECT=OS:.\\private$\\admin", True),
        ("DIRECT=OS:gw01\\private$\\admin", True),
        ("DIRECT=OS:other-host\\private$\\admin", False),
        ("DIRECT=http://GW01.example.net/msmq/private$/admin", True),
        ("DIRECT=http://elsewhere.example.net/msmq/private$/admin", False),
    ],
)
def test_only_this_gateways_host_names_are_local(text: str, local: bool) -> None:
    assert (local_queue_path(parse_format_name(text), IDENTITY) is not None) is local


def test_http_format_names_are_send_only() -> None:
    assert parse_format_name("DIRECT=http://gw01/msmq/q").send_only
    assert not parse_format_name("DIRECT=OS:.\\q").send_only


@pytest.mark.parametrize(
    "text",
    [
        "orders",
        "DIRECT=",
        "DIRECT=OS:nohost",
        "DIRECT=FTP:x\\q",
        "DIRECT=http:///msmq/q",
        "DIRECT=http://gw01/q",
        "MACHINE=not-a-guid;DEADLETTER",
        f"MACHINE={OUR_GUID}",
        f"MACHINE={OUR_GUID};ELSEWHERE",
        "PRIVATE=xyz",
        "MULTICAST=239.1.1.1:8001",
    ],
)
def test_malformed_format_names_are_illegal(text: str) -> None:
    with pytest.raises(MqError) as raised:
        parse_format_name(text)
    assert raised.value.code is MqErrorCode.MQ_ERROR_ILLEGAL_FORMATNAME
