"""``pylog consumer-perf-test``: Kafka's ``kafka-consumer-perf-test.sh`` for pylog.

Prints Kafka 3.6's CSV header and summary row::

    start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec,
    rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec

(``--show-detailed-stats``: one ``time, threadId, ...`` row per
``--reporting-interval`` instead of the summary, as Kafka).  Like Kafka, the run
ends after ``--messages`` records or when none arrived for ``--timeout`` ms,
and the times include that last wait.

Without ``--group`` the consumer assigns itself every partition, so it needs no
group coordinator (rebalance.time.ms is then 0); with ``--group`` it
subscribes, and rebalance.time.ms is the time until its partitions were
assigned.  Bytes are value bytes (Kafka counts key + value).

``--print-metrics`` ends with Kafka's metrics table, from the client's own
statistics (librdkafka's names mapped to the Java consumer's metrics).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from typing import Any

from pylog.tools.common import (
    ToolError,
    add_bootstrap,
    bootstrap_of,
    check_reachable,
    client_config,
    error_text,
    new_client,
    parse_props,
    print_metrics_table,
    run_tool,
)

HEADER_BASE = "data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec"
HEADER_EXTRA = ", rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
BATCH = 10_000
MB = 1024 * 1024
METADATA_TIMEOUT_S = 30.0
STATS_INTERVAL_MS = 1000


def java_date_format(pattern: str) -> Any:
    """A formatter for Kafka's ``--date-format`` (Java SimpleDateFormat tokens)."""
    tokens = (("yyyy", "%Y"), ("MM", "%m"), ("dd", "%d"), ("HH", "%H"), ("mm", "%M"),
              ("ss", "%S"))
    strf = pattern
    for java, py in tokens:
        strf = strf.replace(java, py)

    def fmt(ms: float) -> str:
        stamp = dt.datetime.fromtimestamp(ms / 1000)
        return stamp.strftime(strf.replace("SSS", f"{int(ms) % 1000:03d}"))

    return fmt


class Stats:
    def __init__(self) -> None:
        self.messages = 0
        self.bytes = 0
        self.join_ms = 0.0
        self.last_messages = 0
        self.last_bytes = 0
        self.last_join_ms = 0.0


def _row_detailed(fmt: Any, s: Stats, start_ms: float, end_ms: float) -> str:
    elapsed = max(end_ms - start_ms, 1e-9)
    mb = s.bytes / MB
    interval_mb = (s.bytes - s.last_bytes) / MB
    interval_msgs = s.messages - s.last_messages
    join = s.join_ms - s.last_join_ms
    fetch = max(elapsed - join, 1e-9)
    return (f"{fmt(end_ms)}, 0, {mb:.4f}, {1000.0 * interval_mb / elapsed:.4f}, {s.messages}, "
            f"{1000.0 * interval_msgs / elapsed:.4f}, {join:.0f}, {fetch:.0f}, "
            f"{1000.0 * interval_mb / fetch:.4f}, {1000.0 * interval_msgs / fetch:.4f}")


def _row_summary(fmt: Any, s: Stats, start_ms: float, end_ms: float) -> str:
    elapsed_s = max(end_ms - start_ms, 1e-9) / 1000
    fetch_ms = max(end_ms - start_ms - s.join_ms, 1e-9)
    mb = s.bytes / MB
    return (f"{fmt(start_ms)}, {fmt(end_ms)}, {mb:.4f}, {mb / elapsed_s:.4f}, {s.messages}, "
            f"{s.messages / elapsed_s:.4f}, {s.join_ms:.0f}, {fetch_ms:.0f}, "
            f"{mb / (fetch_ms / 1000):.4f}, {s.messages / (fetch_ms / 1000):.4f}")


