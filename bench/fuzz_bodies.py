"""`python -m bench.fuzz_bodies [--cases N] [--seed S]`: fuzz the body decoder.

Cases are mutations of the sample corpus (tests/bodies/samples: bytes flipped, inserted,
deleted, duplicated, lengths and counts set to extremes, records spliced from other samples)
and random bodies, each under a random or matching BodyType. It checks that no exception
escapes, that no internal error was caught by the decoder's safety net, that every answer
serializes as JSON, and prints the time and peak memory per body (max and p99).
"""

from __future__ import annotations

import argparse
import json
import random
import struct
import sys
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

from bodies import decode_body

SAMPLES = Path(__file__).resolve().parent.parent / "tests" / "bodies" / "samples"
BODY_TYPES = (0, 768, 8, 30, 31, 3, 5, 6, 7, 11, 72, 4113, 8209, 68, 69, 21, 14, 64)
INTERNAL = "could not be decoded ("
"""The reason the decoder gives when its safety net caught an unexpected exception (a bug)."""
_EXTREMES = (0, 1, 2, 255, 256, 0x7FFFFFFF, 0xFFFFFFFF, 0x80000000, 65536, 1_000_000)


def corpus() -> list[tuple[int, bytes, bytes]]:
    found = []
    for described in sorted(SAMPLES.glob("*.json")):
        body_type = json.loads(described.read_text(encoding="utf-8"))["body_type"]
        extension = described.with_suffix(".ext")
        found.append(
            (
                body_type,
                described.with_suffix(".bin").read_bytes(),
                extension.read_bytes() if extension.exists() else b"",
            )
        )
    return found


def mutate(data: bytes, other: bytes, rng: random.Random) -> bytes:
    """One to four mutations of the kinds that break length-driven readers."""
    body = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        choice = rng.randrange(8)
        at = rng.randrange(len(body) + 1)
        if choice == 0 and body:
            body[min(at, len(body) - 1)] ^= 1 << rng.randrange(8)
        elif choice == 1:
            body[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        elif choice == 2:
            del body[at : at + rng.randint(1, 16)]
        elif choice == 3 and len(body) >= 4:
            at = min(at, len(body) - 4)
            body[at : at + 4] = struct.pack("<I", rng.choice(_EXTREMES))
        elif choice == 4:
            body = body[:at]
        elif choice == 5 and other:
            start = rng.randrange(len(other))
            body[at:at] = other[start : start + rng.randint(1, 64)]
        elif choice == 6 and body:
            piece = body[at : at + rng.randint(1, 32)]
            body[at:at] = piece * rng.randint(1, 50)
        elif choice == 7 and body:
            body[min(at, len(body) - 1)] = rng.choice(
                (0, 1, 6, 7, 9, 10, 13, 14, 15, 16, 17, 21, 22, 0x80, 0xFF)
            )
    return bytes(body)


def cases(count: int, seed: int) -> Iterator[tuple[int, bytes, bytes]]:
    rng = random.Random(seed)
    samples = corpus()
    for index in range(count):
        body_type, body, extension = rng.choice(samples)
        kind = index % 10
        if kind < 7:
            body = mutate(body, rng.choice(samples)[1], rng)
        elif kind == 7:
            body = bytes(rng.randrange(256) for _ in range(rng.randint(0, 256)))
            body_type = rng.choice(BODY_TYPES)
        elif kind == 8:
            extension = mutate(extension or body, body, rng)
        else:
            body_type = rng.choice((*BODY_TYPES, rng.randrange(65536)))
        yield body_type, body, extension


def run(count: int, seed: int, measure_memory: bool = True) -> dict[str, float | int]:
    times: list[float] = []
    peaks: list[int] = []
    formats: dict[str, int] = {}
    internal = 0
    if measure_memory:
        tracemalloc.start()
    for body_type, body, extension in cases(count, seed):
        if measure_memory:
            tracemalloc.reset_peak()
            base = tracemalloc.get_traced_memory()[0]
        started = time.perf_counter()
        decoded = decode_body(body_type, body, extension)
        times.append(time.perf_counter() - started)
        if measure_memory:
            peaks.append(tracemalloc.get_traced_memory()[1] - base)
        json.dumps(decoded.as_json())
        formats[decoded.format] = formats.get(decoded.format, 0) + 1
        if decoded.reason and INTERNAL in decoded.reason:
            internal += 1
            print(
                f"internal error on BodyType {body_type}: {decoded.reason} {body[:64].hex()}", file=sys.stderr
            )
    if measure_memory:
        tracemalloc.stop()
    return _figures(count, times, peaks, formats, internal)


def _figures(
    count: int, times: list[float], peaks: list[int], formats: dict[str, int], internal: int
) -> dict[str, float | int]:
    times.sort()
    peaks.sort()
    p99 = max(0, int(count * 0.99) - 1)
    figures: dict[str, float | int] = {
        "cases": count,
        "internal_errors": internal,
        "time_max_ms": times[-1] * 1000,
        "time_p99_ms": times[p99] * 1000,
        "time_total_s": sum(times),
    }
    if peaks:
        figures |= {"memory_max_kib": peaks[-1] / 1024, "memory_p99_kib": peaks[p99] / 1024}
    return figures | {f"format_{name}": number for name, number in sorted(formats.items())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=20)
    arguments = parser.parse_args()
    started = time.perf_counter()
    figures = run(arguments.cases, arguments.seed)
    figures["wall_s"] = time.perf_counter() - started
    for name, value in figures.items():
        print(f"{name:>18}: {value:.3f}" if isinstance(value, float) else f"{name:>18}: {value}")
    if figures["internal_errors"]:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
