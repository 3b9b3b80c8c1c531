"""The coordinators per partition, in process: election loads a partition's
groups / transactions, resignation drops them, and a key of a partition not
owned gets NOT_COORDINATOR, of one loading COORDINATOR_LOAD_IN_PROGRESS (as
Kafka's GroupCoordinator.onElection / onResignation and
TransactionStateManager.loadTransactionsForTxnTopicPartition /
removeTransactionsForTxnTopicPartition).  A real log dir, registry and
replica manager wired as the single node wires them (local_node); a load's
read is held in flight on an executor that runs it when the test says so."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
from broker_process import EVENT_LOOPS
from local_node import HeldExecutor, LocalNode, Markers

from pylog.coordinator import GroupCoordinator, GroupState
from pylog.coordinator.coordinator import (
    CoordinatorConfig,
    JoinRequest,
    JoinResult,
    OffsetCommit,
)
from pylog.coordinator.offsets_store import OFFSETS_TOPIC
from pylog.coordinator.records import partition_for
from pylog.coordinator.transactions import TxnConfig
from pylog.coordinator.txn_log import TxnState
from pylog.protocol import ErrorCode as E
from pylog.server.main import event_loop_factory

PARTITIONS = 5
# ConsumerProtocolSubscription v0 of topic "t": version, ["t"], null user data.
SUBSCRIPTION = b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\xff\xff\xff\xff"


def clock() -> int:
    return 1_700_000_000_000


def run(scenario: Callable[[], Coroutine[Any, Any, None]], event_loop: str) -> None:
    with asyncio.Runner(loop_factory=event_loop_factory(event_loop)) as runner:
        runner.run(scenario())


def group_node(path: Path) -> tuple[LocalNode, GroupCoordinator]:
    node = LocalNode(path)
    if node.topics.get("t") is None:
        node.topics.create("t", 4)
    c = node.groups(CoordinatorConfig(offsets_topic_num_partitions=PARTITIONS,
                                      group_initial_rebalance_delay_ms=0), clock)
    assert c.find_partition("g") is not None  # the offsets topic, every partition owned
    return node, c


def other_group(group_id: str) -> str:
    """A group whose partition is not ``group_id``'s."""
    mine = partition_for(group_id, PARTITIONS)
    return next(g for g in (f"other-{i}" for i in range(100))
                if partition_for(g, PARTITIONS) != mine)


def join(c: GroupCoordinator, group_id: str, member_id: str = "") -> Any:
    return c.join_group(JoinRequest(group_id, member_id, None, "client", "/127.0.0.1", 10_000,
                                    6_000, "consumer", [("range", SUBSCRIPTION)], 3))


async def stable_member(c: GroupCoordinator, group_id: str) -> str:
    """A one-member group, Stable at generation 1, its assignment stored."""
    joined = await join(c, group_id)
    assert (joined.error, joined.generation) == (E.NONE, 1)
    synced = await c.sync_group(group_id, 1, joined.member_id, None, None, None,
                                {joined.member_id: b"assigned"})
    assert synced.error == E.NONE
    return joined.member_id


def refused_everywhere(c: GroupCoordinator, member: str, code: int) -> None:
    """Every group API on group "g" gets ``code``."""
    assert c.coordinator_error("g") == code
    result = join(c, "g")
    assert isinstance(result, JoinResult) and result.error == code
    assert c.leave_group("g", [(member, None)]) == (code, [])
    assert c.commit_offsets("g", 1, member, None, [OffsetCommit("t", 0, 9)]) == {
        ("t", 0): code}
    assert c.commit_txn_offsets("g", 7, 0, -1, "", None, [OffsetCommit("t", 0, 9)]) == {
        ("t", 0): code}
    assert c.delete_groups(["g"]) == {"g": code}
    assert c.delete_offsets("g", [("t", 0)]) == (code, {})


