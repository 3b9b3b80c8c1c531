"""A consumer's start, pylog vs librdkafka's in-memory mock broker: broker CPU per short kcat run.

    python benchmarks/bench_consumer_start.py             # 200 kcat runs per broker
    python benchmarks/bench_consumer_start.py --runs 50

``bench_broker.py``'s kcat consume row starts a new ``kcat -C`` for every
16 MiB pass, so what a consumer costs the broker before its first record
(ApiVersions, Metadata twice, a ListOffsets per partition, the first fetches,
the connection itself) is part of that row.  This measures that part alone:
each run reads the 4 records of a 4-partition topic (one each) and exits
(``-c 4``), against a pylog broker (a subprocess, data in a temporary
directory) and against the mock (``test.mock.num.brokers=1``).  Reported per
run: the broker's CPU (its cgroup's cpuacct, as bench_broker), the median
and p90 wall time of the whole kcat process, and how many runs met
librdkafka's start-up race (a partition whose leader is not known yet waits
out a 500 ms offset-query timer; against either broker, at random).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import confluent_kafka as ck

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_broker as bb  # noqa: E402

TOPIC = "consumer-start"
SLOW_S = 0.2  # a run this long met the start-up race


def fill(target: bb.Target) -> None:
    bb.make_topic(target, TOPIC)
    producer = ck.Producer({"bootstrap.servers": target.bootstrap})
    for p in range(bb.PARTITIONS):
        producer.produce(TOPIC, b"v" * 100, partition=p)
    if producer.flush(30):
        raise SystemExit(f"records left unacknowledged on {target.name}")


def measure(target: bb.Target, runs: int) -> dict[str, float]:
    walls = []
    cpu0, kernel0 = target.cpu_split()
    for _ in range(runs):
        started = time.perf_counter()
        out = subprocess.run(["kcat", "-C", "-b", target.bootstrap, "-t", TOPIC, "-o",
                              "beginning", "-c", str(bb.PARTITIONS), "-q", "-f", "x"],
                             check=True, capture_output=True, timeout=60).stdout
        walls.append(time.perf_counter() - started)
        if len(out) != bb.PARTITIONS:
            raise SystemExit(f"kcat read {len(out)} of {bb.PARTITIONS} records")
    cpu, kernel = bb.spent(target.cpu_split(), (cpu0, kernel0))
    walls.sort()
    return {"cpu_ms": cpu / runs * 1000, "kernel_ms": kernel / runs * 1000,
            "wall_ms": statistics.median(walls) * 1000,
            "p90_ms": walls[int(0.9 * (len(walls) - 1))] * 1000,
            "slow": sum(w > SLOW_S for w in walls)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    if shutil.which("kcat") is None:
        raise SystemExit("kcat is not installed (apt-get install kcat)")
    with tempfile.TemporaryDirectory(prefix="bench-start-") as data:
        targets = [bb.start_pylog(os.path.join(data, "pylog")), bb.start_mock()]
        try:
            for t in targets:
                fill(t)
            got = {t.name: measure(t, args.runs) for t in targets}
        finally:
            for t in targets:
                t.stop()
    print(f"{args.runs} runs of `kcat -C -c {bb.PARTITIONS}` per broker, one record per "
          f"partition\n")
    print("| broker | CPU ms per run (kernel) | wall ms, median | wall ms, p90 | runs > "
          f"{SLOW_S * 1000:.0f} ms |")
    print("|---|--:|--:|--:|--:|")
    for name, m in got.items():
        print(f"| {name} | {m['cpu_ms']:.2f} ({m['kernel_ms']:.2f}) | {m['wall_ms']:.1f} | "
              f"{m['p90_ms']:.1f} | {m['slow']} |")
    print(f"\npylog/mock CPU per run: {got['pylog']['cpu_ms'] / got['mock']['cpu_ms']:.2f}")


if __name__ == "__main__":
    main()
