"""A fault soak in Jepsen's manner for a replicated topic: while an
idempotent acks=all producer and a consumer run (replication_workload), a
nemesis picks random faults on a :class:`node_cluster.NodeCluster` of 3 nodes,
one at a time, each healed before the next: kill -9 and restart, SIGSTOP
longer than replica.lag.time.max.ms (of one node or two) then SIGCONT, a
clean bounce (SIGTERM, restart).  At the end every acknowledged record must
be in the log at the offset it was acknowledged at, none twice, in order;
every record the consumer saw must still be where it saw it; and the
replicas of each partition must be byte for byte the same.

tests/replication/test_fault_soak.py runs it for a minute;
tests/soak/replication_soak.py for a number of events, printing a summary.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from node_cluster import NodeCluster
from replication_workload import Findings, Workload, check, read_log

PARTITIONS = 3
LAG_MS = 3000
SESSION_TIMEOUT_MS = 6000
NODE_OVERRIDES = (f"replica.lag.time.max.ms={LAG_MS}",)
# Each event is followed by this many more acknowledged records: the cluster
# takes writes again (liveness), and every fault lands under load.
RECORDS_BETWEEN = 40
LIVENESS_S = 180
# (name, weight)
FAULTS = (("kill", 3), ("pause", 3), ("pause-two", 1), ("bounce", 2))


@dataclass
class SoakReport:
    seed: int
    events: Counter[str] = field(default_factory=Counter)
    elapsed_s: float = 0.0
    sent: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)
    fatal: list[str] = field(default_factory=list)
    findings: Findings = field(default_factory=Findings)
    unequal_replicas: list[str] = field(default_factory=list)

    def problems(self) -> dict[str, object]:
        found: dict[str, object] = dict(self.findings.problems())
        if self.failed:
            found["failed"] = self.failed[:20]
        if self.fatal:
            found["fatal"] = self.fatal
        if self.unequal_replicas:
            found["unequal_replicas"] = self.unequal_replicas
        return found

    def summary(self) -> str:
        f = self.findings
        lines = [
            f"seed {self.seed}, {sum(self.events.values())} fault events in "
            f"{self.elapsed_s:.0f} s: " + ", ".join(f"{k} {v}" for k, v in
                                                   sorted(self.events.items())),
            f"records sent {self.sent}, acknowledged {f.acked}, failed {len(self.failed)}, "
            f"in the final log {f.log_records}, seen by the consumer {f.seen}",
            f"acknowledged records lost: {len(f.lost)}",
            f"records written twice: {len(f.duplicated)}",
            f"records out of order: {len(f.reordered)}",
            f"records seen by the consumer, then gone: {len(f.seen_then_gone)}",
            f"consumer: missed {len(f.consumer_missed)}, read twice "
            f"{len(f.consumer_repeated)}, out of order {len(f.consumer_disordered)}",
            f"partitions whose replicas differ: {len(self.unequal_replicas)}",
            f"fatal producer errors: {len(self.fatal)} (a new producer took over each time)",
            "RESULT: " + ("OK" if not self.problems() else f"PROBLEMS {self.problems()}"),
        ]
        return "\n".join(lines)


def start_cluster(base: object) -> NodeCluster:
    from pathlib import Path

    return NodeCluster(Path(str(base)), 3, *NODE_OVERRIDES,
                       session_timeout_ms=SESSION_TIMEOUT_MS).start()


class Nemesis:
    """Random faults, one at a time, each healed before it returns."""

    def __init__(self, nodes: NodeCluster, topic: str, rng: random.Random,
                 say: Callable[[str], None]) -> None:
        self.nodes = nodes
        self.topic = topic
        self.rng = rng
        self.say = say

    def _target(self) -> int:
        """The leader of a random partition (most faults), the controller,
        or any node."""
        roll = self.rng.random()
        if roll < 0.5:
            leader = self.nodes.leader(self.topic, self.rng.randrange(PARTITIONS))
            if leader >= 0:
                return leader
        elif roll < 0.7:
            controller = self.nodes.controller()
            if controller is not None:
                return controller
        return self.rng.randrange(self.nodes.count)

    def _hang_s(self) -> float:
        """Longer than replica.lag.time.max.ms; past the session timeout now and then."""
        return LAG_MS / 1000 + self.rng.uniform(0.5, 5.0)

    def strike(self) -> str:
        names, weights = zip(*FAULTS, strict=True)
        kind = self.rng.choices(names, weights)[0]
        nodes = self.nodes
        if kind == "kill":
            node = self._target()
            nodes.kill_node(node)
            nodes.start_node(node)
            what = f"kill -9 node {node}, restarted"
        elif kind == "bounce":
            node = self._target()
            nodes.stop_node(node)
            nodes.start_node(node)
            what = f"SIGTERM node {node}, restarted"
        else:
            hung = [self._target()]
            if kind == "pause-two":
                hung.append(self.rng.choice([i for i in range(nodes.count) if i not in hung]))
            hold = self._hang_s()
            for node in hung:
                nodes.pause(node)
            time.sleep(hold)  # the fault itself: how long the nodes hang
            for node in hung:
                nodes.resume(node)
            what = f"SIGSTOP nodes {hung} for {hold:.1f} s, SIGCONT"
        self.say(what)
        return kind


def run_soak(nodes: NodeCluster, topic: str, seed: int, events: int | None = None,
             duration_s: float | None = None,
             say: Callable[[str], None] = lambda line: None) -> SoakReport:
    """Faults until ``events`` were made or ``duration_s`` passed, then the checks."""
    report = SoakReport(seed)
    rng = random.Random(seed)
    nodes.create_topic(topic, PARTITIONS, 3, {"min.insync.replicas": "2"})
    work = Workload(nodes.bootstrap, topic, PARTITIONS, restart_after_fatal=True).start()
    nemesis = Nemesis(nodes, topic, rng, lambda line: say(
        f"[{time.monotonic() - started:6.1f} s] event {sum(report.events.values()) + 1}: "
        f"{line} (acked {work.acked_count()})"))
    started = time.monotonic()
    try:
        work.wait_acked(RECORDS_BETWEEN, LIVENESS_S, "before the first fault ")
        while ((events is None or sum(report.events.values()) < events)
               and (duration_s is None or time.monotonic() - started < duration_s)):
            report.events[nemesis.strike()] += 1
            fatal = len(work.fatal)
            work.wait_acked(RECORDS_BETWEEN, LIVENESS_S, "after the fault ")
            for error in work.fatal[fatal:]:
                say(f"the producer failed for good ({error}); a new one took over")
        # Healed: every node back in every ISR, then the load stops.
        nodes.wait_isr(topic, range(PARTITIONS), range(nodes.count), LIVENESS_S)
        work.stop()
    except BaseException:
        work.abort()
        raise
    report.elapsed_s = time.monotonic() - started
    report.sent, report.failed, report.fatal = work.sent, work.failed, work.fatal
    report.findings = check(work, read_log(nodes.bootstrap, topic, PARTITIONS))
    for p in range(PARTITIONS):
        try:
            nodes.wait_replicas_equal(topic, p, range(nodes.count), LIVENESS_S)
        except AssertionError as exc:
            report.unequal_replicas.append(f"{topic}-{p}: {str(exc).splitlines()[0]}")
    return report
