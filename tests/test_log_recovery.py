"""Recovery after a crash and after damage to segment and index files."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from log_helpers import batch, scan_dir

from pylog.log import Log, LogConfig, LogManager
from pylog.log.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    OffsetCheckpointFile,
)
from pylog.log.errors import LogClosedError
from pylog.records import BatchBuilder
from pylog.server import producer_state

ROOT = Path(__file__).resolve().parent.parent
CFG = LogConfig.from_props({"segment.bytes": str(64 * 1024)})


def fill(tmp_path, n=200, size=1000, cfg=CFG):
    lg = Log.open(tmp_path / "t-0", cfg)
    for i in range(n):
        lg.append(batch(1_000 + i, size))
    lg.close()
    return tmp_path / "t-0"


def reopen(path, cfg=CFG, clean=False, recovery_point=0):
    return Log.open(path, cfg, had_clean_shutdown=clean, recovery_point=recovery_point)


def check_continuous(path, upto):
    offsets = [b[2] for b in scan_dir(path)]
    assert offsets == list(range(upto))


def test_sigkill_loses_no_acknowledged_append(tmp_path):
    script = textwrap.dedent(f"""
        import sys
        sys.path[:0] = [{str(ROOT)!r}, {str(ROOT / "tests")!r}]
        from pathlib import Path
        from pylog.log import Log, LogConfig
        from log_helpers import batch
        lg = Log.open(Path({str(tmp_path / 't-0')!r}),
                      LogConfig.from_props({{"segment.bytes": "65536"}}))
        i = 0
        while True:
            r = lg.append(batch(1000 + i, 700))
            print(r.base_offset, flush=True)
            i += 1
    """)
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    acked = []
    try:
        for line in child.stdout:
            acked.append(int(line))
            if len(acked) >= 400:
                break
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert acked == list(range(len(acked)))
    lg = reopen(tmp_path / "t-0")
    assert lg.log_end_offset >= len(acked)
    assert len(lg.segments) > 2
    check_continuous(tmp_path / "t-0", lg.log_end_offset)
    end = lg.log_end_offset
    assert lg.append(batch(5)).base_offset == end
    assert lg.read(acked[-1], 1).first_offset == acked[-1]
    lg.close()


def test_garbage_after_the_last_batch_is_cut(tmp_path):
    path = fill(tmp_path)
    active = sorted(path.glob("*.log"))[-1]
    size = active.stat().st_size
    with open(active, "ab") as f:
        f.write(os.urandom(3000))
    lg = reopen(path)
    assert active.stat().st_size == size and lg.log_end_offset == 200
    assert lg.append(batch(1)).base_offset == 200
    lg.close()
    check_continuous(path, 201)


def test_zeros_after_the_last_batch_are_cut(tmp_path):
    path = fill(tmp_path)
    active = sorted(path.glob("*.log"))[-1]
    size = active.stat().st_size
    os.truncate(active, size + 8192)  # size persisted before the data: zeros
    lg = reopen(path)
    assert active.stat().st_size == size and lg.log_end_offset == 200
    lg.close()


def test_torn_last_batch_is_cut(tmp_path):
    path = fill(tmp_path)
    active = sorted(path.glob("*.log"))[-1]
    os.truncate(active, active.stat().st_size - 100)
    lg = reopen(path)
    assert lg.log_end_offset == 199
    assert lg.append(batch(1)).base_offset == 199
    lg.close()
    check_continuous(path, 200)


def test_flipped_byte_truncates_at_that_batch(tmp_path):
    path = fill(tmp_path)
    before = scan_dir(path)
    victim = before[len(before) // 2]   # a batch in a middle segment
    seg = path / f"{victim[0]:020d}.log"
    data = bytearray(seg.read_bytes())
    data[victim[1] + victim[4] // 2] ^= 0x40
    seg.write_bytes(data)
    lg = reopen(path)
    assert lg.log_end_offset == victim[2]
    after = scan_dir(path)
    assert after == before[:len(after)] and len(after) == victim[2]
    assert lg.append(batch(1)).base_offset == victim[2]
    lg.close()


def test_damaged_base_offset_field_is_caught(tmp_path):
    # baseOffset is outside the CRC: recovery checks offsets continue
    path = fill(tmp_path)
    before = scan_dir(path)
    victim = before[-5]
    seg = path / f"{victim[0]:020d}.log"
    data = bytearray(seg.read_bytes())
    data[victim[1] + 7] ^= 0x01
    seg.write_bytes(data)
    lg = reopen(path)
    assert lg.log_end_offset == victim[2]
    lg.close()


@pytest.mark.parametrize("which", [".index", ".timeindex"])
def test_deleted_index_is_rebuilt(tmp_path, which):
    path = fill(tmp_path)
    first = path / f"{0:020d}{which}"
    original = first.read_bytes()
    first.unlink()
    lg = reopen(path, clean=True)   # even without a crash
    lg.close()
    assert first.read_bytes() == original


def test_corrupt_index_is_rebuilt(tmp_path):
    path = fill(tmp_path)
    first = path / f"{0:020d}.index"
    original = first.read_bytes()
    first.write_bytes(original + bytes(64))    # a zero-filled tail, as after a crash
    lg = reopen(path, clean=True)
    assert lg.read(5, 1).first_offset == 5
    lg.close()
    assert first.read_bytes() == original


def test_recovery_rebuilds_indexes_like_appends(tmp_path):
    path = fill(tmp_path)
    files = {p.name: p.read_bytes() for p in path.iterdir()}
    lg = reopen(path)  # unclean: every segment rescanned, indexes rebuilt
    lg.close()
    assert {p.name: p.read_bytes() for p in path.iterdir()} == files


def test_crash_rescans_from_the_recovery_point_without_calling_indexes_corrupt(
        tmp_path, caplog):
    """After a crash the active segment's index still has its preallocated,
    zero-filled tail (trimmed only by a clean close).  The segments from the
    one holding the recovery point on are rescanned and their indexes rebuilt
    by recovery, as Kafka's LogLoader does: checking them first reported every
    such index as corrupt (a warning per partition after any kill -9) and
    scanned them twice."""
    path = fill(tmp_path)
    seg_bases = sorted(int(p.stem) for p in path.glob("*.log"))
    last = path / f"{seg_bases[-1]:020d}.index"
    entries = last.read_bytes()
    last.write_bytes(entries + bytes(4096))  # as preallocated when the process died
    with caplog.at_level("INFO", logger="pylog.log"):
        lg = reopen(path, recovery_point=seg_bases[-2])
    assert "corrupt" not in caplog.text
    assert lg.log_end_offset == 200
    assert lg.read(seg_bases[-1] + 1, 1).first_offset == seg_bases[-1] + 1
    lg.close()
    assert last.read_bytes() == entries


def test_stray_files_are_removed(tmp_path):
    path = fill(tmp_path)
    for name in ("00000000000000000000.log.deleted", "00000000000000000007.log.cleaned",
                 "00000000000000000007.log.swap", "00000000000000999999.index"):
        (path / name).write_bytes(b"x")
    reopen(path, clean=True).close()
    names = {p.name for p in path.iterdir()}
    assert not {n for n in names if n.endswith((".deleted", ".cleaned", ".swap"))}
    assert "00000000000000999999.index" not in names


@pytest.mark.parametrize("index", ["corrupt", "missing"])
@pytest.mark.parametrize("torn, recovery", [(0, "log-start"), (1, "log-start"),
                                            (1, "segment-base"), (1, "inside-segment")])
def test_torn_older_segment_cut_while_its_index_is_rebuilt_drops_later_ones(
        tmp_path, torn, recovery, index):
    """A torn tail in a segment that is not the last (rolled, never flushed) at
    or after the recovery point: the index is rebuilt when the segment is opened,
    which already cuts it; recovery must still treat it as the cut and delete
    every later segment (Kafka's recoverLog), not leave a hole in the offsets."""
    path = fill(tmp_path)
    before = scan_dir(path)
    bases = sorted({b[0] for b in before})
    assert len(bases) > torn + 2
    base = bases[torn]
    seg = path / f"{base:020d}.log"
    cut = seg.stat().st_size // 2 + 7
    os.truncate(seg, cut)
    if index == "missing":
        (path / f"{base:020d}.index").unlink()
    kept = [b for b in before if b[0] < base or (b[0] == base and b[1] + b[4] <= cut)]
    end = kept[-1][3] + 1
    assert end < bases[torn + 1]  # the tail of the torn segment is gone
    point = {"log-start": 0, "segment-base": base, "inside-segment": base + 3}[recovery]
    lg = reopen(path, recovery_point=point)
    assert [s.base_offset for s in lg.segments] == bases[:torn + 1]
    assert lg.log_end_offset == end
    assert sorted(p.name for p in path.glob("*.log")) == [f"{b:020d}.log"
                                                           for b in bases[:torn + 1]]
    check_continuous(path, end)
    assert scan_dir(path) == kept
    assert lg.append(batch(1)).base_offset == end
    lg.close()
    lg = reopen(path, clean=True)
    assert lg.log_end_offset == end + 1
    assert lg.read(end, 1).first_offset == end
    lg.close()
    check_continuous(path, end + 1)


CORRUPT_CHECKPOINTS = {
    "empty": "",
    "version-only": "0\n",
    "short-count": "0\n3\nt 0 5\n",
    "torn-line": "0\n1\nt 0\n",
    "not-a-number": "0\n1\nt 0 x\n",
    "nul-filled": "\x00" * 16,
}


@pytest.mark.parametrize("content", list(CORRUPT_CHECKPOINTS.values()),
                         ids=list(CORRUPT_CHECKPOINTS))
@pytest.mark.parametrize("name", [RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT])
def test_unreadable_checkpoint_file_falls_back_instead_of_failing(tmp_path, name, content):
    """As Kafka's LogManager.loadLogs: an unreadable checkpoint is warned about;
    recovery then starts at offset 0, or the log starts at its first segment.
    The other checkpoint still counts, and the next one written is whole."""
    d = tmp_path / "logs"
    m = LogManager(d, CFG)
    lg = m.get_or_create_log("t", 0)
    for i in range(200):
        lg.append(batch(1_000 + i, 1000))
    lg.high_watermark = lg.log_end_offset
    lg.delete_records_before(10)
    m.close()
    assert OffsetCheckpointFile(d / RECOVERY_POINT_CHECKPOINT).read() == {("t", 0): 200}
    assert OffsetCheckpointFile(d / LOG_START_OFFSET_CHECKPOINT).read() == {("t", 0): 10}
    (d / ".kafka_cleanshutdown").unlink()  # a crash: recovery reads the checkpoints
    (d / name).write_text(content)
    with pytest.raises(ValueError):
        OffsetCheckpointFile(d / name).read()
    m = LogManager(d, CFG)
    lg = m.get_log("t", 0)
    assert lg.log_end_offset == 200
    if name == RECOVERY_POINT_CHECKPOINT:
        assert (lg.recovery_point, lg.log_start_offset) == (0, 10)
    else:
        assert (lg.recovery_point, lg.log_start_offset) == (200, lg.segments[0].base_offset)
    assert lg.read(lg.log_start_offset, 1).first_offset == lg.log_start_offset
    assert lg.append(batch(5)).base_offset == 200
    expected = lg.log_start_offset
    m.close()
    assert OffsetCheckpointFile(d / RECOVERY_POINT_CHECKPOINT).read() == {("t", 0): 201}
    assert OffsetCheckpointFile(d / LOG_START_OFFSET_CHECKPOINT).read() == {("t", 0): expected}
    check_continuous(d / "t-0", 201)


def _untrimmed_indexes(d: Path) -> list[str]:
    """Index files of ``d``'s partitions still at their preallocated size: an
    empty log closed cleanly has empty ones."""
    return sorted(f"{f.parent.name}/{f.name}" for f in d.glob("*-*/*index")
                  if f.stat().st_size > 0)


def test_a_closed_manager_opens_no_log(tmp_path):
    """Once closed (the clean-shutdown marker written), the manager refuses to
    create a log: one opened then would never be closed, so its preallocated
    indexes would stay full-size under the marker, and the next start would
    find them corrupt."""
    d = tmp_path / "logs"
    m = LogManager(d, CFG)
    m.get_or_create_log("t", 0)
    m.close()
    with pytest.raises(LogClosedError):
        m.get_or_create_log("t", 1)
    assert not (d / "t-1").exists()
    assert (d / ".kafka_cleanshutdown").exists()
    assert _untrimmed_indexes(d) == []


def test_logs_created_while_the_manager_closes_are_all_closed(tmp_path, caplog):
    """A thread creating logs (the broker creates __consumer_offsets'
    partitions off the event loop) races a clean shutdown: every log it made
    is closed with the others, and the next start finds no corrupt index."""
    d = tmp_path / "logs"
    m = LogManager(d, CFG)
    made: list[int] = []
    first = threading.Event()

    def create() -> None:
        for p in range(200):
            try:
                m.get_or_create_log("t", p)
            except LogClosedError:
                return
            made.append(p)
            first.set()

    creator = threading.Thread(target=create)
    creator.start()
    assert first.wait(10)
    m.close()
    creator.join(30)
    assert made == list(range(len(made)))
    assert sorted(int(p.name[2:]) for p in d.glob("t-*")) == made
    assert _untrimmed_indexes(d) == []
    caplog.set_level("WARNING")
    m = LogManager(d, CFG)
    assert sorted(p for _, p in m.logs()) == made
    m.close()
    assert not [r for r in caplog.records if "corrupt" in r.getMessage()]


def _idempotent(producer_id: int, seq: int) -> bytearray:
    b = BatchBuilder(producer_id=producer_id, producer_epoch=0, base_sequence=seq)
    b.append(1_700_000_000_000 + seq, None, b"p%d-s%d" % (producer_id, seq))
    return bytearray(b.build())


def _produce(lg, state, producer_id: int, seq: int):
    """The broker's produce path for one idempotent batch: ("dup", offset) or
    ("appended", offset)."""
    records = _idempotent(producer_id, seq)
    pb = producer_state.producer_batch(memoryview(records))
    verdict = state.check(pb)
    if verdict is not None:
        assert isinstance(verdict, tuple), verdict
        return ("dup", verdict[0])
    r = lg.append(records)
    state.record(pb, r.base_offset, r.log_append_time, producer_state.max_timestamp(records))
    return ("appended", r.base_offset)


def test_producer_snapshot_past_the_recovered_log_end_is_not_reused(tmp_path):
    """A snapshot taken before a crash cut the log below it is deleted on load
    (Kafka deletes snapshots past the end on truncation).  Kept, a later unclean
    start would take it as covering the log up to its offset and skip the
    replay of the batches written there since: a retry of one of them would
    then be appended a second time."""
    path = tmp_path / "t-0"
    lg = Log.open(path, LogConfig())
    state = producer_state.PartitionProducers()
    for seq in range(10):
        assert _produce(lg, state, 1, seq) == ("appended", seq)
    end = lg.log_end_offset
    producer_state.write_snapshot(lg, state.to_json(end), end)  # at clean shutdown
    lg.close()
    assert [o for o, _ in producer_state._snapshots(path)] == [10]
    # power loss: offsets 6.. never reached the disk (torn batch at offset 6)
    torn = next(b for b in scan_dir(path) if b[2] == 6)
    os.truncate(path / f"{0:020d}.log", torn[1] + 20)
    lg = reopen(path, LogConfig())
    assert lg.log_end_offset == 6
    state = producer_state.load(lg) or producer_state.PartitionProducers()
    assert all(o <= lg.log_end_offset for o, _ in producer_state._snapshots(path))
    assert [_produce(lg, state, 2, seq) for seq in range(3)] == [
        ("appended", 6), ("appended", 7), ("appended", 8)]
    for seq in range(3):  # past the old snapshot's offset
        _produce(lg, state, 3, seq)
    assert lg.log_end_offset == 12
    lg.close_handlers()  # kill -9 before the next snapshot
    lg = reopen(path, LogConfig())
    assert lg.log_end_offset == 12
    state = producer_state.load(lg) or producer_state.PartitionProducers()
    assert _produce(lg, state, 2, 2) == ("dup", 8)  # the retry is not written again
    assert _produce(lg, state, 3, 2) == ("dup", 11)
    assert lg.log_end_offset == 12
    lg.close()
