"""Restarts and crashes of the real broker process, the fetch long poll with a real
consumer, and sendfile on the fetch path observed with strace."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time

import pytest
from broker_process import wait_for
from kafka_wire import RawClient, latest_offset, produce_body
from log_helpers import scan_dir
from test_broker_protocol import batch, fetch_body, metadata, partition_response

from pylog.io import pagecache
from pylog.log import LogConfig, LogManager
from pylog.log.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    OffsetCheckpointFile,
)
from pylog.protocol import ApiKey, ErrorCode
from pylog.records import iter_records
from pylog.server.topics import TOPICS_FILE, TopicError, TopicRegistry

ck = pytest.importorskip("confluent_kafka")


class Idempotent:
    """A raw idempotent producer on one partition (sequences by hand)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.c = RawClient(bootstrap)
        metadata(self.c, topic)
        init = self.c.request(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": None,
                                                           "transaction_timeout_ms": 60000})
        assert init.error_code == 0
        self.pid, self.epoch = init.producer_id, init.producer_epoch

    def send(self, seq: int, epoch: int | None = None):
        # Stamped now: a producer whose last batch is older than
        # producer.id.expiration.ms (a day) is forgotten at the next start.
        body = produce_body(self.topic, 0, batch(3, time.time_ns() // 1_000_000,
                                                 producer_id=self.pid,
                                                 producer_epoch=self.epoch if epoch is None
                                                 else epoch, base_sequence=seq))
        return partition_response(self.c.request(ApiKey.PRODUCE, 11, body))

    def reconnect(self, bootstrap: str) -> None:
        self.c.close()
        self.c = RawClient(bootstrap)


@pytest.mark.parametrize("how", ["clean", "kill-9"])
def test_producer_state_survives_restart(start_broker, tmp_path, how) -> None:
    data = tmp_path / "data"
    b = start_broker(log_dir=data)
    p = Idempotent(b.bootstrap, "idem")
    for seq in range(0, 30, 3):
        r = p.send(seq)
        assert r.error_code == 0 and r.base_offset == seq
    # the producer bumps its epoch (KIP-360: an idempotent producer does it
    # locally, as the Java client's TransactionManager does); its sequences
    # restart at 0 and the old epoch is then fenced
    old_epoch = p.epoch
    p.epoch += 1
    assert p.send(0).base_offset == 30
    assert p.send(3).base_offset == 33
    if how == "clean":
        assert b.stop() == 0
        assert list((data / "idem-0").glob("*.snapshot"))
    else:
        b.kill()  # no snapshot of the last batches: rebuilt from the log tail
    b2 = start_broker(log_dir=data, port=b.port)
    p.reconnect(b2.bootstrap)
    retry = p.send(3)  # a retry of a batch written before the restart
    assert (retry.error_code, retry.base_offset) == (0, 33)
    retry = p.send(0)
    assert (retry.error_code, retry.base_offset) == (0, 30)
    assert latest_offset(p.c, "idem") == 36  # not appended twice
    assert p.send(12).error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert p.send(6, epoch=old_epoch).error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert p.send(6).base_offset == 36
    p.c.close()


def test_kill_9_during_acks_1_stream_keeps_every_acked_record(start_broker, tmp_path) -> None:
    data = tmp_path / "data"
    b = start_broker(log_dir=data)
    acked: dict[bytes, int] = {}
    p = ck.Producer({"bootstrap.servers": b.bootstrap, "acks": "1", "linger.ms": 2,
                     "enable.idempotence": False, "message.timeout.ms": 3000,
                     "retries": 0})

    def delivered(err: object, msg: object) -> None:
        if not err:
            acked[msg.value()] = msg.offset()

    sent = 0
    killed = False
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        p.produce("stream", value=b"v%07d" % sent, partition=0, on_delivery=delivered)
        sent += 1
        p.poll(0)
        if sent % 500 == 0:
            time.sleep(0.001)
        if not killed and len(acked) >= 20_000:
            b.kill()  # mid-stream: records in flight, some acknowledged, some not
            killed = True
            break
    assert killed, f"only {len(acked)} records acknowledged"
    p.purge()
    p.flush(5)
    assert len(acked) >= 20_000
    b2 = start_broker(log_dir=data, port=b.port)
    c = ck.Consumer({"bootstrap.servers": b2.bootstrap, "group.id": "g",
                     "enable.auto.commit": False, "fetch.queue.backoff.ms": 10})
    c.assign([ck.TopicPartition("stream", 0, 0)])
    stored: list[tuple[int, bytes]] = []
    while True:
        msgs = c.consume(5000, 2.0)
        if not msgs:
            break
        stored += [(m.offset(), m.value()) for m in msgs if not m.error()]
    c.close()
    values = [v for _, v in stored]
    assert len(values) == len(set(values))  # once
    assert values == sorted(values)  # in order
    where = {v: o for o, v in stored}
    missing = [v for v in acked if v not in where]
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {missing[:3]}"
    assert all(where[v] == o for v, o in acked.items())  # at their acknowledged offsets


