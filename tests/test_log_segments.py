"""Segments, indexes, appends and reads of a partition log (real files)."""

from __future__ import annotations

import os
import random
import struct

import pytest
from log_helpers import batch, scan_dir

from pylog.errors import CorruptBatchError
from pylog.log import Log, LogConfig, OffsetOutOfRangeError, RecordBatchTooLargeError
from pylog.records import build_batch, iter_records, read_batches


def open_log(tmp_path, clock=None, **props):
    cfg = LogConfig.from_props({k.replace("_", "."): str(v) for k, v in props.items()})
    clock = clock or [1_000_000]
    return Log.open(tmp_path / "topic-0", cfg, time_ms=lambda: clock[0])


def test_layout_rolling_and_index_entries(tmp_path):
    lg = open_log(tmp_path, segment_bytes=1 << 20)
    results = [lg.append(batch(1_000 + i, 1024)) for i in range(1200)]
    assert [r.base_offset for r in results] == list(range(1200))
    assert lg.log_end_offset == 1200 == lg.high_watermark
    names = sorted(p.name for p in (tmp_path / "topic-0").iterdir())
    bases = [s.base_offset for s in lg.segments]
    assert len(bases) >= 2 and bases[0] == 0
    for base in bases:
        for suffix in (".log", ".index", ".timeindex"):
            assert f"{base:020d}{suffix}" in names
    lg.close()
    for base in bases:
        # every sparse entry points at the start of the batch with that offset
        log_bytes = (tmp_path / "topic-0" / f"{base:020d}.log").read_bytes()
        assert len(log_bytes) <= 1 << 20
        index = (tmp_path / "topic-0" / f"{base:020d}.index").read_bytes()
        assert len(index) % 8 == 0 and len(index) > 0
        prev = -1
        for rel, pos in struct.iter_unpack(">ii", index):
            assert rel > prev
            prev = rel
            assert struct.unpack_from(">q", log_bytes, pos)[0] == base + rel
        times = (tmp_path / "topic-0" / f"{base:020d}.timeindex").read_bytes()
        stamps = [ts for ts, _ in struct.iter_unpack(">qi", times)]
        assert stamps == sorted(set(stamps)) and stamps


def test_random_lookups_agree_with_linear_scan(tmp_path):
    rng = random.Random(7)
    lg = open_log(tmp_path, segment_bytes=64 * 1024, index_interval_bytes=4096)
    ts = 10_000
    for _ in range(600):
        ts += rng.randint(0, 5)
        lg.append(batch(ts, rng.randint(100, 3000), records=rng.randint(1, 4),
                        ts_step=rng.randint(0, 3)))
    assert len(lg.segments) > 10
    scan = scan_dir(tmp_path / "topic-0")
    for _ in range(400):
        target = rng.randrange(lg.log_end_offset)
        sl = lg.read(target, 1)
        expect = next(b for b in scan if b[2] <= target <= b[3])
        assert (sl.segment.base_offset, sl.position, sl.first_offset, sl.length) == (
            expect[0], expect[1], expect[2], expect[4])
    records = []
    for seg in sorted((tmp_path / "topic-0").glob("*.log")):
        for b in read_batches(seg.read_bytes()):
            records += [(r.offset, r.timestamp) for r in b.records()]
    for _ in range(300):
        target = rng.randint(9_990, ts + 20)
        found = lg.offset_for_timestamp(target)
        expect = next(((o, t) for o, t in records if t >= target), None)
        if expect is None:
            assert found is None
        else:
            assert (found.offset, found.timestamp) == expect
    assert lg.offset_for_timestamp(-2).offset == 0
    assert lg.offset_for_timestamp(-1).offset == lg.log_end_offset
    assert lg.offset_for_timestamp(-3).timestamp == max(t for _, t in records)
    lg.close()


