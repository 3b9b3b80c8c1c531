"""A compact concurrency soak: two idempotent producers of different client
libraries (librdkafka through confluent-kafka, kafka-python) write to the
same partitions of the real broker at once, while

* segments roll (small ``segment.bytes``),
* the broker is frozen (SIGSTOP) for longer than the clients' request timeout,
  so in-flight produce requests time out and are sent again on a new
  connection after the broker has already written them: only the broker's
  sequence check keeps those retries out of the log,
* the broker is stopped (SIGTERM) and started again on the same port and log
  dir: the producers keep their ids and sequences, so the restarted broker
  must know where each one's sequence stands.

Then every acknowledged record is in the log exactly once, at the offset it
was acknowledged with, each producer's records are in send order within a
partition, no send failed, and the broker printed no traceback.

Kafka gives exactly that for idempotent producers with at most 5 requests in
flight (KIP-98; the sequence state survives restarts in producer snapshots).
"""

from __future__ import annotations

import collections
import os
import signal
import threading
import time
from collections.abc import Iterator

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
kafka = pytest.importorskip("kafka")

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

PARTITIONS = 2
SEGMENT_BYTES = 64 * 1024
# Short enough that a frozen broker times the in-flight requests out.
REQUEST_TIMEOUT_MS = 500
FREEZE_S = 2.5  # past the request timeout, and past librdkafka's 1 s timeout scan
RUN_S = 1.5     # sending between two disturbances


def _value(name: str, partition: int, seq: int) -> bytes:
    pad = (seq * 37) % 700 if seq % 5 else 0  # tiny and larger records
    return f"{name}|{partition}|{seq}|".encode() + bytes([seq % 251]) * pad


class _Acks:
    """What each producer sent and what the broker acknowledged."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.acked: dict[tuple[str, int, int], int] = {}  # (name, partition, seq) -> offset
        self.errors: list[str] = []

    def ok(self, name: str, partition: int, seq: int, offset: int) -> None:
        with self.lock:
            self.acked[(name, partition, seq)] = offset

    def fail(self, name: str, partition: int, seq: int, why: str) -> None:
        with self.lock:
            self.errors.append(f"{name} p{partition} #{seq}: {why}")


def _round_robin(stop: threading.Event) -> Iterator[tuple[int, int]]:
    """(partition, sequence) of each record to send, the partitions in turn,
    until ``stop`` is set."""
    seqs = [0] * PARTITIONS
    i = 0
    while not stop.is_set():
        part = i % PARTITIONS
        yield part, seqs[part]
        seqs[part] += 1
        i += 1


def _confluent(bootstrap: str, topic: str, acks: _Acks, stop: threading.Event) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                  "acks": "all", "max.in.flight.requests.per.connection": 5,
                  "compression.type": "lz4", "linger.ms": 2, "batch.size": 8192,
                  "request.timeout.ms": REQUEST_TIMEOUT_MS, "message.timeout.ms": 60000,
                  "retry.backoff.ms": 50, "reconnect.backoff.ms": 50,
                  "reconnect.backoff.max.ms": 200}, logger=None)
    for i, (part, seq) in enumerate(_round_robin(stop), 1):

        def done(err, msg, part=part, seq=seq):
            if err is None:
                acks.ok("c", part, seq, msg.offset())
            else:
                acks.fail("c", part, seq, str(err))
        while True:
            try:
                p.produce(topic, _value("c", part, seq), key=b"k%d" % (seq % 7),
                          partition=part, headers=[("s", str(seq).encode())],
                          on_delivery=done)
                break
            except BufferError:
                p.poll(0.05)
        if i % 20 == 0:
            p.poll(0.002)
    assert p.flush(60) == 0


def _kafka_python(bootstrap: str, topic: str, acks: _Acks, stop: threading.Event) -> None:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all",
                      max_in_flight_requests_per_connection=5, compression_type="gzip",
                      linger_ms=1, batch_size=8192, request_timeout_ms=REQUEST_TIMEOUT_MS,
                      delivery_timeout_ms=60000, retry_backoff_ms=50,
                      reconnect_backoff_ms=50, reconnect_backoff_max_ms=200)
    for i, (part, seq) in enumerate(_round_robin(stop), 1):
        fut = p.send(topic, _value("k", part, seq), key=b"k%d" % (seq % 7), partition=part,
                     headers=[("s", str(seq).encode())])
        fut.add_callback(lambda md, part=part, seq=seq: acks.ok("k", part, seq, md.offset))
        fut.add_errback(lambda e, part=part, seq=seq: acks.fail("k", part, seq, repr(e)))
        if i % 20 == 0:
            time.sleep(0.002)
    p.flush(60)
    p.close(10)


def _read_log(bootstrap: str, topic: str) -> dict[tuple[str, int, int], list[int]]:
    """Every record of the topic, as (producer, partition, seq) -> offsets."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "soak-check",
                  "enable.auto.commit": False, "check.crcs": True})
    try:
        ends = {}
        for p in range(PARTITIONS):
            lo, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            assert lo == 0
            ends[p] = hi
        c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        found: dict[tuple[str, int, int], list[int]] = collections.defaultdict(list)
        left = sum(ends.values())
        while left:
            msgs = c.consume(1000, 10)
            assert msgs, f"the log ended {left} records early"
            for m in msgs:
                assert m.error() is None, m.error()
                name, part, seq, _ = m.value().split(b"|", 3)
                seq_i = int(seq)
                assert int(part) == m.partition()
                assert m.value() == _value(name.decode(), int(part), seq_i)  # not corrupted
                assert dict(m.headers())["s"] == seq
                found[(name.decode(), m.partition(), seq_i)].append(m.offset())
                left -= 1
        return found
    finally:
        c.close()


