"""Producer-state snapshots at segment rolls (Kafka's ``UnifiedLog.roll`` ->
``ProducerStateManager.takeSnapshot``), and the time index, ListOffsets by
timestamp and time-based roll/retention of the real broker process.

A snapshot is taken at every roll, so after ``kill -9`` the producer state
comes from a snapshot no older than the active segment's base offset plus a
replay of the active segment only, and a retried idempotent batch still gets
its original offset back, even once the log start offset (DeleteRecords,
retention) has moved past the segments that held it.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
import test_broker_durability
from broker_process import wait_for
from kafka_wire import RawClient, latest_offset, produce_body
from test_broker_protocol import partition_response

from pylog.protocol import ApiKey
from pylog.records import BatchBuilder

NO_PERIODIC = "log.flush.offset.checkpoint.interval.ms=3600000"  # no periodic snapshot
FAST_RETENTION = "log.retention.check.interval.ms=100"
WAIT_S = 30  # how long to wait for background work (never a pass/fail threshold)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def batch(n: int = 3, ts: int | list[int] | None = None, **kwargs: int) -> bytes:
    """A batch of ``n`` records stamped ``ts`` (one each, a list, or now)."""
    stamps = ts if isinstance(ts, list) else [now_ms() if ts is None else ts] * n
    b = BatchBuilder(**kwargs)
    for i, t in enumerate(stamps):
        b.append(t, b"k", b"value-%d" % i)
    return b.build()


def create_topic(c: RawClient, name: str, **configs: str) -> None:
    r = c.request(ApiKey.CREATE_TOPICS, 7, {"timeout_ms": 5000, "validate_only": False,
                  "topics": [{"name": name, "num_partitions": 1, "replication_factor": 1,
                              "assignments": [], "configs": [
                                  {"name": k.replace("_", "."), "value": v}
                                  for k, v in configs.items()]}]})
    assert r.topics[0].error_code == 0, r.topics[0]


class Idempotent(test_broker_durability.Idempotent):
    """A raw idempotent producer on partition 0 (sequences by hand), sending
    ``n`` records at a time."""

    def send(self, seq: int, n: int = 3, ts: int | None = None):
        body = produce_body(self.topic, 0, batch(n, ts, producer_id=self.pid,
                                                 producer_epoch=self.epoch, base_sequence=seq))
        return partition_response(self.c.request(ApiKey.PRODUCE, 11, body))

    def reconnect(self, bootstrap: str) -> None:
        self.c.close()
        self.c = RawClient(bootstrap)


def offsets_of(part: Path, suffix: str) -> list[int]:
    return sorted(int(p.name[:20]) for p in part.glob("*" + suffix)
                  if p.name[:20].isdigit() and p.name.endswith(suffix))


def fill(c: RawClient, topic: str, batches: int, ts: int | None = None) -> None:
    """Plain (non-idempotent) batches: enough of them to roll many segments."""
    for _ in range(batches):
        r = partition_response(c.request(ApiKey.PRODUCE, 9, produce_body(topic, 0,
                                                                          batch(3, ts))))
        assert r.error_code == 0


def replayed_from(output: list[str], topic: str) -> list[int]:
    pattern = re.compile(rf"{re.escape(topic)}-0: producer state from offset (\d+)")
    return [int(m.group(1)) for line in output for m in [pattern.search(line)] if m]


def test_snapshot_at_every_roll_and_kill_9_replays_only_the_tail(
        start_broker, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("PYLOG_LOG_LEVEL", "INFO")
    data = tmp_path / "data"
    b = start_broker(NO_PERIODIC, log_dir=data)
    topic = "snaps"
    with RawClient(b.bootstrap) as c:
        create_topic(c, topic, segment_bytes="1000")
        p = Idempotent(b.bootstrap, topic)
        assert [p.send(seq).base_offset for seq in (0, 3, 6)] == [0, 3, 6]
        fill(c, topic, 60)
        q = Idempotent(b.bootstrap, topic)
        q_offsets = [q.send(seq).base_offset for seq in (0, 3)]
        end = latest_offset(c, topic)
    part = data / f"{topic}-0"
    bases = offsets_of(part, ".log")
    assert len(bases) > 5, bases
    # a snapshot at every roll offset (written off the event loop: wait for it)
    wait_for(lambda: set(bases[1:]) <= set(offsets_of(part, ".snapshot")), WAIT_S,
             "a snapshot at every roll")
    b.kill()
    b2 = start_broker(NO_PERIODIC, log_dir=data, port=b.port)
    # the state came from the snapshot at the active segment's base: only the
    # active segment was replayed
    assert replayed_from(b2.output, topic) == [bases[-1]]
    p.reconnect(b2.bootstrap)
    q.reconnect(b2.bootstrap)
    retry = p.send(6)
    assert (retry.error_code, retry.base_offset) == (0, 6)
    retry = q.send(3)
    assert (retry.error_code, retry.base_offset) == (0, q_offsets[1])
    assert latest_offset(p.c, topic) == end  # nothing appended twice
    assert p.send(9).base_offset == end
    p.c.close()
    q.c.close()


@pytest.mark.parametrize("how", ["delete-records", "retention-ms"])
def test_retry_after_kill_9_when_log_start_passed_the_old_snapshots(
        start_broker, tmp_path, how) -> None:
    """The batches of producer ``p`` are below the log start offset when the
    node dies (DeleteRecords, or retention.ms deleting every segment: at
    retention.ms=1500 retention even rolls and deletes the active segment, a
    roll on the scheduler thread).  As Kafka (KIP-360), the producer's state
    outlives its batches: the retry is a duplicate and gets its original
    offset, it is not appended again.  (Its batches are stamped now: older
    than producer.id.expiration.ms, a day, it would be forgotten at start.)"""
    data = tmp_path / "data"
    b = start_broker(NO_PERIODIC, FAST_RETENTION, log_dir=data)
    topic = "gone"
    configs = {"segment_bytes": "1000"}
    if how == "retention-ms":
        configs["retention_ms"] = "1500"
    part = data / f"{topic}-0"
    with RawClient(b.bootstrap) as c:
        create_topic(c, topic, **configs)
        p = Idempotent(b.bootstrap, topic)
        assert [p.send(seq).base_offset for seq in (0, 3, 6)] == [0, 3, 6]
        fill(c, topic, 60)
        end = latest_offset(c, topic)
        if how == "delete-records":
            r = c.request(ApiKey.DELETE_RECORDS, 2, {"topics": [{"name": topic, "partitions": [
                {"partition_index": 0, "offset": end - 3}]}], "timeout_ms": 5000})
            assert r.topics[0].partitions[0].error_code == 0
            low = end - 3
        else:
            low = end
        # retention removed every segment below the log start offset
        wait_for(lambda: offsets_of(part, ".log")[0] <= low
                 < (offsets_of(part, ".log") + [end + 1])[1], WAIT_S, "retention")
        # and the snapshot of the active segment's base is on disk
        wait_for(lambda: offsets_of(part, ".snapshot") and offsets_of(
            part, ".snapshot")[-1] >= offsets_of(part, ".log")[-1], WAIT_S,
            "the snapshot at the active segment's base")
        assert offsets_of(part, ".log")[0] > 9  # p's batches are gone
    b.kill()
    b2 = start_broker(NO_PERIODIC, log_dir=data, port=b.port)
    p.reconnect(b2.bootstrap)
    retry = p.send(6)
    assert (retry.error_code, retry.base_offset) == (0, 6)
    assert latest_offset(p.c, topic) == end  # not appended again
    nxt = p.send(9)
    assert (nxt.error_code, nxt.base_offset) == (0, end)
    p.c.close()


def list_offsets(c: RawClient, topic: str, ts: int) -> tuple[int, int]:
    r = c.request(ApiKey.LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                        "timestamp": ts}]}]})
    p = r.topics[0].partitions[0]
    assert p.error_code == 0
    return p.timestamp, p.offset


def test_list_offsets_by_timestamp_out_of_order_after_kill_9_and_index_rebuild(
        start_broker, tmp_path) -> None:
    """ListOffsets by timestamp answers the first offset whose record timestamp
    is >= the target, across segments, with timestamps going backwards within
    and across batches and segments; -3 answers the largest timestamp with the
    last offset of its batch.  The same after kill -9 and after the time
    indexes are deleted and rebuilt."""
    data = tmp_path / "data"
    b = start_broker(log_dir=data)
    topic = "times"
    base = now_ms()
    stamps = [[base + d for d in ds] for ds in
              ([100, 300, 200], [150], [500, 120], [400], [50], [600, 700], [10])]
    flat = [t for ds in stamps for t in ds]
    targets = [base + d for d in (0, 100, 101, 199, 250, 301, 450, 501, 650, 700)]
    expected = {t: next(((ts, o) for o, ts in enumerate(flat) if ts >= t), (-1, -1))
                for t in targets + [base + 701]}
    expected[-3] = (base + 700, 9)  # 700 is offset 9, the last of its batch
    with RawClient(b.bootstrap) as c:
        create_topic(c, topic, segment_bytes="200", index_interval_bytes="1")
        for ds in stamps:
            r = partition_response(c.request(ApiKey.PRODUCE, 9,
                                              produce_body(topic, 0, batch(ts=ds))))
            assert r.error_code == 0
        assert {t: list_offsets(c, topic, t) for t in expected} == expected
    part = data / f"{topic}-0"
    assert len(offsets_of(part, ".log")) > 2
    b.kill()
    b2 = start_broker(log_dir=data, port=b.port)
    with RawClient(b2.bootstrap) as c:
        assert {t: list_offsets(c, topic, t) for t in expected} == expected
    assert b2.stop() == 0
    for p in part.glob("*.timeindex"):
        p.unlink()
    b3 = start_broker(log_dir=data, port=b.port)
    with RawClient(b3.bootstrap) as c:
        assert {t: list_offsets(c, topic, t) for t in expected} == expected
