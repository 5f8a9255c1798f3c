"""The receiver algorithm of reference §1.7, steps 1-6: from HTTP body bytes to a typed envelope.

What needs more than the request (local host names, queue lookup, duplicate elimination,
stream state, storage) is the receiving route's, after `parse_request` has returned.
"""

from __future__ import annotations

from collections.abc import Sequence

from soap import namespaces as ns
from soap.envelope import SrmpEnvelope
from soap.errors import METHOD_NOT_ALLOWED, SrmpError, bad_request, too_large
from soap.headers import read_header_blocks
from soap.limits import DEFAULT_LIMITS, Limits
from soap.mime import (
    ContentType,
    MimePart,
    boundary_of,
    parse_content_type,
    split_multipart,
    strip_angle_brackets,
)
from soap.xml import parse_xml

_MAX_LENGTH_DIGITS = 19


def check_request_head(
    method: str, content_length: str | None, *, chunked: bool = False, limits: Limits = DEFAULT_LIMITS
) -> None:
    """Step 1, before any of the body is read: POST only, and a declared length within the cap.

    A chunked body has no declared length; the route must then stop reading at
    `limits.max_request_bytes` and answer 413 (vector m07 is refused from its header alone).
    """
    if method != "POST":
        raise SrmpError(METHOD_NOT_ALLOWED, f"{method[:16]!r}: SRMP messages are POSTed")
    if content_length is None:
        if not chunked:
            raise bad_request("an SRMP POST needs Content-Length or chunked transfer coding")
        return
    length = content_length.strip(ns.WHITESPACE)
    if not length.isascii() or not length.isdigit():
        raise bad_request(f"Content-Length {content_length[:24]!r} is not a byte count")
    if len(length) > _MAX_LENGTH_DIGITS or int(length) > limits.max_request_bytes:
        raise too_large(f"Content-Length {length[:24]} exceeds the limit of {limits.max_request_bytes} bytes")


def parse_request(body: bytes, content_type: str | None, limits: Limits = DEFAULT_LIMITS) -> SrmpEnvelope:
    """Steps 2-6: content type, MIME split, hardened XML, structure and field checks.

    Raises SrmpError carrying the status to answer (400, or 413 for an oversized body).
    """
    if len(body) > limits.max_request_bytes:
        raise too_large(f"the request body exceeds the limit of {limits.max_request_bytes} bytes")
    if content_type is None:
        raise bad_request("an SRMP POST needs a Content-Type")
    media = parse_content_type(content_type, limits)
    if media.media_type == ns.TEXT_XML:
        return _envelope(body, media.charset, {}, limits)
    if media.media_type != ns.MULTIPART_RELATED:
        raise bad_request(f"Content-Type {media.media_type!r} is neither multipart/related nor text/xml")
    parts = split_multipart(body, boundary_of(media), limits)
    root, root_type = _root_part(parts, media)
    return _envelope(root.payload, root_type.charset, _attachments(parts, root), limits)


def _root_part(parts: Sequence[MimePart], media: ContentType) -> tuple[MimePart, ContentType]:
    """The envelope and its content type: the part named by `start` (RFC 2387), else the first
    text/xml part."""
    start = media.parameters.get("start")
    if start is not None:
        wanted = strip_angle_brackets(start)
        named = [part for part in parts if part.content_id == wanted]
        if not named:
            raise bad_request(f"the start parameter names {wanted[:80]!r}, which is not among the parts")
        root = named[0]
        root_type = root.content_type
        if root_type is None or root_type.media_type != ns.TEXT_XML:
            raise bad_request("the start part of the multipart is not text/xml")
        return root, root_type
    for part in parts:
        part_type = part.content_type
        if part_type is not None and part_type.media_type == ns.TEXT_XML:
            return part, part_type
    raise bad_request("no text/xml part (SOAP envelope) in the multipart body")


def _attachments(parts: Sequence[MimePart], root: MimePart) -> dict[str, MimePart]:
    attachments: dict[str, MimePart] = {}
    for part in parts:
        content_id = part.content_id
        if part is root or not content_id:
            continue
        if content_id in attachments:
            raise bad_request(f"two MIME parts have the Content-Id {content_id[:80]!r}")
        attachments[content_id] = part
    return attachments


def _envelope(
    xml: bytes, charset: str | None, attachments: dict[str, MimePart], limits: Limits
) -> SrmpEnvelope:
    blocks = read_header_blocks(parse_xml(xml, charset, limits))
    for reference in blocks.references:
        if reference[4:] not in attachments:
            raise bad_request(f"the signature refers to {reference[:80]!r}, which is not among the parts")
    return SrmpEnvelope(
        path=blocks.path,
        properties=blocks.properties,
        services=blocks.services,
        stream=blocks.stream,
        stream_receipt=blocks.stream_receipt,
        delivery_receipt=blocks.delivery_receipt,
        commitment_receipt=blocks.commitment_receipt,
        msmq=blocks.msmq,
        signature_present=blocks.signature_present,
        body=_attachment(attachments, ns.BODY_CONTENT_ID),
        extension=_attachment(attachments, ns.EXTENSION_CONTENT_ID),
        envelope_xml=xml,
        ignored_headers=blocks.ignored_headers,
    )


def _attachment(attachments: dict[str, MimePart], prefix: str) -> bytes | None:
    """The payload of the part whose Content-Id starts with `prefix` (case-insensitive)."""
    found = [part for cid, part in attachments.items() if cid[: len(prefix)].lower() == prefix]
    if len(found) > 1:
        raise bad_request(f"more than one {prefix} MIME part")
    return found[0].payload if found else None
