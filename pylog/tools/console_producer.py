"""``pylog console-producer``: Kafka's ``kafka-console-producer.sh`` for pylog.

Each line of stdin becomes one record.  Kafka's reader properties work:
``--property parse.key=true --property key.separator=:`` splits a key off each
line, ``parse.headers=true`` reads ``h1:v1,h2:v2<TAB>`` before it,
``null.marker`` turns a key or value into null, ``ignore.error=true`` sends a
line without the separator whole as the value instead of stopping.

Client settings come as in Kafka: ``--producer.config FILE`` then
``--producer-property k=v`` (which wins), then the dedicated flags.  Defaults
are Kafka's console producer's (acks=-1, linger 1000 ms from ``--timeout``);
the records still pending at end of input are flushed before exit.  A record
the broker refuses prints Kafka's ``Error when sending message to topic ...``
line on stderr, and the exit status is then 1.
"""

from __future__ import annotations

import argparse
import sys
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

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
METADATA_TIMEOUT_S = 30.0
FLUSH_TIMEOUT_S = 120.0


def _split(data: bytes, sep: bytes) -> tuple[bytes, bytes] | None:
    """Kafka's indexOf split at the first ``sep`` (None when absent); an empty
    separator matches at 0, so ``key.separator=`` gives empty keys, not an error."""
    i = data.find(sep)
    return None if i < 0 else (data[:i], data[i + len(sep):])


class LineReader:
    """Kafka's LineMessageReader: one line -> (headers, key, value).

    Separators are the property strings verbatim in UTF-8, as Kafka's: no
    backslash escapes (a tab from a shell is ``$'\\t'``)."""

    def __init__(self, props: dict[str, str]) -> None:
        self.parse_key = props.get("parse.key", "false").lower() == "true"
        self.key_sep = props.get("key.separator", "\t").encode()
        self.ignore_error = props.get("ignore.error", "false").lower() == "true"
        self.parse_headers = props.get("parse.headers", "false").lower() == "true"
        self.headers_delim = props.get("headers.delimiter", "\t").encode()
        self.headers_sep = props.get("headers.separator", ",").encode()
        self.headers_key_sep = props.get("headers.key.separator", ":").encode()
        marker = props.get("null.marker")
        self.null_marker = marker.encode() if marker else None
        if self.null_marker is not None and self.null_marker in (
                self.key_sep, self.headers_delim, self.headers_sep, self.headers_key_sep):
            raise ToolError("null.marker must not be equal to any of the separators")

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
                headers = []
                if head != self.null_marker:
                    for item in head.split(self.headers_sep):
                        hkey, hsep, hval = item.partition(self.headers_key_sep)
                        headers.append((hkey.decode(), self._null(hval) if hsep else None))
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


def producer_settings(args: argparse.Namespace) -> dict[str, Any]:
    """Kafka's console-producer defaults, then its flags (a flag left unset does
    not override a --producer-property)."""
    defaults: dict[str, Any] = {
        "acks": "-1",
        "linger.ms": 1000,
        "message.send.max.retries": 3,
        "retry.backoff.ms": 100,
        "request.timeout.ms": 1500,
        "client.id": "console-producer",
    }
    conf = client_config(args.bootstrap_server, files=[args.producer_config],
                         props=parse_props(args.producer_property, "producer property"),
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
    if args.sync:
        conf["linger.ms"] = 0
    return conf


@run_tool
def run(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException, Producer

    reader = LineReader(parse_props(args.property, "property"))
    conf = producer_settings(args)
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
            while True:
                try:
                    produce(topic, value, key, headers=headers, on_delivery=on_delivery)
                    break
                except BufferError:  # local queue full: let deliveries drain it
                    poll(0.1)
            if args.sync:
                producer.flush(FLUSH_TIMEOUT_S)
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
    return 1 if failed[0] else 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "console-producer", help="send lines of stdin as records (kafka-console-producer)",
        description="Read data from standard input and publish it to a topic.")
    add_bootstrap(p, command_config=False)
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
    p.add_argument("--request-timeout-ms", type=int, metavar="ms")
    p.add_argument("--sync", action="store_true",
                   help="send each message synchronously, waiting for its acknowledgement")
    p.set_defaults(func=run)
