"""``pylog console-producer``: Kafka's ``kafka-console-producer.sh`` for pylog.

Each line of stdin becomes one record.  Kafka's reader properties work:
``--property parse.key=true --property key.separator=:`` splits a key off each
line, ``parse.headers=true`` reads ``h1:v1,h2:v2<TAB>`` before it,
``null.marker`` turns a key or value into null, ``ignore.error=true`` sends a
line without the separator whole as the value instead of stopping.

Client settings come as in Kafka: ``--producer.config FILE`` then
``--producer-property k=v`` (which wins), then the dedicated flags; reader
properties likewise: ``--reader-config FILE``, then ``--property`` (which wins).  Defaults
are Kafka's console producer's (acks=-1, linger 1000 ms from ``--timeout``);
the records still pending at end of input are flushed before exit.  A record
the broker refuses prints Kafka's ``Error when sending message to topic ...``
line on stderr; as in Kafka, that alone does not change the exit status (0)
unless ``--sync`` is given, where the first refused record ends the run with
status 1 and no further line is read.

``headers.separator`` is a regular expression splitting the headers, as in Kafka
(Java's String.split); a header without ``headers.key.separator`` is an error
unless ``ignore.error=true``.
"""

from __future__ import annotations

import argparse
import re
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
    librdkafka_config,
    new_client,
    parse_props,
    read_properties_file,
    run_tool,
)

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
METADATA_TIMEOUT_S = 30.0
FLUSH_TIMEOUT_S = 120.0
MAX_BLOCK_MS = 60_000  # Kafka's max.block.ms default
# --line-reader values that name the reader pylog has: Kafka 3.6's default
# class, and the one from before it moved into ConsoleProducer.
LINE_READERS = ("kafka.tools.ConsoleProducer$LineMessageReader", "kafka.tools.LineMessageReader")


def _split(data: bytes, sep: bytes) -> tuple[bytes, bytes] | None:
    """Kafka's indexOf split at the first ``sep`` (None when absent); an empty
    separator matches at 0, so ``key.separator=`` gives empty keys, not an error."""
    i = data.find(sep)
    return None if i < 0 else (data[:i], data[i + len(sep):])


def _java_split(pattern: re.Pattern, text: str) -> list[str]:
    """Java's ``Pattern.split(text)``: no leading empty string from a zero-width
    match at 0, trailing empty strings dropped, ``[text]`` when nothing matches."""
    if not text:
        return [text]
    parts, index = [], 0
    for m in pattern.finditer(text):
        if m.end() == 0:
            continue
        parts.append(text[index:m.start()])
        index = m.end()
    if not parts:
        return [text]
    parts.append(text[index:])
    while parts and not parts[-1]:
        parts.pop()
    return parts


class LineReader:
    """Kafka's LineMessageReader: one line -> (headers, key, value).

    Separators are the property strings verbatim in UTF-8, as Kafka's: no
    backslash escapes (a tab from a shell is ``$'\\t'``)."""

    def __init__(self, props: dict[str, str]) -> None:
        self.parse_key = props.get("parse.key", "false").strip().lower() == "true"
        key_sep = props.get("key.separator", "\t")
        self.key_sep = key_sep.encode()
        self.ignore_error = props.get("ignore.error", "false").strip().lower() == "true"
        self.parse_headers = props.get("parse.headers", "false").strip().lower() == "true"
        delimiter = props.get("headers.delimiter", "\t")
        self.headers_delim = delimiter.encode()
        separator = props.get("headers.separator", ",")
        try:
            self.headers_pattern = re.compile(separator)
        except re.error as exc:
            raise ToolError(f"Invalid headers.separator regular expression '{separator}': "
                            f"{exc}") from None
        key_separator = props.get("headers.key.separator", ":")
        self.headers_key_sep = key_separator
        # LineMessageReader.configure's checks, in its order.
        if delimiter == separator:
            raise ToolError("headers.delimiter and headers.separator may not be equal")
        if delimiter == key_separator:
            raise ToolError("headers.delimiter and headers.key.separator may not be equal")
        if separator == key_separator:
            raise ToolError("headers.separator and headers.key.separator may not be equal")
        marker = props.get("null.marker")
        for value, name in ((key_sep, "key.separator"), (separator, "headers.separator"),
                            (delimiter, "headers.delimiter"),
                            (key_separator, "headers.key.separator")):
            if marker == value:
                raise ToolError(f"null.marker and {name} may not be equal")
        self.null_marker_text = marker
        self.null_marker = marker.encode() if marker is not None else None

    def _headers(self, head: bytes, lineno: int) -> list[tuple[str, bytes | None]]:
        """Kafka's splitHeaders: a regex split, then each pair at its first
        headers.key.separator."""
        text = head.decode("utf-8", errors="surrogateescape")
        headers = []
        for pair in _java_split(self.headers_pattern, text):
            i = pair.find(self.headers_key_sep)
            if i < 0:
                if not self.ignore_error:
                    raise ToolError(f"No header key separator found in pair '{pair}' on line "
                                    f"number {lineno}")
                headers.append((pair, None))
                continue
            key, value = pair[:i], pair[i + len(self.headers_key_sep):]
            if key == self.null_marker_text:
                raise ToolError(f"Header keys should not be equal to the null marker "
                                f"'{key}' as they can't be null")
            headers.append((key, None if value == self.null_marker_text
                            else value.encode("utf-8", errors="surrogateescape")))
        return headers

    def _null(self, field: bytes) -> bytes | None:
        return None if self.null_marker is not None and field == self.null_marker else field

    def parse(self, line: bytes, lineno: int) -> tuple[list | None, bytes | None, bytes | None]:
        headers = None
        rest = line
        if self.parse_headers:
            split = _split(rest, self.headers_delim)
            if split is None:
                if not self.ignore_error:
                    raise ToolError(f"No headers delimiter found on line number {lineno}: "
                                    f"'{line.decode(errors='replace')}'")
            else:
                head, rest = split
                headers = [] if head == self.null_marker else self._headers(head, lineno)
        key = None
        if self.parse_key:
            split = _split(rest, self.key_sep)
            if split is None:
                if not self.ignore_error:
                    raise ToolError(f"No key separator found on line number {lineno}: "
                                    f"'{line.decode(errors='replace')}'")
            else:
                key, rest = self._null(split[0]), split[1]
        return headers, key, self._null(rest)


