"""The WSDL 1.1 document of the SOAP API (SOAP 1.1, document/literal, wrapped), written from
the schema table; only the endpoint address varies (the host the client reached us by)."""

from __future__ import annotations

from xml.sax.saxutils import quoteattr

from soap.service.schema import (
    COMPLEX_TYPES,
    ENUMERATIONS,
    OPERATIONS,
    SERVICE_NAME,
    TARGET_NAMESPACE,
    Complex,
    Enumeration,
    Field,
    Operation,
)

WSDL = "http://schemas.xmlsoap.org/wsdl/"
WSDL_SOAP = "http://schemas.xmlsoap.org/wsdl/soap/"
XSD = "http://www.w3.org/2001/XMLSchema"
SOAP_HTTP = "http://schemas.xmlsoap.org/soap/http"
FAULT_NAME = "MqError"


def soap_action(operation: str) -> str:
    return f"{TARGET_NAMESPACE}#{operation}"


def wsdl_document(address: str) -> bytes:
    """The WSDL whose soap:address is `address` (e.g. http://gw01:8080/soap)."""
    lines = [
        '<?xml version="1.0" encoding="utf-8"?>',
        f'<wsdl:definitions xmlns:wsdl="{WSDL}" xmlns:soap="{WSDL_SOAP}" xmlns:xsd="{XSD}"',
        f'    xmlns:tns="{TARGET_NAMESPACE}" targetNamespace="{TARGET_NAMESPACE}" name="{SERVICE_NAME}">',
        "  <wsdl:documentation>msmq-gateway: MSMQ's queue manager over SOAP 1.1. Every fault's detail "
        "is an MqError element with MSMQ's error name and code.</wsdl:documentation>",
        *_types(),
        *_messages(),
        *_port_type(),
        *_binding(),
        f'  <wsdl:service name="{SERVICE_NAME}">',
        f'    <wsdl:port name="{SERVICE_NAME}Port" binding="tns:{SERVICE_NAME}Binding">',
        f"      <soap:address location={quoteattr(address)}/>",
        "    </wsdl:port>",
        "  </wsdl:service>",
        "</wsdl:definitions>",
    ]
    return ("\n".join(lines) + "\n").encode("utf-8")


def _types() -> list[str]:
    lines = [
        "  <wsdl:types>",
        # The schema declares its own prefixes: tools (and tests) read it on its own.
        f'    <xsd:schema xmlns:xsd="{XSD}" xmlns:tns="{TARGET_NAMESPACE}"',
        f'        targetNamespace="{TARGET_NAMESPACE}" elementFormDefault="qualified">',
    ]
    for enumeration in ENUMERATIONS:
        lines += _enumeration(enumeration)
    for complex_type in COMPLEX_TYPES:
        lines += _complex_type(complex_type.name, complex_type.fields)
    for operation in OPERATIONS:
        lines += _wrapper(operation.name, operation.input)
        lines += _wrapper(operation.response_name, operation.output)
    lines.append(f'      <xsd:element name="{FAULT_NAME}" type="tns:{FAULT_NAME}"/>')
    return [*lines, "    </xsd:schema>", "  </wsdl:types>"]


def _enumeration(enumeration: Enumeration) -> list[str]:
    return [
        f'      <xsd:simpleType name="{enumeration.name}">',
        '        <xsd:restriction base="xsd:string">',
        *(f'          <xsd:enumeration value="{value}"/>' for value in enumeration.values),
        "        </xsd:restriction>",
        "      </xsd:simpleType>",
    ]


def _complex_type(name: str, fields: tuple[Field, ...]) -> list[str]:
    if not fields:
        return [f'      <xsd:complexType name="{name}"><xsd:sequence/></xsd:complexType>']
    return [
        f'      <xsd:complexType name="{name}">',
        "        <xsd:sequence>",
        *(_element(field) for field in fields),
        "        </xsd:sequence>",
        "      </xsd:complexType>",
    ]


def _element(field: Field) -> str:
    kind = field.type
    type_name = f"tns:{kind.name}" if isinstance(kind, Complex | Enumeration) else f"xsd:{kind.xsd}"
    occurs = f' minOccurs="{int(field.required)}"' + (' maxOccurs="unbounded"' if field.repeated else "")
    if not field.doc:
        return f'          <xsd:element name="{field.name}" type="{type_name}"{occurs}/>'
    return (
        f'          <xsd:element name="{field.name}" type="{type_name}"{occurs}>'
        f"<xsd:annotation><xsd:documentation>{_text(field.doc)}</xsd:documentation></xsd:annotation>"
        "</xsd:element>"
    )


def _wrapper(name: str, fields: tuple[Field, ...]) -> list[str]:
    """Wrapped style: one element per request and response, named after the operation."""
    return [
        f'      <xsd:element name="{name}" type="tns:{name}Type"/>',
        *_complex_type(f"{name}Type", fields),
    ]


def _messages() -> list[str]:
    lines = []
    for name in [name for operation in OPERATIONS for name in (operation.name, operation.response_name)]:
        lines += [
            f'  <wsdl:message name="{name}">',
            f'    <wsdl:part name="parameters" element="tns:{name}"/>',
            "  </wsdl:message>",
        ]
    return [
        *lines,
        f'  <wsdl:message name="{FAULT_NAME}Fault">',
        f'    <wsdl:part name="detail" element="tns:{FAULT_NAME}"/>',
        "  </wsdl:message>",
    ]


def _port_type() -> list[str]:
    lines = [f'  <wsdl:portType name="{SERVICE_NAME}PortType">']
    for operation in OPERATIONS:
        lines += [
            f'    <wsdl:operation name="{operation.name}">',
            f"      <wsdl:documentation>{_text(operation.doc)}</wsdl:documentation>",
            f'      <wsdl:input message="tns:{operation.name}"/>',
            f'      <wsdl:output message="tns:{operation.response_name}"/>',
            f'      <wsdl:fault name="{FAULT_NAME}" message="tns:{FAULT_NAME}Fault"/>',
            "    </wsdl:operation>",
        ]
    return [*lines, "  </wsdl:portType>"]


def _binding() -> list[str]:
    lines = [
        f'  <wsdl:binding name="{SERVICE_NAME}Binding" type="tns:{SERVICE_NAME}PortType">',
        f'    <soap:binding style="document" transport="{SOAP_HTTP}"/>',
    ]
    for operation in OPERATIONS:
        lines += _bound_operation(operation)
    return [*lines, "  </wsdl:binding>"]


def _bound_operation(operation: Operation) -> list[str]:
    return [
        f'    <wsdl:operation name="{operation.name}">',
        f'      <soap:operation soapAction="{soap_action(operation.name)}" style="document"/>',
        '      <wsdl:input><soap:body use="literal"/></wsdl:input>',
        '      <wsdl:output><soap:body use="literal"/></wsdl:output>',
        f'      <wsdl:fault name="{FAULT_NAME}"><soap:fault name="{FAULT_NAME}" use="literal"/></wsdl:fault>',
        "    </wsdl:operation>",
    ]


def _text(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
