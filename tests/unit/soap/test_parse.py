"""The receiver algorithm, steps 1-6 (reference §1.7): what is accepted, what is refused and why."""

from __future__ import annotations

import pytest

from soap.envelope import SrmpEnvelope
from soap.errors import SrmpError
from soap.ids import DEFAULT_MESSAGE_ID
from soap.limits import Limits
from soap.parse import check_request_head, parse_request
from tests.unit.soap.srmp_samples import (
    GUID,
    MSMQ,
    MSMQ_CHILDREN,
    PATH,
    PROPERTIES,
    TO,
    envelope,
    msmq_with,
    multipart,
)


def parse(xml: str) -> SrmpEnvelope:
    return parse_request(xml.encode(), "text/xml; charset=utf-8")


def refused(xml: str, status: int = 400) -> str:
    with pytest.raises(SrmpError) as error:
        parse(xml)
    assert error.value.status == status
    return error.value.reason


def path_with(children: str) -> str:
    return f'<path xmlns="http://schemas.xmlsoap.org/rp/" se:mustUnderstand="1">{children}</path>'


ACTION_TO = f"<action>MSMQ:label</action><to>{TO}</to>"
ID = f"<id>uuid:7001@{GUID}</id>"


class TestRequestHead:
    def test_a_windows_post_passes(self) -> None:
        check_request_head("POST", "1153")
        check_request_head("POST", " 12 ")
        check_request_head("POST", None, chunked=True)
        check_request_head("POST", str(Limits().max_request_bytes))

    @pytest.mark.parametrize(
        ("method", "length", "status"),
        [
            ("GET", "0", 405),
            ("post", "10", 405),
            ("PUT", "10", 405),
            ("POST", None, 400),
            ("POST", "-1", 400),
            ("POST", "1e3", 400),
            ("POST", "\u0661\u0660", 400),
            ("POST", "9" * 40, 413),
            ("POST", "9999999999", 413),
            ("POST", str(Limits().max_request_bytes + 1), 413),
        ],
    )
    def test_refusals(self, method: str, length: str | None, status: int) -> None:
        with pytest.raises(SrmpError) as error:
            check_request_head(method, length)
        assert error.value.status == status


class TestContentType:
    def test_bare_text_xml(self) -> None:
        parsed = parse_request(envelope().encode(), "text/xml")
        assert parsed.body is None and parsed.extension is None
        assert parsed.envelope_xml == envelope().encode()

    @pytest.mark.parametrize(
        "content_type", [None, "application/soap+xml", "application/json", "multipart/mixed; boundary=B"]
    )
    def test_other_media_types_are_refused(self, content_type: str | None) -> None:
        with pytest.raises(SrmpError) as error:
            parse_request(envelope().encode(), content_type)
        assert error.value.status == 400

    def test_an_oversized_body_is_refused_with_413(self) -> None:
        with pytest.raises(SrmpError) as error:
            parse_request(envelope().encode(), "text/xml", Limits(max_request_bytes=100))
        assert error.value.status == 413


class TestStructure:
    def test_the_sample_parses(self) -> None:
        parsed = parse(envelope())
        assert parsed.path.label == "label"
        assert parsed.message_id.sequence == 7001
        assert parsed.msmq is not None and parsed.msmq.priority == 5

    @pytest.mark.parametrize(
        "xml",
        [
            "<Envelope/>",
            '<se:Envelope xmlns:se="http://www.w3.org/2003/05/soap-envelope"><se:Header/></se:Envelope>',
            '<se:Envelope xmlns:se="http://schemas.xmlsoap.org/soap/envelope/"><se:Body/></se:Envelope>',
            envelope().replace("<se:Body>", "<se:Header></se:Header><se:Body>"),
        ],
    )
    def test_the_envelope_and_one_header_are_required(self, xml: str) -> None:
        refused(xml)

    @pytest.mark.parametrize("value", ["1", "true", "false", " 1 ", ""])
    def test_unknown_must_understand_entries_are_refused(self, value: str) -> None:
        header = f'<X xmlns="urn:x" se:mustUnderstand="{value}"/>'
        assert "mustUnderstand" in refused(envelope(header))

    @pytest.mark.parametrize(
        "header", ['<X xmlns="urn:x" se:mustUnderstand="0"/>', '<X xmlns="urn:x"/>', "<inReplyTo/>"]
    )
    def test_unknown_optional_entries_are_ignored_and_listed(self, header: str) -> None:
        parsed = parse(envelope(header))
        assert len(parsed.ignored_headers) == 1

    def test_a_known_element_in_a_foreign_namespace_is_unknown(self) -> None:
        foreign_path = PATH.replace("http://schemas.xmlsoap.org/rp/", "urn:other")
        assert "mustUnderstand" in refused(envelope(path=foreign_path))

    def test_a_namespace_uri_with_a_brace_is_only_another_namespace(self) -> None:
        odd_path = PATH.replace("http://schemas.xmlsoap.org/rp/", "http://schemas.xmlsoap.org/rp}")
        assert "mustUnderstand" in refused(envelope(path=odd_path))
        odd_child = PATH.replace("<action>", '<action xmlns="urn:}x">')
        assert "mandatory <action>" in refused(envelope(path=odd_child))

    def test_block_names_compare_case_insensitively(self) -> None:
        stream = (
            f"<stream se:mustUnderstand='1'><StreamId>uid:{GUID}\\5</StreamId><CURRENT>2</CURRENT></stream>"
        )
        parsed = parse(
            envelope(stream, msmq=MSMQ.replace("<Class>", "<class>").replace("</Class>", "</class>"))
        )
        assert parsed.stream is not None and parsed.stream.current == 2

    @pytest.mark.parametrize("duplicate", [PROPERTIES, MSMQ, PATH, "<services/><SERVICES/>"])
    def test_a_block_may_occur_once(self, duplicate: str) -> None:
        assert "twice" in refused(envelope(duplicate))

    def test_a_child_may_occur_once(self) -> None:
        assert "twice" in refused(envelope(path=path_with(ACTION_TO + ID + ID)))


