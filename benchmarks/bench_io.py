"""Append throughput: raw ``os.write`` vs the posix backend vs the io_uring backend.

    python benchmarks/bench_io.py [--total-mib 256] [--reps 3] [--dir /tmp]

Each run appends ``--total-mib`` to a fresh file, in 16 KiB or 1 MiB writes,
either one buffer per call or ``--batch`` buffers per call (a produce request
carrying several batches), into the page cache, or durably with an fdatasync
every ``--sync-mib``.  Runs alternate the backends' order (A,B then B,A) so
neither profits from the write-back state the other left; the table shows the
median (or best, ``--stat best``) MB/s and the ratio to the posix backend.
This number picks the default backend (``log.io.backend``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable

from pylog.io.backend import get_backend

MiB = 1 << 20


def _raw_write(fd: int, bufs: list[bytes], offset: int) -> None:
    for b in bufs:
        n = os.write(fd, b)
        if n != len(b):
            raise OSError("short write")


def run_once(path: str, method: str, write_size: int, batch: int, total: int,
             sync_every: int) -> float:
    """Seconds to append ``total`` bytes with ``method``."""
    buf = os.urandom(write_size)
    bufs = [buf] * batch
    chunk = write_size * batch
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    backend = None
    try:
        if method == "os.write":
            write: Callable[[int, list[bytes], int], None] = _raw_write
            sync = os.fdatasync
        elif method == "pyuring ctx.write":
            import pyuring

            ctx = pyuring.UringCtx(entries=64)

            def write(fd_: int, bs: list[bytes], off: int) -> None:
                for b in bs:
                    off += ctx.write(fd_, b, off)

            def sync(fd_: int) -> None:
                ctx.fsync_fd(fd_, datasync=True)

            backend = ctx
        else:
            backend = get_backend(method)
            if backend.name != method:
                raise RuntimeError(f"{method} unavailable")
            write, sync = backend.write_all, backend.fdatasync
        offset = 0
        since_sync = 0
        t0 = time.perf_counter()
        while offset < total:
            write(fd, bufs, offset)
            offset += chunk
            since_sync += chunk
            if sync_every and since_sync >= sync_every:
                sync(fd)
                since_sync = 0
        if sync_every:
            sync(fd)
        return time.perf_counter() - t0
    finally:
        if backend is not None:
            backend.close()
        os.close(fd)
        os.unlink(path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--total-mib", type=int, default=256)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--batch", type=int, default=16, help="buffers per call, batched rows")
    ap.add_argument("--sync-mib", type=int, default=8, help="durable rows: fdatasync every N MiB")
    ap.add_argument("--stat", choices=("median", "best"), default="median",
                    help="best: fastest run, for a machine shared with other work")
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--methods", default="os.write,posix,io_uring,pyuring ctx.write")
    args = ap.parse_args()
    total = args.total_mib * MiB
    methods = args.methods.split(",")
    path = os.path.join(args.dir, f"pylog-bench-io-{os.getpid()}.log")
    cases = [
        ("page cache", 16 << 10, 1, 0),
        ("page cache", 16 << 10, args.batch, 0),
        ("page cache", 1 * MiB, 1, 0),
        ("page cache", 1 * MiB, 4, 0),
        (f"fdatasync/{args.sync_mib}MiB", 16 << 10, 1, args.sync_mib * MiB),
        (f"fdatasync/{args.sync_mib}MiB", 16 << 10, args.batch, args.sync_mib * MiB),
        (f"fdatasync/{args.sync_mib}MiB", 1 * MiB, 1, args.sync_mib * MiB),
    ]
    print(f"{args.total_mib} MiB per run, {args.stat} of {args.reps} runs, dir {args.dir}")
    header = f"{'mode':<16} {'write':>7} {'bufs/call':>9} " + "".join(
        f"{m:>22}" for m in methods)
    print(header)
    print("-" * len(header))
    for mode, size, batch, sync_every in cases:
        times: dict[str, list[float]] = {m: [] for m in methods}
        for rep in range(args.reps):
            order = methods if rep % 2 == 0 else methods[::-1]
            for m in order:
                try:
                    times[m].append(run_once(path, m, size, batch, total, sync_every))
                except RuntimeError:
                    times[m].append(float("nan"))
        pick = min if args.stat == "best" else statistics.median
        mbps = {m: total / MiB / pick(t) for m, t in times.items()}
        base = mbps.get("posix")
        cells = []
        for m in methods:
            ratio = f" ({mbps[m] / base:.2f}x)" if base else ""
            cells.append(f"{mbps[m]:>10.0f} MB/s{ratio:>8}")
        label = f"{size >> 10} KiB" if size < MiB else f"{size >> 20} MiB"
        print(f"{mode:<16} {label:>7} {batch:>9} " + "".join(f"{c:>22}" for c in cells),
              flush=True)
    print("(MB/s = MiB/s; ratio to the posix backend in parentheses)")


if __name__ == "__main__":
    main()
