"""Produce throughput with confluent-kafka: pylog vs librdkafka's in-memory mock broker.

    python benchmarks/bench_broker.py [--records 300000] [--sizes 100,1024] [--acks all]

Starts a pylog broker (a subprocess on a free port, data in a temporary
directory), then for each record size produces the same number of records
to it and to librdkafka's mock cluster (``test.mock.num.brokers=1``: a broker
inside the client process that keeps records in memory, so it shows the
client's own ceiling).  Prints records/s, MB/s and pylog's share of the mock's
rate.  The same producer settings are used for both.
"""

from __future__ import annotations

import argparse
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
from importlib.metadata import version

import confluent_kafka as ck


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_pylog(data_dir: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "pylog", "broker", "--override",
         f"listeners=PLAINTEXT://127.0.0.1:{port}", "--override", f"log.dirs={data_dir}"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
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


def produce(conf: dict, topic: str, count: int, size: int) -> float:
    """Seconds to produce and get acknowledged ``count`` records of ``size`` bytes."""
    producer = ck.Producer(conf)
    # Warm up: metadata, connection, topic creation.
    producer.produce(topic, b"w")
    producer.flush(30)
    value = os.urandom(size)
    failed = 0

    def delivered(err: object, _msg: object) -> None:
        nonlocal failed
        if err:
            failed += 1

    started = time.perf_counter()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value, on_delivery=delivered)
                break
            except BufferError:  # local queue full: let deliveries drain
                producer.poll(0.001)
        if i & 1023 == 0:
            producer.poll(0)
    if producer.flush(120):
        raise SystemExit("records left unacknowledged after 120 s")
    elapsed = time.perf_counter() - started
    if failed:
        raise SystemExit(f"{failed} records failed")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--sizes", default="100,1024")
    parser.add_argument("--acks", default="all")
    parser.add_argument("--linger-ms", default="5")
    parser.add_argument("--compression", default="none")
    args = parser.parse_args()
    common = {"acks": args.acks, "linger.ms": args.linger_ms, "batch.size": 1_000_000,
              "compression.type": args.compression, "queue.buffering.max.messages": 1_000_000}
    print(f"confluent-kafka {version('confluent-kafka')}, librdkafka {ck.libversion()[0]}; "
          f"{args.records} records, acks={args.acks}, linger.ms={args.linger_ms}, "
          f"compression={args.compression}")
    with tempfile.TemporaryDirectory(prefix="pylog-bench-") as data:
        proc, bootstrap = start_pylog(data)
        try:
            print(f"{'size':>6} {'target':>8} {'records/s':>12} {'MB/s':>8} {'vs mock':>8}")
            for size in (int(s) for s in args.sizes.split(",")):
                mock_s = produce({**common, "test.mock.num.brokers": 1}, f"b{size}",
                                 args.records, size)
                pylog_s = produce({**common, "bootstrap.servers": bootstrap}, f"b{size}",
                                  args.records, size)
                for name, secs in (("mock", mock_s), ("pylog", pylog_s)):
                    rate = args.records / secs
                    print(f"{size:>6} {name:>8} {rate:>12,.0f} {rate * size / 1e6:>8.1f} "
                          f"{mock_s / secs:>8.2f}")
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)


if __name__ == "__main__":
    main()