def test_fetch_slices_hold_whole_batches(tmp_path):
    lg = open_log(tmp_path, segment_bytes=256 * 1024)
    for i in range(300):
        lg.append(batch(i, 1000 + 37 * (i % 7)))
    scan = scan_dir(tmp_path / "topic-0")
    for start in (0, 5, 99, 250, 299):
        sl = lg.read(start, 10_000)
        data = os.pread(sl.fd, sl.length, sl.position)
        infos = list(read_batches(data))
        assert infos and infos[0].base_offset <= start <= infos[0].last_offset
        assert sum(b.size for b in infos) == sl.length <= 10_000
        offsets = [r.offset for b in infos for r in b.records()]
        assert offsets == list(range(offsets[0], offsets[0] + len(offsets)))
    # progress rule: the first batch whole even when max_bytes is smaller
    sl = lg.read(10, 50)
    expect = next(b for b in scan if b[2] == 10)
    assert sl.length == expect[4] > 50
    # not with min_one_message off
    assert lg.read(10, 50, min_one_message=False).length == 0
    # max_offset (high watermark) bounds the slice
    sl = lg.read(10, 1 << 20, max_offset=13)
    assert [r.offset for r in iter_records(os.pread(sl.fd, sl.length, sl.position))] == [
        10, 11, 12]
    # at the log end: empty; outside: OffsetOutOfRange
    assert lg.read(300, 1000).length == 0
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(301, 1000)
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(-1, 1000)
    lg.delete_records_before(100)
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(99, 1000)
    assert lg.read(100, 1).first_offset == 100
    lg.close()


def test_multi_batch_append_and_log_append_time(tmp_path):
    clock = [5_000_000]
    lg = open_log(tmp_path, clock, message_timestamp_type="LogAppendTime")
    buf = batch(1, 300, records=3) + batch(2, 300, records=2)
    res = lg.append(buf)
    assert res == (0, 4, 5_000_000)
    assert [b.max_timestamp for b in read_batches(bytes(buf))] == [5_000_000] * 2
    assert lg.append(memoryview(batch(3))).base_offset == 5
    assert lg.append(bytes(batch(4))).base_offset == 6  # read-only input is copied
    lg.close()


def test_bad_batch_is_never_appended(tmp_path):
    lg = open_log(tmp_path, max_message_bytes=5000)
    lg.append(batch(1))
    path = lg.active_segment.log_path
    size = path.stat().st_size
    bad = batch(2)
    bad[-1] ^= 0xFF
    with pytest.raises(CorruptBatchError) as err:
        lg.append(bad)
    assert err.value.check == "crc"
    with pytest.raises(CorruptBatchError):
        lg.append(batch(3) + bad)  # the good batch before it is not appended either
    with pytest.raises(CorruptBatchError):
        lg.append(batch(3)[:-10])
    with pytest.raises(RecordBatchTooLargeError):
        lg.append(batch(4, 8000))
    assert path.stat().st_size == size and lg.log_end_offset == 1
    assert lg.append(batch(5)).base_offset == 1
    lg.close()


@pytest.mark.parametrize(("props", "key"), [
    ({"segment.bytes": "abc"}, "segment.bytes"),
    ({"segment.bytes": "10"}, "segment.bytes"),
    ({"log.retention.ms": "-7"}, "log.retention.ms"),
    ({"message.timestamp.type": "WallTime"}, "message.timestamp.type"),
    ({"cleanup.policy": "erase"}, "cleanup.policy"),
    ({"flush.messages": "0"}, "flush.messages"),
])
def test_config_errors_name_the_key(props, key):
    with pytest.raises(ValueError, match=key.replace(".", r"\.")):
        LogConfig.from_props(props)


def test_config_parsing():
    cfg = LogConfig.from_props({"log.retention.hours": "1", "log.roll.hours": "2",
                                "log.segment.bytes": "2048", "segment.bytes": "4096",
                                "cleanup.policy": "compact,delete", "num.io.threads": "8"})
    assert cfg.retention_ms == 3_600_000 and cfg.segment_ms == 7_200_000
    assert cfg.segment_bytes == 4096 and cfg.compact and cfg.delete
    assert LogConfig.from_props({"log.retention.hours": "1",
                                 "log.retention.ms": "5"}).retention_ms == 5
    assert LogConfig().segment_index_bytes == 10 * 1024 * 1024
    with pytest.raises(ValueError, match="unknown"):
        LogConfig.from_props({"segment.byte": "1"}, strict=True)


def test_roll_by_time_and_full_index(tmp_path):
    clock = [1_000]
    lg = open_log(tmp_path, clock, segment_ms=1000)
    lg.append(batch(1_000))
    lg.append(batch(1_500))
    assert len(lg.segments) == 1
    lg.append(batch(2_100))  # more than segment.ms after the first batch's timestamp
    assert [s.base_offset for s in lg.segments] == [0, 2]
    lg.close()
    lg = open_log(tmp_path / "b", segment_index_bytes=64, index_interval_bytes=0)
    for i in range(40):
        lg.append(batch(i, 200))
    assert len(lg.segments) > 3
    assert all(s.offset_index.entries <= 8 for s in lg.segments)
    lg.close()


