"""Drop-behind (log.cache.drop.behind.bytes): a log keeps its newest bytes in
the page cache and hands older ones to write-back and eviction.

Real files in tmp_path, real appends through the log manager; residency is
asked of the kernel (mincore), so tmpfs, which cannot evict, is skipped.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from log_helpers import batch, fs_type

from pylog.io import pagecache
from pylog.log import Log, LogConfig, LogManager
from pylog.log.config import ManagerConfig
from pylog.log.drop_behind import CHUNK, DropBehind
from pylog.server.config import BrokerConfig, ConfigError

MiB = 1 << 20
T0 = 1_000_000


@pytest.fixture(autouse=True)
def _evicting_fs(tmp_path: Path) -> None:
    if fs_type(tmp_path) == "tmpfs":
        pytest.skip("tmpfs keeps every page: nothing to evict")


def _manager(tmp_path: Path, window: int, segment_bytes: int = 6 * MiB) -> LogManager:
    return LogManager(tmp_path / "data", LogConfig(segment_bytes=segment_bytes),
                      time_ms=lambda: T0,
                      manager_config=ManagerConfig(cache_drop_behind_bytes=window))


def _fill(lg: Log, nbytes: int, size: int = 64 * 1024) -> list[bytes]:
    sent = []
    while sum(map(len, sent)) < nbytes:
        b = batch(T0, size)
        lg.append(b)
        sent.append(bytes(b))  # as stamped
    return sent


def _settle(lg: Log) -> None:
    """Wait for the log's last round (one worker thread: every earlier one too)."""
    assert lg.drop_behind is not None
    lg.drop_behind.wait(timeout=60)


def _resident_bytes(lg: Log) -> list[tuple[int, int]]:
    """(resident pages, pages) of each segment file, oldest first."""
    return [pagecache.resident_pages(s.fd, 0, s.size) for s in lg.segments]


def _read_back(lg: Log) -> bytes:
    return b"".join(os.pread(s.fd, s.size, 0) for s in lg.segments)


def test_only_the_window_stays_cached_and_everything_reads_back(tmp_path: Path) -> None:
    mgr = _manager(tmp_path, window=2 * MiB)
    lg = mgr.get_or_create_log("t", 0)
    sent = _fill(lg, 24 * MiB)
    _settle(lg)
    assert len(lg.segments) >= 4  # the rounds crossed rolls
    db = lg.drop_behind
    assert db is not None and db.dropped >= 24 * MiB - 2 * MiB - CHUNK - 64 * 1024
    resident = _resident_bytes(lg)
    # The segments wholly behind the window hold (almost) nothing; pages a
    # reader mapped would stay, and nothing mapped them here.
    behind = resident[:-2]
    assert behind and sum(r for r, _ in behind) <= sum(n for _, n in behind) // 10
    # The newest bytes were not touched: the active segment's last MiB is cached.
    active = lg.segments[-1]
    tail = pagecache.resident_pages(active.fd, max(active.size - MiB, 0), min(active.size, MiB))
    assert tail[0] == tail[1]
    # Evicted is not lost: the files hold every byte, in order.
    assert _read_back(lg) == b"".join(sent)
    mgr.close()


def test_minus_one_leaves_the_cache_to_the_kernel(tmp_path: Path) -> None:
    mgr = _manager(tmp_path, window=-1)
    lg = mgr.get_or_create_log("t", 0)
    assert lg.drop_behind is None
    _fill(lg, 12 * MiB)
    resident = _resident_bytes(lg)
    assert sum(r for r, _ in resident) == sum(n for _, n in resident)
    mgr.close()


def test_zero_window_drops_up_to_the_last_round(tmp_path: Path) -> None:
    mgr = _manager(tmp_path, window=0, segment_bytes=64 * MiB)
    lg = mgr.get_or_create_log("t", 0)
    _fill(lg, 3 * CHUNK + MiB)
    _settle(lg)
    db = lg.drop_behind
    assert db is not None and db.dropped >= 3 * CHUNK
    (segment,) = lg.segments
    resident, pages = pagecache.resident_pages(segment.fd, 0, 3 * CHUNK)
    assert resident <= pages // 10
    mgr.close()


