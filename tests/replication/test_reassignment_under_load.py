"""A partition with data moved to other nodes while an idempotent acks=all
producer and a consumer run, with ``pylog reassign-partitions`` as an
operator runs Kafka's tool: ``--execute --throttle``, then ``--verify``
until it reports completion (which also clears the throttles).  Nothing
acknowledged is lost, the new replicas end byte for byte equal, the old one
is deleted, and the throttle holds the new replica's catch-up to its rate.

The throttle is judged from one side only (the move may not be faster than
the rate lets it, give or take Kafka's quota window); how close to the rate
it gets on this machine is printed, not asserted."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Producer
from node_cluster import NodeCluster, segment_bytes
from replication_workload import Workload, check, read_log

# What is there before the move, and the throttle: a catch-up of ~20 s.
FILL_RECORDS = 10_000
FILL_VALUE_BYTES = 1000
THROTTLE_BYTES_S = 500_000
# Kafka measures the replication rates over replication.quota.window.num
# windows, never over less than all but one of them: at the start that much
# time's worth of bytes passes at once, and again whenever the oldest window
# falls out.  With the default 11 one-second windows, the catch-up would have
# to last minutes for the rate to show; 2 windows show it in seconds.
NODE_OVERRIDES = ("replication.quota.window.num=2",)
# A fetch let through may return replica.fetch.max.bytes past the rate.
BURST_ALLOWANCE = 1.5
LIVENESS_S = 180


def _tool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pylog", *args], capture_output=True,
                          text=True, timeout=120)


def _fill(bootstrap: str, topic: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20})
    errors: list[object] = []
    for i in range(FILL_RECORDS):
        value = f"fill-{i}-".ljust(FILL_VALUE_BYTES, "x").encode()
        while True:
            try:
                producer.produce(topic, value, partition=0,
                                 on_delivery=lambda err, _m: err and errors.append(err))
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(120) == 0 and not errors, errors[:3]


def test_a_partition_moves_under_load_within_its_throttle(nodes: NodeCluster, topic: str,
                                                          tmp_path: Path) -> None:
    nodes.create_topic(topic, assignment=[[0, 1]])
    _fill(nodes.bootstrap, topic)
    work = Workload(nodes.bootstrap, topic, 1).start()
    try:
        work.wait_acked(100, LIVENESS_S, "before the move ")
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": topic, "partition": 0, "replicas": [1, 2]}]}))
        started = time.monotonic()
        r = _tool("reassign-partitions", "--bootstrap-server", nodes.bootstrap, "--execute",
                  "--reassignment-json-file", str(plan), "--throttle", str(THROTTLE_BYTES_S))
        assert r.returncode == 0, r.stdout + r.stderr
        assert f"Successfully started partition reassignment for {topic}-0" in r.stdout

        def verified() -> bool:
            out = _tool("reassign-partitions", "--bootstrap-server", nodes.bootstrap,
                        "--verify", "--reassignment-json-file", str(plan)).stdout
            return f"Reassignment of partition {topic}-0 is completed." in out

        nodes.wait(verified, f"{topic}-0 moved to nodes 1 and 2", LIVENESS_S)
        took = time.monotonic() - started
        moved = len(segment_bytes(nodes.partition_dir(2, topic, 0)))
        work.wait_acked(100, LIVENESS_S, "after the move ")
        work.stop()
    except BaseException:
        work.abort()
        raise
    rate = moved / took
    print(f"moved {moved} bytes in {took:.1f} s: {rate / 1e6:.2f} MB/s under a throttle of "
          f"{THROTTLE_BYTES_S / 1e6:.2f} MB/s ({rate / THROTTLE_BYTES_S:.2f} of it)")
    assert rate <= THROTTLE_BYTES_S * BURST_ALLOWANCE, (
        f"the throttle let {rate:.0f} B/s through, set to {THROTTLE_BYTES_S}")
    assert nodes.state(topic, 0) is not None
    assert sorted(nodes.isr(topic, 0)) == [1, 2]
    findings = check(work, read_log(nodes.bootstrap, topic, 1))
    assert not work.fatal and not work.failed, (work.fatal, work.failed[:5])
    assert not findings.problems(), f"{findings.problems()}\n{nodes.logs()}"
    assert findings.log_records == FILL_RECORDS + work.sent
    nodes.wait_replicas_equal(topic, 0, [1, 2], LIVENESS_S)
    nodes.wait(lambda: not nodes.partition_dir(0, topic, 0).exists(),
               "node 0's replica deleted", LIVENESS_S)
    configs = _tool("configs", "--bootstrap-server", nodes.bootstrap, "--describe",
                    "--entity-type", "topics", "--entity-name", topic).stdout
    assert "replication.throttled" not in configs  # --verify cleared them