def test_consumer_long_poll_is_woken_by_append(broker, topic) -> None:
    """A consumer parked at the end of the log (fetch.wait.max.ms=5000) gets a new
    record as soon as it is appended, not when its wait runs out."""
    with RawClient(broker.bootstrap) as c:
        metadata(c, topic)
        c.request(ApiKey.PRODUCE, 9, produce_body(topic, 0, batch(1)))
    consumer = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "lp",
                            "fetch.wait.max.ms": 5000, "fetch.queue.backoff.ms": 10,
                            "enable.auto.commit": False})
    consumer.assign([ck.TopicPartition(topic, 0, 1)])
    try:
        assert consumer.consume(1, 1.5) == []  # now parked in a fetch at offset 1
        producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
        sent_at = time.monotonic()
        producer.produce(topic, value=b"wake", partition=0)
        assert producer.flush(5) == 0
        got = []
        while not got and time.monotonic() - sent_at < 6:
            got = [m for m in consumer.consume(1, 0.1) if not m.error()]
        waited = time.monotonic() - sent_at
    finally:
        consumer.close()
    assert got and got[0].value() == b"wake"
    assert waited < 2.5, f"delivered after {waited:.2f}s: the fetch was not woken by the append"


def test_fetch_sends_record_bytes_with_sendfile(broker, topic, system_command) -> None:
    strace = system_command("strace", "strace")
    if strace is None:
        pytest.skip("strace is not installed and cannot be installed here")
    pid = broker.proc.pid
    payload = batch(200)
    with RawClient(broker.bootstrap) as c:
        metadata(c, topic)
        assert partition_response(c.request(ApiKey.PRODUCE, 9, produce_body(
            topic, 0, payload))).error_code == 0
        trace = subprocess.Popen([strace, "-f", "-qq", "-e", "trace=sendfile", "-p", str(pid)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            time.sleep(1.0)  # strace attaches to every thread
            if trace.poll() is not None:
                err = trace.stderr.read()
                if "Operation not permitted" in err or "ptrace" in err:
                    pytest.skip(f"ptrace is not permitted here: {err.strip()}")
                pytest.fail(f"strace failed: {err}")
            for _ in range(3):
                r = c.request(ApiKey.FETCH, 11, fetch_body(topic, 0))
                assert len(r.responses[0].partitions[0].records) == len(payload)
            time.sleep(0.3)
        finally:
            trace.terminate()
            _, err = trace.communicate(timeout=10)
    calls = [line for line in err.splitlines() if "sendfile(" in line]
    assert calls, f"no sendfile in the broker while it served fetches:\n{err[-2000:]}"
    # the whole batch went through sendfile, from the segment file to the socket
    assert any(f"= {len(payload)}" in line or f", {len(payload)})" in line for line in calls)


def test_parked_fetch_answers_on_shutdown(start_broker, topic) -> None:
    b = start_broker()
    with RawClient(b.bootstrap) as c:
        metadata(c, topic)
        c.send(ApiKey.FETCH, 11, fetch_body(topic, 0, max_wait_ms=30_000))
        time.sleep(0.3)
        stopper = threading.Thread(target=b.stop)
        started = time.monotonic()
        stopper.start()
        _, r = c.recv(ApiKey.FETCH, 11)
        assert r.responses[0].partitions[0].error_code == 0
        assert time.monotonic() - started < 10
        stopper.join()
    assert os.path.exists(b.log_dir / ".kafka_cleanshutdown")


def test_fetch_of_data_out_of_the_page_cache(broker, topic) -> None:
    """Data dropped from the page cache (a consumer catching up on old
    segments) is read off the event loop and still comes back whole."""
    payloads = [batch(50 + i) for i in range(4)]
    with RawClient(broker.bootstrap) as c:
        metadata(c, topic)
        for p in payloads:
            assert partition_response(c.request(ApiKey.PRODUCE, 9, produce_body(
                topic, 0, p))).error_code == 0
        segment = broker.log_dir / f"{topic}-0" / f"{0:020d}.log"
        fd = os.open(segment, os.O_RDONLY)
        try:
            os.fsync(fd)  # DONTNEED drops clean pages only
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            cold = pagecache.cached_fraction(fd) < 0.5
        finally:
            os.close(fd)
        if not cold:
            pytest.skip("this filesystem keeps pages after POSIX_FADV_DONTNEED")
        r = c.request(ApiKey.FETCH, 11, fetch_body(topic, 0))
        # the stored batches are the produced ones with their offsets stamped
        records = bytes(r.responses[0].partitions[0].records)
        assert len(records) == sum(map(len, payloads))
        got = [(rec.offset, rec.value) for rec in iter_records(records)]
        sent = [rec.value for p in payloads for rec in iter_records(p)]
        assert got == list(enumerate(sent))
        # a second client is served meanwhile and after
        with RawClient(broker.bootstrap) as other:
            assert metadata(other, topic).topics[0].error_code == 0


def test_unreadable_checkpoint_files_do_not_stop_the_broker(start_broker, tmp_path) -> None:
    """Torn checkpoint files (as Kafka: warned about, recovery from offset 0 and
    log start at the first segment) must not keep the broker from starting."""
    data = tmp_path / "data"
    b = start_broker(log_dir=data)
    with RawClient(b.bootstrap) as c:
        metadata(c, "ckpt")
        for _ in range(4):
            assert partition_response(c.request(ApiKey.PRODUCE, 9, produce_body(
                "ckpt", 0, batch(3)))).error_code == 0
    assert b.stop() == 0
    (data / LOG_START_OFFSET_CHECKPOINT).write_text("0\n")  # torn: the version line only
    (data / RECOVERY_POINT_CHECKPOINT).write_bytes(bytes(16))  # zeros: size before data
    (data / ".kafka_cleanshutdown").unlink()
    b2 = start_broker(log_dir=data, port=b.port)
    with RawClient(b2.bootstrap) as c:
        assert latest_offset(c, "ckpt") == 12
        r = c.request(ApiKey.FETCH, 11, fetch_body("ckpt", 0))
        got = [rec.offset for rec in iter_records(bytes(r.responses[0].partitions[0].records))]
        assert got == list(range(12))
        assert partition_response(c.request(ApiKey.PRODUCE, 9, produce_body(
            "ckpt", 0, batch(1)))).base_offset == 12
    assert b2.stop() == 0
    assert OffsetCheckpointFile(data / RECOVERY_POINT_CHECKPOINT).read()[("ckpt", 0)] == 13
    assert OffsetCheckpointFile(data / LOG_START_OFFSET_CHECKPOINT).read()[("ckpt", 0)] == 0


def test_producer_snapshot_past_the_recovered_end_is_not_reused(start_broker, tmp_path) -> None:
    """A clean stop writes a producer snapshot at the log end; the tail below it
    is then lost (power loss).  That snapshot is past the recovered log end and
    must go: kept, the next unclean start would load it as covering the log up
    to its offset, skip the replay of the batches written there since, and
    append a retry of one of them a second time."""
    data = tmp_path / "data"
    no_snapshots = "log.flush.offset.checkpoint.interval.ms=3600000"  # only at clean stop
    b = start_broker(no_snapshots, log_dir=data)
    p1 = Idempotent(b.bootstrap, "idem")
    for seq in range(0, 30, 3):
        assert p1.send(seq).base_offset == seq
    p1.c.close()
    assert b.stop() == 0
    part = data / "idem-0"
    assert [p.name for p in part.glob("*.snapshot")] == [f"{30:020d}.snapshot"]
    # the last batches never reached the disk: torn at the batch of offset 18
    torn = next(x for x in scan_dir(part) if x[2] == 18)
    os.truncate(part / f"{0:020d}.log", torn[1] + 20)
    (data / ".kafka_cleanshutdown").unlink()
    b2 = start_broker(no_snapshots, log_dir=data, port=b.port)
    p2 = Idempotent(b2.bootstrap, "idem")
    assert latest_offset(p2.c, "idem") == 18
    assert [p2.send(seq).base_offset for seq in (0, 3, 6)] == [18, 21, 24]
    p3 = Idempotent(b2.bootstrap, "idem")
    assert [p3.send(seq).base_offset for seq in (0, 3, 6)] == [27, 30, 33]
    b2.kill()  # before any new snapshot
    b3 = start_broker(no_snapshots, log_dir=data, port=b.port)
    p2.reconnect(b3.bootstrap)
    p3.reconnect(b3.bootstrap)
    retry = p2.send(6)  # its first attempt was written at offset 24
    assert (retry.error_code, retry.base_offset) == (0, 24)
    retry = p3.send(6)
    assert (retry.error_code, retry.base_offset) == (0, 33)
    assert latest_offset(p2.c, "idem") == 36  # neither was appended twice
    assert p2.send(9).base_offset == 36
    p2.c.close()
    p3.c.close()


def _create_topic(c: RawClient, name: str, partitions: int) -> None:
    r = c.request(ApiKey.CREATE_TOPICS, 7, {"timeout_ms": 5000, "validate_only": False,
                  "topics": [{"name": name, "num_partitions": partitions,
                              "replication_factor": 1, "assignments": [], "configs": []}]})
    assert r.topics[0].error_code == 0


def test_interrupted_topic_deletion_is_finished_on_restart(start_broker, tmp_path) -> None:
    """kill -9 in the middle of DeleteTopics: the deletion was recorded in the
    topics file first, one partition directory is gone, one renamed for
    deletion, two untouched.  The restart finishes the deletion instead of
    bringing the topic back with some partitions emptied."""
    data = tmp_path / "data"
    b = start_broker(log_dir=data)
    with RawClient(b.bootstrap) as c:
        _create_topic(c, "doomed", 4)
        metadata(c, "kept")
        for name, partition in [("doomed", 0), ("doomed", 1), ("doomed", 2), ("doomed", 3),
                                ("kept", 0)]:
            assert partition_response(c.request(ApiKey.PRODUCE, 9, produce_body(
                name, partition, batch(3)))).error_code == 0
    _commit(b.bootstrap, [ck.TopicPartition("doomed", 0, 2), ck.TopicPartition("doomed", 3, 1)])
    b.kill()
    registry = data / TOPICS_FILE
    saved = json.loads(registry.read_text())
    saved["doomed"] = {"id": saved["doomed"]["id"], "deleted": True}
    registry.write_text(json.dumps(saved))
    shutil.rmtree(data / "doomed-0")
    os.replace(data / "doomed-1", data / f"doomed-1.{'0' * 32}-delete")
    assert (data / "doomed-2").is_dir() and (data / "doomed-3").is_dir()
    b2 = start_broker(log_dir=data, port=b.port)
    with RawClient(b2.bootstrap) as c:
        md = metadata(c, "doomed", "kept", allow=False)
        assert [t.error_code for t in md.topics] == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 0]
        assert latest_offset(c, "kept") == 3
        assert not [d.name for d in data.iterdir() if d.name.startswith("doomed")]
        assert set(json.loads(registry.read_text())) == {"kept", "__consumer_offsets"}
        _create_topic(c, "doomed", 2)  # created again: new and empty
        assert [latest_offset(c, "doomed", p) for p in (0, 1)] == [0, 0]
    # The old topic's committed offsets went with it, as with a deletion that
    # was not interrupted (Kafka's handleDeletedPartitions).
    consumer = ck.Consumer({"bootstrap.servers": b2.bootstrap, "group.id": "g"})
    try:
        committed = consumer.committed([ck.TopicPartition("doomed", 0)], timeout=10)
    finally:
        consumer.close()
    assert committed[0].offset == ck.OFFSET_INVALID
    assert b2.stop() == 0
    assert set(json.loads(registry.read_text())) == {"doomed", "kept", "__consumer_offsets"}


def _commit(bootstrap: str, offsets: list) -> None:
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "g",
                            "enable.auto.commit": False})
    try:
        consumer.commit(offsets=offsets, asynchronous=False)
    finally:
        consumer.close()


