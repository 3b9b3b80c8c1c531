"""spark_bench's harness vs ``pylog producer-perf-test``, same pylog broker, same settings.

    python benchmarks/bench_spark.py [--records 2000000] [--size 100] [--runs 3]
                                     [--sample-every 16]

One pylog broker (a subprocess) serves both:

* ``pylog producer-perf-test --topic T --num-records N --record-size 100 --throughput -1
  --producer-props bootstrap.servers=B linger.ms=5 acks=1`` (one process; its final line is
  parsed);
* a spark_bench sweep cell on ``local[2]``: 2 producer tasks x N/2 records, ``linger.ms=5
  acks=1``, as fast as possible (one SparkSession for all runs, one cell per run).

Runs alternate which goes first. Printed: each run, the medians, the ratio harness/tool
(target >= 0.9: the harness adds little per record) and the Spark overhead of every cell
(stage submitted -> first record sent; it includes the agreed-start margin and the tasks'
client setup, shown separately).  The machine's cores are shared by the broker, the tool or
the two Spark tasks, and the drivers: read the ratio with ``nproc`` in mind.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_metrics import start_broker  # noqa: E402

FINAL = re.compile(r"^(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), "
                   r"([\d.]+) ms avg latency.*?(\d+) ms 50th, \d+ ms 95th, (\d+) ms 99th")
SETTINGS = {"linger.ms": "5", "acks": "1"}


def tool_run(bootstrap: str, topic: str, records: int, size: int) -> dict[str, float]:
    props = [f"bootstrap.servers={bootstrap}", *(f"{k}={v}" for k, v in SETTINGS.items())]
    proc = subprocess.run(
        [sys.executable, "-m", "pylog", "producer-perf-test", "--topic", topic,
         "--num-records", str(records), "--record-size", str(size), "--throughput", "-1",
         "--producer-props", *props],
        capture_output=True, text=True, check=True, cwd=ROOT)
    for line in reversed(proc.stdout.splitlines()):
        match = FINAL.match(line)
        if match:
            return {"records": int(match[1]), "records_per_s": float(match[2]),
                    "mb_per_s": float(match[3]), "p50_ms": float(match[5]),
                    "p99_ms": float(match[6]), "client_bound": "NOTE:" in proc.stderr}
    raise SystemExit(f"no final line from producer-perf-test:\n{proc.stdout}\n{proc.stderr}")


def harness_run(spark, bootstrap: str, topic: str, records: int, size: int, out: Path,
                sample_every: int) -> dict[str, float]:
    import pyarrow.parquet as pq

    from spark_bench import driver
    from spark_bench.grid import parse_grid

    config = driver.SweepConfig(
        bootstrap=bootstrap, topic=topic, tasks=2, records_per_task=records // 2,
        grid=parse_grid([f"{k}={v}" for k, v in SETTINGS.items()] + [f"record.size={size}"]),
        out=out, master="local[2]", sample_every=sample_every)
    (cell,), _ = driver.run_sweep(config, spark=spark, progress=False)
    tasks = pq.read_table(out / "tasks.parquet").to_pylist()
    cell["setup_max_s"] = max(t["setup_s"] for t in tasks)
    cell["margin_s"] = config.start_margin_s
    return cell


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--sample-every", type=int, default=16,
                    help="the harness's latency sampling (1: a delivery callback per record)")
    args = ap.parse_args()
    from spark_bench import driver

    with tempfile.TemporaryDirectory(prefix="bench_spark-") as tmp:
        work = Path(tmp)
        proc, bootstrap = start_broker(str(work / "data"))
        spark = None
        try:
            t0 = time.monotonic()
            spark = driver.make_session("local[2]", work)
            print(f"pylog broker {bootstrap}; SparkSession local[2] up in "
                  f"{time.monotonic() - t0:.1f} s; {os.cpu_count()} cores; "
                  f"{args.records} records of {args.size} B per run", flush=True)
            tool: list[dict] = []
            harness: list[dict] = []
            for run in range(args.runs):
                order = ("tool", "harness") if run % 2 == 0 else ("harness", "tool")
                for name in order:
                    if name == "tool":
                        r = tool_run(bootstrap, f"tool-{run}", args.records, args.size)
                        tool.append(r)
                        print(f"run {run} producer-perf-test: {r['records_per_s']:12,.0f} "
                              f"records/s, p50 {r['p50_ms']:.0f} ms, p99 {r['p99_ms']:.0f} ms"
                              + (", client-bound" if r["client_bound"] else ""), flush=True)
                    else:
                        r = harness_run(spark, bootstrap, f"harness-{run}", args.records,
                                        args.size, work / f"out-{run}", args.sample_every)
                        harness.append(r)
                        print(f"run {run} spark_bench cell:  {r['records_per_s']:12,.0f} "
                              f"records/s, p50 {r['p50_ms']:.1f} ms, p99 {r['p99_ms']:.1f} ms, "
                              f"task CPU {r['client_cpu_util']:.0%}"
                              + (", client-bound" if r["client_bound"] else "")
                              + f"; Spark overhead {r['spark_overhead_s']:.2f} s (start margin "
                              f"{r['margin_s']:.1f} s, client setup {r['setup_max_s']:.2f} s), "
                              f"stage {r['stage_seconds']:.2f} s", flush=True)
                        assert r["records"] == args.records // 2 * 2 and r["errors"] == 0
            t = statistics.median(r["records_per_s"] for r in tool)
            h = statistics.median(r["records_per_s"] for r in harness)
            overhead = [r["spark_overhead_s"] for r in harness]
            bare = [o - r["margin_s"] for o, r in zip(overhead, harness, strict=True)]
            print(f"median producer-perf-test {t:,.0f} records/s, spark_bench local[2] "
                  f"{h:,.0f} records/s, ratio harness/tool {h / t:.3f} (target >= 0.9)")
            print(f"Spark overhead per cell (stage submitted -> first record): median "
                  f"{statistics.median(overhead):.2f} s, min {min(overhead):.2f} s, max "
                  f"{max(overhead):.2f} s; without the {harness[0]['margin_s']:.1f} s "
                  f"agreed-start margin: "
                  f"{statistics.median(bare):.2f} s (the first cell also starts the Python "
                  "workers)")
        finally:
            if spark is not None:
                spark.stop()
            proc.terminate()
            proc.wait(30)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
