"""Group coordinator behaviours where pylog used to differ from Kafka 3.6:
the SyncGroup deadline, OffsetCommit validation, OffsetDelete of unknown
partitions, the empty group id, the metadata size limit, the initial delay."""

from __future__ import annotations

import select
import time

from group_helpers import create_topic
from kafka_wire import RawClient
from test_group_protocol import E, Member, subscription

from pylog.protocol import ApiKey

WAIT_S = 30  # generous: each wait below ends in a few seconds when all is well
REBALANCE_MS = 2000  # the SyncGroup deadline of the tests that wait for it


def answered(client: RawClient, timeout: float) -> bool:
    """Whether a response is waiting on the connection (a parked request returned)."""
    return bool(select.select([client.sock], [], [], timeout)[0])


def join_together(members: list[Member], topic: str, rebalance_ms: int) -> None:
    """All members in one first generation, the first one leading (v5: each
    rejoins with the member id its MEMBER_ID_REQUIRED answer gave it)."""
    protocols = [("range", subscription(topic))]
    for m in members:
        m.send_join(protocols=protocols, rebalance_ms=rebalance_ms)
        r = m.recv_join()
        assert r.error_code == E.MEMBER_ID_REQUIRED
        m.member_id = r.member_id
        m.send_join(protocols=protocols, rebalance_ms=rebalance_ms)
    results = [m.recv_join() for m in members]
    assert [r.error_code for r in results] == [0] * len(members)
    assert {r.generation_id for r in results} == {1}
    assert results[0].leader == members[0].member_id


def heartbeat_until_answered(beating: Member, parked: Member) -> list[int]:
    """Heartbeat ``beating`` (so no session expires) until ``parked`` has an
    answer to its parked request; the heartbeat errors seen meanwhile."""
    deadline = time.monotonic() + WAIT_S
    errors = []
    while not answered(parked.client, 0.2):
        errors.append(beating.heartbeat())
        assert time.monotonic() < deadline, f"no answer for {WAIT_S}s; heartbeats: {errors}"
    return errors


def commit(client: RawClient, group: str, topic: str, partition: int, *, generation: int = -1,
           member_id: str = "", metadata: str = "") -> int:
    r = client.request(ApiKey.OFFSET_COMMIT, 8, {
        "group_id": group, "generation_id_or_member_epoch": generation,
        "member_id": member_id, "topics": [{"name": topic, "partitions": [
            {"partition_index": partition, "committed_offset": 7,
             "committed_metadata": metadata}]}]})
    return r.topics[0].partitions[0].error_code


def fetch_metadata(client: RawClient, group: str, topic: str) -> str:
    r = client.request(ApiKey.OFFSET_FETCH, 1, {"group_id": group, "topics": [
        {"name": topic, "partition_indexes": [0]}]})
    return r.topics[0].partitions[0].metadata


def test_member_without_sync_group_is_removed_after_the_rebalance_timeout(
        group_broker, name) -> None:
    """KAFKA-12890: the leader answered its JoinGroup but never sends SyncGroup
    (while heartbeating).  After the rebalance timeout it is removed and the
    group rebalances: the follower's parked SyncGroup is told so."""
    bs = group_broker.bootstrap
    a, b = Member(bs, name), Member(bs, name)
    try:
        join_together([a, b], name, rebalance_ms=REBALANCE_MS)
        b.send_sync()
        beats = heartbeat_until_answered(a, b)
        assert set(beats) <= {0, E.UNKNOWN_MEMBER_ID}, beats
        assert b.recv_sync().error_code == E.REBALANCE_IN_PROGRESS
        assert a.heartbeat() == E.UNKNOWN_MEMBER_ID
        assert b.heartbeat() == E.REBALANCE_IN_PROGRESS
        # The follower rejoins and leads the next generation on its own.
        r = b.join(protocols=[("range", subscription(name))], rebalance_ms=REBALANCE_MS)
        assert (r.error_code, r.generation_id, r.leader) == (0, 2, b.member_id)
        assert [m.member_id for m in r.members] == [b.member_id]
    finally:
        a.close()
        b.close()


