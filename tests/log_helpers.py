"""Shared helpers of the log tests: batch builders and a linear reference scan."""

from __future__ import annotations

import os
from pathlib import Path

from pylog.records import build_batch, validate


def batch(ts: int, size: int = 1000, records: int = 1, ts_step: int = 0) -> bytearray:
    value = os.urandom(max(size // records - 20, 1))
    return bytearray(build_batch([(ts + i * ts_step, b"k", value) for i in range(records)]))


def scan_dir(directory: Path) -> list[tuple[int, int, int, int, int, int]]:
    """(segment base, position, base offset, last offset, size, max ts) of every
    batch in every segment, read linearly from the files."""
    out = []
    for path in sorted(Path(directory).glob("*.log")):
        data = path.read_bytes()
        for info in validate(data):
            out.append((int(path.stem), info.position, info.base_offset, info.last_offset,
                        info.size, info.max_timestamp))
    return out


def fs_type(path: Path) -> str:
    """The file system type of ``path`` (/proc/self/mounts: the longest mount
    point that prefixes the path wins)."""
    best, fstype = "", "?"
    real = os.path.realpath(path)
    with open("/proc/self/mounts") as f:
        for line in f:
            _, mnt, typ, *_ = line.split()
            if (real == mnt or real.startswith(mnt.rstrip("/") + "/")) and len(mnt) > len(best):
                best, fstype = mnt, typ
    return fstype


def read_log(lg) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every record from the log start to the end, through ``Log.read`` (as a
    consumer reads: a fetch slice, then on after its last batch's offsets)."""
    import os

    from pylog.records import read_batches

    out = []
    offset, end = lg.log_start_offset, lg.log_end_offset
    while offset < end:
        chunk = lg.read(offset, 1 << 20)
        if chunk.length <= 0:
            break
        data = os.pread(chunk.fd, chunk.length, chunk.position)
        last = offset - 1
        for b in read_batches(data):
            last = b.base_offset + b.last_offset_delta
            out.extend((r.offset, r.key, r.value) for r in b.records() if r.offset >= offset)
        assert last >= offset, f"no progress reading from offset {offset}"
        offset = last + 1
    return out
