"""The hardened XML entry point (reference §1.7 step 4, §10)."""

from __future__ import annotations

import codecs

import pytest

from soap.errors import SrmpError
from soap.limits import Limits
from soap.xml import Children, leaf_text, parse_xml

SMALL = b'<e xmlns="urn:x"><a>1</a><b x="1"/></e>'


def refused(data: bytes, charset: str | None = None, limits: Limits | None = None) -> str:
    with pytest.raises(SrmpError) as error:
        parse_xml(data, charset, limits or Limits())
    assert error.value.status == 400
    return error.value.reason


def test_a_plain_document() -> None:
    root = parse_xml(SMALL)
    assert root.tag == "{urn:x}e"
    assert [child.tag for child in root] == ["{urn:x}a", "{urn:x}b"]


def test_declaration_comments_and_processing_instructions_before_the_root() -> None:
    root = parse_xml(b'<?xml version="1.0" ?>\r\n<!-- hi --><?pi x?>' + SMALL)
    assert root.tag == "{urn:x}e"


def test_a_declaration_naming_another_encoding_does_not_override_the_bytes() -> None:
    assert parse_xml('<?xml version="1.0" encoding="ISO-8859-1"?><e>é</e>'.encode()).text == "é"


def test_one_trailing_nul_and_white_space_are_dropped() -> None:
    assert parse_xml(SMALL + b"\r\n\x00").tag == "{urn:x}e"
    assert "well-formed" in refused(SMALL + b"\x00\x00")


@pytest.mark.parametrize(
    ("data", "charset"),
    [
        (codecs.BOM_UTF8 + "<e>é</e>".encode(), None),
        (codecs.BOM_UTF16_LE + "<e>é</e>".encode("utf-16-le"), None),
        (codecs.BOM_UTF16_BE + "<e>é</e>".encode("utf-16-be"), "utf-8"),
        ('<?xml version="1.0" encoding="UTF-16"?><e>é</e>'.encode("utf-16-le"), "UTF-16LE"),
        ("<e>é</e>".encode(), "Utf-8"),
    ],
)
def test_encodings(data: bytes, charset: str | None) -> None:
    assert parse_xml(data, charset).text == "é"


def test_undecodable_or_unknown_encodings_are_refused() -> None:
    assert "not valid utf-8" in refused(b"<e>\xff</e>")
    assert "charset" in refused(b"<e/>", "ebcdic")
    assert "not valid" in refused("<e>é</e>".encode("latin-1"), "us-ascii")


@pytest.mark.parametrize(
    "prolog",
    [
        b"<!DOCTYPE e>",
        b'<!DOCTYPE e [<!ENTITY a "aaaa">]>',
        b'<!DOCTYPE e SYSTEM "http://169.254.169.254/">',
        b'<?xml version="1.0"?><!-- c --><!DOCTYPE e>',
        b"<!ENTITY a 'x'>",
        b"<!ELEMENT e ANY>",
    ],
)
def test_any_dtd_is_refused_before_parsing(prolog: bytes) -> None:
    assert "DTD" in refused(prolog + b"<e>&a;</e>")


def test_a_dtd_hidden_behind_utf16_is_refused_too() -> None:
    data = codecs.BOM_UTF16_LE + '<!DOCTYPE e [<!ENTITY a "x">]><e>&a;</e>'.encode("utf-16-le")
    assert "DTD" in refused(data)


def test_undeclared_entities_are_errors_not_expansions() -> None:
    assert "well-formed" in refused(b"<e>&x;</e>")
    assert parse_xml(b"<e>&amp;&lt;&#233;</e>").text == "&<é"


def test_doctype_text_inside_the_document_is_only_text() -> None:
    root = parse_xml(b"<e><![CDATA[<!DOCTYPE html>]]><!-- <!DOCTYPE x> --></e>")
    assert root.text == "<!DOCTYPE html>"


@pytest.mark.parametrize(
    "data", [b"", b"   ", b"<e>", b"<e></f>", b"<?xml", b"<!-- never", b"<e/><f/>", b"text"]
)
def test_ill_formed_documents_are_refused(data: bytes) -> None:
    refused(data)


def test_size_depth_elements_attributes_and_namespaces_are_bounded() -> None:
    limits = Limits(
        max_envelope_bytes=1000, max_depth=4, max_elements=5, max_attributes=3, max_namespace_declarations=2
    )
    assert "larger than 1000" in refused(b"<e>" + b"x" * 1000 + b"</e>", limits=limits)
    assert "deeper than 4" in refused(b"<a>" * 5 + b"</a>" * 5, limits=limits)
    assert parse_xml(b"<a>" * 4 + b"</a>" * 4, limits=limits) is not None
    assert "more than 5 elements" in refused(b"<e>" + b"<x/>" * 5 + b"</e>", limits=limits)
    assert "more than 3 attributes" in refused(b'<e a="1" b="1" c="1" d="1"/>', limits=limits)
    assert "namespaces" in refused(b'<e xmlns="urn:a" xmlns:b="urn:b" xmlns:c="urn:c"/>', limits=limits)


def test_children_by_case_insensitive_local_name_in_one_namespace() -> None:
    root = parse_xml(b'<e xmlns="urn:x" xmlns:o="urn:o"><Stream> 7 </Stream><o:flag/><Flag/><other/></e>')
    children = Children(root, "urn:x", ("stream", "flag", "missing"))
    assert children.text("stream") == "7"
    assert children.text("stream", strip=False) == " 7 "
    assert children.flag("flag")
    assert children.text("missing") is None
    with pytest.raises(SrmpError, match="mandatory <missing>"):
        children.required_text("missing")


def test_children_may_not_repeat_or_hold_elements() -> None:
    root = parse_xml(b"<e><a>1</a><A>2</A></e>")
    with pytest.raises(SrmpError, match="twice"):
        Children(root, "", ("a",))
    Children(root, "", ("b",))
    with pytest.raises(SrmpError, match="text, not elements"):
        leaf_text(parse_xml(b"<e>x<b/>y</e>"))
    assert leaf_text(parse_xml(b"<e>x<!-- c -->y</e>")) == "xy"
