"""__consumer_offsets formats, loading (last value wins, tombstones) and expiry
with an injected clock, in process (no broker)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from broker_process import EVENT_LOOPS
from local_node import LocalNode

from pylog.coordinator import GroupCoordinator, GroupState
from pylog.coordinator import records as fmt
from pylog.coordinator.coordinator import CoordinatorConfig, JoinRequest, OffsetCommit
from pylog.coordinator.offsets_store import OFFSETS_TOPIC
from pylog.server.main import event_loop_factory
from pylog.server.topics import TopicRegistry

DAY_MS = 24 * 3600 * 1000
# ConsumerProtocolSubscription v0 of topic "t": version, ["t"], null user data.
SUBSCRIPTION = b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\xff\xff\xff\xff"


class Clock:
    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def local_node(path: Path) -> LocalNode:
    node = LocalNode(path)
    if node.topics.get("t") is None:
        node.topics.create("t", 4)
        node.topics.create("u", 1)
    return node


def coordinator(path: Path, clock: Clock, **cfg) -> tuple[GroupCoordinator, TopicRegistry]:
    """A node's group coordinator, every partition of the offsets topic loaded."""
    node = local_node(path)
    config = CoordinatorConfig(offsets_topic_num_partitions=5, **cfg)
    return node.groups(config, clock), node.topics


def test_key_value_layouts_round_trip() -> None:
    key = fmt.offset_key("g", "t", 3)
    assert key == b"\x00\x01\x00\x01g\x00\x01t\x00\x00\x00\x03"
    assert fmt.parse_key(key) == fmt.OffsetKey("g", "t", 3)
    assert fmt.parse_key(fmt.group_key("g")) == fmt.GroupKey("g")
    assert fmt.parse_key(b"\x00\x05\x00\x01g") is None  # a newer record kind: skipped
    value = fmt.OffsetAndMetadata(42, 7, "meta", 1234)
    raw = fmt.offset_value(value)
    assert raw[:2] == b"\x00\x03" and fmt.parse_offset_value(raw) == value
    expiring = fmt.OffsetAndMetadata(42, -1, "", 1000, 5000)
    raw = fmt.offset_value(expiring)
    assert raw[:2] == b"\x00\x01" and fmt.parse_offset_value(raw) == expiring
    group = fmt.StoredGroup("consumer", 3, "range", "m1", 99, [
        fmt.StoredMember("m1", "i1", "c1", "/127.0.0.1", 300000, 10000, b"sub", b"asg"),
        fmt.StoredMember("m2", None, "c2", "/127.0.0.2", 300000, 10000, b"", b"")])
    raw = fmt.group_value(group)
    assert raw[:2] == b"\x00\x03" and fmt.parse_group_value(raw) == group


def test_flexible_v4_group_value_is_read() -> None:
    # GroupMetadataValue v4 (Kafka 3.x): compact strings/bytes, tagged fields.
    def cs(s: str | None) -> bytes:
        return b"\x00" if s is None else bytes([len(s) + 1]) + s.encode()

    member = (cs("m1") + cs(None) + cs("c1") + cs("/h") + (5000).to_bytes(4, "big")
              + (6000).to_bytes(4, "big") + b"\x02S" + b"\x02A" + b"\x00")
    raw = (b"\x00\x04" + cs("consumer") + (2).to_bytes(4, "big") + cs("range") + cs("m1")
           + (77).to_bytes(8, "big") + b"\x02" + member + b"\x00")
    g = fmt.parse_group_value(raw)
    assert (g.protocol_type, g.generation, g.protocol, g.leader) == ("consumer", 2, "range", "m1")
    assert g.members == [fmt.StoredMember("m1", None, "c1", "/h", 5000, 6000, b"S", b"A")]


def test_commits_load_back_last_value_wins(tmp_path: Path) -> None:
    clock = Clock()
    c, topics = coordinator(tmp_path, clock)
    assert topics.get(OFFSETS_TOPIC) is None  # created on first use only
    assert c.commit_offsets("g", -1, "", None, [OffsetCommit("t", 0, 5, 1, "a")]) == {
        ("t", 0): 0}
    c.commit_offsets("g", -1, "", None, [OffsetCommit("t", 0, 9, 2, "b"),
                                         OffsetCommit("t", 1, 3)])
    c.commit_offsets("h", -1, "", None, [OffsetCommit("t", 2, 1)])
    assert topics.get(OFFSETS_TOPIC).partitions == 5
    assert c.delete_groups(["h"]) == {"h": 0}
    topics.logs.close()

    again, topics = coordinator(tmp_path, clock)
    assert set(again.groups) == {"g"}
    got = again.fetch_offsets("g", None)
    assert {tp: (o.offset, o.leader_epoch, o.metadata) for tp, o in got.items()} == {
        ("t", 0): (9, 2, "b"), ("t", 1): (3, -1, "")}
    assert again.groups["g"].is_(GroupState.EMPTY)
    topics.logs.close()


