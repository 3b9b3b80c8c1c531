"""Producer ids for InitProducerId: unique per node alone, per cluster in one.

* :class:`ProducerIds`, the single node: blocks of ids whose end is made
  durable in ``<log dir>/pylog-producer-ids`` before the block's first id is
  handed out, so a restarted node never gives out an id twice.
* :class:`BlockProducerIds`, a cluster node (Kafka's ``ZkProducerIdManager``):
  blocks taken by compare-and-set on ZooKeeper's ``/latest_producer_id_block``,
  so no two nodes give out one id.  The first block is taken as the node
  starts and the next one fetched in the background once 90% of the current
  one is spent, so handing out an id never waits on ZooKeeper, and
  idempotent producers keep getting ids while ZooKeeper is away (until the
  blocks in hand run out: then COORDINATOR_NOT_AVAILABLE, which clients retry).
"""

from __future__ import annotations

import concurrent.futures
import logging
from collections.abc import Callable
from pathlib import Path

from pylog.log.durable import write_atomically

log = logging.getLogger(__name__)

ID_BLOCK = 1000
ID_FILE = "pylog-producer-ids"
# Kafka's ProducerIdManager.PidPrefetchThreshold: fetch the next block once
# this share of the current one is handed out.
PREFETCH_AT = 0.9


class ProducerIdsUnavailable(Exception):
    """No producer id can be handed out now (a cluster's ZooKeeper is away)."""


class ProducerIds:
    """Allocates producer ids; persists the end of the current block first."""

    def __init__(self, log_dir: Path) -> None:
        self.path = Path(log_dir) / ID_FILE
        try:
            start = int(self.path.read_text().strip())
        except (OSError, ValueError):
            start = 0
        self._next = start
        self._block_end = start

    def next_id(self) -> int:
        if self._next >= self._block_end:
            self._block_end = self._next + ID_BLOCK
            # Durable before the first id of the block is handed out.
            write_atomically(self.path, f"{self._block_end}\n".encode())
        pid = self._next
        self._next += 1
        return pid


class BlockProducerIds:
    """Producer ids from blocks ``allocate()`` takes: (first, last) id of the
    next block, a blocking call (ZooKeeper) made on a thread of this object's
    own; :meth:`next_id` is called from the event loop and never blocks."""

    def __init__(self, allocate: Callable[[], tuple[int, int]]) -> None:
        self._allocate = allocate
        self._next = 0
        self._last = -1
        self._prefetch_from = 0
        self._pending: concurrent.futures.Future[tuple[int, int]] | None = None
        self._thread = concurrent.futures.ThreadPoolExecutor(
            1, thread_name_prefix="producer-id-blocks")

    def start(self) -> None:
        """The first block, now (the node starting, connected to ZooKeeper);
        if that fails, it is asked for again in the background."""
        try:
            self._take(self._allocate())
        except Exception as exc:
            log.warning("no producer id block at start: %s; asking again when one is needed",
                        exc)

    def next_id(self) -> int:
        if self._next > self._last:
            block = self._fetched()
            if block is None:
                self._fetch()
                raise ProducerIdsUnavailable("no producer id block yet (ZooKeeper away?)")
            self._take(block)
        pid = self._next
        self._next += 1
        if pid >= self._prefetch_from:
            self._fetch()
        return pid

    @property
    def next_block_ready(self) -> bool:
        """The next block has been fetched (or its fetch has failed)."""
        return self._pending is not None and self._pending.done()

    def close(self) -> None:
        self._thread.shutdown(wait=False, cancel_futures=True)

    def _take(self, block: tuple[int, int]) -> None:
        first, last = block
        self._next, self._last = first, last
        self._prefetch_from = first + int((last - first + 1) * PREFETCH_AT)

    def _fetch(self) -> None:
        if self._pending is None:
            self._pending = self._thread.submit(self._allocate)

    def _fetched(self) -> tuple[int, int] | None:
        """The block fetched in the background, if it has come; a failed
        fetch is logged and forgotten (the next call asks again)."""
        pending = self._pending
        if pending is None or not pending.done():
            return None
        self._pending = None
        try:
            return pending.result()
        except Exception as exc:
            log.warning("no producer id block: %s", exc)
            return None
