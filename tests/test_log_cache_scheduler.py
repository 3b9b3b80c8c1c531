"""Page-cache awareness of the log (FetchSlice.is_cached, drop_cold_cache) and
the log manager's scheduler (run_due on a fake clock, one real thread).

Real files in tmp_path; fadvise/mincore go to the kernel.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from log_helpers import batch, fs_type

from pylog.io import pagecache
from pylog.log import Log, LogConfig, LogManager
from pylog.log.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    OffsetCheckpointFile,
)
from pylog.log.config import ManagerConfig

T0 = 1_000_000



def _filled_log(tmp_path: Path, clock: list[int], n: int = 40, size: int = 20_000,
                **cfg: int) -> tuple[Log, list[bytes]]:
    config = LogConfig(segment_bytes=cfg.pop("segment_bytes", 100_000), **cfg)
    lg = Log.open(tmp_path / "t-0", config, time_ms=lambda: clock[0])
    sent = []
    for _ in range(n):
        b = batch(clock[0], size)
        lg.append(b)
        sent.append(bytes(b))  # as stamped (offsets written in place)
    return lg, sent


def _read_all(lg: Log) -> bytes:
    out, offset = [], lg.log_start_offset
    while offset < lg.log_end_offset:
        s = lg.read(offset, 1 << 20)
        assert s.length > 0
        out.append(os.pread(s.fd, s.length, s.position))
        offset = _next_offset(out[-1])
    return b"".join(out)


def _next_offset(data: bytes) -> int:
    """The offset after the last batch of ``data`` (base + lastOffsetDelta + 1)."""
    pos, nxt = 0, -1
    while pos < len(data):
        base = int.from_bytes(data[pos:pos + 8], "big")
        length = int.from_bytes(data[pos + 8:pos + 12], "big", signed=True)
        delta = int.from_bytes(data[pos + 23:pos + 27], "big", signed=True)
        nxt = base + delta + 1
        pos += 12 + length
    return nxt


# -- FetchSlice.is_cached ---------------------------------------------------------


def test_fetch_slice_is_cached(tmp_path):
    clock = [T0]
    lg, _ = _filled_log(tmp_path, clock, n=10)
    s = lg.read(0, 1 << 20)
    assert s.length > 0 and s.is_cached()  # just written: in the page cache
    empty = lg.read(lg.log_end_offset, 1 << 20)
    assert empty.length == 0 and empty.is_cached()
    lg.flush()
    pagecache.drop_cache(s.fd)
    # The header walk of the read mapped the pages: mapped pages stay.
    assert pagecache.cached_fraction(s.fd, s.position, s.length) > 0
    s.segment.drop_cache()  # unmaps first
    if pagecache.cached_fraction(s.fd, s.position, s.length) > 0.5:
        pytest.skip(f"{fs_type(tmp_path)} at {tmp_path} keeps pages after "
                    "POSIX_FADV_DONTNEED")
    assert not s.is_cached()
    os.pread(s.fd, s.length, s.position)
    assert s.is_cached()
    lg.close()


def test_read_is_cached_before_the_read_touches_data(tmp_path):
    clock = [T0]
    lg, sent = _filled_log(tmp_path, clock)
    cold = lg.segments[0]
    assert lg.read_is_cached(0, 1 << 20)  # just written
    assert lg.read_is_cached(lg.log_end_offset, 1 << 20)  # nothing to read
    assert lg.read_is_cached(-5, 100)  # out of range: answered without data
    lg.flush()
    cold.drop_cache()
    if pagecache.cached_fraction(cold.fd) > 0.5:
        pytest.skip(f"{fs_type(tmp_path)} at {tmp_path} keeps pages after "
                    "POSIX_FADV_DONTNEED")
    # Asking did not fault the pages in: the answer stays False until a read.
    assert not lg.read_is_cached(0, 1 << 20)
    assert not lg.read_is_cached(0, 1 << 20)
    assert lg.read_is_cached(lg.active_segment.base_offset, 1 << 20)
    s = lg.read(0, 1 << 20)
    assert os.pread(s.fd, s.length, s.position) == b"".join(sent)[:s.length]
    assert lg.read_is_cached(0, s.length)
    lg.close()


# -- Log.drop_cold_cache ---------------------------------------------------------


def test_drop_cold_cache_drops_flushed_idle_segments_only(tmp_path):
    clock = [T0]
    lg, sent = _filled_log(tmp_path, clock)
    segments = lg.segments
    assert len(segments) >= 4
    cold, active = segments[0], lg.active_segment
    assert pagecache.cached_fraction(cold.fd) == 1.0

    # Not flushed yet (recovery point 0): nothing may be dropped.
    clock[0] += 10_000_000
    assert lg.drop_cold_cache(clock[0], 1000) == 0

    lg.flush()
    first_slice = lg.read(0, 100)  # maps segment 0 (a fetch in flight)
    clock[0] += 10_000_000
    # Read the second segment just now: it is not idle.
    lg.read(segments[1].base_offset, 100)
    assert segments[1].last_read_ms == clock[0]
    dropped = lg.drop_cold_cache(clock[0], 1000)
    inactive = [s for s in segments if s is not active]
    assert dropped == sum(s.size for s in inactive if s is not segments[1])
    assert segments[1].cache_dropped_at is None
    # Already dropped and not read since: not advised again.
    assert lg.drop_cold_cache(clock[0], 1000) == 0
    # The active segment is never dropped, even with idle_ms 0.
    assert active.cache_dropped_at is None
    assert lg.drop_cold_cache(clock[0] + 5000, 0) == segments[1].size
    assert active.cache_dropped_at is None and pagecache.cached_fraction(active.fd) == 1.0
    assert lg.drop_cold_cache(clock[0], -1) == 0  # -1: disabled

    fraction = pagecache.cached_fraction(cold.fd)
    if fraction > 0.5:
        pytest.skip(f"{fs_type(tmp_path)} at {tmp_path} keeps pages after "
                    f"POSIX_FADV_DONTNEED (cached fraction {fraction:.2f})")
    assert fraction < 0.1
    assert not first_slice.is_cached()

    # Reads still return the right bytes (from disk now) ...
    assert _read_all(lg) == b"".join(sent)
    assert pagecache.cached_fraction(cold.fd) == 1.0
    # ... and a read makes the segment a candidate again once idle.
    assert lg.drop_cold_cache(clock[0], 1000) == 0
    clock[0] += 1000
    assert lg.drop_cold_cache(clock[0], 1000) == sum(s.size for s in inactive)
    lg.close()


def test_rolled_segment_counts_as_read_at_roll(tmp_path):
    clock = [T0]
    lg, _ = _filled_log(tmp_path, clock, n=6)
    clock[0] += 50_000
    lg.roll()
    lg.flush()
    rolled = lg.segments[-2]
    assert rolled.last_read_ms == clock[0]
    assert lg.drop_cold_cache(clock[0] + 999, 1000) == sum(s.size for s in lg.segments[:-2])
    assert lg.drop_cold_cache(clock[0] + 1000, 1000) == rolled.size
    lg.close()


def test_manager_drop_cold_cache_uses_its_config(tmp_path):
    clock = [T0]
    cfg = LogConfig(segment_bytes=100_000)
    mgr = LogManager(tmp_path / "data", cfg, time_ms=lambda: clock[0],
                     manager_config=ManagerConfig(cache_drop_idle_ms=60_000))
    lg = mgr.get_or_create_log("t", 0)
    for _ in range(20):
        lg.append(batch(clock[0], 20_000))
    lg.flush()
    assert mgr.drop_cold_cache(clock[0] + 59_999) == 0
    cold = sum(s.size for s in lg.segments[:-1])
    assert cold > 0 and mgr.drop_cold_cache(clock[0] + 60_000) == cold
    mgr.close()
    off = LogManager(tmp_path / "data2", cfg, time_ms=lambda: clock[0],
                     manager_config=ManagerConfig(cache_drop_idle_ms=-1))
    lg = off.get_or_create_log("t", 0)
    for _ in range(20):
        lg.append(batch(clock[0], 20_000))
    lg.flush()
    assert off.drop_cold_cache(clock[0] + 10**9) == 0
    assert off.drop_cold_cache(clock[0] + 10**9, idle_ms=0) > 0  # explicit idle wins
    off.close()


# -- ManagerConfig ------------------------------------------------------------------


def test_manager_config_defaults_and_parsing():
    cfg = ManagerConfig()
    assert cfg.retention_check_interval_ms == 300_000
    assert cfg.flush_scheduler_interval_ms == 2**63 - 1
    assert cfg.flush_offset_checkpoint_interval_ms == 60_000
    assert cfg.flush_start_offset_checkpoint_interval_ms == 60_000
    assert cfg.cache_drop_idle_ms == 600_000
    parsed = ManagerConfig.from_props({
        "log.retention.check.interval.ms": "1000", "log.flush.scheduler.interval.ms": "500",
        "log.flush.offset.checkpoint.interval.ms": "0",
        "log.flush.start.offset.checkpoint.interval.ms": "7",
        "log.cache.drop.idle.ms": "-1", "log.dirs": "/x", "num.io.threads": "8"})
    assert parsed == ManagerConfig(1000, 500, 0, 7, -1)
    assert ManagerConfig.from_props(parsed.to_props()) == parsed
    # The per-log parser accepts the manager's keys (strict mode too).
    LogConfig.from_props({"log.cache.drop.idle.ms": "5", "segment.bytes": "1000"},
                         strict=True)


@pytest.mark.parametrize("key,value", [
    ("log.retention.check.interval.ms", "0"),
    ("log.retention.check.interval.ms", "soon"),
    ("log.flush.scheduler.interval.ms", "-5"),
    ("log.flush.offset.checkpoint.interval.ms", "-1"),
    ("log.flush.offset.checkpoint.interval.ms", str(2**31)),
    ("log.flush.start.offset.checkpoint.interval.ms", "-1"),
    ("log.cache.drop.idle.ms", "-2"),
])
def test_manager_config_errors_name_the_key(key, value):
    with pytest.raises(ValueError, match=key.replace(".", r"\.")):
        ManagerConfig.from_props({key: value})


def test_manager_config_checks_direct_values():
    with pytest.raises(ValueError, match=r"log\.retention\.check\.interval\.ms"):
        ManagerConfig(retention_check_interval_ms=0)
    with pytest.raises(ValueError, match=r"log\.cache\.drop\.idle\.ms"):
        ManagerConfig(cache_drop_idle_ms="10")  # type: ignore[arg-type]


# -- scheduler: run_due on a fake clock ------------------------------------------


def _manager(tmp_path, clock, log_cfg: LogConfig, **mcfg: int) -> LogManager:
    return LogManager(tmp_path / "data", log_cfg, time_ms=lambda: clock[0],
                      manager_config=ManagerConfig(**mcfg))


def test_run_due_runs_each_task_on_its_interval(tmp_path):
    clock = [T0]
    cfg = LogConfig(segment_bytes=10_000, retention_ms=60_000, file_delete_delay_ms=0)
    mgr = _manager(tmp_path, clock, cfg, retention_check_interval_ms=30_000,
                   flush_offset_checkpoint_interval_ms=20_000,
                   flush_start_offset_checkpoint_interval_ms=45_000,
                   cache_drop_idle_ms=100_000, hw_checkpoint_interval_ms=1_000_000)
    lg = mgr.get_or_create_log("t", 0)
    for _ in range(20):
        lg.append(batch(clock[0], 2000))
    data = tmp_path / "data"
    assert mgr.run_due() == []  # the first pass only schedules
    assert not (data / RECOVERY_POINT_CHECKPOINT).exists()

    clock[0] += 1000
    assert mgr.run_due() == ["flush-rolled"]  # rolled segments flushed ~at once
    assert lg.recovery_point == lg.active_segment.base_offset > 0
    clock[0] += 19_000
    assert mgr.run_due() == ["flush-rolled", "recovery-point-checkpoint"]
    points = OffsetCheckpointFile(data / RECOVERY_POINT_CHECKPOINT).read()
    assert points == {("t", 0): lg.recovery_point}
    assert not (data / LOG_START_OFFSET_CHECKPOINT).exists()
    clock[0] += 10_000
    assert mgr.run_due() == ["retention", "flush-rolled", "cache-drop"]
    n_segments = len(lg.segments)
    clock[0] += 15_000  # T0 + 45 s
    assert "log-start-offset-checkpoint" in mgr.run_due()
    assert OffsetCheckpointFile(data / LOG_START_OFFSET_CHECKPOINT).read() == {("t", 0): 0}
    clock[0] += 30_000  # T0 + 75 s: the data (written at T0) is past retention.ms
    assert "retention" in mgr.run_due()
    assert len(lg.segments) < n_segments and lg.log_start_offset > 0
    clock[0] += 45_000
    ran = mgr.run_due()
    assert "log-start-offset-checkpoint" in ran
    starts = OffsetCheckpointFile(data / LOG_START_OFFSET_CHECKPOINT).read()
    assert starts == {("t", 0): lg.log_start_offset}
    # log.flush.scheduler.interval.ms defaults to Long.MaxValue: flush.ms is never checked
    assert "flush" not in ran
    mgr.close()


def test_run_due_flush_ms_follows_the_scheduler_interval(tmp_path):
    clock = [T0]
    cfg = LogConfig(flush_ms=5000)
    mgr = _manager(tmp_path, clock, cfg, flush_scheduler_interval_ms=2000)
    lg = mgr.get_or_create_log("t", 0)
    mgr.run_due()
    lg.append(batch(clock[0]))
    clock[0] += 2000
    assert "flush" in mgr.run_due() and lg.recovery_point == 0  # flush.ms not reached
    clock[0] += 4000
    assert "flush" in mgr.run_due() and lg.recovery_point == 1
    mgr.close()
    # Kafka's default interval (Long.MaxValue): flush.ms is not checked.
    mgr = LogManager(tmp_path / "b", cfg, time_ms=lambda: clock[0])
    lg = mgr.get_or_create_log("t", 0)
    mgr.run_due()
    lg.append(batch(clock[0]))
    clock[0] += 10**7
    assert "flush" not in mgr.run_due() and lg.recovery_point == 0
    mgr.close()


def test_run_due_keeps_going_when_a_task_fails(tmp_path, caplog):
    clock = [T0]
    mgr = _manager(tmp_path, clock, LogConfig(), retention_check_interval_ms=10,
                   flush_offset_checkpoint_interval_ms=10)

    def boom(now: int) -> int:
        raise RuntimeError("disk on fire")

    mgr.run_retention = boom  # type: ignore[method-assign]
    mgr.run_due()
    clock[0] += 10
    ran = mgr.run_due()
    assert "retention" in ran and "recovery-point-checkpoint" in ran
    assert "disk on fire" in caplog.text
    mgr.close()


# -- scheduler: the real thread ------------------------------------------------------


def test_scheduler_thread_deletes_by_retention_and_stops(tmp_path):
    cfg = LogConfig(segment_bytes=4000, retention_ms=100, file_delete_delay_ms=0)
    mgr = LogManager(tmp_path / "data", cfg,
                     manager_config=ManagerConfig(retention_check_interval_ms=20,
                                                  flush_offset_checkpoint_interval_ms=20))
    lg = mgr.get_or_create_log("t", 0)
    old = int(time.time() * 1000) - 10_000  # batch timestamps already past retention.ms
    for _ in range(10):
        lg.append(batch(old, 1000))
    first = lg.segments[0].log_path
    assert len(lg.segments) > 2
    mgr.start_scheduler()
    mgr.start_scheduler()  # no-op
    assert mgr.scheduler_running
    deadline = time.monotonic() + 10
    # Both, not the file alone: the scheduler renames the file, then (still
    # under the log's lock, which this thread does not take) moves the start.
    while (first.exists() or lg.log_start_offset == 0) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not first.exists(), "retention did not run within 10 s"
    assert lg.log_start_offset > 0
    mgr.stop_scheduler()
    assert not mgr.scheduler_running
    mgr.start_scheduler()
    mgr.close()  # stops the thread, then shuts down cleanly
    assert not mgr.scheduler_running
    assert (tmp_path / "data" / ".kafka_cleanshutdown").exists()
    with pytest.raises(RuntimeError):
        mgr.start_scheduler()