def test_offsets_of_empty_groups_expire(tmp_path: Path) -> None:
    clock = Clock()
    c, topics = coordinator(tmp_path, clock, offsets_retention_minutes=7 * 24 * 60)
    c.commit_offsets("old", -1, "", None, [OffsetCommit("t", 0, 5)])
    clock.now += 6 * DAY_MS
    c.commit_offsets("new", -1, "", None, [OffsetCommit("t", 0, 6)])
    assert c.expire_offsets() == 0
    clock.now += 1 * DAY_MS
    assert c.expire_offsets() == 1  # "old" is 7 days old, "new" 1 day
    assert set(c.groups) == {"new"}  # an empty group without offsets is removed
    assert c.expire_offsets(clock.now + 6 * DAY_MS) == 1
    assert c.groups == {}
    topics.logs.close()
    again, topics = coordinator(tmp_path, clock)
    assert again.groups == {}  # the tombstones were written
    topics.logs.close()


@pytest.mark.parametrize("event_loop", EVENT_LOOPS)
def test_group_with_members_loads_stable_and_expires_only_when_empty(tmp_path: Path,
                                                                      event_loop: str) -> None:
    clock = Clock()

    async def scenario() -> None:
        c, topics = coordinator(tmp_path, clock, group_initial_rebalance_delay_ms=0,
                                offsets_retention_minutes=1)
        req = JoinRequest("g", "", None, "client", "/127.0.0.1", 10000, 6000, "consumer",
                          [("range", SUBSCRIPTION)], 3)
        result = await c.join_group(req)
        assert (result.error, result.generation) == (0, 1)
        sync = await c.sync_group("g", 1, result.member_id, None, None, None,
                                  {result.member_id: b"assigned"})
        assert sync.assignment == b"assigned"
        c.commit_offsets("g", 1, result.member_id, None, [OffsetCommit("t", 1, 11)])
        clock.now += 10 * 60_000
        assert c.expire_offsets() == 0  # Stable and subscribed: kept
        c.commit_offsets("g", 1, result.member_id, None, [OffsetCommit("u", 0, 1)])
        clock.now += 10 * 60_000
        assert c.expire_offsets() == 1  # "u": nobody subscribes to it
        await c.stop()
        topics.logs.close()

        again, topics = coordinator(tmp_path, clock)
        g = again.groups["g"]
        assert g.is_(GroupState.STABLE) and g.generation == 1
        assert g.members[result.member_id].assignment == b"assigned"
        assert again.heartbeat("g", 1, result.member_id, None) == 0
        await again.stop()
        topics.logs.close()

    with asyncio.Runner(loop_factory=event_loop_factory(event_loop)) as runner:
        runner.run(scenario())


def test_deleting_a_topic_removes_its_offsets(tmp_path: Path) -> None:
    c, topics = coordinator(tmp_path, Clock())
    c.commit_offsets("g", -1, "", None, [OffsetCommit("t", 0, 5), OffsetCommit("u", 0, 1)])
    c.commit_offsets("h", -1, "", None, [OffsetCommit("u", 0, 2)])
    assert c.remove_topic_offsets("u") == 2
    assert set(c.groups) == {"g"} and set(c.groups["g"].offsets) == {("t", 0)}
    topics.logs.close()


def test_first_group_creates_its_partition_now_and_the_rest_on_the_executor(
        tmp_path: Path) -> None:
    """FindCoordinator / a join / a commit must not create all the partitions'
    logs on the event loop: the group's partition at once, the others on the
    node's executor; a restart sees the whole topic either way."""
    from concurrent.futures import ThreadPoolExecutor

    node = local_node(tmp_path)
    c = node.groups(CoordinatorConfig(offsets_topic_num_partitions=5), Clock())
    pending = []

    class Deferred(ThreadPoolExecutor):
        def submit(self, fn, /, *args, **kwargs):  # run later, when the test says so
            pending.append((fn, args, kwargs))
            return super().submit(lambda: None)

    with Deferred(max_workers=1) as executor:
        c.store.topic.executor = executor
        p = c.find_partition("g")
        assert node.topics.get(OFFSETS_TOPIC).partitions == 5
        present = [q for q in range(5) if node.logs.get_log(OFFSETS_TOPIC, q)]
        assert present == [p]
        assert c.coordinator_error("g") == 0  # every partition led here, owned at once
        assert c.commit_offsets("g", -1, "", None, [OffsetCommit("t", 0, 5)]) == {("t", 0): 0}
        fn, args, kwargs = pending.pop()
        fn(*args, **kwargs)
    assert all(node.logs.get_log(OFFSETS_TOPIC, q) for q in range(5))
    node.close()

    again = local_node(tmp_path)
    assert again.topics.get(OFFSETS_TOPIC).partitions == 5
    assert all(again.logs.get_log(OFFSETS_TOPIC, q) for q in range(5))
    again.close()


