"""Queue addresses in SRMP: absolute http(s) URLs (reference §1.1, §8.4).

The codec checks that an address is an absolute http(s) URL and can split a destination URL
into the virtual directory and the queue path. Which host names are local, and alias or
redirection maps, are the receiving route's business.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from qm.errors import MqError
from qm.paths import QueuePath, parse_queue_path
from soap.errors import bad_request
from soap.namespaces import WHITESPACE

_DEFAULT_PORTS = {"http": 80, "https": 443}
_MAX_URL_LENGTH = 2048
_BLANK_OR_CONTROL = re.compile(r"[\x00- \x7f]")


@dataclass(frozen=True, slots=True)
class HttpUrl:
    """An absolute http(s) URL, normalised for matching: scheme and host lower case,
    port explicit, path percent-decoded once with `\\` turned into `/`."""

    scheme: str
    host: str
    port: int
    path: str
    query: str


def check_http_url(text: str, what: str) -> str:
    """The stripped text of an absolute http(s) URL, or SrmpError(400)."""
    stripped = text.strip(WHITESPACE)
    parse_http_url(stripped, what)
    return stripped


@functools.lru_cache(maxsize=256)
def parse_http_url(text: str, what: str) -> HttpUrl:
    """Remembered: a sender writes the same few queue and receipt URLs into every message (a
    refused URL raises, so only valid ones, at most 2 KB each, are kept)."""
    if len(text) > _MAX_URL_LENGTH or _BLANK_OR_CONTROL.search(text) is not None:
        raise bad_request(f"{what} {text[:80]!r} is not a URL (too long, blanks or control characters)")
    try:
        parts = urlsplit(text)
        host, port = parts.hostname, parts.port
        path = unquote(parts.path, errors="strict")
    except (ValueError, UnicodeDecodeError):
        raise bad_request(f"{what} {text[:80]!r} is not a URL") from None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not host:
        raise bad_request(f"{what} {text[:80]!r} is not an absolute http(s) URL")
    normalised = path.replace("\\", "/")
    return HttpUrl(scheme, host.lower(), port or _DEFAULT_PORTS[scheme], normalised, parts.query)


def queue_path_of(url: HttpUrl) -> tuple[str, QueuePath]:
    """`/msmq/private$/orders` -> (`msmq`, private queue `orders`); subqueues cannot be sent to."""
    segments = [segment for segment in url.path.split("/") if segment]
    if len(segments) < 2:
        raise bad_request(f"{url.path!r} names no queue under a virtual directory")
    virtual_directory, queue = segments[0], "/".join(segments[1:])
    if ";" in queue:
        raise bad_request(f"{queue!r}: subqueues, journals and system queues cannot be sent to")
    try:
        return virtual_directory, parse_queue_path(queue)
    except MqError as error:
        raise bad_request(error.detail) from None
