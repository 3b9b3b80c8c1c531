"""Fetch: whole batches from each partition, sent from the segment files with sendfile.

The request is decoded and the response encoded in C
(:mod:`pylog._native.fetch_codec`, the generic codec's twin), into and from
plain tuples.  Each partition's records are a
:class:`~pylog.net.framing.FileRegion` placeholder that the encoder leaves in
the framed response, so the record bytes go from the page cache to the
socket and never through Python.  A fetch that finds fewer than ``min_bytes``
parks until an append to one of its partitions wakes it or ``max_wait_ms``
passes (Kafka's delayed fetch, with its accounting: the bytes available up to
``partition_max_bytes`` count, not the whole batches that will be sent, and
a read on an older segment than the log end answers at once; a partition
unknown to the node does not cut the wait short).  Limits follow KIP-74: ``partition_max_bytes``
per partition, ``max_bytes`` (at most the broker's ``fetch.max.bytes``,
KIP-541) for the response, except that the first batch found is returned
whole so a consumer always makes progress.  Fetch sessions (KIP-227,
:mod:`pylog.server.fetch_sessions`): an incremental fetch reads every
partition of its session and is answered with those that have news.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any, NamedTuple

from pylog._native.fetch_codec import decode_fetch_request, encode_fetch_response
from pylog.log import OffsetOutOfRangeError
from pylog.log.errors import CorruptRecordError, LogClosedError
from pylog.net.connection import Throttled
from pylog.net.framing import FileRegion, frame_parts
from pylog.protocol import ApiKey, ErrorCode
from pylog.protocol.codec import encode_response_parts
from pylog.server import follower_fetch
from pylog.server.fetch_sessions import FINAL_EPOCH, INVALID_SESSION_ID, FetchContext
from pylog.server.list_offsets import NO_EPOCH, epoch_error, log_corrupt_read
from pylog.server.partition import Partition

if TYPE_CHECKING:
    from pylog.server.context import NodeServices

API_KEY = ApiKey.FETCH
# v4: record batches and last_stable_offset; v13+ name topics by id only.
VERSIONS = (4, 12)
READ_COMMITTED = 1
# Errors after which the answer names the partition's current leader (v12).
_LEADER_MOVED = frozenset({int(ErrorCode.NOT_LEADER_OR_FOLLOWER),
                           int(ErrorCode.FENCED_LEADER_EPOCH)})



class Request(NamedTuple):
    """decode_fetch_request's tuple, named."""

    version: int
    correlation_id: int
    client_id: str | None
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation_level: int
    session_id: int
    session_epoch: int
    # (partition, fetch offset, partition max bytes, current leader epoch)
    topics: list[tuple[str, list[tuple[int, int, int, int]]]]
    forgotten: list[tuple[str, list[int]]]  # v7+: what a fetch session drops
    replica_id: int = -1  # a follower's node id; -1 for a consumer
    session: FetchContext | None = None  # None: no session is involved
    started_ns: int = 0  # perf_counter_ns at the start, when the request quota is on


# A partition's answer, in the order encode_fetch_response takes it:
# (index, error_code, high_watermark, last_stable_offset, log_start_offset,
#  aborted_transactions, records)
PartitionResponse = tuple[int, int, int, int, int, "list | None", Any]


def _error(index: int, code: int) -> PartitionResponse:
    # Records empty, not null: Kafka sends MemoryRecords.EMPTY with a partition
    # error, and librdkafka rejects the whole response on a null record set.
    return (index, code, -1, -1, -1, None, b"")


class Found(NamedTuple):
    """What one pass over a fetch's partitions found."""

    topics: list  # the topic responses
    size: int  # record bytes to send
    readable: int  # bytes available, as Kafka's DelayedFetch counts them
    complete: bool  # answer now: an error reading a partition, or an older segment
    errors: bool  # any partition answered with an error (for the metrics)


