"""Corrupt batch headers in a rolled segment below the recovery point, read by a
real broker process: the fetcher gets CORRUPT_MESSAGE (Kafka's reader throws
CorruptRecordException there) and a log line names the segment and position;
the batches before it, after it (through the index) and in the other segments
stay readable.  Before this, a length field of 0 made the fetch skip to the
next segment with error 0: records hidden with no error."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
from kafka_wire import RawClient, produce_body
from test_broker_protocol import batch, fetch_body, metadata, partition_response

from pylog.protocol import ApiKey, ErrorCode
from pylog.records import iter_records

SEGMENT_BYTES = 1024
BATCHES = 40
RECORDS_PER_BATCH = 3


def _segments(log_dir: Path, topic: str) -> list[Path]:
    return sorted((log_dir / f"{topic}-0").glob("*.log"))


def _batch_positions(path: Path) -> list[tuple[int, int, int]]:
    """(position, base offset, size) of each batch of a healthy segment."""
    data = path.read_bytes()
    out, pos = [], 0
    while pos + 12 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        out.append((pos, base, length + 12))
        pos += length + 12
    return out


def _fetch(client: RawClient, topic: str, offset: int):
    return client.request(ApiKey.FETCH, 11, fetch_body(topic, offset)).responses[0].partitions[0]


def _offsets(records: bytes) -> list[int]:
    return [r.offset for r in iter_records(records)]


def _corrupt(path: Path, position: int, size: int, shape: str) -> None:
    with open(path, "r+b") as f:
        if shape == "size-zero":
            f.seek(position + 8)
            f.write(struct.pack(">i", 0))
        elif shape == "size-below-v2-header":
            f.seek(position + 8)
            f.write(struct.pack(">i", 30))  # above Kafka's 14, below the v2 header
        elif shape == "size-past-end":
            f.seek(position + 8)
            f.write(struct.pack(">i", 0x7FFF0000))
        elif shape == "bad-magic":
            f.seek(position + 16)
            f.write(b"\x07")
        elif shape == "torn-tail":
            f.truncate(position + size - 5)  # the last batch loses its end
        else:
            raise AssertionError(shape)


@pytest.mark.parametrize("shape", ["size-zero", "size-below-v2-header", "size-past-end",
                                   "bad-magic", "torn-tail"])
def test_corrupt_batch_header_gives_corrupt_message(start_broker, tmp_path, topic,
                                                    shape) -> None:
    data = tmp_path / "data"
    # Every batch indexed, so a fetch past the broken batch finds a start
    # position behind it (as Kafka's index lookup does).
    overrides = (f"log.segment.bytes={SEGMENT_BYTES}", "log.index.interval.bytes=1")
    b = start_broker(*overrides, log_dir=data)
    with RawClient(b.bootstrap) as c:
        metadata(c, topic)
        for i in range(BATCHES):
            r = partition_response(c.request(ApiKey.PRODUCE, 9, produce_body(
                topic, 0, batch(RECORDS_PER_BATCH, 1_700_000_000_000 + 10 * i))))
            assert r.error_code == 0
    assert b.stop() == 0  # clean: nothing is rescanned at the next start
    segments = _segments(data, topic)
    assert len(segments) >= 4
    victim = segments[1]
    batches = _batch_positions(victim)
    assert len(batches) >= 3
    which = len(batches) - 1 if shape == "torn-tail" else 1
    position, bad_base, size = batches[which]
    _corrupt(victim, position, size, shape)

    b = start_broker(*overrides, log_dir=data)
    with RawClient(b.bootstrap) as c:
        # The broken batch: Kafka's error, never another segment's records.
        r = _fetch(c, topic, bad_base)
        assert r.error_code == ErrorCode.CORRUPT_MESSAGE, shape
        assert r.records in (b"", None)
        # Before it: the first segment, and the intact batch ahead of it in
        # the same segment (served alone, the slice stops at the break).
        r = _fetch(c, topic, 0)
        assert r.error_code == 0 and _offsets(r.records)[0] == 0
        before = batches[which - 1][1]
        r = _fetch(c, topic, before)
        assert r.error_code == 0
        got = _offsets(r.records)
        assert got[0] == before and max(got) < bad_base
        # After it, through the index: the next batch of the segment, if the
        # break left it whole, and the next segment in every case.
        if which + 1 < len(batches) and shape in ("size-zero", "size-below-v2-header",
                                                   "bad-magic"):
            after = batches[which + 1][1]
            r = _fetch(c, topic, after)
            assert r.error_code == 0 and _offsets(r.records)[0] == after
        next_base = int(segments[2].name.split(".")[0])
        r = _fetch(c, topic, next_base)
        assert r.error_code == 0 and _offsets(r.records)[0] == next_base
        # A consumer at the end of the log is not disturbed either.
        r = _fetch(c, topic, BATCHES * RECORDS_PER_BATCH - 1)
        assert r.error_code == 0
        # ListOffsets by time through the broken batch: the same error.
        ts = 1_700_000_000_000 + 10 * (bad_base // RECORDS_PER_BATCH) + 1
        lo = c.request(ApiKey.LIST_OFFSETS, 4, {"replica_id": -1, "isolation_level": 0,
                                                "topics": [{"name": topic, "partitions": [
                                                    {"partition_index": 0, "timestamp": ts,
                                                     "current_leader_epoch": -1}]}]})
        assert lo.topics[0].partitions[0].error_code == ErrorCode.CORRUPT_MESSAGE
        # The producer is unaffected: the log end is elsewhere.
        r = partition_response(c.request(ApiKey.PRODUCE, 9, produce_body(topic, 0, batch(1))))
        assert r.error_code == 0
    assert b.stop() == 0
    out = "".join(b.output)
    assert "Corrupt batch in" in out and str(victim) in out, out
    assert f"position {position}" in out, out
    assert os.path.getsize(victim) > 0  # nothing was truncated behind the operator's back
