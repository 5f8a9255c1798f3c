"""TLS client certificates as principals: the certificate the handshake verified (against
MSMQGW_TLS_CLIENT_CA_FILE), read once per connection by the HTTP protocol and put in each
request's scope; its subject and issuer (RFC 4514 strings) map to a principal.

Only the protocol writes the scope keys below, from the TLS connection itself: no header of the
request can name a certificate. A mapping is found by subject *and* issuer, compared exactly:
the subject alone is a name any trusted CA could write into a certificate, and a fingerprint
would break at every renewal (Windows renews machine certificates by itself).
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from starlette.types import Scope

from qm.access import (
    AccessRepository,
    CertificateMapping,
    check_distinguished_name,
    check_provable_principal,
)

CLIENT_CERTIFICATE = "msmq.client_certificate"
"""Scope key: the ClientCertificate of the connection, absent without one."""

_KEYWORDS = {
    "commonName": "CN",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "countryName": "C",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}
"""RFC 4514 section 3's keywords, by the names Python's ssl module gives the attributes."""
_OIDS = {
    "emailAddress": "1.2.840.113549.1.9.1",
    "serialNumber": "2.5.4.5",
    "surname": "2.5.4.4",
    "title": "2.5.4.12",
    "businessCategory": "2.5.4.15",
    "postalCode": "2.5.4.17",
    "name": "2.5.4.41",
    "givenName": "2.5.4.42",
    "initials": "2.5.4.43",
    "generationQualifier": "2.5.4.44",
    "dnQualifier": "2.5.4.46",
    "pseudonym": "2.5.4.65",
    "organizationIdentifier": "2.5.4.97",
}
"""Other attributes are written as their dotted OID (RFC 4514 section 2.3)."""
_TLS_VERSIONS = {"TLSv1": 0x0301, "TLSv1.1": 0x0302, "TLSv1.2": 0x0303, "TLSv1.3": 0x0304}

Name = tuple[tuple[tuple[str, str], ...], ...]
"""A name as `SSLSocket.getpeercert()` gives it: RDNs in certificate order, each (type, value)s."""


@dataclass(frozen=True, slots=True)
class ClientCertificate:
    subject: str
    issuer: str


def rfc4514(name: Name) -> str:
    """The RFC 4514 string of a name: the last RDN first, `+` within a multi-valued RDN."""
    return ",".join(
        "+".join(f"{_attribute_type(kind)}={escape_value(value)}" for kind, value in rdn)
        for rdn in reversed(name)
    )


def _attribute_type(kind: str) -> str:
    return _KEYWORDS.get(kind) or _OIDS.get(kind) or kind


def escape_value(value: str) -> str:
    """RFC 4514 section 2.4: the special characters escaped, and a leading `#` or space and a
    trailing space."""
    escaped = [f"\\{char}" if char in '"+,;<>\\' else ("\\00" if char == "\0" else char) for char in value]
    if escaped and value[0] in "# ":
        escaped[0] = "\\" + escaped[0]
    if len(escaped) > 1 and value[-1] == " ":
        escaped[-1] = "\\ "
    return "".join(escaped)


def peer_certificate(ssl_object: ssl.SSLObject | None) -> ClientCertificate | None:
    """The client certificate the handshake verified; None without TLS or without a certificate.
    `getpeercert()` gives the decoded certificate only when it was verified (else {} or None)."""
    if ssl_object is None:
        return None
    decoded: dict[str, Any] | None = ssl_object.getpeercert()
    if not decoded or "subject" not in decoded:
        return None
    return ClientCertificate(rfc4514(decoded["subject"]), rfc4514(decoded.get("issuer", ())))


def tls_extension(ssl_object: ssl.SSLObject, certificate: ClientCertificate | None) -> dict[str, Any]:
    """The ASGI TLS extension's `scope["extensions"]["tls"]` for this connection."""
    der = ssl_object.getpeercert(binary_form=True) if certificate is not None else None
    return {
        "server_cert": None,
        "client_cert_chain": [ssl.DER_cert_to_PEM_cert(der)] if der else [],
        "client_cert_name": certificate.subject if certificate is not None else None,
        "client_cert_error": None,
        "tls_version": _TLS_VERSIONS.get(ssl_object.version() or ""),
        "cipher_suite": None,
    }


def client_certificate(scope: Scope) -> ClientCertificate | None:
    found: ClientCertificate | None = scope.get(CLIENT_CERTIFICATE)
    return found


class CertificateMapper:
    """Certificate -> principal (or None: not mapped), remembered for `ttl_s` either way, so
    that a request after the first reads nothing: a mapping deleted through another gateway
    process stops working within that time, through this one at once (`forget`)."""

    def __init__(
        self, store: AccessRepository, ttl_s: float, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        self._store = store
        self._ttl_s = ttl_s
        self._monotonic = monotonic
        self._mapped: dict[ClientCertificate, tuple[float, str | None]] = {}

    async def principal_for(self, certificate: ClientCertificate) -> str | None:
        now = self._monotonic()
        remembered = self._mapped.get(certificate)
        if remembered is not None and remembered[0] > now:
            return remembered[1]
        found = await self._store.find_certificate(certificate.subject, certificate.issuer)
        if len(self._mapped) >= 4096:  # certificates are the CA's to issue: bounded all the same
            self._mapped.clear()
        principal = None if found is None else found.principal
        self._mapped[certificate] = (now + self._ttl_s, principal)
        return principal

    def forget(self) -> None:
        self._mapped.clear()


async def map_certificate(
    store: AccessRepository, subject: str, issuer: str, principal: str, description: str, now: Any
) -> CertificateMapping:
    """A new mapping (its principal created if new); the names are checked, not parsed. Never to
    a built-in principal (check_provable_principal)."""
    mapping = CertificateMapping(
        check_distinguished_name(subject, "subject"),
        check_distinguished_name(issuer, "issuer"),
        check_provable_principal(principal),
        description,
        now,
    )
    await store.ensure_principal(mapping.principal, "", now)
    return await store.add_certificate(mapping)