@pytest.mark.parametrize("event_loop", EVENT_LOOPS)
def test_resigned_partition_unloads_its_groups(tmp_path: Path, event_loop: str) -> None:
    async def scenario() -> None:
        node, c = group_node(tmp_path)
        c.start()
        first = await stable_member(c, "g")
        assert c.commit_offsets("g", 1, first, None, [OffsetCommit("t", 0, 5)]) == {
            ("t", 0): E.NONE}
        other = other_group("g")
        kept = await stable_member(c, other)
        # A second member's JoinGroup parks: the rebalance waits for the first.
        parked = join(c, "g")
        assert isinstance(parked, asyncio.Future) and not parked.done()
        group = c.groups["g"]

        assert c.on_resigned(partition_for("g", PARTITIONS), 1) == 1
        # The parked join is answered, the group is Dead with its timers
        # cancelled, and nothing of it is left in the cache.
        assert (await parked).error == E.NOT_COORDINATOR
        assert group.is_(GroupState.DEAD) and group.rebalance_timer is None
        assert all(m.timer is None for m in group.members.values())
        assert "g" not in c.groups and c.fetch_offsets("g", None) == {}
        refused_everywhere(c, first, E.NOT_COORDINATOR)
        assert c.heartbeat("g", 1, first, None) == E.NOT_COORDINATOR
        assert c.sync_group("g", 1, first, None, None, None, {}).error == E.NOT_COORDINATOR
        # The group of another partition is untouched, and ListGroups shows
        # only the groups of the partitions owned.
        assert c.heartbeat(other, 1, kept, None) == E.NONE
        assert [g.group_id for g in c.list_groups()] == [other]
        await c.stop()
        node.close()

    run(scenario, event_loop)


@pytest.mark.parametrize("event_loop", EVENT_LOOPS)
def test_reelection_reloads_offsets_and_group_metadata(tmp_path: Path,
                                                       event_loop: str) -> None:
    async def scenario() -> None:
        node, c = group_node(tmp_path)
        c.start()
        member = await stable_member(c, "g")
        c.commit_offsets("g", 1, member, None, [OffsetCommit("t", 1, 11, 3, "meta")])
        p = partition_for("g", PARTITIONS)
        assert c.on_resigned(p, 1) == 1

        held = c.store.executor = HeldExecutor()
        loaded = c.on_elected(p, 2)
        # Loading: the read is in flight (not on the loop); the group's
        # requests wait, as Kafka answers them while a partition loads.
        assert c.loading and held.submitted == 1
        refused_everywhere(c, member, E.COORDINATOR_LOAD_IN_PROGRESS)
        assert c.heartbeat("g", 1, member, None) == E.NONE  # answered blindly
        assert c.sync_group("g", 1, member, None, None, None, {}).error == \
            E.REBALANCE_IN_PROGRESS  # the member rejoins
        held.release()
        assert await loaded is True
        assert not c.loading and c.coordinator_error("g") == E.NONE

        group = c.groups["g"]
        assert group.is_(GroupState.STABLE) and group.generation == 1
        assert group.members[member].assignment == b"assigned"
        got = c.fetch_offsets("g", None)
        assert {tp: (o.offset, o.leader_epoch, o.metadata) for tp, o in got.items()} == {
            ("t", 1): (11, 3, "meta")}
        # The loaded member's session runs again, and it keeps heartbeating.
        assert group.members[member].timer is not None
        assert c.heartbeat("g", 1, member, None) == E.NONE
        held.shutdown()
        await c.stop()
        node.close()

    run(scenario, event_loop)


@pytest.mark.parametrize("event_loop", EVENT_LOOPS)
def test_load_superseded_by_resignation_does_nothing(tmp_path: Path,
                                                     event_loop: str) -> None:
    async def scenario() -> None:
        node, c = group_node(tmp_path)
        c.start()
        c.commit_offsets("g", -1, "", None, [OffsetCommit("t", 0, 5)])
        p = partition_for("g", PARTITIONS)
        c.on_resigned(p, 1)

        held = c.store.executor = HeldExecutor()
        late = c.on_elected(p, 2)
        assert c.coordinator_error("g") == E.COORDINATOR_LOAD_IN_PROGRESS
        assert c.on_resigned(p, 3) == 0  # nothing was loaded yet
        held.release()
        assert await late is False  # read, then dropped: never applied
        assert "g" not in c.groups and c.coordinator_error("g") == E.NOT_COORDINATOR
        # Stale leadership changes are ignored (Kafka's epoch checks): an
        # election older than the resignation, then a resignation older than
        # the next election.
        assert await c.on_elected(p, 2) is False
        assert c.coordinator_error("g") == E.NOT_COORDINATOR
        c.store.executor = None
        assert await c.on_elected(p, 4) is True
        assert c.on_resigned(p, 3) == 0
        assert c.coordinator_error("g") == E.NONE
        assert c.fetch_offsets("g", [("t", 0)])[("t", 0)].offset == 5
        held.shutdown()
        await c.stop()
        node.close()

    run(scenario, event_loop)


