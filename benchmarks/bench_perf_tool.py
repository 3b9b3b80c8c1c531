"""``pylog producer-perf-test`` vs a bare confluent-kafka loop, same broker, same settings.

    python benchmarks/bench_perf_tool.py [--records 500000] [--size 100] [--runs 3]

The tool's figure is its own final records/sec (from ``--json``); the bare
loop is what a minimal script gets: one pre-built value, no delivery callback,
poll(0) every 1000 records, flush.  Runs alternate; medians and the ratio
tool/bare are printed (target >= 0.9: the tool's latency bookkeeping must not
cost the client much throughput).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_metrics import produce_rate as bare_rate  # noqa: E402
from bench_metrics import start_broker  # noqa: E402

# The settings of bench_metrics.produce_rate (the bare loop), for the tool too.
SETTINGS = {"acks": "1", "linger.ms": "5"}


def tool_rate(bootstrap: str, topic: str, count: int, size: int, out: str) -> float:
    props = [f"{k}={v}" for k, v in SETTINGS.items()]
    subprocess.run([sys.executable, "-m", "pylog", "producer-perf-test", "--topic", topic,
                    "--num-records", str(count), "--record-size", str(size),
                    "--throughput", "-1", "--bootstrap-server", bootstrap, "--json", out,
                    "--producer-props", *props], check=True, stdout=subprocess.DEVNULL)
    with open(out) as f:
        return json.load(f)["records_per_sec"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as data:
        proc, bootstrap = start_broker(data)
        try:
            rates: dict[str, list[float]] = {"bare": [], "tool": []}
            for run in range(args.runs):
                topic = f"perf-tool-{run}"
                for name in (("bare", "tool") if run % 2 == 0 else ("tool", "bare")):
                    if name == "bare":
                        rate = bare_rate(bootstrap, topic, args.records, args.size)
                    else:
                        rate = tool_rate(bootstrap, topic, args.records, args.size,
                                         os.path.join(data, "perf.json"))
                    rates[name].append(rate)
                    print(f"run {run} {name:4s}: {rate:12,.0f} records/s", flush=True)
            bare, tool = statistics.median(rates["bare"]), statistics.median(rates["tool"])
            print(f"median bare {bare:,.0f} records/s, producer-perf-test {tool:,.0f} "
                  f"records/s, ratio tool/bare {tool / bare:.3f}")
        finally:
            proc.terminate()
            proc.wait(30)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
