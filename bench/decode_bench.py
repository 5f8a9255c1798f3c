"""The body decoder's throughput on one core: 4 KB bodies of the three kinds senders use most."""

from __future__ import annotations

import time
from typing import Any

from bodies import decode_body
from bodies.variant import VT_BINARY_OBJECT, VT_BSTR
from tests.bodies import nrbf_builder as nb

SIZE = 4096


def xml_body() -> bytes:
    line = "  <Line><Sku>widget-{0:04d}</Sku><Quantity>{0}</Quantity></Line>\r\n"
    document = '<?xml version="1.0"?>\r\n<Order xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">\r\n'
    index = 0
    while len(document) < SIZE - 10:
        document += line.format(index)
        index += 1
    return (document + "</Order>").encode()


def nrbf_body() -> bytes:
    """Shop.Line objects (a string and an Int32 each) in an object array, about 4 KB."""
    line = [("Sku", nb.STRING, b""), ("Quantity", nb.PRIMITIVE, bytes((nb.INT32,)))]
    count = 150
    records = nb.header() + nb.library(2, "Shop") + nb.array_single_object(1, count)
    records += (
        nb.class_with_members_and_types(3, "Shop.Line", line, 2) + nb.string(4, "widget-0000") + nb.i32(0)
    )
    for index in range(1, count):
        records += (
            nb.class_with_id(10 + 2 * index, 3) + nb.string(11 + 2 * index, f"w-{index:05d}") + nb.i32(index)
        )
    return records + nb.END


def bodies() -> dict[str, tuple[int, bytes]]:
    return {
        "XML": (0, xml_body()),
        "NRBF": (VT_BINARY_OBJECT, nrbf_body()),
        "VT_BSTR": (VT_BSTR, ("Grüße aus Köln. " * 128)[: SIZE // 2].encode("utf-16-le")),
    }


def decode_rows(seconds: float) -> list[dict[str, Any]]:
    rows = []
    for name, (body_type, body) in bodies().items():
        assert decode_body(body_type, body).format != "binary", name
        count, started = 0, time.process_time()
        while (elapsed := time.process_time() - started) < seconds:
            for _ in range(100):
                decode_body(body_type, body)
            count += 100
        rows.append(
            {
                "scenario": f"decode 4 KB {name} (one core)",
                "messages": count,
                "per_s": round(count / elapsed, 1),
                "mb_per_s": round(count * len(body) / elapsed / 1e6, 1),
                "body_bytes": len(body),
            }
        )
    return rows


if __name__ == "__main__":
    for row in decode_rows(2.0):
        print(row)