class _Crash(Exception):
    """Stands for kill -9 at that point."""


def test_topic_deletion_cut_short_is_recorded_first_and_finished(tmp_path, monkeypatch) -> None:
    """The deletion intent reaches the topics file before the first partition
    directory goes; a crash after some of them are gone leaves a state the next
    start completes (the topic does not come back with emptied partitions)."""
    d = tmp_path / "data"
    cfg = LogConfig()
    logs = LogManager(d, cfg)
    registry = TopicRegistry(logs, cfg)
    registry.create("doomed", 4)
    registry.create("kept", 2)
    for name, partition in [("doomed", p) for p in range(4)] + [("kept", 0), ("kept", 1)]:
        logs.get_log(name, partition).append(bytearray(batch(3)))
    real = logs.delete_log
    deleted: list[int] = []

    def crash_after_two(topic: str, partition: int) -> None:
        if len(deleted) == 2:
            saved = json.loads((d / TOPICS_FILE).read_text())
            assert saved["doomed"].get("deleted") is True  # recorded before the dirs went
            raise _Crash
        real(topic, partition)
        deleted.append(partition)

    monkeypatch.setattr(logs, "delete_log", crash_after_two)
    with pytest.raises(_Crash):
        registry.delete("doomed")
    assert len([p for p in d.iterdir() if p.name.startswith("doomed-")]) == 2
    for lg in logs.logs().values():
        lg.close_handlers()  # no clean close: the process is gone
    logs.dir_lock.release()  # (and with it its lock on the dir)

    logs = LogManager(d, cfg)
    registry = TopicRegistry(logs, cfg)
    assert registry.get("doomed") is None and registry.get("kept") is not None
    assert sorted(logs.logs()) == [("kept", 0), ("kept", 1)]
    assert not [p for p in d.iterdir() if p.name.startswith("doomed")]
    # The marker stays until the broker has removed the committed offsets too.
    assert registry.finished_deletions == ["doomed"]
    assert json.loads((d / TOPICS_FILE).read_text())["doomed"].get("deleted") is True
    registry.forget("doomed")
    assert set(json.loads((d / TOPICS_FILE).read_text())) == {"kept"}
    assert [logs.get_log("kept", p).log_end_offset for p in (0, 1)] == [3, 3]
    registry.create("doomed", 2)
    assert [logs.get_log("doomed", p).log_end_offset for p in (0, 1)] == [0, 0]
    logs.close()


