"""pylog clusters of 1, 2, 4 nodes on one host: scaling, controller failover, topic creation.

    python benchmarks/bench_cluster.py            # N = 1, 2, 4 (8, 16, ... where cores allow)
    python benchmarks/bench_cluster.py --quick    # N = 1, 2, small runs (the test suite runs it)
    python benchmarks/bench_cluster.py --nodes 1,3 --sizes 1024 --repeat 5

For each N, ``pylog broker --nodes N`` (the supervisor and N node processes;
N=1 is ``--nodes 1`` with ``zookeeper.connect`` set, a ZooKeeper-mode node like
the others, not the embedded single node) on one ZooKeeper server this script
runs for all of them (each cluster in a chroot of its own; its CPU is not
counted), and measures:

* aggregate produce and consume throughput: a topic of the same number of
  partitions for every N (12 by default, replication factor 1: pure scaling,
  no replication), librdkafka load from ``--clients`` producer processes and
  then as many consumer processes (the same count for every N: enough for the
  largest N, and at least one per core), each with its share of the
  partitions; producers with bench_broker.py's settings (acks=1, linger.ms=5),
  consumers reading from the beginning by assign().  Scaling is
  throughput(N) / throughput(1), printed beside the cores all of it ran on;
* broker CPU seconds per GB of record payload: the sum over the node
  processes (each moved into a cgroup v1 cpuacct group of its own, every
  thread counted; else utime+stime from /proc), and the load processes' own
  CPU per GB beside it (on a small machine they share the cores);
* controller failover (N >= 2): kill -9 of the node DescribeCluster names as
  controller, until a surviving node's DescribeCluster answers a new
  controller (another id, or the same id under a newer /controller_epoch) and
  a CreateTopics (librdkafka's admin client, which sends it to the controller)
  succeeds.  A dead node is noticed when its ZooKeeper session expires, so this
  is about zookeeper.session.timeout.ms (18 s by default; Kafka's ZooKeeper
  mode behaves alike);
* topic creation: CreateTopics sent to node 0 until every node's own Metadata
  answer shows a leader for every partition and a record produced to every
  partition (a warm librdkafka producer, acks=1) is acknowledged.

Every throughput row is run ``--repeat`` times (3 by default) and the table
gives the medians; failover and creation times too.  Timings on a shared small
machine swing by 10-20% from run to run: compare the scaling and CPU s/GB
columns, and read throughput beside the cores (N node processes plus the
load processes all share them; the table says when they outnumber the cores).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
import textwrap
import time
from importlib.metadata import version
from pathlib import Path

import cluster_bench_common as common
import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic

from pylog.protocol import ApiKey

# Liveness bound for a node killed by a failover round to be back in the cluster:
# its restart is refused until its old ZooKeeper session expires, and the
# supervisor's back-off doubles meanwhile (1, 2, 4, 8, 16 s).
REJOIN_TIMEOUT_S = 120.0


def node_counts(quick: bool) -> list[int]:
    if quick:
        return [1, 2]
    counts = [1, 2, 4]
    while counts[-1] * 2 <= (os.cpu_count() or 1):
        counts.append(counts[-1] * 2)
    return counts


def create_topic(cluster: common.Cluster, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=60)[topic].result(90)


def delete_topic(cluster: common.Cluster, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.delete_topics([topic], operation_timeout=60)[topic].result(90)


def throughput(cluster: common.Cluster, topic: str, partitions: int, clients: int,
               records: int, size: int) -> tuple[common.LoadResult, common.LoadResult]:
    """One produce run and one consume run of ``topic`` (made here, dropped after)."""
    create_topic(cluster, topic, partitions)
    per_partition = records // partitions
    shares = common.split(range(partitions), clients)
    produced = common.run_load("produce", [
        {"bootstrap": cluster.bootstrap, "topic": topic, "partitions": share,
         "per_partition": per_partition, "size": size, "acks": "1"} for share in shares],
        cluster)
    consumed = common.run_load("consume", [
        {"bootstrap": cluster.bootstrap, "topic": topic, "partitions": share,
         # each partition also holds its producer's warm-up record
         "expected": len(share) * (per_partition + 1)} for share in shares], cluster)
    if produced.failed:
        raise SystemExit(f"{produced.failed} records failed on {cluster.nodes} nodes")
    delete_topic(cluster, topic)
    return produced, consumed


def topic_usable(cluster: common.Cluster, producer: ck.Producer, topic: str,
                 partitions: int) -> tuple[float, float, float]:
    """(s until node 0 answered, s until every node's Metadata shows leaders for
    every partition, s until a record produced to every partition is
    acknowledged), all from CreateTopics sent to node 0."""
    node0 = cluster.addresses[0]
    started = time.monotonic()
    r = common.request(node0, ApiKey.CREATE_TOPICS, 7, {
        "topics": [{"name": topic, "num_partitions": partitions, "replication_factor": 1,
                    "assignments": [], "configs": []}],
        "timeout_ms": 60_000, "validate_only": False}, timeout=90)
    if r.topics[0].error_code != 0:
        raise SystemExit(f"CreateTopics {topic}: error {r.topics[0].error_code} "
                         f"{r.topics[0].error_message}")
    answered = time.monotonic() - started

    def everywhere() -> bool:
        for address in cluster.addresses.values():
            state = common.partitions_of(address, topic)
            if state is None or len(state) != partitions or \
                    any(s.leader < 0 for s in state.values()):
                return False
        return True

    common.wait_until(everywhere, 60, f"{topic}'s leaders on every node", poll=0.005)
    known = time.monotonic() - started
    failed = []
    for p in range(partitions):
        producer.produce(topic, b"x", partition=p,
                         on_delivery=lambda err, _m: err and failed.append(err))
    if producer.flush(60) or failed:
        raise SystemExit(f"produce to the new topic {topic} failed: {failed[:3]}")
    return answered, known, time.monotonic() - started


def controller_failover(cluster: common.Cluster, round_: int) -> tuple[float, float]:
    """(s to a new controller in DescribeCluster, s to a successful CreateTopics)
    after kill -9 of the controller node; waits for the node to be back after."""
    zk = cluster.zookeeper()
    try:
        (old,) = common.wait_until(lambda: next(
            ((c,) for a in cluster.addresses.values()
             if (c := common.controller_of(a)) is not None and c >= 0), None),
            60, "a controller")
        epoch = int(zk.get("/controller_epoch")[0])
        survivors = [a for n, a in cluster.addresses.items() if n != old]
        log_mark = len(cluster.log_lines())
        started = cluster.signal_node(old, signal.SIGKILL)

        def new_controller() -> bool:
            # The old id again only from the killed node's next run, once it won a
            # newer epoch: before, it is a survivor's stale answer (a node learns
            # the new controller from its UpdateMetadata, after the election).
            for address in survivors:
                c = common.controller_of(address)
                if c is not None and c >= 0 and (
                        c != old or (cluster.restarted_address(old, log_mark) is not None
                                     and int(zk.get("/controller_epoch")[0]) > epoch)):
                    return True
            return False

        common.wait_until(new_controller, 120, "a new controller", poll=0.02)
        elected = time.monotonic() - started
        topic = f"after-failover-{round_}"
        admin = AdminClient({"bootstrap.servers": ",".join(survivors)})
        try:
            admin.create_topics([NewTopic(topic, 1, 1)],
                                operation_timeout=60)[topic].result(90)
        except ck.KafkaException as exc:
            raise SystemExit(
                f"CreateTopics after the controller's failover failed "
                f"{time.monotonic() - started:.1f} s after the kill ({elected:.1f} s after: a "
                f"new controller): {exc}; DescribeCluster now: "
                f"{ {a: common.controller_of(a) for a in survivors} }") from None
        created = time.monotonic() - started
    finally:
        zk.stop()
        zk.close()
    wait_rejoined(cluster, old, log_mark)
    return elected, created


def wait_rejoined(cluster: common.Cluster, node: int, log_mark: int) -> None:
    """Until ``node`` restarted (the supervisor says so) and every node's
    Metadata lists all the cluster's brokers again."""
    common.wait_until(lambda: cluster.restarted_address(node, log_mark), REJOIN_TIMEOUT_S,
                      f"node {node} to restart", poll=0.2)

    def all_brokers() -> bool:
        for address in cluster.addresses.values():
            try:
                r = common.request(address, ApiKey.METADATA, 9, {
                    "topics": [], "allow_auto_topic_creation": False,
                    "include_cluster_authorized_operations": False,
                    "include_topic_authorized_operations": False}, timeout=1.0)
            except OSError:
                return False
            if len(r.brokers) != cluster.nodes:
                return False
        return True

    common.wait_until(all_brokers, REJOIN_TIMEOUT_S, f"node {node} back in the cluster",
                      poll=0.2)


