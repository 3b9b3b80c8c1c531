"""pylog on uvloop against pylog on asyncio's own loop: broker CPU per GB produced.

    python benchmarks/bench_event_loop.py              # 1,000,000 records per run, 5 rounds
    python benchmarks/bench_event_loop.py --records 3000000 --repeat 4

Two pylog brokers run side by side, one per event loop (``PYLOG_EVENT_LOOP``);
the same producer runs (``bench_broker``'s: confluent-kafka in this process and
kcat, 100-byte records, acks=1, linger.ms=5) go to each in turn, alternating
which goes first.  Each row gives the medians of the rounds: records/s, and
the broker process's CPU seconds per GB (``bench_broker.CpuMeter``:
nanoseconds from a cgroup where it can), and the ratio uvloop/asyncio, the
reference being asyncio measured in the same run.  The VM's run-to-run swings
(10-20%) are why every row alternates and repeats.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile

import bench_broker as bb

LOOPS = ("uvloop", "asyncio")


def start(loop: str, data: str) -> bb.Target:
    os.environ["PYLOG_EVENT_LOOP"] = loop  # read by the broker process at start-up
    try:
        target = bb.start_pylog(os.path.join(data, loop))
    finally:
        del os.environ["PYLOG_EVENT_LOOP"]
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    clients = ["confluent"] + (["kcat"] if shutil.which("kcat") else [])
    with tempfile.TemporaryDirectory(prefix="pylog-loops-") as data:
        records_file = bb.write_records(os.path.join(data, "records.txt"), args.size,
                                        args.records)
        targets = {loop: start(loop, data) for loop in LOOPS}
        rows = []
        try:
            for t in targets.values():
                t.cpu_seconds()
            run_id = 0
            for client in clients:
                runs: dict[str, list[tuple[float, float]]] = {loop: [] for loop in LOOPS}
                for round_ in range(args.repeat):
                    order = LOOPS if round_ % 2 == 0 else LOOPS[::-1]
                    for loop in order:
                        t = targets[loop]
                        run_id += 1
                        topic = f"loops-{run_id}"
                        bb.make_topic(t, topic)
                        before = t.cpu_seconds()
                        secs = bb.produce(client, t, topic, args.records, args.size, "1",
                                          records_file)
                        cpu = t.cpu_seconds() - before
                        gb = args.records * args.size / 1e9
                        runs[loop].append((args.records / secs, cpu / gb))
                        print(f"  {client} {loop}: {args.records / secs:,.0f} rec/s, "
                              f"{cpu / gb:.3f} s/GB", flush=True)
                        bb.drop_topic(t, topic)
                rows.append((client, {loop: (statistics.median(r for r, _ in runs[loop]),
                                             statistics.median(c for _, c in runs[loop]))
                                      for loop in LOOPS}))
        finally:
            for t in targets.values():
                t.stop()
    print(f"\n{args.records:,} records of {args.size} B per run, acks=1, linger.ms=5; "
          f"medians of {args.repeat} alternating rounds\n")
    print("| client    | uvloop rec/s | asyncio rec/s | uvloop CPU s/GB | asyncio CPU s/GB "
          "| CPU uvloop/asyncio |")
    print("|-----------|--------------|---------------|-----------------|------------------"
          "|--------------------|")
    for client, m in rows:
        (ur, uc), (ar, ac) = m["uvloop"], m["asyncio"]
        print(f"| {client:<9} | {ur:>12,.0f} | {ar:>13,.0f} | {uc:>15.3f} | {ac:>16.3f} "
              f"| {uc / ac:>18.2f} |")


if __name__ == "__main__":
    main()