def test_deletion_marker_outlives_the_logs_until_forgotten(tmp_path) -> None:
    """DeleteTopics removes the partition logs, then the broker tombstones the
    topic's committed offsets, then the marker goes (``forget``).  The marker
    used to go with the logs: a crash before the offsets were tombstoned left
    them to a new topic of the same name, since nothing at the next start
    said the topic had been deleted."""
    d = tmp_path / "data"
    cfg = LogConfig()
    logs = LogManager(d, cfg)
    registry = TopicRegistry(logs, cfg)
    registry.create("doomed", 2)
    registry.delete("doomed")
    assert not [p for p in d.iterdir() if p.name.startswith("doomed")]
    assert json.loads((d / TOPICS_FILE).read_text())["doomed"].get("deleted") is True
    logs.close()  # a crash here: the next start finishes the deletion

    logs = LogManager(d, cfg)
    registry = TopicRegistry(logs, cfg)
    assert registry.finished_deletions == ["doomed"] and registry.get("doomed") is None
    registry.create("doomed", 1)  # a new topic of that name before forget: the file keeps it
    registry.forget("doomed")
    saved = json.loads((d / TOPICS_FILE).read_text())
    assert saved["doomed"]["partitions"] == 1 and "deleted" not in saved["doomed"]
    logs.close()


