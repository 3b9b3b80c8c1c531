"""``pylog broker``: load the config, run one node until SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio
import logging
import os
import resource
import signal
import sys
import time
from collections.abc import Callable, Sequence

from pylog.log.errors import LogError
from pylog.server.config import BrokerConfig, ConfigError
from pylog.server.zk_node import ClusterMembershipError
from pylog.zk.errors import ZkError

log = logging.getLogger("pylog.broker")

# The event loop: uvloop (libuv, in C) by default, asyncio's own selector loop
# with PYLOG_EVENT_LOOP=asyncio.  Every loop-dependent part of the broker works
# on both, and the tests run brokers on both.  uvloop runs the loop, the
# transports and the socket reads in C: the interpreter's share of the broker's
# CPU falls from about 40% to 28% on 100-byte produce load, and
# benchmarks/bench_event_loop.py measures 0-8% less broker CPU per GB there (3
# runs; at 1 KiB the page cache dominates and the VM's swings hide any difference).
EVENT_LOOPS = ("uvloop", "asyncio")


def event_loop_factory(name: str | None = None) -> Callable[[], asyncio.AbstractEventLoop]:
    """The new-loop function for ``name`` (default: $PYLOG_EVENT_LOOP, else
    uvloop where it is installed, else asyncio's)."""
    chosen = name or os.environ.get("PYLOG_EVENT_LOOP")
    if chosen == "asyncio":
        return asyncio.new_event_loop
    if chosen in ("uvloop", None):
        try:
            import uvloop
        except ImportError:
            if chosen is None:  # a platform without uvloop (Windows): the default loop
                return asyncio.new_event_loop
            raise ValueError("PYLOG_EVENT_LOOP=uvloop but uvloop is not installed") from None
        return uvloop.new_event_loop
    raise ValueError(f"PYLOG_EVENT_LOOP={chosen!r}: expected one of {', '.join(EVENT_LOOPS)}")


def raise_open_files_limit() -> int:
    """Lift the soft RLIMIT_NOFILE to the hard one, as the JVM does for Kafka
    at start (-XX:+MaxFDLimit, on by default): each partition holds five
    descriptors (its segment, and each index twice: the file and the mmap's
    own dup), so a soft limit of 1024 stops a node near 200 partitions.  The
    limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        # An unlimited hard limit is no number to ask for: take the kernel's
        # ceiling for one process instead.
        target = hard
        if hard == resource.RLIM_INFINITY:
            try:
                with open("/proc/sys/fs/nr_open") as f:
                    target = int(f.read())
            except (OSError, ValueError):
                target = soft
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (OSError, ValueError) as exc:
            log.warning("could not raise the open files limit from %d to %d: %s",
                        soft, target, exc)
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def quiet_accept_errors(loop: asyncio.AbstractEventLoop, every_s: float = 10.0) -> None:
    """Out of descriptors, asyncio's own loop reports each failed accept with
    a traceback, up to its backlog (1024) times per wake-up and again after
    every 1 s retry it schedules (CPython 3.11: hundreds of MB of log in
    seconds).  One line per ``every_s`` says the same, and the retries it
    scheduled, when they run after the listener closed (at shutdown), fail on
    the closed socket unheard; other errors go to the loop's default handler.
    (uvloop's libuv accepts and closes the queued connections instead, without
    a word.)"""
    last = -every_s

    def handle(loop: asyncio.AbstractEventLoop, context: dict) -> None:
        nonlocal last
        callback = getattr(context.get("handle"), "_callback", None)
        if getattr(callback, "__name__", None) == "_start_serving":
            return
        if context.get("message") != "socket.accept() out of system resource":
            loop.default_exception_handler(context)
            return
        now = time.monotonic()
        if now - last >= every_s:
            last = now
            log.error("cannot accept connections: %s (open files limit %d); they wait in "
                      "the backlog until descriptors free up", context.get("exception"),
                      resource.getrlimit(resource.RLIMIT_NOFILE)[0])

    loop.set_exception_handler(handle)


async def serve(config: BrokerConfig) -> None:
    from pylog.server.broker import Broker

    quiet_accept_errors(asyncio.get_running_loop())
    broker = Broker(config)
    await broker.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    ep = broker.listener
    # Tests and scripts wait for this exact line, and may send SIGTERM as soon
    # as they read it: the handlers are in place first.
    print(f"pylog broker: node {broker.node_id} listening on {ep.host or '0.0.0.0'}:{ep.port}, "
          f"data in {broker.log_dir}", flush=True)
    await stop.wait()
    log.info("shutting down")
    await broker.stop()
    try:
        print(f"pylog broker: node {broker.node_id} stopped", flush=True)
    except BrokenPipeError:
        # Whoever read our stdout (a killed supervisor) is gone; the stop
        # itself went fine and the exit status says so. stdout points at
        # /dev/null so the interpreter's final flush has nowhere to fail.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def run(config_path: str | None, overrides: Sequence[str]) -> int:
    """One node, until SIGTERM/SIGINT (``pylog broker``; a cluster on this
    host is pylog.cluster's supervisor, which runs this in each node)."""
    logging.basicConfig(level=os.environ.get("PYLOG_LOG_LEVEL", "WARNING").upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = BrokerConfig.load(config_path, overrides)
        loop_factory = event_loop_factory()
    except (ConfigError, ValueError) as exc:
        print(f"pylog broker: {exc}", file=sys.stderr)
        return 2
    log.info("open files limit: %d", raise_open_files_limit())
    try:
        with asyncio.Runner(loop_factory=loop_factory) as runner:
            runner.run(serve(config))
    except OSError as exc:  # the port is taken, the log dir is not writable, ...
        print(f"pylog broker: {exc}", file=sys.stderr)
        return 1
    except (ValueError, LogError, ZkError, ClusterMembershipError) as exc:
        # meta.properties of another node or cluster; the log dir locked by
        # another broker (LogDirLockedError); ZooKeeper unreachable
        # (zookeeper.connection.timeout.ms), the node id registered by
        # another broker, the wrong cluster
        print(f"pylog broker: {exc}", file=sys.stderr)
        return 1
    return 0