class TestPath:
    def test_label_is_what_follows_msmq(self) -> None:
        assert (
            parse(envelope(path=path_with(f"<action>msmq:x &amp; y</action><to>{TO}</to>{ID}"))).path.label
            == "x & y"
        )
        assert parse(envelope(path=path_with(f"<action>order</action><to>{TO}</to>{ID}"))).path.label == ""
        assert parse(envelope(path=path_with(f"<action/><to>{TO}</to>{ID}"))).path.label == ""

    def test_label_length_counts_utf16_units(self) -> None:
        for label, fits in (
            ("x" * 249, True),
            ("x" * 250, False),
            ("\U0001f600" * 124 + "x", True),
            ("\U0001f600" * 125, False),
        ):
            xml = envelope(path=path_with(f"<action>MSMQ:{label}</action><to>{TO}</to>{ID}"))
            if fits:
                assert parse(xml).path.label == label
            else:
                assert "longer than 249" in refused(xml)

    @pytest.mark.parametrize(
        "children",
        [
            f"<to>{TO}</to>{ID}",
            f"<action>MSMQ:x</action>{ID}",
            f"<action>MSMQ:x</action><to>/msmq/private$/orders</to>{ID}",
            f"<action>MSMQ:x</action><to>ftp://gw01/msmq/orders</to>{ID}",
            f"<action>MSMQ:x</action><to>MSMQ:MULTICAST=224.1.1.1:80</to>{ID}",
            f"<action>MSMQ:x</action><to>http://gw01/a b</to>{ID}",
            f"<action>MSMQ:x</action><to>http://gw01:99999/msmq/orders</to>{ID}",
            f"<action>MSMQ:x</action><to>http:///msmq/orders</to>{ID}",
            f"<action>MSMQ:x</action><to><b/></to>{ID}",
            ACTION_TO,
            ACTION_TO + "<id>uuid:x@y</id>",
        ],
    )
    def test_mandatory_children_and_their_forms(self, children: str) -> None:
        refused(envelope(path=path_with(children)))

    def test_without_msmq_the_id_is_ignored(self) -> None:
        for children in (ACTION_TO, ACTION_TO + "<id>garbage</id>", ACTION_TO + ID):
            parsed = parse(envelope(path=path_with(children), msmq=None))
            assert parsed.message_id == DEFAULT_MESSAGE_ID

    @pytest.mark.parametrize(
        ("via", "expected"),
        [
            ("<via>http://wks/msmq/private$/replies</via>", "http://wks/msmq/private$/replies"),
            (
                "<via>MSMQ:PUBLIC=5b0c7e1a-2f3d-4c8e-9a61-0d4f2b7c8e93</via>",
                "MSMQ:PUBLIC=5b0c7e1a-2f3d-4c8e-9a61-0d4f2b7c8e93",
            ),
            ("<via/>", None),
            ("<via></via>", None),
            ("<via> </via>", None),
        ],
    )
    def test_response_queue_forms(self, via: str, expected: str | None) -> None:
        assert parse(envelope(path=path_with(ACTION_TO + ID + f"<rev>{via}</rev>"))).path.rev_via == expected

    @pytest.mark.parametrize(
        "rev",
        [
            "<rev/>",
            "<rev><via/><via/></rev>",
            "<rev><via>ftp://x/y</via></rev>",
            "<rev><via>MSMQ:</via></rev>",
        ],
    )
    def test_malformed_rev_is_refused(self, rev: str) -> None:
        refused(envelope(path=path_with(ACTION_TO + ID + rev)))


