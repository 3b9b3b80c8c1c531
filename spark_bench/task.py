"""The per-task load loops, run inside Spark Python workers.

This is a plain module (no Spark objects at import time) so cloudpickle ships a *reference* to
:func:`run_partition` and the workers import it from the zip the driver adds with
``SparkContext.addPyFile``. It can also be called directly, without Spark, by passing no barrier.

Measurement notes (why the loop looks the way it does):

* Payloads are generated before the clock starts; generating bytes in Python per record caps a
  producer at a few MB/s.
* The send loop is :func:`pylog.tools.producer_loop.send_loop`, shared with
  ``pylog producer-perf-test``.
* With ``--target-rate`` sending follows an open-loop schedule: record ``i`` is *intended* at
  ``start + i / rate`` and its latency is measured from that intended time, so a stalled client
  or broker shows up as latency instead of silently lowering the offered load (coordinated
  omission). Every record is timed: its delivery callback is a ``functools.partial`` over the
  intended time that appends one int to an ``array``.
* Without a rate (as fast as possible) one record in ``sample_every`` (16) carries a delivery
  callback and its latency is librdkafka's produce()-to-ack time; a Python callback on every
  record would cost the client about half its rate. Delivered records are counted as sent minus
  failed minus still queued after the flush.
* The HDR histogram is filled in bulk afterwards (recording one value into ``hdrhistogram``
  costs ~6 us, more than the rest of the per-record work).
"""

from __future__ import annotations

import json
import logging
import math
import os
import socket
import time
import uuid
from array import array
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from pylog import histo
from pylog.tools.producer_loop import SAMPLE_EVERY, send_loop
from spark_bench.grid import client_config

# Bytes of payload kept in the pool per task; the pool is cycled through.
POOL_BYTES = 64 * 1024 * 1024
MAX_POOL_RECORDS = 1024
MIN_POOL_RECORDS = 16
# Latencies are folded into the histogram when this many are pending (bounds task memory).
FOLD_EVERY = 8_000_000

_NULL_LOGGER = logging.getLogger("spark_bench.rdkafka")
_NULL_LOGGER.addHandler(logging.NullHandler())
_NULL_LOGGER.propagate = False


def make_payloads(size: int, count: int, kind: str, seed: int) -> list[bytes]:
    """A pool of ``count`` independent payloads of ``size`` bytes.

    ``random`` payloads are incompressible; ``text`` payloads are sequences of 8-byte words from a
    512-word vocabulary, so lz4/zstd/gzip/snappy all find something to compress (roughly 2-4x),
    which makes a compression.type grid meaningful.
    """
    rng = np.random.default_rng(seed)
    if kind == "random":
        return [rng.bytes(size) for _ in range(count)]
    if kind != "text":
        raise ValueError(f"unknown payload kind {kind!r}")
    letters = np.frombuffer(b"etaoinshrdlucmfwypvbgkqjxz", dtype=np.uint8)
    vocab = np.full((512, 8), ord(" "), dtype=np.uint8)
    lengths = rng.integers(2, 8, size=512)
    for row, length in enumerate(lengths):
        vocab[row, :length] = letters[rng.integers(0, len(letters), size=length)]
    words = size // 8 + 1
    return [vocab[rng.integers(0, 512, size=words)].tobytes()[:size] for _ in range(count)]


