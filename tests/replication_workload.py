"""Load and its checks for replication tests under faults (Kafka's
ProduceConsumeValidateTest, Jepsen's queue checks).

A :class:`Workload` runs an idempotent ``acks=all`` confluent-kafka producer
and a consumer beside whatever faults a test makes.  The producer writes
``<partition>-<seq>`` values, ``seq`` counting up per partition, and keeps
each acknowledgement's (partition, offset, value); the consumer keeps every
(partition, offset, value) it saw, in the order it saw them.  At the end
:func:`read_log` reads each partition whole from the cluster, and
:func:`check` compares: acknowledged records lost, records written twice,
records out of order, records a consumer saw that the log no longer holds at
that offset, and what the running consumer missed or saw twice.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

log = logging.getLogger("replication.workload")

# Liveness bounds (a stalled cluster fails the check, never a slow one).
DRAIN_TIMEOUT_S = 180
# The producer's pace: enough records to cover every fault, little CPU.
SEND_INTERVAL_S = 0.004

Record = tuple[int, int | None, str]  # partition, offset (None: not told), value


def _client_logger(name: str) -> logging.Logger:
    """librdkafka's own log lines into Python's logging (pytest shows them
    with a failure) instead of the test's stderr."""
    return logging.getLogger(f"replication.{name}")


def _seq(value: str) -> int:
    return int(value.rpartition("-")[2])


@dataclass
class Findings:
    """What :func:`check` found; every list empty means all is well."""

    acked: int = 0
    log_records: int = 0
    seen: int = 0
    lost: list[Record] = field(default_factory=list)  # acked, not in the log there
    duplicated: list[str] = field(default_factory=list)  # values the log holds twice
    reordered: list[tuple[int, int]] = field(default_factory=list)  # (partition, offset)
    seen_then_gone: list[Record] = field(default_factory=list)
    consumer_missed: list[Record] = field(default_factory=list)  # acked, never consumed
    consumer_repeated: list[tuple[int, int]] = field(default_factory=list)
    consumer_disordered: list[tuple[int, int]] = field(default_factory=list)

    def problems(self, consumer: bool = True) -> dict[str, list[Any]]:
        found = {"lost": self.lost, "duplicated": self.duplicated,
                 "reordered": self.reordered, "seen_then_gone": self.seen_then_gone}
        if consumer:
            found |= {"consumer_missed": self.consumer_missed,
                      "consumer_repeated": self.consumer_repeated,
                      "consumer_disordered": self.consumer_disordered}
        return {k: v[:20] for k, v in found.items() if v}


