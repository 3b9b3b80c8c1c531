"""Fetch: whole batches from each partition, sent from the segment files with sendfile.

The response body is encoded around :class:`~pylog.net.framing.FileRegion`
placeholders, so the record bytes go from the page cache to the socket and
never through Python.  A fetch that finds fewer than ``min_bytes`` parks until
an append to one of its partitions wakes it or ``max_wait_ms`` passes (Kafka's
delayed fetch).  Limits follow KIP-74: ``partition_max_bytes`` per partition,
``max_bytes`` (at most the broker's ``fetch.max.bytes``, KIP-541) for the
response, except that the first batch found is returned
whole so a consumer always makes progress.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import TYPE_CHECKING, Any

from pylog.log import OffsetOutOfRangeError
from pylog.log.errors import LogClosedError
from pylog.net.framing import FileRegion, frame_parts
from pylog.protocol import ApiKey, ErrorCode
from pylog.protocol.headers import encode_response_header, response_header_version
from pylog.protocol.messages import body_encoder

if TYPE_CHECKING:
    from pylog.server.broker import Broker

API_KEY = ApiKey.FETCH
# v4: record batches and last_stable_offset; v13+ name topics by id only.
VERSIONS = (4, 12)
READ_COMMITTED = 1
INT32_MAX = 2**31 - 1


def _partition_error(index: int, code: int) -> dict[str, Any]:
    return {"partition_index": index, "error_code": code, "high_watermark": -1,
            "last_stable_offset": -1, "log_start_offset": -1, "records": None,
            "aborted_transactions": None}


def _read(broker: Broker, body: Any, version: int) -> tuple[list[dict], int, bool]:
    """(topic responses, record bytes found, whether any partition has an error)."""
    remaining = min(body.max_bytes if version >= 3 else INT32_MAX, broker.fetch_max_bytes)
    min_one = version >= 3
    committed = body.isolation_level == READ_COMMITTED
    total = 0
    errors = False
    out = []
    get_log = broker.logs.get_log
    for t in body.topics:
        parts = []
        for p in t.partitions:
            index = p.partition
            log = get_log(t.topic, index)
            if log is None:
                parts.append(_partition_error(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                errors = True
                continue
            hw = log.high_watermark
            limit = min(p.partition_max_bytes, remaining)
            records: Any = b""
            try:
                if limit > 0 or min_one:
                    s = log.read(p.fetch_offset, max(limit, 0), max_offset=hw,
                                 min_one_message=min_one)
                    if s.length:
                        records = FileRegion(s.fd, s.position, s.length, s.segment)
                        remaining -= s.length
                        total += s.length
                        min_one = False
                elif not log.log_start_offset <= p.fetch_offset <= log.log_end_offset:
                    raise OffsetOutOfRangeError(p.fetch_offset, log.log_start_offset,
                                                log.log_end_offset)
            except OffsetOutOfRangeError:
                part = _partition_error(index, ErrorCode.OFFSET_OUT_OF_RANGE)
                part["high_watermark"] = part["last_stable_offset"] = hw
                part["log_start_offset"] = log.log_start_offset
                parts.append(part)
                errors = True
                continue
            except LogClosedError:
                parts.append(_partition_error(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                errors = True
                continue
            parts.append({"partition_index": index, "error_code": 0, "high_watermark": hw,
                          "last_stable_offset": hw, "log_start_offset": log.log_start_offset,
                          "aborted_transactions": [] if committed else None,
                          "preferred_read_replica": -1, "records": records})
        out.append({"topic": t.topic, "partitions": parts})
    return out, total, errors


def _encode(header: Any, topics: list[dict], error: int = 0) -> bytes | list:
    version = header.api_version
    body = {"throttle_time_ms": 0, "error_code": error, "session_id": 0, "responses": topics}
    pieces: list = [encode_response_header(header.correlation_id,
                                           response_header_version(API_KEY, version))]
    body_encoder(API_KEY, version, "response")(body, pieces.append)
    framed = frame_parts(pieces)
    return framed[0] if len(framed) == 1 else framed


def handle(broker: Broker, header: Any, body: Any) -> Any:
    if header.api_version >= 7 and body.session_id != 0:
        # pylog hands out no fetch sessions (session_id 0 in every response),
        # so a client asking for one has a stale id.
        return _encode(header, [], ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
    if not _reads_cached(broker, body):
        return _read_cold(broker, header, body)
    return _respond(broker, header, body, *_read(broker, body, header.api_version))


def _respond(broker: Broker, header: Any, body: Any, topics: list[dict], size: int,
             errors: bool) -> Any:
    """The response when the first read is enough, else park the fetch."""
    if (size >= body.min_bytes or body.max_wait_ms <= 0 or errors or not body.topics
            or broker.stopping):  # shutting down: answer, do not park
        if broker.metrics is not None:
            broker.metrics.fetched(size, topics, errors)
        return _encode(header, topics)
    return _park(broker, header, body)


def _reads_cached(broker: Broker, body: Any) -> bool:
    """Whether every partition's read finds its pages in the page cache.

    A read walks batch headers through the segment's mapping; on cold data
    (a consumer catching up from old segments, after a restart) each header
    is a disk read that would stall every connection of the node.
    """
    get_log = broker.logs.get_log
    limit = body.max_bytes
    for t in body.topics:
        for p in t.partitions:
            log = get_log(t.topic, p.partition)
            if log is not None and not log.read_is_cached(
                    p.fetch_offset, min(p.partition_max_bytes, limit)):
                return False
    return True


async def _read_cold(broker: Broker, header: Any, body: Any) -> Any:
    """The same fetch with the reads in a worker thread (they fault the pages
    in, so the sendfile that follows finds them cached)."""
    loop = asyncio.get_running_loop()
    found = await loop.run_in_executor(broker.executor, _read, broker, body,
                                       header.api_version)
    result = _respond(broker, header, body, *found)
    return await result if inspect.isawaitable(result) else result


async def _park(broker: Broker, header: Any, body: Any) -> Any:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + body.max_wait_ms / 1000
    keys = [(t.topic, p.partition) for t in body.topics for p in t.partitions]
    while True:
        woken = loop.create_future()
        timer = loop.call_at(deadline, _wake, woken)
        broker.add_waiter(keys, woken)
        try:
            await woken
        finally:
            timer.cancel()
            broker.remove_waiter(keys, woken)
        topics, size, errors = _read(broker, body, header.api_version)
        if size >= body.min_bytes or errors or loop.time() >= deadline or broker.stopping:
            if broker.metrics is not None:
                broker.metrics.fetched(size, topics, errors)
            return _encode(header, topics)


def _wake(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)