def test_follower_without_sync_group_is_removed_once_the_group_is_stable(
        group_broker, name) -> None:
    """As in Kafka the deadline outlives the leader's SyncGroup: a follower that
    never syncs is removed even though the group became Stable, and the next
    generation, where everyone syncs, is left alone past its deadline."""
    bs = group_broker.bootstrap
    a, b = Member(bs, name), Member(bs, name)
    try:
        join_together([a, b], name, rebalance_ms=REBALANCE_MS)
        a.send_sync({a.member_id: b"A1", b.member_id: b"B1"})
        assert a.recv_sync().assignment == b"A1"
        deadline = time.monotonic() + WAIT_S
        leader_beats = set()
        while (error := b.heartbeat()) == 0:  # the follower heartbeats, never syncs
            leader_beats.add(a.heartbeat())
            assert time.monotonic() < deadline, "the follower was never removed"
            time.sleep(0.2)
        assert error == E.UNKNOWN_MEMBER_ID
        assert leader_beats <= {0, E.REBALANCE_IN_PROGRESS}, leader_beats
        assert a.heartbeat() == E.REBALANCE_IN_PROGRESS
        r = a.join(protocols=[("range", subscription(name))], rebalance_ms=REBALANCE_MS)
        assert (r.error_code, r.generation_id) == (0, 2)
        a.send_sync({a.member_id: b"A2"})
        assert a.recv_sync().assignment == b"A2"
        # Twice the rebalance timeout later the synced group is still as it was.
        beats = set()
        for _ in range(2 * REBALANCE_MS // 200):
            time.sleep(0.2)
            beats.add(a.heartbeat())
        assert beats == {0}, beats
    finally:
        a.close()
        b.close()


def test_offset_commit_while_completing_checks_member_and_generation_first(
        group_broker, name) -> None:
    """Kafka's validateOffsetCommit: an unknown member, a stale generation or
    an admin commit to a non-empty group are refused as such; only a member of
    the current generation is told to wait for the rebalance to complete."""
    bs = group_broker.bootstrap
    create_topic(bs, name, 1)
    a, b = Member(bs, name), Member(bs, name)
    try:
        join_together([a, b], name, rebalance_ms=10000)  # no SyncGroup: Completing
        c = a.client
        assert commit(c, name, name, 0, generation=1, member_id="bogus") == \
            E.UNKNOWN_MEMBER_ID
        assert commit(c, name, name, 0, generation=0, member_id=a.member_id) == \
            E.ILLEGAL_GENERATION
        assert commit(c, name, name, 0) == E.UNKNOWN_MEMBER_ID  # admin: generation -1
        assert commit(c, name, name, 0, generation=1, member_id=a.member_id) == \
            E.REBALANCE_IN_PROGRESS
    finally:
        a.close()
        b.close()


def test_offset_delete_of_unknown_topic_or_partition(group_broker, name) -> None:
    """KIP-496: partitions that do not exist get UNKNOWN_TOPIC_OR_PARTITION each;
    the others of the same request are deleted."""
    bs = group_broker.bootstrap
    create_topic(bs, name, 2)
    with RawClient(bs) as c:
        assert commit(c, name, name, 0) == 0
        r = c.request(ApiKey.OFFSET_DELETE, 0, {"group_id": name, "topics": [
            {"name": name + "-none", "partitions": [{"partition_index": 0}]},
            {"name": name, "partitions": [{"partition_index": 5},
                                          {"partition_index": 0}]}]})
        assert r.error_code == 0
        assert [(t.name, p.partition_index, p.error_code)
                for t in r.topics for p in t.partitions] == [
            (name + "-none", 0, E.UNKNOWN_TOPIC_OR_PARTITION),
            (name, 5, E.UNKNOWN_TOPIC_OR_PARTITION), (name, 0, 0)]
        # A group error still answers for the whole request.
        r = c.request(ApiKey.OFFSET_DELETE, 0, {"group_id": name + "-none", "topics": [
            {"name": name + "-none", "partitions": [{"partition_index": 0}]}]})
        assert (r.error_code, r.topics) == (E.GROUP_ID_NOT_FOUND, [])


def test_offsets_of_the_empty_group_id(start_broker, name) -> None:
    """Kafka's isValidGroupId lets OffsetCommit and OffsetFetch use "" (backwards
    compatibility); OffsetDelete still refuses it.  Own broker: the "" group
    must not show up in the other tests' group listings."""
    bs = start_broker().bootstrap
    create_topic(bs, name, 1)
    with RawClient(bs) as c:
        assert commit(c, "", name, 0, metadata="empty") == 0
        assert fetch_metadata(c, "", name) == "empty"
        r = c.request(ApiKey.OFFSET_FETCH, 8, {"groups": [{"group_id": "", "topics": None}]})
        assert [(g.group_id, g.error_code, [p.committed_offset for t in g.topics
                                            for p in t.partitions]) for g in r.groups] == [
            ("", 0, [7])]
        r = c.request(ApiKey.OFFSET_DELETE, 0, {"group_id": "", "topics": [
            {"name": name, "partitions": [{"partition_index": 0}]}]})
        assert (r.error_code, r.topics) == (E.INVALID_GROUP_ID, [])


def test_offset_metadata_limit_counts_utf16_code_units(group_broker, name) -> None:
    """offset.metadata.max.bytes (4096) is compared with Java's String.length():
    UTF-16 code units, not UTF-8 bytes."""
    bs = group_broker.bootstrap
    create_topic(bs, name, 1)
    accented = "\u00e9" * 3000  # 3000 units, 6000 UTF-8 bytes
    smileys = "\U0001F600" * 2048  # 4096 units (surrogate pairs), 8192 UTF-8 bytes
    with RawClient(bs) as c:
        assert commit(c, name, name, 0, metadata=accented) == 0
        assert fetch_metadata(c, name, name) == accented
        assert commit(c, name, name, 0, metadata=smileys) == 0
        assert fetch_metadata(c, name, name) == smileys
        assert commit(c, name, name, 0, metadata=smileys + "x") == \
            E.OFFSET_METADATA_TOO_LARGE
        assert commit(c, name, name, 0, metadata="x" * 4097) == E.OFFSET_METADATA_TOO_LARGE


def test_initial_delay_of_a_reused_group_is_not_extended(start_broker, name) -> None:
    """Only a brand-new group (generation 0) lets each newcomer extend the
    initial rebalance delay; an Empty group with a past generation completes
    its JoinGroups after one delay although members keep arriving (before,
    they held it back until the 60 s rebalance timeout).  Own broker: the late
    joiners leave a rebalance behind that would run on for a minute."""
    bs = start_broker().bootstrap
    first = Member(bs, name)
    joiners: list[Member] = []
    try:
        assert first.join().generation_id == 1
        assert first.leave() == 0  # Empty, generation 2
        joiners.append(Member(bs, name, version=3))  # v3: no MEMBER_ID_REQUIRED
        joiners[0].send_join(rebalance_ms=60000)
        deadline = time.monotonic() + WAIT_S
        while not answered(joiners[0].client, 0.1):
            assert time.monotonic() < deadline, f"{len(joiners)} joiners, no answer"
            joiners.append(Member(bs, name, version=3))
            joiners[-1].send_join(rebalance_ms=60000)
        r = joiners[0].recv_join()
        assert (r.error_code, r.generation_id) == (0, 3)
    finally:
        for m in [first, *joiners]:
            m.close()


def _coordinators_answer(client: RawClient, groups: list[str]) -> list[int]:
    return [client.request(ApiKey.FIND_COORDINATOR, 3, {"key": g, "key_type": 0}).error_code
            for g in groups]


def test_offsets_topic_asked_for_before_any_group(start_broker, name) -> None:
    """A client's Metadata for __consumer_offsets before any group used it
    (kcat -L -t __consumer_offsets) creates it as the coordinator would, as
    Kafka's AutoTopicCreationManager: offsets.topic.num.partitions partitions,
    compacted, not num.partitions; every group can then be coordinated."""
    b = start_broker("offsets.topic.num.partitions=5", "num.partitions=1")
    groups = [f"{name}-{i}" for i in range(12)]  # every partition of 5, surely
    with RawClient(b.bootstrap) as c:
        md = c.request(ApiKey.METADATA, 9, {"topics": [{"name": "__consumer_offsets"}],
                                            "allow_auto_topic_creation": True})
        assert len(md.topics[0].partitions) == 5
        assert _coordinators_answer(c, groups) == [0] * len(groups)
        r = c.request(ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [
            {"resource_type": 2, "resource_name": "__consumer_offsets",
             "configuration_keys": ["cleanup.policy"]}],
            "include_synonyms": False, "include_documentation": False})
        assert r.results[0].configs[0].value == "compact"
        assert commit(c, groups[-1], "__consumer_offsets", 0) == 0


def test_offsets_topic_created_by_a_client_is_followed(start_broker, name) -> None:
    """__consumer_offsets created by CreateTopics with its own partition count:
    the coordinator maps groups onto the partitions the topic has (Kafka's
    getGroupMetadataTopicPartitionCount), not the configured 50."""
    b = start_broker()
    create_topic(b.bootstrap, "__consumer_offsets", 2)
    groups = [f"{name}-{i}" for i in range(8)]
    with RawClient(b.bootstrap) as c:
        assert _coordinators_answer(c, groups) == [0] * len(groups)
        create_topic(b.bootstrap, name, 1)
        assert [commit(c, g, name, 0) for g in groups] == [0] * len(groups)
    assert b.stop() == 0
    b2 = start_broker(log_dir=b.log_dir, port=b.port)
    with RawClient(b2.bootstrap) as c:
        r = c.request(ApiKey.OFFSET_FETCH, 8, {"groups": [
            {"group_id": g, "topics": [{"name": name, "partition_indexes": [0]}]}
            for g in groups], "require_stable": False})
        assert [g.topics[0].partitions[0].committed_offset for g in r.groups] == [7] * 8
