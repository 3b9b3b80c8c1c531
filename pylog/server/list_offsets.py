"""ListOffsets: earliest (-2), latest (-1), max timestamp (-3) or the first offset at a time."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.log.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP
from pylog.protocol import ApiKey, ErrorCode

if TYPE_CHECKING:
    from pylog.server.broker import Broker

API_KEY = ApiKey.LIST_OFFSETS
VERSIONS = (1, 7)


def _partition(broker: Broker, topic: str, p: Any, version: int) -> dict[str, Any]:
    index = p.partition_index
    log = broker.logs.get_log(topic, index)
    if log is None:
        return {"partition_index": index, "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                "old_style_offsets": [], "timestamp": -1, "offset": -1}
    ts = p.timestamp
    if ts == LATEST_TIMESTAMP:  # the high watermark for consumers; = LEO on one node
        found_ts, offset = -1, log.high_watermark
    elif ts == MAX_TIMESTAMP and version < 7:
        return {"partition_index": index, "error_code": ErrorCode.UNSUPPORTED_VERSION,
                "old_style_offsets": [], "timestamp": -1, "offset": -1}
    else:
        found = log.offset_for_timestamp(ts)
        found_ts, offset = (found.timestamp, found.offset) if found else (-1, -1)
        if ts == EARLIEST_TIMESTAMP:
            found_ts = -1
    return {"partition_index": index, "error_code": 0,
            "old_style_offsets": [offset] if offset >= 0 else [],
            "timestamp": found_ts, "offset": offset, "leader_epoch": 0}


def _duplicates(body: Any) -> set[tuple[str, int]]:
    seen: set[tuple[str, int]] = set()
    dups: set[tuple[str, int]] = set()
    for t in body.topics:
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            (dups if tp in seen else seen).add(tp)
    return dups


def handle(broker: Broker, header: Any, body: Any) -> dict[str, Any]:
    v = header.api_version
    # As Kafka: every row of a partition named more than once is INVALID_REQUEST.
    dups = _duplicates(body)
    return {"throttle_time_ms": 0, "topics": [
        {"name": t.name, "partitions": [
            {"partition_index": p.partition_index, "error_code": ErrorCode.INVALID_REQUEST,
             "old_style_offsets": [], "timestamp": -1, "offset": -1}
            if (t.name, p.partition_index) in dups else _partition(broker, t.name, p, v)
            for p in t.partitions]}
        for t in body.topics]}
