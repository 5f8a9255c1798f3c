"""The outermost ASGI layer: what every request must pass before any other code sees it.

1. `Host` must be one of the gateway's names (421 Misdirected Request otherwise): a page that
   rebinds its own DNS name to 127.0.0.1 can then not read answers meant for local clients.
2. Unsafe methods from another site are refused (403): browsers name the page's site in
   `Sec-Fetch-Site` and its origin in `Origin`, and a web page could otherwise POST a purge
   to the gateway on the machine its browser runs on (a `text/plain` POST needs no pre-flight).
3. A request body must have the content type its endpoint reads (415): JSON on the REST API,
   `text/xml` on `/soap` (SRMP checks its own, answering as senders expect). Message sends
   take raw bodies of any type by design; the cross-site check covers them.
4. A body larger than its endpoint takes is refused with 413 before it is read: from
   `Content-Length`, or counted while a chunked body streams in. Administrative JSON bodies
   (queues, cursors, rules, triggers, settings) are capped here (MSMQGW_MAX_ADMIN_BODY_BYTES);
   sends, SOAP and SRMP check their own, larger, message caps the same way. An answer given
   before a chunked body ended closes the connection, so the rest is never read.

One pass over the request headers; a request that passes costs a few dictionary look-ups.
"""

from __future__ import annotations

from dataclasses import dataclass
from http import HTTPStatus

from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.errors import problem
from app.settings import Settings
from qm.errors import MqError, MqErrorCode

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_SAME_ORIGIN_FETCHES = frozenset({b"same-origin", b"none"})
"""`Sec-Fetch-Site` values of requests a page of another origin did not make (`none`: the
user typed the address or followed a bookmark). `same-site` is refused: another port of
`localhost` is the same site."""
_DEFAULT_PORTS = {"http": 80, "https": 443}
_UNSPECIFIED_ADDRESSES = frozenset({"", "0.0.0.0", "::"})

JSON_TYPES = ("application/json", "+json")
SOAP_TYPES = ("text/xml",)
IMPORT_TYPES = ("application/x-ndjson", "application/jsonl", "application/json")
"""An export file (JSON lines) as curl, the console and other tools label it; a form type is
not among them, so a cross-site form cannot post one either."""
CONNECTION_CLOSE = (b"connection", b"close")
_HOSTS_REMEMBERED = 256


def allowed_hosts(settings: Settings) -> frozenset[str] | None:
    """The names a request's `Host` may carry (lower case, IPv6 without brackets); None: any.

    MSMQGW_ALLOWED_HOSTS, plus the bind address and MSMQGW_LOCAL_HOST_NAMES (the names SRMP
    senders write in their URLs)."""
    listed = [name.strip() for name in settings.allowed_hosts.split(",") if name.strip()]
    if "*" in listed:
        return None
    names = {*listed, settings.host, *settings.local_host_names.split(",")}
    return frozenset(_bare_name(name) for name in names if _bare_name(name) not in _UNSPECIFIED_ADDRESSES)


def _bare_name(name: str) -> str:
    return name.strip().strip("[]").rstrip(".").lower()


def split_host(value: str) -> tuple[str, int | None]:
    """`name[:port]` or `[v6][:port]` -> (lower-case name without brackets, port or None)."""
    port: int | None = None
    if value.startswith("["):
        name, _, rest = value[1:].partition("]")
        if rest.startswith(":") and rest[1:].isdigit():
            port = int(rest[1:])
        elif rest:  # `[::1]evil.example`: no name of anyone
            return value.lower(), None
        return name.lower(), port
    name, colon, digits = value.rpartition(":")
    if colon and digits.isdigit() and ":" not in name:
        return name.rstrip(".").lower(), int(digits)
    return value.rstrip(".").lower(), None


def same_origin(origin: str, host: str, scheme: str) -> bool:
    """Whether `Origin` names the gateway as the request reached it (`Host`)."""
    origin_scheme, separator, authority = origin.partition("://")
    if not separator or origin_scheme.lower() not in _DEFAULT_PORTS:
        return False  # `null` (sandboxed or file pages) and anything else that is not a web origin
    origin_name, origin_port = split_host(authority)
    host_name, host_port = split_host(host)
    origin_port = origin_port or _DEFAULT_PORTS[origin_scheme.lower()]
    # A proxy terminating TLS forwards `Host` as the browser wrote it: no port means the
    # default one of the scheme the browser used.
    host_port = host_port or _DEFAULT_PORTS.get(origin_scheme.lower(), _DEFAULT_PORTS.get(scheme, 80))
    return origin_name == host_name and origin_port == host_port


