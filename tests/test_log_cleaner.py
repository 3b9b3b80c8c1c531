"""``LogCleaner`` on real logs in a temp dir (no broker, no mocks).

Only flushed, inactive segments are cleaned, so each test flushes first.  The
reference: after cleaning up to ``end`` (the cleaner's checkpoint), a record
below ``end`` stays exactly when it is its key's latest record below ``end``
(tombstones stay within ``delete.retention.ms``, a day by default); every
record from ``end`` on is as appended.
"""

from __future__ import annotations

import os
import random
import shutil
import threading
import time
from pathlib import Path

from broker_process import wait_for
from log_helpers import read_log

from pylog.log import Log
from pylog.log.cleaner import LogCleaner, cleanable
from pylog.log.config import CleanerConfig, LogConfig
from pylog.records import BatchBuilder, build_batch
from pylog.records.markers import marker_batch

Produced = list[tuple[bytes, bytes | None]]  # by offset


def _config(**kw) -> LogConfig:
    base = dict(segment_bytes=4096, cleanup_policy=("compact",), min_cleanable_dirty_ratio=0.01,
                file_delete_delay_ms=0)
    base.update(kw)
    return LogConfig(**base)


def _append(lg: Log, produced: Produced, records: Produced, per_batch: int = 5,
            ts: int | None = None, codec: int = 0) -> None:
    now = int(time.time() * 1000) if ts is None else ts
    for i in range(0, len(records), per_batch):
        chunk = records[i:i + per_batch]
        lg.append(bytearray(build_batch([(now, k, v) for k, v in chunk], compression=codec)))
        produced.extend(chunk)


_read = read_log


def _expected(produced: Produced, end: int, start: int = 0) -> list[tuple]:
    latest = {k: o for o, (k, _) in enumerate(produced[:end])}
    return [(o, k, v) for o, (k, v) in enumerate(produced)
            if o >= start and (o >= end or latest[k] == o)]


def _cleaner(d: Path, logs: dict, **kw) -> LogCleaner:
    kw.setdefault("threads", 0)  # clean() by hand
    return LogCleaner(d, lambda: logs, CleanerConfig(**kw))


def _leftovers(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.name.endswith((".cleaned", ".swap")))


def _updates(rng: random.Random, n: int, keys: int, tag: str = "v") -> Produced:
    return [(b"key-%d" % rng.randrange(keys), b"%s-%d" % (tag.encode(), i)) for i in range(n)]


def test_clean_is_stable_and_a_second_pass_merges_segments(tmp_path: Path) -> None:
    rng = random.Random(1)
    lg = Log.open(tmp_path / "t-0", _config())
    produced: Produced = []
    _append(lg, produced, _updates(rng, 1500, 30), codec=1)
    _append(lg, produced, [(b"key-%d" % k, None) for k in range(3)])  # tombstones
    _append(lg, produced, _updates(rng, 300, 30, "w"))
    lg.flush()
    logs = {("t", 0): lg}
    cleaner = _cleaner(tmp_path, logs)
    stats = cleaner.clean(lg)
    assert stats is not None
    end = stats.end_offset
    assert end == lg.segments[-1].base_offset  # everything but the active segment
    assert cleaner.checkpoint_of(("t", 0)) == end
    assert _read(lg) == _expected(produced, end)
    assert stats.records_read == end and stats.records_kept == len(
        [r for r in _expected(produced, end) if r[0] < end])
    segments_after_first = len(lg.segments)
    assert segments_after_first > 3  # small cleaned segments, not merged yet
    # Nothing new: nothing to do, nothing changes.
    assert cleaner.clean(lg) is None
    assert _read(lg) == _expected(produced, end)

    # More appends (a few of the old keys, many fresh ones): the second pass
    # rewrites the whole cleaned part and merges the small segments.
    _append(lg, produced, [(b"fresh-%d" % i, b"x" * 40) for i in range(400)]
            + [(b"key-5", b"newest")])
    lg.flush()
    stats = cleaner.clean(lg)
    end2 = stats.end_offset
    assert end2 > end
    assert _read(lg) == _expected(produced, end2)
    cleaned_part = [s for s in lg.segments if s.base_offset < end]
    assert len(cleaned_part) < segments_after_first - 1, lg.segments
    assert all(s.size <= lg.config.segment_bytes for s in lg.segments)
    # Stable: a cleaner without a checkpoint cleans the cleaned log again from
    # its start (its rebuilt batches fed back in) and changes no record.
    before = _read(lg)
    (tmp_path / "other").mkdir()
    stats = _cleaner(tmp_path / "other", logs).clean(lg)
    assert stats is not None and stats.end_offset == end2
    assert stats.records_kept == stats.records_read
    assert _read(lg) == before
    _append(lg, produced, [(b"other-%d" % i, b"y" * 40) for i in range(400)])
    lg.flush()
    stats = cleaner.clean(lg)
    assert stats is not None and stats.end_offset > end2
    assert _read(lg) == _expected(produced, stats.end_offset)
    assert not _leftovers(lg.dir)
    # A reopen (clean or not) reads the same.
    final = _read(lg)
    lg.close()
    for clean_shutdown in (True, False):
        lg = Log.open(tmp_path / "t-0", _config(), had_clean_shutdown=clean_shutdown,
                      cleaned_to=stats.end_offset)
        assert _read(lg) == final
        assert lg.log_end_offset == len(produced)
        lg.close()