def med(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="N = 1, 2; 60,000 records of 1 KiB per run, one round")
    parser.add_argument("--nodes", default=None,
                        help="node counts, e.g. 1,2,4 (default 1, 2, 4 and doublings up to "
                             "the cores)")
    parser.add_argument("--records", type=int, default=None,
                        help="records per produce run, over all producers (default 600,000)")
    parser.add_argument("--sizes", default=None, help="record sizes (default 100,1024)")
    parser.add_argument("--partitions", type=int, default=None,
                        help="partitions of the load topic (default 12, or 3 per node of "
                             "the largest N past 4)")
    parser.add_argument("--clients", type=int, default=None,
                        help="producer processes, then consumer processes (default: the "
                             "largest N, at least the cores)")
    parser.add_argument("--repeat", type=int, default=None,
                        help="rounds per row (default 3; --quick 1)")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="a setting for every node (repeatable)")
    args = parser.parse_args()
    counts = ([int(n) for n in args.nodes.split(",")] if args.nodes
              else node_counts(args.quick))
    records = args.records or (60_000 if args.quick else 600_000)
    sizes = [int(s) for s in (args.sizes or ("1024" if args.quick else "100,1024")).split(",")]
    partitions = args.partitions or max(12, 3 * max(counts))
    cores = os.cpu_count() or 1
    clients = args.clients or max(max(counts), cores)
    repeat = args.repeat or (1 if args.quick else 3)
    overrides = list(args.override)
    if args.quick and not any(kv.startswith("zookeeper.session.timeout.ms=")
                              for kv in overrides):
        overrides.append("zookeeper.session.timeout.ms=6000")  # a shorter failover
    session = next((kv.partition("=")[2] for kv in reversed(overrides)
                    if kv.startswith("zookeeper.session.timeout.ms=")), "18000 (the default)")
    print(f"confluent-kafka {version('confluent-kafka')} (librdkafka {ck.libversion()[0]}); "
          f"{common.machine()}; N = {', '.join(map(str, counts))} nodes (pylog broker --nodes "
          f"N, zookeeper.connect set: N=1 is a ZooKeeper-mode node, not the embedded single "
          f"node); {partitions} partitions RF 1; {clients} producer then {clients} consumer "
          f"processes; {records:,} records per run; medians of {repeat} rounds; "
          f"zookeeper.session.timeout.ms {session}, ZooKeeper tickTime {common.ZK_TICK_MS} ms"
          + "".join(f"; {kv}" for kv in overrides
                    if not kv.startswith("zookeeper.session.timeout.ms=")), flush=True)

    rows = []  # (N, size, produce results, consume results)
    extra: dict[int, tuple[list, list, list, list]] = {}
    with tempfile.TemporaryDirectory(prefix="pylog-bench-cluster-") as data:
        zookeeper = common.start_zookeeper(Path(data) / "zookeeper")
        precise = True
        try:
            for n in counts:
                # Kafka's default 3 needs 3 brokers for the group coordinator.
                own = [f"offsets.topic.replication.factor={n}"] if n < 3 else []
                cluster = common.Cluster(Path(data) / f"nodes-{n}", n, zookeeper.address,
                                         own + overrides).start()
                try:
                    common.warm_group(cluster.bootstrap)
                    for size in sizes:
                        produced, consumed = [], []
                        for round_ in range(repeat):
                            p, c = throughput(cluster, f"load-{size}-{round_}", partitions,
                                              clients, records, size)
                            produced.append(p)
                            consumed.append(c)
                            print(f"  {n} nodes {size} B: produce {p.rate:,.0f} rec/s, "
                                  f"consume {c.rate:,.0f} rec/s", file=sys.stderr, flush=True)
                        rows.append((n, size, produced, consumed))
                    precise = precise and cluster.precise_cpu
                    producer = ck.Producer(common.producer_config(cluster.bootstrap, "1"))
                    create_topic(cluster, "warm", partitions)
                    for p in range(partitions):  # connections to every node
                        producer.produce("warm", b"w", partition=p)
                    producer.flush(60)
                    answered, known, usable, elected, created = [], [], [], [], []
                    for round_ in range(repeat):
                        a, k, u = topic_usable(cluster, producer, f"new-{round_}", partitions)
                        answered.append(a)
                        known.append(k)
                        usable.append(u)
                    producer.flush(10)
                    del producer
                    if n >= 2:
                        for round_ in range(repeat):
                            e, c = controller_failover(cluster, round_)
                            elected.append(e)
                            created.append(c)
                            print(f"  {n} nodes: controller failover {e:.2f} s, CreateTopics "
                                  f"after {c:.2f} s", file=sys.stderr, flush=True)
                    extra[n] = (answered, known, usable, elected, created)
                except BaseException:
                    print(f"cluster of {n} log's tail:\n{cluster.log_tail()}\n"
                          f"{common.zookeeper_report(zookeeper)}", file=sys.stderr)
                    raise
                finally:
                    cluster.stop()
        finally:
            zookeeper.stop()

    print_table(rows, extra, sizes, cores, clients, precise)


