"""Produce throughput with broker metrics on vs off (metrics.listener set or empty).

    python benchmarks/bench_metrics.py [--records 300000] [--size 100] [--runs 5]

Starts two pylog brokers that differ only in ``metrics.listener``, then
alternates runs of the same confluent-kafka producer loop against each (so
drift on a shared machine hits both), and prints the median records/s of
each and the ratio on/off (target >= 0.97: counting must not slow produce).
Throughput on a shared 2-core machine moves by more than the 3% asked about,
so it also prints the broker's own CPU time per million records (utime +
stime of the broker process over the run): the cost of counting, whatever
the client and the machine do meanwhile.
"""

from __future__ import annotations

import argparse
import os
import select
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import confluent_kafka as ck


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_broker(data_dir: str, *overrides: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    args = [sys.executable, "-m", "pylog", "broker",
            "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
            "--override", f"log.dirs={data_dir}"]
    for item in overrides:
        args += ["--override", item]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if select.select([proc.stdout], [], [], 0.2)[0]:
            line = proc.stdout.readline()
            if "listening on" in line:
                return proc, f"127.0.0.1:{port}"
            if not line:
                break
    proc.kill()
    raise SystemExit("pylog broker did not start")


def produce_rate(bootstrap: str, topic: str, count: int, size: int) -> float:
    """records/s of a bare confluent-kafka loop: pre-built value, poll(0) every 1000."""
    producer = ck.Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5})
    producer.produce(topic, b"warm")
    producer.flush(30)
    value = os.urandom(size)
    produce, poll = producer.produce, producer.poll
    start = time.perf_counter()
    for i in range(count):
        while True:
            try:
                produce(topic, value)
                break
            except BufferError:
                poll(0.001)
        if i % 1000 == 0:
            poll(0)
    producer.flush(120)
    return count / (time.perf_counter() - start)


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, from /proc (clock ticks)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as off_dir, tempfile.TemporaryDirectory() as on_dir:
        off, off_bs = start_broker(off_dir)
        on, on_bs = start_broker(on_dir, f"metrics.listener=http://127.0.0.1:{free_port()}"
                                 "/metrics")
        try:
            rates: dict[str, list[float]] = {"off": [], "on": []}
            cpu: dict[str, list[float]] = {"off": [], "on": []}
            pids = {"off": off.pid, "on": on.pid}
            for run in range(args.runs):
                # Alternate which goes first, so neither always gets the warmer machine.
                order = (("off", off_bs), ("on", on_bs)) if run % 2 == 0 else \
                        (("on", on_bs), ("off", off_bs))
                for name, bs in order:
                    before = cpu_seconds(pids[name])
                    rate = produce_rate(bs, f"bench-{run}", args.records, args.size)
                    per_m = (cpu_seconds(pids[name]) - before) / args.records * 1e6
                    rates[name].append(rate)
                    cpu[name].append(per_m)
                    print(f"run {run} metrics {name:3s}: {rate:12,.0f} records/s, "
                          f"broker CPU {per_m:.2f} s per million records", flush=True)
            off_med, on_med = statistics.median(rates["off"]), statistics.median(rates["on"])
            print(f"median off {off_med:,.0f} records/s, on {on_med:,.0f} records/s, "
                  f"ratio on/off {on_med / off_med:.3f}")
            off_cpu, on_cpu = statistics.median(cpu["off"]), statistics.median(cpu["on"])
            print(f"median broker CPU off {off_cpu:.2f}, on {on_cpu:.2f} s per million records, "
                  f"ratio on/off {on_cpu / off_cpu:.3f}")
        finally:
            for proc in (off, on):
                proc.terminate()
                proc.wait(30)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
