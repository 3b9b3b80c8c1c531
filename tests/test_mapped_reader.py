"""Zero-copy reading of segment files through a memory map."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from pylog.log.mapped_reader import (
    MappedSegment,
    SegmentError,
    iter_segment_batches,
    read_segment_records,
    scan_segment,
)
from pylog.records import build_batch

TS = 1_700_000_000_000


def _batch(base: int, n: int) -> bytes:
    return build_batch([(TS + i, f"k{base + i}".encode(), f"v{base + i}".encode())
                        for i in range(n)], base_offset=base)


def test_batches_and_records(tmp_path: Path) -> None:
    data = _batch(0, 3) + _batch(3, 2)
    path = tmp_path / "0.log"
    path.write_bytes(data)
    batches = list(iter_segment_batches(path))
    assert [(b.base_offset, b.last_offset, b.record_count) for b in batches] == [
        (0, 2, 3), (3, 4, 2)]
    assert [b.position for b in batches] == [0, len(_batch(0, 3))]
    recs = list(read_segment_records(path))
    assert [(r.offset, r.key, r.value) for r in recs] == [
        (i, f"k{i}".encode(), f"v{i}".encode()) for i in range(5)]


def test_the_map_is_not_copied(tmp_path: Path) -> None:
    path = tmp_path / "0.log"
    path.write_bytes(_batch(0, 2))
    seg = MappedSegment(path)
    assert isinstance(seg.buffer, pa.Buffer)
    before = pa.total_allocated_bytes()
    list(seg.batches())
    assert pa.total_allocated_bytes() == before  # the map, not a pyarrow copy


def test_torn_tail_is_reported_not_raised(tmp_path: Path) -> None:
    good = _batch(0, 3)
    path = tmp_path / "0.log"
    path.write_bytes(good + _batch(3, 3)[:25])
    errors: list[SegmentError] = []
    batches = list(iter_segment_batches(path, on_error=errors.append))
    assert len(batches) == 1
    (err,) = errors
    assert err.position == len(good) and err.batch_index == 1
    assert err.check == "truncated" and err.trailing_bytes == 25
    assert str(path) in str(err)


def test_scan_segment(tmp_path: Path) -> None:
    a, b = _batch(0, 2), bytearray(_batch(2, 2))
    b[-1] ^= 1
    path = tmp_path / "0.log"
    path.write_bytes(a + bytes(b))
    scan = scan_segment(path)
    assert len(scan.batches) == 1 and scan.valid_bytes == len(a)
    assert scan.size == len(a) + len(b)
    assert scan.error is not None and scan.error.check == "crc"


def test_resume_after_a_bad_batch(tmp_path: Path) -> None:
    a, b, c = _batch(0, 1), bytearray(_batch(1, 1)), _batch(2, 1)
    b[-1] ^= 1
    path = tmp_path / "0.log"
    path.write_bytes(a + bytes(b) + c)
    seg = MappedSegment(path)
    assert [p for p, _ in seg.batches()] == [0]
    assert seg.error is not None
    later = list(seg.batches(len(a) + len(b)))
    assert [(p, bt.base_offset) for p, bt in later] == [(len(a) + len(b), 2)]
    assert seg.error is None


def test_max_bytes_cut_is_not_an_error(tmp_path: Path) -> None:
    a = _batch(0, 2)
    path = tmp_path / "0.log"
    path.write_bytes(a + _batch(2, 2))
    seg = MappedSegment(path, max_bytes=len(a) + 5)
    assert [p for p, _ in seg.batches()] == [0]
    assert seg.error is None and seg.limited


def test_empty_segment(tmp_path: Path) -> None:
    path = tmp_path / "0.log"
    path.write_bytes(b"")
    assert list(iter_segment_batches(path)) == []
    assert scan_segment(path).error is None