@run_tool
def run(args: argparse.Namespace) -> int:
    from confluent_kafka import (
        OFFSET_BEGINNING,
        OFFSET_END,
        Consumer,
        KafkaException,
        Message,
        TopicPartition,
    )

    if args.messages is None or args.messages < 0:
        raise ToolError('Missing required argument "[messages]"')
    fmt = java_date_format(args.date_format)
    defaults: dict[str, Any] = {
        "fetch.queue.backoff.ms": 10,  # librdkafka's 1 s default stalls a fast reader
        "max.partition.fetch.bytes": args.fetch_size,
        "enable.auto.commit": bool(args.group),
        "auto.offset.reset": "latest" if args.from_latest else "earliest",
        "client.id": "perf-consumer-client",
    }
    if args.socket_buffer_size:
        defaults["socket.receive.buffer.bytes"] = args.socket_buffer_size
    conf = client_config(bootstrap_of(args), files=[args.consumer_config],
                         props=parse_props(args.consumer_property, "consumer property"),
                         defaults=defaults)
    conf["group.id"] = args.group or conf.get("group.id") or "perf-consumer-assign"
    holder: dict[str, str] = {}
    if args.print_metrics:
        conf["statistics.interval.ms"] = STATS_INTERVAL_MS
        conf["stats_cb"] = lambda s: holder.__setitem__("stats", s)
    try:
        consumer = new_client(Consumer, conf)
        meta = check_reachable(consumer, METADATA_TIMEOUT_S, args.topic)
    except KafkaException as exc:
        raise ToolError(error_text(exc)) from None
    found = meta.topics.get(args.topic)
    if found is None or found.error is not None:
        raise ToolError(f"Topic '{args.topic}' does not exist")

    stats = Stats()
    assigned_at: list[float] = []
    start_ms = time.time() * 1000
    if args.group:
        consumer.subscribe([args.topic],
                           on_assign=lambda c, parts: assigned_at.append(time.time() * 1000))
    else:
        start = OFFSET_END if args.from_latest else OFFSET_BEGINNING
        consumer.assign([TopicPartition(args.topic, p, start) for p in sorted(found.partitions)])

    if not args.hide_header:
        if args.show_detailed_stats:
            print("time, threadId, " + HEADER_BASE + HEADER_EXTRA)
        else:
            print("start.time, end.time, " + HEADER_BASE + HEADER_EXTRA)

    limit = args.messages
    timeout_s = args.timeout / 1000
    interval_ms = args.reporting_interval
    error_of = Message.error
    last_consumed = time.monotonic()
    last_report_ms = start_ms
    timed_out = False
    try:
        while stats.messages < limit:
            batch = consumer.consume(num_messages=min(BATCH, limit - stats.messages),
                                     timeout=0.1)
            now = time.monotonic()
            if batch:
                if any(map(error_of, batch)):
                    batch = [m for m in batch if _usable(m)]
                stats.messages += len(batch)
                stats.bytes += sum(map(len, batch))
                last_consumed = now
            elif now - last_consumed > timeout_s:
                timed_out = True
                break
            if assigned_at and not stats.join_ms:
                stats.join_ms = assigned_at[0] - start_ms
            if args.show_detailed_stats:
                now_ms = time.time() * 1000
                if now_ms - last_report_ms >= interval_ms:
                    print(_row_detailed(fmt, stats, last_report_ms, now_ms), flush=True)
                    last_report_ms = now_ms
                    stats.last_messages, stats.last_bytes = stats.messages, stats.bytes
                    stats.last_join_ms = stats.join_ms
    except KeyboardInterrupt:
        pass
    end_ms = time.time() * 1000
    if args.print_metrics:
        _last_statistics(consumer)
    consumer.close()
    if timed_out:
        print(f"WARNING: Exiting before consuming the expected number of messages: timeout "
              f"({args.timeout} ms) exceeded. You can use the --timeout option to increase "
              "the timeout.", file=sys.stderr)
    if not args.show_detailed_stats:
        print(_row_summary(fmt, stats, start_ms, end_ms))
    if args.print_metrics:
        print_metrics(holder.get("stats"), str(conf.get("client.id", "")), stats.messages)
    return 0


