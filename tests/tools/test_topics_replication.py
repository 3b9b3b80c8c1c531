"""``pylog topics`` and replication: ``--replica-assignment`` on a real 3-node
cluster, the describe lines it gives, and the replication reports
(``--under-replicated-partitions``, ``--under-min-isr-partitions``,
``--at-min-isr-partitions``, ``--unavailable-partitions``) with Kafka 3.6's
rules on one node (a cluster with a node away: test_replication_metrics)."""

from __future__ import annotations

from broker_process import wait_for

TIMEOUT_S = 120  # liveness bound: replicas catching up


def _topics(pylog, bootstrap: str, *args: str):
    return pylog("topics", "--bootstrap-server", bootstrap, *args)


def test_replica_assignment_create_and_alter(pylog, tool_cluster, topic):
    b = tool_cluster.bootstrap
    r = _topics(pylog, b, "--create", "--topic", topic, "--replica-assignment", "1:2,2:0")
    assert (r.returncode, r.stdout, r.stderr) == (0, f"Created topic {topic}.\n", "")
    # Kafka drops the entries of the partitions the topic has already.
    r = _topics(pylog, b, "--alter", "--topic", topic, "--partitions", "3",
                "--replica-assignment", "1:2,2:0,0:1")
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")
    expected = [f"\tTopic: {topic}\tPartition: 0\tLeader: 1\tReplicas: 1,2\tIsr: 1,2",
                f"\tTopic: {topic}\tPartition: 1\tLeader: 2\tReplicas: 2,0\tIsr: 2,0",
                f"\tTopic: {topic}\tPartition: 2\tLeader: 0\tReplicas: 0,1\tIsr: 0,1"]

    def described() -> list[str] | None:
        lines = _topics(pylog, b, "--describe", "--topic", topic).stdout.splitlines()
        return lines if lines[1:] == expected else None

    lines = wait_for(described, TIMEOUT_S, f"{topic}'s replicas in sync")
    assert lines[0].endswith("\tPartitionCount: 3\tReplicationFactor: 2\tConfigs: ")
    # Every replica in sync, every leader live: none of the reports lists it.
    for report in ("--under-replicated-partitions", "--under-min-isr-partitions",
                   "--at-min-isr-partitions", "--unavailable-partitions"):
        r = _topics(pylog, b, "--describe", "--topic", topic, report)
        assert (r.returncode, r.stdout) == (0, ""), report


def test_replica_assignment_refusals_in_a_cluster(pylog, tool_cluster, topic):
    b = tool_cluster.bootstrap
    r = _topics(pylog, b, "--create", "--topic", topic, "--replica-assignment", "1:7")
    assert (r.returncode, r.stdout) == (1, "")
    assert r.stderr == ("Error while executing topic command : The manual partition assignment "
                        "includes broker 7, but no such broker is registered.\n")
    r = _topics(pylog, b, "--create", "--topic", topic, "--replica-assignment", "1:2,0")
    assert r.stderr == ("Error while executing topic command : Partition 1 has different "
                        "replication factor: 0\n")
    r = _topics(pylog, b, "--create", "--topic", topic, "--replica-assignment", "1:1")
    assert r.stderr == ("Error while executing topic command : Partition replica lists may not "
                        "contain duplicate entries: 1\n")


def test_reports_on_one_node(pylog, tool_broker, topic):
    """One node: every ISR is the replica set, so nothing is under-replicated
    or unavailable; a topic with min.insync.replicas=1 is at its min ISR and
    one with 2 under it."""
    b = tool_broker.bootstrap
    at, under = f"{topic}-at", f"{topic}-under"
    assert _topics(pylog, b, "--create", "--topic", at, "--partitions", "2").returncode == 0
    assert _topics(pylog, b, "--create", "--topic", under, "--config",
                   "min.insync.replicas=2").returncode == 0
    pattern = f"{topic}-.*"

    def report(flag: str) -> str:
        r = _topics(pylog, b, "--describe", "--topic", pattern, flag)
        assert r.returncode == 0, r.stderr
        return r.stdout

    assert report("--at-min-isr-partitions") == "".join(
        f"\tTopic: {at}\tPartition: {p}\tLeader: 0\tReplicas: 0\tIsr: 0\n" for p in range(2))
    assert report("--under-min-isr-partitions") == (
        f"\tTopic: {under}\tPartition: 0\tLeader: 0\tReplicas: 0\tIsr: 0\n")
    assert report("--under-replicated-partitions") == ""
    assert report("--unavailable-partitions") == ""
