"""Replication on a 3-node pylog cluster: its cost in throughput, latency and CPU; failover.

    python benchmarks/bench_replication.py            # 300,000 records per producer run
    python benchmarks/bench_replication.py --quick    # small runs, one round (the test suite)
    python benchmarks/bench_replication.py --size 1024 --rate 2000 --repeat 5

One ``pylog broker --nodes 3`` cluster (on a ZooKeeper server this script runs;
zookeeper.session.timeout.ms at its default, 18000) and, beside it, librdkafka's
mock cluster with 3 brokers (``test.mock.num.brokers=3`` in a confluent-kafka
client of its own process, as bench_broker.py uses the mock with 1; it
auto-creates topics of 4 partitions with replication factor 3 and keeps
records in memory: it shows what the clients can do).  Measured:

* producer throughput from one producer process (bench_broker.py's settings:
  linger.ms=5, batch.size 1 MB), records of ``--size`` bytes, to a topic of 6
  partitions whose leaders the cluster spreads over the nodes: acks=1 with
  replication factor 1, acks=1 with RF 3 (followers fetch, the producer does not
  wait for them) and acks=all with RF 3 and min.insync.replicas=2 (the leader
  answers once the high watermark passed the batch); on the mock, acks=1 and
  acks=all (RF 3 both).  The ratios are against acks=1 on the same target; Kafka's
  own figures from the same experiment (Jay Kreps, "Benchmarking Apache Kafka: 2
  Million Writes Per Second (On Three Cheap Machines)", 2014: one producer thread,
  100-byte records, 6 partitions, 3 machines) are printed beside them: 3x
  asynchronous replication 96% and 3x synchronous replication 51% of unreplicated
  throughput;
* broker CPU seconds per GB produced: summed over the three node processes in
  the throughput rows (each node in a cgroup v1 cpuacct group of its own, every
  thread; else utime+stime from /proc), and split by role on a topic of one
  partition with replicas [0, 1, 2] (node 0 leads it): the leader's CPU (the
  produce path, serving its followers' fetches, the high watermark) and each
  follower's (fetching, appending), per GB produced, beside the leader's CPU on
  an unreplicated partition of node 0 (the produce path alone);
* produce latency p50/p99/p99.9 at a fixed ``--rate`` (librdkafka's own
  per-message latency, produce() to delivery report, as bench_broker.py
  measures it): acks=1 RF 1, acks=all RF 3, and acks=all on the mock;
* failover of one partition (RF 3, min.insync.replicas=2) while a producer
  sends an acks=all record every 5 ms: kill -9 of its leader, with
  zookeeper.session.timeout.ms 18000 (this cluster) and 6000 (a second cluster):
  the time until a surviving node's Metadata names another leader, and until the
  first acknowledged record the successor wrote (found afterwards by reading the
  partition: the records under the successor's leader epoch).  Kafka's ZooKeeper
  mode notices a dead leader when its session expires, so the goal is under the
  session timeout + 1 s.  And SIGTERM of the leader node (its controlled
  shutdown moves its leaderships first): the goal is under 1 s for both.  After
  each round the killed node is back (the supervisor restarts it) and in the ISR
  before the next.

Every throughput row is run ``--repeat`` times (3 by default), the pylog and mock
rows alternating, and the table gives medians; failover rounds too.  Timings on
a shared small machine swing by 10-20% from run to run: compare the ratios.
"""

from __future__ import annotations

import argparse
import signal
import statistics
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path

import bench_broker
import cluster_bench_common as common
import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic

from pylog.protocol import ApiKey
from pylog.records.pyrecords import build_batch

NODES = 3
PARTITIONS = 6  # Kafka's 2014 test's; the mock auto-creates 4
MOCK_PARTITIONS = 4
MIN_INSYNC = 2
DEFAULT_SESSION_MS = 18000
SHORT_SESSION_MS = 6000
# Kafka's 2014 figures (one producer thread, 100-byte records, records/s).
KAFKA_2014 = {"none": 821_557, "async": 786_980, "sync": 421_823}
# Liveness bound for a killed node to be back in the ISR (its restart waits for its
# old ZooKeeper session to expire, under the supervisor's doubling back-off).
REJOIN_TIMEOUT_S = 180.0
SEND_EVERY_S = 0.005