def test_partitions_left_missing_are_created_on_restart(tmp_path: Path) -> None:
    node = local_node(tmp_path)
    node.topics.create(OFFSETS_TOPIC, 5, {"cleanup.policy": "compact"}, only=(3,))
    node.close()
    again = local_node(tmp_path)
    assert again.topics.get(OFFSETS_TOPIC).partitions == 5
    assert all(again.logs.get_log(OFFSETS_TOPIC, q) for q in range(5))
    again.close()


def test_an_unreadable_record_is_skipped_at_load(tmp_path: Path, caplog) -> None:
    """Garbage in __consumer_offsets (a torn or foreign record) costs that one
    record, with a warning: the node still starts and every other group's
    offsets, also those written after the garbage, load."""
    clock = Clock()
    c, topics = coordinator(tmp_path, clock)
    c.commit_offsets("g", -1, "", None, [OffsetCommit("t", 0, 5, 1, "a")])
    c.commit_offsets("h", -1, "", None, [OffsetCommit("t", 1, 7)])
    garbage = [
        (b"\x00\x01garbage", b"x"),  # an offset key whose group runs past its end
        (b"\x00\x02\x00\x02\xff\xfe", None),  # a group key that is no UTF-8
        (fmt.offset_key("g", "t", 0), b"\x00\x03\x00\x00"),  # a truncated offset value
        (fmt.group_key("h"), b"\x00\x03\xff"),  # a truncated group value
    ]
    for group in ("g", "h"):  # into each group's own partition
        c.store.append(group, garbage)
    c.commit_offsets("g", -1, "", None, [OffsetCommit("t", 2, 9)])  # after the garbage
    topics.logs.close()

    with caplog.at_level("WARNING", logger="pylog.coordinator.group_loader"):
        again, topics = coordinator(tmp_path, clock)
    assert set(again.groups) == {"g", "h"}
    got = {g: {tp: (o.offset, o.leader_epoch, o.metadata)
               for tp, o in again.fetch_offsets(g, None).items()} for g in ("g", "h")}
    assert got == {"g": {("t", 0): (5, 1, "a"), ("t", 2): (9, -1, "")},
                   "h": {("t", 1): (7, -1, "")}}
    skipped = [r for r in caplog.records if "unreadable record" in r.getMessage()]
    assert len(skipped) == 2 * len(garbage)
    assert all(OFFSETS_TOPIC in r.getMessage() for r in skipped)
    topics.logs.close()


def test_a_plain_commit_after_a_transactional_one_wins_at_its_commit(tmp_path: Path) -> None:
    """As Kafka's completePendingTxnOffsetCommit: at the COMMIT marker a
    transaction's offset replaces only an older one.  A plain commit written
    between the TxnOffsetCommit and the marker stays; one written before is
    replaced; the same after loading the log again."""
    clock = Clock()
    c, topics = coordinator(tmp_path, clock)
    c.commit_offsets("g", -1, "", None, [OffsetCommit("t", 0, 3), OffsetCommit("t", 1, 3)])
    assert c.commit_txn_offsets("g", 5, 0, -1, "", None, [
        OffsetCommit("t", 0, 7), OffsetCommit("t", 1, 7)]) == {("t", 0): 0, ("t", 1): 0}
    c.commit_offsets("g", -1, "", None, [OffsetCommit("t", 1, 9)])  # after the transaction's
    assert c.pending_txn_offsets("g") == {("t", 0)}
    c.complete_txn(c.store.partition_for("g"), 5, 0, True)
    want = {("t", 0): 7, ("t", 1): 9}
    assert {tp: o.offset for tp, o in c.fetch_offsets("g", None).items()} == want
    topics.logs.close()

    again, topics = coordinator(tmp_path, clock)
    assert {tp: o.offset for tp, o in again.fetch_offsets("g", None).items()} == want
    topics.logs.close()