@pytest.mark.parametrize("event_loop", EVENT_LOOPS)
def test_marker_written_while_loading_completes_the_loaded_offsets(
        tmp_path: Path, event_loop: str) -> None:
    """A transaction's COMMIT marker written into a partition while it loads
    is past where the load stops: its offsets count once the load is in."""
    async def scenario() -> None:
        node, c = group_node(tmp_path)
        assert c.commit_txn_offsets("g", 7, 0, -1, "", None, [OffsetCommit("t", 2, 42)]) == {
            ("t", 2): E.NONE}
        p = partition_for("g", PARTITIONS)
        c.on_resigned(p, 1)
        held = c.store.executor = HeldExecutor()
        loaded = c.on_elected(p, 2)
        c.complete_txn(p, 7, 0, True)  # as the replica manager writes it (WriteTxnMarkers)
        held.release()
        assert await loaded is True
        assert c.pending_txn_offsets("g") == set()
        assert c.fetch_offsets("g", [("t", 2)])[("t", 2)].offset == 42
        held.shutdown()
        node.close()

    run(scenario, event_loop)


def test_internal_topic_made_by_a_client_is_owned_and_its_deletion_resigns(
        tmp_path: Path) -> None:
    """On one node, whoever makes ``__consumer_offsets`` (here CreateTopics,
    with its own partition count) its coordinator owns every partition at
    once; deleting it resigns them all, and the next commit makes it again."""
    node = LocalNode(tmp_path)
    node.topics.create("t", 4)
    c = node.groups(CoordinatorConfig(offsets_topic_num_partitions=PARTITIONS), clock)
    assert c.coordinator_error("g") == E.NOT_COORDINATOR  # no topic yet: nothing led
    node.topics.create(OFFSETS_TOPIC, 3, {"cleanup.policy": "compact"})
    assert c.store.num_partitions == 3
    assert all(c.ownership.error(p) == E.NONE for p in range(3))
    assert c.commit_offsets("g", -1, "", None, [OffsetCommit("t", 0, 5)]) == {("t", 0): 0}

    deleted = node.topics.delete(OFFSETS_TOPIC)
    node.replicas.remove_topic(OFFSETS_TOPIC, deleted.partitions)
    assert c.remove_topic_offsets(OFFSETS_TOPIC) == 1
    node.topics.forget(OFFSETS_TOPIC)
    assert c.coordinator_error("g") == E.NOT_COORDINATOR and c.groups == {}
    assert c.commit_offsets("g", -1, "", None, [OffsetCommit("t", 0, 6)]) == {("t", 0): 0}
    assert node.topics.get(OFFSETS_TOPIC).partitions == PARTITIONS
    assert c.fetch_offsets("g", [("t", 0)])[("t", 0)].offset == 6
    node.close()


@pytest.mark.parametrize("event_loop", EVENT_LOOPS)
def test_prepare_commit_found_at_election_is_completed(tmp_path: Path,
                                                       event_loop: str) -> None:
    async def scenario() -> None:
        markers, now = Markers(), 1_000
        node = LocalNode(tmp_path)
        c = node.txns(markers, TxnConfig(num_partitions=3), lambda: now)
        code, pid, _ = c.init_producer_id("app", 60_000)
        assert code == E.NONE
        assert c.add_partitions("app", pid, 0, [("t", 0), ("t", 1)]) == E.NONE
        # The coordinator wrote PrepareCommit, and lost its partition before
        # the markers (another node took it over).
        c._persist(c.txns["app"], TxnState.PREPARE_COMMIT)
        p = c.store.partition_for("app")
        assert c.on_resigned(p, 1) == 1
        assert "app" not in c.txns
        assert c.init_producer_id("app", 60_000)[0] == E.NOT_COORDINATOR
        assert c.end_txn("app", pid, 0, True) == E.NOT_COORDINATOR
        assert c.describe("app") == (E.NOT_COORDINATOR, None)
        assert c.list_states() == (E.NONE, [])

        held = c.store.executor = HeldExecutor()
        loaded = c.on_elected(p, 2)
        assert c.add_partitions("app", pid, 0, [("t", 2)]) == E.COORDINATOR_LOAD_IN_PROGRESS
        assert c.list_states() == (E.COORDINATOR_LOAD_IN_PROGRESS, [])
        held.release()
        assert await loaded is True
        # Completed at the election: the markers again, at the new
        # coordinator epoch, then CompleteCommit in the log.
        assert markers.written == [("t", 0, pid, 0, True), ("t", 1, pid, 0, True)]
        assert markers.coordinator_epochs == [2, 2]
        assert c.describe("app")[1].state == TxnState.COMPLETE_COMMIT
        node.crash()
        again = LocalNode(tmp_path).txns(markers, TxnConfig(num_partitions=3), lambda: now)
        assert again.txns["app"].state == TxnState.COMPLETE_COMMIT
        assert len(markers.written) == 2  # nothing left to complete
        held.shutdown()

    run(scenario, event_loop)
