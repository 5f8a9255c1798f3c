"""Message bodies people can read: BodyType/VARIANT values, XML and JSON, .NET binary
serialization ([MS-NRBF]) read without loading types, NServiceBus headers; and the bodies
.NET and COM receivers read (`bodies.encode`). Pure: no framework, no storage, bounded work."""

from bodies.decode import decode_body
from bodies.limits import DEFAULT_BODY_LIMITS, BodyLimits
from bodies.result import FORMATS, DecodedBody, Format

__all__ = ["DEFAULT_BODY_LIMITS", "FORMATS", "BodyLimits", "DecodedBody", "Format", "decode_body"]
