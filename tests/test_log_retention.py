"""Retention, flushing, checkpoints and the log manager, on a fake clock."""

from __future__ import annotations

import pytest
from log_helpers import batch

from pylog.log import LogConfig, LogManager, OffsetOutOfRangeError
from pylog.log.checkpoint import OffsetCheckpointFile
from pylog.log.dir_lock import LogDirLockedError
from pylog.log.manager import CLEAN_SHUTDOWN_FILE


def manager(tmp_path, clock, **props):
    cfg = LogConfig.from_props({k.replace("_", "."): str(v) for k, v in props.items()})
    return LogManager(tmp_path / "data", cfg, time_ms=lambda: clock[0])


def test_time_retention_and_rolling_the_expired_active_segment(tmp_path):
    clock = [1_000_000]
    mgr = manager(tmp_path, clock, segment_bytes=16 * 1024, retention_ms=60_000,
                  file_delete_delay_ms=0)
    lg = mgr.get_or_create_log("t", 0)
    for _ in range(60):
        clock[0] += 1000
        lg.append(batch(clock[0], 1000))
    n_segments = len(lg.segments)
    assert n_segments > 3
    assert mgr.run_retention(clock[0]) == 0
    clock[0] += 30_000  # the first ~30 s of data is now older than retention.ms
    deleted = mgr.run_retention(clock[0])
    assert 0 < deleted < n_segments
    assert lg.log_start_offset == lg.segments[0].base_offset > 0
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(0, 100)
    assert len(list(lg.dir.glob("*.log"))) == len(lg.segments)
    clock[0] += 120_000  # everything expired, the active segment too: it is rolled
    mgr.run_retention(clock[0])
    assert [s.base_offset for s in lg.segments] == [60] and lg.segments[0].size == 0
    assert lg.log_start_offset == 60 == lg.log_end_offset
    assert lg.append(batch(clock[0])).base_offset == 60
    mgr.close()


def test_size_retention(tmp_path):
    clock = [1_000_000]
    mgr = manager(tmp_path, clock, segment_bytes=10_000, retention_bytes=30_000,
                  file_delete_delay_ms=0)
    lg = mgr.get_or_create_log("t", 0)
    for _ in range(100):
        lg.append(batch(clock[0], 1000))
    mgr.run_retention()
    assert lg.size <= 30_000 + 10_000
    assert sum(s.size for s in lg.segments[1:]) < 30_000
    assert lg.log_start_offset == lg.segments[0].base_offset
    mgr.close()


def test_delete_delay_keeps_files_for_fetches_in_flight(tmp_path):
    clock = [1_000_000]
    mgr = manager(tmp_path, clock, segment_bytes=4_000, retention_bytes=5_000,
                  file_delete_delay_ms=10_000)
    lg = mgr.get_or_create_log("t", 0)
    for _ in range(20):
        lg.append(batch(clock[0], 1000))
    inflight = lg.read(0, 100)
    mgr.run_retention()
    assert list(lg.dir.glob("*.deleted"))
    assert len(inflight.segment.log_path.read_bytes()) > 0  # still readable
    clock[0] += 10_000
    mgr.run_retention()
    assert not list(lg.dir.glob("*.deleted"))
    mgr.close()


def test_delete_records_then_retention(tmp_path):
    clock = [1_000_000]
    mgr = manager(tmp_path, clock, segment_bytes=5_000, file_delete_delay_ms=0)
    lg = mgr.get_or_create_log("t", 0)
    for _ in range(30):
        lg.append(batch(clock[0], 1000))
    with pytest.raises(OffsetOutOfRangeError):
        lg.delete_records_before(31)
    lg.delete_records_before(12)
    assert lg.log_start_offset == 12
    mgr.run_retention()
    assert lg.segments[0].base_offset <= 12 < lg.segments[1].base_offset
    assert lg.log_start_offset == 12
    mgr.close()
    mgr = manager(tmp_path, clock, segment_bytes=5_000)
    assert mgr.get_log("t", 0).log_start_offset == 12
    mgr.close()


def test_flush_policies(tmp_path):
    clock = [1_000_000]
    mgr = manager(tmp_path, clock, flush_messages=5)
    lg = mgr.get_or_create_log("t", 0)
    for _ in range(4):
        lg.append(batch(1))
    assert lg.recovery_point == 0
    lg.append(batch(1))
    assert lg.recovery_point == 5 and lg.unflushed_messages == 0
    mgr.close()
    mgr = manager(tmp_path / "b", clock, flush_ms=1000, segment_bytes=3000)
    lg = mgr.get_or_create_log("t", 0)
    for _ in range(7):
        lg.append(batch(1))
    assert lg.recovery_point == 0
    assert mgr.flush_due(clock[0]) == 1          # rolled segments: flushed up to the active
    assert lg.recovery_point == lg.active_segment.base_offset > 0
    clock[0] += 1000
    mgr.flush_due(clock[0])
    assert lg.recovery_point == lg.log_end_offset == 7
    mgr.close()


