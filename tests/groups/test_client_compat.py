"""The less-trodden group APIs through the real Python clients (kafka-python's
admin client, raw frames where no client sends the case), where pylog used to
answer differently from Kafka 3.6."""

from __future__ import annotations

import select

import pytest
from kafka_wire import RawClient
from test_group_protocol import E, Member, join_body

from pylog.protocol import ApiKey

WAIT_S = 60  # generous: the waits below end within a session timeout when all is well


@pytest.fixture
def admin(group_broker):
    from kafka.admin import KafkaAdminClient

    client = KafkaAdminClient(bootstrap_servers=group_broker.bootstrap, request_timeout_ms=10000)
    yield client
    client.close()


def stable_member(bootstrap: str, group: str) -> Member:
    """A dynamic member alone in ``group``, synced (Stable)."""
    m = Member(bootstrap, group)
    r = m.join()
    assert r.error_code == 0 and r.leader == m.member_id
    m.send_sync({m.member_id: b"a"})
    assert m.recv_sync().error_code == 0
    return m


def test_leave_group_with_the_empty_group_id_is_invalid(group_broker, admin) -> None:
    """Kafka allows "" only for OffsetCommit/OffsetFetch/DescribeGroups/DeleteGroups;
    LeaveGroup answers INVALID_GROUP_ID at the top level, with no member list."""
    from kafka.admin import MemberToRemove
    from kafka.errors import InvalidGroupIdError

    with pytest.raises(InvalidGroupIdError):
        admin.remove_group_members("", [MemberToRemove(member_id="someone")])
    with RawClient(group_broker.bootstrap) as c:
        r = c.request(ApiKey.LEAVE_GROUP, 1, {"group_id": "", "member_id": "someone"})
        assert r.error_code == E.INVALID_GROUP_ID
        r = c.request(
            ApiKey.LEAVE_GROUP, 4, {"group_id": "", "members": [{"member_id": "someone"}]}
        )
        assert (r.error_code, r.members) == (E.INVALID_GROUP_ID, [])


def test_unknown_group_instance_id_of_a_known_member_is_refused(group_broker, admin, name) -> None:
    """Kafka's validateCurrentMember: a group.instance.id the group does not know is
    UNKNOWN_MEMBER_ID even when the member id is a member's; the admin client's
    removal must not remove that member."""
    from kafka.admin import MemberToRemove
    from kafka.errors import UnknownMemberIdError

    m = stable_member(group_broker.bootstrap, name)
    try:
        assert m.heartbeat(instance="ghost") == E.UNKNOWN_MEMBER_ID
        r = m.client.request(
            ApiKey.SYNC_GROUP,
            3,
            {
                "group_id": name,
                "generation_id": m.generation,
                "member_id": m.member_id,
                "group_instance_id": "ghost",
                "assignments": [],
            },
        )
        assert r.error_code == E.UNKNOWN_MEMBER_ID
        removed = admin.remove_group_members(
            name, [MemberToRemove(member_id=m.member_id, group_instance_id="ghost")]
        )
        assert list(removed.values()) == [UnknownMemberIdError]
        # Still in the group, still Stable, same generation.
        assert m.heartbeat() == 0
        described = admin.describe_groups([name])[name]
        assert described["group_state"] == "Stable"
        assert [x["member_id"] for x in described["members"]] == [m.member_id]
    finally:
        m.close()


def test_member_removed_while_its_join_is_parked_gets_no_member_id(
    group_broker, admin, name
) -> None:
    """Kafka's removeMemberAndUpdateGroup answers a parked JoinGroup UNKNOWN_MEMBER_ID
    with the empty member id, so the client starts over as a new member."""
    from kafka.admin import MemberToRemove
    from kafka.errors import NoError

    first = stable_member(group_broker.bootstrap, name)
    second = Member(group_broker.bootstrap, name)
    try:
        second.send_join(rebalance_ms=600000)
        r = second.recv_join()
        assert r.error_code == E.MEMBER_ID_REQUIRED
        second.member_id = r.member_id
        second.send_join(rebalance_ms=600000)  # parked: ``first`` has not rejoined
        assert first.heartbeat() == E.REBALANCE_IN_PROGRESS
        removed = admin.remove_group_members(name, [MemberToRemove(member_id=second.member_id)])
        assert list(removed.values()) == [NoError]
        r = second.recv_join()
        assert (r.error_code, r.member_id, r.generation_id) == (E.UNKNOWN_MEMBER_ID, "", -1)
        # The rebalance goes on without it.
        r = first.join()
        assert (r.error_code, r.generation_id, [m.member_id for m in r.members]) == (
            0,
            2,
            [first.member_id],
        )
    finally:
        first.close()
        second.close()


def test_pending_member_that_never_rejoins_expires_after_its_session(group_broker, name) -> None:
    """A JoinGroup answered MEMBER_ID_REQUIRED makes a pending member, which the
    rebalance waits for; one that never comes back is dropped after its session
    timeout (Kafka's addPendingMemberExpiration), not after the rebalance timeout."""
    first = stable_member(group_broker.bootstrap, name)
    try:
        with RawClient(group_broker.bootstrap) as c:
            r = c.request(ApiKey.JOIN_GROUP, 5, join_body(name, rebalance_ms=600000))
            assert r.error_code == E.MEMBER_ID_REQUIRED
            pending = r.member_id
        # A pending member alone does not rebalance the group.
        assert first.heartbeat() == 0
        first.send_join(rebalance_ms=600000)  # the leader rejoins: a rebalance
        assert select.select([first.client.sock], [], [], WAIT_S)[0], "still parked"
        r = first.recv_join()
        assert (r.error_code, r.generation_id, [m.member_id for m in r.members]) == (
            0,
            2,
            [first.member_id],
        )
        r = first.client.request(
            ApiKey.LEAVE_GROUP, 4, {"group_id": name, "members": [{"member_id": pending}]}
        )
        assert r.members[0].error_code == E.UNKNOWN_MEMBER_ID
    finally:
        first.close()
