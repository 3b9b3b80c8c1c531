"""benchmarks/bench_cluster.py and bench_replication.py run in their --quick
mode, so neither rots: real clusters, ZooKeeper, librdkafka load processes and
the mock cluster, to the end of their table.  What is checked is that every
row is there and that records flowed (the counts are the benchmark's own
checks), never how fast anything was."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
# Liveness bounds: each --quick run starts clusters of ZooKeeper-mode nodes and
# waits out node failovers on a shared 2-core machine.
TIMEOUT_S = 900


def run_quick(script: str) -> list[list[str]]:
    """The script's table rows (cells stripped), after checking it exited 0."""
    proc = subprocess.run([sys.executable, str(BENCHMARKS / script), "--quick"],
                          cwd=BENCHMARKS, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-5000:]}"
    rows = [[cell.strip() for cell in line.strip("|").split("|")]
            for line in proc.stdout.splitlines() if line.startswith("| ")]
    assert rows, proc.stdout
    return rows


def count(cell: str) -> float:
    return float(cell.replace(",", ""))


@pytest.mark.usefixtures("zookeeper_installed")
def test_bench_cluster_quick() -> None:
    head, *rows = run_quick("bench_cluster.py")
    col = {name: i for i, name in enumerate(head)}
    assert [row[col["nodes"]] for row in rows] == ["1", "2"]  # --quick: N = 1, 2
    for row in rows:
        assert count(row[col["produce rec/s"]]) > 0
        assert count(row[col["consume rec/s"]]) > 0
        assert count(row[col["leaders on all nodes s"]]) >= 0
    one, two = rows
    assert one[col["new controller s"]] == "- (N=1)"  # no other node to take over
    assert count(two[col["new controller s"]]) > 0
    assert count(two[col["+CreateTopics s"]]) >= count(two[col["new controller s"]])


@pytest.mark.usefixtures("zookeeper_installed")
def test_bench_replication_quick() -> None:
    head, *rows = run_quick("bench_replication.py")
    col = {name: i for i, name in enumerate(head)}
    seen = {(row[col["test"]], row[col["target"]], row[col["setup"]]) for row in rows}
    for wanted in [("produce", "pylog", "acks=1 RF1"),
                   ("produce", "pylog", "acks=all RF3 min.isr 2"),
                   ("produce", "mock", "acks=all RF3"),
                   ("latency", "pylog", "acks=all RF3"),
                   ("latency", "mock", "acks=all RF3"),
                   ("CPU role", "pylog", "1 partition, node 0, acks=all RF3: each follower"),
                   ("failover", "pylog", "kill -9 leader, session 6 s"),
                   ("failover", "pylog", "SIGTERM leader, session 6 s")]:
        assert wanted in seen, (wanted, seen)
    for row in rows:
        if row[col["test"]] == "produce":
            assert count(row[col["rec/s"]]) > 0
        if row[col["test"]] == "failover":  # the successor acknowledged records
            assert count(row[col["direct ack s"]]) > 0
            assert count(row[col["librdkafka ack s"]]) > 0
            assert row[col["acked lost"]] == "0"  # every acknowledged record kept
