"""CPU of appends with and without drop-behind (``log.cache.drop.behind.bytes``).

    python benchmarks/bench_drop_behind.py [--mib 1024] [--reps 3] [--dir /tmp]

Appends ``--mib`` MiB of 256 KiB batches to one partition through a real
``LogManager`` (native validation, index, pwrite), once with the page cache
left to the kernel (-1, the default: Kafka's behaviour) and once with an 8 MiB
window, and reports CPU seconds per GB:

* ``process``: this process, every thread (the drop-behind worker included);
* ``system``: every CPU of the machine (/proc/stat), so the kernel's own
  write-back threads count too: without drop-behind they write the pages
  back later, with it this process starts the write-back itself.

Two memory states, because on this VM they differ several-fold:

* ``fresh``: the page cache grows into memory not used for a while (the
  guest reports free memory to its host, which must back it again on first
  touch): every run's files are kept until the end;
* ``reused``: a file as large as the run is written and deleted first, so
  the run finds recently freed pages, as on a host whose memory is full and
  whose cache the kernel recycles.

Beside them, plain ``os.write`` of the same bytes in 1 MiB calls, as the
floor.  Runs alternate the order of the variants.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from pylog.log import LogConfig, LogManager
from pylog.log.config import ManagerConfig
from pylog.records import build_batch

MiB = 1 << 20


def system_busy() -> float:
    """Seconds every CPU spent not idle (user, nice, system, irq, softirq)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:8]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def append_log(root: Path, window: int, total: int, batch: bytes) -> None:
    mgr = LogManager(root, LogConfig(segment_bytes=256 * MiB), manager_config=ManagerConfig(
        cache_drop_behind_bytes=window, cache_drop_idle_ms=-1))
    lg = mgr.get_or_create_log("bench", 0)
    for _ in range(total // len(batch)):
        lg.append(bytearray(batch))
    if lg.drop_behind is not None:
        lg.drop_behind.wait()  # its CPU belongs to the run
    # No close(): its fsync would time the disk, not the appends.


def write_plain(root: Path, total: int) -> None:
    root.mkdir(parents=True)
    buf = os.urandom(MiB)
    fd = os.open(root / "plain", os.O_CREAT | os.O_WRONLY)
    try:
        for _ in range(total // MiB):
            os.write(fd, buf)
    finally:
        os.close(fd)


def free_recent_pages(where: Path, total: int) -> None:
    """Write ``total`` bytes to a file and delete it: its pages go back to the
    kernel's free lists, warm, for the next run to take."""
    write_plain(where, total)
    shutil.rmtree(where)


def measure(fn) -> tuple[float, float]:
    cpu0, sys0 = time.process_time(), system_busy()
    fn()
    return time.process_time() - cpu0, system_busy() - sys0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=1024)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    args = ap.parse_args()
    total = args.mib * MiB
    records = [(0, b"k%d" % i, os.urandom(100)) for i in range(2000)]
    batch = bytes(build_batch(records))  # ~256 KiB of 100 B records
    variants = {"os.write": None, "log, -1": -1, "log, 8 MiB": 8 * MiB}
    results: dict[tuple[str, str], list[tuple[float, float]]] = {}
    gb = total / 1e9
    with tempfile.TemporaryDirectory(prefix="pylog-dropbehind-", dir=args.dir) as tmp:
        base = Path(tmp)
        n = 0
        for state in ("fresh", "reused"):
            for rep in range(args.reps):
                order = list(variants.items())
                if rep % 2:
                    order.reverse()
                for name, window in order:
                    n += 1
                    root = base / f"run{n}"
                    if state == "reused":
                        free_recent_pages(base / "free", total + 64 * MiB)
                    if window is None:
                        cost = measure(lambda root=root: write_plain(root, total))
                    else:
                        cost = measure(lambda root=root, w=window: append_log(root, w, total,
                                                                              batch))
                    results.setdefault((state, name), []).append(cost)
                    print(f"  {state:6} {name:10} process {cost[0] / gb:5.2f} "
                          f"system {cost[1] / gb:5.2f} CPU-s/GB", flush=True)
                    if state == "reused":
                        shutil.rmtree(root)
    print(f"\n{args.mib} MiB per run, medians of {args.reps}, CPU seconds per GB appended:\n")
    print("| memory | variant    | process CPU-s/GB | system CPU-s/GB |")
    print("|--------|------------|------------------|-----------------|")
    for (state, name), costs in results.items():
        proc = statistics.median(c[0] for c in costs) / gb
        system = statistics.median(c[1] for c in costs) / gb
        print(f"| {state:6} | {name:10} | {proc:16.2f} | {system:15.2f} |")


if __name__ == "__main__":
    main()
