"""What bench_cluster.py and bench_replication.py share: a ZooKeeper server,
``pylog broker --nodes N`` clusters on it, their node processes' CPU, raw
Metadata/DescribeCluster requests to one chosen node, and librdkafka load from
processes of their own.

A load process is this file run as a script (``python cluster_bench_common.py
worker '<json>'``): it makes its confluent-kafka producer or consumer, warms it
up, prints ``ready``, waits for ``go`` on stdin, runs, and prints one JSON line
(its start and end on CLOCK_MONOTONIC, which every process on the host shares,
and its own CPU).  The benchmark starts all of them, waits for every ``ready``,
reads the nodes' CPU, says ``go`` to all, and takes the aggregate throughput
as all records over (last end - first start).
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import confluent_kafka as ck
from bench_broker import CpuMeter
from kazoo.client import KazooClient

from pylog.cluster import lines
from pylog.cluster.node_process import NODE_READY_LINE
from pylog.cluster.processes import children, override_of
from pylog.orphans import die_with_parent
from pylog.protocol import ApiKey, decode_response, encode_request
from pylog.zk.server import ZooKeeperServer

# ZooKeeper expires sessions in buckets of one tick: with Kafka's usual tickTime of
# 2000 ms a dead node is noticed up to 2 s after its session timeout.  A tick of
# 500 ms keeps that under 0.5 s (and the session bounds wide enough for 6-18 s
# sessions), so the failover times are the nodes' own more than ZooKeeper's.
# A small heap: the machine is shared with the nodes and the clients.
ZK_TICK_MS = 500
ZK_MAX_SESSION_MS = 60000
ZK_HEAP_OPTS = "-Xmx256m"
# Liveness bounds, not speed expectations.
START_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 120.0


def wait_until(check: Callable[[], Any], timeout: float, what: str, poll: float = 0.02) -> Any:
    """``check()``'s first true value, polled every ``poll`` s; SystemExit after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(poll)


def machine() -> str:
    """One line: the cores this script may use and the load on them now."""
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    return (f"{os.cpu_count()} cores ({len(os.sched_getaffinity(0))} usable), "
            f"load average {load} before the run")


# -- ZooKeeper and clusters -------------------------------------------------------------


def start_zookeeper(data_dir: Path) -> ZooKeeperServer:
    """One standalone server for the whole run (each cluster in a chroot of its
    own); it dies with this process even on SIGKILL."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return ZooKeeperServer({"dataDir": str(data_dir), "clientPort": str(port),
                            "clientPortAddress": "127.0.0.1", "tickTime": str(ZK_TICK_MS),
                            "maxSessionTimeout": str(ZK_MAX_SESSION_MS)},
                           heap_opts=ZK_HEAP_OPTS, die_with_parent=True).start()


def zookeeper_report(server: ZooKeeperServer, lines_: int = 15) -> str:
    """For a failed run: whether the ZooKeeper server still runs, and its log's tail."""
    proc = server.proc
    state = ("running" if proc is not None and proc.poll() is None
             else f"exited ({proc.returncode})" if proc is not None else "never started")
    try:
        tail = server.log_path.read_text(errors="replace").splitlines()[-lines_:]
    except OSError:
        tail = []
    return f"ZooKeeper {server.address}: {state}; its log's tail:\n" + "\n".join(tail)


