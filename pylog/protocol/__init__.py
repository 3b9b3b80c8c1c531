"""The Kafka wire protocol: request/response codecs generated from Kafka's schemas.

    header, body = decode_request(frame)              # frame without the size prefix
    body.topic_data[0].partition_data[0].records      # memoryview into ``frame``
    encode_response(ApiKey.PRODUCE, 9, header.correlation_id, {"responses": [...]})

Bodies are instances of per-message classes (``message_class(api_key, kind)``) with
snake_case attributes; encoders also take dicts. See ``codec`` for the frame
functions, ``headers`` for header versions, ``compiler`` for how codecs are built.
"""

from pylog.errors import ProtocolError
from pylog.protocol.codec import (
    decode_body,
    decode_request,
    decode_response,
    encode_body,
    encode_request,
    encode_response,
)
from pylog.protocol.errors import ErrorCode, UnsupportedVersionError, error_name
from pylog.protocol.headers import RequestHeader, request_header_version, response_header_version
from pylog.protocol.messages import message_class, message_schema, struct_classes
from pylog.protocol.schema import ApiKey

__all__ = [
    "ApiKey",
    "ErrorCode",
    "ProtocolError",
    "RequestHeader",
    "UnsupportedVersionError",
    "decode_body",
    "decode_request",
    "decode_response",
    "encode_body",
    "encode_request",
    "encode_response",
    "error_name",
    "message_class",
    "message_schema",
    "request_header_version",
    "response_header_version",
    "struct_classes",
]
