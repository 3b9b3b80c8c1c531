"""``pylog console-consumer``: Kafka's ``kafka-console-consumer.sh`` for pylog.

Prints each record's value on its own line; Kafka's formatter properties add
columns in Kafka's order, joined by ``key.separator`` (a tab unless set)::

    --property print.timestamp=true   CreateTime:1700000000000
    --property print.partition=true   Partition:0
    --property print.offset=true      Offset:42
    --property print.headers=true     h1:v1,h2:v2   (or NO_HEADERS)
    --property print.key=true         the key (null when there is none)

At the end ``Processed a total of N messages`` goes to stderr, as in Kafka.

Without ``--group`` the consumer assigns itself every partition (or the one
``--partition`` names) and needs no group coordinator; with ``--group`` it
subscribes and commits like Kafka's.  ``--timeout-ms`` ends the run when no
record arrived for that long (exit status 0, as Kafka's).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from pylog.tools.common import (
    ToolError,
    add_bootstrap,
    check_reachable,
    client_config,
    error_text,
    new_client,
    parse_props,
    run_tool,
)

METADATA_TIMEOUT_S = 30.0
BATCH = 500
TOPIC_WAIT_S = 0.2  # between metadata requests while the topic does not exist
# librdkafka's default backs a partition's fetcher off for a second once its
# queue has data; at console rates that reads as a stall.
CONSUMER_DEFAULTS: dict[str, Any] = {"fetch.queue.backoff.ms": 10}


def _flag(props: dict[str, str], name: str, default: bool = False) -> bool:
    return props.get(name, "true" if default else "false").strip().lower() == "true"


class Formatter:
    """Kafka's DefaultMessageFormatter: columns in Kafka's order, each followed by
    key.separator when another column follows, the last by line.separator.
    Separators are the property strings verbatim in UTF-8, as Kafka's."""

    def __init__(self, props: dict[str, str]) -> None:
        self.timestamp = _flag(props, "print.timestamp")
        self.partition = _flag(props, "print.partition")
        self.offset = _flag(props, "print.offset")
        self.headers = _flag(props, "print.headers")
        self.key = _flag(props, "print.key")
        self.value = _flag(props, "print.value", default=True)
        self.sep = props.get("key.separator", "\t").encode()
        self.line_sep = props.get("line.separator", "\n").encode()
        self.headers_sep = props.get("headers.separator", ",").encode()
        self.headers_key_sep = props.get("headers.key.separator", ":").encode()
        null = props.get("null.literal", "null")
        self.null = null.encode()
        # Fast path: the common case (value only) is one join per record.
        self.value_only = self.value and not (self.timestamp or self.partition or
                                              self.offset or self.headers or self.key)

    def format(self, msg: Any) -> bytes:
        value = msg.value()
        if self.value_only:
            return (self.null if value is None else value) + self.line_sep
        cols: list[bytes] = []
        if self.timestamp:
            kind, ts = msg.timestamp()
            cols.append(b"NO_TIMESTAMP" if kind == 0 else
                        (b"CreateTime:" if kind == 1 else b"LogAppendTime:") + str(ts).encode())
        if self.partition:
            cols.append(b"Partition:%d" % msg.partition())
        if self.offset:
            cols.append(b"Offset:%d" % msg.offset())
        if self.headers:
            headers = msg.headers()
            if not headers:
                cols.append(b"NO_HEADERS")
            else:
                cols.append(self.headers_sep.join(
                    k.encode() + self.headers_key_sep + (self.null if v is None else v)
                    for k, v in headers))
        if self.key:
            key = msg.key()
            cols.append(self.null if key is None else key)
        if self.value:
            cols.append(self.null if value is None else value)
        return self.sep.join(cols) + self.line_sep if cols else b""


def _check_args(args: argparse.Namespace) -> None:
    if args.offset is not None and args.partition is None:
        raise ToolError("The partition is required when offset is specified.")
    if args.offset is not None and args.from_beginning:
        raise ToolError("Options from-beginning and offset cannot be specified together.")
    if args.offset is not None and args.offset not in ("earliest", "latest"):
        try:
            if int(args.offset) < 0:
                raise ValueError
        except ValueError:
            raise ToolError("The provided offset value is incorrect. Valid values are "
                            "'earliest', 'latest', or a non-negative long.") from None
    if args.max_messages is not None and args.max_messages < 0:
        raise ToolError("--max-messages must not be negative")


def _start_offset(args: argparse.Namespace) -> int:
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END

    if args.offset == "earliest" or (args.offset is None and args.from_beginning):
        return OFFSET_BEGINNING
    if args.offset is None or args.offset == "latest":
        return OFFSET_END
    return int(args.offset)


@run_tool
def run(args: argparse.Namespace) -> int:
    from confluent_kafka import Consumer, TopicPartition

    _check_args(args)
    formatter = Formatter(parse_props(args.property, "property"))
    props = parse_props(args.consumer_property, "consumer property")
    defaults = dict(CONSUMER_DEFAULTS, **{"isolation.level": "read_uncommitted",
                                          "client.id": "console-consumer",
                                          "allow.auto.create.topics": True})
    conf = client_config(args.bootstrap_server, files=[args.consumer_config], props=props,
                         defaults=defaults)
    if args.isolation_level:
        conf["isolation.level"] = args.isolation_level
    if args.group:
        conf["group.id"] = args.group
    group = conf.get("group.id")
    if group:
        conf.setdefault("auto.offset.reset",
                        "earliest" if args.from_beginning else "latest")
    else:
        conf["enable.auto.commit"] = False
        conf.setdefault("group.id", "console-consumer-assign")  # librdkafka wants one
    consumer = new_client(Consumer, conf)
    try:
        return _consume(args, consumer, formatter, bool(group), TopicPartition)
    finally:
        consumer.close()