def print_metrics(stats_json: str | None, client_id: str, records: int) -> None:
    """Kafka's ``--print-metrics`` table, from librdkafka's last statistics;
    ``records`` consumed as the tool counted them (librdkafka's count takes in
    transaction markers, which no poll returns)."""
    if not stats_json:
        print("\n(no client statistics were received)")
        return
    stats = json.loads(stats_json)
    tags = f"{{client-id={stats.get('client_id', client_id)}}}"
    brokers = [b for b in stats.get("brokers", {}).values() if b.get("nodeid", -1) >= 0]
    lags = [p.get("consumer_lag", -1) for t in stats.get("topics", {}).values()
            for p in t.get("partitions", {}).values()]
    fetch = "consumer-fetch-manager-metrics"
    values = {
        f"{fetch}:records-consumed-total:{tags}": records,
        f"{fetch}:bytes-consumed-total:{tags}": stats.get("rxmsg_bytes", 0),
        f"{fetch}:fetch-total:{tags}": sum(b.get("req", {}).get("Fetch", 0) for b in brokers),
        f"{fetch}:records-lag-max:{tags}": max([lag for lag in lags if lag >= 0], default=0),
        f"consumer-metrics:request-total:{tags}": stats.get("tx", 0),
        f"consumer-metrics:response-total:{tags}": stats.get("rx", 0),
        f"consumer-metrics:outgoing-byte-total:{tags}": stats.get("tx_bytes", 0),
        f"consumer-metrics:incoming-byte-total:{tags}": stats.get("rx_bytes", 0),
        f"consumer-metrics:request-latency-avg:{tags}": (
            sum(b.get("rtt", {}).get("avg", 0) for b in brokers) / max(len(brokers), 1) / 1000),
        f"consumer-metrics:request-latency-max:{tags}": (
            max((b.get("rtt", {}).get("max", 0) for b in brokers), default=0) / 1000),
        f"consumer-metrics:connection-count:{tags}": len(brokers),
    }
    group = stats.get("cgrp")
    if group:
        values[f"consumer-coordinator-metrics:rebalance-total:{tags}"] = group.get(
            "rebalance_cnt", 0)
        values[f"consumer-coordinator-metrics:assigned-partitions:{tags}"] = group.get(
            "assignment_size", 0)
    print_metrics_table(values)


def _last_statistics(consumer: Any) -> None:
    """Serve one more statistics window (paused: no record is fetched meanwhile),
    so the table covers the end of the run."""
    assignment = consumer.assignment()
    if assignment:
        consumer.pause(assignment)
    consumer.consume(num_messages=1, timeout=STATS_INTERVAL_MS / 1000 + 0.1)


def _usable(msg: Any) -> bool:
    err = msg.error()
    if err is None:
        return True
    if err.code() == err._PARTITION_EOF:
        return False
    raise ToolError(f"Error while consuming: {err.str()}")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "consumer-perf-test", help="measure consume throughput (kafka-consumer-perf-test)",
        description="This tool helps in performance test for the full zookeeper consumer")
    add_bootstrap(p, command_config=False, broker_list=True)
    p.add_argument("--topic", required=True, metavar="topic", help="REQUIRED: the topic to "
                   "consume from")
    p.add_argument("--messages", required=True, type=int, metavar="count",
                   help="REQUIRED: the number of messages to consume")
    p.add_argument("--group", metavar="gid",
                   help="the group id to consume on (subscribe); without it the consumer "
                        "assigns itself every partition")
    p.add_argument("--fetch-size", type=int, default=1024 * 1024, metavar="size",
                   help="the amount of data to fetch in a single request (default 1048576)")
    p.add_argument("--from-latest", action="store_true",
                   help="start from the latest offset instead of the earliest")
    p.add_argument("--socket-buffer-size", type=int, metavar="size",
                   help="the size of the tcp RECV size")
    p.add_argument("--consumer.config", dest="consumer_config", metavar="config file",
                   help="consumer config properties file")
    p.add_argument("--consumer-property", action="append", metavar="prop",
                   help="a consumer property in the form key=value (pylog extension)")
    p.add_argument("--timeout", type=int, default=10000, metavar="milliseconds",
                   help="the maximum allowed time in milliseconds between returned records "
                        "(default 10000)")
    p.add_argument("--show-detailed-stats", action="store_true",
                   help="if set, stats are reported for each reporting interval")
    p.add_argument("--reporting-interval", type=int, default=5000, metavar="interval_ms",
                   help="interval in milliseconds at which to print progress info "
                        "(default 5000)")
    p.add_argument("--hide-header", action="store_true",
                   help="if set, skips printing the header for the stats")
    p.add_argument("--date-format", default="yyyy-MM-dd HH:mm:ss:SSS", metavar="date format",
                   help="the date format to use for formatting the time field")
    p.add_argument("--print-metrics", action="store_true",
                   help="print the consumer's metrics at the end")
    # Kafka 3.6 itself documents these two as "DEPRECATED AND IGNORED".
    p.add_argument("--threads", type=int, metavar="count",
                   help="deprecated and ignored, as in Kafka")
    p.add_argument("--num-fetch-threads", type=int, metavar="count",
                   help="deprecated and ignored, as in Kafka")
    p.set_defaults(func=run)
