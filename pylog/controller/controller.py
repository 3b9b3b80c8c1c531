"""The controller of a ZooKeeper-mode cluster (Kafka's KafkaController).

Every node runs one :class:`Controller`; it is active on the node that
created the ephemeral ``/controller`` znode (with ``/controller_epoch``
bumped in the same transaction), and goes back to waiting when that znode
goes to another node or its ZooKeeper session expires.  The controller epoch
fences an old controller twice over: its ZooKeeper writes are made against
the epoch znode's version (a newer controller's bump fails them with
ControllerMovedError), and the brokers refuse its requests once they have
seen a newer epoch (STALE_CONTROLLER_EPOCH).

The active controller keeps :class:`ControllerContext` and handles one event
at a time on the node's event loop (Kafka's ControllerEventManager), its
ZooKeeper calls on a thread of its own:

* **brokers** come and go (``/brokers/ids``): a dead broker's partitions get
  a new leader from their live ISR (none: offline, leader -1, unless
  ``unclean.leader.election.enable`` lets an out-of-sync replica lead), and it
  leaves the ISRs; a new broker gets the whole metadata, LeaderAndIsr for its
  replicas, and offline partitions it can lead are brought back;
* **topics** are created (``/brokers/topics``) or grow (a topic znode's
  data): each new partition's first live replica leads, the live replicas
  form the ISR, its state znode is written, and the replicas are told;
* **topics are deleted** (``/admin/delete_topics``): the brokers drop them
  from their metadata, the replicas delete them (StopReplica), and once every
  replica acknowledged, the znodes go; a replica on a dead broker holds the
  deletion until it returns;
* **controlled shutdown** (the ControlledShutdown API): leadership moves off
  the broker that asked, for partitions with another in-sync replica;
* **ISR changes** the leaders made (``/isr_change_notification``) reach every
  broker's metadata.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pylog.controller import requests as build
from pylog.controller.channel import ControllerChannel
from pylog.controller.context import NO_LEADER, ControllerContext, TopicPartition
from pylog.protocol import ApiKey, ErrorCode
from pylog.zk.client import KafkaZkClient, SessionEvent
from pylog.zk.connection import Watch
from pylog.zk.errors import ControllerMovedError, NodeExistsError, ZkError
from pylog.zk.znodes import LeaderIsrState

log = logging.getLogger(__name__)

# Events a request waits on: their payload ends with the future of its answer.
_ANSWERED = frozenset({"shutdown", "elect", "reassign"})
# Events queued once with their latest payload (Controller._enqueue).
_LATEST_ONLY = frozenset({"isr_changes"})
_LATEST: Any = object()


class Controller:
    def __init__(self, broker_id: int, zk: KafkaZkClient, *, listener: str = "PLAINTEXT",
                 delete_topic_enable: bool = True,
                 unclean_election: Callable[[str], bool] = lambda topic: False,
                 request_timeout_s: float = 30.0) -> None:
        self.broker_id = broker_id
        self.zk = zk
        self.listener = listener  # inter.broker.listener.name: how brokers are reached
        self.delete_topic_enable = delete_topic_enable
        self.unclean_election = unclean_election  # topic -> unclean.leader.election.enable
        self.request_timeout_s = request_timeout_s
        self.active = False
        self.epoch = -1
        self.epoch_zk_version = -1
        self.ctx = ControllerContext()
        self.channel: ControllerChannel | None = None
        # Counters for the metrics (Kafka's ControllerStats and gauges).
        self.unclean_elections = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._events: asyncio.Queue[tuple[str, Any]] | None = None
        self._latest: dict[str, Any] = {}  # kind -> the payload of its queued event
        self._task: asyncio.Task | None = None
        self._zk_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pylog-controller")
        self._watches: list[Watch] = []
        self._topic_watches: dict[str, Watch] = {}
        self._controller_watch: Watch | None = None
        # Partitions /admin/reassign_partitions asked to move, still moving.
        self._zk_moving: dict[TopicPartition, list[int]] = {}
        self.on_change: Callable[[], None] | None = None  # told when this node becomes/stops

    # -- life cycle --------------------------------------------------------------------

    async def start(self) -> None:
        """Start waiting for (or taking) the controller role."""
        self._loop = asyncio.get_running_loop()
        self._events = asyncio.Queue()
        self._task = self._loop.create_task(self._process(), name="controller-events")
        self.zk.add_state_listener(self._on_session_event)
        self._controller_watch = await self._zk(
            self.zk.watch_controller, lambda cid: self._post("reelect", cid))

    async def stop(self) -> None:
        """This node stops: give the role up (deleting /controller, so another
        node takes over at once rather than after the session timeout)."""
        self.zk.remove_state_listener(self._on_session_event)
        if self._controller_watch is not None:
            self._controller_watch.cancel()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self.active:
            self._resign("this node is stopping")
            await self._delete_controller_znode()
        self._zk_thread.shutdown(wait=False, cancel_futures=True)

    async def _delete_controller_znode(self) -> None:
        # Without a connection the delete would only wait out the connection
        # timeout; the ephemeral goes with the session anyway.
        if not self.zk.connected:
            log.info("ZooKeeper is not connected: /controller goes with the session")
            return
        try:
            await self._zk(self.zk.delete_controller, None)
        except ZkError as exc:
            log.info("could not delete /controller on the way out: %s", exc)

    async def _zk(self, fn: Callable[..., Any], *args: Any) -> Any:
        assert self._loop is not None
        return await self._loop.run_in_executor(self._zk_thread, functools.partial(fn, *args))

    def _post(self, kind: str, payload: Any = None) -> None:
        """From any thread (ZooKeeper's watch callbacks): queue an event."""
        loop, events = self._loop, self._events
        if loop is None or events is None or loop.is_closed():
            return
        try:
            loop.call_soon_threadsafe(self._enqueue, events, kind, payload)
        except RuntimeError:
            pass  # the loop closed meanwhile

    def _enqueue(self, events: asyncio.Queue, kind: str, payload: Any) -> None:
        """On the loop: an event of a kind where only the latest counts
        (each ISR change notice's watch hands over all the notices there
        are) waits in the queue once, with the latest payload: a node
        rejoining fifty ISRs would otherwise queue fifty passes over the
        same notices ahead of, say, a controlled shutdown."""
        if kind in _LATEST_ONLY:
            queued = kind in self._latest
            self._latest[kind] = payload
            if queued:
                return
            payload = _LATEST
        events.put_nowait((kind, payload))

    def _on_session_event(self, event: SessionEvent) -> None:
        if event is SessionEvent.SESSION_LOST:
            self._post("session_lost")
        elif event is SessionEvent.SESSION_ESTABLISHED:
            self._post("reelect")

    async def _process(self) -> None:
        assert self._events is not None
        handlers = {"reelect": self._reelect, "session_lost": self._session_lost,
                    "brokers": self._brokers_changed, "topics": self._topics_changed,
                    "topic": self._topic_changed, "deletions": self._deletions,
                    "isr_changes": self._isr_changes, "shutdown": self._controlled_shutdown,
                    "elect_offline": self._elect_offline, "elect": self._elect_leaders,
                    "rebalance": self._rebalance, "reassign": self._reassign,
                    "stop_replica_done": self._stop_replica_done,
                    "zk_reassign": self._zk_reassign, "zk_preferred": self._zk_preferred}
        while True:
            kind, payload = await self._events.get()
            if payload is _LATEST:
                payload = self._latest.pop(kind)
            if kind != "reelect" and kind != "session_lost" and not self.active:
                if kind in _ANSWERED:
                    payload[-1].set_result((ErrorCode.NOT_CONTROLLER, []))
                continue
            try:
                await handlers[kind](payload)
            except ControllerMovedError as exc:
                self._resign(str(exc))
            except ZkError as exc:
                # ZooKeeper unreachable: the event is lost, but the state it
                # would have changed is read again when the session returns
                # (a re-election reloads everything).
                log.error("controller event %s failed: %s", kind, exc)
                if kind in _ANSWERED and not payload[-1].done():
                    payload[-1].set_result((ErrorCode.UNKNOWN_SERVER_ERROR, []))
            except Exception:
                log.exception("controller event %s failed", kind)
                if kind in _ANSWERED and not payload[-1].done():
                    payload[-1].set_result((ErrorCode.UNKNOWN_SERVER_ERROR, []))

    # -- election ----------------------------------------------------------------------

    async def _reelect(self, _: Any = None) -> None:
        current = await self._zk(self.zk.get_controller_id)
        if self.active and current != self.broker_id:
            self._resign(f"/controller now names {current}")
        if current is not None:
            return
        try:
            epoch, version = await self._zk(self.zk.register_controller_and_increment_epoch,
                                            self.broker_id)
        except (ControllerMovedError, NodeExistsError):
            return  # another node won
        await self._become(epoch, version)

    async def _session_lost(self, _: Any = None) -> None:
        if self.active:
            self._resign("the ZooKeeper session expired")

    def _resign(self, why: str) -> None:
        if not self.active:
            return
        log.info("node %d resigns as controller (epoch %d): %s", self.broker_id, self.epoch, why)
        self.active = False
        for w in self._watches + list(self._topic_watches.values()):
            w.cancel()
        self._watches, self._topic_watches = [], {}
        self._zk_moving = {}
        if self.channel is not None:
            self.channel.close()
            self.channel = None
        self.ctx = ControllerContext()
        if self.on_change is not None:
            self.on_change()

    async def _become(self, epoch: int, epoch_zk_version: int) -> None:
        """Kafka's onControllerFailover: read the cluster from ZooKeeper, elect
        what has no leader, and tell every broker everything."""
        log.info("node %d is the controller (epoch %d)", self.broker_id, epoch)
        self.active = True
        self.epoch, self.epoch_zk_version = epoch, epoch_zk_version
        self.ctx = ctx = ControllerContext()
        self.channel = ControllerChannel(f"controller-{self.broker_id}", self.request_timeout_s)
        zk = self.zk
        brokers = await self._zk(zk.get_all_brokers)
        ctx.brokers = {b.id: b for b in brokers}
        ctx.assignments = await self._zk(zk.get_topic_assignments)
        ctx.states = await self._zk(zk.get_partition_states, ctx.partitions())
        for b in brokers:
            self._connect(b.id)
        for topic in ctx.assignments:
            await self._watch_topic(topic)
        self._watches = [
            await self._zk(zk.watch_broker_ids, lambda ids: self._post("brokers", ids)),
            await self._zk(zk.watch_topics, lambda names: self._post("topics", names)),
            await self._zk(zk.watch_topic_deletions, lambda names: self._post("deletions",
                                                                              names)),
            await self._zk(zk.watch_isr_change_notifications,
                           lambda names: self._post("isr_changes", names)),
            await self._zk(zk.watch_partition_reassignment,
                           lambda moves: self._post("zk_reassign", moves)),
            await self._zk(zk.watch_preferred_replica_election,
                           lambda partitions: self._post("zk_preferred", partitions)),
        ]
        # Partitions a dead controller left half made, and those whose leader died.
        await self._init_partitions([tp for tp in ctx.partitions() if tp not in ctx.states])
        await self._elect(ctx.offline() + self._isr_with_dead())
        everything = ctx.partitions()
        for b in ctx.brokers:
            self._send_update_metadata(b, everything)
            self._send_leader_and_isr(b, [tp for tp in ctx.partitions_on(b) if tp in ctx.states])
        if self.on_change is not None:
            self.on_change()

    def _connect(self, broker_id: int) -> None:
        info = self.ctx.brokers[broker_id]
        ep = build.endpoint(info, self.listener)
        if ep is not None and self.channel is not None:
            self.channel.add_broker(broker_id, ep[0], ep[1])

    # -- requests ---------------------------------------------------------------------

    def _send_leader_and_isr(self, broker_id: int, partitions: list[TopicPartition],
                             new: frozenset[TopicPartition] = frozenset()) -> None:
        if partitions and self.channel is not None:
            body = build.leader_and_isr(self.ctx, self.broker_id, self.epoch, broker_id,
                                        partitions, new, self.listener)
            self.channel.send(broker_id, ApiKey.LEADER_AND_ISR, body)

    def _send_update_metadata(self, broker_id: int, partitions: Iterable[TopicPartition],
                              deleting: Iterable[TopicPartition] = ()) -> None:
        if self.channel is not None:
            body = build.update_metadata(self.ctx, self.broker_id, self.epoch, broker_id,
                                         partitions, deleting)
            self.channel.send(broker_id, ApiKey.UPDATE_METADATA, body)

    def _tell(self, changed: list[TopicPartition],
              new: frozenset[TopicPartition] = frozenset()) -> None:
        """LeaderAndIsr to the live replicas of ``changed``, UpdateMetadata
        about them to every live broker."""
        if not changed:
            return
        per_broker: dict[int, list[TopicPartition]] = {}
        for tp in changed:
            for r in self.ctx.replicas(tp):
                if self.ctx.is_live(r):
                    per_broker.setdefault(r, []).append(tp)
        for b, tps in per_broker.items():
            self._send_leader_and_isr(b, tps, new)
        for b in self.ctx.brokers:
            self._send_update_metadata(b, changed)

    # -- partition states -------------------------------------------------------------

    async def _init_partitions(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        """Kafka's NewPartition -> OnlinePartition: the first live replica
        leads at epoch 0, the live replicas are the ISR; a partition with no
        live replica waits (it is made when one comes).  The ones made."""
        ctx = self.ctx
        made = []
        for tp in partitions:
            live = [r for r in ctx.replicas(tp) if r in ctx.live]
            if not live or tp[0] in ctx.deleting:
                continue
            state = LeaderIsrState(live[0], 0, live, self.epoch)
            try:
                await self._zk(self.zk.create_partition_state, tp[0], tp[1], state,
                               self.epoch_zk_version)
            except NodeExistsError:
                found = await self._zk(self.zk.get_partition_state, *tp)
                if found is None:
                    continue
                state = found
            ctx.states[tp] = state
            made.append(tp)
        return made

    def _isr_with_dead(self) -> list[TopicPartition]:
        """Partitions whose ISR holds a broker that is not live."""
        live = self.ctx.live
        return [tp for tp, st in self.ctx.states.items()
                if any(r not in live for r in st.isr) and len(st.isr) > 1]

    async def _elect(self, partitions: Iterable[TopicPartition],
                     excluded: set[int] | None = None) -> list[TopicPartition]:
        """New leader and ISR for ``partitions`` with the brokers in
        ``excluded`` (and every broker not live) out of them: Kafka's offline
        and controlled-shutdown elections and removeReplicasFromIsr.  Written
        by compare-and-set, all of them pipelined as Kafka's controller
        sends them (one after another, a hundred partitions would take a
        hundred ZooKeeper round trips, each with its fsync); the partitions
        whose state changed."""
        changed = []
        todo = list(dict.fromkeys(partitions))
        for _ in range(5):  # a concurrent ISR change by the leader: read, redo
            updates = []
            for tp in todo:
                st = self.ctx.states.get(tp)
                new = None if st is None else self._next_state(tp, st, excluded or set())
                if new is not None:
                    updates.append((tp, new))
            if not updates:
                break
            cases = await self._zk(self.zk.update_partition_states, updates,
                                   self.epoch_zk_version)
            conflicts = []
            for (tp, new), cas in zip(updates, cases, strict=True):
                if cas.succeeded:
                    self.ctx.states[tp] = new
                    changed.append(tp)
                else:
                    conflicts.append(tp)
            if not conflicts:
                break
            found = await self._zk(self.zk.get_partition_states, conflicts)
            for tp in conflicts:
                if tp in found:
                    self.ctx.states[tp] = found[tp]
                else:
                    self.ctx.states.pop(tp, None)
            todo = [tp for tp in conflicts if tp in found]
        return changed

    async def _elect_to(self, tp: TopicPartition, leader: int | None,
                        among: list[int] | None = None, clean: bool = True) -> bool:
        """Make ``leader`` (None: the current one) lead ``tp``, by
        compare-and-set.  A clean election keeps to the current ISR: the ISR
        is ``among`` (None: all of it) narrowed to it, and one whose leader
        left it is given up (False).  On a conflict the state is read again
        and all of it worked out anew: the controller's view may be older
        than the leader's last ISR change, and an ISR written from it would
        put a lagging replica back, one that could lead without records
        acknowledged meanwhile.  An unclean election writes ``among``."""
        for _ in range(5):
            st = self.ctx.states.get(tp)
            if st is None:
                return False
            chosen = st.leader if leader is None else leader
            if clean:
                isr = [r for r in (st.isr if among is None else among) if r in st.isr]
                if chosen != NO_LEADER and chosen not in isr:
                    return False
                isr = isr or list(st.isr)
            else:
                isr = list(among) if among else [chosen]
            new = LeaderIsrState(chosen, st.leader_epoch + 1, isr, self.epoch,
                                 st.leader_recovery_state, st.zk_version)
            cas = await self._zk(self.zk.update_partition_state, tp[0], tp[1], new,
                                 st.zk_version, self.epoch_zk_version)
            if cas.succeeded:
                self.ctx.states[tp] = new
                return True
            found = await self._zk(self.zk.get_partition_state, *tp)
            if found is None:
                return False
            self.ctx.states[tp] = found
        return False

    def _next_state(self, tp: TopicPartition, st: LeaderIsrState,
                    excluded: set[int]) -> LeaderIsrState | None:
        ctx = self.ctx
        live = ctx.live - excluded
        replicas = ctx.replicas(tp)
        isr_live = [r for r in st.isr if r in live]
        if st.leader in live:
            leader, isr = st.leader, isr_live
        else:
            candidates = [r for r in replicas if r in isr_live]
            unclean = False
            if not candidates and self.unclean_election(tp[0]):
                candidates = [r for r in replicas if r in live]
                unclean = bool(candidates)
            leader = candidates[0] if candidates else NO_LEADER
            isr = [leader] if unclean else isr_live
            if unclean:
                self.unclean_elections += 1
                log.warning("unclean leader election for %s-%d: %d leads, out of sync",
                            tp[0], tp[1], leader)
        if not isr:
            # As Kafka: the last in-sync replica stays in the ISR while it is
            # away, so it (and only it) may lead again when it returns.
            isr = list(st.isr)
        if leader == st.leader and isr == st.isr:
            return None
        return LeaderIsrState(leader, st.leader_epoch + 1, isr, self.epoch,
                              st.leader_recovery_state, st.zk_version)

    # -- events ------------------------------------------------------------------------

    async def _brokers_changed(self, _: Any) -> None:
        ctx = self.ctx
        now = {b.id: b for b in await self._zk(self.zk.get_all_brokers)}
        dead = [b for b in ctx.brokers if b not in now]
        bounced = [b for b, info in now.items()
                   if b in ctx.brokers and ctx.brokers[b].epoch != info.epoch]
        new = [b for b in now if b not in ctx.brokers] + bounced
        if not dead and not new:
            return
        log.info("controller: brokers joined %s, left %s", sorted(new), sorted(dead + bounced))
        for b in dead + bounced:
            if self.channel is not None:
                self.channel.remove_broker(b)
            ctx.shutting_down.discard(b)
        ctx.brokers = now
        if dead or bounced:
            # Kafka's onBrokerFailure, for a bounced broker too: its
            # leadership moves to another in-sync replica (it comes back as a
            # follower below, and leads again only by a preferred election).
            lost = set(dead) | set(bounced)
            affected = [tp for tp, st in ctx.states.items()
                        if st.leader in lost or lost & set(st.isr)]
            changed = await self._elect(affected, set(bounced))
            self._tell(changed)
            for b in ctx.brokers:  # the broker list changed
                self._send_update_metadata(b, [])
        for b in new:
            self._connect(b)
        if new:
            everything = ctx.partitions()
            for b in ctx.brokers:
                self._send_update_metadata(b, everything if b in new else [])
            made = await self._init_partitions([tp for tp in everything
                                                if tp not in ctx.states])
            changed = await self._elect(ctx.offline())
            for b in new:
                self._send_leader_and_isr(b, [tp for tp in ctx.partitions_on(b)
                                              if tp in ctx.states])
            self._tell(made + changed, frozenset(made))
            await self._resume_deletions(new)

    async def _topics_changed(self, names: set[str]) -> None:
        ctx = self.ctx
        added = sorted(set(names) - set(ctx.assignments))
        removed = sorted(set(ctx.assignments) - set(names))
        for topic in removed:  # its znode went by hand: forget it
            gone = ctx.partitions(topic)
            ctx.remove_topic(topic)
            w = self._topic_watches.pop(topic, None)
            if w is not None:
                w.cancel()
            for b in ctx.brokers:
                self._send_update_metadata(b, [], gone)
        if not added:
            return
        found = await self._zk(self.zk.get_topic_assignments, added)
        for topic, assignment in found.items():
            ctx.assignments[topic] = assignment
            await self._watch_topic(topic)
        new = [tp for topic in found for tp in ctx.partitions(topic)]
        log.info("controller: new topics %s (%d partitions)", sorted(found), len(new))
        made = await self._init_partitions(new)
        self._tell(made, frozenset(made))

    async def _watch_topic(self, topic: str) -> None:
        if topic not in self._topic_watches:
            self._topic_watches[topic] = await self._zk(
                self.zk.watch_topic, topic, lambda a, t=topic: self._post("topic", (t, a)))

    async def _topic_changed(self, payload: tuple[str, Any]) -> None:
        """A topic znode's data changed: partitions added (CreatePartitions)."""
        topic, assignment = payload
        ctx = self.ctx
        old = ctx.assignments.get(topic)
        if assignment is None or old is None:
            return  # gone, or not ours yet (the topics event adds it)
        added = sorted(set(assignment.partitions) - set(old.partitions))
        ctx.assignments[topic] = assignment
        if added:
            log.info("controller: %s grows by partitions %s", topic, added)
            made = await self._init_partitions([(topic, p) for p in added])
            self._tell(made, frozenset(made))

    async def _isr_changes(self, names: list[str]) -> None:
        if not names:
            return
        tps = await self._zk(self.zk.get_partitions_from_isr_changes, names)
        await self._zk(self.zk.delete_isr_change_notifications, names, self.epoch_zk_version)
        known = [tp for tp in set(tps) if tp in self.ctx.states]
        fresh = await self._zk(self.zk.get_partition_states, known)
        self.ctx.states.update(fresh)
        for b in self.ctx.brokers:
            self._send_update_metadata(b, list(fresh))
        # A reassignment finishes once its new replicas are all in sync.
        for tp in fresh:
            if self._reassigning(tp) is not None:
                await self._maybe_finish_reassignment(tp)

    # -- topic deletion ----------------------------------------------------------------

    async def _deletions(self, names: list[str]) -> None:
        ctx = self.ctx
        if not self.delete_topic_enable:
            await self._zk(self.zk.remove_topic_deletions, names, self.epoch_zk_version)
            return
        for topic in names:
            if topic in ctx.deleting:
                continue
            if topic not in ctx.assignments:
                await self._zk(self.zk.remove_topic_deletions, [topic], self.epoch_zk_version)
                continue
            log.info("controller: deleting topic %s", topic)
            partitions = ctx.partitions(topic)
            ctx.deleting[topic] = {(b, p) for t, p in partitions for b in ctx.replicas((t, p))}
            for b in ctx.brokers:
                self._send_update_metadata(b, [], partitions)
            self._stop_replicas(topic, ctx.brokers)
            await self._maybe_finish_deletion(topic)

    def _stop_replicas(self, topic: str, brokers: Iterable[int]) -> None:
        pending = self.ctx.deleting.get(topic, set())
        for b in brokers:
            mine = sorted(p for broker, p in pending if broker == b)
            if mine and self.channel is not None:
                body = build.stop_replica(self.ctx, self.broker_id, self.epoch, b,
                                          [(topic, p) for p in mine], delete=True)
                self.channel.send(b, ApiKey.STOP_REPLICA, body,
                                  lambda broker, r, t=topic: self._post(
                                      "stop_replica_done", (t, broker, r)))

    async def _resume_deletions(self, brokers: list[int]) -> None:
        """Brokers came back: their replicas of deleted topics are deleted now."""
        for topic in list(self.ctx.deleting):
            partitions = self.ctx.partitions(topic)
            for b in brokers:
                self._send_update_metadata(b, [], partitions)
            self._stop_replicas(topic, brokers)

    async def _stop_replica_done(self, payload: tuple[str, int, Any]) -> None:
        topic, broker, response = payload
        pending = self.ctx.deleting.get(topic)
        if pending is None:
            return
        if response.error_code:
            log.warning("StopReplica of %s on broker %d failed: %s", topic, broker,
                        ErrorCode(response.error_code).name)
            return
        for e in response.partition_errors:
            if e.topic_name == topic and e.error_code == 0:
                pending.discard((broker, e.partition_index))
        await self._maybe_finish_deletion(topic)

    async def _maybe_finish_deletion(self, topic: str) -> None:
        if self.ctx.deleting.get(topic):
            return
        await self._zk(self.zk.delete_topic_znodes, topic, self.epoch_zk_version)
        await self._zk(self.zk.remove_topic_deletions, [topic], self.epoch_zk_version)
        self.ctx.remove_topic(topic)
        w = self._topic_watches.pop(topic, None)
        if w is not None:
            w.cancel()
        log.info("controller: topic %s deleted", topic)

    # -- elections asked for -------------------------------------------------------------

    def topic_config_changed(self, topic: str | None) -> None:
        """A topic's configs (None: the broker defaults) changed: offline
        partitions may now be led (Kafka's TopicUncleanLeaderElectionEnable)."""
        self._post("elect_offline", topic)

    async def _elect_offline(self, topic: str | None) -> None:
        offline = [tp for tp in self.ctx.offline() if topic is None or tp[0] == topic]
        if offline:
            self._tell(await self._elect(offline))

    # -- ElectLeaders and preferred leaders ---------------------------------------------

    def elect_leaders(self, partitions: list[TopicPartition] | None,
                      unclean: bool) -> asyncio.Future:
        """ElectLeaders (Kafka's onReplicaElection): a future of (error, the
        results: (topic, partition, error code, message))."""
        assert self._loop is not None
        fut = self._loop.create_future()
        self._post("elect", (partitions, unclean, fut))
        return fut

    async def _elect_leaders(self, payload: tuple[Any, bool, asyncio.Future]) -> None:
        partitions, unclean, fut = payload
        ctx = self.ctx
        if partitions is None:  # every partition whose election would change something
            partitions = [tp for tp in ctx.partitions() if tp in ctx.states and (
                ctx.states[tp].leader == NO_LEADER if unclean
                else ctx.states[tp].leader != ctx.replicas(tp)[0])]
        results = []
        changed = []
        for tp in partitions:
            st = ctx.states.get(tp)
            replicas = ctx.replicas(tp)
            if st is None or not replicas or tp[0] in ctx.deleting:
                results.append((*tp, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                f"The partition {tp[0]}-{tp[1]} does not exist."))
                continue
            if unclean:
                if st.leader in ctx.live:
                    results.append((*tp, ErrorCode.ELECTION_NOT_NEEDED,
                                    "Leader election not needed for topic partition."))
                    continue
                live = [r for r in replicas if r in ctx.live]
                in_sync = [r for r in live if r in st.isr]
                chosen = (in_sync or live or [None])[0]
                if chosen is None or not await self._elect_to(
                        tp, chosen, in_sync or [chosen], clean=bool(in_sync)):
                    results.append((*tp, ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                                    f"Failed to elect leader for partition {tp[0]}-{tp[1]} "
                                    "under strategy UncleanLeaderElectionStrategy"))
                    continue
                if not in_sync:
                    self.unclean_elections += 1
            else:
                preferred = replicas[0]
                if st.leader == preferred:
                    results.append((*tp, ErrorCode.ELECTION_NOT_NEEDED,
                                    "Leader election not needed for topic partition."))
                    continue
                if preferred not in ctx.live or preferred not in st.isr or not \
                        await self._elect_to(tp, preferred):
                    results.append((*tp, ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                                    f"Failed to elect leader for partition {tp[0]}-{tp[1]} "
                                    "under strategy PreferredReplicaPartitionLeaderElection"
                                    "Strategy"))
                    continue
            changed.append(tp)
            results.append((*tp, ErrorCode.NONE, None))
        self._tell(changed)
        fut.set_result((ErrorCode.NONE, results))

    def check_imbalance(self, threshold_percent: int) -> None:
        """auto.leader.rebalance.enable: queue a look at each broker's share
        of the partitions it should lead but does not."""
        self._post("rebalance", threshold_percent)

    async def _rebalance(self, threshold_percent: int) -> None:
        """Kafka's checkAndTriggerAutoLeaderRebalance: per preferred leader,
        the partitions led by another; past ``threshold_percent`` of its
        partitions, the preferred replica (live and in sync) leads them again."""
        ctx = self.ctx
        by_preferred: dict[int, list[TopicPartition]] = {}
        for tp in ctx.partitions():
            replicas = ctx.replicas(tp)
            if replicas and tp in ctx.states and tp[0] not in ctx.deleting:
                by_preferred.setdefault(replicas[0], []).append(tp)
        moves = []
        for broker, tps in by_preferred.items():
            if broker not in ctx.live:
                continue
            off = [tp for tp in tps if ctx.states[tp].leader != broker]
            if off and len(off) * 100 / len(tps) > threshold_percent:
                moves += [tp for tp in off if broker in ctx.states[tp].isr]
        changed = [tp for tp in moves
                   if await self._elect_to(tp, ctx.replicas(tp)[0])]
        if changed:
            log.info("controller: preferred leaders back for %d partitions", len(changed))
            self._tell(changed)

    # -- reassignments (KIP-455) --------------------------------------------------------

    def reassign(self, targets: dict[TopicPartition, list[int] | None]) -> asyncio.Future:
        """AlterPartitionReassignments: a future of (error, {tp: (code, message)});
        a None target cancels the partition's reassignment."""
        assert self._loop is not None
        fut = self._loop.create_future()
        self._post("reassign", (targets, fut))
        return fut

    def reassignments(self) -> dict[TopicPartition, tuple[list[int], list[int], list[int]]]:
        """ListPartitionReassignments: (replicas, adding, removing) of each
        partition being moved."""
        out = {}
        for tp in self.ctx.partitions():
            found = self._reassigning(tp)
            if found is not None:
                out[tp] = (self.ctx.replicas(tp), *found)
        return out

    def _reassigning(self, tp: TopicPartition) -> tuple[list[int], list[int]] | None:
        a = self.ctx.assignments.get(tp[0])
        if a is None:
            return None
        adding = list(a.adding_replicas.get(tp[1], []))
        removing = list(a.removing_replicas.get(tp[1], []))
        return (adding, removing) if adding or removing else None

    async def _reassign(self, payload: tuple[dict, asyncio.Future]) -> None:
        """Kafka's onPartitionReassignment, first step: the replicas become
        target + original (adding and removing recorded in the topic znode),
        the new replicas are told to follow (and start fetching); the move
        ends when they are all in sync (:meth:`_maybe_finish_reassignment`)."""
        targets, fut = payload
        results = {tp: await self._start_reassignment(tp, target)
                   for tp, target in targets.items()}
        fut.set_result((ErrorCode.NONE, results))

    async def _start_reassignment(self, tp: TopicPartition, target: list[int] | None
                                  ) -> tuple[int, str | None]:
        """One partition of a reassignment (None: cancel it): its answer."""
        ctx = self.ctx
        a = ctx.assignments.get(tp[0])
        if a is None or tp[1] not in a.partitions or tp not in ctx.states \
                or tp[0] in ctx.deleting:
            return (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    f"Unable to find partition {tp[0]}:{tp[1]}.")
        current = self._reassigning(tp)
        original = [r for r in ctx.replicas(tp) if current is None or r not in current[0]]
        if target is None:  # cancel: back to the original replicas
            if current is None:
                return (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None)
            target = original
        elif not target or len(set(target)) != len(target):
            return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    "The manual partition assignment includes an empty replica "
                    "list." if not target else
                    "The manual partition assignment includes duplicate replicas.")
        elif any(r not in ctx.brokers for r in target):
            return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"The manual partition assignment includes broker(s) "
                    f"{sorted(set(target) - set(ctx.brokers))} that are not "
                    "registered.")
        adding = [r for r in target if r not in original]
        removing = [r for r in original if r not in target]
        replicas = list(target) + [r for r in original if r not in target]
        a.partitions[tp[1]] = replicas
        a.adding_replicas.pop(tp[1], None)
        a.removing_replicas.pop(tp[1], None)
        if adding or removing:
            a.adding_replicas[tp[1]] = adding
            a.removing_replicas[tp[1]] = removing
        cas = await self._zk(self.zk.set_topic_assignment, a, None, self.epoch_zk_version)
        if not cas.succeeded:
            ctx.assignments[tp[0]] = await self._zk(self.zk.get_topic_assignment, tp[0])
            return (ErrorCode.REASSIGNMENT_IN_PROGRESS,
                    "The topic's assignment changed meanwhile: try again.")
        log.info("controller: reassigning %s-%d to %s (adding %s, removing %s)", *tp,
                 target, adding, removing)
        st = ctx.states[tp]
        # A new leader epoch, so every replica takes the new replica set.
        await self._elect_to(tp, None, [r for r in st.isr if r in replicas])
        self._tell([tp])
        await self._maybe_finish_reassignment(tp)
        return (ErrorCode.NONE, None)

    async def _maybe_finish_reassignment(self, tp: TopicPartition) -> None:
        """Kafka's onPartitionReassignment, last step, once every target replica
        is in the ISR: a target replica leads (the old leader, if it stays),
        the replica set and ISR become the target's, the removed replicas stop
        and delete the partition (StopReplica)."""
        ctx = self.ctx
        moving = self._reassigning(tp)
        st = ctx.states.get(tp)
        if moving is None or st is None:
            return
        adding, removing = moving
        target = [r for r in ctx.replicas(tp) if r not in removing]
        if any(r not in st.isr for r in target):
            return  # not caught up yet: an ISR change brings us back
        isr = [r for r in st.isr if r in target]
        leader = st.leader if st.leader in target and st.leader in ctx.live else \
            next((r for r in target if r in isr and r in ctx.live), NO_LEADER)
        if not await self._elect_to(tp, leader, isr):
            return  # the ISR changed meanwhile: its change notice brings us back
        a = ctx.assignments[tp[0]]
        a.partitions[tp[1]] = target
        a.adding_replicas.pop(tp[1], None)
        a.removing_replicas.pop(tp[1], None)
        cas = await self._zk(self.zk.set_topic_assignment, a, None, self.epoch_zk_version)
        if not cas.succeeded:
            ctx.assignments[tp[0]] = await self._zk(self.zk.get_topic_assignment, tp[0])
        log.info("controller: %s-%d reassigned to %s", *tp, target)
        self._tell([tp])
        if self._zk_moving.pop(tp, None) is not None:
            await self._write_zk_moving()
        for b in removing:
            if self.channel is not None and ctx.is_live(b):
                self.channel.send(b, ApiKey.STOP_REPLICA, build.stop_replica(
                    ctx, self.broker_id, self.epoch, b, [tp], delete=True))

    # -- the admin znodes of Kafka's older tools ----------------------------------------

    async def _zk_reassign(self, targets: dict[TopicPartition, list[int]] | None) -> None:
        """``/admin/reassign_partitions`` (written by the tools before KIP-455):
        each partition starts moving as AlterPartitionReassignments would
        start it; the znode then lists those still moving, and is deleted
        once none is (as Kafka's ZooKeeper-triggered reassignments)."""
        if targets is None:
            self._zk_moving = {}
            return
        moving: dict[TopicPartition, list[int]] = {}
        for tp, target in targets.items():
            current = self._reassigning(tp)
            if current is not None and [r for r in self.ctx.replicas(tp)
                                        if r not in current[1]] == target:
                moving[tp] = target  # already on its way (the znode rewritten below)
                continue
            code, message = await self._start_reassignment(tp, target)
            if code:
                log.warning("controller: /admin/reassign_partitions: %s-%d not moved: %s",
                            *tp, message or ErrorCode(code).name)
            elif self._reassigning(tp) is not None:
                moving[tp] = target
        self._zk_moving = moving
        if moving != targets:  # (reading back our own rewrite changes nothing)
            await self._write_zk_moving()

    async def _write_zk_moving(self) -> None:
        if self._zk_moving:
            await self._zk(self.zk.set_partition_reassignment, self._zk_moving,
                           self.epoch_zk_version)
        else:
            await self._zk(self.zk.delete_partition_reassignment, self.epoch_zk_version)

    async def _zk_preferred(self, partitions: set[TopicPartition] | None) -> None:
        """``/admin/preferred_replica_election``: the preferred replica of each
        partition named leads again where it can (as ElectLeaders PREFERRED),
        then the znode is deleted."""
        if partitions is None:
            return
        assert self._loop is not None
        done = self._loop.create_future()
        await self._elect_leaders((sorted(partitions), False, done))
        for topic, p, code, message in done.result()[1]:
            if code and code != ErrorCode.ELECTION_NOT_NEEDED:
                log.warning("controller: /admin/preferred_replica_election: %s-%d: %s",
                            topic, p, message or ErrorCode(code).name)
        await self._zk(self.zk.delete_preferred_replica_election, self.epoch_zk_version)

    # -- controlled shutdown -----------------------------------------------------------

    def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> asyncio.Future:
        """ControlledShutdown from ``broker_id``: a future of (error, the
        partitions it still leads)."""
        assert self._loop is not None
        fut = self._loop.create_future()
        self._post("shutdown", (broker_id, broker_epoch, fut))
        return fut

    async def _controlled_shutdown(self, payload: tuple[int, int, asyncio.Future]) -> None:
        broker_id, broker_epoch, fut = payload
        ctx = self.ctx
        info = ctx.brokers.get(broker_id)
        if info is None:
            fut.set_result((ErrorCode.BROKER_NOT_AVAILABLE, []))
            return
        if broker_epoch not in (-1, info.epoch):
            fut.set_result((ErrorCode.STALE_BROKER_EPOCH, []))
            return
        ctx.shutting_down.add(broker_id)
        replicated = [tp for tp in ctx.partitions_led_by(broker_id)
                      if len(ctx.replicas(tp)) > 1 and tp[0] not in ctx.deleting]
        changed = await self._elect(replicated, {broker_id})
        # It leaves the ISR of what it follows, so no acks=all waits for it.
        follows = [tp for tp, st in ctx.states.items()
                   if broker_id in st.isr and st.leader != broker_id and len(st.isr) > 1
                   and tp not in changed]
        changed += await self._elect(follows, {broker_id})
        self._tell(changed)
        remaining = [tp for tp in ctx.partitions_led_by(broker_id)
                     if len(ctx.replicas(tp)) > 1]
        fut.set_result((ErrorCode.NONE, remaining))