def pool_count(size: int, records: int | None) -> int:
    count = max(MIN_POOL_RECORDS, min(MAX_POOL_RECORDS, POOL_BYTES // max(size, 1)))
    if records is not None:
        count = max(1, min(count, records))
    return count


class StatsWindows:
    """Accumulates librdkafka statistics windows (``stats_cb``) for one topic.

    The windowed metrics (``batchsize``, ``batchcnt``, ``rtt``, ``int_latency``,
    ``outbuf_latency``) are reset every ``statistics.interval.ms``; averages are combined weighted
    by each window's ``cnt`` and the p99 reported is the worst window's p99.
    """

    TOPIC_WINDOWS = ("batchsize", "batchcnt")
    BROKER_WINDOWS = ("rtt", "int_latency", "outbuf_latency")

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.windows = 0
        self.sums: dict[str, list[float]] = {}  # name -> [sum(avg*cnt), sum(cnt), max(p99)]
        self.txmsgs = 0

    def _add(self, name: str, window: dict[str, Any] | None) -> None:
        if not window or not window.get("cnt"):
            return
        acc = self.sums.setdefault(name, [0.0, 0.0, 0.0])
        acc[0] += window["avg"] * window["cnt"]
        acc[1] += window["cnt"]
        acc[2] = max(acc[2], window.get("p99", 0))

    def __call__(self, stats_json: str) -> None:
        try:
            stats = json.loads(stats_json)
        except ValueError:
            return
        self.windows += 1
        self.txmsgs = max(self.txmsgs, stats.get("txmsgs", 0))
        topic = stats.get("topics", {}).get(self.topic)
        if topic:
            for name in self.TOPIC_WINDOWS:
                self._add(name, topic.get(name))
        for broker in stats.get("brokers", {}).values():
            if broker.get("nodeid", -1) < 0:  # bootstrap / internal pseudo-brokers
                continue
            for name in self.BROKER_WINDOWS:
                self._add(name, broker.get(name))

    def summary(self) -> dict[str, float]:
        out: dict[str, float] = {"stats_windows": float(self.windows)}
        for name in self.TOPIC_WINDOWS + self.BROKER_WINDOWS:
            acc = self.sums.get(name)
            avg = acc[0] / acc[1] if acc and acc[1] else float("nan")
            p99 = acc[2] if acc else float("nan")
            if name in self.BROKER_WINDOWS:  # librdkafka reports these in microseconds
                out[f"{name}_avg_ms"] = avg / 1000.0
                out[f"{name}_p99_ms"] = p99 / 1000.0
            else:
                out[f"{name}_avg"] = avg
                out[f"{name}_p99"] = p99
        return out


def _identity() -> dict[str, Any]:
    """Where the task ran: host, pid and the executor's working directory (standalone mode
    starts each executor in ``work/<app>/<executor id>``, which tells executors apart)."""
    return {"host": socket.gethostname(), "pid": os.getpid(), "cwd": os.getcwd()}


def run_producer(
    spec: dict[str, Any], index: int, barrier: Callable[[], Any] | None = None
) -> dict[str, Any]:
    """One producer task of a cell. Returns the task row (histogram encoded)."""
    from confluent_kafka import Producer

    cell: dict[str, Any] = spec["cell"]
    topic: str = spec["topic"]
    size = int(cell["record.size"])
    records: int | None = spec.get("records_per_task")
    duration_ns = int(spec["duration_s"] * 1e9) if spec.get("duration_s") else None
    warm_ns = int(spec.get("warmup_s", 0.0) * 1e9)
    rate = spec.get("rate_per_task")
    poll_every = int(spec.get("poll_every", 64))
    sample_every = int(spec.get("sample_every", SAMPLE_EVERY))

    setup_start = time.monotonic()
    pool = make_payloads(size, pool_count(size, records), spec.get("payload", "random"),
                         seed=spec.get("seed", 0) * 1_000_003 + index)
    stats = StatsWindows(topic)
    client_errors: list[str] = []
    conf: dict[str, Any] = {
        "bootstrap.servers": spec["bootstrap"],
        **client_config(cell),
        "statistics.interval.ms": int(spec.get("stats_interval_ms", 1000)),
        "stats_cb": stats,
        "error_cb": lambda err: client_errors.append(str(err)),
        "logger": _NULL_LOGGER,
        **spec.get("client_config", {}),
    }
    producer = Producer(conf)
    # Connect and fetch metadata before the clock starts: that is setup, not latency.
    producer.list_topics(topic, timeout=30)
    setup_s = time.monotonic() - setup_start
    if barrier is not None:
        barrier()  # every task of the cell starts sending together

    lat = array("q")  # latency samples (ns), folded into the histogram in bulk
    append = lat.append
    mono = time.monotonic_ns
    hist = histo.new_histogram()
    errors = [0]
    warm_delivered = [0]
    last = [0]

    def fold() -> None:
        histo.record_many(hist, np.frombuffer(lat, dtype=np.int64) // 1000)
        del lat[:]

    cpu0, thread0 = time.process_time(), time.thread_time()
    wall_offset = time.time_ns() - mono()
    start = mono()
    warm_end = start + warm_ns
    stop = warm_end + duration_ns if duration_ns is not None else None
    # Unthrottled: where the measurement starts (records sent, clock), found by the tick.
    mark = [0, start] if not warm_ns else [-1, warm_end]

    def on_scheduled(intended: int, err: Any, _msg: Any) -> None:
        # Open loop: latency from the record's intended send time.
        if err is None:
            now = mono()
            if intended >= warm_end:
                last[0] = now
                append(now - intended)
            else:
                warm_delivered[0] += 1
        else:
            errors[0] += 1

    def on_sample(err: Any, msg: Any) -> None:
        # Unthrottled (1 in sample_every records): librdkafka's produce()-to-ack time.
        if err is None:
            latency = int(msg.latency() * 1e9)
            if mono() - latency >= warm_end:
                append(latency)
        else:
            errors[0] += 1

    def tick(now: int, sent: int) -> int:
        if mark[0] < 0 and now >= warm_end:
            mark[0], mark[1] = sent, now
        if len(lat) >= FOLD_EVERY:
            fold()
        return warm_end if mark[0] < 0 else now + 1_000_000_000

    sampled = not rate
    i = send_loop(producer, topic, pool, start_ns=start, total=records, stop_ns=stop,
                  rate=rate or 0.0, on_sample=on_sample, on_scheduled=on_scheduled,
                  sample_every=sample_every, poll_every=poll_every, tick=tick,
                  next_tick_ns=warm_end if warm_ns else start + 1_000_000_000)
    sent_end = mono()
    undelivered = producer.flush(float(spec.get("flush_timeout_s", 120.0)))
    end = mono()
    cpu_s, thread_cpu_s = time.process_time() - cpu0, time.thread_time() - thread0
    # One more statistics window after the last delivery, so short cells get librdkafka's
    # rtt / int_latency / batch figures too (not part of the measured time).
    windows = stats.windows
    stats_deadline = time.monotonic() + 1.5 * int(spec.get("stats_interval_ms", 1000)) / 1000
    while stats.windows == windows and time.monotonic() < stats_deadline:
        producer.poll(0.02)

    fold()
    samples = hist.get_total_count()
    failed = errors[0] + undelivered
    if sampled:
        # Records carry no callback: acknowledged = sent - failed - still queued.
        warm_sent = mark[0] if mark[0] >= 0 else i
        measured = max(i - warm_sent - failed, 0)
        total_ok = max(i - failed, 0)
        measure_start = mark[1] if mark[0] >= 0 else end
        measure_end = end
    else:
        measured = samples
        total_ok = samples + warm_delivered[0]
        measure_start = warm_end if warm_ns else start
        measure_end = last[0] if measured else end
    seconds = max((measure_end - measure_start) / 1e9, 1e-9)
    return {
        "role": "producer",
        "cell": spec["cell_index"],
        "task": index,
        **_identity(),
        "records": int(measured),
        "records_total": int(total_ok),
        "records_attempted": i,
        "latency_samples": int(samples),
        "latency_sampled": sampled,
        "bytes": int(measured * size),
        "errors": int(failed),
        "client_errors": len(client_errors),
        "client_error_sample": client_errors[0] if client_errors else "",
        "seconds": seconds,
        "records_per_s": measured / seconds,
        "send_seconds": (sent_end - start) / 1e9,
        "run_seconds": (end - start) / 1e9,
        "start_wall": (measure_start + wall_offset) / 1e9,
        "end_wall": (measure_end + wall_offset) / 1e9,
        "first_send_wall": (start + wall_offset) / 1e9,
        "setup_s": setup_s,
        "cpu_s": cpu_s,
        "thread_cpu_s": thread_cpu_s,
        "hist": histo.encode(hist),
        **stats.summary(),
    }


def run_consumer(
    spec: dict[str, Any], index: int, barrier: Callable[[], float | None] | None = None
) -> dict[str, Any]:
    """One end-to-end consumer task: reads its share of the partitions from the offsets the
    driver captured before the stage and records (now - record timestamp)."""
    from confluent_kafka import Consumer, TopicPartition

    topic: str = spec["topic"]
    consumers = int(spec["e2e_tasks"])
    offsets: dict[int, int] = {int(p): int(o) for p, o in spec["e2e_start_offsets"].items()}
    mine = sorted(p for p in offsets if p % consumers == index)
    expected = spec.get("e2e_expected")  # total records of the cell, known in records mode
    idle_s = float(spec.get("e2e_idle_s", 5.0))
    deadline_s = float(spec.get("e2e_deadline_s", 600.0))
    consumer = Consumer({
        "bootstrap.servers": spec["bootstrap"],
        "group.id": f"spark_bench-e2e-{uuid.uuid4().hex}",
        "enable.auto.commit": False,
        "fetch.wait.max.ms": 5,
        "logger": _NULL_LOGGER,
        **spec.get("client_config", {}),
    })
    consumer.assign([TopicPartition(topic, p, offsets[p]) for p in mine])
    start_at = barrier() if barrier is not None else None
    # Warm-up is judged against the start the producers agreed on, not this task's clock.
    warmup_s = float(spec.get("warmup_s", 0.0))
    start_wall = start_at if isinstance(start_at, float) else time.time()
    warm_end_ms = (start_wall + warmup_s) * 1000.0 if warmup_s > 0 else -math.inf
    lat = array("q")
    count = 0
    warm = 0
    last_msg = time.monotonic()
    started = time.monotonic()
    cpu0 = time.process_time()
    while mine:
        # consume() waits for num_messages *or* the timeout, and every message of a batch is
        # stamped with the batch's return time: a short timeout bounds that error to ~1 ms.
        batch = consumer.consume(num_messages=10_000, timeout=0.001)
        now_ms = time.time() * 1000.0
        if batch:
            last_msg = time.monotonic()
        for msg in batch:
            if msg.error():
                continue
            ts = msg.timestamp()[1]
            if ts < warm_end_ms:
                warm += 1
                continue
            lat.append(int((now_ms - ts) * 1000))
        count = len(lat) + warm
        if expected is not None and index == 0 and consumers == 1 and count >= expected:
            break
        mono = time.monotonic()
        if (count and mono - last_msg > idle_s) or mono - started > deadline_s:
            break
    consumer.close()
    hist = histo.new_histogram()
    histo.record_many(hist, lat)
    return {
        "role": "consumer",
        "cell": spec["cell_index"],
        "task": index,
        **_identity(),
        "records": int(hist.get_total_count()),
        "records_total": int(count),
        "cpu_s": time.process_time() - cpu0,
        "seconds": time.monotonic() - started,
        "hist": histo.encode(hist),
    }


def run_partition(spec: dict[str, Any], _rows: Iterator[Any]) -> Iterator[dict[str, Any]]:
    """``mapPartitions`` body of a barrier stage: partitions ``0..tasks-1`` produce, the rest
    (``--e2e``) consume."""
    from pyspark import BarrierTaskContext

    ctx = BarrierTaskContext.get()
    partition = ctx.partitionId()
    address = ctx.getTaskInfos()[partition].address
    margin = float(spec.get("start_margin_s", 1.2))

    def start_together() -> float:
        # Spark releases a barrier to each task only when that task's JVM side next checks, in
        # 1 s steps, so tasks leave barrier()/allGather() up to ~1 s apart. Agree on a wall-clock
        # start instead: the latest "ready" time plus a margin that covers that step.
        gathered = ctx.allGather(repr(time.time()))
        start_at = max(float(message) for message in gathered) + margin
        delay = start_at - time.time()
        if delay > 0:
            time.sleep(delay)
        return start_at

    if partition < int(spec["tasks"]):
        row = run_producer(spec, partition, start_together)
    else:
        row = run_consumer(spec, partition - int(spec["tasks"]), start_together)
    row["executor_address"] = address
    yield row
