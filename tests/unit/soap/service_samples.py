"""Request envelopes for the SOAP API codec tests, written as a hand-held client would."""

from __future__ import annotations

from soap.namespaces import SOAP_ENV
from soap.service import TARGET_NAMESPACE


def envelope(body: str, header: str = "", namespace: str = SOAP_ENV) -> bytes:
    head = f"<s:Header>{header}</s:Header>" if header else ""
    return (
        f'<s:Envelope xmlns:s="{namespace}" xmlns:gw="{TARGET_NAMESPACE}">{head}<s:Body>{body}</s:Body>'
        "</s:Envelope>"
    ).encode()


def operation(name: str, *children: str) -> bytes:
    """`<gw:{name}>` holding `children`, each `tag=text` or already XML."""
    inner = "".join(_child(child) for child in children)
    return envelope(f"<gw:{name}>{inner}</gw:{name}>")


def _child(child: str) -> str:
    if child.startswith("<"):
        return child
    tag, _, text = child.partition("=")
    return f"<gw:{tag}>{text}</gw:{tag}>"
