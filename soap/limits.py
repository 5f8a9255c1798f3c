"""Bounds on everything a sender controls (reference §1.3 item 10, §1.7 steps 1-4, §10)."""

from __future__ import annotations

from dataclasses import dataclass

MESSAGE_SIZE_LIMIT = 4 * 1024 * 1024
"""MSMQ's 4 MB limit on a message body (reference §5.10)."""


@dataclass(frozen=True, slots=True)
class Limits:
    """Codec limits. The defaults follow the reference's recommendations."""

    max_request_bytes: int = MESSAGE_SIZE_LIMIT + 256 * 1024
    """Whole HTTP body; above it the answer is 413."""
    max_envelope_bytes: int = 1024 * 1024
    max_depth: int = 32
    max_elements: int = 10_000
    max_attributes: int = 64
    """Per element."""
    max_namespace_declarations: int = 64
    """In the whole envelope."""
    max_parts: int = 8
    max_part_header_bytes: int = 8192
    max_part_headers: int = 32
    max_content_type_length: int = 1024


DEFAULT_LIMITS = Limits()