class TestProperties:
    def test_sent_at_is_optional(self) -> None:
        parsed = parse(envelope(properties="<properties><expiresAt>20240315T081500</expiresAt></properties>"))
        assert parsed.properties.sent_at is None

    def test_duration_stands_for_expires_at(self) -> None:
        properties = "<properties><sentAt>20240311T081500</sentAt><duration>P1D</duration></properties>"
        assert parse(envelope(properties=properties)).properties.expires_at.text == "20240312T081500"

    @pytest.mark.parametrize(
        "properties",
        [
            "<properties><duration>P1D</duration></properties>",
            "<properties><sentAt>20240311T081500</sentAt><duration>1 day</duration></properties>",
            "<properties><expiresAt>tomorrow</expiresAt></properties>",
            "<properties><expiresAt>20240315T081500</expiresAt><sentAt>2024</sentAt></properties>",
        ],
    )
    def test_malformed_properties_are_refused(self, properties: str) -> None:
        refused(envelope(properties=properties))


class TestMsmq:
    @pytest.mark.parametrize("name", ["Class", "Priority", "BodyType", "SourceQmGuid", "TTrq"])
    def test_mandatory_children(self, name: str) -> None:
        children = MSMQ_CHILDREN.split(f"<{name}>")[0] + MSMQ_CHILDREN.split(f"</{name}>")[1]
        assert name.lower() in refused(envelope(msmq=msmq_with(children)))

    @pytest.mark.parametrize(
        ("old", "new"),
        [
            ("<Class>0</Class>", "<Class>3</Class>"),
            ("<Class>0</Class>", "<Class>65536</Class>"),
            ("<Priority>5</Priority>", "<Priority>8</Priority>"),
            ("<Priority>5</Priority>", "<Priority>-1</Priority>"),
            ("<BodyType>0</BodyType>", "<BodyType>65536</BodyType>"),
            ("<App>0</App>", "<App>4294967296</App>"),
            ("<SourceQmGuid>", "<SourceQmGuid>{"),
            ("<Correlation>AAAAAAAAAAAAAAAAAAAAAAAAAAA=", "<Correlation>AAAA"),
            ("<TTrq>20380119T031407", "<TTrq>20380119T"),
        ],
    )
    def test_values_out_of_range(self, old: str, new: str) -> None:
        refused(envelope(msmq=MSMQ.replace(old, new)))

    def test_defined_classes_including_http_nacks(self) -> None:
        for value in (255, 0x4000, 0xC004, 0xA190):
            assert (
                parse(envelope(msmq=MSMQ.replace("<Class>0</Class>", f"<Class>{value}</Class>"))).msmq
                is not None
            )

    def test_optional_children(self) -> None:
        extra = (
            "<Trace/><ConnectorType>"
            + GUID
            + "</ConnectorType><Eod><First/><Last/><xConnectorId>"
            + GUID
            + "</xConnectorId></Eod><Provider><Type>1</Type><Name>Microsoft Base</Name></Provider>"
            "<DestinationMqf>DIRECT=OS:a\\q  PUBLIC="
            + GUID
            + "</DestinationMqf><AdminMqf>DIRECT=OS:b\\q</AdminMqf>"
        )
        msmq = parse(envelope(msmq=msmq_with(MSMQ_CHILDREN + extra))).msmq
        assert msmq is not None and msmq.trace and msmq.eod is not None
        assert (msmq.eod.first, msmq.eod.last, str(msmq.eod.connector_id)) == (True, True, GUID)
        assert msmq.provider is not None and msmq.provider.name == "Microsoft Base"
        assert msmq.destination_mqf == ("DIRECT=OS:a\\q", "PUBLIC=" + GUID)
        assert msmq.admin_mqf == ("DIRECT=OS:b\\q",) and msmq.response_mqf == ()