def create_topic(cluster: common.Cluster, topic: str, partitions: int, rf: int,
                 assignment: list[list[int]] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    configs = {"min.insync.replicas": str(MIN_INSYNC)} if rf > 1 else {}
    new = (NewTopic(topic, len(assignment), replica_assignment=assignment, config=configs)
           if assignment
           else NewTopic(topic, partitions, rf, config=configs))
    admin.create_topics([new], operation_timeout=60)[topic].result(90)


def delete_topic(cluster: common.Cluster, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.delete_topics([topic], operation_timeout=60)[topic].result(90)


def produce_run(bootstrap: str, topic: str, partitions: int, records: int, size: int,
                acks: str, meter: Callable[[], dict[int, float]]) -> common.LoadResult:
    result = common.run_load("produce", [
        {"bootstrap": bootstrap, "topic": topic, "partitions": list(range(partitions)),
         "per_partition": records // partitions, "size": size, "acks": acks}], meter=meter)
    if result.failed:
        raise SystemExit(f"{result.failed} records failed producing to {topic} (acks={acks})")
    return result


# -- failover ---------------------------------------------------------------------------


def leader_state(cluster: common.Cluster, topic: str, exclude: int | None = None,
                 ) -> common.PartitionState | None:
    """Partition 0's state as the first answering node (not ``exclude``) tells it."""
    for node, address in cluster.addresses.items():
        if node != exclude and (state := common.partitions_of(address, topic)):
            return state.get(0)
    return None


def wait_in_sync(cluster: common.Cluster, topic: str) -> common.PartitionState:
    """Until partition 0 has a leader and all its replicas in the ISR, on every node."""
    def synced() -> common.PartitionState | None:
        states = [common.partitions_of(a, topic) for a in cluster.addresses.values()]
        if any(s is None or 0 not in s for s in states):
            return None
        first = states[0][0]  # type: ignore[index]
        if first.leader < 0 or len(first.isr) != NODES or \
                any(s[0] != first for s in states):  # type: ignore[index]
            return None
        return first
    return common.wait_until(synced, REJOIN_TIMEOUT_S, f"{topic} fully in sync", poll=0.1)


def direct_ack(cluster: common.Cluster, topic: str, node: int, started: float,
               into: list[float]) -> None:
    """Acks=all Produce requests of one record sent straight to ``node`` (retried
    every 5 ms while it answers an error) until one is acknowledged: the time from
    ``started`` into ``into``.  No client's metadata refresh or back-off in it."""
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 10_000, "topic_data": [
        {"name": topic, "partition_data": [
            {"index": 0, "records": build_batch([(int(time.time() * 1000), None, b"p")])}]}]}
    while time.monotonic() - started < 120:
        try:
            r = common.request(cluster.addresses[node], ApiKey.PRODUCE, 9, body, timeout=15)
            if r.responses[0].partition_responses[0].error_code == 0:
                into.append(time.monotonic() - started)
                return
        except OSError:
            pass
        time.sleep(SEND_EVERY_S)


def failover_round(cluster: common.Cluster, topic: str, sig: int
                   ) -> tuple[float | None, float, float, float, int]:
    """From ``sig`` to the leader node: (s until ZooKeeper dropped its registration
    (kill -9; None for a SIGTERM, whose node stays registered while it moves its
    leaderships), s until a surviving node's Metadata names another leader, s until
    an acks=all Produce sent straight to that successor is acknowledged, s until
    librdkafka's first acknowledgement of a record the successor wrote, and how many
    acknowledged records the partition does not hold where they were acknowledged)."""
    before = wait_in_sync(cluster, topic)
    old, epoch = before.leader, before.epoch
    zk = cluster.zookeeper()
    gone: list[float] = []
    registration = f"/brokers/ids/{old}"
    producer = ck.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                            "linger.ms": 0, "message.timeout.ms": 120_000, "log_level": 0})
    producer.produce(topic, b"w", partition=0)
    if producer.flush(30):
        raise SystemExit("the failover topic's warm-up record was not acknowledged")
    sent: dict[int, float] = {}
    acked: dict[int, float] = {}  # offset -> when its acknowledgement arrived
    value_at: dict[int, bytes] = {}  # offset -> the acknowledged record's value
    failed: list[object] = []

    def delivered(err: object, msg: ck.Message) -> None:
        if err:
            failed.append(err)
        else:  # produce() time + librdkafka's produce-to-delivery latency
            acked[msg.offset()] = sent[int(msg.value())] + msg.latency()
            value_at[msg.offset()] = msg.value()

    log_mark = len(cluster.log_lines())
    started = cluster.signal_node(old, sig)
    if sig == signal.SIGKILL:  # the session expiry, as ZooKeeper tells it
        zk.exists(registration, watch=lambda event: gone.append(time.monotonic()))
    moved = None
    next_check = i = 0
    direct: list[float] = []
    prober = None
    while time.monotonic() - started < 120:
        now = time.monotonic()
        sent[i] = now
        producer.produce(topic, str(i).encode(), partition=0, on_delivery=delivered)
        i += 1
        producer.poll(0)
        if moved is None and now >= next_check:
            next_check = now + 0.02
            state = leader_state(cluster, topic, exclude=old)
            if state is not None and state.leader not in (old, -1):
                moved = time.monotonic() - started
                prober = threading.Thread(target=direct_ack, daemon=True,
                                          args=(cluster, topic, state.leader, started, direct))
                prober.start()
        if direct and sum(t > started + moved for t in acked.values()) >= 20:
            break
        time.sleep(SEND_EVERY_S)
    zk.stop()
    zk.close()
    if producer.flush(120):
        raise SystemExit("acks=all records left unacknowledged 120 s after the failover")
    if moved is None:
        raise SystemExit(f"{topic}'s leadership did not move in 120 s after signal {sig} "
                         f"to node {old}:\n{cluster.log_tail()}")
    assert prober is not None
    prober.join(130)
    if not direct:
        raise SystemExit(f"no acks=all Produce acknowledged by the successor of node {old} "
                         f"in 120 s:\n{cluster.log_tail()}")
    held = records_of(cluster, topic, min(acked))
    after = [t - started for off, t in acked.items() if off in held and held[off][0] > epoch]
    lost = sorted(off for off, value in value_at.items()
                  if off not in held or held[off][1] != value)
    if lost:
        print(f"  LOST: {len(lost)} acknowledged acks=all records are not in {topic}-0 "
              f"where they were acknowledged (offsets {lost[:5]}...; signal {sig} to node "
              f"{old})", file=sys.stderr, flush=True)
    if not after:
        raise SystemExit(f"no record acknowledged under a leader epoch after {epoch}")
    if failed:
        print(f"  note: {len(failed)} records failed during the failover: {failed[:2]}",
              file=sys.stderr)
    # The killed node back in the cluster and in sync before the next round.
    common.wait_until(lambda: cluster.restarted_address(old, log_mark), REJOIN_TIMEOUT_S,
                      f"node {old} to restart", poll=0.2)
    wait_in_sync(cluster, topic)
    expired = gone[0] - started if gone else None
    return expired, moved, direct[0], min(after), len(lost)


def records_of(cluster: common.Cluster, topic: str, start: int
               ) -> dict[int, tuple[int, bytes | None]]:
    """offset -> (leader epoch, value) of partition 0's records from ``start`` to
    its end, as a consumer reads them now."""
    consumer = ck.Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "bench",
                            "enable.auto.commit": False, "log_level": 0})
    try:
        _, high = consumer.get_watermark_offsets(ck.TopicPartition(topic, 0), timeout=30)
        consumer.assign([ck.TopicPartition(topic, 0, start)])
        out: dict[int, tuple[int, bytes | None]] = {}
        deadline = time.monotonic() + 60
        while (not out or max(out) < high - 1) and time.monotonic() < deadline:
            for m in consumer.consume(10000, 1):
                if not m.error():
                    epoch = m.leader_epoch()
                    out[m.offset()] = (-1 if epoch is None else epoch, m.value())
        return out
    finally:
        consumer.close()


