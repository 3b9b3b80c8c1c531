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

``--include REGEX`` (``--whitelist``, its deprecated alias) consumes every topic
whose whole name matches, picking up matching topics created later, instead of
one ``--topic``.  ``--key-deserializer``/``--value-deserializer`` (or the
``key.deserializer``/``value.deserializer``/``headers.deserializer`` formatter
properties) take Kafka's String, ByteArray, Bytes, ByteBuffer, Integer, Long,
Short, Float, Double, UUID and Void deserializers.  The option checks are
Kafka 3.6's: a group id given two different ways, ``--group`` with
``--partition``, ``--from-beginning`` with an ``auto.offset.reset`` other than
earliest are errors.
"""

from __future__ import annotations

import argparse
import re
import struct
import sys
import time
from collections.abc import Callable
from typing import Any

from pylog.tools.common import (
    ToolError,
    add_bootstrap,
    check_reachable,
    client_config,
    error_text,
    new_client,
    parse_props,
    read_properties_file,
    refuse_flags,
    run_tool,
)
from pylog.tools.java_text import DOUBLE, FLOAT, java_to_string, uuid_from_string

METADATA_TIMEOUT_S = 30.0
BATCH = 500
TOPIC_WAIT_S = 0.2  # between metadata requests while the topic does not exist
# librdkafka's default backs a partition's fetcher off for a second once its
# queue has data; at console rates that reads as a stall.
CONSUMER_DEFAULTS: dict[str, Any] = {"fetch.queue.backoff.ms": 10}
# How often --include looks for topics that started (or stopped) matching.
INCLUDE_REFRESH_S = 1.0
LOG_CLASS = "kafka.tools.ConsoleConsumer$"
# --formatter values naming the formatter pylog has: Kafka 3.6's default
# class, and its name from Kafka 3.8 on.
FORMATTERS = ("kafka.tools.DefaultMessageFormatter",
              "org.apache.kafka.tools.consumer.DefaultMessageFormatter")
_SERDE = "org.apache.kafka.common.serialization."
SERIALIZATION_EXCEPTION = "org.apache.kafka.common.errors.SerializationException"
ILLEGAL_ARGUMENT_EXCEPTION = "java.lang.IllegalArgumentException"


class DeserializationError(Exception):
    """A deserializer refused a record: Kafka's SerializationException, or
    the Java exception class ``exception`` names."""

    def __init__(self, message: str, exception: str = SERIALIZATION_EXCEPTION) -> None:
        super().__init__(message)
        self.exception = exception


def _fixed_int(size: int, fmt: str, name: str) -> Callable[[bytes], bytes]:
    def deserialize(data: bytes) -> bytes:
        if len(data) != size:
            raise DeserializationError(f"Size of data received by {name} is not {size}")
        return str(struct.unpack(fmt, data)[0]).encode()

    return deserialize


def _float(data: bytes) -> bytes:
    """Kafka's FloatDeserializer, printed with Float.toString."""
    if len(data) != 4:
        raise DeserializationError("Size of data received by Deserializer is not 4")
    return java_to_string(int.from_bytes(data, "big"), FLOAT).encode()


def _double(data: bytes) -> bytes:
    """Kafka's DoubleDeserializer, printed with Double.toString."""
    if len(data) != 8:
        raise DeserializationError("Size of data received by Deserializer is not 8")
    return java_to_string(int.from_bytes(data, "big"), DOUBLE).encode()


def _uuid(data: bytes) -> bytes:
    """Kafka's UUIDDeserializer: UUID.fromString of the UTF-8 text (Java 11+:
    five "-"-separated hex fields of any length, each masked to its width, at
    most 36 chars), printed in the canonical lowercase form."""
    try:
        return str(uuid_from_string(data.decode("utf-8", errors="replace"))).encode()
    except ValueError:
        raise DeserializationError("Error parsing data into UUID") from None