@dataclass
class Cluster:
    """``pylog broker --nodes N`` on 127.0.0.1 (port 0: a free port per node, told by
    its ready line), data in ``data_dir``, ZooKeeper at ``zk_connect`` (a chroot of
    its own); the supervisor's stderr (its lines and the nodes' logs) in
    ``data_dir/cluster.log``."""

    data_dir: Path
    nodes: int
    zk_connect: str
    overrides: Sequence[str] = ()
    addresses: dict[int, str] = field(default_factory=dict)
    proc: subprocess.Popen | None = None
    out: list[str] = field(default_factory=list)
    meters: dict[int, CpuMeter] = field(default_factory=dict)
    chroot: str = field(default_factory=lambda: f"/bench-{uuid.uuid4().hex[:8]}")

    @property
    def log_path(self) -> Path:
        return self.data_dir / "cluster.log"

    def start(self) -> Cluster:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        settings = ["listeners=PLAINTEXT://127.0.0.1:0", f"log.dirs={self.data_dir}",
                    f"zookeeper.connect={self.zk_connect}{self.chroot}", *self.overrides]
        if self.nodes == 1:  # --nodes 1 is the node process itself: id 0 as a cluster's first
            settings.append("broker.id=0")
        # The supervisor (or the single node) and all under it die with this script.
        argv = [*die_with_parent("TERM"), sys.executable, "-m", "pylog", "broker",
                "--nodes", str(self.nodes),
                *(a for kv in settings for a in ("--override", kv))]
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                         stderr=log, text=True)
        threading.Thread(target=self._read, daemon=True).start()
        ready = lines.CLUSTER_READY.format(nodes=self.nodes, zookeeper="")

        def started() -> bool:
            if self.proc.poll() is not None:
                return True
            if self.nodes == 1:
                return 0 in self.addresses
            return any(x.startswith(ready) for x in self.out)

        try:
            wait_until(started, START_TIMEOUT_S, f"{self.nodes} nodes to start", poll=0.1)
        except SystemExit:
            self.stop()
            raise
        if self.proc.poll() is not None:
            raise SystemExit(f"the cluster exited ({self.proc.returncode}):\n{self.log_tail()}")
        return self

    def _read(self) -> None:
        # Every node's own ready line ("pylog broker: node 3 listening on
        # 127.0.0.1:41234, data in ..."), which the supervisor passes on.
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            self.out.append(line.rstrip("\n"))
            if match := NODE_READY_LINE.fullmatch(self.out[-1]):
                self.addresses[int(match[1])] = match[2]

    def log_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def restarted_address(self, node: int, after_lines: int) -> str | None:
        """The address of ``node``'s restart told after the first ``after_lines``
        lines of the log (the supervisor's NODE_RESTARTED line), or None."""
        prefix = lines.NODE_RESTARTED.split("{")[0] + f"{node} restarted"
        for line in self.log_lines()[after_lines:]:
            if line.startswith(prefix):
                address = line.rsplit(" ", 1)[1]
                self.addresses[node] = address
                return address
        return None

    def log_lines(self) -> list[str]:
        return self.log_path.read_text(errors="replace").splitlines()

    @property
    def bootstrap(self) -> str:
        return ",".join(self.addresses[i] for i in sorted(self.addresses))

    def node_pids(self) -> dict[int, int]:
        """node id -> pid of the node processes running now."""
        assert self.proc is not None
        if self.nodes == 1:
            return {0: self.proc.pid} if self.proc.poll() is None else {}
        out = {}
        for pid, argv in children(self.proc.pid).items():
            node = override_of(argv, "broker.id")
            if node is not None and "pylog" in argv:
                out[int(node)] = pid
        return out

    def cpu(self) -> dict[int, float]:
        """Each node's CPU seconds so far (its own cpuacct cgroup where it can be;
        a restarted node gets a new meter)."""
        out = {}
        for node, pid in self.node_pids().items():
            meter = self.meters.get(node)
            if meter is None or meter.pid != pid:
                if meter is not None:
                    meter.close()
                meter = self.meters[node] = CpuMeter(pid)
            out[node] = meter.seconds()
        return out

    @property
    def precise_cpu(self) -> bool:
        return bool(self.meters) and all(m.precise for m in self.meters.values())

    def signal_node(self, node: int, sig: int) -> float:
        """Send ``sig`` to node ``node``'s process; when (time.monotonic())."""
        pid = self.node_pids()[node]
        at = time.monotonic()
        os.kill(pid, sig)
        return at

    def zookeeper(self) -> KazooClient:
        """A started ZooKeeper client in this cluster's chroot (stop and close it after)."""
        zk = KazooClient(hosts=self.zk_connect + self.chroot)
        zk.start(timeout=30)
        return zk

    def stop(self) -> None:
        for meter in self.meters.values():
            meter.close()
        self.meters.clear()
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:  # its nodes die with it (pdeathsig)
            self.proc.kill()
            self.proc.wait()


