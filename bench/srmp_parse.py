"""`python -m bench.srmp_parse [--seconds S]`: SRMP parsing alone, envelopes per second on one core.

The requests are the suite's own (1 KB recoverable messages as Windows frames them); each is
parsed by `soap.parse_request` and mapped to message properties, which is all the receiver does
before the store. The baseline in the same run is lxml parsing the
same envelope XML with no checks, so the ratio says what the codec's hardening and mapping cost.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from datetime import UTC, datetime

from lxml import etree

from bench.requests import srmp_requests
from soap import TimerSettings, envelope_timers, message_properties, parse_request


def bodies() -> list[tuple[str, bytes]]:
    """`(content type, body)` of the requests the suite sends."""
    parsed = []
    for raw in srmp_requests(8080, "private$/orders", 200, True):
        head, _, body = raw.partition(b"\r\n\r\n")
        content_type = next(
            line.split(b":", 1)[1].strip().decode()
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-type:")
        )
        parsed.append((content_type, body))
    return parsed


def rate(work: Callable[[], int], seconds: float) -> float:
    done, started = 0, time.process_time()
    while time.process_time() - started < seconds:
        done += work()
    return done / (time.process_time() - started)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.srmp_parse", description=__doc__)
    parser.add_argument("--seconds", type=float, default=5.0, help="CPU seconds per measurement")
    arguments = parser.parse_args()
    requests = bodies()
    arrival = datetime.now(UTC)
    envelopes = [parse_request(body, content_type).envelope_xml for content_type, body in requests]

    def codec() -> int:
        for content_type, body in requests:
            envelope = parse_request(body, content_type)
            message_properties(envelope, envelope_timers(envelope, TimerSettings(), arrival))
        return len(requests)

    def plain_lxml() -> int:
        for xml in envelopes:
            etree.fromstring(xml)
        return len(envelopes)

    codec_rate, lxml_rate = rate(codec, arguments.seconds), rate(plain_lxml, arguments.seconds)
    size = sum(len(body) for _, body in requests) // len(requests)
    print(f"SRMP parse + property mapping: {codec_rate:,.0f} envelopes/s of CPU ({size} bytes each)")
    print(f"plain lxml parse of the envelopes: {lxml_rate:,.0f} envelopes/s of CPU")
    print(f"ratio codec / plain lxml: {codec_rate / lxml_rate:.2f}")


if __name__ == "__main__":
    main()
