"""Consumer groups: rebalance time and OffsetCommit throughput against a pylog broker.

    python benchmarks/bench_groups.py             # full run (about a minute)
    python benchmarks/bench_groups.py --quick     # shorter commit runs

Rebalance (a 10-member group on a 100-partition topic, range assignor):

* ``wire``: ten members speaking the protocol directly (pylog's codec, one
  socket each) join together; the time from the last JoinGroup sent to the
  last SyncGroup answered is the coordinator's own cost, without any client
  timer in it.  Measured with group.initial.rebalance.delay.ms=0 and again
  with the default 3000 (the delay is then the floor);
* ``librdkafka cold``: ten confluent-kafka consumers subscribe at once; time
  from the last subscribe() to every member having its assignment;
* ``librdkafka join``: nine members are stable, a tenth subscribes; time from
  its subscribe() to all ten holding the new assignment.  Existing members
  only learn of a rebalance from a heartbeat answer, so heartbeat.interval.ms
  bounds it from below.

OffsetCommit throughput: one committing consumer per partition (confluent-kafka,
manual assign, synchronous commit of a new offset each time), all in one
group, for a fixed time; plus one wire client committing in a loop (the
broker's rate without librdkafka's per-request overhead).

The machine is shared and timings are noisy: compare against the configured
timeouts, which are printed next to each number.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pylog.protocol import ApiKey, decode_response, encode_request  # noqa: E402

MEMBERS = 10
PARTITIONS = 100
SESSION_MS = 10000
HEARTBEAT_MS = 1000


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Broker:
    def __init__(self, *overrides: str) -> None:
        self.dir = tempfile.mkdtemp(prefix="bench-groups-")
        self.port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        args = [sys.executable, "-m", "pylog", "broker",
                "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
                "--override", f"log.dirs={self.dir}"]
        for o in overrides:
            args += ["--override", o]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, cwd=ROOT)
        line = self.proc.stdout.readline()
        if "listening on" not in line:
            raise RuntimeError(f"broker did not start: {line}{self.proc.stdout.read()}")

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(30)
        subprocess.run(["rm", "-rf", self.dir], check=False)


class Wire:
    """One blocking connection; requests go out whole, responses come back in order."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.cid = 0

    def send(self, key: int, version: int, body: dict) -> None:
        self.cid += 1
        self.sock.sendall(encode_request(key, version, body, self.cid, framed=True))

    def recv(self, key: int, version: int):
        size, = struct.unpack(">i", self._exact(4))
        return decode_response(key, version, self._exact(size))[1]

    def request(self, key: int, version: int, body: dict):
        self.send(key, version, body)
        return self.recv(key, version)

    def _exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed")
            buf += chunk
        return bytes(buf)


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})  # alive until the result
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def subscription(topic: str) -> bytes:
    return struct.pack(">hih", 0, 1, len(topic)) + topic.encode() + struct.pack(">i", -1)


def assignment(topic: str, partitions: list[int]) -> bytes:
    return (struct.pack(">hih", 0, 1, len(topic)) + topic.encode()
            + struct.pack(f">i{len(partitions)}i", len(partitions), *partitions)
            + struct.pack(">i", -1))


# -- rebalance ------------------------------------------------------------------

def wire_rebalance(bootstrap: str, group: str, topic: str) -> float:
    """Seconds from the last JoinGroup sent to the last SyncGroup answered."""
    members = [Wire(bootstrap) for _ in range(MEMBERS)]
    body = {"group_id": group, "session_timeout_ms": SESSION_MS,
            "rebalance_timeout_ms": 30000, "member_id": "", "group_instance_id": None,
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": subscription(topic)}]}
    ids = []
    for m in members:  # v4+: first get a member id, as clients do
        ids.append(m.request(ApiKey.JOIN_GROUP, 5, body).member_id)
    for m, mid in zip(members, ids, strict=True):
        m.send(ApiKey.JOIN_GROUP, 5, {**body, "member_id": mid})
    started = time.perf_counter()
    joins = [m.recv(ApiKey.JOIN_GROUP, 5) for m in members]
    leader = next(j for j in joins if j.members)
    per = PARTITIONS // MEMBERS
    plan = [{"member_id": jm.member_id,
             "assignment": assignment(topic, list(range(i * per, (i + 1) * per)))}
            for i, jm in enumerate(leader.members)]
    for m, j in zip(members, joins, strict=True):
        m.send(ApiKey.SYNC_GROUP, 3, {
            "group_id": group, "generation_id": j.generation_id, "member_id": j.member_id,
            "group_instance_id": None, "assignments": plan if j.members else []})
    syncs = [m.recv(ApiKey.SYNC_GROUP, 3) for m in members]
    took = time.perf_counter() - started
    assert all(s.error_code == 0 and s.assignment for s in syncs), syncs
    for m, j in zip(members, joins, strict=True):
        m.request(ApiKey.LEAVE_GROUP, 4, {"group_id": group,
                                          "members": [{"member_id": j.member_id}]})
        m.sock.close()
    return took


class RdConsumer:
    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        from confluent_kafka import Consumer

        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": group,
            "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": HEARTBEAT_MS,
            "partition.assignment.strategy": "range", "enable.auto.commit": False})
        self.topic = topic
        self.assigned = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def start(self) -> None:
        self.consumer.subscribe([self.topic])
        self.thread.start()

    def run(self) -> None:
        while not self.stop.is_set():
            self.consumer.poll(0.02)
            self.assigned = len(self.consumer.assignment())

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        self.consumer.close()