def print_table(rows: list, extra: dict, sizes: list[int], cores: int, clients: int,
                precise: bool) -> None:
    base = {}
    for n, size, produced, consumed in rows:
        if n == 1:
            base[size] = (med([r.rate for r in produced]), med([r.rate for r in consumed]))
    cols = ["nodes", "cores", "procs", "size", "produce rec/s", "MB/s", "scaling",
            "node CPU s/GB", "client CPU s/GB", "consume rec/s", "MB/s", "scaling",
            "node CPU s/GB", "client CPU s/GB", "new controller s", "+CreateTopics s",
            "topic: answered s", "leaders on all nodes s", "+produced s"]
    print()
    print("| " + " | ".join(cols) + " |")
    print("|" + "|".join("-" * (len(c) + 2) for c in cols) + "|")
    shown: set[int] = set()
    for n, size, produced, consumed in rows:
        cells = [str(n), str(cores), f"{n}+{clients}" + (" > cores" if n + clients > cores
                                                        else ""), str(size)]
        for results, which in ((produced, 0), (consumed, 1)):
            rate = med([r.rate for r in results])
            gb = [r.records * size / 1e9 for r in results]
            node = med([sum(r.node_cpu.values()) / g for r, g in zip(results, gb, strict=True)])
            client = med([r.client_cpu / g for r, g in zip(results, gb, strict=True)])
            scaling = (f"{rate / base[size][which]:.2f} / {n}" if size in base else "-")
            cells += [f"{rate:,.0f}", f"{rate * size / 1e6:.1f}", scaling, f"{node:.2f}",
                      f"{client:.2f}"]
        if n not in shown and n in extra:
            shown.add(n)
            answered, known, usable, elected, created = extra[n]
            cells += [f"{med(elected):.2f}" if elected else "- (N=1)",
                      f"{med(created):.2f}" if created else "-",
                      f"{med(answered):.3f}", f"{med(known):.3f}", f"{med(usable):.3f}"]
        else:
            cells += ["", "", "", "", ""]
        print("| " + " | ".join(cells) + " |")
    meter = ("each node's own cgroup cpuacct.usage, ns, every thread" if precise
             else "utime+stime from /proc/<pid>/stat, 10 ms ticks")
    notes = [
        "How to read it: one row per node count N and record size, each figure the median "
        "of its rounds.",
        f"procs: the N node processes + the load processes that ran beside them on this "
        f"host's {cores} cores ('> cores': they outnumber the cores, so nodes and clients "
        "take turns on them, and throughput cannot scale with N past the cores).",
        "scaling: throughput(N) / throughput(1) for that size, beside N (what it would be "
        "with a core of its own for every node and client).",
        f"node CPU s/GB: the node processes' CPU summed over all N ({meter}; ZooKeeper not "
        "included) per GB of record payload produced or consumed; client CPU s/GB: the "
        "load processes' own, for the same GB.",
        "new controller s: kill -9 of the controller node until a surviving node's "
        "DescribeCluster answers a new controller (a dead node is seen when its ZooKeeper "
        "session expires: zookeeper.session.timeout.ms); +CreateTopics s: until a "
        "CreateTopics sent after that succeeded; both from the kill.",
        "topic: CreateTopics (12 partitions unless --partitions) sent to node 0: answered s "
        "(the node answers once its own metadata shows the leaders); leaders on all nodes s: "
        "until every node's own Metadata shows a leader for every partition; +produced s: "
        "until a record produced to every partition was acknowledged; all from the request.",
    ]
    print()
    for note in notes:
        print(textwrap.fill(note, 100))


if __name__ == "__main__":
    main()