def _void(data: bytes) -> bytes:
    """Kafka's VoidDeserializer accepts only null, which the formatter never
    passes (a null key or value reaches the deserializer as null.literal's
    bytes): every record is refused."""
    raise DeserializationError("Data should be null for a VoidDeserializer.",
                               ILLEGAL_ARGUMENT_EXCEPTION)


def _bytes_text(data: bytes) -> bytes:
    """Kafka's Bytes.toString: printable ASCII as is, anything else as \\xNN."""
    return "".join(chr(b) if 0x20 <= b <= 0x7E and b != 0x5C else f"\\x{b:02X}"
                   for b in data).encode()


# Kafka's deserializer classes -> what the formatter prints for a record's bytes
# (the deserialized object's toString, in UTF-8).  ByteArrayDeserializer prints
# the bytes themselves (Kafka would print the array's identity, "[B@1b2c3d").
DESERIALIZERS: dict[str, Callable[[bytes], bytes]] = {
    _SERDE + "StringDeserializer":
        lambda data: data.decode("utf-8", errors="replace").encode(),
    _SERDE + "ByteArrayDeserializer": lambda data: data,
    _SERDE + "BytesDeserializer": _bytes_text,
    _SERDE + "ByteBufferDeserializer":
        lambda data: f"java.nio.HeapByteBuffer[pos=0 lim={len(data)} cap={len(data)}]".encode(),
    _SERDE + "IntegerDeserializer": _fixed_int(4, ">i", "IntegerDeserializer"),
    _SERDE + "LongDeserializer": _fixed_int(8, ">q", "LongDeserializer"),
    _SERDE + "ShortDeserializer": _fixed_int(2, ">h", "ShortDeserializer"),
    _SERDE + "FloatDeserializer": _float,
    _SERDE + "DoubleDeserializer": _double,
    _SERDE + "UUIDDeserializer": _uuid,
    _SERDE + "VoidDeserializer": _void,
}


def _deserializer(props: dict[str, str], name: str) -> Callable[[bytes], bytes] | None:
    class_name = props.get(name)
    if class_name is None:
        return None
    found = DESERIALIZERS.get(class_name.strip())
    if found is None:
        supported = ", ".join(sorted(k.rpartition(".")[2] for k in DESERIALIZERS))
        raise ToolError(f"{name} {class_name}: class not found or not supported by pylog "
                        f"(supported: {supported}, in {_SERDE[:-1]})")
    return found


