"""``pylog get-offsets``: Kafka's ``kafka-get-offsets.sh`` (GetOffsetShell) for pylog.

Prints ``topic:partition:offset`` per partition, sorted, for ``--time``:
``-1``/``latest`` (the log end offset, default), ``-2``/``earliest`` (the log
start offset), ``-3``/``max-timestamp`` (the offset of the record with the
largest timestamp), or a timestamp in ms (the first offset at or after it; a
partition with none is left out, as Kafka leaves out UNKNOWN_OFFSET).
``--topic`` is a regular expression, as in Kafka.  ``--topic-partitions`` takes
Kafka 3.6's comma-separated ``topic-regex:partitions`` patterns instead (``t1:0``,
``t2:1-3`` for 1 and 2, ``t3:5-``, ``t4:-3``, ``t5:`` or ``t5`` for every
partition, ``:0`` for partition 0 of every topic); it cannot be combined with
``--topic`` or ``--partitions``.
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
# GetOffsetShell's TOPIC_PARTITION_PATTERN, matched against each whole rule.
TOPIC_PARTITION_PATTERN = re.compile(r"([^:,]*)(?::(?:([0-9]*)|(?:([0-9]*)-([0-9]*))))?")
INT_MAX = 2**31 - 1


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


def _topic_regex(raw: str) -> re.Pattern:
    """Kafka's IncludeList: commas mean alternation, spaces and surrounding quotes
    are dropped; the topic must match the whole expression."""
    text = re.sub(r"[\"']+$", "", re.sub(r"^[\"']+", "", raw.strip().replace(",", "|")
                                          .replace(" ", "")))
    try:
        return re.compile(text)
    except re.error:
        raise ToolError(f"{text} is an invalid regex.") from None


def _java_split(text: str, sep: str) -> list[str]:
    """Java's String.split: trailing empty strings are dropped ("" stays [""])."""
    parts = text.split(sep)
    while len(parts) > 1 and not parts[-1]:
        parts.pop()
    return parts


def _rules(text: str) -> list[tuple[re.Pattern, int | None, int, int]]:
    """``--topic-partitions`` -> (topic regex, single partition, range low, range
    high exclusive) per rule, as GetOffsetShell.parseRuleSpec reads them."""
    rules = []
    for spec in _java_split(text, ","):
        m = TOPIC_PARTITION_PATTERN.fullmatch(spec)
        if m is None:
            raise ToolError(f"Invalid rule specification: {spec}")
        topic, single, low, high = (g or None for g in m.groups())
        try:
            rules.append((_topic_regex(topic or ".*"),
                          int(single) if single is not None else None,
                          int(low) if low is not None else 0,
                          int(high) if high is not None else INT_MAX))
        except ValueError:  # a number past Integer.MAX_VALUE
            raise ToolError(f"Invalid rule specification: {spec}") from None
    return rules


def _rule_filter(text: str) -> Any:
    """A predicate on (topic, partition): true when any rule takes both."""
    rules = _rules(text)

    def allowed(topic: str, partition: int) -> bool:
        for regex, single, low, high in rules:
            if regex.fullmatch(topic) is None:
                continue
            if (partition == single if single is not None else low <= partition < high):
                return True
        return False

    return allowed


def _topic_filter(args: argparse.Namespace) -> Any:
    """--topic (a regex, or the exact name) and --partitions as one predicate."""
    keep = _partition_filter(args.partitions)
    try:
        regex = re.compile(args.topic) if args.topic else None
    except re.error as exc:
        raise ToolError(f"Invalid --topic regular expression: {exc}") from None

    def allowed(topic: str, partition: int) -> bool:
        if regex is not None and not (topic == args.topic or regex.fullmatch(topic)):
            return False
        return keep(partition)

    return allowed


@run_tool
def run(args: argparse.Namespace) -> int:
    from confluent_kafka import IsolationLevel, KafkaException, TopicPartition

    if args.topic_partitions is not None and (args.topic is not None
                                              or args.partitions is not None):
        raise ToolError("--topic-partitions cannot be used with --topic or --partitions")
    spec = _offset_spec(args.time)
    if args.topic_partitions is not None:
        allowed = _rule_filter(args.topic_partitions)
    else:
        allowed = _topic_filter(args)
    admin = admin_client(args)
    meta = check_reachable(admin)
    partitions = []
    for name, t in sorted(meta.topics.items()):
        if args.exclude_internal_topics and name.startswith("__"):
            continue
        partitions += [TopicPartition(name, p) for p in sorted(t.partitions)
                       if allowed(name, p)]
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
    add_bootstrap(p, broker_list=True)
    p.add_argument("--topic-partitions", metavar="topic1:1,topic2:0-3,topic3,topic4:5-,topic5:-3",
                   help="comma-separated topic-partition patterns: a topic regular expression "
                        "(any topic when left out), then ':' and a partition, a range "
                        "N-M (M excluded), N-, -M, or nothing for all partitions; cannot be "
                        "used with --topic or --partitions")
    p.add_argument("--topic", metavar="topic",
                   help="the topic to get the offsets for (a regular expression; default: all)")
    p.add_argument("--partitions", metavar="partition ids",
                   help="comma-separated list of partition ids or ranges (0,2-4); default all")
    p.add_argument("--time", default="-1", metavar="timestamp/-1(latest)/-2(earliest)/"
                   "-3(max timestamp)", help="the time to look offsets up for (default -1)")
    p.add_argument("--exclude-internal-topics", action="store_true",
                   help="leave internal topics out when --topic is not given")
    p.set_defaults(func=run)
