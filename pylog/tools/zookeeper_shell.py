"""``pylog zookeeper-shell``: Kafka's ``zookeeper-shell.sh`` (ZooKeeper's ZooKeeperMain).

    pylog zookeeper-shell localhost:2181 ls /brokers/ids
    pylog zookeeper-shell localhost:2181/kafka get /controller
    echo "ls /brokers/topics" | pylog zookeeper-shell localhost:2181

One command from the arguments, else one per line from stdin.  Commands, with
ZooKeeper 3.8's output and error messages: ``ls [-s] [-R] path``,
``get [-s] path``, ``stat path``, ``create [-s] [-e] path [data]``,
``set [-s] [-v version] path data``, ``delete [-v version] path``,
``deleteall path``, ``quit``.  Unlike ZooKeeperMain, an unreachable server is
an error (exit status 1) after the connection timeout (``-timeout`` ms), not
an endless retry.
"""

from __future__ import annotations

import argparse
import getopt
import logging
import shlex
import sys
import time
from collections.abc import Callable
from typing import Any

from kazoo.protocol.states import ZnodeStat

from pylog.tools.common import ToolError, run_tool
from pylog.zk.connection import ZkConnection
from pylog.zk.errors import BadVersionError, ZkConnectError, ZkError

DEFAULT_TIMEOUT_MS = 30000  # ZooKeeperMain's session timeout
_OPTIONS = {"ls": "swR", "get": "sw", "stat": "w", "create": "es", "set": "sv:",
            "delete": "v:", "deleteall": "b:"}
_USAGE = """\
ZooKeeper -server host:port cmd args
\tcreate [-s] [-e] path [data]
\tdelete [-v version] path
\tdeleteall path
\tget [-s] [-w] path
\tls [-s] [-w] [-R] path
\tquit
\tset [-s] [-v version] path data
\tstat [-w] path"""


def _java_date(ms: int) -> str:
    """java.util.Date.toString: ``Mon Nov 27 17:26:23 UTC 2026``."""
    return time.strftime("%a %b %d %H:%M:%S %Z %Y", time.localtime(ms / 1000))


def _stat_lines(s: ZnodeStat) -> str:
    return "\n".join([
        f"cZxid = 0x{s.czxid:x}", f"ctime = {_java_date(s.ctime)}",
        f"mZxid = 0x{s.mzxid:x}", f"mtime = {_java_date(s.mtime)}",
        f"pZxid = 0x{s.pzxid:x}", f"cversion = {s.cversion}",
        f"dataVersion = {s.version}", f"aclVersion = {s.aversion}",
        f"ephemeralOwner = 0x{s.ephemeralOwner:x}", f"dataLength = {s.dataLength}",
        f"numChildren = {s.numChildren}"])


