"""Destination URLs and the queue path under the virtual directory (reference §1.1, §8.4)."""

from __future__ import annotations

import pytest

from qm.paths import QueueKind
from soap.errors import SrmpError
from soap.urls import HttpUrl, check_http_url, parse_http_url, queue_path_of


def test_urls_are_normalised_for_matching() -> None:
    assert parse_http_url("HTTP://GW01.Example.net/MSMQ/Private$/Orders?SenderStream=X", "to") == HttpUrl(
        "http", "gw01.example.net", 80, "/MSMQ/Private$/Orders", "SenderStream=X"
    )
    assert parse_http_url("https://gw01:8443/msmq/orders", "to").port == 8443
    assert parse_http_url("https://gw01/msmq/orders", "to").port == 443
    assert parse_http_url("http://10.1.2.3/msmq\\private$\\orders", "to").path == "/msmq/private$/orders"
    assert parse_http_url("http://gw01/msmq/private$%5Corders", "to").path == "/msmq/private$/orders"
    assert check_http_url("  http://gw01/msmq/orders\r\n", "to") == "http://gw01/msmq/orders"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "/msmq/private$/orders",
        "gw01/msmq/orders",
        "ftp://gw01/msmq/orders",
        "MSMQ:MULTICAST=224.1.1.1:80",
        "http://",
        "http://gw01:port/msmq/orders",
        "http://gw01/a b",
        "http://gw01/a\tb",
        "http://gw01/\x00",
        "http://gw01/" + "x" * 3000,
        "http://[::1/msmq/orders",
    ],
)
def test_only_absolute_http_urls(text: str) -> None:
    with pytest.raises(SrmpError) as refused:
        parse_http_url(text, "<to>")
    assert refused.value.status == 400


@pytest.mark.parametrize(
    ("url", "directory", "kind", "name"),
    [
        ("http://gw01/msmq/private$/orders", "msmq", QueueKind.PRIVATE, "orders"),
        ("http://gw01/MSMQ/Private$/Orders", "MSMQ", QueueKind.PRIVATE, "Orders"),
        ("http://gw01/msmq/orders", "msmq", QueueKind.PUBLIC, "orders"),
        ("http://gw01/mq/private$/order_queue$", "mq", QueueKind.PRIVATE, "order_queue$"),
        ("http://gw01/msmq\\private$\\orders", "msmq", QueueKind.PRIVATE, "orders"),
    ],
)
def test_queue_path_of_a_destination(url: str, directory: str, kind: QueueKind, name: str) -> None:
    virtual_directory, path = queue_path_of(parse_http_url(url, "to"))
    assert (virtual_directory, path.kind, path.name) == (directory, kind, name)


@pytest.mark.parametrize(
    "url",
    [
        "http://gw01/",
        "http://gw01/orders",
        "http://gw01/msmq/private$/orders;journal",
        "http://gw01/msmq/private$/orders;poison",
        "http://gw01/msmq/system$;deadletter",
        "http://gw01/msmq/private$/a/b",
        "http://gw01/msmq/private$/..",
        "http://gw01/msmq/private$%2Forders%3Bjournal",
    ],
)
def test_paths_that_name_no_sendable_queue(url: str) -> None:
    with pytest.raises(SrmpError):
        queue_path_of(parse_http_url(url, "to"))
