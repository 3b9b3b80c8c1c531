"""Time index, ListOffsets by timestamp and time-based roll, on real segment
files in a tmp dir, against Kafka 3.6's rules (LogSegment.findOffsetByTimestamp,
FileRecords.searchForTimestamp, UnifiedLog.fetchOffsetByTimestamp,
LogSegment.shouldRoll with LogConfig.randomSegmentJitter)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pylog.log import LogConfig
from pylog.log.log import MAX_TIMESTAMP, Log
from pylog.records import BatchBuilder, compression


def batch(stamps: list[int], codec: int = 0) -> bytearray:
    b = BatchBuilder(compression=codec)
    for i, t in enumerate(stamps):
        b.append(t, b"k", b"v%d" % i)
    return bytearray(b.build())


def open_log(path: Path, clock: list[int], clean: bool = True, **props: str) -> Log:
    cfg = LogConfig.from_props({k.replace("_", "."): str(v) for k, v in props.items()})
    return Log.open(path, cfg, time_ms=lambda: clock[0], had_clean_shutdown=clean)


# Timestamps out of order within batches, across batches and across segments.
BATCHES = [[100, 300, 200], [150], [500, 120], [400], [50], [600, 700]]
STAMPS = [t for b in BATCHES for t in b]
TARGETS = [0, 50, 99, 100, 101, 150, 199, 200, 250, 300, 301, 450, 500, 501, 650, 700, 701]


def first_at_or_after(target: int, start: int = 0) -> tuple[int, int] | None:
    """Kafka's answer: the first record (in offset order, from the log start)
    whose timestamp is >= target, with its own timestamp."""
    for offset, ts in enumerate(STAMPS):
        if offset >= start and ts >= target:
            return ts, offset
    return None


@pytest.mark.parametrize("codec", [0, compression.GZIP], ids=["plain", "gzip"])
@pytest.mark.parametrize("segment_bytes", [100, 100_000], ids=["many-segments", "one"])
def test_list_offsets_by_timestamp_with_out_of_order_timestamps(tmp_path, codec,
                                                                 segment_bytes) -> None:
    clock = [10_000]
    path = tmp_path / "t-0"
    lg = open_log(path, clock, segment_bytes=max(segment_bytes, 200 if codec else 0),
                  index_interval_bytes=1)
    for b in BATCHES:
        lg.append(batch(b, codec))

    def check(lg: Log) -> None:
        got = {t: lg.offset_for_timestamp(t) for t in TARGETS}
        assert {t: tuple(v) if v else None for t, v in got.items()} == {
            t: first_at_or_after(t) for t in TARGETS}
        # -3: the largest timestamp, with the last offset of its batch (3.6's
        # "shallow" offset of the max timestamp, also after an index rebuild)
        assert tuple(lg.offset_for_timestamp(MAX_TIMESTAMP)) == (700, 9)

    check(lg)
    lg.close()
    lg = open_log(path, clock)
    check(lg)
    lg.close()
    for p in path.glob("*.timeindex"):  # rebuilt from the segments on open
        p.unlink()
    lg = open_log(path, clock)
    check(lg)
    lg.close()
    lg = open_log(path, clock, clean=False)  # unclean: every segment rescanned
    check(lg)
    # the largest timestamp of each segment is what time retention judges by
    for s in lg.segments:
        n = lg.segments.index(s)
        end = lg.segments[n + 1].base_offset if n + 1 < len(lg.segments) else len(STAMPS)
        assert s.largest_timestamp() == max(STAMPS[s.base_offset:end])
    lg.close()


def test_list_offsets_by_timestamp_skips_records_below_the_log_start(tmp_path) -> None:
    clock = [10_000]
    lg = open_log(tmp_path / "t-0", clock, segment_bytes=100_000)
    for b in BATCHES:
        lg.append(batch(b, compression.GZIP))
    lg.delete_records_before(4)  # inside the batch [500, 120] at 4..5
    for t in TARGETS:
        found = lg.offset_for_timestamp(t)
        assert (tuple(found) if found else None) == first_at_or_after(t, 4), t


def test_log_append_time_and_a_live_change_of_timestamp_type(tmp_path) -> None:
    clock = [10_000]
    path = tmp_path / "t-0"
    lg = open_log(path, clock, message_timestamp_type="LogAppendTime")
    lg.append(batch([300, 100, 200]))  # 0..2, all stamped 10_000
    clock[0] += 10
    lg.append(batch([1, 2]))  # 3..4, stamped 10_010
    lg.delete_records_before(1)
    lg.set_config(LogConfig.from_props({"message.timestamp.type": "CreateTime"}))
    lg.append(batch([50, 20_000]))  # 5..6, their own timestamps
    expected = {0: (10_000, 1), 10_000: (10_000, 1), 10_001: (10_010, 3),
                10_010: (10_010, 3), 10_011: (20_000, 6), 20_001: None}

    def check(lg: Log) -> None:
        got = {t: lg.offset_for_timestamp(t) for t in expected}
        assert {t: tuple(v) if v else None for t, v in got.items()} == expected
        assert tuple(lg.offset_for_timestamp(MAX_TIMESTAMP)) == (20_000, 6)

    check(lg)
    lg.close()
    for p in path.glob("*.timeindex"):
        p.unlink()
    lg = open_log(path, clock, message_timestamp_type="CreateTime")
    lg.delete_records_before(1)  # (the broker keeps it in its checkpoint)
    check(lg)
    lg.close()


def test_roll_jitter_is_drawn_per_segment_below_segment_ms(tmp_path) -> None:
    """Kafka draws each segment's jitter from [0, min(segment.jitter.ms,
    segment.ms)): a jitter larger than segment.ms never makes a segment roll
    on batches whose timestamps did not move forward.  pylog subtracted the
    whole segment.jitter.ms, so segment.ms - jitter went negative and every
    append rolled a new segment."""
    clock = [10_000]
    lg = open_log(tmp_path / "t-0", clock, segment_ms=100, segment_jitter_ms=10**9)
    for _ in range(10):
        lg.append(batch([5_000]))
    lg.append(batch([4_000]))  # older than the segment's first: no roll either
    assert len(lg.segments) == 1
    lg.append(batch([5_101]))  # 101 ms of timestamps: past segment.ms whatever the draw
    assert len(lg.segments) == 2
    for _ in range(20):
        clock[0] += 1
        lg.append(batch([10_000 + 200 * len(lg.segments)]))
    assert all(0 <= s.roll_jitter_ms < 100 for s in lg.segments)
    assert LogConfig(segment_ms=100, segment_jitter_ms=30).random_segment_jitter() < 30
    assert LogConfig(segment_ms=100).random_segment_jitter() == 0
    lg.close()
