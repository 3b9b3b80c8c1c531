"""The replication and controller metrics (Kafka's ReplicaManager, KafkaController,
ControllerStats and ReplicaFetcherManager names) on one node and on a real
3-node cluster (``pylog broker --nodes 3``, each node serving its own page),
and ``pylog topics --describe``'s replication reports while a node is away."""

from __future__ import annotations

import os
import signal

from broker_process import wait_for
from metrics_page import scrape, value

RM = "kafka_server_replicamanager_"
KC = "kafka_controller_kafkacontroller_"
UNCLEAN = "kafka_controller_controllerstats_uncleanleaderelectionspersec"
MAX_LAG = "kafka_server_replicafetchermanager_maxlag"
CONSUMER_LAG = "kafka_server_fetcherlagmetrics_consumerlag"
TIMEOUT_S = 120  # liveness bound: a ZooKeeper session expiry, elections, catching up


def _describe(pylog, bootstrap: str, *flags: str, topic: str | None = None) -> list[list[str]]:
    """``topics --describe`` partition lines, as their tab-separated fields."""
    args = ["topics", "--bootstrap-server", bootstrap, "--describe", *flags]
    if topic is not None:
        args += ["--topic", topic]
    r = pylog(*args)
    assert r.returncode == 0, r.stderr
    return [line.split("\t")[1:] for line in r.stdout.splitlines() if line.startswith("\t")]


def _field(line: list[str], name: str) -> str:
    return next(f.split(": ", 1)[1] for f in line if f.startswith(name + ": "))


def _create(pylog, bootstrap: str, topic: str, *args: str) -> None:
    r = pylog("topics", "--bootstrap-server", bootstrap, "--create", "--topic", topic, *args)
    assert r.returncode == 0, r.stderr


def _in_sync(pylog, bootstrap: str, prefix: str) -> bool:
    """Every partition of the topics named ``prefix...`` led, with its full ISR."""
    lines = [ln for ln in _describe(pylog, bootstrap) if _field(ln, "Topic").startswith(prefix)]
    return bool(lines) and all(
        _field(ln, "Leader") != "none"
        and sorted(_field(ln, "Isr").split(",")) == sorted(_field(ln, "Replicas").split(","))
        for ln in lines)


def test_single_node_replication_metrics(pylog, tool_broker, topic):
    """One node leads every partition and is the controller; a topic asking
    for two in-sync replicas is under its min ISR, the others at it."""
    b = tool_broker.bootstrap
    _create(pylog, b, topic, "--partitions", "2", "--config", "min.insync.replicas=2")
    topics = pylog("topics", "--bootstrap-server", b, "--list").stdout.split()
    partitions = sum(len(_describe(pylog, b, topic=t)) for t in topics)
    under_min = [ln for ln in _describe(pylog, b, "--under-min-isr-partitions")]
    at_min = [ln for ln in _describe(pylog, b, "--at-min-isr-partitions")]
    page = scrape(tool_broker.metrics_url)
    assert value(page, KC + "activecontrollercount") == 1
    assert value(page, KC + "globaltopiccount") == len(topics)
    assert value(page, KC + "globalpartitioncount") == partitions
    assert value(page, KC + "offlinepartitionscount") == 0
    assert value(page, KC + "preferredreplicaimbalancecount") == 0
    assert value(page, RM + "partitioncount") == value(page, RM + "leadercount") == partitions
    assert value(page, RM + "underreplicatedpartitions") == 0
    assert value(page, RM + "underminisrpartitioncount") == len(under_min) >= 2
    assert [_field(ln, "Topic") for ln in under_min].count(topic) == 2
    assert value(page, RM + "atminisrpartitioncount") == len(at_min) == partitions - len(under_min)
    assert value(page, RM + "isrshrinkspersec") == value(page, RM + "isrexpandspersec") == 0
    assert value(page, UNCLEAN) == 0
    assert value(page, MAX_LAG, clientid="Replica") == 0
    assert page[CONSUMER_LAG] == []  # nothing is followed


def test_cluster_metrics_one_controller(pylog, tool_cluster, topic):
    """Exactly one node is the active controller and reports the cluster's
    topics and partitions; the others report 0 (as Kafka's gauges do); the
    nodes' leaders and replicas add up to the partitions and their replicas;
    each follower reports its fetch lag per partition."""
    b = tool_cluster.bootstrap
    _create(pylog, b, topic, "--partitions", "3", "--replication-factor", "2")
    wait_for(lambda: _in_sync(pylog, b, topic), TIMEOUT_S, f"{topic} in sync")

    def consistent() -> tuple | None:
        lines = _describe(pylog, b)
        pages = [scrape(url) for url in tool_cluster.metrics_urls]
        active = [i for i, page in enumerate(pages)
                  if value(page, KC + "activecontrollercount") == 1]
        if len(active) != 1:
            return None
        leaders = sum(value(page, RM + "leadercount") for page in pages)
        replicas = sum(value(page, RM + "partitioncount") for page in pages)
        if (leaders, replicas) != (len(lines), sum(len(_field(ln, "Replicas").split(","))
                                                   for ln in lines)):
            return None
        return lines, pages, active[0]

    lines, pages, controller = wait_for(consistent, TIMEOUT_S, "metrics matching the metadata")
    names = {_field(ln, "Topic") for ln in lines}
    assert value(pages[controller], KC + "globaltopiccount") == len(names)
    assert value(pages[controller], KC + "globalpartitioncount") == len(lines)
    assert value(pages[controller], KC + "offlinepartitionscount") == 0
    for i, page in enumerate(pages):
        if i != controller:
            for gauge in ("activecontrollercount", "globaltopiccount", "globalpartitioncount",
                          "offlinepartitionscount", "preferredreplicaimbalancecount"):
                assert value(page, KC + gauge) == 0, (i, gauge)
        assert value(page, UNCLEAN) == 0
        assert value(page, MAX_LAG, clientid="Replica") >= 0
    # Each follower of the new topic names its fetcher (fetcher 0, the leader's
    # id), once its fetcher has had an answer (a LeaderAndIsr re-made it since).
    def fetchers_named() -> bool:
        for ln in (ln for ln in lines if _field(ln, "Topic") == topic):
            leader = _field(ln, "Leader")
            follower = int(next(r for r in _field(ln, "Replicas").split(",") if r != leader))
            samples = [s for s in scrape(tool_cluster.metrics_urls[follower])[CONSUMER_LAG]
                       if s.labels["topic"] == topic and s.labels["partition"] == _field(
                           ln, "Partition")]
            if [s.labels["clientid"] for s in samples] != [f"ReplicaFetcherThread-0-{leader}"]:
                return False
        return True

    wait_for(fetchers_named, TIMEOUT_S, "each follower's fetcher in its metrics")


