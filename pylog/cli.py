"""The ``pylog`` command: one entry point, Kafka's tools as subcommands."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from pylog import __version__


def _cmd_info(args: argparse.Namespace) -> int:
    """Print what this build holds: version and the native implementations chosen."""
    from pylog._native import crc32c

    print(f"pylog {__version__}")
    print(f"python {sys.version.split()[0]}")
    print(f"crc32c: {crc32c.IMPLEMENTATION}")
    return 0


def _cmd_broker(args: argparse.Namespace) -> int:
    if args.nodes != 1 or args.zookeeper_config is not None:
        # A cluster on this host: the supervisor runs ZooKeeper and the nodes.
        from pylog.cluster.supervisor import run_cluster

        return run_cluster(args.config, args.override or [], args.nodes,
                           args.zookeeper_config)
    from pylog.server.main import run

    return run(args.config, args.override or [])


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pylog",
        description="A message broker that speaks the Apache Kafka wire protocol.",
    )
    parser.add_argument("--version", action="version", version=f"pylog {__version__}")
    from pylog.tools.common import ToolParser

    # Each subcommand's parser reports its own usage errors (a wrong flag of
    # `pylog topics` prints the usage of `pylog topics`, not of `pylog`).
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=ToolParser)

    p = sub.add_parser("broker", help="run a broker node (embedded default: one node)")
    p.add_argument("--config", help="server.properties file")
    p.add_argument("--override", action="append", metavar="KEY=VALUE",
                   help="set a server.properties key (repeatable; wins over --config)")
    p.add_argument("--nodes", type=int, default=1,
                   help="number of node processes: more than 1 runs a cluster on this host "
                   "(a supervisor, ZooKeeper unless zookeeper.connect is set, node i on the "
                   "listener's port + i with data in <log.dirs>/node-<i>)")
    p.add_argument("--zookeeper-config", metavar="zookeeper.properties",
                   help="with --nodes: the ZooKeeper server's properties (default: data in "
                   "<log.dirs>/zookeeper, a free port on 127.0.0.1)")
    p.set_defaults(func=_cmd_broker)

    p = sub.add_parser("info", help="show version and native implementations in use")
    p.set_defaults(func=_cmd_info)

    from pylog.tools import dump_log

    dump_log.add_parser(sub)
    from pylog.tools import consumer_groups

    consumer_groups.add_parser(sub)
    # Kafka's operator and perf tools (pylog/tools/kafka_tools.py lists them).
    from pylog.tools.kafka_tools import add_parsers

    add_parsers(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