def java_props(args: argparse.Namespace) -> dict[str, str]:
    """--producer.config, then --producer-property (which wins): Java names."""
    props = read_properties_file(args.producer_config) if args.producer_config else {}
    props.update(parse_props(args.producer_property, "producer property"))
    return props


def max_block_ms(args: argparse.Namespace, props: dict[str, str]) -> int:
    """How long a record may wait for room in the client's queue (max.block.ms)."""
    if args.max_block_ms is not None:
        return args.max_block_ms
    try:
        return int(props.get("max.block.ms", MAX_BLOCK_MS))
    except ValueError:
        raise ToolError(f"Invalid value {props['max.block.ms']} for configuration "
                        "max.block.ms: Not a number of type LONG") from None


def producer_settings(args: argparse.Namespace, props: dict[str, str]) -> dict[str, Any]:
    """Kafka's console-producer defaults, then ``props`` (:func:`java_props`), then
    its flags (a flag left unset does not override a --producer-property)."""
    defaults: dict[str, Any] = {
        "acks": "-1",
        "linger.ms": 1000,
        "message.send.max.retries": 3,
        "retry.backoff.ms": 100,
        "request.timeout.ms": 1500,
        "client.id": "console-producer",
    }
    conf = client_config(bootstrap_of(args), props=props,
                         defaults=defaults)
    if args.compression_codec is not None:
        conf["compression.type"] = args.compression_codec
    if args.request_required_acks is not None:
        conf["acks"] = args.request_required_acks
    if args.timeout is not None:
        conf["linger.ms"] = args.timeout
    if args.batch_size is not None:
        conf["batch.num.messages"] = args.batch_size
    if args.message_send_max_retries is not None:
        conf["message.send.max.retries"] = args.message_send_max_retries
    if args.request_timeout_ms is not None:
        conf["request.timeout.ms"] = args.request_timeout_ms
    if args.retry_backoff_ms is not None:
        conf["retry.backoff.ms"] = args.retry_backoff_ms
    if args.socket_buffer_size is not None:
        conf["socket.send.buffer.bytes"] = args.socket_buffer_size
    if args.max_memory_bytes is not None:
        conf.update(librdkafka_config({"buffer.memory": str(args.max_memory_bytes)}))
    if args.max_partition_memory_bytes is not None:
        conf["batch.size"] = args.max_partition_memory_bytes
    if args.metadata_expiry_ms is not None:
        conf["metadata.max.age.ms"] = args.metadata_expiry_ms
    if args.sync:
        conf["linger.ms"] = 0
    return conf


