"""``pylog get-offsets``: Kafka's ``kafka-get-offsets.sh`` (GetOffsetShell) for pylog.

Prints ``topic:partition:offset`` per partition, sorted, for ``--time``:
``-1``/``latest`` (the log end offset, default), ``-2``/``earliest`` (the log
start offset), ``-3``/``max-timestamp`` (the offset of the record with the
largest timestamp), or a timestamp in ms (the first offset at or after it; a
partition with none is left out, as Kafka leaves out UNKNOWN_OFFSET).
``--topic`` is a regular expression, as in Kafka.
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any

from pylog.tools.common import (
    ToolError,
    add_bootstrap,
    admin_client,
    check_reachable,
    error_text,
    run_tool,
    wait_future,
)

TIMEOUT_S = 30.0
# ListOffsets' answer for a timestamp past every record: Kafka prints no line.
UNKNOWN_OFFSET = -1
NAMED_TIMES = {"latest": -1, "earliest": -2, "max-timestamp": -3}


def _offset_spec(time_arg: str) -> Any:
    from confluent_kafka.admin import OffsetSpec

    value = NAMED_TIMES.get(time_arg.strip().lower())
    if value is None:
        try:
            value = int(time_arg)
        except ValueError:
            raise ToolError(f"Malformed time argument {time_arg}. Please use -1 or latest / "
                            "-2 or earliest / -3 or max-timestamp, or a specified long format "
                            "timestamp") from None
    if value == -1:
        return OffsetSpec.latest()
    if value == -2:
        return OffsetSpec.earliest()
    if value == -3:
        return OffsetSpec.max_timestamp()
    if value < 0:
        raise ToolError(f"Malformed time argument {time_arg}.")
    return OffsetSpec.for_timestamp(value)


def _partition_filter(text: str | None) -> Any:
    """``--partitions 0,2,4-6`` -> a predicate on partition numbers."""
    if not text:
        return lambda p: True
    wanted: set[int] = set()
    ranges: list[tuple[int, int]] = []
    try:
        for item in (s.strip() for s in text.split(",") if s.strip()):
            lo, dash, hi = item.partition("-")
            if dash:
                ranges.append((int(lo), int(hi) if hi else 2**31 - 1))
            else:
                wanted.add(int(item))
    except ValueError:
        raise ToolError(f"Invalid partition '{text}'") from None
    return lambda p: p in wanted or any(lo <= p <= hi for lo, hi in ranges)


@run_tool
def run(args: argparse.Namespace) -> int:
    from confluent_kafka import IsolationLevel, KafkaException, TopicPartition

    spec = _offset_spec(args.time)
    keep = _partition_filter(args.partitions)
    admin = admin_client(args)
    meta = check_reachable(admin)
    try:
        regex = re.compile(args.topic) if args.topic else None
    except re.error as exc:
        raise ToolError(f"Invalid --topic regular expression: {exc}") from None
    partitions = []
    for name, t in sorted(meta.topics.items()):
        if args.exclude_internal_topics and name.startswith("__"):
            continue
        if regex is not None and not (name == args.topic or regex.fullmatch(name)):
            continue
        partitions += [TopicPartition(name, p) for p in sorted(t.partitions) if keep(p)]
    if not partitions:
        raise ToolError("Could not match any topic-partitions with the specified filters")
    futures = admin.list_offsets({tp: spec for tp in partitions},
                                 isolation_level=IsolationLevel.READ_UNCOMMITTED,
                                 request_timeout=TIMEOUT_S)
    lines = []
    for tp, fut in futures.items():
        try:
            info = wait_future(fut, TIMEOUT_S)
        except KafkaException as exc:
            print(f"Skip getting offsets for topic-partition {tp.topic}-{tp.partition} due "
                  f"to error: {error_text(exc)}", file=sys.stderr)
            continue
        if info.offset != UNKNOWN_OFFSET:
            lines.append((tp.topic, tp.partition, info.offset))
    for topic, partition, offset in sorted(lines):
        print(f"{topic}:{partition}:{offset}")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "get-offsets", help="print partitions' offsets for a time (kafka-get-offsets)",
        description="An interactive shell for getting topic-partition offsets.")
    add_bootstrap(p)
    p.add_argument("--topic", metavar="topic",
                   help="the topic to get the offsets for (a regular expression; default: all)")
    p.add_argument("--partitions", metavar="partition ids",
                   help="comma-separated list of partition ids or ranges (0,2-4); default all")
    p.add_argument("--time", default="-1", metavar="timestamp/-1(latest)/-2(earliest)/"
                   "-3(max timestamp)", help="the time to look offsets up for (default -1)")
    p.add_argument("--exclude-internal-topics", action="store_true",
                   help="leave internal topics out when --topic is not given")
    p.set_defaults(func=run)
