"""Exceptions shared by pylog's codecs.

Native modules raise these too, so a caller catches one family whichever
implementation (native or pure Python) is in use.
"""

from __future__ import annotations


class PylogError(Exception):
    """Base of every pylog error."""


class CodecError(PylogError, ValueError):
    """Bytes that do not decode: truncated, over-long, out of range."""


class VarintError(CodecError):
    """A truncated or over-long varint."""


class CorruptBatchError(CodecError):
    """A record batch failed a check.

    ``batch_index`` is the 0-based index of the failing batch in the buffer,
    ``position`` its byte offset in the buffer, and ``check`` the name of the
    check that failed (``"size"``, ``"magic"``, ``"crc"``, ``"record_count"``,
    ...); the message says what was expected and what was found.
    """

    def __init__(self, message: str, batch_index: int = -1, position: int = -1,
                 check: str = "") -> None:
        super().__init__(message)
        self.batch_index = batch_index
        self.position = position
        self.check = check


class ProtocolError(CodecError):
    """A Kafka request or response that does not decode or encode."""