def _allocated(path) -> int:
    return os.stat(path).st_blocks * 512


def test_blocks_reserved_ahead_of_appends_are_given_back(tmp_path):
    # The active segment allocates disk blocks ahead of its appends without
    # growing the file (fallocate KEEP_SIZE): the file size is always the
    # data's size, and the blocks past it are returned at roll and at close.
    lg = open_log(tmp_path, segment_bytes=8 << 20)
    for i in range(100):
        lg.append(batch(1_000 + i, 20_000))
    first = lg.segments[0]
    path = first.log_path
    size = os.stat(path).st_size
    assert size == first.size
    if not first._can_reserve:
        pytest.skip("this filesystem cannot allocate blocks past the end of a file")
    assert _allocated(path) > size + 8192  # a reserve past the end
    while len(lg.segments) == 1:
        lg.append(batch(5_000, 20_000))
    assert os.stat(path).st_size == first.size
    assert _allocated(path) < first.size + 64 * 1024  # given back at roll
    active = lg.segments[-1].log_path
    lg.close()
    assert _allocated(active) < os.stat(active).st_size + 64 * 1024  # and at close
    reopened = open_log(tmp_path, segment_bytes=8 << 20)
    assert reopened.log_end_offset == lg.log_end_offset
    reopened.close()


def test_truncation_drops_the_reserve_with_the_data(tmp_path):
    lg = open_log(tmp_path, segment_bytes=8 << 20)
    for i in range(50):
        lg.append(batch(1_000 + i, 20_000))
    lg.truncate_to(10)
    seg = lg.segments[-1]
    assert os.stat(seg.log_path).st_size == seg.size
    assert _allocated(seg.log_path) < seg.size + 64 * 1024
    r = lg.append(batch(9_000, 20_000))  # appends after a truncation reserve again
    assert r.base_offset == 10
    assert [b.base_offset for b in read_batches(seg.log_path.read_bytes())][-1] == 10
    lg.close()


def test_a_reserve_left_by_a_crash_is_given_back_at_close(tmp_path):
    from pylog.io import pagecache

    lg = open_log(tmp_path, segment_bytes=8 << 20)
    for i in range(10):
        lg.append(batch(1_000 + i, 20_000))
    lg.close()
    path = lg.segments[-1].log_path
    size = os.stat(path).st_size
    # What a process killed while appending leaves: blocks past the end.
    fd = os.open(path, os.O_RDWR)
    try:
        if not pagecache.reserve(fd, size, 4 << 20):
            pytest.skip("this filesystem cannot allocate blocks past the end of a file")
    finally:
        os.close(fd)
    assert _allocated(path) > size + (1 << 20)
    reopened = open_log(tmp_path, segment_bytes=8 << 20)
    assert reopened.log_end_offset == 10
    reopened.close()
    assert os.stat(path).st_size == size
    assert _allocated(path) < size + 64 * 1024


TS = 1_700_000_000_000
# CreateTime stamps need not grow with offsets (Kafka allows any order).
UNORDERED = [TS + 1000, TS + 100, TS + 100, TS + 2000]


def _lookup(lg, timestamp):
    found = lg.offset_for_timestamp(timestamp)
    return None if found is None else (found.offset, found.timestamp)


@pytest.mark.parametrize("layout", ["batch-per-record", "one-batch", "one-gzip-batch"])
def test_offset_for_timestamp_ignores_records_below_the_log_start(tmp_path, layout):
    """As Kafka's FileRecords.searchForTimestamp: a record below the log start
    offset is no answer, even when it is the first with a timestamp >= the
    target; the answer is a live record with its own timestamp, or none."""
    lg = open_log(tmp_path)
    if layout == "batch-per-record":
        for ts in UNORDERED:
            lg.append(bytearray(build_batch([(ts, None, b"x")])))
    else:  # one batch of offsets 0-3, straddling the log start below
        codec = 1 if layout == "one-gzip-batch" else 0
        lg.append(bytearray(build_batch([(ts, None, b"x") for ts in UNORDERED],
                                        compression=codec)))
    assert _lookup(lg, TS + 500) == (0, TS + 1000)
    lg.delete_records_before(1)
    assert _lookup(lg, TS + 500) == (3, TS + 2000)  # not (1, TS + 1000)
    assert _lookup(lg, TS + 100) == (1, TS + 100)
    assert _lookup(lg, 0) == (1, TS + 100)
    assert _lookup(lg, TS + 2000) == (3, TS + 2000)
    assert _lookup(lg, TS + 2001) is None
    lg.delete_records_before(3)
    assert _lookup(lg, TS) == (3, TS + 2000)
    lg.delete_records_before(4)  # everything deleted: nothing to answer
    assert _lookup(lg, TS + 500) is None
    assert _lookup(lg, 0) is None
    assert lg.offset_for_timestamp(-2).offset == 4
    lg.close()