def log_error(message: str, exception: str) -> None:
    """A Kafka tool's ERROR log line (log4j layout) and the exception's first line."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S") + f",{int(time.time() * 1000) % 1000:03d}"
    print(f"[{stamp}] ERROR {message} ({LOG_CLASS})\n{exception}", file=sys.stderr, flush=True)


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
        self.key_deserializer = _deserializer(props, "key.deserializer")
        self.value_deserializer = _deserializer(props, "value.deserializer")
        self.headers_deserializer = _deserializer(props, "headers.deserializer")
        # Fast path: the common case (value only) is one join per record.
        self.value_only = self.value and not (self.timestamp or self.partition or
                                              self.offset or self.headers or self.key
                                              or self.value_deserializer)

    def _field(self, data: bytes | None, deserializer: Callable[[bytes], bytes] | None
               ) -> bytes:
        """Kafka's deserialize(): null becomes null.literal, and the deserializer
        sees those bytes too."""
        data = self.null if data is None else data
        return data if deserializer is None else deserializer(data)

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
                    k.encode() + self.headers_key_sep + self._field(v, self.headers_deserializer)
                    for k, v in headers))
        if self.key:
            cols.append(self._field(msg.key(), self.key_deserializer))
        if self.value:
            cols.append(self._field(value, self.value_deserializer))
        return self.sep.join(cols) + self.line_sep if cols else b""


def _check_args(args: argparse.Namespace) -> None:
    """ConsoleConsumer's option checks, in Kafka 3.6's order."""
    include = args.include if args.include is not None else args.whitelist
    if (args.topic is None) == (include is None):
        raise ToolError("Exactly one of --include/--topic is required. " + (
            "--whitelist is DEPRECATED use --include instead; ignored if --include specified."
            if args.whitelist is not None else ""))
    args.include = include
    if args.partition is not None:
        if args.topic is None:
            raise ToolError("The topic is required when partition is specified.")
        if args.offset is not None and args.from_beginning:
            raise ToolError("Options from-beginning and offset cannot be specified together.")
    elif args.offset is not None:
        raise ToolError("The partition is required when offset is specified.")
    if args.offset is not None and args.offset.lower() not in ("earliest", "latest"):
        try:
            if int(args.offset) < 0:
                raise ValueError
        except ValueError:
            raise ToolError(f"The provided offset value '{args.offset}' is incorrect. Valid "
                            "values are 'earliest', 'latest', or a non-negative long.") from None
    if args.max_messages is not None and args.max_messages < 0:
        raise ToolError("--max-messages must not be negative")


def _group_id(args: argparse.Namespace, file_props: dict[str, str],
              props: dict[str, str]) -> str | None:
    """The one group id given by --group, --consumer.config or --consumer-property."""
    given: list[str] = []
    for value in (args.group, file_props.get("group.id"), props.get("group.id")):
        if value is not None and value not in given:
            given.append(value)
    if len(given) > 1:
        raise ToolError("The group ids provided in different places (directly using '--group', "
                        "via '--consumer-property', or via '--consumer.config') do not match. "
                        "Detected group ids: " + ", ".join(f"'{g}'" for g in given))
    if given and args.partition is not None:
        raise ToolError("Options group and partition cannot be specified together.")
    return given[0] if given else None


def _offset_reset(args: argparse.Namespace, merged: dict[str, str]) -> str:
    """Kafka's setAutoOffsetResetValue: the property wins, but must not contradict
    --from-beginning."""
    value = merged.get("auto.offset.reset")
    if value is None:
        return "earliest" if args.from_beginning else "latest"
    if args.from_beginning and value != "earliest":
        raise ToolError(f"Can't simultaneously specify --from-beginning and "
                        f"'auto.offset.reset={value}', please remove one option")
    return value


def _start_offset(args: argparse.Namespace, reset: str) -> int | None:
    """Where an assigned partition starts: --offset (or --from-beginning) with
    --partition, else the reset policy as a fresh group's member would apply it
    (None for auto.offset.reset=none: a fresh group has no offset to use)."""
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END

    if args.partition is None:
        if reset == "none":
            return None
        return OFFSET_BEGINNING if reset == "earliest" else OFFSET_END
    offset = (args.offset or "").lower()
    if offset == "earliest" or (args.offset is None and args.from_beginning):
        return OFFSET_BEGINNING
    if args.offset is None or offset == "latest":
        return OFFSET_END
    return int(args.offset)


@run_tool
def run(args: argparse.Namespace) -> int:
    from confluent_kafka import Consumer, TopicPartition

    if args.formatter is not None and args.formatter not in FORMATTERS:
        raise ToolError(f"--formatter {args.formatter} is not supported by pylog: it prints "
                        f"with Kafka's default formatter ({FORMATTERS[0]}) only")
    # --formatter-config, then --property (which wins), then the dedicated flags.
    formatter_props = (read_properties_file(args.formatter_config) if args.formatter_config
                       else {})
    formatter_props.update(parse_props(args.property, "property"))
    if args.key_deserializer:
        formatter_props["key.deserializer"] = args.key_deserializer
    if args.value_deserializer:
        formatter_props["value.deserializer"] = args.value_deserializer
    formatter = Formatter(formatter_props)
    _check_args(args)
    file_props = read_properties_file(args.consumer_config) if args.consumer_config else {}
    props = parse_props(args.consumer_property, "consumer property")
    group = _group_id(args, file_props, props)
    merged = {**file_props, **props}
    reset = _offset_reset(args, merged)
    defaults = dict(CONSUMER_DEFAULTS, **{"isolation.level": "read_uncommitted",
                                          "client.id": "console-consumer",
                                          "allow.auto.create.topics": True})
    conf = client_config(args.bootstrap_server, props=merged, defaults=defaults)
    if args.isolation_level:
        conf["isolation.level"] = args.isolation_level
    if group:
        conf["group.id"] = group
        conf.setdefault("auto.offset.reset", reset)
    else:
        conf["enable.auto.commit"] = False
        conf["group.id"] = "console-consumer-assign"  # librdkafka wants one
    consumer = new_client(Consumer, conf)
    try:
        return _consume(args, consumer, formatter, bool(group), TopicPartition,
                        _start_offset(args, reset))
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


def _no_offset(partitions: list[tuple[str, int]]) -> str:
    """Kafka's NoOffsetForPartitionException, as its log shows it."""
    names = ", ".join(f"{t}-{p}" for t, p in partitions)
    return ("org.apache.kafka.clients.consumer.NoOffsetForPartitionException: Undefined offset "
            f"with no reset policy for partitions: [{names}]")


