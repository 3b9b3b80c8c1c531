"""KafkaZkClient: a cluster's metadata in ZooKeeper, as Kafka's KafkaZkClient keeps it.

A synchronous, thread-safe client over one ZooKeeper session (one
:class:`~pylog.zk.connection.ZkConnection`).  Its calls block -- run them from a
thread, never on an event loop -- and each is bounded: while ZooKeeper cannot be
reached a call fails with ZkUnavailableError after ``connection_timeout_ms``.

Session events (:class:`SessionEvent`) reach ``add_state_listener`` callbacks
on the connection's event thread, as do watch callbacks.  After
SESSION_LOST/SESSION_ESTABLISHED the ephemeral znodes of the old session
(the broker registration, /controller) are gone: register again.

Topics and partition states are in :mod:`pylog.zk.topics`, configs in
:mod:`pylog.zk.configs`; the generic reads and fenced writes in :mod:`pylog.zk.ops`.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from kazoo.protocol.states import ZnodeStat

from pylog.log.meta_properties import random_cluster_id
from pylog.zk.configs import ConfigOps
from pylog.zk.connection import SessionEvent, Watch, ZkConnection
from pylog.zk.errors import (
    BadVersionError,
    BadZnodeError,
    ControllerMovedError,
    NodeExistsError,
    NoNodeError,
    ZkError,
)
from pylog.zk.ops import Op, log
from pylog.zk.topics import TopicOps
from pylog.zk.znodes import (
    LONG_MAX,
    PERSISTENT_PATHS,
    PRODUCER_ID_BLOCK_SIZE,
    BrokerIdsZNode,
    BrokerIdZNode,
    BrokerInfo,
    BrokerSequenceIdZNode,
    ClusterIdZNode,
    ControllerEpochZNode,
    ControllerZNode,
    ProducerIdBlock,
    ProducerIdBlockZNode,
)

__all__ = ["KafkaZkClient", "SessionEvent"]

# Kafka's KafkaController.InitialControllerEpoch (and its znode version).
INITIAL_CONTROLLER_EPOCH = 0
# Kafka's reserved.broker.max.id default.
RESERVED_BROKER_MAX_ID = 1000


def _now_ms() -> int:
    return int(time.time() * 1000)


class KafkaZkClient(TopicOps, ConfigOps):
    """``connect`` is Kafka's zookeeper.connect (``h1:2181,h2:2181/chroot``);
    the timeouts and ``max_in_flight`` are zookeeper.session.timeout.ms,
    zookeeper.connection.timeout.ms (default: the session timeout) and
    zookeeper.max.in.flight.requests."""

    def __init__(self, connect: str, session_timeout_ms: int = 18000,
                 connection_timeout_ms: int | None = None, max_in_flight: int = 10) -> None:
        super().__init__(ZkConnection(connect, session_timeout_ms, connection_timeout_ms,
                                      max_in_flight))
        # ephemeral path -> the session that created it (Kafka's KAFKA-7165 workaround)
        self._ephemeral_owners: dict[str, int] = {}

    def start(self) -> KafkaZkClient:
        """Connect (ZkConnectError after the connection timeout) and create
        Kafka's persistent paths."""
        self.conn.start()
        try:
            self.create_top_level_paths()
        except BaseException:
            self.conn.close()
            raise
        return self

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> KafkaZkClient:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def connected(self) -> bool:
        return self.conn.connected

    @property
    def session_id(self) -> int | None:
        return self.conn.session_id

    def add_state_listener(self, listener: Callable[[SessionEvent], None]) -> None:
        """``listener(event)`` on each SessionEvent, on the event thread."""
        self.conn.add_state_listener(listener)

    def remove_state_listener(self, listener: Callable[[SessionEvent], None]) -> None:
        self.conn.remove_state_listener(listener)

    def create_top_level_paths(self) -> None:
        for path in PERSISTENT_PATHS:
            self.create_recursive(path, exists_ok=True)

    # -- cluster id ---------------------------------------------------------------------

    def get_cluster_id(self) -> str | None:
        got = self.get_data(ClusterIdZNode.path())
        return ClusterIdZNode.decode(got[0]) if got else None

    def create_or_get_cluster_id(self, proposed: str | None = None) -> str:
        """The cluster's id: ``proposed`` (default: a new Uuid) if this call
        created /cluster/id, else the one stored."""
        proposed = proposed or random_cluster_id()
        try:
            self.create_recursive(ClusterIdZNode.path(), ClusterIdZNode.encode(proposed))
            return proposed
        except NodeExistsError:
            stored = self.get_cluster_id()
            if stored is None:
                raise ZkError("Failed to get cluster id from Zookeeper. This can happen if "
                              "/cluster/id is deleted from Zookeeper.") from None
            return stored

    # -- ephemeral znodes ---------------------------------------------------------------

    def _create_ephemeral(self, path: str, data: bytes, whose: str) -> ZnodeStat:
        """Create an ephemeral znode of this session (Kafka's CheckedEphemeral):
        one this session already owns counts as created (a create sent again
        after a connection loss); one left by this client's expired session is
        replaced; anyone else's is a NodeExistsError."""
        while True:
            try:
                _, stat = self.conn.call("create", path, lambda zk: zk.create_async(
                    path, data, ephemeral=True, include_data=True))
                self._ephemeral_owners[path] = stat.ephemeralOwner
                return stat
            except NodeExistsError:
                pass
            got = self.get_data(path)
            if got is None:
                continue  # it went away meanwhile: create again
            owner, session = got[1].ephemeralOwner, self.session_id or 0
            if owner == session:
                return got[1]
            if owner == self._ephemeral_owners.get(path):
                # ZOOKEEPER-2985: our expired session's znode outlived it.
                try:
                    self.write("delete", [Op("delete", path, version=got[1].version)])
                except (BadVersionError, NoNodeError):
                    pass  # changed or gone meanwhile: look again
                continue
            raise NodeExistsError(path, f"Error while creating ephemeral at {path}, node "
                                        f"already exists and owner '0x{owner:x}' does not match "
                                        f"current session '0x{session:x}' ({whose})")

    # -- brokers ------------------------------------------------------------------------

    def register_broker(self, info: BrokerInfo) -> int:
        """Create /brokers/ids/<id> (ephemeral); the broker epoch (its czxid).
        NodeExistsError naming the id if another session holds it."""
        stat = self._create_ephemeral(BrokerIdZNode.path(info.id),
                                      BrokerIdZNode.encode(info, _now_ms()),
                                      f"broker id {info.id} is registered by another broker")
        info.epoch = stat.czxid
        return stat.czxid

    def update_broker_info(self, info: BrokerInfo) -> None:
        """Rewrite this broker's registration (its endpoints changed)."""
        self.write("set", [Op("set", BrokerIdZNode.path(info.id),
                              BrokerIdZNode.encode(info, _now_ms()))])

    def get_broker(self, broker_id: int) -> BrokerInfo | None:
        got = self.get_data(BrokerIdZNode.path(broker_id))
        if got is None:
            return None
        info = BrokerIdZNode.decode(broker_id, got[0])
        info.epoch = got[1].czxid
        return info

    def get_broker_ids(self) -> list[int]:
        names = self.get_children(BrokerIdsZNode.path())
        bad = [n for n in names if not n.isdigit()]
        if bad:
            raise BadZnodeError(BrokerIdsZNode.path(), f"child {bad[0]!r} is not a broker id")
        return sorted(int(n) for n in names)

    def get_all_brokers(self) -> list[BrokerInfo]:
        """Every registered broker, by id, each with its epoch.  A child of
        /brokers/ids that is not a broker id, or whose registration does not
        decode, is left out and logged (the controller's view of the live
        brokers must not hang on one znode written by hand)."""
        names = self.get_children(BrokerIdsZNode.path())
        for bad in (n for n in names if not n.isdigit()):
            log.error("ignoring /brokers/ids/%s: not a broker id", bad)
        ids = sorted(int(n) for n in names if n.isdigit())
        out = []
        for broker_id, got in zip(ids, self.get_data_many([BrokerIdZNode.path(i) for i in ids]),
                                  strict=True):
            if got is None:  # gone since the listing
                continue
            try:
                info = BrokerIdZNode.decode(broker_id, got[0])
            except BadZnodeError as exc:
                log.error("ignoring broker %d: %s", broker_id, exc)
                continue
            info.epoch = got[1].czxid
            out.append(info)
        return out

    def watch_broker_ids(self, callback: Callable[[set[int]], None]) -> Watch:
        """``callback(registered ids)`` now and whenever a broker comes or goes
        (also when one re-registers between two looks: compare epochs)."""
        return self.watch_children(BrokerIdsZNode.path(), lambda names: callback(
            {int(n) for n in names if n.isdigit()}))

    def generate_broker_id(self, reserved_broker_max_id: int = RESERVED_BROKER_MAX_ID) -> int:
        """A new broker id: the next version of /brokers/seqid plus
        reserved.broker.max.id (Kafka's generateBrokerId), so never one an
        operator configures."""
        path = BrokerSequenceIdZNode.path()
        while True:
            try:
                [stat] = self.write("set", [Op("set", path, b"")])
                return stat.version + reserved_broker_max_id
            except NoNodeError:
                self.create_recursive(path, exists_ok=True)

    # -- controller ---------------------------------------------------------------------

    def try_create_controller(self, broker_id: int) -> bool:
        """Create /controller (ephemeral) for ``broker_id``; False if another holds it."""
        try:
            self._create_ephemeral(ControllerZNode.path(),
                                   ControllerZNode.encode(broker_id, _now_ms()),
                                   "another broker is the controller")
            return True
        except NodeExistsError:
            return False

    def register_controller_and_increment_epoch(self, broker_id: int) -> tuple[int, int]:
        """Kafka's controller election: create /controller and bump
        /controller_epoch in one transaction.  (new epoch, its zk version --
        the fence for this controller's writes); ControllerMovedError if lost."""
        current = self.get_controller_epoch() or self._create_controller_epoch()
        epoch = current[0] + 1
        try:
            results = self.write("elect controller", [
                Op("create", ControllerZNode.path(), ControllerZNode.encode(broker_id, _now_ms()),
                   ephemeral=True),
                Op("set", ControllerEpochZNode.path(), ControllerEpochZNode.encode(epoch),
                   current[1])])
            return epoch, results[1].version
        except (NodeExistsError, BadVersionError):
            pass
        # Did it succeed after all (a re-sent transaction)?  Kafka's checkControllerAndEpoch.
        controller = self.get_controller_id()
        if controller is None:
            raise ControllerMovedError(f"The ephemeral node at {ControllerZNode.path()} went away "
                                       "while checking whether the controller election succeeds. "
                                       "Aborting controller startup procedure")
        now = self.get_controller_epoch() if controller == broker_id else None
        if now is not None and now[0] == epoch:
            return now
        raise ControllerMovedError("Controller moved to another broker. Aborting controller "
                                   "startup procedure")

    def get_controller_id(self) -> int | None:
        got = self.get_data(ControllerZNode.path())
        return ControllerZNode.decode(got[0]) if got else None

    def delete_controller(self, controller_epoch_zk_version: int | None = None) -> bool:
        return self.delete(ControllerZNode.path(), controller_epoch_zk_version)

    def watch_controller(self, callback: Callable[[int | None], None]) -> Watch:
        """``callback(controller id)`` now and on each change; None while there is none."""
        return self.watch_data(ControllerZNode.path(),
                               lambda data, _: ControllerZNode.decode(data), callback)

    def get_controller_epoch(self) -> tuple[int, int] | None:
        """(epoch, its znode's data version), or None before the first controller."""
        got = self.get_data(ControllerEpochZNode.path())
        return (ControllerEpochZNode.decode(got[0]), got[1].version) if got else None

    def _create_controller_epoch(self) -> tuple[int, int]:
        try:
            self.create(ControllerEpochZNode.path(),
                        ControllerEpochZNode.encode(INITIAL_CONTROLLER_EPOCH))
            return INITIAL_CONTROLLER_EPOCH, 0
        except NodeExistsError:
            current = self.get_controller_epoch()
            if current is None:
                raise ZkError(f"{ControllerEpochZNode.path()} existed before but went away "
                              "while trying to read it") from None
            return current

    def increment_controller_epoch(self) -> tuple[int, int]:
        """Bump /controller_epoch by compare-and-set (creating it at 0 first);
        (new epoch, its zk version).  ControllerMovedError if another bumped it."""
        epoch, version = self.get_controller_epoch() or self._create_controller_epoch()
        cas = self.conditional_update(ControllerEpochZNode.path(),
                                      ControllerEpochZNode.encode(epoch + 1), version)
        if not cas.succeeded:
            raise ControllerMovedError(f"{ControllerEpochZNode.path()} changed from epoch {epoch} "
                                       "meanwhile: another controller was elected")
        return epoch + 1, cas.version

    # -- producer ids -------------------------------------------------------------------

    def allocate_producer_id_block(self, broker_id: int) -> ProducerIdBlock:
        """The next PRODUCER_ID_BLOCK_SIZE producer ids, for ``broker_id``:
        compare-and-set on /latest_producer_id_block, retried on a conflict
        (Kafka's ZkProducerIdManager), so no id is handed out twice."""
        path = ProducerIdBlockZNode.path()
        while True:
            got = self.get_data(path)
            if got is None:
                self.create_recursive(path, exists_ok=True)
                continue
            data, stat = got
            first = 0
            if data:
                last = ProducerIdBlockZNode.decode(data).last
                if last > LONG_MAX - PRODUCER_ID_BLOCK_SIZE:
                    raise ZkError("Have exhausted all producerIds.")
                first = last + 1
            block = ProducerIdBlock(broker_id, first, first + PRODUCER_ID_BLOCK_SIZE - 1)
            if self.conditional_update(path, ProducerIdBlockZNode.encode(block),
                                       stat.version).succeeded:
                return block
