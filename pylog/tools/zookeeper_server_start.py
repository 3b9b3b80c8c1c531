"""``pylog zookeeper-server-start``: Kafka's ``zookeeper-server-start.sh``.

    pylog zookeeper-server-start config/zookeeper.properties

Runs a standalone ZooKeeper server from Debian's ``zookeeper`` package
(pylog.zk.server) in the foreground, its log on stdout, until SIGTERM or
SIGINT (Ctrl-C) stops it; prints the address clients connect to.
"""

from __future__ import annotations

import argparse
import time

from pylog.tools.common import ToolError, run_tool
from pylog.zk.server import ZooKeeperServer, ZooKeeperServerError


def _main(args: argparse.Namespace) -> int:
    try:
        server = ZooKeeperServer(args.config, log="inherit", die_with_parent=True)
        server.start()
    except ZooKeeperServerError as exc:
        raise ToolError(str(exc)) from None
    print(f"ZooKeeper is serving clients on {server.address} (dataDir {server.data_dir})",
          flush=True)
    try:
        while server.running:
            time.sleep(0.5)
        raise ToolError(f"ZooKeeper exited with status {server.proc.returncode}"
                        if server.proc else "ZooKeeper exited")
    finally:
        server.stop()


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("zookeeper-server-start", help="run a ZooKeeper server "
                       "(zookeeper-server-start)",
                       description="USAGE: pylog zookeeper-server-start zookeeper.properties")
    p.add_argument("config", metavar="zookeeper.properties",
                   help="the server's properties (Kafka's config/zookeeper.properties)")
    p.set_defaults(func=run_tool(_main))