def _wait_for_topic(consumer: Any, topic: str, timeout_s: float | None) -> Any:
    """The topic's metadata once it exists, or None when ``timeout_s`` ran out.

    Kafka's consumer subscribes to a topic that does not exist yet and waits
    for it (its metadata requests create it where the broker auto-creates
    topics: allow.auto.create.topics, on by default here as in Java), so the
    consumer can be started before the producer."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        meta = check_reachable(consumer, METADATA_TIMEOUT_S, topic)
        found = meta.topics.get(topic)
        if found is not None and found.error is None and found.partitions:
            return found
        if found is not None and found.error is not None and found.error.code() not in (
                found.error.UNKNOWN_TOPIC_OR_PART, found.error.LEADER_NOT_AVAILABLE):
            raise ToolError(f"Topic '{topic}': {found.error.str()}")  # e.g. an invalid name
        if deadline is not None and time.monotonic() >= deadline:
            return None
        time.sleep(TOPIC_WAIT_S)


def _consume(args: argparse.Namespace, consumer: Any, formatter: Formatter, subscribe: bool,
             topic_partition: Any) -> int:
    from confluent_kafka import KafkaException

    topic = args.topic
    timeout_s = args.timeout_ms / 1000 if args.timeout_ms is not None else None
    try:
        found = _wait_for_topic(consumer, topic, timeout_s)
    except KafkaException as exc:
        raise ToolError(error_text(exc)) from None
    except KeyboardInterrupt:
        found = None
    if found is None:  # --timeout-ms or a signal before the topic existed
        print("Processed a total of 0 messages", file=sys.stderr, flush=True)
        return 0
    partitions = sorted(found.partitions)
    if args.partition is not None:
        if args.partition not in found.partitions:
            raise ToolError(f"Partition {args.partition} of topic '{topic}' does not exist")
        partitions = [args.partition]
    start = _start_offset(args)
    assigned = [False]
    if subscribe and args.partition is None:
        # --timeout-ms counts from the assignment: joining a group can take
        # group.initial.rebalance.delay.ms (3 s) on its own.
        consumer.subscribe([topic], on_assign=lambda c, parts: assigned.__setitem__(0, True))
    else:
        assigned[0] = True
        consumer.assign([topic_partition(topic, p, start) for p in partitions])

    out = sys.stdout.buffer
    write = out.write
    fmt = formatter.format
    limit = args.max_messages
    count = 0
    last = time.monotonic()
    try:
        while limit is None or count < limit:
            want = BATCH if limit is None else min(BATCH, limit - count)
            wait = 0.5 if timeout_s is None else max(min(0.5, timeout_s), 0.001)
            batch = consumer.consume(num_messages=want, timeout=wait)
            now = time.monotonic()
            if not batch:
                if not assigned[0]:
                    last = now
                elif timeout_s is not None and now - last >= timeout_s:
                    break
                continue
            last = now
            for msg in batch:
                err = msg.error()
                if err is not None:
                    if err.code() == err._PARTITION_EOF:
                        continue
                    if args.skip_message_on_error:
                        continue
                    raise ToolError(f"Error processing message, terminating consumer "
                                    f"process: {err.str()}")
                # Counted before it is written: a SIGTERM (raised between any
                # two bytecodes) must not leave a printed message uncounted.
                count += 1
                write(fmt(msg))
            out.flush()
    except KeyboardInterrupt:
        pass
    finally:
        try:
            out.flush()
        except BrokenPipeError:
            pass
        print(f"Processed a total of {count} messages", file=sys.stderr, flush=True)
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "console-consumer", help="print a topic's records (kafka-console-consumer)",
        description="Consume records from a topic and print them to standard output.")
    add_bootstrap(p, command_config=False)
    p.add_argument("--topic", required=True, metavar="topic", help="the topic to consume on")
    p.add_argument("--group", metavar="consumer group id",
                   help="the consumer group id (subscribe and commit as a group member)")
    p.add_argument("--partition", type=int, metavar="Integer: partition",
                   help="the partition to consume from (all partitions when not given)")
    p.add_argument("--offset", metavar="consume offset",
                   help="the offset to start from: a non-negative number, 'earliest' or "
                        "'latest' (default latest; needs --partition)")
    p.add_argument("--from-beginning", action="store_true",
                   help="start with the earliest message present instead of the latest")
    p.add_argument("--max-messages", type=int, metavar="num_messages",
                   help="the maximum number of messages to consume before exiting")
    p.add_argument("--timeout-ms", type=int, metavar="timeout_ms",
                   help="exit when no message was available for this long")
    p.add_argument("--isolation-level", choices=("read_committed", "read_uncommitted"),
                   help="read_committed skips records of open and aborted transactions "
                        "(default read_uncommitted)")
    p.add_argument("--property", action="append", metavar="prop",
                   help="formatter properties: print.timestamp, print.key, print.offset, "
                        "print.partition, print.headers, print.value, key.separator, "
                        "line.separator, headers.separator, headers.key.separator, "
                        "null.literal")
    p.add_argument("--consumer-property", action="append", metavar="consumer_prop",
                   help="a consumer property in the form key=value")
    p.add_argument("--consumer.config", dest="consumer_config", metavar="config file",
                   help="consumer config properties file (--consumer-property wins)")
    p.add_argument("--skip-message-on-error", action="store_true",
                   help="skip a message that fails instead of stopping")
    p.add_argument("--formatter", metavar="class",
                   help="accepted for compatibility; the default formatter is used")
    p.set_defaults(func=run)
