"""Producer id expiration (Kafka 3.6's ``producer.id.expiration.ms`` and
``producer.id.expiration.check.interval.ms``) in the real broker process,
seen through DescribeProducers: a producer whose last batch's max timestamp
is ``producer.id.expiration.ms`` or more in the past is forgotten at the next
check (the batch timestamp counts, as in Kafka's
``ProducerStateManager.isProducerExpired``), one that keeps writing stays, an
expired producer is then an unknown one (any sequence is taken, a retry is
not recognised), the expiry is snapshotted so a restart does not bring it
back, a producer that expired while the node was down is not loaded at
start, a restart before expiry keeps the producer with its timestamp, the
expiration is a dynamic (cluster-wide) broker config, and a version-1
snapshot (no timestamps) still loads.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import confluent_kafka as ck
import pytest
from broker_process import wait_for
from kafka import KafkaProducer
from kafka_wire import RawClient, latest_offset
from test_admin_producer_apis import (
    create_topic,
    describe_producers,
    init_producer_id,
    now_ms,
    raw_send,
)
from test_broker_configs import describe, iac

from pylog.protocol import ErrorCode

BROKER = 4
SET = 0
DYN_DEFAULT, STATIC, DEFAULT = 3, 4, 5
INT = 3  # ConfigDef type INT (DescribeConfigs v3+)
EXPIRATION_MS = 2000
FAST = (f"producer.id.expiration.ms={EXPIRATION_MS}",
        "producer.id.expiration.check.interval.ms=200")
FAST_CHECK = "producer.id.expiration.check.interval.ms=200"
NO_PERIODIC = "log.flush.offset.checkpoint.interval.ms=3600000"  # no periodic snapshot
WAIT_S = 30  # a liveness bound for background work, never a speed threshold
HOUR_MS = 3_600_000


def producers(c: RawClient, topic: str, partition: int = 0) -> dict[int, tuple[int, int, int]]:
    """DescribeProducers of one partition: producer id -> (epoch, last
    sequence, last timestamp)."""
    [(_, [(_, error, _, active)])] = describe_producers(c, [(topic, [partition])])
    assert error == 0
    return {pid: (epoch, seq, ts) for pid, epoch, seq, ts, _, _ in active}


def deliver(p: ck.Producer, topic: str, n: int, timestamp: int = 0) -> None:
    errors: list[Any] = []
    for i in range(n):
        p.produce(topic, b"v%d" % i, partition=0, timestamp=timestamp,
                  on_delivery=lambda err, msg: errors.append(err))
    assert p.flush(30) == 0
    assert errors == [None] * n


def snapshot_producers(part: Path, offset: int) -> dict[str, Any] | None:
    """The producers in ``<offset>.snapshot`` of a partition dir (None: no
    such file yet)."""
    try:
        return json.loads((part / f"{offset:020d}.snapshot").read_text())["producers"]
    except (OSError, ValueError):
        return None


def set_expiration(c: RawClient, value: str) -> Any:
    """producer.id.expiration.ms as the cluster-wide dynamic default."""
    return iac(c, "", [("producer.id.expiration.ms", SET, value)], resource_type=BROKER)


def test_idle_producer_expires_while_a_writing_one_stays(start_broker) -> None:
    """confluent-kafka (enable.idempotence) writes, then stays idle: it is
    listed, then forgotten; kafka-python 3.x's default (idempotent) producer
    writing all along stays.  The forgotten producer is an unknown one: its
    next batch, sequence 3, is taken and it is listed again."""
    b = start_broker(*FAST)
    topic = "expiring"
    with RawClient(b.bootstrap) as c:
        create_topic(c, topic)
        start = now_ms()
        idle = ck.Producer({"bootstrap.servers": b.bootstrap, "enable.idempotence": True,
                            "linger.ms": 0})
        deliver(idle, topic, 3)
        [(idle_pid, (epoch, last_seq, ts))] = producers(c, topic).items()
        assert (epoch, last_seq) == (0, 2)
        assert start <= ts <= now_ms()
        writer = KafkaProducer(bootstrap_servers=b.bootstrap)
        try:
            def write_and_look() -> bool:
                writer.send(topic, b"w", partition=0).get(30)
                return idle_pid not in producers(c, topic)

            wait_for(write_and_look, WAIT_S, "the idle producer to expire", interval=0.2)
            left = producers(c, topic)
            assert len(left) == 1 and idle_pid not in left
            [(writer_pid, (_, writer_seq, _))] = left.items()
            assert writer_seq >= 1
            deliver(idle, topic, 1)  # sequence 3 from a producer the broker no longer knows
            writer.send(topic, b"w", partition=0).get(30)
            now = producers(c, topic)
            assert set(now) == {idle_pid, writer_pid}
            assert now[idle_pid][:2] == (0, 3)
        finally:
            writer.close()


@pytest.mark.parametrize("restart", ["sigterm", "kill-9"])
def test_expired_producer_does_not_come_back_after_restart(start_broker, tmp_path,
                                                           restart) -> None:
    """The expiry is snapshotted at the log end at once (no periodic snapshot
    is due): after a clean stop or a kill -9, the broker restarted with the
    default expiration (a day) does not know the producer, and the retry of
    its last batch, a duplicate before, is written again."""
    data = tmp_path / "data"
    b = start_broker(*FAST, log_dir=data)
    topic = "gone-after-restart"
    part = data / f"{topic}-0"
    with RawClient(b.bootstrap) as c:
        create_topic(c, topic)
        pid, epoch = init_producer_id(b.bootstrap)
        t = now_ms()
        raw_send(c, topic, pid, epoch, 0, [t, t])
        assert raw_send(c, topic, pid, epoch, 2, [t + 1]).base_offset == 2
        assert producers(c, topic) == {pid: (epoch, 2, t + 1)}
        assert raw_send(c, topic, pid, epoch, 2, [t + 1]).base_offset == 2  # a duplicate
        wait_for(lambda: not producers(c, topic), WAIT_S, "the producer to expire")
    wait_for(lambda: snapshot_producers(part, 3) == {}, WAIT_S,
             "the snapshot written after the expiry")
    if restart == "sigterm":
        assert b.stop() == 0
    else:
        b.kill()
    b2 = start_broker(log_dir=data, port=b.port)
    with RawClient(b2.bootstrap) as c:
        assert producers(c, topic) == {}
        assert latest_offset(c, topic) == 3
        retry = raw_send(c, topic, pid, epoch, 2, [t + 1])
        assert retry.base_offset == 3  # an unknown producer's batch: appended
        assert producers(c, topic) == {pid: (epoch, 2, t + 1)}


@pytest.mark.parametrize("restart", ["sigterm", "kill-9"])
def test_restart_before_expiry_keeps_the_producer_and_its_timestamp(start_broker, tmp_path,
                                                                    restart) -> None:
    """A producer whose batches carry a client timestamp an hour old is kept
    across a restart (from the version-2 snapshot at a clean stop, from a
    replay of the log after kill -9) with that timestamp, and still
    deduplicates.  producer.id.expiration.ms is dynamic: set cluster-wide to
    two hours it keeps the producer, to half an hour the next check forgets
    it; DescribeConfigs shows both keys with their sources."""
    data = tmp_path / "data"
    b = start_broker(NO_PERIODIC, FAST_CHECK, log_dir=data)
    topic = "kept"
    old = now_ms() - HOUR_MS
    with RawClient(b.bootstrap) as c:
        node = describe(c, BROKER, "0", ["producer.id.expiration.ms",
                                         "producer.id.expiration.check.interval.ms"])
        create_topic(c, topic)
        pid, epoch = init_producer_id(b.bootstrap)
        raw_send(c, topic, pid, epoch, 0, [old, old + 5, old + 2])  # max timestamp old + 5
        raw_send(c, topic, pid, epoch, 3, [old + 7])
        assert producers(c, topic) == {pid: (epoch, 3, old + 7)}
    e, i = node["producer.id.expiration.ms"], node["producer.id.expiration.check.interval.ms"]
    assert (e.value, e.config_source, e.read_only, e.config_type) == (
        "86400000", DEFAULT, False, INT)
    assert (i.value, i.config_source, i.read_only, i.config_type) == (
        "200", STATIC, True, INT)
    if restart == "sigterm":
        assert b.stop() == 0
    else:
        b.kill()
    b2 = start_broker(NO_PERIODIC, FAST_CHECK, log_dir=data, port=b.port)
    with RawClient(b2.bootstrap) as c:
        assert producers(c, topic) == {pid: (epoch, 3, old + 7)}
        assert raw_send(c, topic, pid, epoch, 3, [old + 7]).base_offset == 3  # a duplicate
        assert set_expiration(c, "0").error_code == ErrorCode.INVALID_CONFIG
        r = iac(c, "", [("producer.id.expiration.check.interval.ms", SET, "100")],
                resource_type=BROKER)
        assert (r.error_code, r.error_message) == (
            ErrorCode.INVALID_REQUEST, "Cannot update these configs dynamically: "
            "Set(producer.id.expiration.check.interval.ms)")
        assert set_expiration(c, str(2 * HOUR_MS)).error_code == 0
        time.sleep(1)  # five checks at 200 ms: none may forget it
        assert producers(c, topic) == {pid: (epoch, 3, old + 7)}
        assert set_expiration(c, str(HOUR_MS // 2)).error_code == 0
        wait_for(lambda: not producers(c, topic), WAIT_S, "the producer to expire")
        e = describe(c, BROKER, "0", ["producer.id.expiration.ms"])["producer.id.expiration.ms"]
        assert (e.value, e.config_source, e.read_only) == (str(HOUR_MS // 2), DYN_DEFAULT,
                                                           False)
        e = describe(c, BROKER, "", ["producer.id.expiration.ms"])["producer.id.expiration.ms"]
        assert (e.value, e.config_source) == (str(HOUR_MS // 2), DYN_DEFAULT)


def test_old_create_time_batch_expires_at_the_next_check(start_broker) -> None:
    """As Kafka, the rule uses batch timestamps: a CreateTime batch stamped
    two expirations ago (a minute here) is forgotten at the next check, long
    before a minute has passed; the same producer on a LogAppendTime topic is
    listed with the broker's append time and stays, as does a producer
    writing with current timestamps."""
    expiration = 60_000
    b = start_broker(f"producer.id.expiration.ms={expiration}", FAST_CHECK)
    topic, appended = "old-stamps", "old-stamps-append-time"
    with RawClient(b.bootstrap) as c:
        create_topic(c, topic)
        create_topic(c, appended, 1, **{"message.timestamp.type": "LogAppendTime"})
        sent = now_ms()
        p = ck.Producer({"bootstrap.servers": b.bootstrap, "enable.idempotence": True,
                         "linger.ms": 0})
        deliver(p, topic, 2, timestamp=sent - 2 * expiration)
        deliver(p, appended, 1, timestamp=sent - 2 * expiration)
        [(pid, (_, _, appended_ts))] = producers(c, appended).items()
        assert appended_ts >= sent  # the broker's clock, not the client's
        fresh = KafkaProducer(bootstrap_servers=b.bootstrap)
        fresh.send(topic, b"now", partition=0).get(30)
        fresh.close()
        wait_for(lambda: pid not in producers(c, topic), WAIT_S,
                 "the producer with old timestamps to expire")
        assert now_ms() - sent < expiration  # the batch timestamp counted, not its arrival
        [(fresh_pid, (_, fresh_seq, fresh_ts))] = producers(c, topic).items()
        assert (fresh_seq, fresh_pid != pid) == (0, True) and fresh_ts >= sent
        assert producers(c, appended) == {pid: (0, 0, appended_ts)}


def test_version_1_snapshot_still_loads(start_broker, tmp_path) -> None:
    """Snapshots in the version-1 format (no last timestamp), written by hand
    in place of those of a clean stop: a CreateTime producer's timestamp is
    read from its last batch's header, a LogAppendTime one's is its append
    time, one whose batch is not in the log takes the snapshot file's time;
    each then expires by it."""
    data = tmp_path / "data"
    b = start_broker(NO_PERIODIC, log_dir=data)
    topic, appended = "v1", "v1-append-time"
    old = now_ms() - HOUR_MS
    with RawClient(b.bootstrap) as c:
        create_topic(c, topic)
        create_topic(c, appended, 1, **{"message.timestamp.type": "LogAppendTime"})
        pid, _ = init_producer_id(b.bootstrap)
        pid2, _ = init_producer_id(b.bootstrap)
        raw_send(c, topic, pid, 0, 0, [old, old + 7, old + 3])  # offsets 0-2
        raw_send(c, topic, pid, 0, 3, [old + 9])  # offset 3
        append_time = raw_send(c, appended, pid2, 0, 0, [old]).log_append_time_ms
        assert append_time >= old + HOUR_MS
    assert b.stop() == 0
    ghost = pid + 1000  # its "last batch" (offset 0) is pid's: not readable as its own
    v1 = {topic: (4, {str(pid): {"epoch": 0, "batches": [[0, 2, 0, -1], [3, 3, 3, -1]]},
                      str(ghost): {"epoch": 2, "batches": [[0, 2, 0, -1]]}}),
          appended: (1, {str(pid2): {"epoch": 0, "batches": [[0, 0, 0, append_time]]}})}
    snapshot_time = now_ms() - 60_000
    for name, (offset, entries) in v1.items():
        path = data / f"{name}-0" / f"{offset:020d}.snapshot"
        assert path.exists()  # the clean stop's, replaced
        path.write_text(json.dumps({"version": 1, "offset": offset, "producers": entries}))
        os.utime(path, ns=(snapshot_time * 1_000_000,) * 2)
    b2 = start_broker(NO_PERIODIC, FAST_CHECK, log_dir=data, port=b.port)
    with RawClient(b2.bootstrap) as c:
        assert producers(c, topic) == {pid: (0, 3, old + 9), ghost: (2, 2, snapshot_time)}
        assert producers(c, appended) == {pid2: (0, 0, append_time)}
        assert raw_send(c, topic, pid, 0, 3, [old + 9]).base_offset == 3  # a duplicate
        assert set_expiration(c, str(HOUR_MS // 2)).error_code == 0
        wait_for(lambda: pid not in producers(c, topic), WAIT_S, "the producer to expire")
        assert producers(c, topic) == {ghost: (2, 2, snapshot_time)}
        assert producers(c, appended) == {pid2: (0, 0, append_time)}
    assert b2.stop() == 0
    # written again at the clean stop: version 3, the expired producer left out
    data2 = json.loads((data / f"{topic}-0" / f"{4:020d}.snapshot").read_text())
    assert data2["version"] == 3
    assert data2["producers"] == {str(ghost): {
        "epoch": 2, "last_timestamp": snapshot_time, "batches": [[0, 2, 0, -1]],
        "txn_first": -1, "coordinator_epoch": -1}}
    assert data2["aborted"] == []


@pytest.mark.parametrize("restart", ["sigterm", "kill-9"])
def test_producer_expired_while_the_node_was_down_is_forgotten_at_start(
        start_broker, tmp_path, restart) -> None:
    """As Kafka's loadFromSnapshot skips expired entries: a producer whose
    last batch is older than producer.id.expiration.ms when the node starts
    is not loaded (from the snapshot after a clean stop, from the replay
    after kill -9), although no expiration check has run yet (its interval
    is an hour here).  It is then an unknown producer: its old sequence is
    appended again, not answered as a duplicate."""
    data = tmp_path / "data"
    b = start_broker(NO_PERIODIC, log_dir=data)
    topic = "expired-at-start"
    old = now_ms() - 2 * HOUR_MS
    with RawClient(b.bootstrap) as c:
        create_topic(c, topic)
        pid, epoch = init_producer_id(b.bootstrap)
        raw_send(c, topic, pid, epoch, 0, [old, old + 1])
        assert producers(c, topic) == {pid: (epoch, 1, old + 1)}
    if restart == "sigterm":
        assert b.stop() == 0
    else:
        b.kill()
    b2 = start_broker(NO_PERIODIC, f"producer.id.expiration.ms={HOUR_MS}",
                      "producer.id.expiration.check.interval.ms=3600000",
                      log_dir=data, port=b.port)
    with RawClient(b2.bootstrap) as c:
        assert producers(c, topic) == {}
        assert raw_send(c, topic, pid, epoch, 0, [old, old + 1]).base_offset == 2
        assert producers(c, topic) == {pid: (epoch, 1, old + 1)}