def _read(node: NodeServices, request: Request) -> Found:
    """Each partition's answer, and what decides whether the fetch waits."""
    remaining = min(request.max_bytes, node.fetch_max_bytes)
    committed = request.isolation_level == READ_COMMITTED
    aborted = [] if committed else None
    min_one = True  # KIP-74 (v3+): the first batch found goes whole
    total = readable = 0
    complete = errors = known = False
    out = []
    leader_log = node.replicas.leader_log
    for topic, partitions in request.topics:
        parts = []
        for index, offset, partition_max_bytes, leader_epoch in partitions:
            log = leader_log(topic, index)
            if type(log) is int:
                parts.append(_error(index, log))
                errors = True
                if log != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                    known = complete = True  # led elsewhere: an error read, answered now
                # Kafka sets partitions missing from its metadata aside before
                # the read: the others still wait.
                continue
            known = True
            if leader_epoch != NO_EPOCH and leader_epoch != log.leader_epoch:
                # Partition.localLogWithEpochOrThrow (KIP-320): an error read,
                # which answers the fetch at once.
                parts.append(_error(index, epoch_error(leader_epoch, log.leader_epoch)))
                errors = complete = True
                continue
            if request.version < 10 and log.config.compression_type == "zstd":
                # KafkaApis: zstd needs Fetch v10+ (KIP-110).
                parts.append(_error(index, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE))
                errors = complete = True
                continue
            hw = log.high_watermark
            # The last stable offset: below an open transaction's first offset
            # (read_committed reads no further), not below the log start; the
            # high watermark without one (Log.last_stable_offset, inline).
            lso = log.first_unstable_offset
            lso = hw if lso is None or lso >= hw else max(lso, log.log_start_offset)
            limit = min(partition_max_bytes, remaining)
            records: Any = b""
            try:
                if limit > 0 or min_one:
                    s = log.read(offset, max(limit, 0), max_offset=lso if committed else hw,
                                 min_one_message=min_one)
                    if s.length:
                        records = FileRegion(s.fd, s.position, s.length, s.segment)
                        remaining -= s.length
                        total += s.length
                        min_one = False
                    if s.segment is not log.active_segment:
                        complete = True  # DelayedFetch: "fetching older segments"
                    else:  # up to the log end, whole batches or not
                        readable += max(s.length, min(s.segment.size - s.position,
                                                      partition_max_bytes))
                elif not log.log_start_offset <= offset <= log.log_end_offset:
                    raise OffsetOutOfRangeError(offset, log.log_start_offset,
                                                log.log_end_offset)
            except OffsetOutOfRangeError:
                parts.append((index, ErrorCode.OFFSET_OUT_OF_RANGE, hw, lso,
                              log.log_start_offset, None, b""))
                errors = complete = True
                continue
            except CorruptRecordError as exc:
                # ReplicaManager.readFromLocalLog: CORRUPT_MESSAGE for this
                # partition; the others, and this one's other offsets, serve on.
                log_corrupt_read(exc, topic, index)
                parts.append(_error(index, ErrorCode.CORRUPT_MESSAGE))
                errors = complete = True
                continue
            except LogClosedError:  # deleted under the read: as if unknown
                parts.append(_error(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                errors = True
                continue
            skip = aborted
            if committed and records:
                # The aborted transactions the records may hold (Kafka's
                # transaction index), for the consumer to drop.
                state = node.replicas.producer_state(topic, index)
                if state is not None and state.aborted:
                    skip = state.aborted_between(offset, lso)
            parts.append((index, 0, hw, lso, log.log_start_offset, skip, records))
        out.append((topic, parts))
    # KafkaApis: with no partition left to read (every one unknown), the
    # answer goes at once; it does not wait for max_wait_ms.
    return Found(out, total, readable, complete or not known, errors)


def handle_frame(node: NodeServices, frame: bytearray) -> Any:
    """Answer a Fetch request frame (v4-12): the framed response, or an
    awaitable of it for a fetch that parks or reads cold data.  Malformed
    frames raise ProtocolError (the router closes the connection)."""
    request = Request(*decode_fetch_request(frame))
    if request.replica_id >= 0:  # a follower: replication (pylog.server.follower_fetch)
        return follower_fetch.handle(node, request, frame)
    asked = request.topics  # as the request names them, for an error response
    quotas = node.quotas
    if quotas.request.enabled:
        request = request._replace(started_ns=time.perf_counter_ns())
    if quotas.fetch.enabled:
        # KafkaApis: no more in one response than the quota allows in a
        # whole window (else every such fetch would be throttled).
        cap = quotas.fetch.max_value_in_window(request.client_id)
        if cap < request.max_bytes:
            request = request._replace(max_bytes=int(cap),
                                       min_bytes=min(request.min_bytes, int(cap)))
    if request.session_id != INVALID_SESSION_ID or request.session_epoch != FINAL_EPOCH:
        # v7+ and a fetch session (KIP-227): opened, used or closed.
        context = node.fetch_sessions.context(request.session_id, request.session_epoch,
                                                request.topics, request.forgotten)
        if context.error:
            return encode_fetch_response(request.version, request.correlation_id,
                                         context.error, INVALID_SESSION_ID, [])
        if context.session is not None:  # incremental: read the whole session
            request = request._replace(topics=context.session.topics(), session=context)
        else:
            request = request._replace(session=context)
    if request.isolation_level & ~READ_COMMITTED:  # neither 0 nor 1 (an int8)
        refused = _unknown_isolation_level(node, request, asked)
        if refused is not None:
            return refused
    topics = request.topics
    if request.session is None or request.session.session is None:
        if len(topics) > 1 or (topics and len(topics[0][1]) > 1):
            request = request._replace(topics=_one_per_partition(topics))
    if not _reads_cached(node, request):
        return _read_cold(node, request)
    return _respond(node, request, _read(node, request))


def _unknown_isolation_level(node: NodeServices, request: Request, asked: list) -> Any:
    """Kafka's IsolationLevel.forId throws IllegalArgumentException for a level
    other than 0 and 1.  KafkaApis.handleFetchRequest asks for the level only
    once it has a partition to read (one its metadata knows), after the fetch
    context is made (an incremental session has moved on, as here; a new one
    is made only with a response), and answers the exception with
    FetchRequest.getErrorResponse: UNKNOWN_SERVER_ERROR at the top (v7+) and
    on every partition the request names, with the request's session id.
    None when no partition is known: the fetch is answered as any other."""
    get = node.replicas.get
    if not any(get(topic, p[0]) is not None
               for topic, partitions in request.topics for p in partitions):
        return None
    code = ErrorCode.UNKNOWN_SERVER_ERROR
    topics = [(topic, [_error(p[0], code) for p in partitions]) for topic, partitions in asked]
    return encode_fetch_response(request.version, request.correlation_id, code,
                                 request.session_id, topics)


def _one_per_partition(topics: list) -> list:
    """As Kafka's map of fetch partitions: a partition named twice is read
    once, with the last offset and limit given, in its first place."""
    wanted: dict[tuple[str, int], tuple[int, int, int, int]] = {}
    for topic, partitions in topics:
        for p in partitions:
            wanted[(topic, p[0])] = p
    if len(wanted) == sum(len(partitions) for _, partitions in topics):
        return topics
    out: list[tuple[str, list]] = []
    for (topic, _), p in wanted.items():
        if out and out[-1][0] == topic:
            out[-1][1].append(p)
        else:
            out.append((topic, [p]))
    return out


def _answer(node: NodeServices, request: Request, found: Found) -> Any:
    quotas = node.quotas
    if quotas.fetch.enabled or request.started_ns:
        throttle = quotas.fetch.record(request.client_id, found.size) if quotas.fetch.enabled \
            else 0
        if request.started_ns:
            throttle = max(throttle, quotas.record_request(request.client_id,
                                                           request.started_ns))
        if throttle:
            return Throttled(_throttled_answer(node, request, found, throttle), throttle)
    if node.metrics is not None:
        node.metrics.fetched(found.size, found.topics, found.errors)
    if request.session is None:
        error, session_id, topics = 0, INVALID_SESSION_ID, found.topics
    else:
        error, session_id, topics = node.fetch_sessions.respond(request.session,
                                                                request.topics, found.topics)
    if found.errors and request.version >= 12 and node.cluster is not None and any(
            p[1] in _LEADER_MOVED for _, parts in topics for p in parts):
        return _redirecting(node, request, error, session_id, topics)
    return encode_fetch_response(request.version, request.correlation_id, error, session_id,
                                 topics)


def _redirecting(node: NodeServices, request: Request, error: int, session_id: int,
                 topics: list) -> list:
    """A v12 answer naming the current leader of each partition led elsewhere
    (the CurrentLeader tagged field, KIP-320), so the consumer goes there
    without waiting for its next metadata refresh.  The rare case, through the
    generic encoder (the native one leaves tagged fields out)."""
    def row(topic: str, p: tuple) -> dict[str, Any]:
        out = {"partition_index": p[0], "error_code": p[1], "high_watermark": p[2],
               "last_stable_offset": p[3], "log_start_offset": p[4],
               "aborted_transactions": None if p[5] is None else [
                   {"producer_id": pid, "first_offset": first} for pid, first in p[5]],
               "preferred_read_replica": -1, "records": p[6]}
        if p[1] in _LEADER_MOVED:
            info = node.metadata.partition(topic, p[0])
            if info is not None:
                out["current_leader"] = {"leader_id": info.leader,
                                         "leader_epoch": info.leader_epoch}
        return out

    return frame_parts(encode_response_parts(ApiKey.FETCH, request.version,
                                             request.correlation_id, {
        "throttle_time_ms": 0, "error_code": error, "session_id": session_id,
        "responses": [{"topic": t, "partitions": [row(t, p) for p in parts]}
                      for t, parts in topics]}))


def _throttled_answer(node: NodeServices, request: Request, found: Found, throttle: int) -> bytes:
    """KafkaApis for a client over its fetch or request quota: an empty
    response carrying the throttle time, its bytes taken back from the
    fetch quota, the session's partitions left as they were (the next fetch
    finds the same data)."""
    if node.quotas.fetch.enabled:
        node.quotas.fetch.unrecord(request.client_id, found.size)
    if node.metrics is not None:
        node.metrics.fetched(0, [], False)
    context = request.session
    session_id = (context.session.id if context is not None and context.session is not None
                  else INVALID_SESSION_ID)
    return encode_fetch_response(request.version, request.correlation_id, 0, session_id, [],
                                 throttle)


def _ready(request: Request, found: Found) -> bool:
    """Whether a fetch is answered now (ReplicaManager.fetchMessages and
    DelayedFetch.tryComplete on a single node)."""
    return found.readable >= request.min_bytes or found.complete


def _respond(node: NodeServices, request: Request, found: Found,
             seen: int | None = None) -> Any:
    """The response when the first read is enough, else park the fetch
    (``seen``: Partition.changes before the read, when it was not just now)."""
    if (_ready(request, found) or request.max_wait_ms <= 0 or not request.topics
            or node.stopping):  # shutting down: answer, do not park
        return _answer(node, request, found)
    return _park(node, request, Partition.changes if seen is None else seen)


def _reads_cached(node: NodeServices, request: Request) -> bool:
    """Whether every partition's read finds its pages in the page cache.

    A read walks batch headers through the segment's mapping; on cold data
    (a consumer catching up from old segments, after a restart) each header
    is a disk read that would stall every connection of the node.
    """
    leader_log = node.replicas.leader_log
    limit = request.max_bytes
    for topic, partitions in request.topics:
        for index, offset, partition_max_bytes, _ in partitions:
            log = leader_log(topic, index)
            if type(log) is not int and not log.read_is_cached(offset,
                                                          min(partition_max_bytes, limit)):
                return False
    return True


async def _read_cold(node: NodeServices, request: Request) -> Any:
    """The same fetch with the reads in a worker thread (they fault the pages
    in, so the sendfile that follows finds them cached)."""
    loop = asyncio.get_running_loop()
    seen = Partition.changes
    found = await loop.run_in_executor(node.executor, _read, node, request)
    if request.started_ns:  # the request quota counts the loop's time, not the wait
        request = request._replace(started_ns=time.perf_counter_ns())
    result = _respond(node, request, found, seen)
    return await result if asyncio.iscoroutine(result) else result


async def _park(node: NodeServices, request: Request, seen: int | None) -> Any:
    """Until enough to answer (or the max wait); ``seen``: Partition.changes
    when the read found too little, so a wakeup before this task ran is not
    missed."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + request.max_wait_ms / 1000
    keys = [(topic, p[0]) for topic, partitions in request.topics for p in partitions]
    while True:
        woken = loop.create_future()
        timer = loop.call_at(deadline, _wake, woken)
        node.replicas.add_waiter(keys, woken)
        if seen is not None and Partition.changes != seen:
            woken.set_result(None)  # read again at once
        seen = None  # from here on the waiter is in place
        try:
            await woken
        finally:
            timer.cancel()
            node.replicas.remove_waiter(keys, woken)
        if request.started_ns:  # the request quota counts the loop's time, not the wait
            request = request._replace(started_ns=time.perf_counter_ns())
        found = _read(node, request)
        if _ready(request, found) or loop.time() >= deadline or node.stopping:
            return _answer(node, request, found)


def _wake(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)