class _Reader:
    """What the consumer reads, and whether it is reading yet: the partitions it
    assigned itself (no group), or its group subscription (``assigned`` once the
    group gave it partitions; --timeout-ms counts from then)."""

    def __init__(self, consumer: Any, subscribe: bool, start: int | None,
                 topic_partition: Any) -> None:
        self.consumer = consumer
        self.subscribe = subscribe
        self.start = start
        self.topic_partition = topic_partition
        self.assigned = False
        self.topics: list[str] | None = None
        self.owned: set[tuple[str, int]] = set()

    def _on_assign(self, consumer: Any, partitions: Any) -> None:
        self.assigned = True

    def read(self, partitions: dict[str, list[int]]) -> None:
        """Read these topics' partitions (all of them, as the group decides, when
        subscribed); a change from the last call is applied."""
        if self.subscribe:
            topics = sorted(partitions)
            if topics == self.topics:
                return
            self.topics = topics
            if topics:
                self.assigned = False
                self.consumer.subscribe(topics, on_assign=self._on_assign)
            else:
                self.assigned = True  # nothing to wait for: --timeout-ms counts
                self.consumer.unsubscribe()
            return
        want = {(t, p) for t, ps in partitions.items() for p in ps}
        gone, new = sorted(self.owned - want), sorted(want - self.owned)
        if new and self.start is None:  # auto.offset.reset=none, and no group offsets
            raise _Stop(_no_offset(new))
        tp = self.topic_partition
        if gone:
            self.consumer.incremental_unassign([tp(t, p) for t, p in gone])
        if new:
            self.consumer.incremental_assign([tp(t, p, self.start) for t, p in new])
        self.owned = want
        self.assigned = True


class _Stop(Exception):
    """The consumer cannot go on: Kafka logs it and ends with status 0."""


def _matching(consumer: Any, regex: re.Pattern) -> dict[str, list[int]]:
    """--include: the partitions of every topic whose whole name matches (internal
    topics left out, as the Java consumer's exclude.internal.topics does)."""
    meta = check_reachable(consumer, METADATA_TIMEOUT_S)
    return {name: sorted(t.partitions) for name, t in meta.topics.items()
            if not name.startswith("__") and t.error is None and t.partitions
            and regex.fullmatch(name)}