def _sum(urls: list[str], gauge: str) -> float:
    return sum(value(scrape(url), gauge) for url in urls)


def test_a_node_away_and_back(pylog, tool_cluster, topic):
    """A node that is not the controller frozen (SIGSTOP): its followers drop
    out of the ISRs (the leaders shrink them) and its ZooKeeper session
    expires, so its partitions get other leaders, and the one only it holds
    has none.  The metrics and ``topics --describe``'s reports agree on what
    is under-replicated, under or at min.insync.replicas and unavailable.
    Thawed, it catches up and the ISRs expand back."""
    urls = tool_cluster.metrics_urls
    controller = next(i for i, url in enumerate(urls)
                      if value(scrape(url), KC + "activecontrollercount") == 1)
    away = max(i for i in range(3) if i != controller)
    a, c = (i for i in range(3) if i != away)
    live_urls = [urls[a], urls[c]]
    b = tool_cluster.node_bootstrap(controller)
    _create(pylog, b, f"{topic}-all", "--partitions", "3", "--replication-factor", "3")
    _create(pylog, b, f"{topic}-only", "--replica-assignment", f"{away}")
    _create(pylog, b, f"{topic}-min2", "--replica-assignment", f"{away}:{a}:{c}",
            "--config", "min.insync.replicas=2")
    _create(pylog, b, f"{topic}-min3", "--replica-assignment", f"{a}:{c}:{away}",
            "--config", "min.insync.replicas=3")
    _create(pylog, b, f"{topic}-others", "--replica-assignment", f"{a}:{c}")
    wait_for(lambda: _in_sync(pylog, b, topic), TIMEOUT_S, "the topics in sync")
    shrinks = _sum(live_urls, RM + "isrshrinkspersec")
    expands = _sum(urls, RM + "isrexpandspersec")

    def mine(*flags: str) -> list[str]:
        return sorted(f"{_field(ln, 'Topic')}-{_field(ln, 'Partition')}"
                      for ln in _describe(pylog, b, *flags)
                      if _field(ln, "Topic").startswith(topic))

    pid = tool_cluster.process.node_pids()[away]
    os.kill(pid, signal.SIGSTOP)
    try:
        wait_for(lambda: mine("--unavailable-partitions") == [f"{topic}-only-0"]
                 and len(mine("--under-replicated-partitions")) == 5, TIMEOUT_S,
                 f"node {away} out of the ISRs and its partitions led by others")
        assert mine("--under-replicated-partitions") == sorted(
            [f"{topic}-all-{p}" for p in range(3)] + [f"{topic}-min2-0", f"{topic}-min3-0"])
        # Without a leader a partition is under its min ISR too (Kafka's rule).
        assert mine("--under-min-isr-partitions") == [f"{topic}-min3-0", f"{topic}-only-0"]
        assert mine("--at-min-isr-partitions") == [f"{topic}-min2-0", f"{topic}-only-0"]
        line = _describe(pylog, b, "--unavailable-partitions", topic=f"{topic}-only")
        assert line == [[f"Topic: {topic}-only", "Partition: 0", "Leader: none",
                         f"Replicas: {away}", f"Isr: {away}"]]

        def metrics_agree() -> bool:
            """The live nodes' gauges count what the reports list (their
            topics and any other test's: the cluster is shared)."""
            led = [ln for ln in _describe(pylog, b) if _field(ln, "Leader") != "none"]
            under_min = [ln for ln in _describe(pylog, b, "--under-min-isr-partitions")
                         if _field(ln, "Leader") != "none"]
            pages = [scrape(url) for url in live_urls]
            under = sum(len(_field(ln, "Isr").split(",")) < len(_field(ln, "Replicas").split(","))
                        for ln in led)
            return (sum(value(p, RM + "underreplicatedpartitions") for p in pages) == under
                    and sum(value(p, RM + "underminisrpartitioncount") for p in pages)
                    == len(under_min)
                    and value(scrape(urls[controller]), KC + "offlinepartitionscount")
                    == len(_describe(pylog, b, "--unavailable-partitions")))

        wait_for(metrics_agree, TIMEOUT_S, "the metrics to match the reports")
        # The leaders of the frozen node's followers shrank their ISRs
        # themselves (replica.lag.time.max.ms is shorter than the session timeout).
        assert _sum(live_urls, RM + "isrshrinkspersec") > shrinks
    finally:
        os.kill(pid, signal.SIGCONT)
    wait_for(lambda: _in_sync(pylog, b, topic), TIMEOUT_S, f"node {away} back in the ISRs")
    assert mine("--under-replicated-partitions") == []
    assert mine("--unavailable-partitions") == []
    assert _sum(urls, RM + "isrexpandspersec") > expands