def test_create_partitions_that_fails_midway_is_rolled_back(tmp_path, monkeypatch) -> None:
    """CreatePartitions saves the new count before making the logs (a crash
    then leaves all of them for the next start to make); a failure it sees
    (out of file descriptors) goes back to the old count and removes the
    logs it made, else every later start would fail the same way."""
    d = tmp_path / "data"
    cfg = LogConfig()
    logs = LogManager(d, cfg)
    registry = TopicRegistry(logs, cfg)
    registry.create("grown", 2)
    real = logs.get_or_create_log

    def fail_at_five(topic: str, partition: int, *args):
        if partition == 5:
            raise OSError(24, "Too many open files")
        return real(topic, partition, *args)

    monkeypatch.setattr(logs, "get_or_create_log", fail_at_five)
    with pytest.raises(TopicError, match="Too many open files") as refused:
        registry.add_partitions("grown", 8)
    assert refused.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    assert registry.get("grown").partitions == 2
    assert sorted(p for t, p in logs.logs() if t == "grown") == [0, 1]
    assert json.loads((d / TOPICS_FILE).read_text())["grown"]["partitions"] == 2
    monkeypatch.undo()
    logs.close()

    logs = LogManager(d, cfg)  # the next start: the topic as it was
    registry = TopicRegistry(logs, cfg)
    assert registry.get("grown").partitions == 2
    assert sorted(p for t, p in logs.logs() if t == "grown") == [0, 1]
    logs.close()


