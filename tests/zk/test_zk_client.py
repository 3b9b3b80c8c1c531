"""KafkaZkClient against a real ZooKeeper server: Kafka's operations, the
bytes they leave in the znodes, compare-and-set conflicts and fencing."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from broker_process import wait_for
from kazoo.client import KazooClient

from pylog.zk.client import KafkaZkClient
from pylog.zk.errors import (
    BadZnodeError,
    ControllerMovedError,
    NodeExistsError,
    TopicExistsError,
)
from pylog.zk.znodes import (
    PERSISTENT_PATHS,
    UNKNOWN_VERSION,
    BrokerInfo,
    EndPoint,
    LeaderIsrState,
    sanitize,
)

NewClient = Callable[..., KafkaZkClient]


def broker(broker_id: int, port: int = 9092, rack: str | None = None) -> BrokerInfo:
    return BrokerInfo(broker_id, [EndPoint("PLAINTEXT", "PLAINTEXT", "127.0.0.1", port)], rack)


def test_start_creates_the_chroot_and_kafkas_paths(zk: KafkaZkClient, zk_server: object,
                                                   zk_connect: str) -> None:
    chroot = zk_connect[zk_connect.index("/"):]
    root = KazooClient(hosts=zk_server.address)  # type: ignore[attr-defined]
    root.start(timeout=15)
    try:
        assert root.exists(chroot) is not None
        for path in PERSISTENT_PATHS:
            data, _ = root.get(chroot + path)
            assert data is None, path  # Kafka creates them with no data
    finally:
        root.stop()
        root.close()


def test_cluster_id_is_created_once(new_client: NewClient) -> None:
    a, b = new_client(), new_client()
    assert a.get_cluster_id() is None
    first = a.create_or_get_cluster_id()
    assert len(first) == 22
    assert b.create_or_get_cluster_id("someOtherIdAAAAAAAAAAA") == first
    assert b.get_cluster_id() == first


def test_register_broker_and_read_it_back(zk: KafkaZkClient, raw: KazooClient) -> None:
    epoch = zk.register_broker(broker(1, rack="r1"))
    zk.register_broker(broker(2, 9093))
    data, stat = raw.get("/brokers/ids/1")
    assert stat.czxid == epoch and stat.ephemeralOwner == zk.session_id
    assert data.startswith(b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":'
                           b'"PLAINTEXT"},"endpoints":["PLAINTEXT://127.0.0.1:9092"],"rack":"r1"')
    got = zk.get_broker(1)
    assert got is not None and (got.rack, got.epoch, got.endpoints[0].port) == ("r1", epoch, 9092)
    assert [b.id for b in zk.get_all_brokers()] == [1, 2] == zk.get_broker_ids()
    assert zk.get_broker(3) is None
    assert zk.register_broker(broker(1, rack="r1")) == epoch  # ours already: no error


def test_duplicate_broker_registration_is_refused_naming_the_id(new_client: NewClient) -> None:
    a, b = new_client(), new_client()
    a.register_broker(broker(1))
    with pytest.raises(NodeExistsError) as info:
        b.register_broker(broker(1, 9999))
    message = str(info.value)
    assert "/brokers/ids/1" in message and "broker id 1" in message
    assert f"owner '0x{a.session_id:x}'" in message
    assert a.get_broker(1).endpoints[0].port == 9092  # type: ignore[union-attr]


def test_registration_goes_with_the_session(new_client: NewClient) -> None:
    a, b = new_client(), new_client()
    a.register_broker(broker(1))
    a.close()  # its session ends: the ephemeral znode goes at once
    assert b.get_broker(1) is None
    b.register_broker(broker(1, 9094))
    assert b.get_broker(1).endpoints[0].port == 9094  # type: ignore[union-attr]


def test_generate_broker_id_is_kafkas_sequence(zk: KafkaZkClient) -> None:
    # /brokers/seqid's data version + reserved.broker.max.id: 1001, 1002, ...
    assert [zk.generate_broker_id() for _ in range(3)] == [1001, 1002, 1003]
    assert zk.generate_broker_id(reserved_broker_max_id=5000) == 5004


def test_malformed_znode_is_bad_znode_error_naming_it(zk: KafkaZkClient, raw: KazooClient) -> None:
    raw.create("/brokers/ids/5", b"{not json", ephemeral=True)
    with pytest.raises(BadZnodeError) as info:
        zk.get_broker(5)
    assert info.value.path == "/brokers/ids/5"
    raw.create("/brokers/ids/oops", b"{}")
    with pytest.raises(BadZnodeError, match="'oops' is not a broker id"):
        zk.get_broker_ids()
    raw.set("/latest_producer_id_block", b'{"version":1}')
    with pytest.raises(BadZnodeError, match="/latest_producer_id_block"):
        zk.allocate_producer_id_block(1)


def test_the_controllers_bulk_reads_leave_malformed_znodes_out(
        zk: KafkaZkClient, raw: KazooClient, caplog: pytest.LogCaptureFixture) -> None:
    """One znode written by hand must not stop the controller's reads of all
    topics, partition states or brokers: it is left out and logged.  A read
    of that one topic still says what is wrong with it."""
    zk.register_broker(broker(1))
    raw.create("/brokers/ids/5", b"{not json", ephemeral=True)
    raw.create("/brokers/ids/oops", b"{}")
    zk.create_topic("good", {0: [1], 1: [1]})
    raw.create("/brokers/topics/bad", b"{not json")
    for p in (0, 1):
        zk.create_partition_state("good", p, LeaderIsrState(1, 0, [1], 1))
    raw.set("/brokers/topics/good/partitions/1/state", b'{"version":1}')
    with caplog.at_level("ERROR", logger="pylog.zk"):
        assert [b.id for b in zk.get_all_brokers()] == [1]
        assert sorted(zk.get_topic_assignments()) == ["good"]
        assert list(zk.get_partition_states([("good", 0), ("good", 1)])) == [("good", 0)]
        assert zk.get_partition_state("good", 1) is None
    logged = caplog.text
    for path in ("/brokers/ids/5", "/brokers/topics/bad",
                 "/brokers/topics/good/partitions/1/state"):
        assert f"Malformed data in znode {path}: " in logged
    assert "ignoring /brokers/ids/oops: not a broker id" in logged
    with pytest.raises(BadZnodeError, match="/brokers/topics/bad"):
        zk.get_topic_assignment("bad")


def test_create_topic(zk: KafkaZkClient, raw: KazooClient) -> None:
    created = zk.create_topic("t", {0: [1, 2], 1: [2, 1]}, {"retention.ms": "1000"})
    assert len(created.topic_id or "") == 22
    data, _ = raw.get("/brokers/topics/t")
    assert data == (b'{"partitions":{"0":[1,2],"1":[2,1]},"topic_id":"'
                    + created.topic_id.encode()  # type: ignore[union-attr]
                    + b'","adding_replicas":{},"removing_replicas":{},"version":3}')
    assert raw.get("/config/topics/t")[0] == b'{"version":1,"config":{"retention.ms":"1000"}}'
    got = zk.get_topic_assignment("t")
    assert got is not None and got.partitions == {0: [1, 2], 1: [2, 1]} and got.zk_version == 0
    assert zk.topic_exists("t") and zk.get_all_topics() == {"t"}
    assert zk.get_entity_config("topics", "t") == {"retention.ms": "1000"}
    with pytest.raises(TopicExistsError, match="Topic 't' already exists."):
        zk.create_topic("t", {0: [1]})
    assert zk.get_entity_config("topics", "t") == {"retention.ms": "1000"}  # not clobbered


def test_create_topic_refused_while_marked_for_deletion(zk: KafkaZkClient) -> None:
    zk.create_topic("t", {0: [1]})
    assert zk.request_topic_deletion("t") is True
    assert zk.request_topic_deletion("t") is False
    with pytest.raises(TopicExistsError, match="marked for deletion"):
        zk.create_topic("t", {0: [1]})


def test_create_topic_over_a_leftover_config(zk: KafkaZkClient) -> None:
    zk.set_entity_config("topics", "t", {"cleanup.policy": "compact"})
    zk.create_topic("t", {0: [1]}, {"retention.ms": "5"})
    assert zk.get_entity_config("topics", "t") == {"retention.ms": "5"}


def test_topic_assignment_compare_and_set(new_client: NewClient) -> None:
    a, b = new_client(), new_client()
    a.create_topic("t", {0: [1]})
    mine, theirs = a.get_topic_assignment("t"), b.get_topic_assignment("t")
    assert mine is not None and theirs is not None
    mine.partitions[1] = [1]
    assert a.set_topic_assignment(mine) == (True, 1) and mine.zk_version == 1
    theirs.partitions[1] = [2]
    assert b.set_topic_assignment(theirs) == (False, UNKNOWN_VERSION)  # read at version 0
    assert b.get_topic_assignment("t").partitions == {0: [1], 1: [1]}  # type: ignore[union-attr]


def test_partition_states(new_client: NewClient) -> None:
    a, b = new_client(), new_client()
    a.create_topic("t", {0: [1, 2], 1: [2, 1]})
    for p in (0, 1):
        assert a.create_partition_state("t", p, LeaderIsrState(p + 1, 0, [1, 2], 1)) == 0
    with pytest.raises(NodeExistsError):
        a.create_partition_state("t", 0, LeaderIsrState(1, 0, [1, 2], 1))
    assert a.get_partitions("t") == [0, 1]
    states = b.get_partition_states([("t", 0), ("t", 1), ("t", 9)])
    assert sorted(states) == [("t", 0), ("t", 1)]
    leader_side, controller_side = a.get_partition_state("t", 0), b.get_partition_state("t", 0)
    assert leader_side is not None and controller_side is not None
    # The leader shrinks the ISR; the controller's update, read before, conflicts.
    leader_side.isr = [1]
    assert a.update_partition_state("t", 0, leader_side) == (True, 1)
    controller_side.leader, controller_side.leader_epoch = 2, 1
    assert b.update_partition_state("t", 0, controller_side) == (False, UNKNOWN_VERSION)
    fresh = b.get_partition_state("t", 0)
    assert fresh is not None and (fresh.isr, fresh.zk_version) == ([1], 1)
    fresh.leader, fresh.leader_epoch = 1, 1
    assert b.update_partition_state("t", 0, fresh) == (True, 2)
    assert b.delete_partition_state("t", 1) is True
    assert a.get_partition_state("t", 1) is None
    assert a.update_partition_state("t", 1, LeaderIsrState(1, 0, [1], 1, zk_version=0)) \
        == (False, UNKNOWN_VERSION)


def test_controller_election_and_epoch(new_client: NewClient) -> None:
    a, b = new_client(), new_client()
    assert a.get_controller_id() is None and a.get_controller_epoch() is None
    assert a.register_controller_and_increment_epoch(1) == (1, 1)
    with pytest.raises(ControllerMovedError, match="Controller moved to another broker"):
        b.register_controller_and_increment_epoch(2)
    assert b.get_controller_id() == 1 and b.get_controller_epoch() == (1, 1)
    assert b.try_create_controller(2) is False
    a.close()  # the controller's session ends
    assert b.try_create_controller(2) is True and b.get_controller_id() == 2
    assert b.increment_controller_epoch() == (2, 2)
    assert b.delete_controller() is True
    assert b.register_controller_and_increment_epoch(2) == (3, 3)


def test_fenced_writes_refused_after_a_new_controller(new_client: NewClient,
                                                      raw: KazooClient) -> None:
    old, new = new_client(), new_client()
    old.create_topic("t", {0: [1]})
    _, fence = old.register_controller_and_increment_epoch(1)
    state = LeaderIsrState(1, 0, [1], 1)
    old.create_partition_state("t", 0, state, controller_epoch_zk_version=fence)
    # The parents come with no data, as Kafka creates them (also in a fenced transaction).
    assert raw.get("/brokers/topics/t/partitions")[0] is None
    assert raw.get("/brokers/topics/t/partitions/0")[0] is None
    assert old.update_partition_state("t", 0, state, controller_epoch_zk_version=fence).succeeded
    old.delete_controller()
    new.register_controller_and_increment_epoch(2)  # a new epoch: the old fence is stale
    state.leader_epoch = 1
    with pytest.raises(ControllerMovedError, match=f"Expected zkVersion = {fence}"):
        old.update_partition_state("t", 0, state, controller_epoch_zk_version=fence)
    with pytest.raises(ControllerMovedError):
        old.delete_topic_znodes("t", controller_epoch_zk_version=fence)
    assert new.get_partition_state("t", 0).leader_epoch == 0  # type: ignore[union-attr]
    assert new.topic_exists("t")


def test_entity_configs_and_change_notices(new_client: NewClient, raw: KazooClient) -> None:
    admin, node = new_client(), new_client()
    seen: list[list[str]] = []
    watch = node.watch_config_changes(lambda changes: seen.append(
        [c.entity_path for c in changes]))
    user = sanitize("alice smith")
    name = admin.set_entity_config("users", user, {"producer_byte_rate": "1024"})
    assert name == "config_change_0000000000"
    assert raw.get(f"/config/changes/{name}")[0] == \
        b'{"version":2,"entity_path":"users/alice%20smith"}'
    admin.set_entity_config("brokers", "<default>", {"log.retention.ms": "5"})
    wait_for(lambda: sum(seen, []) == ["users/alice%20smith", "brokers/<default>"], 15,
             "both notices delivered once, in order")
    assert admin.get_entity_config("users", user) == {"producer_byte_rate": "1024"}
    assert admin.get_entity_configs("brokers") == {"<default>": {"log.retention.ms": "5"}}
    assert admin.get_entities_with_config("users") == [user]
    changes = admin.get_config_changes()
    assert [c.sequence for c in changes] == [0, 1]
    watch.cancel()
    # Kafka drops notices older than 15 minutes; "now" a day on, both go.
    assert admin.purge_config_changes(changes[-1].ctime_ms + 60_000) == 0
    assert admin.purge_config_changes(changes[-1].ctime_ms + 86_400_000) == 2
    assert admin.get_config_changes() == []


def test_topic_deletion_requests(new_client: NewClient) -> None:
    admin, controller = new_client(), new_client()
    admin.create_topic("t", {0: [1]}, {"retention.ms": "5"})
    admin.create_partition_state("t", 0, LeaderIsrState(1, 0, [1], 1))
    seen: list[list[str]] = []
    controller.watch_topic_deletions(seen.append)
    admin.request_topic_deletion("t")
    wait_for(lambda: seen and seen[-1] == ["t"], 15, "the deletion request seen")
    assert controller.is_topic_marked_for_deletion("t")
    assert controller.get_topic_deletions() == ["t"]
    controller.delete_topic_znodes("t")
    controller.remove_topic_deletions(["t"])
    wait_for(lambda: seen[-1] == [], 15, "the request removed")
    assert not admin.topic_exists("t") and admin.get_entity_config("topics", "t") == {}
    assert admin.get_topic_assignment("t") is None


def test_reassignment_and_preferred_election_znodes(new_client: NewClient) -> None:
    admin, controller = new_client(), new_client()
    seen: list[object] = []
    controller.watch_partition_reassignment(seen.append)
    assert admin.get_partition_reassignment() == {} and not admin.reassignment_in_progress()
    admin.create_partition_reassignment({("t", 0): [2, 3]})
    with pytest.raises(NodeExistsError):
        admin.create_partition_reassignment({("t", 1): [2]})
    wait_for(lambda: seen[-1] == {("t", 0): [2, 3]}, 15, "the reassignment seen")
    controller.set_partition_reassignment({("t", 0): [2, 3], ("t", 1): [1]})
    assert admin.get_partition_reassignment() == {("t", 0): [2, 3], ("t", 1): [1]}
    assert controller.delete_partition_reassignment() is True
    wait_for(lambda: seen[-1] is None, 15, "the reassignment gone")
    assert seen[0] is None  # none at first

    admin.create_preferred_replica_election([("t", 0), ("u", 1)])
    assert controller.get_preferred_replica_election() == {("t", 0), ("u", 1)}
    assert controller.delete_preferred_replica_election() is True
    assert controller.get_preferred_replica_election() == set()


def test_isr_change_notifications(new_client: NewClient) -> None:
    leader, controller = new_client(), new_client()
    seen: list[list[str]] = []
    controller.watch_isr_change_notifications(seen.append)
    first = leader.propagate_isr_changes([("t", 0), ("t", 1)])
    second = leader.propagate_isr_changes([("u", 2)])
    assert (first, second) == ("isr_change_0000000000", "isr_change_0000000001")
    wait_for(lambda: seen[-1] == [first, second], 15, "both notices seen")
    names = controller.get_isr_change_notifications()
    assert controller.get_partitions_from_isr_changes(names) == [("t", 0), ("t", 1), ("u", 2)]
    controller.delete_isr_change_notifications(names)
    wait_for(lambda: seen[-1] == [], 15, "the notices deleted")


def test_producer_id_blocks_unique_under_concurrent_clients(new_client: NewClient,
                                                            raw: KazooClient) -> None:
    clients = [new_client(), new_client()]
    blocks: list[tuple[int, int, int]] = []
    lock = threading.Lock()

    def allocate(broker_id: int, client: KafkaZkClient) -> None:
        for _ in range(15):
            block = client.allocate_producer_id_block(broker_id)
            with lock:
                blocks.append(block)

    threads = [threading.Thread(target=allocate, args=(i, c)) for i, c in enumerate(clients)
               for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads)
    assert len(blocks) == 60
    ranges = sorted((b.first, b.last) for b in blocks)
    # Disjoint, contiguous blocks of 1000 from 0: every id handed out exactly once.
    assert ranges == [(i * 1000, i * 1000 + 999) for i in range(60)]
    assert {b.broker for b in blocks} == {0, 1}
    assert raw.get("/latest_producer_id_block")[0].endswith(b'"block_start":"59000",'
                                                             b'"block_end":"59999"}')


def test_watches_deliver_changes(new_client: NewClient) -> None:
    a, b = new_client(), new_client()
    ids: list[set[int]] = []
    controller: list[int | None] = []
    topics: list[set[str]] = []
    assignment: list[object] = []
    b.watch_broker_ids(ids.append)
    b.watch_controller(controller.append)
    b.watch_topics(topics.append)
    b.watch_topic("t", lambda a_: assignment.append(None if a_ is None else a_.partitions))
    assert (ids, controller, topics, assignment) == ([set()], [None], [set()], [None])
    a.register_broker(broker(1))
    a.try_create_controller(1)
    a.create_topic("t", {0: [1]})
    wait_for(lambda: ids[-1] == {1} and controller[-1] == 1 and topics[-1] == {"t"}
             and assignment[-1] == {0: [1]}, 15, "every watch fired")
    t = a.get_topic_assignment("t")
    t.partitions[1] = [1]  # type: ignore[union-attr]
    a.set_topic_assignment(t)  # type: ignore[arg-type]
    wait_for(lambda: assignment[-1] == {0: [1], 1: [1]}, 15, "the partition added")
    a.close()
    wait_for(lambda: ids[-1] == set() and controller[-1] is None, 15,
             "the broker and the controller gone with their session")


@pytest.mark.parametrize("fenced", [False, True])
def test_partition_states_updated_together(new_client: NewClient, fenced: bool) -> None:
    """The controller's updates of many partitions, pipelined: each one a
    compare-and-set of its own (a conflict or a missing state fails that
    one); behind the controller epoch, a stale epoch fails them all."""
    a, b = new_client(), new_client()
    a.create_topic("t", {p: [1, 2] for p in range(4)})
    fence = a.register_controller_and_increment_epoch(1)[1] if fenced else None
    for p in range(3):
        a.create_partition_state("t", p, LeaderIsrState(1, 0, [1, 2], 1))
    states = a.get_partition_states([("t", p) for p in range(3)])
    moved = b.get_partition_state("t", 1)
    assert moved is not None
    moved.isr = [1]
    assert b.update_partition_state("t", 1, moved).succeeded  # the leader got there first
    updates = [(("t", p), LeaderIsrState(2, 1, [2], 1, zk_version=states[("t", p)].zk_version))
               for p in range(3)]
    updates.append((("t", 3), LeaderIsrState(2, 1, [2], 1, zk_version=0)))  # no state
    cases = a.update_partition_states(updates, controller_epoch_zk_version=fence)
    assert cases == [(True, 1), (False, UNKNOWN_VERSION), (True, 1), (False, UNKNOWN_VERSION)]
    assert [s.zk_version for _, s in updates] == [1, 0, 1, 0]
    assert [b.get_partition_state("t", p).isr for p in range(3)] == [[2], [1], [2]]  # type: ignore[union-attr]
    if fenced:
        b.delete_controller()
        b.register_controller_and_increment_epoch(2)
        with pytest.raises(ControllerMovedError):
            a.update_partition_states([updates[0]], controller_epoch_zk_version=fence)
