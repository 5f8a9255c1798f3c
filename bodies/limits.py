"""Bounds on the work one body may cost: bodies come from anonymous network senders."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class BodyLimits:
    """Each limit turns a body into `binary` with a reason, never into an exception or a stall."""

    max_body_bytes: int = 4 * 1024 * 1024
    """MSMQ's 4 MB message limit; larger bodies are not decoded at all."""
    max_records: int = 100_000
    """NRBF records in one stream."""
    max_items: int = 1_000_000
    """NRBF class members and array items in all, nulls of ObjectNullMultiple included."""
    max_depth: int = 64
    """Nesting of the decoded value (NRBF objects inside objects, XML elements)."""
    max_rank: int = 32
    """Dimensions of one NRBF array (.NET allows 32)."""
    max_output_chars: int = 16 * 1024 * 1024
    """Characters of strings written into the decoded value (a string referenced many times
    counts each time it is written)."""
    max_xml_elements: int = 100_000
    max_header_bytes: int = 64 * 1024
    """Extension bytes read for envelope headers."""


DEFAULT_BODY_LIMITS = BodyLimits()
