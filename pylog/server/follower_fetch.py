"""The leader's side of a follower's Fetch (``replica_id`` >= 0): replication out.

A follower fetches at its log end offset with the last leader epoch it has
written; the leader answers, per partition:

* a **diverging epoch** (Fetch v12, KIP-595's truncation on fetch) when the
  follower's last epoch ends earlier here, or is unknown here: the follower
  truncates to that end and fetches again, so replicas never diverge;
* OFFSET_OUT_OF_RANGE outside [log start, log end];
* else the batches from the fetch offset up to the log end (not the high
  watermark: followers replicate what is not committed yet), sent from the
  segment files by sendfile as a consumer's are, with the high watermark and
  log start offset it is to follow.

Each fetch tells the leader the follower's log end offset, which moves the
ISR and the high watermark (ReplicaManager.follower_fetched).  A fetch with
nothing new parks for ``max_wait_ms`` as a consumer's does; an append wakes
it.  The request is decoded again by the generic codec for the fields the
native decoder leaves out (last fetched epoch); one decode per follower
request, per partition and never per record.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from pylog.log import OffsetOutOfRangeError
from pylog.log.errors import CorruptRecordError, LogClosedError
from pylog.net.framing import FileRegion, frame_parts
from pylog.protocol import ApiKey, ErrorCode, decode_request
from pylog.protocol.codec import encode_response_parts
from pylog.server.list_offsets import NO_EPOCH, epoch_error, log_corrupt_read
from pylog.server.partition import Partition

if TYPE_CHECKING:
    from pylog.server.context import NodeServices

NO_DIVERGENCE = {"epoch": -1, "end_offset": -1}


def _row(index: int, code: int, hw: int = -1, log_start: int = -1, records: Any = b"",
         diverging: dict[str, int] | None = None) -> dict[str, Any]:
    return {"partition_index": index, "error_code": code, "high_watermark": hw,
            "last_stable_offset": hw, "log_start_offset": log_start,
            "aborted_transactions": None, "preferred_read_replica": -1, "records": records,
            "diverging_epoch": diverging or NO_DIVERGENCE}


def _read(node: NodeServices, replica: int, wanted: list[tuple[str, list[Any]]],
          max_bytes: int, update: bool) -> tuple[list[dict[str, Any]], int, bool]:
    """(topic rows, record bytes, complete: an error or divergence to answer now)."""
    replicas = node.replicas
    remaining = max_bytes
    total = 0
    complete = False
    topics = []
    for topic, partitions in wanted:
        rows = []
        for p in partitions:
            index, offset = p.partition, p.fetch_offset
            part = replicas.leader_partition(topic, index)
            if type(part) is int:
                rows.append(_row(index, part))
                complete = True
                continue
            lg = part.log
            error = epoch_error(p.current_leader_epoch, part.leader_epoch)
            if not error and replica not in part.replicas:
                error = ErrorCode.NOT_LEADER_OR_FOLLOWER  # not assigned a replica here
            if error:
                rows.append(_row(index, error))
                complete = True
                continue
            leo, hw, start = lg.log_end_offset, lg.high_watermark, lg.log_start_offset
            last_epoch = p.last_fetched_epoch
            if last_epoch != NO_EPOCH and offset > 0:
                end_epoch, end_offset = lg.epochs.end_offset_for(last_epoch, leo)
                if end_epoch != NO_EPOCH and (end_epoch < last_epoch or end_offset < offset):
                    rows.append(_row(index, 0, hw, start, b"",
                                     {"epoch": end_epoch, "end_offset": end_offset}))
                    complete = True
                    continue
            if not start <= offset <= leo:
                rows.append(_row(index, ErrorCode.OFFSET_OUT_OF_RANGE, hw, start))
                complete = True
                continue
            records: Any = b""
            throttles = replicas.throttles
            throttled = (throttles is not None and replica not in part.isr
                         and throttles.leader_throttled(topic, index))
            try:
                if throttled and throttles.leader.exceeded():  # type: ignore[union-attr]
                    s = None  # held back: the follower asks again
                else:
                    s = lg.read(offset, max(min(p.partition_max_bytes, remaining), 0))
                if s is not None and s.length:
                    records = FileRegion(s.fd, s.position, s.length, s.segment)
                    remaining -= s.length
                    total += s.length
                    if throttled:
                        throttles.leader.record(s.length)  # type: ignore[union-attr]
            except (OffsetOutOfRangeError, LogClosedError):
                rows.append(_row(index, ErrorCode.OFFSET_OUT_OF_RANGE, hw, start))
                complete = True
                continue
            except CorruptRecordError as exc:
                log_corrupt_read(exc, topic, index)
                rows.append(_row(index, ErrorCode.CORRUPT_MESSAGE, hw, start))
                complete = True
                continue
            if update:
                replicas.follower_fetched(part, replica, offset, leo)
                hw = lg.high_watermark
            rows.append(_row(index, 0, hw, start, records))
        topics.append({"topic": topic, "partitions": rows})
    return topics, total, complete


def handle(node: NodeServices, request: Any, frame: bytearray) -> Any:
    """Answer a follower's Fetch (``request``: the native decoder's tuple)."""
    _, body = decode_request(frame, allow_trailing=True)
    wanted = [(t.topic, list(t.partitions)) for t in body.topics]
    max_bytes = min(request.max_bytes, node.fetch_max_bytes)
    topics, total, complete = _read(node, request.replica_id, wanted, max_bytes, True)
    if complete or total >= request.min_bytes or request.max_wait_ms <= 0 or node.stopping:
        return _encode(request, topics)
    return _park(node, request, wanted, max_bytes, Partition.changes)


async def _park(node: NodeServices, request: Any, wanted: list[tuple[str, list[Any]]],
                max_bytes: int, seen: int | None) -> Any:
    """Until something to send (or the max wait); ``seen``: Partition.changes
    when the read found nothing, so an append before this task ran is not missed."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + request.max_wait_ms / 1000
    keys = [(topic, p.partition) for topic, partitions in wanted for p in partitions]
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
        topics, total, complete = _read(node, request.replica_id, wanted, max_bytes, True)
        if (complete or total >= request.min_bytes or loop.time() >= deadline
                or node.stopping):
            return _encode(request, topics)


def _wake(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)


def _encode(request: Any, topics: list[dict[str, Any]]) -> list[Any]:
    """The framed response as pieces: the record regions go out by sendfile."""
    return frame_parts(encode_response_parts(
        ApiKey.FETCH, request.version, request.correlation_id,
        {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": topics}))