def test_small_offset_map_cleans_in_several_passes_like_one_big_pass(tmp_path: Path) -> None:
    rng = random.Random(2)
    lg = Log.open(tmp_path / "small" / "t-0", _config())
    produced: Produced = []
    _append(lg, produced, _updates(rng, 3000, 200), codec=3)
    lg.flush()
    twin_dir = tmp_path / "big" / "t-0"
    shutil.copytree(lg.dir, twin_dir)
    twin = Log.open(twin_dir, _config(), had_clean_shutdown=False)
    twin.flush()

    # 64 slots, 57 keys at 0.9: far fewer than the 200 keys of the dirty part.
    small = _cleaner(lg.dir.parent, {("t", 0): lg}, dedupe_buffer_size=64 * 24)
    passes, ends = 0, []
    while (stats := small.clean(lg)) is not None:
        passes += 1
        ends.append(stats.end_offset)
        assert stats.map_utilization <= 1.0
        assert _read(lg) == _expected(produced, stats.end_offset)
        assert passes < 200
    # A full map ends a pass mid-segment; the next pass must go on from its
    # end, not give up on the log.
    assert ("t", 0) not in small.uncleanable
    assert passes > 3
    assert ends == sorted(ends)
    end = lg.segments[-1].base_offset
    assert ends[-1] == end

    big = _cleaner(twin.dir.parent, {("t", 0): twin})
    stats = big.clean(twin)
    assert stats.end_offset == end
    assert _read(lg) == _read(twin) == _expected(produced, end)
    lg.close()
    twin.close()


def test_min_compaction_lag_keeps_recent_segments_dirty(tmp_path: Path) -> None:
    rng = random.Random(3)
    now = int(time.time() * 1000)
    hour = 3600 * 1000
    lg = Log.open(tmp_path / "t-0", _config(min_compaction_lag_ms=hour))
    produced: Produced = []
    _append(lg, produced, _updates(rng, 800, 20), ts=now - 2 * hour)
    lg.roll()
    first_recent = len(produced)
    _append(lg, produced, _updates(rng, 800, 20, "recent"), ts=now)
    lg.flush()
    cleaner = _cleaner(tmp_path, {("t", 0): lg})
    stats = cleaner.clean(lg, now_ms=now)
    assert stats is not None
    assert stats.end_offset == first_recent
    got = _read(lg)
    assert got == _expected(produced, first_recent)
    assert [r for r in got if r[0] >= first_recent] == [
        (o, k, v) for o, (k, v) in enumerate(produced) if o >= first_recent]
    # Later (the lag passed), the recent part is cleaned too.
    stats = cleaner.clean(lg, now_ms=now + 2 * hour)
    assert stats is not None and stats.end_offset == lg.segments[-1].base_offset
    assert _read(lg) == _expected(produced, stats.end_offset)
    lg.close()


