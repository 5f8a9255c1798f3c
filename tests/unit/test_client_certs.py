"""app.client_certs: a certificate's name as an RFC 4514 string, from what Python's ssl module
decodes (the TLS tests check the same strings against `openssl -nameopt RFC2253`)."""

from __future__ import annotations

import pytest

from app.client_certs import Name, escape_value, rfc4514


def test_the_last_rdn_comes_first_and_known_attributes_have_their_keywords() -> None:
    name: Name = (
        (("domainComponent", "net"),),
        (("domainComponent", "example"),),
        (("countryName", "US"),),
        (("stateOrProvinceName", "WA"),),
        (("localityName", "Redmond"),),
        (("organizationName", "Example"),),
        (("organizationalUnitName", "Servers"),),
        (("streetAddress", "1 Main St"),),
        (("userId", "w1"),),
        (("commonName", "winbox.example.net"),),
    )
    assert rfc4514(name) == (
        "CN=winbox.example.net,UID=w1,STREET=1 Main St,OU=Servers,O=Example,L=Redmond,ST=WA,C=US,"
        "DC=example,DC=net"
    )


def test_other_attributes_are_written_as_their_oid_and_rdns_may_have_several_values() -> None:
    name: Name = (
        (("organizationalUnitName", "Plant 4"), ("organizationalUnitName", "Servers")),
        (("emailAddress", "ops@example.net"), ("serialNumber", "42")),
        (("1.3.6.1.4.1.311.60.2.1.3", "US"),),  # unknown to OpenSSL: already dotted
    )
    assert rfc4514(name) == (
        "1.3.6.1.4.1.311.60.2.1.3=US,1.2.840.113549.1.9.1=ops@example.net+2.5.4.5=42,OU=Plant 4+OU=Servers"
    )


@pytest.mark.parametrize(
    ("value", "escaped"),
    [
        ("Example, Inc.", "Example\\, Inc."),
        ('a+b;c<d>e"f\\g', 'a\\+b\\;c\\<d\\>e\\"f\\\\g'),
        ("#1", "\\#1"),
        (" lead", "\\ lead"),
        ("trail ", "trail\\ "),
        (" ", "\\ "),
        ("a\0b", "a\\00b"),
        ("Zürich = ok", "Zürich = ok"),
        ("", ""),
    ],
)
def test_special_characters_are_escaped(value: str, escaped: str) -> None:
    assert escape_value(value) == escaped
