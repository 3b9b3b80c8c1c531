"""Consumer groups with librdkafka (confluent-kafka) consumers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition
from group_helpers import RDKAFKA, SESSION_TIMEOUT_MS, create_topic, produce, wait_for

HERE = Path(__file__).resolve().parent


class ThreadConsumer:
    """A consumer polling in a thread of its own; commits each record before the next."""

    def __init__(self, bootstrap: str, group: str, topic: str, **conf: object) -> None:
        self.conf = {"bootstrap.servers": bootstrap, "group.id": group, **RDKAFKA, **conf}
        self.topic = topic
        self.values: list[int] = []
        self.assignment: set[int] = set()
        self.assigns: list[list[int]] = []
        self.revokes: list[list[int]] = []
        self.errors: list[KafkaError] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        c = Consumer(self.conf)
        c.subscribe([self.topic],
                    on_assign=lambda _, ps: self.assigns.append([p.partition for p in ps]),
                    on_revoke=lambda _, ps: self.revokes.append([p.partition for p in ps]))
        try:
            while not self._stop.is_set():
                msg = c.poll(0.1)
                self.assignment = {p.partition for p in c.assignment()}
                if msg is None:
                    continue
                if msg.error():
                    self.errors.append(msg.error())
                    continue
                self.values.append(int(msg.value()))
                c.commit(msg, asynchronous=False)
        finally:
            c.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(30)


def covers(consumers: list, partitions: int) -> bool:
    """Every partition owned by exactly one consumer, and every consumer owning some."""
    owned = [c.assignment for c in consumers]
    return (all(owned) and sum(map(len, owned)) == partitions
            and set().union(*owned) == set(range(partitions)))


def test_three_consumers_split_partitions_and_read_once(group_broker, name) -> None:
    bs = group_broker.bootstrap
    create_topic(bs, name, 6)
    produce(bs, name, 600, 6)
    consumers = [ThreadConsumer(bs, name, name) for _ in range(3)]
    try:
        wait_for(lambda: sum(len(c.values) for c in consumers) >= 600, 30, "600 records")
        assert covers(consumers, 6), [c.assignment for c in consumers]
        assert [len(c.assignment) for c in consumers] == [2, 2, 2]
        # A new member: the group rebalances and the new one gets partitions.
        consumers.append(ThreadConsumer(bs, name, name))
        wait_for(lambda: covers(consumers, 6), 20, "4 members covering 6 partitions")
        produce(bs, name, 200, 6, start=600)
        wait_for(lambda: sum(len(c.values) for c in consumers) >= 800, 30, "800 records")
        time.sleep(0.5)
        every = sorted(v for c in consumers for v in c.values)
        assert every == list(range(800))  # each record once, across the rebalance
        assert all(c.assigns for c in consumers) and not any(c.errors for c in consumers)
    finally:
        for c in consumers:
            c.close()


class ProcConsumer:
    def __init__(self, bootstrap: str, group: str, topic: str, *conf: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "consumer_proc.py"), bootstrap, group, topic, *conf],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.assignment: set[int] = set()
        self.records: list[tuple[int, int, str]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            event = json.loads(line)
            if "assigned" in event:
                self.assignment = set(event["assigned"])
            elif "revoked" in event:
                self.assignment -= set(event["revoked"])
            else:
                self.records.append(tuple(event["record"]))

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


def test_killed_member_partitions_move_after_session_timeout(group_broker, name) -> None:
    bs = group_broker.bootstrap
    create_topic(bs, name, 6)
    procs = [ProcConsumer(bs, name, name) for _ in range(3)]
    try:
        wait_for(lambda: covers(procs, 6), 30, "3 processes covering 6 partitions")
        victim = procs.pop(0)
        orphaned = set(victim.assignment)
        victim.kill()
        killed_at = time.monotonic()
        wait_for(lambda: covers(procs, 6), SESSION_TIMEOUT_MS / 1000 + 15,
                 "the survivors to take over")
        took = time.monotonic() - killed_at
        # Not before the session timeout (nobody said it left), not long after.
        assert took >= SESSION_TIMEOUT_MS / 1000 - 1.0, took
        produce(bs, name, 60, 6)
        wait_for(lambda: sum(len(p.records) for p in procs) >= 60, 20, "60 records")
        seen = {r[0] for p in procs for r in p.records}
        assert orphaned <= seen  # the dead member's partitions are consumed again
    finally:
        for p in procs:
            p.kill()


def test_cooperative_sticky_rebalances_incrementally(group_broker, name) -> None:
    bs = group_broker.bootstrap
    create_topic(bs, name, 6)
    conf = {"partition.assignment.strategy": "cooperative-sticky"}
    consumers = [ThreadConsumer(bs, name, name, **conf) for _ in range(2)]
    try:
        wait_for(lambda: covers(consumers, 6), 30, "2 members covering 6 partitions")
        before = [set(c.assignment) for c in consumers]
        consumers.append(ThreadConsumer(bs, name, name, **conf))
        # Balanced, not merely covered: a member whose SyncGroup answer came after
        # the next rebalance began rejoins still owning what it was to give up,
        # so the newcomer can hold one partition for a generation (3/2/1).
        wait_for(lambda: covers(consumers, 6) and all(len(c.assignment) == 2 for c in consumers),
                 30, "3 members with 2 partitions each")
        # Sticky and incremental: the old members keep what they kept, give up only
        # what the new one got, and never revoke everything.
        for c, had in zip(consumers[:2], before, strict=True):
            assert c.assignment <= had
            assert all(set(r) != had for r in c.revokes if r)
        moved = (before[0] - consumers[0].assignment) | (before[1] - consumers[1].assignment)
        assert moved == consumers[2].assignment and len(moved) == 2
    finally:
        for c in consumers:
            c.close()


def test_static_member_restart_keeps_partitions_without_rebalance(group_broker, name) -> None:
    bs = group_broker.bootstrap
    create_topic(bs, name, 4)
    a = ThreadConsumer(bs, name, name, **{"group.instance.id": "static-a"})
    b = ThreadConsumer(bs, name, name, **{"group.instance.id": "static-b"})
    try:
        wait_for(lambda: covers([a, b], 4), 30, "2 static members covering 4 partitions")
        wait_for(lambda: len(b.assigns) == 1 and len(a.assigns) == 1, 10, "one assignment")
        had = set(a.assignment)
        a.close()  # a static member does not leave on close
        a2 = ThreadConsumer(bs, name, name, **{"group.instance.id": "static-a"})
        wait_for(lambda: a2.assignment, 10, "the restarted member's assignment")
        assert a2.assignment == had
        time.sleep(1.0)  # several heartbeats: a rebalance would show by now
        assert len(b.assigns) == 1 and b.revokes == []
        a2.close()
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("how", ["sigterm", "sigkill"])
def test_committed_offsets_survive_broker_restart(start_broker, name, how) -> None:
    broker = start_broker()
    bs = broker.bootstrap
    create_topic(bs, name, 2)
    produce(bs, name, 100, 2)
    first = ThreadConsumer(bs, name, name)
    wait_for(lambda: len(first.values) >= 30, 30, "30 records")
    first.close()
    consumed = set(first.values)
    check = Consumer({"bootstrap.servers": bs, "group.id": name})
    committed = {tp.partition: tp.offset for tp in check.committed(
        [TopicPartition(name, 0), TopicPartition(name, 1)], timeout=10)}
    check.close()
    # A partition the consumer had not reached yet has no commit (-1001).
    assert sum(max(o, 0) for o in committed.values()) == len(consumed)
    if how == "sigterm":
        assert broker.stop() == 0
    else:
        broker.kill()
    broker = start_broker(log_dir=broker.log_dir, port=broker.port)
    check = Consumer({"bootstrap.servers": bs, "group.id": name})
    again = {tp.partition: tp.offset for tp in check.committed(
        [TopicPartition(name, 0), TopicPartition(name, 1)], timeout=10)}
    check.close()
    assert again == committed
    second = ThreadConsumer(bs, name, name)
    try:
        wait_for(lambda: len(consumed) + len(second.values) >= 100, 30, "the rest")
        time.sleep(0.3)
        # Exactly after the last commit: nothing again, nothing skipped.
        assert sorted(consumed | set(second.values)) == list(range(100))
        assert len(second.values) == 100 - len(consumed)
    finally:
        second.close()


def test_auto_offset_reset(group_broker, name) -> None:
    bs = group_broker.bootstrap
    create_topic(bs, name, 1)
    produce(bs, name, 10, 1)
    earliest = ThreadConsumer(bs, name + "-earliest", name, **{"auto.offset.reset": "earliest"})
    latest = ThreadConsumer(bs, name + "-latest", name, **{"auto.offset.reset": "latest"})
    none = ThreadConsumer(bs, name + "-none", name, **{"auto.offset.reset": "error"})
    try:
        wait_for(lambda: len(earliest.values) >= 10, 20, "earliest to read the backlog")
        wait_for(lambda: latest.assignment, 20, "latest to be assigned")
        wait_for(lambda: none.errors, 20, "the no-reset consumer's error")
        assert none.errors[0].code() == KafkaError._AUTO_OFFSET_RESET
        time.sleep(1.5)  # latest has looked up the end before anything new arrives
        produce(bs, name, 5, 1, start=10)
        wait_for(lambda: len(latest.values) >= 5, 20, "latest to read the new records")
        assert earliest.values[:10] == list(range(10))
        assert latest.values == list(range(10, 15))
        assert none.values == []
    finally:
        for c in (earliest, latest, none):
            c.close()


def test_lone_member_rejoins_when_its_topic_grows(start_broker, name) -> None:
    """librdkafka rejoins when CreatePartitions grows its subscribed topic; as
    the group's only member its JoinGroup completes the rebalance at once.
    It gets every partition, and the broker logs no failed request."""
    from confluent_kafka.admin import AdminClient, NewPartitions

    broker = start_broker()
    bs = broker.bootstrap
    create_topic(bs, name, 1)
    consumer = ThreadConsumer(bs, name, name)
    try:
        wait_for(lambda: consumer.assignment == {0}, 20, "the first assignment")
        admin = AdminClient({"bootstrap.servers": bs})
        admin.create_partitions([NewPartitions(name, 3)])[name].result(10)
        wait_for(lambda: consumer.assignment == {0, 1, 2}, 20, "all 3 partitions")
        produce(bs, name, 30, 3)
        wait_for(lambda: len(consumer.values) >= 30, 20, "30 records")
        assert sorted(consumer.values) == list(range(30))
        assert not consumer.errors
    finally:
        consumer.close()
    assert broker.stop() == 0
    out = "".join(broker.output)
    assert "request handler failed" not in out and "Traceback" not in out, out