# -- one request to one node ----------------------------------------------------------


def request(address: str, api_key: int, version: int, body: dict, timeout: float = 5.0) -> Any:
    """One request to the node at ``address`` over a new connection: what that
    node itself answers (a librdkafka client picks its own broker)."""
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.sendall(encode_request(api_key, version, body, 1, "bench", framed=True))
        head = _recv(s, 4)
        _, response = decode_response(api_key, version, _recv(s, struct.unpack(">i", head)[0]))
    return response


def _recv(s: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise ConnectionError("connection closed")
        out += chunk
    return bytes(out)


def controller_of(address: str) -> int | None:
    """DescribeCluster's controller id from that node (-1: none known), None
    when it does not answer."""
    try:
        r = request(address, ApiKey.DESCRIBE_CLUSTER, 0,
                    {"include_cluster_authorized_operations": False}, timeout=1.0)
    except OSError:
        return None
    return r.controller_id if r.error_code == 0 else None


@dataclass(frozen=True)
class PartitionState:
    leader: int
    epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


def partitions_of(address: str, topic: str) -> dict[int, PartitionState] | None:
    """Metadata (v9) for ``topic`` from that node: partition -> state; None when
    the node does not answer or does not know the topic."""
    try:
        r = request(address, ApiKey.METADATA, 9,
                    {"topics": [{"name": topic}], "allow_auto_topic_creation": False,
                     "include_cluster_authorized_operations": False,
                     "include_topic_authorized_operations": False}, timeout=1.0)
    except OSError:
        return None
    for t in r.topics:
        if t.name == topic and t.error_code == 0:
            return {p.partition_index: PartitionState(p.leader_id, p.leader_epoch,
                                                      tuple(p.replica_nodes), tuple(p.isr_nodes))
                    for p in t.partitions}
    return None


# -- load processes ---------------------------------------------------------------------


def producer_config(bootstrap: str, acks: str) -> dict[str, Any]:
    """bench_broker.py's producer settings."""
    return {"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5,
            "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000,
            "log_level": 3}


def _cpu_now() -> float:
    t = os.times()
    return t.user + t.system


def _produce(job: dict) -> dict:
    producer = ck.Producer(producer_config(job["bootstrap"], job["acks"]))
    partitions, per_partition = job["partitions"], job["per_partition"]
    for p in partitions:  # warm up: metadata, connections (one record each, counted)
        producer.produce(job["topic"], b"w", partition=p)
    if producer.flush(60):
        raise SystemExit("warm-up records unacknowledged")
    print("ready", flush=True)
    sys.stdin.readline()
    failed = 0

    def delivered(err: object, _msg: object) -> None:
        nonlocal failed
        if err:
            failed += 1

    value, topic = os.urandom(job["size"]), job["topic"]
    produce, poll = producer.produce, producer.poll
    cpu, start = _cpu_now(), time.monotonic()
    for i in range(per_partition * len(partitions)):
        p = partitions[i % len(partitions)]
        try:
            produce(topic, value, partition=p, on_delivery=delivered)
        except BufferError:  # local queue full: let deliveries drain
            poll(0.005)
            produce(topic, value, partition=p, on_delivery=delivered)
        if i & 4095 == 0:
            poll(0)
    if producer.flush(600):
        raise SystemExit("records left unacknowledged after 600 s")
    end = time.monotonic()
    return {"start": start, "end": end, "records": per_partition * len(partitions),
            "failed": failed, "cpu": _cpu_now() - cpu}


def _consume(job: dict) -> dict:
    consumer = ck.Consumer({"bootstrap.servers": job["bootstrap"], "group.id": "bench",
                            "enable.auto.commit": False, "fetch.queue.backoff.ms": 10,
                            "log_level": 3})
    consumer.list_topics(job["topic"], timeout=30)  # warm up: metadata, a connection
    print("ready", flush=True)
    sys.stdin.readline()
    total = job["expected"]
    cpu, start = _cpu_now(), time.monotonic()
    consumer.assign([ck.TopicPartition(job["topic"], p, ck.OFFSET_BEGINNING)
                     for p in job["partitions"]])
    got = 0
    while got < total:
        msgs = consumer.consume(min(10000, total - got), 30)
        if not msgs:
            raise SystemExit(f"consumer stalled at {got}/{total}")
        got += sum(1 for m in msgs if not m.error())
    end = time.monotonic()
    consumer.close()
    return {"start": start, "end": end, "records": got, "failed": 0, "cpu": _cpu_now() - cpu}


@dataclass
class LoadResult:
    records: int
    seconds: float  # first start to last end
    client_cpu: float  # the load processes' own CPU seconds, summed
    node_cpu: dict[int, float]  # each node's CPU seconds over the run
    failed: int

    @property
    def rate(self) -> float:
        return self.records / self.seconds


def run_load(role: str, jobs: list[dict], cluster: Cluster | None = None,
             meter: Callable[[], dict[int, float]] | None = None) -> LoadResult:
    """One load process per job (``role`` "produce" or "consume"), started
    together once all are warm; the nodes' CPU (``cluster.cpu`` or ``meter``)
    read around the run."""
    read_cpu = meter or (cluster.cpu if cluster is not None else (lambda: {}))
    procs = [subprocess.Popen([*die_with_parent("KILL"), sys.executable,
                               str(Path(__file__).resolve()), "worker",
                               json.dumps({**job, "role": role})],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
             for job in jobs]
    try:
        for proc in procs:
            assert proc.stdout is not None
            if not select.select([proc.stdout], [], [], 120)[0] or \
                    proc.stdout.readline().strip() != "ready":
                raise SystemExit(f"a {role} process did not get ready")
        before = read_cpu()
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        results = []
        for proc in procs:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            if proc.wait(60) != 0 or not line:
                raise SystemExit(f"a {role} process failed (exit status {proc.returncode})")
            results.append(json.loads(line))
        after = read_cpu()
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return LoadResult(records=sum(r["records"] for r in results),
                      seconds=max(r["end"] for r in results) - min(r["start"] for r in results),
                      client_cpu=sum(r["cpu"] for r in results),
                      node_cpu={n: after[n] - before.get(n, 0.0) for n in after},
                      failed=sum(r["failed"] for r in results))


def warm_group(bootstrap: str, group: str = "bench") -> None:
    """The consumers' group coordinator found before anything is measured: the
    first FindCoordinator creates __consumer_offsets (start-up work; the
    benchmarks' consumers commit nothing, but librdkafka looks it up)."""
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                     "enable.auto.commit": False})
    deadline = time.monotonic() + 120
    try:
        while True:
            try:
                c.committed([ck.TopicPartition("bench-warm-up", 0)], timeout=60)
                return
            except ck.KafkaException:  # NOT_COORDINATOR while the topic is made: again
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    finally:
        c.close()


def split(partitions: Sequence[int], ways: int) -> list[list[int]]:
    """``partitions`` dealt round-robin into ``ways`` lists (empty ones dropped)."""
    return [list(partitions[i::ways]) for i in range(ways) if partitions[i::ways]]


def main() -> None:
    if len(sys.argv) != 3 or sys.argv[1] != "worker":
        raise SystemExit("usage: cluster_bench_common.py worker '<json job>' "
                         "(started by bench_cluster.py and bench_replication.py)")
    job = json.loads(sys.argv[2])
    result = _produce(job) if job["role"] == "produce" else _consume(job)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
