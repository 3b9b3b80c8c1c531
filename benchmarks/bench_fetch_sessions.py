"""Incremental fetch sessions (KIP-227) against full fetches, end to end.

kafka-python tails a topic of many partitions of which few get records: the
case sessions are for.  The same broker code runs twice, once with
``max.incremental.fetch.session.cache.slots=0`` (every fetch names and returns
every partition) and once with the default (incremental fetches); the table
gives records consumed in the window and the broker's CPU per record.

    .venv/bin/python benchmarks/bench_fetch_sessions.py [--partitions 500] [--seconds 10]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

import kafka
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, os.path.dirname(__file__))
from bench_broker import cpu_seconds, free_port  # noqa: E402

ACTIVE = (3, 77)  # the partitions that get records


def run(slots: int, partitions: int, seconds: float) -> tuple[int, float]:
    data = tempfile.mkdtemp(prefix="bench-sessions-")
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "pylog", "broker",
         "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
         "--override", f"log.dirs={data}",
         "--override", f"max.incremental.fetch.session.cache.slots={slots}"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        while "listening on" not in (line := proc.stdout.readline()):
            if not line:
                raise SystemExit("pylog broker did not start")
        bootstrap = f"127.0.0.1:{port}"
        admin = AdminClient({"bootstrap.servers": bootstrap})  # alive until the result
        admin.create_topics([NewTopic("tail", partitions, 1)])["tail"].result()
        producer = kafka.KafkaProducer(bootstrap_servers=bootstrap, linger_ms=0)
        consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap,
                                       auto_offset_reset="earliest",
                                       enable_auto_commit=False, fetch_max_wait_ms=500)
        consumer.assign([kafka.TopicPartition("tail", p) for p in range(partitions)])
        consumer.poll(timeout_ms=2000)  # positions known, session (if any) open
        before = cpu_seconds(proc.pid)
        started = time.monotonic()
        sent = got = 0
        while time.monotonic() - started < seconds:
            for p in ACTIVE:
                producer.send("tail", b"x" * 100, partition=p)
                sent += 1
            producer.flush()
            got += sum(map(len, consumer.poll(timeout_ms=5).values()))
        while got < sent:
            got += sum(map(len, consumer.poll(timeout_ms=100).values()))
        cpu = cpu_seconds(proc.pid) - before
        consumer.close()
        producer.close()
        return got, cpu
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(data, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=500)
    parser.add_argument("--seconds", type=float, default=10)
    args = parser.parse_args()
    rows = [(name, *run(slots, args.partitions, args.seconds))
            for name, slots in (("full fetches", 0), ("fetch sessions", 1000))]
    print(f"kafka-python {kafka.__version__} tailing {len(ACTIVE)} of {args.partitions} "
          f"partitions for {args.seconds:g} s (one record to each, then a poll)")
    print("| fetches        | records consumed | broker CPU s | broker CPU us/record |")
    print("|----------------|-----------------:|-------------:|---------------------:|")
    for name, got, cpu in rows:
        print(f"| {name:14s} | {got:16,d} | {cpu:12.2f} | {cpu / got * 1e6:20,.0f} |")
    full, sessions = rows[0], rows[1]
    print(f"sessions/full: {sessions[1] / full[1]:.2f}x records, "
          f"{(sessions[2] / sessions[1]) / (full[2] / full[1]):.2f}x CPU per record")


if __name__ == "__main__":
    main()