# -- the run ----------------------------------------------------------------------------


def med(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="30,000 records per run, 2 s latency runs, one round, "
                             "failover only with the short session timeout")
    parser.add_argument("--records", type=int, default=None,
                        help="records per producer run (default 300,000)")
    parser.add_argument("--size", type=int, default=100,
                        help="record size in bytes (default 100, as Kafka's 2014 test)")
    parser.add_argument("--rate", type=int, default=None,
                        help="records/s of the latency runs (default 5,000)")
    parser.add_argument("--repeat", type=int, default=None,
                        help="rounds per row (default 3; --quick 1)")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="a setting for every node (repeatable)")
    args = parser.parse_args()
    records = args.records or (30_000 if args.quick else 300_000)
    repeat = args.repeat or (1 if args.quick else 3)
    rate = args.rate or 5_000
    lat_seconds = 2.0 if args.quick else 10.0
    size = args.size
    sessions = [SHORT_SESSION_MS] if args.quick else [DEFAULT_SESSION_MS, SHORT_SESSION_MS]
    print(f"confluent-kafka {version('confluent-kafka')} (librdkafka {ck.libversion()[0]}); "
          f"{common.machine()}; pylog broker --nodes {NODES} on one ZooKeeper (tickTime "
          f"{common.ZK_TICK_MS} ms) and librdkafka's mock cluster of {NODES} brokers; "
          f"{records:,} records of {size} B per producer run, one producer process; "
          f"medians of {repeat} rounds" + "".join(f"; {kv}" for kv in args.override),
          flush=True)

    rows: dict[str, list] = {}
    cpu_roles: dict[str, list[float]] = {"leader RF1": [], "leader RF3": [], "follower": []}
    lat: dict[str, list[float]] = {}
    failovers: dict[str, list[tuple[float | None, float, float, float, int]]] = {}
    with tempfile.TemporaryDirectory(prefix="pylog-bench-replication-") as data:
        zookeeper = common.start_zookeeper(Path(data) / "zookeeper")
        clusters: list[common.Cluster] = []
        mock = None
        try:
            session = sessions[0]
            cluster = common.Cluster(Path(data) / "cluster", NODES, zookeeper.address,
                                     [f"zookeeper.session.timeout.ms={session}",
                                      *args.override]).start()
            clusters.append(cluster)
            common.warm_group(cluster.bootstrap)
            mock = bench_broker.start_mock(NODES)
            mock_meter = {-1: mock.cpu_seconds}  # the mock's host process
            precise = True

            def pylog_run(name: str, rf: int, acks: str, run_id: int) -> None:
                topic = f"load-rf{rf}-acks{acks}-{run_id}"
                create_topic(cluster, topic, PARTITIONS, rf)
                r = produce_run(cluster.bootstrap, topic, PARTITIONS, records, size, acks,
                                cluster.cpu)
                delete_topic(cluster, topic)
                rows.setdefault(f"pylog {name}", []).append(r)
                print(f"  pylog {name}: {r.rate:,.0f} rec/s", file=sys.stderr, flush=True)

            def mock_run(acks: str, run_id: int) -> None:
                r = produce_run(mock.bootstrap, f"m{run_id}", MOCK_PARTITIONS, records, size,
                                acks, lambda: {-1: mock_meter[-1]()})
                rows.setdefault(f"mock acks={acks}", []).append(r)
                print(f"  mock acks={acks}: {r.rate:,.0f} rec/s", file=sys.stderr, flush=True)

            run_id = 0
            steps = [("acks=1 RF1", 1, "1"), ("acks=1 RF3", 3, "1"), ("acks=all RF3", 3, "all"),
                     ("mock", 0, "1"), ("mock", 0, "all")]
            for round_ in range(repeat):
                # pylog and the mock alternate, and which goes first too
                for name, rf, acks in (steps if round_ % 2 == 0 else steps[::-1]):
                    run_id += 1
                    if rf:
                        pylog_run(name, rf, acks, run_id)
                    else:
                        mock_run(acks, run_id)
            precise = cluster.precise_cpu

            # CPU by role: one partition led by node 0, replicas on 1 and 2.
            for _ in range(repeat):
                run_id += 1
                for rf, key in ((1, "leader RF1"), (3, "leader RF3")):
                    topic = f"roles-{rf}-{run_id}"
                    create_topic(cluster, topic, 1, rf, [[0, 1, 2][:rf]])
                    r = produce_run(cluster.bootstrap, topic, 1, records, size,
                                    "all" if rf > 1 else "1", cluster.cpu)
                    gb = r.records * size / 1e9
                    cpu_roles[key].append(r.node_cpu[0] / gb)
                    if rf > 1:
                        cpu_roles["follower"] += [r.node_cpu[1] / gb, r.node_cpu[2] / gb]
                    delete_topic(cluster, topic)

            for name, target, rf, acks in (("pylog acks=1 RF1", cluster, 1, "1"),
                                           ("pylog acks=all RF3", cluster, 3, "all"),
                                           ("mock acks=all", mock, 0, "all")):
                run_id += 1
                topic = f"lat-{run_id}"
                if rf:
                    create_topic(cluster, topic, PARTITIONS, rf)
                lat[name] = bench_broker.latency(
                    bench_broker.Target(name, target.bootstrap, 0, None),  # type: ignore[arg-type]
                    topic, rate, lat_seconds, size, acks,
                    PARTITIONS if rf else MOCK_PARTITIONS)
            mock.stop()
            mock = None

            for session in sessions:
                if session != sessions[0]:
                    cluster.stop()
                    cluster = common.Cluster(Path(data) / f"cluster-{session}", NODES,
                                             zookeeper.address,
                                             [f"zookeeper.session.timeout.ms={session}",
                                              *args.override]).start()
                    clusters.append(cluster)
                topic = f"failover-{session}"
                create_topic(cluster, topic, 1, NODES)
                signals = [("kill -9", signal.SIGKILL)]
                if session == sessions[0]:
                    signals.append(("SIGTERM", signal.SIGTERM))
                for label, sig in signals:
                    key = f"{label} @{session}"
                    for _ in range(repeat):
                        result = failover_round(cluster, topic, sig)
                        failovers.setdefault(key, []).append(result)
                        print(f"  {key}: leader moved after {result[1]:.3f} s, acks=all "
                              f"acknowledged by the successor after {result[2]:.3f} s "
                              f"(librdkafka's first after {result[3]:.3f} s)", file=sys.stderr,
                              flush=True)
        except BaseException:
            for c in clusters:
                print(f"log tail of {c.data_dir.name}:\n{c.log_tail()}", file=sys.stderr)
            print(common.zookeeper_report(zookeeper), file=sys.stderr)
            raise
        finally:
            if mock is not None:
                mock.stop()
            for c in clusters:
                c.stop()
            zookeeper.stop()

    print_table(rows, cpu_roles, lat, failovers, size, rate, lat_seconds, precise)


