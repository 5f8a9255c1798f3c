"""SOAP 1.1 faults of the SOAP API (SOAP 1.1 §4.4): who is to blame, and MSMQ's error."""

from __future__ import annotations

import enum

from qm.errors import MqError, MqErrorCode


class FaultCode(enum.Enum):
    """The faultcode values of SOAP 1.1 §4.4.1."""

    VERSION_MISMATCH = "VersionMismatch"
    """The envelope is not in the SOAP 1.1 namespace."""
    MUST_UNDERSTAND = "MustUnderstand"
    """A header block marked mustUnderstand="1" that this service does not know."""
    CLIENT = "Client"
    """The request is at fault: do not send it again unchanged."""
    SERVER = "Server"
    """The gateway or its store failed: the same request may succeed later."""


class ServiceFault(Exception):
    """A request answered with a fault carrying an MQ_ERROR code."""

    def __init__(self, fault_code: FaultCode, error: MqError) -> None:
        super().__init__(f"{fault_code.value}: {error}")
        self.fault_code = fault_code
        self.error = error


def client_fault(code: MqErrorCode, detail: str) -> ServiceFault:
    return ServiceFault(FaultCode.CLIENT, MqError(code, detail))