def media_type(content_type: bytes) -> str:
    return content_type.split(b";", 1)[0].strip().decode("latin-1").lower()


def type_accepted(media: str, accepted: tuple[str, ...]) -> bool:
    return any(media == kind or (kind.startswith("+") and media.endswith(kind)) for kind in accepted)


@dataclass(slots=True)
class Head:
    """The request headers the checks read, found in one pass."""

    host: bytes | None = None
    origin: bytes | None = None
    fetch_site: bytes | None = None
    content_type: bytes | None = None
    content_length: int | None = None
    chunked: bool = False
    repeated: bytes | None = None
    """A header the checks read that came more than once: which of them would the application
    read? (Starlette takes the first, these checks took the last.)"""

    @classmethod
    def of(cls, scope: Scope) -> Head:
        head = cls()
        for key, value in scope["headers"]:
            if key == b"host":
                if head.host is not None:
                    head.repeated = key
                head.host = value
            elif key == b"origin":
                if head.origin is not None:
                    head.repeated = key
                head.origin = value
            elif key == b"sec-fetch-site":
                if head.fetch_site is not None:
                    head.repeated = key
                head.fetch_site = value
            elif key == b"content-type":
                if head.content_type is not None:
                    head.repeated = key
                head.content_type = value
            elif key == b"content-length" and value.strip().isdigit():
                head.content_length = int(value)
            elif key == b"transfer-encoding":
                head.chunked = True
        return head

    @property
    def has_body(self) -> bool:
        return self.chunked or bool(self.content_length)