def print_table(rows: dict, cpu_roles: dict, lat: dict, failovers: dict, size: int,
                rate: int, lat_seconds: float, precise: bool) -> None:
    cols = ["test", "target", "setup", "rec/s", "MB/s", "ratio", "Kafka 2014",
            "broker CPU s/GB", "p50 ms", "p99 ms", "p99.9 ms", "session gone s", "moved s",
            "direct ack s", "librdkafka ack s", "acked lost", "goal"]
    table: list[list[str]] = []

    def row(**cells: str) -> None:
        table.append([cells.get(c, "") for c in cols])

    def rate_of(name: str) -> float:
        return med([r.rate for r in rows[name]])

    def cpu_of(name: str) -> float:
        return med([sum(r.node_cpu.values()) / (r.records * size / 1e9) for r in rows[name]])

    for name, base, kafka in (("pylog acks=1 RF1", "pylog acks=1 RF1", "none"),
                              ("pylog acks=1 RF3", "pylog acks=1 RF1", "async"),
                              ("pylog acks=all RF3", "pylog acks=1 RF1", "sync"),
                              ("mock acks=1", "mock acks=1", None),
                              ("mock acks=all", "mock acks=1", None)):
        target, setup = name.split(" ", 1)
        if target == "mock":
            setup += " RF3"
        elif "RF3" in setup:
            setup += f" min.isr {MIN_INSYNC}"
        k = (f"{KAFKA_2014[kafka] / KAFKA_2014['none']:.0%}" if kafka and kafka != "none"
             else "100%" if kafka else "")
        row(test="produce", target=target, setup=setup, **{
            "rec/s": f"{rate_of(name):,.0f}", "MB/s": f"{rate_of(name) * size / 1e6:.1f}",
            "ratio": f"{rate_of(name) / rate_of(base):.0%}", "Kafka 2014": k,
            "broker CPU s/GB": f"{cpu_of(name):.2f}"})
    for key, setup in (("leader RF1", "1 partition, node 0, acks=1 RF1: leader"),
                       ("leader RF3", "1 partition, node 0, acks=all RF3: leader"),
                       ("follower", "1 partition, node 0, acks=all RF3: each follower")):
        row(test="CPU role", target="pylog", setup=setup,
            **{"broker CPU s/GB": f"{med(cpu_roles[key]):.2f}"})
    for name, values in lat.items():
        target, setup = name.split(" ", 1)
        row(test="latency", target=target, setup=setup + (" RF3" if target == "mock" else ""),
            **{"p50 ms": f"{bench_broker.percentile(values, 0.5):.2f}",
               "p99 ms": f"{bench_broker.percentile(values, 0.99):.2f}",
               "p99.9 ms": f"{bench_broker.percentile(values, 0.999):.2f}"})
    for key, results in failovers.items():
        label, session = key.split(" @")
        goal_s = 1.0 if label == "SIGTERM" else int(session) / 1000 + 1
        gone = [r[0] for r in results if r[0] is not None]
        worst = max(r[2] for r in results)
        row(test="failover", target="pylog",
            setup=f"{label} leader, session {int(session) // 1000} s",
            **{"session gone s": f"{med(gone):.3f}" if gone else "",
               "moved s": f"{med([r[1] for r in results]):.3f}",
               "direct ack s": f"{med([r[2] for r in results]):.3f}",
               "librdkafka ack s": f"{med([r[3] for r in results]):.3f}",
               "acked lost": str(sum(r[4] for r in results)),
               "goal": f"< {goal_s:g} s: " + ("met" if worst < goal_s else
                                              f"missed (worst {worst:.2f})")})
    widths = [max(len(c), *(len(r[i]) for r in table)) for i, c in enumerate(cols)]
    print()
    print("| " + " | ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in table:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |")
    meter = ("each node's own cgroup cpuacct.usage, ns, every thread" if precise
             else "utime+stime from /proc/<pid>/stat, 10 ms ticks")
    notes = [
        "How to read it: medians of the rounds.",
        f"produce: one producer process, {size} B records, {PARTITIONS} partitions on pylog "
        f"(leaders spread over the {NODES} nodes), {MOCK_PARTITIONS} on the mock (its "
        "auto-created topics); ratio: against acks=1 on the same target (pylog: RF 1). "
        "Kafka 2014: the same ratios in Kafka's own test (Jay Kreps, 'Benchmarking Apache "
        f"Kafka: 2 Million Writes Per Second (On Three Cheap Machines)': "
        f"{KAFKA_2014['none']:,} records/s unreplicated, {KAFKA_2014['async']:,} with 3x "
        f"asynchronous and {KAFKA_2014['sync']:,} with 3x synchronous replication).",
        f"broker CPU s/GB: produce rows, the {NODES} node processes' CPU summed ({meter}; "
        "on the mock its host process, which does not store or replicate anything real) "
        "per GB of record payload produced; CPU role rows: the CPU of one node per GB "
        "produced to a partition it leads (its produce path, and with RF 3 serving its "
        "followers' fetches and moving the high watermark) or follows (fetching from the "
        "leader and appending).",
        f"latency: {rate:,} records/s for {lat_seconds:g} s after a 1 s warm-up, "
        "librdkafka's produce()-to-delivery time per record.",
        "failover: one partition, RF 3, min.insync.replicas=2, an acks=all record sent every "
        f"{SEND_EVERY_S * 1000:g} ms; session gone s (kill -9): from the signal until "
        "ZooKeeper dropped the dead node's registration (its session expired; ZooKeeper's "
        f"tickTime is {common.ZK_TICK_MS} ms); moved s: from the signal to the leader node until a "
        "surviving node's Metadata names another leader; direct ack s: until an acks=all "
        "Produce of one record sent straight to that successor (from then on, every "
        f"{SEND_EVERY_S * 1000:g} ms while it answers an error) is acknowledged: the "
        "broker's own failover; librdkafka ack s: until the producer's first "
        "acknowledgement of a record the successor wrote (its leader epoch), which adds "
        "librdkafka's metadata refresh and retry back-off; acked lost: acknowledged records "
        "(all rounds) the partition did not hold at their offset afterwards (0 unless "
        "replication lost data). kill -9: "
        "noticed when the dead node's ZooKeeper session expires (goal: session timeout + "
        "1 s); SIGTERM: the node's controlled shutdown moves its leaderships before it "
        "stops (goal: 1 s). goal: judged on the direct ack of the worst round.",
    ]
    print()
    for note in notes:
        print(textwrap.fill(note, 100))


if __name__ == "__main__":
    main()
