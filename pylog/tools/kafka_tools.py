"""Registers the Kafka-compatible tools with the ``pylog`` command (one place, one
edit in pylog/cli.py).  Each tool module imports its client library lazily, so
``pylog --help`` and ``pylog broker`` do not pay for confluent-kafka."""

from __future__ import annotations

import argparse
import importlib

# (module under pylog.tools) in the order ``pylog --help`` lists them.
TOOL_MODULES = (
    "topics",
    "console_producer",
    "console_consumer",
    "configs",
    "producer_perf",
    "consumer_perf",
    "log_dirs",
    "get_offsets",
    "storage",
    "transactions",
    "leader_election",
    "reassign_partitions",
    "zookeeper_server_start",
    "zookeeper_shell",
)


def add_parsers(sub: argparse._SubParsersAction) -> None:
    for name in TOOL_MODULES:
        importlib.import_module(f"pylog.tools.{name}").add_parser(sub)
