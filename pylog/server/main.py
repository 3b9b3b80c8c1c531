"""``pylog broker``: load the config, run one node until SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import Sequence

from pylog.server.config import BrokerConfig, ConfigError

log = logging.getLogger("pylog.broker")


async def serve(config: BrokerConfig) -> None:
    from pylog.server.broker import Broker

    broker = Broker(config)
    await broker.start()
    ep = broker.listener
    # Tests and scripts wait for this exact line.
    print(f"pylog broker: node {broker.node_id} listening on {ep.host or '0.0.0.0'}:{ep.port}, "
          f"data in {broker.log_dir}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("shutting down")
    await broker.stop()
    print(f"pylog broker: node {broker.node_id} stopped", flush=True)


def run(config_path: str | None, overrides: Sequence[str], nodes: int = 1) -> int:
    logging.basicConfig(level=os.environ.get("PYLOG_LOG_LEVEL", "WARNING").upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if nodes != 1:
        print("pylog broker: --nodes other than 1 is not supported yet", file=sys.stderr)
        return 2
    try:
        config = BrokerConfig.load(config_path, overrides)
    except ConfigError as exc:
        print(f"pylog broker: {exc}", file=sys.stderr)
        return 2
    try:
        asyncio.run(serve(config))
    except OSError as exc:  # the port is taken, the log dir is not writable, ...
        print(f"pylog broker: {exc}", file=sys.stderr)
        return 1
    except ValueError as exc:  # meta.properties of another node or cluster
        print(f"pylog broker: {exc}", file=sys.stderr)
        return 1
    return 0