def wait_all(consumers: list[RdConsumer], counts: list[int], timeout: float = 60) -> float:
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        if sorted(c.assigned for c in consumers) == sorted(counts):
            return time.perf_counter()
        time.sleep(0.005)
    raise TimeoutError([c.assigned for c in consumers])


def rdkafka_rebalances(bootstrap: str, group: str, topic: str) -> tuple[float, float]:
    consumers = [RdConsumer(bootstrap, group, topic) for _ in range(MEMBERS)]
    for c in consumers:
        c.start()
    last = time.perf_counter()
    cold = wait_all(consumers, [PARTITIONS // MEMBERS] * MEMBERS) - last
    consumers[-1].close()
    nine = consumers[:-1]
    per9 = [PARTITIONS // 9 + (1 if i < PARTITIONS % 9 else 0) for i in range(9)]
    wait_all(nine, per9)
    tenth = RdConsumer(bootstrap, group, topic)
    tenth.start()
    joined = time.perf_counter()
    join = wait_all([*nine, tenth], [PARTITIONS // MEMBERS] * MEMBERS) - joined
    for c in [*nine, tenth]:
        c.close()
    return cold, join


# -- commits ----------------------------------------------------------------------

def rdkafka_commits(bootstrap: str, group: str, topic: str, consumers: int,
                    seconds: float) -> float:
    from confluent_kafka import Consumer, TopicPartition

    counts = [0] * consumers
    stop = threading.Event()

    def run(i: int) -> None:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                      "enable.auto.commit": False})
        c.assign([TopicPartition(topic, i, 0)])
        n = 0
        while not stop.is_set():
            n += 1
            c.commit(offsets=[TopicPartition(topic, i, n)], asynchronous=False)
        counts[i] = n
        c.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(consumers)]
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    return sum(counts) / seconds


def wire_commits(bootstrap: str, group: str, topic: str, seconds: float,
                 depth: int = 1) -> float:
    w = Wire(bootstrap)
    body = {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
            "group_instance_id": None, "topics": [{"name": topic, "partitions": [
                {"partition_index": 0, "committed_offset": 0, "committed_metadata": ""}]}]}
    n = 0
    end = time.perf_counter() + seconds
    started = time.perf_counter()
    while time.perf_counter() < end:
        for _ in range(depth):
            body["topics"][0]["partitions"][0]["committed_offset"] = n
            w.send(ApiKey.OFFSET_COMMIT, 8, body)
            n += 1
        for _ in range(depth):
            r = w.recv(ApiKey.OFFSET_COMMIT, 8)
            assert r.topics[0].partitions[0].error_code == 0
    took = time.perf_counter() - started
    w.sock.close()
    return n / took


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    seconds = 3.0 if args.quick else 8.0
    rows: list[tuple[str, str, str]] = []
    print(f"machine: {os.cpu_count()} cpus; {MEMBERS} members, {PARTITIONS} partitions, "
          f"session.timeout.ms={SESSION_MS}, heartbeat.interval.ms={HEARTBEAT_MS}", flush=True)

    for delay in (0, 3000):
        broker = Broker(f"group.initial.rebalance.delay.ms={delay}")
        try:
            create_topic(broker.bootstrap, "rb", PARTITIONS)
            times = sorted(wire_rebalance(broker.bootstrap, f"wire-{i}", "rb")
                           for i in range(5))
            rows.append((f"rebalance, wire, {MEMBERS} members (median of 5)",
                         f"{times[2] * 1000:.1f} ms",
                         f"group.initial.rebalance.delay.ms={delay}"))
            if delay == 3000:
                cold, join = rdkafka_rebalances(broker.bootstrap, "rd", "rb")
                rows.append(("rebalance, librdkafka cold start (last subscribe -> all "
                             "assigned)", f"{cold * 1000:.0f} ms",
                             f"delay={delay} ms, heartbeat.interval.ms={HEARTBEAT_MS}"))
                rows.append(("rebalance, librdkafka 10th member joins (subscribe -> all "
                             "reassigned)", f"{join * 1000:.0f} ms",
                             f"heartbeat.interval.ms={HEARTBEAT_MS}, "
                             f"session.timeout.ms={SESSION_MS}"))
        finally:
            broker.stop()

    broker = Broker()
    try:
        create_topic(broker.bootstrap, "commits", 8)
        for n in (1, 8):
            rate = rdkafka_commits(broker.bootstrap, f"c{n}", "commits", n, seconds)
            rows.append((f"OffsetCommit, {n} confluent-kafka consumer(s), 1 partition each",
                         f"{rate:,.0f} commits/s", "synchronous commit per call"))
        rate = wire_commits(broker.bootstrap, "wire-c", "commits", seconds)
        rows.append(("OffsetCommit, 1 wire client, one request at a time",
                     f"{rate:,.0f} commits/s", "request/response round trips"))
        rate = wire_commits(broker.bootstrap, "wire-p", "commits", seconds, depth=32)
        rows.append(("OffsetCommit, 1 wire client, 32 in flight", f"{rate:,.0f} commits/s",
                     "pipelined"))
    finally:
        broker.stop()

    width = max(len(r[0]) for r in rows)
    print()
    for what, value, note in rows:
        print(f"{what:<{width}}  {value:>18}  {note}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
