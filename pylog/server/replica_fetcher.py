"""The follower's side of replication: fetchers that copy the leaders' logs
(Kafka's ReplicaFetcherManager and ReplicaFetcherThread).

One fetcher per (leader, ``num.replica.fetchers`` slot) on the node's event
loop: it fetches every partition it follows from that leader in one Fetch
(v12: ``replica_id``, current leader epoch, last fetched epoch), at each
partition's log end offset, long-polling with ``replica.fetch.wait.max.ms``
and ``replica.fetch.min.bytes``, at most ``replica.fetch.max.bytes`` per
partition and ``replica.fetch.response.max.bytes`` in all.  Per partition:

* records: appended as they came (``Log.append_as_follower``: validated
  natively, offsets and epochs kept), the producers in them recorded, the high
  watermark moved to the leader's (never past this log's end), the log start
  offset followed;
* a diverging epoch: the log is truncated to where that epoch ends on both
  sides, and fetching goes on from there (no acknowledged record is ever
  truncated: the leader's log holds everything its ISR acknowledged);
* OFFSET_OUT_OF_RANGE: this log ends past the leader's (truncate to it) or
  before the leader's start (start over at it), from ListOffsets;
* the leader changed or is fenced (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH,
  ...): the partition waits ``replica.fetch.backoff.ms`` for the controller's
  LeaderAndIsr to tell where to fetch now.

A leader that cannot be reached is retried after ``replica.fetch.backoff.ms``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from pylog.net.client import BrokerClient, BrokerUnavailable
from pylog.protocol import ApiKey, ErrorCode
from pylog.server import producer_state

if TYPE_CHECKING:
    from pylog.server.config import BrokerConfig
    from pylog.server.metadata_cache import MetadataCache
    from pylog.server.partition import Partition
    from pylog.server.replication_quota import ReplicationThrottles

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
FETCH_VERSION = 12
LATEST, EARLIEST = -1, -2
_RETRIABLE = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH,
                        ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.LEADER_NOT_AVAILABLE,
                        ErrorCode.CORRUPT_MESSAGE, ErrorCode.UNKNOWN_SERVER_ERROR})


class ReplicaFetcher:
    """Follows the partitions led by one broker."""

    def __init__(self, owner: ReplicaFetchers, leader: int, slot: int) -> None:
        self.owner = owner
        self.leader = leader
        self.slot = slot
        self.partitions: dict[TopicPartition, Partition] = {}
        self.delayed: dict[TopicPartition, float] = {}  # until (monotonic s)
        # Messages each partition is behind the leader's high watermark, as of
        # its last fetch (Kafka's FetcherLagMetrics, for the metrics page).
        self.lag: dict[TopicPartition, int] = {}
        self._wake = asyncio.Event()
        self.task = asyncio.get_running_loop().create_task(
            self._run(), name=f"replica-fetcher-{leader}-{slot}")

    def add(self, part: Partition) -> None:
        self.partitions[(part.topic, part.index)] = part
        self.delayed.pop((part.topic, part.index), None)
        self._wake.set()

    def remove(self, tp: TopicPartition) -> None:
        self.partitions.pop(tp, None)
        self.delayed.pop(tp, None)
        self.lag.pop(tp, None)

    def _ready(self) -> list[Partition]:
        now = time.monotonic()
        for tp, until in list(self.delayed.items()):
            if until <= now:
                del self.delayed[tp]
        return [p for tp, p in self.partitions.items()
                if tp not in self.delayed and p.log is not None and not p.log.closed
                and p.leader_id == self.leader]

    async def _run(self) -> None:
        cfg = self.owner.config
        backoff = cfg["replica.fetch.backoff.ms"] / 1000
        # The flag as well as the task's cancellation: a fetcher whose
        # cancellation was lost on the way (an await that swallows it) still
        # ends at its next turn, so the node's stop never waits for ever.
        while not self.owner.closing:
            ready = self._ready()
            if not ready:
                self._wake.clear()
                wait = min((u for u in self.delayed.values()), default=None)
                try:
                    async with asyncio.timeout(
                            None if wait is None else max(wait - time.monotonic(), 0.01)):
                        await self._wake.wait()
                except TimeoutError:
                    pass
                continue
            broker = self.owner.metadata.broker(self.leader)
            if broker is None:
                await asyncio.sleep(backoff)
                continue
            conn = self.owner.client.connection(self.leader, broker.host, broker.port)
            try:
                response = await conn.request(ApiKey.FETCH, self._request(ready),
                                              version=FETCH_VERSION)
            except BrokerUnavailable as exc:
                log.info("replica fetcher for broker %d: %s", self.leader, exc)
                await asyncio.sleep(backoff)
                continue
            if response.error_code:
                log.warning("replica fetch from broker %d failed: %s", self.leader,
                            ErrorCode(response.error_code).name)
                await asyncio.sleep(backoff)
                continue
            for topic in response.responses:
                for p in topic.partitions:
                    part = self.partitions.get((topic.topic, p.partition_index))
                    if part is not None:
                        await self._process(part, p, conn)

    def _request(self, ready: list[Partition]) -> dict[str, Any]:
        cfg = self.owner.config
        throttles = self.owner.throttles
        held = throttles is not None and throttles.follower.exceeded()
        topics: dict[str, list[dict[str, Any]]] = {}
        for part in ready:
            lg = part.log
            assert lg is not None
            if held and self._throttled(part):
                continue  # over follower.replication.throttled.rate: next time
            topics.setdefault(part.topic, []).append({
                "partition": part.index, "current_leader_epoch": part.leader_epoch,
                "fetch_offset": lg.log_end_offset, "last_fetched_epoch": lg.epochs.latest_epoch,
                "log_start_offset": lg.log_start_offset,
                "partition_max_bytes": cfg["replica.fetch.max.bytes"]})
        return {"replica_id": self.owner.node_id, "max_wait_ms": cfg["replica.fetch.wait.max.ms"],
                "min_bytes": cfg["replica.fetch.min.bytes"],
                "max_bytes": cfg["replica.fetch.response.max.bytes"], "isolation_level": 0,
                "session_id": 0, "session_epoch": -1, "rack_id": "",
                "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
                "forgotten_topics_data": []}

    def _throttled(self, part: Partition) -> bool:
        """A replica out of the ISR that the topic's throttle names (Kafka's
        shouldFollowerThrottle)."""
        throttles = self.owner.throttles
        return (throttles is not None and self.owner.node_id not in part.isr
                and throttles.follower_throttled(part.topic, part.index))

    def _delay(self, part: Partition) -> None:
        self.delayed[(part.topic, part.index)] = (
            time.monotonic() + self.owner.config["replica.fetch.backoff.ms"] / 1000)

    async def _process(self, part: Partition, p: Any, conn: Any) -> None:
        lg = part.log
        if lg is None or lg.closed or part.leader_id != self.leader:
            return
        if p.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
            await self._out_of_range(part, conn)
            return
        if p.error_code:
            if p.error_code not in _RETRIABLE:
                log.warning("replica fetch of %s-%d from broker %d: %s", part.topic, part.index,
                            self.leader, ErrorCode(p.error_code).name)
            self._delay(part)
            return
        diverging = p.diverging_epoch
        if diverging is not None and diverging.epoch >= 0:
            self._truncate_diverging(part, diverging.epoch, diverging.end_offset)
            return
        records = p.records
        if records:
            before = lg.log_end_offset
            try:
                _, positions = lg.append_as_follower(records)
            except OSError as exc:  # the disk refused: the dir goes offline, as a produce
                self.owner.fail(f"Error while appending replicated records to {part.topic}-"
                                f"{part.index}", exc)
                return
            except ValueError as exc:  # a batch that does not check out, or out of order
                log.error("replica fetch of %s-%d from broker %d at %d: %s", part.topic,
                          part.index, self.leader, before, exc)
                self._delay(part)
                return
            if self._throttled(part):
                self.owner.throttles.follower.record(len(records))  # type: ignore[union-attr]
            if part.producers is None:
                part.producers = producer_state.PartitionProducers()
            producer_state.follow_batches(part.producers, records, positions)
            lg.first_unstable_offset = part.producers.first_unstable_offset()
        self.lag[(part.topic, part.index)] = max(0, p.high_watermark - lg.log_end_offset)
        hw = min(p.high_watermark, lg.log_end_offset)
        if hw > lg.high_watermark:
            lg.high_watermark = hw
        if lg.log_start_offset < p.log_start_offset <= lg.high_watermark:
            lg.delete_records_before(p.log_start_offset)
        if records:
            part.notify()

    def _truncate_diverging(self, part: Partition, epoch: int, end_offset: int) -> None:
        """Kafka's truncateOnFetchResponse: cut to where the leader's epoch
        ends, or ours does if it ends earlier; then fetch again from there."""
        lg = part.log
        assert lg is not None
        mine_epoch, mine_end = lg.epochs.end_offset_for(epoch, lg.log_end_offset)
        target = end_offset if mine_end < 0 else min(end_offset, mine_end)
        log.warning("truncating %s-%d to %d: it diverged from leader %d at epoch %d "
                    "(leader ends it at %d, this log at %d)", part.topic, part.index, target,
                    self.leader, epoch, end_offset, mine_end)
        lg.truncate_to(target)
        self.owner.rebuild_producers(part)

    async def _out_of_range(self, part: Partition, conn: Any) -> None:
        """Kafka's handleOutOfRange: the leader's end below ours -> truncate to
        it; else we are below its start -> start over at its log start."""
        lg = part.log
        assert lg is not None
        try:
            leader_end = await self._list_offset(part, conn, LATEST)
            if leader_end < lg.log_end_offset:
                log.warning("truncating %s-%d to the leader's log end %d", part.topic,
                            part.index, leader_end)
                lg.truncate_to(max(leader_end, 0))
            else:
                start = await self._list_offset(part, conn, EARLIEST)
                log.warning("%s-%d restarts at the leader's log start %d", part.topic,
                            part.index, start)
                lg.truncate_fully_and_start_at(start)
            self.owner.rebuild_producers(part)
        except BrokerUnavailable as exc:
            log.info("replica fetcher for broker %d: %s", self.leader, exc)
            self._delay(part)

    async def _list_offset(self, part: Partition, conn: Any, timestamp: int) -> int:
        r = await conn.request(ApiKey.LIST_OFFSETS, {
            "replica_id": self.owner.node_id, "isolation_level": 0, "topics": [
                {"name": part.topic, "partitions": [
                    {"partition_index": part.index, "current_leader_epoch": part.leader_epoch,
                     "timestamp": timestamp}]}]})
        row = r.topics[0].partitions[0]
        if row.error_code:
            raise BrokerUnavailable(f"ListOffsets of {part.topic}-{part.index}: "
                                    f"{ErrorCode(row.error_code).name}")
        return row.offset


class ReplicaFetchers:
    """The fetchers of this node, one per leader (and slot)."""

    def __init__(self, node_id: int, config: BrokerConfig, metadata: MetadataCache,
                 fail: Any) -> None:
        self.node_id = node_id
        self.config = config
        self.metadata = metadata
        self.fail = fail  # (message, OSError): the log dir goes offline
        self.client = BrokerClient(f"replica-fetcher-{node_id}",
                                   request_timeout_s=config["replica.socket.timeout.ms"] / 1000)
        self._fetchers: dict[tuple[int, int], ReplicaFetcher] = {}
        self._where: dict[TopicPartition, tuple[int, int]] = {}
        self.throttles: ReplicationThrottles | None = None
        self.closing = False

    def follow(self, part: Partition, leader: int) -> None:
        """Fetch ``part`` from ``leader`` (instead of where it was fetched from)."""
        tp = (part.topic, part.index)
        slot = hash(tp) % self.config["num.replica.fetchers"]
        key = (leader, slot)
        old = self._where.get(tp)
        if old is not None and old != key:
            self._fetchers[old].remove(tp)
        fetcher = self._fetchers.get(key)
        if fetcher is None:
            fetcher = self._fetchers[key] = ReplicaFetcher(self, leader, slot)
        fetcher.add(part)
        self._where[tp] = key

    def unfollow(self, tp: TopicPartition) -> None:
        key = self._where.pop(tp, None)
        if key is not None:
            self._fetchers[key].remove(tp)

    def lags(self) -> list[tuple[str, TopicPartition, int]]:
        """(Kafka's fetcher client id, partition, messages behind the leader's
        high watermark) of every partition followed here that fetched."""
        return [(f"ReplicaFetcherThread-{slot}-{leader}", tp, lag)
                for (leader, slot), fetcher in self._fetchers.items()
                for tp, lag in fetcher.lag.items()]

    def rebuild_producers(self, part: Partition) -> None:
        """After a truncation: the producer state as the log now holds it."""
        if part.log is not None:
            part.producers = producer_state.load(part.log)

    async def close(self) -> None:
        """Every fetcher ended: cancelled, and its requests failed (the client
        closed), so one that the cancellation missed ends at once as well."""
        self.closing = True
        for fetcher in self._fetchers.values():
            fetcher.task.cancel()
        self.client.close()
        await asyncio.gather(*(f.task for f in self._fetchers.values()),
                             return_exceptions=True)
        self._fetchers.clear()
