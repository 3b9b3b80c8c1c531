"""The append fast path: nothing committed before the bytes are in the file,
rejection of batches that do not continue a segment, roll decisions.

Write failures are real: RLIMIT_FSIZE makes the kernel refuse bytes past a
size (EFBIG; Python ignores SIGXFSZ), first with a short write, then an error.
"""

from __future__ import annotations

import errno
import os
import resource
from array import array
from contextlib import contextmanager

import pytest
from log_helpers import batch, scan_dir

from pylog.io.posix import PosixBackend
from pylog.log import Log, LogConfig
from pylog.log.errors import InvalidOffsetError
from pylog.records import build_batch, stamp


class WrappedPosix(PosixBackend):
    """Real posix I/O, but not the exact class: the segment takes the Python
    write path (backend.pwritev / write_all) instead of the native one."""


@contextmanager
def file_size_limit(limit: int):
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


def _snapshot(lg: Log) -> tuple:
    seg = lg.active_segment
    return (seg.size, os.fstat(seg.fd).st_size, lg.log_end_offset, seg.next_offset,
            seg.offset_index.entries, seg.time_index.entries, array("q", seg._state))


@pytest.mark.parametrize("backend", [PosixBackend, WrappedPosix])
def test_failed_write_commits_nothing(tmp_path, backend):
    clock = [1_000_000]
    lg = Log.open(tmp_path / "t-0", LogConfig(index_interval_bytes=0),
                  time_ms=lambda: clock[0], backend=backend())
    assert lg.active_segment._native_write is (backend is PosixBackend)
    for i in range(3):
        lg.append(batch(clock[0] + i, 2000))
    before = _snapshot(lg)
    size = before[0]
    with file_size_limit(size + 1000), pytest.raises(OSError) as exc:
        lg.append(batch(clock[0] + 10, 2000))  # 1000 bytes fit: a short write, then EFBIG
    assert exc.value.errno == errno.EFBIG
    assert _snapshot(lg) == before  # file cut back; state, offsets, index counts as before
    res = lg.append(batch(clock[0] + 11, 2000))
    assert res.base_offset == 3 and lg.log_end_offset == 4
    assert lg.active_segment.offset_index.entries == before[4] + 1
    assert lg.active_segment.max_timestamp_so_far.timestamp == clock[0] + 11
    layout = scan_dir(lg.dir)
    assert [b[2] for b in layout] == [0, 1, 2, 3]
    assert lg.read(3, 100).position == size
    lg.close_handlers()  # no clean close: the reopen recovers from scratch
    again = Log.open(tmp_path / "t-0", LogConfig(index_interval_bytes=0), recovery_point=0)
    assert again.log_end_offset == 4 and scan_dir(again.dir) == layout
    assert again.active_segment.offset_index.entries == before[4] + 1
    again.close()


def test_segment_rejects_batches_that_do_not_continue_it(tmp_path):
    lg = Log.open(tmp_path / "t-0")
    lg.append(batch(1))
    seg = lg.active_segment
    before = _snapshot(lg)
    for base in (0, 5):  # a repeat, a gap
        b = batch(2)
        stamp(b, base, 0)
        with pytest.raises(InvalidOffsetError, match="do not continue"):
            seg.append(b, 2)
        assert _snapshot(lg) == before
    b = batch(2)
    stamp(b, 1, 0)
    seg.append(b, 2)
    assert seg.next_offset == 2 and seg.size > before[0]
    lg.close()


def test_roll_by_wall_clock_when_batches_have_no_timestamps(tmp_path):
    clock = [1_000_000]
    lg = Log.open(tmp_path / "t-0", LogConfig(segment_ms=1000), time_ms=lambda: clock[0])

    def no_ts() -> bytearray:
        return bytearray(build_batch([(-1, b"k", b"v" * 100)]))

    lg.append(no_ts())
    clock[0] += 1000
    lg.append(no_ts())
    assert len(lg.segments) == 1  # not more than segment.ms since creation
    clock[0] += 1
    lg.append(no_ts())
    assert [s.base_offset for s in lg.segments] == [0, 2]
    lg.close()


def test_roll_before_append_when_segment_is_full(tmp_path):
    lg = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=5000))
    sizes = []
    for i in range(6):
        b = batch(i, 2000)
        sizes.append(len(b))
        lg.append(b)
    assert all(s.size <= 5000 for s in lg.segments)
    assert [s.base_offset for s in lg.segments] == [0, 2, 4]
    seg = lg.segments[0]
    assert seg.should_roll(0, 0, 2, sizes[2]) is True       # would pass segment.bytes
    assert lg.active_segment.should_roll(0, 5, 5, 10) is False
    lg.close()


class GatedFsync(PosixBackend):
    """Real fdatasync, held at a gate so the test can act while one is running."""

    def __init__(self) -> None:
        import threading

        self.entered = threading.Event()
        self.gate = threading.Event()

    def fdatasync(self, fd: int) -> None:
        self.entered.set()
        assert self.gate.wait(10), "the test never opened the gate"
        super().fdatasync(fd)


def test_appends_do_not_wait_for_a_running_fsync(tmp_path):
    import threading

    backend = GatedFsync()
    lg = Log.open(tmp_path / "t-0", LogConfig(), backend=backend)
    lg.append(batch(0, 1000))
    flusher = threading.Thread(target=lg.flush)
    flusher.start()
    assert backend.entered.wait(10)
    # fdatasync is in progress (held at the gate): appends and reads go on.
    done = threading.Event()

    def append_more() -> None:
        for _ in range(5):
            lg.append(batch(0, 1000))
        lg.read(0, 1 << 20)
        done.set()

    appender = threading.Thread(target=append_more)
    appender.start()
    appended = done.wait(10)
    backend.gate.set()
    flusher.join(10)
    appender.join(10)
    assert appended, "an append waited for the fsync"
    # The flush covered what was there when it started, not more.
    assert lg.recovery_point == 1 and lg.log_end_offset == 6
    lg.flush()
    assert lg.recovery_point == 6
    lg.close()