def test_manager_checkpoints_shutdown_marker_and_delete_topic(tmp_path):
    clock = [1_000_000]
    mgr = manager(tmp_path, clock, segment_bytes=4000)
    for p in range(3):
        lg = mgr.get_or_create_log("orders", p)
        for _ in range(p + 5):
            lg.append(batch(clock[0]))
    other = mgr.get_or_create_log("other", 0)
    other.append(batch(1))
    data = tmp_path / "data"
    assert (data / "meta.properties").read_text().count("node.id=0") == 1
    assert not (data / CLEAN_SHUTDOWN_FILE).exists()
    mgr.checkpoint()
    text = (data / "recovery-point-offset-checkpoint").read_text().splitlines()
    assert text[:2] == ["0", "4"] and "orders 2 0" in text
    mgr.close()
    assert (data / CLEAN_SHUTDOWN_FILE).exists()
    points = OffsetCheckpointFile(data / "recovery-point-offset-checkpoint").read()
    assert points == {("orders", 0): 5, ("orders", 1): 6, ("orders", 2): 7, ("other", 0): 1}

    mgr = manager(tmp_path, clock, segment_bytes=4000)
    assert mgr.had_clean_shutdown and not (data / CLEAN_SHUTDOWN_FILE).exists()
    assert mgr.get_log("orders", 2).log_end_offset == 7
    assert mgr.delete_topic("orders") == 3
    assert sorted(p.name for p in data.iterdir() if p.is_dir()) == ["other-0"]
    assert mgr.get_log("orders", 0) is None
    (data / "gone-0.abc-delete").mkdir()   # a deletion interrupted by a crash
    mgr.close()
    mgr = manager(tmp_path, clock)
    assert not (data / "gone-0.abc-delete").exists()
    assert set(mgr.logs()) == {("other", 0)}
    mgr.close()


def test_unclean_manager_restart_recovers(tmp_path):
    clock = [1_000_000]
    mgr = manager(tmp_path, clock, segment_bytes=4000)
    lg = mgr.get_or_create_log("t", 0)
    for _ in range(10):
        lg.append(batch(1))
    mgr.flush_due(clock[0])
    mgr.checkpoint()
    # no close(): like a killed process (files stay as written); its death
    # drops its lock on the dir, nothing else
    mgr.dir_lock.release()
    active = lg.active_segment.log_path
    with open(active, "ab") as f:
        f.write(b"\xff" * 100)
    mgr2 = manager(tmp_path, clock, segment_bytes=4000)
    assert not mgr2.had_clean_shutdown
    assert mgr2.get_log("t", 0).log_end_offset == 10
    mgr2.close()


def test_checkpoint_file_format(tmp_path):
    f = OffsetCheckpointFile(tmp_path / "cp")
    assert f.read() == {}
    f.write({("a-b", 3): 17, ("x", 0): 0})
    assert (tmp_path / "cp").read_text() == "0\n2\na-b 3 17\nx 0 0\n"
    assert f.read() == {("a-b", 3): 17, ("x", 0): 0}
    (tmp_path / "cp").write_text("0\n3\na 1 2\n")
    with pytest.raises(ValueError):
        f.read()


def test_second_manager_on_a_locked_dir_is_refused(tmp_path):
    """Kafka's lockLogDirs: one owner per log dir, in this process too."""
    clock = [1_000_000]
    mgr = manager(tmp_path, clock)
    mgr.get_or_create_log("t", 0).append(batch(1))
    with pytest.raises(LogDirLockedError, match=r"Failed to acquire lock on file \.lock in "):
        manager(tmp_path, clock)
    assert mgr.get_log("t", 0).log_end_offset == 1  # the owner is untouched
    mgr.close()
    mgr2 = manager(tmp_path, clock)  # released by the clean close
    assert mgr2.get_log("t", 0).log_end_offset == 1
    mgr2.close()


def test_high_watermarks_are_checkpointed_and_reloaded(tmp_path):
    """replication-offset-checkpoint: a restarted replica starts at the high
    watermark it had, not at its log end (records above it were never
    committed: a cluster node must not expose them as if they were)."""
    from pylog.log.checkpoint import REPLICATION_OFFSET_CHECKPOINT

    clock = [1_000_000]
    mgr = manager(tmp_path, clock)
    lg = mgr.get_or_create_log("t", 0)
    lg.hw_follows_leo = False  # a replicated partition: the ISR moves it
    for _ in range(10):
        lg.append(batch(1))
    lg.high_watermark = 4
    mgr.close()
    text = (tmp_path / "data" / REPLICATION_OFFSET_CHECKPOINT).read_text()
    assert text == "0\n1\nt 0 4\n"
    mgr = manager(tmp_path, clock)
    again = mgr.get_log("t", 0)
    assert (again.log_end_offset, again.high_watermark) == (10, 4)
    mgr.close()
