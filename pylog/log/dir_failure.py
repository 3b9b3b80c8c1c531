"""A log dir that failed an I/O operation is offline (Kafka's LogDirFailureChannel).

Kafka does not retry a log dir whose disk returned an error: the write may have
left it in a state nobody checked (a full disk, a failing device), so the first
``IOException`` of an append, roll, flush, checkpoint or deletion takes the
whole dir offline (``UnifiedLog.maybeHandleIOException``).  The request that
hit it is answered KAFKA_STORAGE_ERROR.  A broker whose every log dir is
offline halts, as does any KRaft broker of Kafka 3.6 when one dir fails
(``ReplicaManager``'s LogDirFailureHandler: "Halting broker because dir ... is
offline", ``Exit.halt(1)``): acknowledged data is in the page cache or on
disk, and the restart's recovery (the same as after ``kill -9``) checks it.

pylog keeps one log dir per node, so its first failure is the node's last.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)


class LogDirFailureChannel:
    """Where the log layer reports an I/O error in its dir; the owner (the
    broker) decides what offline means for the node (``on_offline``)."""

    def __init__(self, log_dir: str) -> None:
        self.log_dir = log_dir
        self.offline = False  # read on the produce path: one attribute test
        self.on_offline: Callable[[str], None] | None = None
        self._lock = threading.Lock()  # appends on the loop, flushes on the scheduler

    def fail(self, message: str, exc: BaseException) -> None:
        """Take the dir offline for ``exc`` (only the first report is acted on:
        the others are consequences of the same failure)."""
        with self._lock:
            first = not self.offline
            self.offline = True
        if not first:
            log.warning("%s (dir %s is already offline): %s", message, self.log_dir, exc)
            return
        log.error("%s: %s", message, exc)
        if self.on_offline is not None:
            self.on_offline(self.log_dir)
