"""Frames in, responses out: decode, route to the API's handler, encode.

Versions outside what a handler declares are answered as Kafka answers them:
ApiVersions gets a v0 response with UNSUPPORTED_VERSION (and the list of what
is supported); any other API, or a frame that does not decode, closes the
connection, as the client sent something it was never offered.
"""

from __future__ import annotations

import inspect
import logging
from typing import TYPE_CHECKING, Any

from pylog.errors import ProtocolError
from pylog.net.connection import CloseConnection, Connection
from pylog.protocol import (
    ApiKey,
    UnsupportedVersionError,
    decode_request,
    encode_response,
)
from pylog.server import (
    api_versions,
    create_topics,
    delete_topics,
    describe_cluster,
    describe_configs,
    fetch,
    find_coordinator,
    init_producer_id,
    list_offsets,
    metadata,
    produce,
)

if TYPE_CHECKING:
    from pylog.server.broker import Broker

log = logging.getLogger(__name__)

HANDLER_MODULES = (api_versions, metadata, produce, fetch, list_offsets, create_topics,
                   delete_topics, init_producer_id, find_coordinator, describe_cluster,
                   describe_configs)

_PLAIN = (bytes, list)


class RequestRouter:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.handlers = {int(m.API_KEY): m.handle for m in HANDLER_MODULES}
        self.versions: dict[int, tuple[int, int]] = {
            int(m.API_KEY): m.VERSIONS for m in HANDLER_MODULES}

    def __call__(self, conn: Connection, frame: bytearray) -> Any:
        try:
            header, body = decode_request(frame, allow_trailing=True)
        except UnsupportedVersionError as exc:
            if exc.api_key == ApiKey.API_VERSIONS and exc.header is not None:
                return api_versions.unsupported(self.broker, exc.header.correlation_id)
            raise CloseConnection(str(exc)) from None
        except ProtocolError as exc:
            raise CloseConnection(f"malformed request: {exc}") from None
        key, version = header.api_key, header.api_version
        supported = self.versions.get(key)
        if supported is None or not supported[0] <= version <= supported[1]:
            if key == ApiKey.API_VERSIONS:
                return api_versions.unsupported(self.broker, header.correlation_id)
            raise CloseConnection(f"api key {key} v{version} is not supported")
        result = self.handlers[key](self.broker, header, body)
        if result is None or type(result) in _PLAIN:
            return result
        if inspect.isawaitable(result):
            return self._finish(header, result)
        return encode_response(key, version, header.correlation_id, result)

    async def _finish(self, header: Any, pending: Any) -> Any:
        result = await pending
        if result is None or type(result) in _PLAIN:
            return result
        return encode_response(header.api_key, header.api_version, header.correlation_id, result)

