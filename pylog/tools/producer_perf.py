"""``pylog producer-perf-test``: Kafka's ``kafka-producer-perf-test.sh`` for pylog.

Same flags and lines as Kafka's ProducerPerformance: every 5 s::

    N records sent, X records/sec (Y MB/sec), Z ms avg latency, W ms max latency.

and at the end::

    N records sent, X records/sec (Y MB/sec), Z ms avg latency, W ms max latency,
    A ms 50th, B ms 95th, C ms 99th, D ms 99.9th.

How it measures (the send loop is pylog/tools/producer_loop.py, shared with
spark_bench/task.py):

* Payloads are built before the clock starts (``--record-size``: one payload of
  random capital letters, as Kafka; ``--payload-file``: the file's payloads).
* ``--throughput R`` is an open-loop schedule: record ``i`` is *intended* at
  ``start + i/R`` and its latency counts from that time, so a stalled client or
  broker shows up as latency instead of silently lowering the offered load
  (Kafka's throttler hides that: coordinated omission).  Unthrottled
  (``-1``), a record's intended time is when it was handed to the client, and
  librdkafka's own enqueue-to-ack time (``Message.latency()``) is that latency,
  so the hot loop creates no per-record closure and reads no clock.
* Unthrottled, one record in SAMPLE_EVERY (16) carries a delivery callback
  (a latency sample); the others carry none, as a Python callback per record
  would halve what the client can send.  Acknowledged records are counted as
  sent minus still queued.  With ``--throughput`` every record is timed.
* Latencies go into an ``array`` and are folded into an HDR histogram
  (``hdrhistogram``) in bulk at each report (pylog.histo.record_many).
* The producer's own CPU time is compared with the wall time: when the send
  loop kept its thread busy the whole run, the result measured the client, not
  the broker, and a NOTE line on stderr says so.

``--warmup-records N``: the first N records are sent and reported in the 5 s
lines but left out of the final line (and ``--json``).  ``--json FILE`` writes
the final figures for dashboards.

``--transaction-duration-ms D`` (D > 0) sends in transactions, as Kafka's tool:
the producer (``--transactional-id``) commits its open transaction once it is
D ms old and begins the next; the last one is committed at the end.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from array import array
from pathlib import Path
from typing import Any

from pylog import histo
from pylog.tools.common import (
    ToolError,
    check_reachable,
    client_config,
    error_text,
    new_client,
    parse_props,
    print_metrics_table,
    run_tool,
)
from pylog.tools.producer_loop import POLL_EVERY, SAMPLE_EVERY, send_loop

REPORT_INTERVAL_MS = 5000
DEFAULT_TRANSACTIONAL_ID = "performance-producer-default-transactional-id"
TRANSACTION_TIMEOUT_S = 60.0
METADATA_TIMEOUT_S = 30.0
FLUSH_TIMEOUT_S = 300.0
# A send loop whose thread was this busy was limited by the client itself.
CLIENT_BOUND_SHARE = 0.9
MB = 1024 * 1024


def make_payloads(args: argparse.Namespace) -> list[bytes]:
    """Kafka's payloads: ``--record-size`` -> one payload of random capital
    letters; ``--payload-file`` -> the file split on ``--payload-delimiter``."""
    if args.record_size is not None:
        if args.record_size < 0:
            raise ToolError("--record-size must not be negative")
        rng = random.Random()
        return [bytes(rng.randrange(65, 91) for _ in range(args.record_size))]
    path = Path(args.payload_file)
    print(f"Reading payloads from: {path.resolve()}")
    try:
        text = path.read_bytes()
    except OSError as exc:
        raise ToolError(f"cannot read payload file {path}: {exc.strerror}") from None
    delimiter = args.payload_delimiter.encode().decode("unicode_escape").encode()
    payloads = [p for p in text.split(delimiter) if p]
    print(f"Number of messages read: {len(payloads)}")
    if not payloads:
        raise ToolError("File does not contain any payloads")
    return payloads


class Results:
    """What the final line reports; filled from each window at report time."""

    def __init__(self) -> None:
        self.histo = histo
        self.hist = histo.new_histogram()
        self.count = 0            # records acknowledged (after the warm-up)
        self.samples = 0          # of which latency samples
        self.total_ms = 0.0
        self.max_ms = 0.0
        self.bytes = 0

    def fold(self, count: int, lat_ms: Any, nbytes: int) -> None:
        import numpy as np

        self.count += count
        self.bytes += nbytes
        if len(lat_ms) == 0:
            return
        self.samples += len(lat_ms)
        self.total_ms += float(lat_ms.sum())
        self.max_ms = max(self.max_ms, float(lat_ms.max()))
        self.histo.record_many(self.hist, np.rint(lat_ms * 1000).astype(np.int64))

    def avg_ms(self) -> float:
        return self.total_ms / self.samples if self.samples else 0.0

    def percentile_ms(self, pct: float) -> int:
        if self.samples == 0:
            return 0
        return int(self.hist.get_value_at_percentile(pct) // 1000)


class Run:
    """One producer-perf-test run: the send loop, reports, final figures.

    Records acknowledged are counted as sent minus still queued in the client
    (no per-record work).  Latency comes from delivery callbacks: on every
    record of a ``--throughput`` schedule, on every SAMPLE_EVERY-th record of
    an unthrottled run, where a Python callback per record would halve what
    the client can send (Kafka's tool also keeps only a sample for its
    percentiles)."""

    def __init__(self, args: argparse.Namespace, producer: Any, payloads: list[bytes]) -> None:
        self.args = args
        self.producer = producer
        self.payloads = payloads
        self.mean_size = sum(map(len, payloads)) / len(payloads)
        self.fixed_size = len(payloads[0]) if len({len(p) for p in payloads}) == 1 else None
        self.lat = array("d")     # latency samples (ms) since the last report
        self.results = Results()
        self.warmup = max(args.warmup_records or 0, 0)
        self.sent = 0             # records handed to the client
        self.acked = 0            # records acknowledged at the last report
        self.window_start = time.monotonic()
        self.measure_start = self.window_start
        self.errors = 0
        self.first_error = ""

    # -- callbacks: as little as possible per record -------------------------

    def _callbacks(self) -> tuple[Any, Any]:
        append = self.lat.append
        mono_ns = time.monotonic_ns

        def failed(err: Any) -> None:
            self.errors += 1
            if not self.first_error:
                self.first_error = err.str()

        def on_ack(err: Any, msg: Any) -> None:
            # Unthrottled: intended send time == produce() time, so librdkafka's
            # own produce()-to-ack time is the latency.
            if err is None:
                append(msg.latency() * 1000.0)
            else:
                failed(err)

        def on_ack_scheduled(intended_ns: int, err: Any, msg: Any) -> None:
            if err is None:
                append((mono_ns() - intended_ns) / 1e6)
            else:
                failed(err)

        return on_ack, on_ack_scheduled

    # -- reports ------------------------------------------------------------------

    def report(self, now: float, final: bool = False) -> None:
        """Print the window line (Kafka's format) and fold the window into the totals."""
        import numpy as np

        lat = np.frombuffer(self.lat[:].tobytes(), dtype=np.float64)  # a copy: lat grows
        del self.lat[:]
        acked = self.sent - len(self.producer) - self.errors
        n = max(acked - self.acked, 0)
        nbytes = int(n * self.mean_size)
        elapsed = max(now - self.window_start, 1e-9)
        if n and not final:
            avg = lat.mean() if len(lat) else 0.0
            top = lat.max() if len(lat) else 0.0
            print(f"{n} records sent, {n / elapsed:.1f} records/sec "
                  f"({nbytes / elapsed / MB:.2f} MB/sec), {avg:.1f} ms avg latency, "
                  f"{top:.1f} ms max latency.", flush=True)
        # Warm-up records are in the window lines, not in the totals.
        skip = min(max(self.warmup - self.acked, 0), n)
        self.acked += n
        if skip and n:
            if skip < n:
                # The warm-up ended inside this window: interpolate when.
                self.measure_start = self.window_start + elapsed * skip / n
            lat = lat[int(round(len(lat) * skip / n)):]
            nbytes -= int(nbytes * skip / n)
            n -= skip
        self.window_start = now
        self.results.fold(n, lat, nbytes)

    # -- the send loop ----------------------------------------------------------------

    def send(self) -> dict[str, Any]:
        args = self.args
        producer = self.producer
        rate = args.throughput if args.throughput and args.throughput > 0 else 0
        on_ack, on_ack_scheduled = self._callbacks()
        mono = time.monotonic
        report_ns = int(args.reporting_interval * 1e6)
        cpu0, thread0 = time.process_time(), time.thread_time()
        txn_ns = int(args.transaction_duration_ms * 1e6)
        if txn_ns > 0:
            producer.begin_transaction()
        start_ns = time.monotonic_ns()  # the same clock as time.monotonic()
        start = start_ns / 1e9
        self.window_start = self.measure_start = start
        next_report = [start_ns + report_ns]
        next_commit = [start_ns + txn_ns if txn_ns > 0 else sys.maxsize]

        def tick(now_ns: int, sent: int) -> int:
            if now_ns >= next_commit[0]:  # the open transaction is --transaction-duration-ms old
                producer.commit_transaction(TRANSACTION_TIMEOUT_S)
                producer.begin_transaction()
                now_ns = time.monotonic_ns()
                next_commit[0] = now_ns + txn_ns
            if now_ns >= next_report[0]:
                self.sent = sent
                self.report(now_ns / 1e9)
                next_report[0] = now_ns + report_ns
            return min(next_report[0], next_commit[0])

        self.sent = send_loop(producer, args.topic, self.payloads, start_ns=start_ns,
                              total=args.num_records, rate=rate, on_sample=on_ack,
                              on_scheduled=on_ack_scheduled, sample_every=SAMPLE_EVERY,
                              poll_every=POLL_EVERY, tick=tick,
                              next_tick_ns=min(next_report[0], next_commit[0]))
        if txn_ns > 0:
            producer.commit_transaction(TRANSACTION_TIMEOUT_S)  # delivers what is queued
        report_s = report_ns / 1e9
        sent_end = mono()
        deadline = sent_end + FLUSH_TIMEOUT_S
        next_report_s = next_report[0] / 1e9
        while len(producer) and mono() < deadline:
            producer.poll(0.05)
            now = mono()
            if now >= next_report_s:
                self.report(now)
                next_report_s = now + report_s
        end = mono()
        undelivered = len(producer)
        cpu_s, thread_s = time.process_time() - cpu0, time.thread_time() - thread0
        self.report(end, final=True)
        return self._figures(start, end, sent_end, cpu_s, thread_s, undelivered)

    def _figures(self, start: float, end: float, sent_end: float, cpu_s: float,
                 thread_s: float, undelivered: int) -> dict[str, Any]:
        r = self.results
        begin = self.measure_start if self.warmup else start
        elapsed = max(end - begin, 1e-9)
        return {
            "records": r.count,
            "records_per_sec": r.count / elapsed,
            "mb_per_sec": r.bytes / elapsed / MB,
            "avg_latency_ms": r.avg_ms(),
            "max_latency_ms": r.max_ms,
            "p50_ms": r.percentile_ms(50), "p95_ms": r.percentile_ms(95),
            "p99_ms": r.percentile_ms(99), "p999_ms": r.percentile_ms(99.9),
            "latency_samples": r.samples,
            "elapsed_s": elapsed,
            "send_s": sent_end - start,
            "warmup_records": self.warmup,
            "errors": self.errors + undelivered,
            "first_error": self.first_error,
            "cpu_s": cpu_s,
            "send_thread_cpu_s": thread_s,
            "wall_s": end - start,
            "record_size": self.fixed_size,
            "throughput_target": self.args.throughput,
        }


def producer_conf(args: argparse.Namespace) -> dict[str, Any]:
    props = parse_props(args.producer_props, "producer property")
    defaults: dict[str, Any] = {"client.id": "perf-producer-client"}
    if args.print_metrics:
        defaults["statistics.interval.ms"] = 1000
    conf = client_config(args.bootstrap_server, files=[args.producer_config], props=props,
                         defaults=defaults)
    if args.transaction_duration_ms > 0:  # Kafka: transactions only with a positive duration
        conf["transactional.id"] = args.transactional_id
    return conf


def print_metrics(stats_json: str | None, topic: str) -> None:
    """Kafka's ``--print-metrics`` table, from librdkafka's last statistics."""
    if not stats_json:
        print("\n(no client statistics were received)")
        return
    stats = json.loads(stats_json)
    client = stats.get("client_id", "perf-producer-client")
    tags = f"{{client-id={client}}}"
    brokers = [b for b in stats.get("brokers", {}).values() if b.get("nodeid", -1) >= 0]
    t = stats.get("topics", {}).get(topic, {})
    values = {
        f"producer-metrics:record-send-total:{tags}": stats.get("txmsgs", 0),
        f"producer-metrics:outgoing-byte-total:{tags}": stats.get("tx_bytes", 0),
        f"producer-metrics:incoming-byte-total:{tags}": stats.get("rx_bytes", 0),
        f"producer-metrics:request-total:{tags}": stats.get("tx", 0),
        f"producer-metrics:response-total:{tags}": stats.get("rx", 0),
        f"producer-metrics:record-error-total:{tags}": sum(
            b.get("txerrs", 0) for b in brokers),
        f"producer-metrics:record-retry-total:{tags}": sum(
            b.get("txretries", 0) for b in brokers),
        f"producer-metrics:batch-size-avg:{tags}": t.get("batchsize", {}).get("avg", 0),
        f"producer-metrics:batch-size-max:{tags}": t.get("batchsize", {}).get("max", 0),
        f"producer-metrics:records-per-request-avg:{tags}": t.get("batchcnt", {}).get("avg", 0),
        f"producer-metrics:request-latency-avg:{tags}": (
            sum(b.get("rtt", {}).get("avg", 0) for b in brokers) / max(len(brokers), 1) / 1000),
        f"producer-metrics:request-latency-max:{tags}": (
            max((b.get("rtt", {}).get("max", 0) for b in brokers), default=0) / 1000),
        f"producer-metrics:connection-count:{tags}": len(brokers),
    }
    print_metrics_table(values)


@run_tool
def run(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException, Producer

    if (args.record_size is None) == (args.payload_file is None):
        raise ToolError("Either --record-size or --payload-file must be specified but not both.")
    if not args.producer_props and not args.producer_config and not args.bootstrap_server:
        raise ToolError("Either --producer-props or --producer.config must be specified.")
    if args.num_records < 0:
        raise ToolError("--num-records must not be negative")
    payloads = make_payloads(args)
    conf = producer_conf(args)
    holder: dict[str, str] = {}
    if args.print_metrics:
        conf["stats_cb"] = lambda s: holder.__setitem__("stats", s)
    try:
        producer = new_client(Producer, conf)
        # Connect and fetch metadata before the clock starts: setup, not latency.
        meta = check_reachable(producer, METADATA_TIMEOUT_S, args.topic)
        if args.transaction_duration_ms > 0:
            producer.init_transactions(TRANSACTION_TIMEOUT_S)
    except KafkaException as exc:
        raise ToolError(error_text(exc)) from None
    found = meta.topics.get(args.topic)
    if found is None or found.error is not None:
        reason = found.error.str() if found is not None and found.error else "unknown topic"
        raise ToolError(f"Topic {args.topic} not present in metadata: {reason}")
    run_ = Run(args, producer, payloads)
    figures = run_.send()
    print(f"{figures['records']} records sent, {figures['records_per_sec']:f} records/sec "
          f"({figures['mb_per_sec']:.2f} MB/sec), {figures['avg_latency_ms']:.2f} ms avg "
          f"latency, {figures['max_latency_ms']:.2f} ms max latency, {figures['p50_ms']} ms "
          f"50th, {figures['p95_ms']} ms 95th, {figures['p99_ms']} ms 99th, "
          f"{figures['p999_ms']} ms 99.9th.", flush=True)
    busy = figures["send_thread_cpu_s"] / max(figures["wall_s"], 1e-9)
    figures["send_thread_busy"] = busy
    figures["client_bound"] = busy >= CLIENT_BOUND_SHARE
    if figures["client_bound"]:
        print(f"NOTE: the send loop kept its thread {busy:.0%} busy (process CPU "
              f"{figures['cpu_s']:.1f} s over {figures['wall_s']:.1f} s wall): the result is "
              "bound by this client, not the broker; run more producer processes to load "
              "the broker harder.", file=sys.stderr)
    if args.print_metrics:
        producer.poll(1.1)  # one more statistics window, covering the end of the run
        print_metrics(holder.get("stats"), args.topic)
    if args.json:
        try:
            Path(args.json).write_text(json.dumps(
                {"tool": "producer-perf-test", "topic": args.topic, **figures}, indent=2) + "\n")
        except OSError as exc:
            raise ToolError(f"cannot write {args.json}: {exc.strerror}") from None
    if figures["errors"]:
        print(f"{figures['errors']} records failed: {figures['first_error'] or 'not delivered'}",
              file=sys.stderr)
        return 1
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "producer-perf-test", help="measure produce throughput and latency "
        "(kafka-producer-perf-test)",
        description="This tool is used to verify the producer performance.")
    p.add_argument("--topic", required=True, metavar="TOPIC", help="produce messages to this "
                   "topic")
    p.add_argument("--num-records", required=True, type=int, metavar="NUM-RECORDS",
                   help="number of messages to produce")
    p.add_argument("--record-size", type=int, metavar="RECORD-SIZE",
                   help="message size in bytes (or use --payload-file)")
    p.add_argument("--payload-file", metavar="PAYLOAD-FILE",
                   help="file to read the message payloads from")
    p.add_argument("--payload-delimiter", default="\\n", metavar="PAYLOAD-DELIMITER",
                   help="delimiter between payloads in --payload-file (default \\n)")
    p.add_argument("--throughput", required=True, type=float, metavar="THROUGHPUT",
                   help="target messages/sec (an open-loop schedule); -1: no limit")
    p.add_argument("--producer-props", nargs="+", metavar="PROP-NAME=PROP-VALUE",
                   help="producer properties such as bootstrap.servers, acks, linger.ms")
    p.add_argument("--producer.config", dest="producer_config", metavar="CONFIG-FILE",
                   help="producer config properties file")
    p.add_argument("--bootstrap-server", metavar="BOOTSTRAP-SERVER",
                   help="shortcut for --producer-props bootstrap.servers=...")
    p.add_argument("--print-metrics", action="store_true",
                   help="print the producer's metrics at the end")
    p.add_argument("--warmup-records", type=int, default=0, metavar="WARMUP-RECORDS",
                   help="records sent first and left out of the final figures")
    p.add_argument("--transactional-id", default=DEFAULT_TRANSACTIONAL_ID,
                   metavar="TRANSACTIONAL-ID",
                   help="the transactional id, when --transaction-duration-ms is positive "
                        f"(default {DEFAULT_TRANSACTIONAL_ID})")
    p.add_argument("--transaction-duration-ms", type=int, default=0,
                   metavar="TRANSACTION-DURATION",
                   help="commit each transaction once it is this old; transactions are only "
                        "used when positive (default 0)")
    p.add_argument("--json", metavar="FILE", help="also write the final figures as JSON")
    # Kafka's tool has the 5 s interval fixed; settable here for tests.
    p.add_argument("--reporting-interval", type=int, default=REPORT_INTERVAL_MS,
                   help=argparse.SUPPRESS)
    p.set_defaults(func=run)