@run_tool
def run(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException, Producer

    if args.line_reader is not None and args.line_reader not in LINE_READERS:
        raise ToolError(f"--line-reader {args.line_reader} is not supported by pylog: it reads "
                        f"lines with Kafka's default reader ({LINE_READERS[0]}) only")
    reader_props = read_properties_file(args.reader_config) if args.reader_config else {}
    reader_props.update(parse_props(args.property, "property"))
    reader = LineReader(reader_props)
    props = java_props(args)
    block_s = max_block_ms(args, props) / 1000
    conf = producer_settings(args, props)
    producer = new_client(Producer, conf)
    topic = args.topic
    try:
        # Metadata first (it creates the topic where the broker auto-creates):
        # a topic that cannot exist is one clear error, not a delivery timeout.
        meta = check_reachable(producer, METADATA_TIMEOUT_S, topic)
    except KafkaException as exc:
        raise ToolError(error_text(exc)) from None
    found = meta.topics.get(topic)
    if found is None or found.error is not None:
        reason = found.error.str() if found is not None and found.error else "unknown topic"
        raise ToolError(f"Topic {topic} not present in metadata: {reason}")

    failed = [0]

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            failed[0] += 1
            key = msg.key()
            value = msg.value()
            print(f"Error when sending message to topic {topic} with key: "
                  f"{'null' if key is None else f'{len(key)} bytes'}, value: "
                  f"{'null' if value is None else f'{len(value)} bytes'} with error: "
                  f"{err.str()}", file=sys.stderr)

    produce, poll = producer.produce, producer.poll
    error: ToolError | None = None
    try:
        for lineno, raw in enumerate(sys.stdin.buffer, 1):
            line = raw[:-1] if raw.endswith(b"\n") else raw
            if line.endswith(b"\r"):
                line = line[:-1]
            headers, key, value = reader.parse(line, lineno)
            blocked_until = None
            while True:
                try:
                    produce(topic, value, key, headers=headers, on_delivery=on_delivery)
                    break
                except BufferError:  # local queue full: let deliveries drain it
                    now = time.monotonic()
                    if blocked_until is None:
                        blocked_until = now + block_s
                    elif now >= blocked_until:  # Kafka's send() gives up after max.block.ms
                        failed[0] += 1
                        print(f"Error when sending message to topic {topic} with key: "
                              f"{'null' if key is None else f'{len(key)} bytes'}, value: "
                              f"{'null' if value is None else f'{len(value)} bytes'} with "
                              f"error: Failed to allocate memory within the configured max "
                              f"blocking time {int(block_s * 1000)} ms.", file=sys.stderr)
                        break
                    poll(0.1)
            if args.sync:
                producer.flush(FLUSH_TIMEOUT_S)
                if failed[0]:  # Kafka: send(record).get() threw; nothing more is read
                    break
            else:
                poll(0)
    except ToolError as exc:
        error = exc  # send what was read before the bad line, as Kafka does
    except KeyboardInterrupt:
        pass
    remaining = producer.flush(FLUSH_TIMEOUT_S)
    if error is not None:
        raise error
    if remaining:
        raise ToolError(f"{remaining} records were not acknowledged within "
                        f"{FLUSH_TIMEOUT_S:.0f} s")
    # Asynchronous failures are only logged (Kafka's ErrorLoggingCallback).
    return 1 if args.sync and failed[0] else 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "console-producer", help="send lines of stdin as records (kafka-console-producer)",
        description="Read data from standard input and publish it to a topic.")
    add_bootstrap(p, command_config=False, broker_list=True)
    p.add_argument("--topic", required=True, metavar="topic",
                   help="REQUIRED: the topic id to produce messages to")
    p.add_argument("--property", action="append", metavar="prop",
                   help="a mechanism to pass user-defined properties in the form key=value "
                        "to the message reader: parse.key, key.separator, parse.headers, "
                        "headers.delimiter, headers.separator, headers.key.separator, "
                        "null.marker, ignore.error")
    p.add_argument("--producer-property", action="append", metavar="producer_prop",
                   help="a mechanism to pass user-defined properties in the form key=value "
                        "to the producer")
    p.add_argument("--producer.config", dest="producer_config", metavar="config file",
                   help="producer config properties file (--producer-property wins)")
    p.add_argument("--reader-config", metavar="config file",
                   help="config properties file for the message reader (--property wins)")
    p.add_argument("--line-reader", metavar="reader_class",
                   help=f"the class reading stdin; only Kafka's default ({LINE_READERS[0]})")
    p.add_argument("--compression-codec", nargs="?", const="gzip", choices=CODECS,
                   metavar="compression-codec",
                   help="none, gzip, snappy, lz4 or zstd; given without a value: gzip")
    p.add_argument("--request-required-acks", metavar="request required acks",
                   help="the required acks of the producer requests (default -1)")
    p.add_argument("--timeout", type=int, metavar="timeout_ms",
                   help="linger.ms: how long a record may wait for a batch (default 1000)")
    p.add_argument("--batch-size", type=int, metavar="size",
                   help="number of messages to send in a single batch")
    p.add_argument("--message-send-max-retries", type=int, metavar="retries")
    p.add_argument("--retry-backoff-ms", type=int, metavar="ms",
                   help="retry.backoff.ms: the wait before each retry")
    p.add_argument("--request-timeout-ms", type=int, metavar="ms")
    p.add_argument("--metadata-expiry-ms", type=int, metavar="metadata expiration interval",
                   help="metadata.max.age.ms: refresh metadata at least this often")
    p.add_argument("--max-block-ms", type=int, metavar="max block on send",
                   help="max.block.ms: how long a record may wait for room in the client's "
                        "queue before it fails (default 60000)")
    p.add_argument("--max-memory-bytes", type=int, metavar="total memory in bytes",
                   help="buffer.memory: the memory for records waiting to be sent")
    p.add_argument("--max-partition-memory-bytes", type=int,
                   metavar="memory in bytes per partition",
                   help="batch.size: the bytes of records batched per partition")
    p.add_argument("--socket-buffer-size", type=int, metavar="size",
                   help="send.buffer.bytes: the socket send buffer size")
    p.add_argument("--sync", action="store_true",
                   help="send each message synchronously, waiting for its acknowledgement")
    p.set_defaults(func=run)
