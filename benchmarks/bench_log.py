"""Log core benchmarks: append throughput, offset lookup latency, recovery speed.

    python benchmarks/bench_log.py [--dir DIR] [--mib 256] [--lookups 200000]

* append: ``Log.append`` (validate + stamp + pwrite + index) of 16 KiB and
  1 MiB batches against a plain ``os.write`` loop of the same bytes into a
  file in the same directory, same run; ratio target >= 0.8x.
* lookup: offset -> (segment, position) over a 10 GiB-equivalent index set
  (10 segments x 262,144 entries = 10 GiB of log at one entry per 4 KiB),
  each lookup timed alone with perf_counter_ns; p99 target <= 5 us.
* recovery: reopening after an unclean stop with the recovery point at 0
  (every segment rescanned: CRC32C per batch, offsets, index rebuild), in GB/s
  of log; target >= 1 GB/s (page cache warm, as after a process crash).
"""

from __future__ import annotations

import argparse
import bisect
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from pylog.log import Log, LogConfig
from pylog.log.offset_index import OffsetIndex
from pylog.records import build_batch

GIB = 1 << 30
MIB = 1 << 20


def make_batch(size: int) -> bytearray:
    """One uncompressed batch of about ``size`` bytes (16 records)."""
    rng = random.Random(size)
    n = 16
    value = rng.randbytes(size // n - 16)
    return bytearray(build_batch([(1_700_000_000_000 + i, b"key", value) for i in range(n)]))


def bench_append(root: Path, batch_size: int, total: int) -> tuple[float, float]:
    """(pylog MB/s, os.write MB/s), best of three alternating runs."""
    buf = make_batch(batch_size)
    count = max(total // len(buf), 1)
    cfg = LogConfig(segment_bytes=256 * MIB, max_message_bytes=2 * MIB)
    best_log = best_raw = 0.0
    for _ in range(3):
        d = root / "append-0"
        shutil.rmtree(d, ignore_errors=True)
        lg = Log.open(d, cfg)
        t0 = time.perf_counter()
        for _ in range(count):
            lg.append(buf)
        dt = time.perf_counter() - t0
        lg.close_handlers()
        shutil.rmtree(d, ignore_errors=True)
        best_log = max(best_log, count * len(buf) / dt / 1e6)

        raw = root / "raw.bin"
        fd = os.open(raw, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        t0 = time.perf_counter()
        for _ in range(count):
            os.write(fd, buf)
        dt = time.perf_counter() - t0
        os.close(fd)
        raw.unlink()
        best_raw = max(best_raw, count * len(buf) / dt / 1e6)
    return best_log, best_raw


def bench_lookup(root: Path, lookups: int, segments: int = 10,
                 entries: int = 262_144) -> dict[str, float]:
    """Percentiles (ns) of offset -> position over a synthetic 10 GiB index set."""
    records_per_entry = 4          # ~1 KiB records, one entry per 4 KiB
    indexes, bases = [], []
    d = root / "lookup"
    d.mkdir(exist_ok=True)
    for s in range(segments):
        base = s * entries * records_per_entry
        arr = np.empty(entries, dtype=[("rel", ">i4"), ("pos", ">i4")])
        arr["rel"] = np.arange(entries, dtype=np.int64) * records_per_entry
        arr["pos"] = np.arange(entries, dtype=np.int64) * 4096
        path = d / f"{base:020d}.index"
        path.write_bytes(arr.tobytes())
        indexes.append(OffsetIndex(path, base, entries * 8))
        bases.append(base)
    end = segments * entries * records_per_entry
    rng = random.Random(1)
    targets = [rng.randrange(end) for _ in range(lookups)]
    samples = np.empty(lookups, dtype=np.int64)
    clock = time.perf_counter_ns
    for i, target in enumerate(targets):
        t0 = clock()
        idx = indexes[bisect.bisect_right(bases, target) - 1]
        pos = idx.lookup(target).position
        samples[i] = clock() - t0
        if pos != ((target - idx.base_offset) // records_per_entry) * 4096:
            raise AssertionError(f"wrong position for {target}")
    for idx in indexes:
        idx.close()
    return {p: float(np.percentile(samples, q)) for p, q in
            (("p50", 50), ("p99", 99), ("p99.9", 99.9))}


def bench_recovery(root: Path, total: int) -> tuple[float, int]:
    """(GB/s, bytes) of the unclean reopen of a ``total``-byte log."""
    d = root / "recover-0"
    shutil.rmtree(d, ignore_errors=True)
    cfg = LogConfig(segment_bytes=128 * MIB)
    lg = Log.open(d, cfg)
    buf = make_batch(16 * 1024)
    for _ in range(max(total // len(buf), 1)):
        lg.append(buf)
    size = lg.size
    end = lg.log_end_offset
    lg.close()
    best = 0.0
    for _ in range(3):
        t0 = time.perf_counter()
        lg = Log.open(d, cfg, recovery_point=0, had_clean_shutdown=False)
        dt = time.perf_counter() - t0
        if lg.log_end_offset != end:
            raise AssertionError("recovery lost data")
        lg.close()
        best = max(best, size / dt / 1e9)
    shutil.rmtree(d, ignore_errors=True)
    return best, size


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", help="directory on the filesystem to test (default: a temp dir)")
    ap.add_argument("--mib", type=int, default=256, help="MiB written per append run")
    ap.add_argument("--recovery-mib", type=int, default=512)
    ap.add_argument("--lookups", type=int, default=200_000)
    args = ap.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="pylog-bench-", dir=args.dir))
    try:
        rows = []
        for label, size in (("16 KiB", 16 * 1024), ("1 MiB", MIB)):
            log_mbs, raw_mbs = bench_append(root, size, args.mib * MIB)
            rows.append((f"append {label} batches", f"{log_mbs:,.0f} MB/s",
                         f"os.write {raw_mbs:,.0f} MB/s", f"{log_mbs / raw_mbs:.2f}x",
                         ">= 0.8x"))
        pct = bench_lookup(root, args.lookups)
        rows.append(("offset lookup, 10 GiB index set", f"p50 {pct['p50'] / 1e3:.2f} us",
                     f"p99.9 {pct['p99.9'] / 1e3:.2f} us", f"p99 {pct['p99'] / 1e3:.2f} us",
                     "p99 <= 5 us"))
        gbs, size = bench_recovery(root, args.recovery_mib * MIB)
        rows.append((f"recovery scan, {size / MIB:.0f} MiB", f"{gbs:.2f} GB/s", "", "",
                     ">= 1 GB/s"))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print("$ python " + " ".join([sys.argv[0], *(argv if argv is not None else sys.argv[1:])]))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    header = ("benchmark", "pylog", "reference", "result", "target")
    widths = [max(w, len(h)) for w, h in zip(widths, header, strict=True)]
    for row in (header, *rows):
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