def _consume(args: argparse.Namespace, consumer: Any, formatter: Formatter, subscribe: bool,
             topic_partition: Any, start: int | None) -> int:
    from confluent_kafka import KafkaException

    timeout_s = args.timeout_ms / 1000 if args.timeout_ms is not None else None
    reader = _Reader(consumer, subscribe, start, topic_partition)
    regex = None
    count = 0
    try:
        if args.include is not None:
            try:
                regex = re.compile(args.include)
            except re.error as exc:
                raise ToolError(f"Invalid --include regular expression "
                                f"'{args.include}': {exc}") from None
            reader.read(_matching(consumer, regex))
        else:
            topic = args.topic
            try:
                found = _wait_for_topic(consumer, topic, timeout_s)
            except KeyboardInterrupt:
                found = None
            if found is None:  # --timeout-ms or a signal before the topic existed
                print("Processed a total of 0 messages", file=sys.stderr, flush=True)
                return 0
            partitions = sorted(found.partitions)
            if args.partition is not None:
                if args.partition not in found.partitions:
                    raise ToolError(f"Partition {args.partition} of topic '{topic}' does "
                                    "not exist")
                partitions = [args.partition]
            reader.read({topic: partitions})
    except KafkaException as exc:
        raise ToolError(error_text(exc)) from None
    except _Stop as stop:
        log_error("Error processing message, terminating consumer process: ", str(stop))
        print(f"Processed a total of {count} messages", file=sys.stderr, flush=True)
        return 0

    out = sys.stdout.buffer
    write = out.write
    fmt = formatter.format
    limit = args.max_messages
    last = time.monotonic()
    next_refresh = last + INCLUDE_REFRESH_S
    try:
        while limit is None or count < limit:
            want = BATCH if limit is None else min(BATCH, limit - count)
            wait = 0.5 if timeout_s is None else max(min(0.5, timeout_s), 0.001)
            batch = consumer.consume(num_messages=want, timeout=wait)
            now = time.monotonic()
            if regex is not None and now >= next_refresh:
                reader.read(_matching(consumer, regex))  # topics created or deleted since
                next_refresh = now + INCLUDE_REFRESH_S
            if not batch:
                if not reader.assigned:
                    last = now
                elif timeout_s is not None and now - last >= timeout_s:
                    break
                continue
            last = now
            no_offset = []
            for msg in batch:
                err = msg.error()
                if err is not None:
                    if err.code() == err._PARTITION_EOF:
                        continue
                    if err.code() == err._AUTO_OFFSET_RESET:  # auto.offset.reset=none
                        no_offset.append((msg.topic(), msg.partition()))
                        continue
                    if args.skip_message_on_error:
                        continue
                    raise ToolError(f"Error processing message, terminating consumer "
                                    f"process: {err.str()}")
                # Counted before it is written: a SIGTERM (raised between any
                # two bytecodes) must not leave a printed message uncounted.
                count += 1
                try:
                    write(fmt(msg))
                except DeserializationError as exc:
                    if not args.skip_message_on_error:
                        raise ToolError(f"Unknown error when running consumer: "
                                        f"{exc.exception}: {exc}") from None
                    log_error("Error processing message, skipping this message: ",
                              f"{exc.exception}: {exc}")
            out.flush()
            if no_offset:
                raise _Stop(_no_offset(sorted(set(no_offset))))
    except KeyboardInterrupt:
        pass
    except _Stop as stop:
        # Kafka's process() logs what poll() threw and returns: exit status 0.
        log_error("Error processing message, terminating consumer process: ", str(stop))
    except KafkaException as exc:
        raise ToolError(error_text(exc)) from None
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
    p.add_argument("--topic", metavar="topic", help="the topic to consume on")
    p.add_argument("--include", metavar="Java regex (String)",
                   help="regular expression specifying list of topics to include for "
                        "consumption")
    p.add_argument("--whitelist", metavar="Java regex (String)",
                   help="DEPRECATED, use --include instead; ignored if --include specified")
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
    p.add_argument("--key-deserializer", metavar="deserializer for key",
                   help="a Kafka deserializer class for printing keys (String, ByteArray, "
                        "Bytes, ByteBuffer, Integer, Long, Short, Float, Double, UUID, "
                        "Void)")
    p.add_argument("--value-deserializer", metavar="deserializer for values",
                   help="a Kafka deserializer class for printing values")
    p.add_argument("--formatter", metavar="class",
                   help=f"the formatter class; only Kafka's default ({FORMATTERS[0]})")
    p.add_argument("--formatter-config", metavar="config file",
                   help="config properties file for the formatter (--property wins)")
    refuse_flags(p, {
        "--enable-systest-events": "it logs consumer lifecycle events for Kafka's system "
                                   "tests",
    })
    p.set_defaults(func=run)
