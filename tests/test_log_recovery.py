"""Recovery after a crash and after damage to segment and index files."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from log_helpers import batch, scan_dir

from pylog.log import Log, LogConfig

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


def test_stray_files_are_removed(tmp_path):
    path = fill(tmp_path)
    for name in ("00000000000000000000.log.deleted", "00000000000000000007.log.cleaned",
                 "00000000000000000007.log.swap", "00000000000000999999.index"):
        (path / name).write_bytes(b"x")
    reopen(path, clean=True).close()
    names = {p.name for p in path.iterdir()}
    assert not {n for n in names if n.endswith((".deleted", ".cleaned", ".swap"))}
    assert "00000000000000999999.index" not in names
