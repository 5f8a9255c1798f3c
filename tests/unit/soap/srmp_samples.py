"""Envelopes written by hand for the codec's unit tests (Windows shape, parts replaceable)."""

from __future__ import annotations

SOAP = "http://schemas.xmlsoap.org/soap/envelope/"
GUID = "5b0c7e1a-2f3d-4c8e-9a61-0d4f2b7c8e93"
TO = "http://gw01.example.net/msmq/private$/orders"
PATH = (
    '<path xmlns="http://schemas.xmlsoap.org/rp/" se:mustUnderstand="1"><action>MSMQ:label</action>'
    f"<to>{TO}</to><id>uuid:7001@{GUID}</id></path>"
)
PROPERTIES = (
    '<properties se:mustUnderstand="1"><expiresAt>20240315T081500</expiresAt>'
    "<sentAt>20240311T081500</sentAt></properties>"
)
MSMQ_CHILDREN = (
    "<Class>0</Class><Priority>5</Priority><Correlation>AAAAAAAAAAAAAAAAAAAAAAAAAAA=</Correlation>"
    f"<App>0</App><BodyType>0</BodyType><HashAlgorithm>32772</HashAlgorithm><SourceQmGuid>{GUID}</SourceQmGuid>"
    "<TTrq>20380119T031407</TTrq>"
)
MSMQ = f'<Msmq xmlns="msmq.namespace.xml">{MSMQ_CHILDREN}</Msmq>'


def envelope(*headers: str, path: str = PATH, properties: str = PROPERTIES, msmq: str | None = MSMQ) -> str:
    """A compact envelope; `headers` go between `<properties>` and `<Msmq>`."""
    blocks = path + properties + "".join(headers) + (msmq or "")
    return (
        f'<se:Envelope xmlns:se="{SOAP}" xmlns="http://schemas.xmlsoap.org/srmp/">'
        f"<se:Header>{blocks}</se:Header><se:Body></se:Body></se:Envelope>"
    )


def msmq_with(children: str) -> str:
    return f'<Msmq xmlns="msmq.namespace.xml">{children}</Msmq>'


def multipart(xml: bytes, *parts: tuple[str, bytes], boundary: str = "B") -> tuple[str, bytes]:
    """`(content type, body)` in Windows framing; `parts` are (Content-Id, payload)."""
    delimiter = b"--" + boundary.encode()
    body = (
        delimiter
        + b"\r\nContent-Type: text/xml; charset=UTF-8\r\nContent-Length: %d\r\n\r\n" % len(xml)
        + xml
    )
    for content_id, payload in parts:
        headers = b"Content-Type: application/octet-stream\r\nContent-Length: %d\r\n" % len(payload)
        body += delimiter + b"\r\n" + headers + b"Content-Id: " + content_id.encode() + b"\r\n\r\n" + payload
    return f'multipart/related; boundary="{boundary}"; type=text/xml', body + delimiter + b"--\r\n"
