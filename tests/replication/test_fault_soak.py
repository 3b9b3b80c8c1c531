"""A minute of random faults under acks=all load (tests/replication_faults.py):
kill -9 and restarts, SIGSTOP past replica.lag.time.max.ms of one node or
two, clean bounces, over 3 nodes.  Nothing acknowledged is lost, nothing is
written twice (idempotence), nothing a consumer saw goes away, and the
replicas end equal.  ``tests/soak/replication_soak.py --events 100`` is the
long run; PYLOG_SOAK_SEED replays a seed."""

from __future__ import annotations

import os
import random
from pathlib import Path

from replication_faults import run_soak, start_cluster

DURATION_S = 60


def test_faults_lose_nothing_acknowledged(zookeeper_installed: None, tmp_path: Path,
                                          topic: str) -> None:
    seed = int(os.environ.get("PYLOG_SOAK_SEED", random.randrange(1 << 31)))
    events: list[str] = []
    nodes = start_cluster(tmp_path / "cluster")
    try:
        report = run_soak(nodes, topic, seed, duration_s=DURATION_S, say=events.append)
    finally:
        nodes.cleanup()
    assert not report.problems(), (f"{report.summary()}\nevents:\n" + "\n".join(events)
                                   + f"\n{nodes.logs()}")
    assert sum(report.events.values()) > 0
