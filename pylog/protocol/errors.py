"""Kafka error codes by name, and the protocol codec's exceptions.

``ErrorCode`` is built from the generated table (``schema_gen.ERRORS``), so it
always matches the schemas the codec was generated from:
``ErrorCode.UNSUPPORTED_VERSION == 35``.
"""

from __future__ import annotations

from enum import IntEnum

from pylog.errors import ProtocolError
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


__all__ = ["ErrorCode", "ProtocolError", "UnsupportedVersionError", "error_name"]
