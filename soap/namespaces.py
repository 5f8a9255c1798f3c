"""Namespace URIs and fixed wire strings of SRMP (reference §1.2, §1.4)."""

from __future__ import annotations

SOAP_ENV = "http://schemas.xmlsoap.org/soap/envelope/"
"""SOAP 1.1: Envelope, Header, Body and the mustUnderstand attribute."""
SRMP = "http://schemas.xmlsoap.org/srmp/"
"""SRMP: properties, services, Stream, streamReceipt, deliveryReceipt, commitmentReceipt."""
WSRP = "http://schemas.xmlsoap.org/rp/"
"""WS-Routing: path, action, to, id, rev, via."""
MSMQ = "msmq.namespace.xml"
"""The MSMQ block (a bare relative string, not a URL)."""
XMLDSIG = "http://www.w3.org/2000/02/xmldsig#"
"""The XML-DSig draft namespace Windows uses for Signature."""

MUST_UNDERSTAND = f"{{{SOAP_ENV}}}mustUnderstand"

MULTIPART_RELATED = "multipart/related"
TEXT_XML = "text/xml"
OCTET_STREAM = "application/octet-stream"
SOAP_ACTION = '"MSMQMessage"'
BOUNDARY_PREFIX = "MSMQ - SOAP boundary, "
LABEL_PREFIX = "MSMQ:"
"""`<action>` carries the label after this prefix; a format name in `<via>` follows it too."""

BODY_CONTENT_ID = "body@"
EXTENSION_CONTENT_ID = "extension@"
ENVELOPE_CONTENT_ID = "envelope@"


def qname(namespace: str, local: str) -> str:
    """Clark notation, as lxml names elements: `{namespace}local`."""
    return f"{{{namespace}}}{local}"


WHITESPACE = " \t\r\n"
"""XML's (and HTTP's) white space; str.strip() alone would also strip Unicode spaces."""
