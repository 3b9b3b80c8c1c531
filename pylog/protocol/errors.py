"""Kafka error codes by name, the protocol codec's exceptions, and an
operation refused with a code (:class:`TopicError`).

``ErrorCode`` is built from the generated table (``schema_gen.ERRORS``), so it
always matches the schemas the codec was generated from:
``ErrorCode.UNSUPPORTED_VERSION == 35``.
"""

from __future__ import annotations

from enum import IntEnum

from pylog.errors import ProtocolError, PylogError
from pylog.protocol.schema_gen import ERRORS

ErrorCode = IntEnum("ErrorCode", [(name, code) for code, name in sorted(ERRORS.items())])
ErrorCode.__doc__ = "Kafka's error codes (``ErrorCode.NONE == 0``)."


def error_name(code: int) -> str:
    """The Kafka name of an error code; ``"UNKNOWN_<code>"`` for codes Kafka does not define."""
    return ERRORS.get(code, f"UNKNOWN_{code}")


class UnsupportedVersionError(ProtocolError):
    """A request or response version outside the API's valid versions.

    ``api_key`` and ``api_version`` say what was asked for; ``header`` is the
    decoded request header when the error came from ``decode_request`` (so a
    broker can answer UNSUPPORTED_VERSION to the right correlation id).
    """

    def __init__(self, api_key: int, api_version: int, header: object = None) -> None:
        super().__init__(f"unsupported version {api_version} of api key {api_key}")
        self.api_key = api_key
        self.api_version = api_version
        self.header = header


class TopicError(PylogError):
    """A topic operation refused with a Kafka error code (``code``) and the
    message the response carries.  Here, not with the topic registry, because
    the coordinators meet it too (their internal topics are created through
    the node) and must not depend on the server package."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


__all__ = ["ErrorCode", "ProtocolError", "TopicError", "UnsupportedVersionError", "error_name"]