def test_max_compaction_lag_makes_a_log_due_below_the_ratio(tmp_path: Path) -> None:
    now = int(time.time() * 1000)
    hour = 3600 * 1000
    logs, produced = {}, {}
    for name, lag in (("lazy", 2**63 - 1), ("overdue", hour)):
        lg = Log.open(tmp_path / f"{name}-0", _config(min_cleanable_dirty_ratio=0.9,
                                                      max_compaction_lag_ms=lag))
        produced[name] = []
        # Unique keys: cleaning keeps all of it, the clean part stays large.
        _append(lg, produced[name], [(b"u-%d" % i, b"z" * 30) for i in range(1500)],
                ts=now - 3 * hour)
        lg.flush()
        logs[(name, 0)] = lg
    cleaner = _cleaner(tmp_path, logs)
    for lg in logs.values():
        assert cleaner.clean(lg, now_ms=now) is not None  # clean() ignores the ratio
        # A little dirty data, old: a few updates of the same keys.
        _append(lg, produced[lg.topic], [(b"u-%d" % i, b"new") for i in range(60)],
                ts=now - 2 * hour)
        lg.roll()
        lg.flush()
    for (name, _), lg in logs.items():
        found = cleanable(lg, cleaner.checkpoint_of((name, 0)), now)
        assert 0 < found.ratio < 0.9
        assert found.overdue == (name == "overdue")
    stats = cleaner.clean_dirtiest(now_ms=now)
    assert stats is not None and stats.topic == "overdue"
    assert cleaner.clean_dirtiest(now_ms=now) is None  # the lazy one is not due
    overdue = logs[("overdue", 0)]
    assert _read(overdue) == _expected(produced["overdue"], stats.end_offset)
    assert len(_read(logs[("lazy", 0)])) == len(produced["lazy"])
    for lg in logs.values():
        lg.close()


def _big_log(d: Path, rng: random.Random, produced: Produced, n: int = 2500) -> Log:
    lg = Log.open(d, _config())
    _append(lg, produced, [(b"key-%d" % rng.randrange(100), os.urandom(20)) for _ in range(n)])
    lg.flush()
    return lg


def _check_nothing_lost(got: list[tuple], produced: Produced, start: int) -> None:
    """Offsets and values as appended, and every key's latest record there."""
    offsets = [o for o, _, _ in got]
    assert offsets == sorted(set(offsets))
    for o, k, v in got:
        assert produced[o] == (k, v), o
    latest = {k: o for o, (k, _) in enumerate(produced)}
    assert {o for o in latest.values() if o >= start} <= set(offsets)
    # Each key at most once below the lowest offset any clean could reach.


def _clean_in_thread(cleaner: LogCleaner, lg: Log) -> tuple[threading.Thread, list]:
    result: list = []
    thread = threading.Thread(target=lambda: result.append(cleaner.clean(lg)))
    thread.start()
    # The clean is under way once its first .cleaned segment is written.
    wait_for(lambda: any(p.name.endswith(".cleaned") for p in lg.dir.iterdir())
             or not thread.is_alive(), 30, "a .cleaned file", interval=0.005)
    return thread, result


def test_retention_racing_a_clean_loses_nothing(tmp_path: Path) -> None:
    rng = random.Random(4)
    produced: Produced = []
    lg = _big_log(tmp_path / "t-0", rng, produced)
    # Throttled to 100 kB/s of reads and writes: a clean of a few seconds.
    cleaner = _cleaner(tmp_path, {("t", 0): lg}, io_max_bytes_per_second=100_000.0,
                       io_buffer_size=1)
    thread, result = _clean_in_thread(cleaner, lg)
    cut = lg.segments[3].base_offset
    lg.delete_records_before(cut)
    lg.delete_old_segments()
    assert lg.segments[0].base_offset >= cut
    thread.join(60)
    assert not thread.is_alive()
    assert not _leftovers(lg.dir)
    got = _read(lg)
    assert got[0][0] >= cut
    _check_nothing_lost(got, produced, lg.log_start_offset)
    # And once more, undisturbed: the log is cleaned right.
    lg.flush()
    cleaner = _cleaner(tmp_path, {("t", 0): lg})
    stats = cleaner.clean(lg)
    if stats is not None:
        assert _read(lg) == _expected(produced, stats.end_offset, lg.log_start_offset)
    lg.close()