def test_offset_for_timestamp_skips_a_segment_wholly_below_the_log_start(tmp_path):
    lg = open_log(tmp_path)
    lg.append(batch(TS + 1000, records=2))  # offsets 0-1
    lg.roll()
    lg.append(batch(TS + 100))  # 2
    lg.append(batch(TS + 3000))  # 3
    lg.delete_records_before(2)  # segment 0 is all below the start, not deleted yet
    assert [s.base_offset for s in lg.segments] == [0, 2]
    assert _lookup(lg, TS + 500) == (3, TS + 3000)
    assert _lookup(lg, TS) == (2, TS + 100)
    lg.delete_records_before(4)
    assert _lookup(lg, TS) is None
    lg.close()


@pytest.mark.parametrize("codec", [0, 1])
def test_offset_for_timestamp_log_append_time_batch_straddling_the_log_start(tmp_path, codec):
    clock = [TS]
    lg = open_log(tmp_path, clock, message_timestamp_type="LogAppendTime")
    # offsets 0-2, all stamped TS whatever their CreateTime
    lg.append(bytearray(build_batch([(TS + 9, None, b"x"), (5, None, b"y"), (6, None, b"z")],
                                    compression=codec)))
    lg.delete_records_before(1)
    assert _lookup(lg, 0) == (1, TS)
    assert _lookup(lg, TS) == (1, TS)
    assert _lookup(lg, TS + 1) is None
    lg.delete_records_before(3)
    assert _lookup(lg, 0) is None
    lg.close()


def test_index_blocks_grow_with_their_entries(tmp_path):
    """An open segment's indexes are at full size (segment.index.bytes) but
    hold disk only for the entries they have, and room ahead of them (see
    pylog.log.index_file): an idle partition does not hold 20 MB."""
    lg = open_log(tmp_path, segment_index_bytes=10 << 20, index_interval_bytes=4096)
    index, time_index = (tmp_path / "topic-0" / f"{0:020d}{s}" for s in (".index", ".timeindex"))

    def held(path) -> int:
        return os.stat(path).st_blocks * 512

    lg.append(batch(1_000, 100))
    assert os.stat(index).st_size == 10 << 20
    assert os.stat(time_index).st_size == (10 << 20) // 12 * 12
    assert held(index) < 1 << 20 and held(time_index) < 1 << 20
    for i in range(1, 20_000):  # ~20k index entries: 160 KB of offset index
        lg.append(batch(1_000 + i, 4096))
    seg = lg.segments[-1]
    entries = seg.offset_index.entries
    assert entries > 10_000
    assert entries * 8 <= held(index) < 10 << 20
    written = [seg.offset_index.entry(slot) for slot in range(entries)]
    lg.close()
    # What the indexer stored through the mapping is what the file holds.
    data = index.read_bytes()
    assert len(data) == entries * 8
    assert [struct.unpack_from(">ii", data, 8 * slot) for slot in range(entries)] == [
        (e.offset, e.position) for e in written]


def test_truncating_at_the_end_drops_an_epoch_begun_there(tmp_path):
    """A node that became leader (its epoch starting at the log end) and wrote
    nothing before losing the leadership: truncating to the end removes that
    epoch, as Kafka's truncateTo does, or the new leader's answer to every
    fetch would be the same divergence again."""
    lg = open_log(tmp_path)
    lg.epochs.assign(0, 0)
    for i in range(5):
        lg.append(batch(1_000 + i, 100))
    lg.epochs.assign(3, lg.log_end_offset)
    assert lg.epochs.latest_epoch == 3
    lg.truncate_to(lg.log_end_offset)
    assert lg.epochs.latest_epoch == 0
    assert lg.epochs.end_offset_for(0, lg.log_end_offset) == (0, lg.log_end_offset)
    lg.close()