def test_segments_deleted_or_truncated_under_it(tmp_path: Path) -> None:
    """Retention, DeleteRecords and truncation change the segments the
    bookkeeping points at: later rounds skip what is gone and go on."""
    mgr = _manager(tmp_path, window=MiB, segment_bytes=3 * MiB)
    lg = mgr.get_or_create_log("t", 0)
    _fill(lg, 5 * MiB)
    # Delete every inactive segment (as retention does) before a round ran.
    lg.delete_records_before(lg.segments[-1].base_offset)
    lg.delete_segments(lg.segments[:-1], T0)
    lg.truncate_to(lg.log_end_offset - 3)
    before = lg.drop_behind.dropped
    sent = _fill(lg, 16 * MiB)
    _settle(lg)
    assert lg.drop_behind.dropped > before + 8 * MiB
    assert _read_back(lg).endswith(b"".join(sent))
    mgr.close()


def test_restart_tracks_only_new_appends(tmp_path: Path) -> None:
    """Data already in the active segment at open is left to the kernel; the
    bookkeeping starts at its end."""
    mgr = _manager(tmp_path, window=MiB, segment_bytes=64 * MiB)
    _fill(mgr.get_or_create_log("t", 0), 3 * MiB)
    mgr.close()
    mgr = _manager(tmp_path, window=MiB, segment_bytes=64 * MiB)
    lg = mgr.get_or_create_log("t", 0)
    db = lg.drop_behind
    assert db is not None and db._extents[0][1] == lg.segments[-1].size
    _fill(lg, MiB)
    assert db.dropped == 0  # 1 MiB appended: nothing past window + chunk yet
    _fill(lg, CHUNK)
    _settle(lg)
    assert db.dropped >= CHUNK - MiB
    mgr.close()


def test_bad_windows() -> None:
    with pytest.raises(ValueError, match="log.cache.drop.behind.bytes"):
        ManagerConfig(cache_drop_behind_bytes=-2)
    with pytest.raises(ValueError, match=">= 0"):
        DropBehind(-1, None)  # type: ignore[arg-type]
    assert ManagerConfig().cache_drop_behind_bytes == -1  # Kafka's behaviour by default
    parsed = ManagerConfig.from_props({"log.cache.drop.behind.bytes": "0"})
    assert parsed.cache_drop_behind_bytes == 0
    with pytest.raises(ConfigError, match="log.cache.drop.behind.bytes"):
        BrokerConfig.load(overrides=["log.cache.drop.behind.bytes=lots"])


def test_no_descriptor_left_for_a_round_never_fails_the_append(tmp_path: Path) -> None:
    """A round works on a dup of the segment's descriptor; at the open-files
    limit the dup fails and the round is skipped, the append stands."""
    import resource

    mgr = _manager(tmp_path, window=0, segment_bytes=64 * MiB)
    lg = mgr.get_or_create_log("t", 0)
    # The first append under a leader epoch writes leader-epoch-checkpoint (a
    # file of its own, which needs a descriptor): written here, so that only
    # drop-behind's dups are starved below.
    lg.epochs.assign(lg.leader_epoch, 0)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + 8, hard))
    fillers = []
    try:
        while True:  # take every descriptor left (gaps below the limit too)
            try:
                fillers.append(os.open(os.devnull, os.O_RDONLY))
            except OSError:
                break
        sent = _fill(lg, 2 * CHUNK)
    finally:
        for fd in fillers:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert lg.drop_behind.dropped == 0
    assert _read_back(lg) == b"".join(sent)
    sent += _fill(lg, 2 * CHUNK)  # with descriptors again, rounds resume
    _settle(lg)
    assert lg.drop_behind.dropped >= 3 * CHUNK
    assert _read_back(lg) == b"".join(sent)
    mgr.close()