def test_topic_deletion_racing_a_clean_leaves_no_cleaned_files(tmp_path: Path) -> None:
    rng = random.Random(5)
    produced: Produced = []
    lg = _big_log(tmp_path / "t-0", rng, produced)
    cleaner = _cleaner(tmp_path, {("t", 0): lg}, io_max_bytes_per_second=100_000.0,
                       io_buffer_size=1)
    thread, result = _clean_in_thread(cleaner, lg)
    lg.close_handlers()  # what LogManager.delete_log does first
    thread.join(60)
    assert not thread.is_alive()
    assert result == [None]  # the clean was dropped
    assert not _leftovers(lg.dir)
    assert cleaner.checkpoint_of(("t", 0)) is None
    # The files left behind hold every record (the dir is removed afterwards).
    again = Log.open(lg.dir, _config(), had_clean_shutdown=False)
    _check_nothing_lost(_read(again), produced, 0)
    assert again.log_end_offset == len(produced)
    again.close()


def test_stop_mid_clean_removes_its_cleaned_files(tmp_path: Path) -> None:
    rng = random.Random(6)
    produced: Produced = []
    lg = _big_log(tmp_path / "t-0", rng, produced)
    before = _read(lg)
    logs = {("t", 0): lg}
    cleaner = LogCleaner(tmp_path, lambda: logs, CleanerConfig(
        threads=1, backoff_ms=10, io_max_bytes_per_second=100_000.0, io_buffer_size=1))
    cleaner.start()
    wait_for(lambda: any(p.name.endswith(".cleaned") for p in lg.dir.iterdir()), 30,
             "a .cleaned file", interval=0.005)
    cleaner.stop()
    assert not cleaner.running
    assert not _leftovers(lg.dir)
    got = _read(lg)
    _check_nothing_lost(got, produced, 0)
    # Whatever was swapped in before the stop is a correct clean of a prefix.
    assert set(got) <= set(before)
    lg.close()


def test_a_log_never_written_in_transactions_has_its_headers_scanned_once(
        tmp_path: Path) -> None:
    """The transaction scan reads the whole log's headers; once it found no
    transactional batch below an offset, later cleans start there.  A log
    with a transaction in it is read from its start every time."""
    rng = random.Random(5)
    lg = Log.open(tmp_path / "t-0", _config())
    produced: Produced = []
    _append(lg, produced, _updates(rng, 600, 20))
    lg.flush()
    cleaner = _cleaner(tmp_path, {("t", 0): lg})
    first = cleaner.clean(lg)
    assert first.scanned_from == 0 and first.transactions == 0
    _append(lg, produced, _updates(rng, 300, 20, "w"))
    lg.flush()
    second = cleaner.clean(lg)
    assert second.scanned_from == 600  # the log end at the first scan
    assert _read(lg) == _expected(produced, second.end_offset)

    # A transaction: committed records and their marker, then more plain ones.
    b = BatchBuilder(base_offset=0, producer_id=9, producer_epoch=0, base_sequence=0,
                     is_transactional=True)
    b.append(int(time.time() * 1000), b"key-1", b"in-txn")
    lg.append(bytearray(b.build()))
    produced.append((b"key-1", b"in-txn"))
    lg.append(marker_batch(9, 0, True, 0, int(time.time() * 1000)))
    produced.append((b"marker", None))
    _append(lg, produced, _updates(rng, 300, 20, "x"))
    lg.flush()
    for ended_with_records in (1, 0):  # then its record is replaced, its marker stays
        stats = cleaner.clean(lg)
        assert stats.scanned_from == 900 and stats.transactions == ended_with_records
        _append(lg, produced, _updates(rng, 100, 20, "y"))
        lg.flush()
    cleaner.forget(("t", 0))
    assert cleaner.clean(lg).scanned_from == 0
    lg.close()