class Workload:
    """The producer and consumer threads on ``topic`` (partitions 0..n-1)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int,
                 producer_config: dict[str, Any] | None = None,
                 restart_after_fatal: bool = False) -> None:
        self.bootstrap = bootstrap
        # A producer that failed for good (a fatal error) is replaced by a new
        # one (the soak goes on and counts them), or the load ends there.
        self.restart_after_fatal = restart_after_fatal
        self.topic = topic
        self.partitions = partitions
        self.producer_config = producer_config or {}
        self.acked: list[Record] = []
        self.failed: list[tuple[str, str]] = []  # value, error
        self.fatal: list[str] = []
        self.seen: list[Record] = []
        self.sent = 0
        self._lock = threading.Lock()
        self._producing = threading.Event()
        self._consuming = threading.Event()
        self._targets: dict[int, int] | None = None  # where the consumer may stop
        self._consumer_done = threading.Event()
        self._threads: list[threading.Thread] = []
        self.errors: list[BaseException] = []

    # -- running ----------------------------------------------------------------------

    def start(self) -> Workload:
        self._producing.set()
        self._consuming.set()
        for target in (self._produce, self._consume):
            t = threading.Thread(target=self._guard, args=(target,), daemon=True,
                                 name=f"workload-{target.__name__}")
            t.start()
            self._threads.append(t)
        return self

    def _guard(self, target: Any) -> None:
        try:
            target()
        except BaseException as exc:  # reported by stop()
            log.exception("workload thread failed")
            self.errors.append(exc)

    def acked_count(self) -> int:
        with self._lock:
            return len(self.acked)

    def wait_acked(self, more: int, timeout: float, what: str = "") -> None:
        """Until ``more`` records beyond those acknowledged now are (the
        cluster takes writes again)."""
        goal = self.acked_count() + more
        deadline = time.monotonic() + timeout
        while self.acked_count() < goal:
            if (self.fatal and not self.restart_after_fatal) or self.errors:
                raise AssertionError(f"the producer failed: {self.fatal or self.errors}")
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout}s waiting for {more} more "
                                     f"acknowledged records {what}(acked "
                                     f"{self.acked_count()}, sent {self.sent}, failed "
                                     f"{len(self.failed)}: {self.failed[-3:]})")
            time.sleep(0.1)

    def _produce(self) -> None:
        config = {"bootstrap.servers": self.bootstrap, "enable.idempotence": True,
                  "acks": "all", "linger.ms": 5, "message.timeout.ms": 600000,
                  "logger": _client_logger("producer"),
                  "error_cb": self._on_error, **self.producer_config}
        seqs = [0] * self.partitions
        n = 0
        while True:
            producer = Producer(config)
            fatal_before = len(self.fatal)
            try:
                while self._producing.is_set() and len(self.fatal) == fatal_before:
                    p = n % self.partitions
                    value = f"{p}-{seqs[p]}"
                    try:
                        producer.produce(self.topic, value=value.encode(), partition=p,
                                         on_delivery=self._delivered)
                    except BufferError:
                        producer.poll(0.1)
                        continue
                    seqs[p] += 1
                    n += 1
                    self.sent += 1
                    producer.poll(0)
                    time.sleep(SEND_INTERVAL_S)
                if len(self.fatal) == fatal_before:
                    # Every record sent gets its answer (acknowledged, or failed for good).
                    deadline = time.monotonic() + DRAIN_TIMEOUT_S
                    while (len(producer) and time.monotonic() < deadline
                           and len(self.fatal) == fatal_before):
                        producer.poll(0.2)
                    if len(self.fatal) == fatal_before:
                        if len(producer):
                            self.fatal.append(f"{len(producer)} records still unanswered "
                                              f"after {DRAIN_TIMEOUT_S}s")
                        return
            except KafkaException as exc:
                # A fatal error (the idempotent producer found its sequence
                # broken): librdkafka refuses to go on.  What it acknowledged is
                # checked all the same.
                self.fatal.append(str(exc))
            if not self.restart_after_fatal or not self._producing.is_set():
                return
            log.warning("a new producer takes over after a fatal error: %s", self.fatal[-1])

    def _on_error(self, err: KafkaError) -> None:
        if err.fatal():
            self.fatal.append(str(err))
        log.info("producer error: %s", err)

    def _delivered(self, err: KafkaError | None, msg: Any) -> None:
        value = msg.value().decode()
        with self._lock:
            if err is None:
                self.acked.append((msg.partition(), msg.offset(), value))
            else:
                self.failed.append((value, str(err)))

    def _consume(self) -> None:
        consumer = Consumer({"bootstrap.servers": self.bootstrap,
                             "group.id": f"{self.topic}-checker",
                             "enable.auto.commit": False, "auto.offset.reset": "earliest",
                             "logger": _client_logger("consumer")})
        consumer.assign([TopicPartition(self.topic, p, 0) for p in range(self.partitions)])
        position: dict[int, int] = {}
        try:
            while self._consuming.is_set():
                msg = consumer.poll(0.2)
                if msg is not None:
                    if msg.error():
                        log.info("consumer: %s", msg.error())
                    else:
                        record = (msg.partition(), msg.offset(), msg.value().decode())
                        with self._lock:
                            self.seen.append(record)
                        position[msg.partition()] = msg.offset() + 1
                targets = self._targets
                if targets is not None and all(position.get(p, 0) >= end
                                               for p, end in targets.items()):
                    break
        finally:
            consumer.close()
            self._consumer_done.set()

    def stop(self, cluster_bootstrap: str | None = None) -> None:
        """Stop producing, wait for every answer, then let the consumer read
        up to the log's end before it stops.  AssertionError when a thread
        failed or the consumer did not get there."""
        self._producing.clear()
        self._threads[0].join(DRAIN_TIMEOUT_S + 30)
        if self._threads[0].is_alive():
            raise AssertionError("the producer did not finish")
        self._targets = end_offsets(cluster_bootstrap or self.bootstrap, self.topic,
                                    self.partitions)
        if not self._consumer_done.wait(DRAIN_TIMEOUT_S):
            self._consuming.clear()
            self._threads[1].join(30)
            raise AssertionError(f"the consumer did not reach the log end {self._targets}")
        if self.errors:
            raise AssertionError(f"workload thread failed: {self.errors!r}")

    def abort(self) -> None:
        """A failed test: stop both threads without checks."""
        self._producing.clear()
        self._consuming.clear()
        for t in self._threads:
            t.join(5)


def end_offsets(bootstrap: str, topic: str, partitions: int,
                timeout: float = DRAIN_TIMEOUT_S) -> dict[int, int]:
    """Each partition's high watermark (what a consumer can read up to),
    asked again while the cluster cannot answer yet (a node just restarted
    knows no topics until the controller's UpdateMetadata reaches it)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-ends",
                         "logger": _client_logger("ends")})
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                return {p: consumer.get_watermark_offsets(TopicPartition(topic, p),
                                                          timeout=30)[1]
                        for p in range(partitions)}
            except KafkaException as exc:
                if time.monotonic() > deadline:
                    raise AssertionError(f"no end offsets of {topic}: {exc}") from None
                log.info("end offsets of %s: %s; asking again", topic, exc)
                time.sleep(0.5)
    finally:
        consumer.close()