class TestServicesAndStream:
    def test_receipt_requests(self) -> None:
        services = (
            "<services><durable/><deliveryReceiptRequest><sendTo>http://a/q</sendTo></deliveryReceiptRequest>"
            "<commitmentReceiptRequest><sendTo>http://a/q</sendTo><negativeOnly/></commitmentReceiptRequest></services>"
        )
        parsed = parse(envelope(services)).services
        assert parsed is not None and parsed.durable
        assert (parsed.delivery_receipt_to, parsed.commitment_positive, parsed.commitment_negative) == (
            "http://a/q",
            False,
            True,
        )

    @pytest.mark.parametrize(
        "services",
        [
            "<services><deliveryReceiptRequest/></services>",
            "<services><commitmentReceiptRequest><sendTo>mailto:x</sendTo></commitmentReceiptRequest></services>",
        ],
    )
    def test_send_to_is_an_http_url(self, services: str) -> None:
        refused(envelope(services))

    def test_stream_children(self) -> None:
        stream = (
            f"<Stream><streamId>uri:{GUID}\\9</streamId><current>1</current><previous>0</previous><start>"
            "<sendReceiptsTo>http://w/msmq/private$/order_queue$</sendReceiptsTo><expiresAt>20240312T000000</expiresAt>"
            "</start><streamReceiptRequest/><end/></Stream>"
        )
        parsed = parse(envelope(stream)).stream
        assert parsed is not None
        assert (parsed.current, parsed.previous, parsed.receipt_requested, parsed.end) == (1, 0, True, True)
        assert (
            parsed.start_expires_at is not None
            and parsed.send_receipts_to == "http://w/msmq/private$/order_queue$"
        )

    @pytest.mark.parametrize(
        "stream",
        [
            f"<Stream><streamId>uid:{GUID}\\9</streamId><current>0</current></Stream>",
            f"<Stream><streamId>uid:{GUID}\\9</streamId></Stream>",
            "<Stream><current>1</current></Stream>",
            f"<Stream><streamId>uid:{GUID}\\9</streamId><current>1</current><start/></Stream>",
            f"<Stream><streamId>uid:{GUID}\\9</streamId><current>4294967296</current></Stream>",
        ],
    )
    def test_malformed_streams_are_refused(self, stream: str) -> None:
        refused(envelope(stream))

    def test_commitment_receipt(self) -> None:
        receipt = (
            f"<commitmentReceipt><decidedAt>20240311T090000</decidedAt><decision>Negative</decision>"
            f"<id>uuid:5@{GUID}</id><commitmentCode>0xC002</commitmentCode></commitmentReceipt>"
        )
        parsed = parse(envelope(receipt)).commitment_receipt
        assert parsed is not None and not parsed.positive and parsed.commitment_code == "0xC002"
        assert "decision" in refused(envelope(receipt.replace("Negative", "maybe")))


class TestAttachments:
    def test_parts_by_content_id_prefix(self) -> None:
        content_type, body = multipart(
            envelope().encode(), ("<Body@x>", b"B"), ("EXTENSION@x", b"E"), ("other@x", b"O")
        )
        parsed = parse_request(body, content_type)
        assert (parsed.body, parsed.extension) == (b"B", b"E")

    def test_envelope_only_and_empty_body(self) -> None:
        content_type, body = multipart(envelope().encode())
        assert parse_request(body, content_type).body is None
        content_type, body = multipart(envelope().encode(), ("body@x", b""))
        assert parse_request(body, content_type).body == b""

    @pytest.mark.parametrize(
        "parts",
        [
            (("body@x", b"1"), ("body@y", b"2")),
            (("body@x", b"1"), ("body@x", b"2")),
        ],
    )
    def test_duplicate_parts_are_refused(self, parts: tuple[tuple[str, bytes], ...]) -> None:
        content_type, body = multipart(envelope().encode(), *parts)
        with pytest.raises(SrmpError):
            parse_request(body, content_type)

    def test_no_envelope_part(self) -> None:
        content_type, body = multipart(b"not xml", boundary="B")
        body = body.replace(b"text/xml", b"text/plain")
        with pytest.raises(SrmpError, match="no text/xml part"):
            parse_request(body, content_type)

    def test_the_start_parameter_names_the_envelope(self) -> None:
        content_type, body = multipart(envelope().encode(), ("body@x", b"B"))
        body = body.replace(b"charset=UTF-8\r\n", b"charset=UTF-8\r\nContent-Id: <envelope@x>\r\n", 1)
        assert parse_request(body, content_type + '; start="<envelope@x>"').body == b"B"
        with pytest.raises(SrmpError, match="not among the parts"):
            parse_request(body, content_type + '; start="<missing@x>"')
        with pytest.raises(SrmpError, match="not text/xml"):
            parse_request(body, content_type + "; start=body@x")

    def test_signature_references_must_name_parts(self) -> None:
        signature = (
            '<Signature xmlns="http://www.w3.org/2000/02/xmldsig#"><SignedInfo>'
            '<Reference URI="cid:body@x"/><Reference URI="#local"/></SignedInfo></Signature>'
        )
        content_type, body = multipart(envelope(signature).encode(), ("body@x", b"B"))
        assert parse_request(body, content_type).signature_present
        content_type, body = multipart(envelope(signature).encode())
        with pytest.raises(SrmpError, match="signature refers to 'cid:body@x'"):
            parse_request(body, content_type)

    def test_utf16_envelope_part(self) -> None:
        xml = envelope().encode("utf-16-le")
        content_type, body = multipart(xml, ("body@x", b"B"))
        body = body.replace(b"charset=UTF-8", b"charset=UTF-16LE")
        assert parse_request(body, content_type).path.label == "label"