def test_drop_behind_keeps_the_tail_cached_and_old_data_readable(start_broker, topic) -> None:
    """log.cache.drop.behind.bytes: with a 1 MiB window, what a producer wrote
    further back is evicted (written back first) and the newest data stays in
    the page cache; a consumer from the beginning reads every record back,
    the old ones from disk."""
    b = start_broker("log.cache.drop.behind.bytes=1048576", "num.partitions=1")
    producer = ck.Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5})
    values = [os.urandom(8) * 128 for _ in range(24_000)]  # 1 KiB each: ~24 MiB
    for i, v in enumerate(values):
        while True:
            try:
                producer.produce(topic, v, key=b"%d" % i)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0
    segment = b.log_dir / f"{topic}-0" / f"{0:020d}.log"
    fd = os.open(segment, os.O_RDONLY)
    try:
        if pagecache.cached_fraction(fd) == 1.0 and not _evicts(b.log_dir):
            pytest.skip("this filesystem keeps pages after POSIX_FADV_DONTNEED")
        size = os.fstat(fd).st_size
        # The worker evicts a round at a time: wait for it to reach the old data.
        wait_for(lambda: pagecache.cached_fraction(fd, 0, size // 2) < 0.1, 60,
                 "the older half of the segment to leave the page cache")
        tail, pages = pagecache.resident_pages(fd, size - 512 * 1024, 512 * 1024)
        assert tail == pages  # the newest bytes were not touched
    finally:
        os.close(fd)
    consumer = ck.Consumer({"bootstrap.servers": b.bootstrap, "group.id": topic,
                            "auto.offset.reset": "earliest", "enable.auto.commit": False,
                            "fetch.queue.backoff.ms": 10})
    consumer.subscribe([topic])
    got: list[tuple[int, bytes, bytes]] = []
    deadline = time.monotonic() + 60
    while len(got) < len(values) and time.monotonic() < deadline:
        for m in consumer.consume(1000, 1.0):
            assert m.error() is None, m.error()
            got.append((m.offset(), m.key(), m.value()))
    consumer.close()
    assert got == [(i, b"%d" % i, v) for i, v in enumerate(values)]


def _evicts(directory) -> bool:
    """Whether POSIX_FADV_DONTNEED evicts clean pages on this filesystem."""
    probe = directory / ".evict-probe"
    fd = os.open(probe, os.O_CREAT | os.O_RDWR)
    try:
        os.write(fd, b"x" * (1 << 20))
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        return pagecache.cached_fraction(fd) < 0.5
    finally:
        os.close(fd)
        probe.unlink()