def read_log(bootstrap: str, topic: str, partitions: int,
             timeout: float = DRAIN_TIMEOUT_S) -> dict[int, list[tuple[int, str]]]:
    """Every partition read whole, to its high watermark: partition ->
    [(offset, value)] in offset order."""
    ends = end_offsets(bootstrap, topic, partitions)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-reader",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "logger": _client_logger("reader")})
    out: dict[int, list[tuple[int, str]]] = {p: [] for p in range(partitions)}
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + timeout
        while any((out[p][-1][0] + 1 if out[p] else 0) < ends[p] for p in out):
            if time.monotonic() > deadline:
                got = {p: len(v) for p, v in out.items()}
                raise AssertionError(f"timed out reading {topic} to {ends} (got {got})")
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            out[msg.partition()].append((msg.offset(), msg.value().decode()))
    finally:
        consumer.close()
    return out


def check(workload: Workload, final: dict[int, list[tuple[int, str]]]) -> Findings:
    """The workload's acknowledgements and sightings against the final log."""
    f = Findings(acked=len(workload.acked), seen=len(workload.seen),
                 log_records=sum(len(v) for v in final.values()))
    at = {(p, off): value for p, records in final.items() for off, value in records}
    where = {(p, value) for p, records in final.items() for _, value in records}
    # An acknowledgement without an offset (librdkafka's idempotent producer
    # reports a batch whose answer it lost as delivered once a later batch
    # of the same producer was acknowledged: persisted, offset unknown):
    # the record must be in its partition, anywhere.
    f.lost = [r for r in workload.acked if (at.get((r[0], r[1])) != r[2] if r[1] is not None
                                            else (r[0], r[2]) not in where)]
    counts = Counter(value for records in final.values() for _, value in records)
    f.duplicated = sorted(v for v, n in counts.items() if n > 1)
    acked = {r[2] for r in workload.acked}
    for p, records in final.items():
        # Acknowledged records only: one a failed producer left unanswered
        # may land after its successor's.
        seqs = [(off, _seq(v)) for off, v in records if v in acked]
        f.reordered += [(p, off) for (_, a), (off, b) in zip(seqs, seqs[1:], strict=False)
                        if b <= a]
    f.seen_then_gone = [r for r in workload.seen if at.get((r[0], r[1])) != r[2]]
    seen_values = {r[2] for r in workload.seen}
    f.consumer_missed = [r for r in workload.acked if r[2] not in seen_values]
    # Per partition the consumer moves forward only: an offset seen again is
    # a repeat (a reset after a truncation), one below the last but new is
    # out of order.
    last: dict[int, int] = {}
    offsets: dict[int, set[int]] = {}
    for p, off, _ in workload.seen:
        mine = offsets.setdefault(p, set())
        if off in mine:
            f.consumer_repeated.append((p, off))
        elif off < last.get(p, -1):
            f.consumer_disordered.append((p, off))
        mine.add(off)
        last[p] = max(off, last.get(p, -1))
    return f


# -- single records -----------------------------------------------------------------


def produce(bootstrap: str, topic: str, values: list[str], acks: str,
            partition: int = 0) -> list[tuple[Any, int]]:
    """Each value sent once (no retries: the leader's answer is what comes
    back): [(error or None, offset)]."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "retries": 0,
                         "enable.idempotence": False, "message.timeout.ms": 60000,
                         "linger.ms": 0})
    results: list[tuple[Any, int]] = []
    for value in values:
        producer.produce(topic, value=value.encode(), partition=partition,
                         on_delivery=lambda err, msg: results.append((err, msg.offset())))
        producer.flush(90)
    assert len(results) == len(values), "a record got no answer"
    return results


def codes(results: list[tuple[Any, int]]) -> list[int]:
    return [err.code() if err is not None else KafkaError.NO_ERROR for err, _ in results]


def high_watermark(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "hw"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)[1]
    finally:
        consumer.close()