class Shell:
    """ZooKeeperMain's commands over one connection; ``out`` gets their output."""

    def __init__(self, conn: ZkConnection, out: Callable[[str], None] = print) -> None:
        self.conn = conn
        self.out = out

    def _call(self, what: str, path: str, issue: Callable[[Any], Any]) -> Any:
        try:
            return self.conn.call(what, path, issue)
        except BadVersionError:
            raise ToolError(f"version No is not valid : {path}") from None
        except ZkError as exc:
            raise ToolError(str(exc)) from None

    def run(self, words: list[str]) -> None:
        """Run one command; a failure is a ToolError with ZooKeeper's message."""
        name, rest = words[0], words[1:]
        if name not in _OPTIONS:
            raise ToolError(f"Command not found: {name}\n{_USAGE}")
        try:
            opts, params = getopt.gnu_getopt(rest, _OPTIONS[name])
        except getopt.GetoptError as exc:
            raise ToolError(f"{exc}\n{_USAGE}") from None
        flags = {o[1:]: v for o, v in opts}
        needed = {"set": 2}.get(name, 1)
        if len(params) < needed or (name not in ("create", "set") and len(params) > 1):
            raise ToolError(_USAGE)
        getattr(self, f"_{name}")(params[0], params[1:], flags)

    def _ls(self, path: str, _args: list[str], flags: dict[str, str]) -> None:
        if "R" in flags:
            self._ls_tree(path)
            return
        names, stat = self._call("ls", path, lambda zk: zk.get_children_async(path, None, True))
        self.out("[" + ", ".join(sorted(names)) + "]")
        if "s" in flags:
            self.out(_stat_lines(stat))

    def _ls_tree(self, path: str) -> None:
        self.out(path)
        for name in sorted(self._call("ls", path, lambda zk: zk.get_children_async(path))):
            self._ls_tree(f"{path.rstrip('/')}/{name}")

    def _get(self, path: str, _args: list[str], flags: dict[str, str]) -> None:
        data, stat = self._call("get", path, lambda zk: zk.get_async(path))
        self.out("null" if data is None else data.decode("utf-8", "replace"))
        if "s" in flags:
            self.out(_stat_lines(stat))

    def _stat(self, path: str, _args: list[str], _flags: dict[str, str]) -> None:
        stat = self._call("stat", path, lambda zk: zk.exists_async(path))
        if stat is None:
            raise ToolError(f"Node does not exist: {path}")
        self.out(_stat_lines(stat))

    def _create(self, path: str, args: list[str], flags: dict[str, str]) -> None:
        data = args[0].encode() if args else None
        created = self._call("create", path, lambda zk: zk.create_async(
            path, data, ephemeral="e" in flags, sequence="s" in flags))
        self.out(f"Created {created}")

    def _set(self, path: str, args: list[str], flags: dict[str, str]) -> None:
        version = self._version(flags)
        stat = self._call("set", path, lambda zk: zk.set_async(path, args[0].encode(), version))
        if "s" in flags:
            self.out(_stat_lines(stat))

    def _delete(self, path: str, _args: list[str], flags: dict[str, str]) -> None:
        version = self._version(flags)
        self._call("delete", path, lambda zk: zk.delete_async(path, version))

    def _deleteall(self, path: str, _args: list[str], _flags: dict[str, str]) -> None:
        for name in self._call("deleteall", path, lambda zk: zk.get_children_async(path)):
            self._deleteall(f"{path.rstrip('/')}/{name}", [], {})
        self._call("deleteall", path, lambda zk: zk.delete_async(path, -1))

    @staticmethod
    def _version(flags: dict[str, str]) -> int:
        text = flags.get("v", "-1")
        try:
            return int(text)
        except ValueError:
            raise ToolError(f"version {text!r} is not a number") from None


def _interactive(shell: Shell) -> int:
    status = 0
    for line in sys.stdin:
        try:
            words = shlex.split(line)
        except ValueError as exc:
            print(f"cannot parse {line.strip()!r}: {exc}", file=sys.stderr)
            status = 1
            continue
        if not words:
            continue
        if words[0] in ("quit", "exit"):
            break
        try:
            shell.run(words)
        except ToolError as exc:
            print(str(exc), file=sys.stderr, flush=True)
            status = 1
        sys.stdout.flush()
    return status


def _main(args: argparse.Namespace) -> int:
    words = list(args.command)
    timeout_ms = DEFAULT_TIMEOUT_MS
    while words and words[0] in ("-timeout", "-zk-tls-config-file"):
        if words[0] == "-zk-tls-config-file":
            raise ToolError("-zk-tls-config-file: pylog zookeeper-shell does not speak TLS to "
                            "ZooKeeper")
        if len(words) < 2 or not words[1].isdigit():
            raise ToolError("-timeout needs a number of milliseconds")
        timeout_ms, words = int(words[1]), words[2:]
    # kazoo's connection warnings would pile up on stderr; errors are reported once.
    quiet = logging.getLogger("pylog.zk")
    quiet.addHandler(logging.NullHandler())
    quiet.propagate = False
    print(f"Connecting to {args.connect}", flush=True)
    conn = ZkConnection(args.connect, timeout_ms, timeout_ms, create_chroot=False)
    try:
        conn.start()
    except ZkConnectError as exc:
        raise ToolError(f"Unable to connect to ZooKeeper: {exc}") from None
    try:
        interactive = not words
        if interactive:
            print("Welcome to ZooKeeper!\nJLine support is disabled", flush=True)
        print("\nWATCHER::\n\nWatchedEvent state:SyncConnected type:None path:null", flush=True)
        shell = Shell(conn)
        if interactive:
            return _interactive(shell)
        if words[0] not in ("quit", "exit"):
            shell.run(words)
        return 0
    finally:
        conn.close()


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("zookeeper-shell", help="browse and edit ZooKeeper's znodes "
                       "(zookeeper-shell)",
                       description="USAGE: pylog zookeeper-shell zookeeper_host:port[/path] "
                                   "[-timeout ms] [args...]",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog=_USAGE)
    p.add_argument("connect", metavar="zookeeper_host:port[/path]")
    p.add_argument("command", nargs=argparse.REMAINDER,
                   help="one command (default: read commands from stdin)")
    p.set_defaults(func=run_tool(_main))
