"""Which partitions of its internal topic a coordinator owns, and their loads.

Kafka's coordinators live where the leaders of their internal topic's
partitions are: a node coordinates a key only while it leads the key's
partition.  When it becomes leader (``onElection``), the coordinator loads
that partition's state from its log; when it stops (``onResignation``), it
drops it.  A partition is *loading* from its election until its state is
applied, *owned* after, neither after its resignation: requests for a key of
a loading partition get COORDINATOR_LOAD_IN_PROGRESS, of a partition neither
owned nor loading NOT_COORDINATOR.

Each election and resignation carries the partition's leader epoch (the
coordinator epoch); one older than the newest seen is stale and ignored
(Kafka's ``maybeUpdateCoordinatorEpoch``).  A big partition is read off the
event loop and applied on it; every election gives its load a token, and a
resignation (or a failed read) takes it away, so a read that finishes after
its partition was resigned is dropped, never applied (Kafka's epoch-guarded
``scheduleLoadGroupAndOffsets``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import Executor
from typing import TYPE_CHECKING, Generic, TypeVar

from pylog.protocol import ErrorCode

if TYPE_CHECKING:
    from pylog.coordinator.offsets_store import OffsetsStore

log = logging.getLogger(__name__)

T = TypeVar("T")


class LoadToken:
    """One election's load; compared by identity."""

    __slots__ = ("epoch",)

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch


class Ownership:
    """The owned and loading partitions of one internal topic, with their epochs."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.owned: set[int] = set()
        self._loading: dict[int, LoadToken] = {}
        self._epochs: dict[int, int] = {}

    def error(self, partition: int) -> int:
        """NONE when ``partition`` is owned here, else the code a request for
        one of its keys gets."""
        if partition in self.owned:
            return ErrorCode.NONE
        if partition in self._loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NOT_COORDINATOR

    @property
    def loading(self) -> bool:
        """Some partition is loading (ListGroups and ListTransactions say so)."""
        return bool(self._loading)

    def partitions(self) -> set[int]:
        """The partitions owned or loading."""
        return self.owned | set(self._loading)

    def epoch(self, partition: int) -> int:
        """The coordinator epoch of ``partition`` (its newest leader epoch seen)."""
        return self._epochs.get(partition, 0)

    def _stale(self, partition: int, epoch: int, what: str) -> bool:
        current = self._epochs.get(partition)
        if current is not None and epoch < current:
            log.info("ignoring the %s of %s-%d in epoch %d: its epoch is already %d",
                     what, self.topic, partition, epoch, current)
            return True
        self._epochs[partition] = epoch
        return False

    def elect(self, partition: int, epoch: int) -> LoadToken | None:
        """This node leads ``partition`` at ``epoch``: the partition is loading
        from now, under the returned token.  None when there is nothing to
        load: a stale epoch, or a partition already owned or loading (only its
        epoch moves, as in Kafka)."""
        if self._stale(partition, epoch, "election"):
            return None
        if partition in self.owned or partition in self._loading:
            return None
        token = self._loading[partition] = LoadToken(epoch)
        return token

    def finish(self, partition: int, token: LoadToken) -> bool:
        """The load of ``token`` was read: True when it is still the
        partition's current load (the partition is owned from now, and the
        caller applies what was read), False when it was superseded."""
        if self._loading.get(partition) is not token:
            log.info("dropping a load of %s-%d in epoch %d: the partition was resigned "
                     "meanwhile", self.topic, partition, token.epoch)
            return False
        del self._loading[partition]
        self.owned.add(partition)
        return True

    def abandon(self, partition: int, token: LoadToken) -> None:
        """The load of ``token`` failed: the partition is neither loading nor
        owned (its keys get NOT_COORDINATOR until it is elected again)."""
        if self._loading.get(partition) is token:
            del self._loading[partition]

    def resign(self, partition: int, epoch: int | None = None) -> bool:
        """This node no longer leads ``partition`` (``epoch``: the new leader
        epoch, None when unknown, as for a deleted topic): True when it was
        owned or loading, False when not or when ``epoch`` is stale."""
        if epoch is not None and self._stale(partition, epoch, "resignation"):
            return False
        was = partition in self.owned or partition in self._loading
        self.owned.discard(partition)
        self._loading.pop(partition, None)
        return was

    def load(self, partition: int, token: LoadToken, read: Callable[[], T],
             apply: Callable[[T], None], executor: Executor | None) -> asyncio.Future[bool]:
        """Run ``read`` on ``executor`` (the loop's default one when None),
        then, back on the loop, ``apply`` its result unless the load was
        superseded meanwhile.  The returned future says whether it applied;
        a failed read is logged and leaves the partition not owned."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[bool] = loop.create_future()

        def finished(read_done: asyncio.Future[T]) -> None:
            applied = False
            try:
                if read_done.cancelled() or read_done.exception() is not None:
                    if not read_done.cancelled():
                        log.error("loading %s-%d failed", self.topic, partition,
                                  exc_info=read_done.exception())
                    self.abandon(partition, token)
                elif self.finish(partition, token):
                    apply(read_done.result())
                    applied = True
            except Exception:
                log.exception("applying the load of %s-%d failed", self.topic, partition)
            finally:
                if not done.done():
                    done.set_result(applied)

        try:
            work = loop.run_in_executor(executor, read)
        except RuntimeError:  # the executor was shut down: the node is stopping
            self.abandon(partition, token)
            done.set_result(False)
            return done
        work.add_done_callback(finished)
        return done

    def load_now(self, partition: int, token: LoadToken, read: Callable[[], T],
                 apply: Callable[[T], None]) -> bool:
        """:meth:`load` on the caller's thread, at once (a node's start,
        before it serves anything; a partition just created, with nothing to
        read).  A failed read leaves the partition not owned and raises."""
        try:
            found = read()
        except BaseException:
            self.abandon(partition, token)
            raise
        if not self.finish(partition, token):
            return False
        apply(found)
        return True


def _done(value: bool) -> asyncio.Future[bool]:
    fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
    fut.set_result(value)
    return fut


class PartitionedCoordinator(Generic[T]):
    """Election and resignation as both coordinators take them.

    A subclass says how a partition is read (:meth:`_reader`, on the loop;
    the function it returns runs on any thread), how what was read joins its
    state (:meth:`_loaded`, on the loop) and how a partition's state leaves
    it (:meth:`_unload`)."""

    ownership: Ownership
    store: OffsetsStore

    def _reader(self, partition: int, high_watermark: int | None) -> Callable[[], T]:
        raise NotImplementedError

    def _loaded(self, partition: int, found: T) -> None:
        raise NotImplementedError

    def _unload(self, partition: int) -> int:
        raise NotImplementedError

    def _load_started(self, partition: int) -> None:
        """A load of ``partition`` begins (a hook)."""

    @property
    def loading(self) -> bool:
        """Some partition is loading."""
        return self.ownership.loading

    def _elect(self, partition: int, epoch: int, high_watermark: int | None
               ) -> tuple[LoadToken, Callable[[], T]] | None:
        token = self.ownership.elect(partition, epoch)
        if token is None:
            return None
        self._load_started(partition)
        try:
            return token, self._reader(partition, high_watermark)
        except BaseException:
            self.ownership.abandon(partition, token)
            raise

    def on_elected(self, partition: int, epoch: int,
                   high_watermark: int | None = None) -> asyncio.Future[bool]:
        """This node leads ``partition`` at ``epoch`` (Kafka's onElection),
        on the loop: the partition is read on the store's executor, up to its
        log end now (or ``high_watermark``), and its state added on the loop;
        until then its keys get COORDINATOR_LOAD_IN_PROGRESS.  Nothing to read
        (``high_watermark`` 0) makes it owned at once.  The future says
        whether the load was applied (False: a stale epoch, a partition
        already owned, a resignation meanwhile, a failed read)."""
        try:
            started = self._elect(partition, epoch, high_watermark)
        except Exception:
            log.exception("cannot load %s-%d", self.ownership.topic, partition)
            return _done(False)
        if started is None:
            return _done(False)
        token, read = started

        def apply(found: T) -> None:
            self._loaded(partition, found)

        if high_watermark == 0:
            return _done(self.ownership.load_now(partition, token, read, apply))
        return self.ownership.load(partition, token, read, apply, self.store.executor)

    def load_partition(self, partition: int, epoch: int,
                       high_watermark: int | None = None) -> bool:
        """:meth:`on_elected` at once, on the caller's thread: what a node
        does at its start, before it serves anything, and for partitions it
        just created.  Raises what reading the partition raises."""
        started = self._elect(partition, epoch, high_watermark)
        if started is None:
            return False
        token, read = started
        return self.ownership.load_now(partition, token, read,
                                       lambda found: self._loaded(partition, found))

    def on_resigned(self, partition: int, epoch: int | None = None) -> int:
        """This node no longer leads ``partition`` (Kafka's onResignation;
        ``epoch``: the new leader epoch, None when unknown): its state is
        dropped, and a load still running for it will not be applied.
        Returns how many keys (groups, transactional ids) were unloaded."""
        if not self.ownership.resign(partition, epoch):
            return 0
        return self._unload(partition)
