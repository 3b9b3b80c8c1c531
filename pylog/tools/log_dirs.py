"""``pylog log-dirs``: Kafka's ``kafka-log-dirs.sh`` (LogDirsCommand) for pylog.

``--describe`` prints Kafka's three lines::

    Querying brokers for log directories information
    Received log directory information from brokers 0
    {"version":1,"brokers":[{"broker":0,"logDirs":[{"logDir":"...","error":null,
     "partitions":[{"partition":"t-0","size":123,"offsetLag":0,"isFuture":false}]}]}]}

confluent-kafka has no DescribeLogDirs call, so the request goes over pylog's
own codec (pylog.tools.wire), to every broker the cluster metadata lists.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from pylog.protocol import ApiKey
from pylog.tools.common import (
    ToolError,
    add_bootstrap,
    exception_name,
    parse_bootstrap,
    run_tool,
    split_list,
    wire_config,
    wire_timeout,
)
from pylog.tools.wire import WireClient

TIMEOUT_S = 10.0


def _brokers(bootstrap: list[tuple[str, int]], timeout: float) -> dict[int, tuple[str, int]]:
    with WireClient(bootstrap, timeout) as client:
        meta = client.request(ApiKey.METADATA, {"topics": [], "allow_auto_topic_creation": False})
        return {b.node_id: (b.host, b.port) for b in meta.brokers}


def _describe_broker(node: int, address: tuple[str, int],
                     bootstrap: list[tuple[str, int]], single: bool, timeout: float) -> list[Any]:
    # Try the broker's advertised address; a lone broker may advertise a name
    # that does not resolve here, and then the bootstrap address is the same node.
    addresses = [address] + (bootstrap if single else [])
    with WireClient(addresses, timeout) as client:
        resp = client.request(ApiKey.DESCRIBE_LOG_DIRS, {"topics": None})
    if getattr(resp, "error_code", 0):
        raise ToolError(f"broker {node} refused DescribeLogDirs: "
                        f"{exception_name(resp.error_code)}")
    return list(resp.results)


def _format(results: dict[int, list[Any]], topics: set[str] | None) -> str:
    brokers = []
    for node in sorted(results):
        dirs = []
        for d in results[node]:
            parts = []
            for t in d.topics:
                if topics is not None and t.name not in topics:
                    continue
                for p in t.partitions:
                    parts.append({"partition": f"{t.name}-{p.partition_index}",
                                  "size": p.partition_size, "offsetLag": p.offset_lag,
                                  "isFuture": bool(p.is_future_key)})
            dirs.append({"logDir": d.log_dir,
                         "error": exception_name(d.error_code) if d.error_code else None,
                         "partitions": parts})
        brokers.append({"broker": node, "logDirs": dirs})
    return json.dumps({"version": 1, "brokers": brokers}, separators=(",", ":"))


@run_tool
def run(args: argparse.Namespace) -> int:
    if not args.describe:
        raise ToolError("Missing required argument \"[describe]\"")
    bootstrap = parse_bootstrap(args.bootstrap_server)
    timeout = wire_timeout(wire_config(args), TIMEOUT_S)
    topics = set(split_list(args.topic_list)) if args.topic_list else None
    print("Querying brokers for log directories information")
    brokers = _brokers(bootstrap, timeout)
    wanted = sorted(brokers)
    if args.broker_list:
        try:
            asked = [int(b) for b in split_list(args.broker_list)]
        except ValueError:
            raise ToolError(f"Invalid --broker-list {args.broker_list!r}") from None
        missing = sorted(set(asked) - set(brokers))
        if missing:
            raise ToolError("ERROR: The given brokers do not exist from --broker-list: "
                            + ",".join(map(str, missing)) + ". Current existent brokers: "
                            + ",".join(map(str, sorted(brokers))))
        wanted = sorted(set(asked))
    results = {node: _describe_broker(node, brokers[node], bootstrap, len(brokers) == 1,
                                      timeout) for node in wanted}
    print(f"Received log directory information from brokers {','.join(map(str, wanted))}")
    print(_format(results, topics))
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "log-dirs", help="describe the brokers' log directories (kafka-log-dirs)",
        description="Query the log directories of brokers: size and lag of each partition.")
    add_bootstrap(p)
    p.add_argument("--describe", action="store_true", help="describe the specified log "
                   "directories on the specified brokers")
    p.add_argument("--topic-list", metavar="Topic list",
                   help="the comma-separated list of topics to be queried (default: all)")
    p.add_argument("--broker-list", metavar="Broker list",
                   help="the comma-separated list of brokers to be queried (default: all)")
    p.set_defaults(func=run)