class Edge:
    """ASGI middleware: the checks above, then the application."""

    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self._app = app
        self._hosts = allowed_hosts(settings)
        self._srmp_prefix = f"/{settings.srmp_virtual_directory.strip('/')}/".casefold()
        self._admin_limit = settings.max_admin_body_bytes
        self._host_verdicts: dict[bytes | None, bool] = {}
        """Whether a `Host` value names the gateway, per value seen: clients repeat theirs."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        head = Head.of(scope)
        refusal = self.refusal(scope, head)
        if refusal is not None:
            response = problem(*refusal)
            if head.has_body:  # not read: closing the connection is cheaper than draining it
                response.headers["connection"] = "close"
            await response(scope, receive, send)
            return
        if not head.chunked:
            await self._app(scope, receive, send)
            return
        body = ChunkedBody(receive)
        if self.accepted_types(scope) == JSON_TYPES:
            # FastAPI reads a JSON body whole, and turns any failure of that read into a 400:
            # take it here, up to the cap, and hand it on once it is known to fit.
            if not await body.read_up_to(self._admin_limit):
                await too_large(body.size, self._admin_limit)(scope, receive, send)
                return
        await self._app(scope, body.receive, body.closing(send))

    def refusal(self, scope: Scope, head: Head) -> tuple[MqError, HTTPStatus] | None:
        if head.repeated is not None:  # RFC 9110 7.2: more than one Host is a 400
            return _error(
                MqErrorCode.MQ_ERROR_INVALID_PARAMETER,
                f"the header {head.repeated.decode('latin-1')} appears more than once",
                HTTPStatus.BAD_REQUEST,
            )
        refusal = self.misdirected_or_cross_site(scope, head)
        if refusal is not None:
            return refusal
        unsafe = scope["method"] not in SAFE_METHODS
        over_admin_limit = (head.content_length or 0) > self._admin_limit
        if not (over_admin_limit or (unsafe and (head.content_type is not None or head.has_body))):
            return None  # most requests: nothing more to look at
        accepted = self.accepted_types(scope)
        if accepted == JSON_TYPES and over_admin_limit:
            return _too_large(head.content_length or 0, self._admin_limit)
        return self.unreadable_type(head, accepted) if unsafe else None

    def host_named(self, host: bytes | None) -> bool:
        verdict = self._host_verdicts.get(host)
        if verdict is None:
            if len(self._host_verdicts) >= _HOSTS_REMEMBERED:  # the values are the clients' choice
                self._host_verdicts.clear()
            name = split_host((host or b"").decode("latin-1"))[0]
            verdict = self._host_verdicts[host] = self._hosts is None or name in self._hosts
        return verdict

    def misdirected_or_cross_site(self, scope: Scope, head: Head) -> tuple[MqError, HTTPStatus] | None:
        host, origin, fetch_site = head.host, head.origin, head.fetch_site
        if not self.host_named(host):
            host_text = (host or b"").decode("latin-1")
            return _error(
                MqErrorCode.MQ_ERROR_ACCESS_DENIED,
                f"Host {host_text!r} is not a name of this gateway (MSMQGW_ALLOWED_HOSTS)",
                HTTPStatus.MISDIRECTED_REQUEST,
            )
        if scope["method"] in SAFE_METHODS:
            return None
        if fetch_site is not None and fetch_site.strip().lower() not in _SAME_ORIGIN_FETCHES:
            return _cross_site(f"Sec-Fetch-Site: {fetch_site.decode('latin-1')}")
        host_text = (host or b"").decode("latin-1")
        if origin is not None and not same_origin(origin.decode("latin-1"), host_text, scope["scheme"]):
            return _cross_site(f"Origin: {origin.decode('latin-1')}")
        return None

    def unreadable_type(
        self, head: Head, accepted: tuple[str, ...] | None
    ) -> tuple[MqError, HTTPStatus] | None:
        if head.content_type is None and not head.has_body:
            return None
        media = media_type(head.content_type or b"")
        if accepted is None or type_accepted(media, accepted):
            return None
        return _error(
            MqErrorCode.MQ_ERROR_INVALID_PARAMETER,
            f"a body of type {media or '(none)'!r} is not read here; send {' or '.join(accepted)}",
            HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
        )

    def accepted_types(self, scope: Scope) -> tuple[str, ...] | None:
        """The media types the endpoint reads; None: any (message sends take raw bodies)."""
        path: str = scope["path"]
        if _is_srmp(path, self._srmp_prefix):
            # The SRMP layer checks `multipart/related` or `text/xml` itself and answers 400
            # with no body, the one refusal a Windows sender does not retry (reference §1.7,
            # vector m05); a 415 would not be known to stop it.
            return None
        if path == "/soap":
            return SOAP_TYPES
        if scope["method"] == "POST" and path.startswith("/api/queues/"):
            if path.endswith("/messages"):
                return None
            if path.endswith("/messages/import"):  # capped by MSMQGW_MAX_IMPORT_BYTES in its route
                return IMPORT_TYPES
        return JSON_TYPES


def _is_srmp(target: str, prefix: str) -> bool:
    """As `app.routes.srmp.SrmpRequestTarget` takes them: any case, `\\` separators, absolute form."""
    if not target.startswith("/") and "://" in target:  # `http://host/msmq/...`
        target = "/" + target.split("://", 1)[1].partition("/")[2]
    return target.replace("\\", "/")[: len(prefix)].casefold() == prefix


class ChunkedBody:
    """A chunked request body: read ahead up to a cap, or passed on as it comes; an answer
    that starts before the body ended closes the connection (the rest is never read)."""

    def __init__(self, receive: Receive) -> None:
        self._receive = receive
        self._held: list[Message] = []
        self.size = 0
        self.ended = False

    async def read_up_to(self, limit: int) -> bool:
        """Read the whole body into memory if it has at most `limit` bytes; False if not."""
        while not self.ended:
            message = await self._receive()
            self._held.append(message)
            self._count(message)
            if self.size > limit:
                return False
        return True

    async def receive(self) -> Message:
        if self._held:
            return self._held.pop(0)
        message = await self._receive()
        self._count(message)
        return message

    def _count(self, message: Message) -> None:
        if message["type"] == "http.request":
            self.size += len(message.get("body", b""))
            self.ended = not message.get("more_body", False)
        else:  # http.disconnect
            self.ended = True

    def closing(self, send: Send) -> Send:
        async def send_closing(message: Message) -> None:
            if message["type"] == "http.response.start" and not self.ended:
                message = {**message, "headers": [*message.get("headers", ()), CONNECTION_CLOSE]}
            await send(message)

        return send_closing


def too_large(size: int, limit: int) -> Response:
    response = problem(*_too_large(size, limit))
    response.headers["connection"] = "close"  # the rest of the body is not read
    return response


def _too_large(size: int, limit: int) -> tuple[MqError, HTTPStatus]:
    return _error(
        MqErrorCode.MQ_ERROR_INSUFFICIENT_RESOURCES,
        f"the request body has {size} bytes or more; at most {limit} are accepted here",
        HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
    )


def _cross_site(evidence: str) -> tuple[MqError, HTTPStatus]:
    return _error(
        MqErrorCode.MQ_ERROR_ACCESS_DENIED,
        f"a request from another site's page is refused ({evidence})",
        HTTPStatus.FORBIDDEN,
    )


def _error(code: MqErrorCode, detail: str, status: HTTPStatus) -> tuple[MqError, HTTPStatus]:
    return MqError(code, detail), status