def test_idempotent_producers_exactly_once_in_order_across_retries_roll_and_restart(
        start_broker, tmp_path, topic):
    data = tmp_path / "data"
    broker = start_broker(log_dir=data)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1,
                                  config={"segment.bytes": str(SEGMENT_BYTES)})])[topic].result(10)

    acks = _Acks()
    stop = threading.Event()
    threads = [threading.Thread(target=fn, args=(broker.bootstrap, topic, acks, stop))
               for fn in (_confluent, _kafka_python)]
    for t in threads:
        t.start()
    try:
        def freeze() -> None:
            os.kill(broker.proc.pid, signal.SIGSTOP)
            time.sleep(FREEZE_S)
            os.kill(broker.proc.pid, signal.SIGCONT)

        time.sleep(RUN_S)
        freeze()
        time.sleep(RUN_S)
        assert broker.stop() == 0
        outputs = list(broker.output)
        broker = start_broker(log_dir=data, port=broker.port)
        time.sleep(RUN_S)
        freeze()
        time.sleep(RUN_S)
    finally:
        stop.set()
        for t in threads:
            t.join(90)
    assert not any(t.is_alive() for t in threads), "a producer is stuck"
    assert acks.errors == []

    found = _read_log(broker.bootstrap, topic)
    assert broker.stop() == 0
    outputs += broker.output
    assert "Traceback" not in "".join(outputs)

    for (name, part, seq), offsets in found.items():
        assert len(offsets) == 1, f"{name} p{part} #{seq} written at {offsets}"
    for key, offset in acks.acked.items():
        assert found.get(key) == [offset], f"{key} acked at {offset}, logged at {found.get(key)}"
    for name in ("c", "k"):
        for part in range(PARTITIONS):
            sent = sorted((seq, off[0]) for (n, p, seq), off in found.items()
                          if n == name and p == part)
            assert [s for s, _ in sent] == list(range(len(sent))), f"{name} p{part} lost records"
            offsets = [o for _, o in sent]
            assert offsets == sorted(offsets), f"{name} p{part} out of send order"
            assert sent, f"{name} wrote nothing to partition {part}"
    assert len(acks.acked) == len(found)
    segments = list((data / f"{topic}-0").glob("*.log"))
    assert len(segments) > 1, "no segment rolled"
