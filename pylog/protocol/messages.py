"""Per-(api key, version, request/response) body codecs, compiled on first use.

Looking a codec up is one dict access once it exists; the first use of a
(api, version, kind) builds the struct classes of the message (once per message)
and compiles its decoder or encoder (see ``compiler``).
"""

from __future__ import annotations

from pylog.errors import ProtocolError
from pylog.protocol.compiler import Decoder, Encoder, compile_decoder, compile_encoder
from pylog.protocol.errors import UnsupportedVersionError
from pylog.protocol.schema import MESSAGE_SCHEMAS, MessageSchema
from pylog.protocol.structs import build_classes

KINDS = ("request", "response")

_classes: dict[tuple[int, str], dict[str, type]] = {}
_decoders: dict[tuple[int, int, str], Decoder] = {}
_encoders: dict[tuple[int, int, str], Encoder] = {}


def message_schema(api_key: int, kind: str) -> MessageSchema:
    """The schema of an API's request or response; ProtocolError for an unknown api key."""
    try:
        return MESSAGE_SCHEMAS[(api_key, kind)]
    except KeyError:
        if kind not in KINDS:
            raise ValueError(f"kind must be 'request' or 'response', not {kind!r}") from None
        raise ProtocolError(f"unknown api key {api_key}") from None


def struct_classes(api_key: int, kind: str) -> dict[str, type]:
    """Every struct class of a message by struct name; the message class under its
    own name (``"ProduceRequest"``)."""
    classes = _classes.get((api_key, kind))
    if classes is None:
        classes = _classes[(api_key, kind)] = build_classes(message_schema(api_key, kind))
    return classes


def message_class(api_key: int, kind: str) -> type:
    """The class of a request or response body, e.g. ``message_class(0, "request")``
    is ``ProduceRequest``; nested struct classes are attributes of it."""
    return struct_classes(api_key, kind)[message_schema(api_key, kind).name]


def _checked_schema(api_key: int, version: int, kind: str) -> MessageSchema:
    schema = message_schema(api_key, kind)
    if not schema.supports(version):
        raise UnsupportedVersionError(api_key, version)
    return schema


def body_decoder(api_key: int, version: int, kind: str) -> Decoder:
    key = (api_key, version, kind)
    decoder = _decoders.get(key)
    if decoder is None:
        schema = _checked_schema(api_key, version, kind)
        decoder = _decoders[key] = compile_decoder(schema, version, struct_classes(api_key, kind))
    return decoder


def body_encoder(api_key: int, version: int, kind: str) -> Encoder:
    key = (api_key, version, kind)
    encoder = _encoders.get(key)
    if encoder is None:
        schema = _checked_schema(api_key, version, kind)
        encoder = _encoders[key] = compile_encoder(schema, version, struct_classes(api_key, kind))
    return encoder
