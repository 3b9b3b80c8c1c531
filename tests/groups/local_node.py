"""The coordinators wired as the single node wires them (pylog.server.broker),
in process: a real log dir, topic registry and replica manager, the internal
topics led here (pylog.server.internal_topics).  No broker, no network."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pylog.coordinator import CoordinatorConfig, GroupCoordinator
from pylog.coordinator.offsets_store import OFFSETS_TOPIC
from pylog.coordinator.transactions import TransactionCoordinator, TxnConfig
from pylog.coordinator.txn_log import TXN_TOPIC
from pylog.log import LogConfig, LogManager
from pylog.server.internal_topics import (
    LocalInternalTopic,
    elect_on_creation,
    registry_partition_count,
)
from pylog.server.producer_ids import ProducerIds
from pylog.server.replica_manager import ReplicaManager
from pylog.server.topics import TopicRegistry


class LocalNode:
    """One node's log dir with its coordinators (made on demand)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.logs = LogManager(path, LogConfig())
        self.topics = TopicRegistry(self.logs, LogConfig())
        self.replicas = ReplicaManager(self.logs, 0, lambda: 86_400_000)
        self.internal: list[LocalInternalTopic] = []

    def _lead(self, topic: LocalInternalTopic, coordinator: Any) -> None:
        topic.lead(coordinator)
        self.internal.append(topic)
        elect_on_creation(self.topics, self.internal)

    def groups(self, config: CoordinatorConfig, clock: Callable[[], int]) -> GroupCoordinator:
        topic = LocalInternalTopic(OFFSETS_TOPIC, self.topics, self.replicas)
        c = GroupCoordinator(topic, registry_partition_count(self.topics), config,
                             time_ms=clock)
        c.store.on_txn_write = self.replicas.offsets_txn_written
        self.replicas.offsets_marker = c.complete_txn
        self._lead(topic, c)
        return c

    def txns(self, write_marker: Callable[..., object], config: TxnConfig,
             clock: Callable[[], int]) -> TransactionCoordinator:
        topic = LocalInternalTopic(TXN_TOPIC, self.topics, self.replicas)
        c = TransactionCoordinator(topic, ProducerIds(self.path), write_marker, config,
                                   time_ms=clock)
        self._lead(topic, c)
        return c

    def crash(self) -> None:
        """The process holding the log dir dies: no clean close, and the
        kernel drops its lock on the dir."""
        self.logs.dir_lock.release()

    def close(self) -> None:
        self.logs.close()
        self.replicas.snapshot_executor.shutdown()


class Markers:
    """Where the coordinator's markers go: what was asked is recorded."""

    def __init__(self) -> None:
        self.written: list[tuple[str, int, int, int, bool]] = []
        self.coordinator_epochs: list[int] = []

    def __call__(self, topic: str, partition: int, pid: int, epoch: int, commit: bool,
                 coordinator_epoch: int) -> None:
        self.written.append((topic, partition, pid, epoch, commit))
        self.coordinator_epochs.append(coordinator_epoch)


class HeldExecutor(ThreadPoolExecutor):
    """Runs what it is given only when the test says so (:meth:`release`):
    a load's read stays in flight while the test acts."""

    def __init__(self) -> None:
        super().__init__(max_workers=1)
        self.gate = threading.Event()
        self.submitted = 0

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        self.submitted += 1

        def held() -> Any:
            self.gate.wait()
            return fn(*args, **kwargs)

        return super().submit(held)

    def release(self) -> None:
        self.gate.set()
