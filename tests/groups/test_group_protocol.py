"""The group APIs on the wire: states, fencing, protocol choice, offsets, admin."""

from __future__ import annotations

import struct

import pytest
from group_helpers import REBALANCE_DELAY_MS, create_topic
from kafka_wire import RawClient

from pylog.coordinator.records import java_string_hash, partition_for
from pylog.protocol import ApiKey, ErrorCode

E = ErrorCode


def subscription(*topics: str) -> bytes:
    """ConsumerProtocolSubscription v0: version, topics, null user data."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


def join_body(group: str, member_id: str = "", protocols=(("range", b"m"),), *,
              instance: str | None = None, session_ms: int = 6000,
              protocol_type: str = "consumer", rebalance_ms: int = 10000) -> dict:
    return {"group_id": group, "session_timeout_ms": session_ms,
            "rebalance_timeout_ms": rebalance_ms, "member_id": member_id,
            "group_instance_id": instance, "protocol_type": protocol_type,
            "protocols": [{"name": n, "metadata": m} for n, m in protocols]}


class Member:
    """One group member on its own connection (JoinGroup and SyncGroup park)."""

    def __init__(self, bootstrap: str, group: str, version: int = 5) -> None:
        self.client = RawClient(bootstrap)
        self.group = group
        self.version = version
        self.member_id = ""
        self.generation = -1
        self.pending = None

    def send_join(self, **kw) -> None:
        self.pending = self.client.send(ApiKey.JOIN_GROUP, self.version,
                                        join_body(self.group, self.member_id, **kw))

    def recv_join(self):
        cid, r = self.client.recv(ApiKey.JOIN_GROUP, self.version)
        assert cid == self.pending
        if r.error_code == 0:
            self.member_id, self.generation = r.member_id, r.generation_id
        return r

    def join(self, **kw):
        """Join; a MEMBER_ID_REQUIRED answer is followed by the rejoin, as clients do."""
        self.send_join(**kw)
        r = self.recv_join()
        if r.error_code == E.MEMBER_ID_REQUIRED:
            self.member_id = r.member_id
            self.send_join(**kw)
            r = self.recv_join()
        return r

    def send_sync(self, assignments: dict[str, bytes] | None = None) -> None:
        self.pending = self.client.send(ApiKey.SYNC_GROUP, 3, {
            "group_id": self.group, "generation_id": self.generation,
            "member_id": self.member_id, "group_instance_id": None,
            "assignments": [{"member_id": m, "assignment": a}
                            for m, a in (assignments or {}).items()]})

    def recv_sync(self):
        cid, r = self.client.recv(ApiKey.SYNC_GROUP, 3)
        assert cid == self.pending
        return r

    def heartbeat(self, generation: int | None = None, member_id: str | None = None,
                  instance: str | None = None) -> int:
        return self.client.request(ApiKey.HEARTBEAT, 3, {
            "group_id": self.group, "member_id": self.member_id if member_id is None
            else member_id, "generation_id": self.generation if generation is None
            else generation, "group_instance_id": instance}).error_code

    def commit(self, topic: str, offsets: dict[int, int], generation: int | None = None,
               metadata: str = "") -> dict[int, int]:
        r = self.client.request(ApiKey.OFFSET_COMMIT, 8, {
            "group_id": self.group, "member_id": self.member_id,
            "generation_id_or_member_epoch": self.generation if generation is None
            else generation, "topics": [{"name": topic, "partitions": [
                {"partition_index": p, "committed_offset": o, "committed_metadata": metadata}
                for p, o in offsets.items()]}]})
        return {p.partition_index: p.error_code for p in r.topics[0].partitions}

    def leave(self) -> int:
        r = self.client.request(ApiKey.LEAVE_GROUP, 4, {
            "group_id": self.group, "members": [{"member_id": self.member_id}]})
        return r.members[0].error_code

    def close(self) -> None:
        self.client.close()


def test_java_string_hash_matches_java() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("abc") == 96354
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("\U0001F600") == 0xD83D * 31 + 0xDE00  # UTF-16 code units
    assert java_string_hash("polygenelubricants") == -(2 ** 31)  # abs() would overflow
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("hello", 50) == 99162322 % 50
    assert partition_for("zzzzzzzzzzzzzzzzzzzzzzzz", 50) == abs(
        java_string_hash("zzzzzzzzzzzzzzzzzzzzzzzz")) % 50


def test_find_coordinator_creates_offsets_topic(group_broker) -> None:
    with RawClient(group_broker.bootstrap) as c:
        r = c.request(ApiKey.FIND_COORDINATOR, 3, {"key": "fc-group", "key_type": 0})
        assert (r.error_code, r.node_id, r.port) == (0, 0, group_broker.port)
        r = c.request(ApiKey.FIND_COORDINATOR, 4, {"key_type": 0,
                                                   "coordinator_keys": ["a", "b"]})
        assert [(x.key, x.error_code, x.node_id) for x in r.coordinators] == [
            ("a", 0, 0), ("b", 0, 0)]
        md = c.request(ApiKey.METADATA, 1, {"topics": [{"name": "__consumer_offsets"}]})
        assert md.topics[0].error_code == 0
        assert len(md.topics[0].partitions) == 50


def test_join_sync_heartbeat_and_fencing(group_broker, name) -> None:
    bs = group_broker.bootstrap
    create_topic(bs, name, 2)
    a, b = Member(bs, name), Member(bs, name)
    try:
        r = a.join(protocols=[("range", subscription(name))])
        assert r.error_code == 0 and r.generation_id == 1
        assert r.leader == a.member_id and [m.member_id for m in r.members] == [a.member_id]
        a.send_sync({a.member_id: b"A1"})
        assert a.recv_sync().assignment == b"A1"
        assert a.heartbeat() == 0
        assert a.heartbeat(generation=7) == E.ILLEGAL_GENERATION
        assert a.heartbeat(member_id="nobody") == E.UNKNOWN_MEMBER_ID
        assert a.commit(name, {0: 5}, metadata="m0") == {0: 0}

        # A second member: the group rebalances; the first learns it by heartbeat.
        b.send_join(protocols=[("range", subscription(name))])
        r = b.recv_join()
        assert r.error_code == E.MEMBER_ID_REQUIRED
        b.member_id = r.member_id
        b.send_join(protocols=[("range", subscription(name))])
        assert a.heartbeat() == E.REBALANCE_IN_PROGRESS
        # Commits of the current generation still go through while rebalancing.
        assert a.commit(name, {0: 6}) == {0: 0}
        a.send_join(protocols=[("range", subscription(name))])
        ra, rb = a.recv_join(), b.recv_join()
        assert ra.generation_id == rb.generation_id == 2
        assert ra.leader == a.member_id and len(ra.members) == 2 and rb.members == []
        # CompletingRebalance: commits wait for the assignment; a follower's sync parks.
        assert a.commit(name, {0: 7}) == {0: E.REBALANCE_IN_PROGRESS}
        b.send_sync()
        a.send_sync({a.member_id: b"A2", b.member_id: b"B2"})
        assert a.recv_sync().assignment == b"A2"
        assert b.recv_sync().assignment == b"B2"
        assert a.commit(name, {0: 8}) == {0: 0}
        assert a.commit(name, {0: 9}, generation=1) == {0: E.ILLEGAL_GENERATION}

        with RawClient(bs) as c:
            d = c.request(ApiKey.DESCRIBE_GROUPS, 5, {"groups": [name]}).groups[0]
            assert (d.group_state, d.protocol_type, d.protocol_data) == (
                "Stable", "consumer", "range")
            assert {m.member_id: bytes(m.member_assignment) for m in d.members} == {
                a.member_id: b"A2", b.member_id: b"B2"}
            assert d.members[0].client_host == "/127.0.0.1"
            # A live group: not deletable; its subscribed topic's offsets neither.
            r = c.request(ApiKey.DELETE_GROUPS, 2, {"groups_names": [name]})
            assert r.results[0].error_code == E.NON_EMPTY_GROUP
            r = c.request(ApiKey.OFFSET_DELETE, 0, {"group_id": name, "topics": [
                {"name": name, "partitions": [{"partition_index": 0}]}]})
            assert r.error_code == 0
            assert r.topics[0].partitions[0].error_code == E.GROUP_SUBSCRIBED_TO_TOPIC

        assert b.leave() == 0
        assert a.heartbeat() == E.REBALANCE_IN_PROGRESS
        assert a.leave() == 0
        with RawClient(bs) as c:
            groups = c.request(ApiKey.LIST_GROUPS, 4, {"states_filter": ["empty"]}).groups
            assert (name, "Empty") in [(g.group_id, g.group_state) for g in groups]
            f = c.request(ApiKey.OFFSET_FETCH, 1, {"group_id": name, "topics": [
                {"name": name, "partition_indexes": [0, 1]}]})
            got = {p.partition_index: (p.committed_offset, p.metadata)
                   for p in f.topics[0].partitions}
            assert got == {0: (8, ""), 1: (-1, "")}
            r = c.request(ApiKey.DELETE_GROUPS, 2, {"groups_names": [name, name + "-none"]})
            assert [(x.group_id, x.error_code) for x in r.results] == [
                (name, 0), (name + "-none", E.GROUP_ID_NOT_FOUND)]
            d = c.request(ApiKey.DESCRIBE_GROUPS, 5, {"groups": [name]}).groups[0]
            assert d.group_state == "Dead"
            f = c.request(ApiKey.OFFSET_FETCH, 7, {"group_id": name, "topics": None})
            assert f.topics == []
    finally:
        a.close()
        b.close()


def test_protocol_with_most_votes_among_common(group_broker, name) -> None:
    bs = group_broker.bootstrap
    members = [Member(bs, name, version=3) for _ in range(3)]
    prefs = [[("range", b""), ("roundrobin", b""), ("sticky", b"")],
             [("roundrobin", b""), ("range", b"")],
             [("roundrobin", b""), ("range", b"")]]
    try:
        for m, p in zip(members, prefs, strict=True):  # v3: no MEMBER_ID_REQUIRED
            m.send_join(protocols=p)
        results = [m.recv_join() for m in members]
        assert {r.protocol_name for r in results} == {"roundrobin"}
        assert {r.generation_id for r in results} == {1}
        # A member with nothing in common is refused.
        with RawClient(bs) as c:
            r = c.request(ApiKey.JOIN_GROUP, 5, join_body(name, protocols=[("sticky", b"")]))
            assert r.error_code == E.INCONSISTENT_GROUP_PROTOCOL
            r = c.request(ApiKey.JOIN_GROUP, 5, join_body(name, protocol_type="connect"))
            assert r.error_code == E.INCONSISTENT_GROUP_PROTOCOL
            r = c.request(ApiKey.JOIN_GROUP, 5, join_body(name + "x", session_ms=1000))
            assert r.error_code == E.INVALID_SESSION_TIMEOUT
            r = c.request(ApiKey.JOIN_GROUP, 5, join_body(""))
            assert r.error_code == E.INVALID_GROUP_ID
    finally:
        for m in members:
            m.close()


def test_static_member_rejoin_keeps_generation_and_fences_old(group_broker, name) -> None:
    bs = group_broker.bootstrap
    old, new = Member(bs, name), Member(bs, name)
    try:
        r = old.join(instance="inst-1")
        assert r.error_code == 0 and r.member_id.startswith("inst-1-")
        old.send_sync({old.member_id: b"mine"})
        assert old.recv_sync().assignment == b"mine"
        # The instance restarts: a new member id, same generation, same assignment.
        r = new.join(instance="inst-1")
        assert r.error_code == 0 and r.generation_id == old.generation
        assert new.member_id != old.member_id
        # Before v9 the restarted leader is told the old id leads: it skips assigning.
        assert r.leader == old.member_id and r.members == []
        new.send_sync()
        assert new.recv_sync().assignment == b"mine"
        assert old.heartbeat(instance="inst-1") == E.FENCED_INSTANCE_ID
        assert new.heartbeat(instance="inst-1") == 0
        with RawClient(bs) as c:  # v9: the leader is told to skip the assignment
            r = c.request(ApiKey.JOIN_GROUP, 9, join_body(name, instance="inst-1"))
            assert r.error_code == 0 and r.skip_assignment and r.leader == r.member_id
            assert r.generation_id == old.generation
    finally:
        old.close()
        new.close()


def test_offset_commit_errors_and_multi_group_fetch(group_broker, name) -> None:
    bs = group_broker.bootstrap
    create_topic(bs, name, 3)
    with RawClient(bs) as c:
        def commit(group, topic, partition, offset, metadata="", version=2):
            return c.request(ApiKey.OFFSET_COMMIT, version, {
                "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
                "retention_time_ms": -1, "topics": [{"name": topic, "partitions": [
                    {"partition_index": partition, "committed_offset": offset,
                     "committed_metadata": metadata}]}]}).topics[0].partitions[0].error_code

        assert commit(name + "-a", name, 0, 10, "meta-a") == 0
        assert commit(name + "-b", name, 2, 20, "meta-b", version=9) == 0
        assert commit(name + "-a", name, 5, 1) == E.UNKNOWN_TOPIC_OR_PARTITION
        assert commit(name + "-a", name, 1, 1, "x" * 5000) == E.OFFSET_METADATA_TOO_LARGE
        # A generation for a group nobody manages: refused.
        r = c.request(ApiKey.OFFSET_COMMIT, 8, {
            "group_id": name + "-c", "generation_id_or_member_epoch": 3, "member_id": "m",
            "topics": [{"name": name, "partitions": [
                {"partition_index": 0, "committed_offset": 1}]}]})
        assert r.topics[0].partitions[0].error_code == E.ILLEGAL_GENERATION
        r = c.request(ApiKey.OFFSET_FETCH, 8, {"groups": [
            {"group_id": name + "-a", "topics": None},
            {"group_id": name + "-b", "topics": [{"name": name, "partition_indexes": [1, 2]}]},
            {"group_id": name + "-none", "topics": None}]})
        got = {g.group_id: {(t.name, p.partition_index): (p.committed_offset, p.metadata)
                            for t in g.topics for p in t.partitions} for g in r.groups}
        assert got == {name + "-a": {(name, 0): (10, "meta-a")},
                       name + "-b": {(name, 1): (-1, ""), (name, 2): (20, "meta-b")},
                       name + "-none": {}}
        # An empty simple group's offsets can go; the group goes with the last one.
        r = c.request(ApiKey.OFFSET_DELETE, 0, {"group_id": name + "-a", "topics": [
            {"name": name, "partitions": [{"partition_index": 0}]}]})
        assert (r.error_code, r.topics[0].partitions[0].error_code) == (0, 0)
        groups = [g.group_id for g in c.request(ApiKey.LIST_GROUPS, 3, {}).groups]
        assert name + "-a" not in groups and name + "-b" in groups
        r = c.request(ApiKey.OFFSET_DELETE, 0, {"group_id": name + "-a", "topics": []})
        assert r.error_code == E.GROUP_ID_NOT_FOUND


@pytest.mark.parametrize("version", [0, 3])
def test_old_join_versions_complete_after_initial_delay(group_broker, name, version) -> None:
    import time

    m = Member(group_broker.bootstrap, f"{name}", version=version)
    try:
        started = time.monotonic()
        r = m.join()
        elapsed = time.monotonic() - started
        assert r.error_code == 0 and r.generation_id == 1
        assert elapsed >= REBALANCE_DELAY_MS / 1000 * 0.9
    finally:
        m.close()


def test_node_starts_past_an_unreadable_offsets_record(start_broker, name) -> None:
    """Garbage in __consumer_offsets (put straight into the log here: clients
    may not produce there) is skipped with a warning when the node loads its
    groups: it starts, and every committed offset is there."""
    from pylog.coordinator.offsets_store import OFFSETS_TOPIC
    from pylog.coordinator.records import offset_key
    from pylog.log import LogConfig, LogManager
    from pylog.records import build_batch

    broker = start_broker()
    bs = broker.bootstrap
    create_topic(bs, name, 2)
    groups = [name + "-a", name + "-b"]

    def commit(c: RawClient, group: str, partition: int, offset: int) -> int:
        return c.request(ApiKey.OFFSET_COMMIT, 2, {
            "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
            "retention_time_ms": -1, "topics": [{"name": name, "partitions": [
                {"partition_index": partition, "committed_offset": offset,
                 "committed_metadata": ""}]}]}).topics[0].partitions[0].error_code

    with RawClient(bs) as c:
        assert [commit(c, g, 0, 10 + i) for i, g in enumerate(groups)] == [0, 0]
    assert broker.stop() == 0
    logs = LogManager(broker.log_dir, LogConfig())
    for g in groups:
        lg = logs.get_log(OFFSETS_TOPIC, partition_for(g, 50))
        lg.append(bytearray(build_batch([
            (0, b"\x00\x01garbage", b"x"),  # the group name runs past the key
            (0, offset_key(g, name, 0), b"\x00\x03\x00"),  # a truncated value
        ])))
    logs.close()

    broker = start_broker(log_dir=broker.log_dir, port=broker.port)
    with RawClient(bs) as c:
        assert commit(c, groups[0], 1, 3) == 0  # and the node works on
        r = c.request(ApiKey.OFFSET_FETCH, 8, {"groups": [
            {"group_id": g, "topics": None} for g in groups]})
        got = {g.group_id: {p.partition_index: p.committed_offset
                            for t in g.topics for p in t.partitions} for g in r.groups}
    assert got == {groups[0]: {0: 10, 1: 3}, groups[1]: {0: 11}}
    assert broker.stop() == 0
    out = "".join(broker.output)
    assert out.count("skipping an unreadable record") == 4, out
    assert "Traceback" not in out, out


@pytest.mark.parametrize("state", ["Stable", "CompletingRebalance"])
def test_lone_member_rejoin_completes_the_rebalance_within_the_join(group_broker, name,
                                                                    state) -> None:
    """The only member rejoining (the leader of a Stable group, or with other
    protocols before its SyncGroup) is the whole group: the rebalance completes
    inside the JoinGroup, which is answered at once with the next generation
    (it used to crash the handler and close the connection)."""
    m = Member(group_broker.bootstrap, name)
    try:
        r = m.join(protocols=[("range", subscription(name))])
        assert r.error_code == 0 and r.generation_id == 1
        if state == "Stable":
            m.send_sync({m.member_id: b"A1"})
            assert m.recv_sync().assignment == b"A1"
            protocols = [("range", subscription(name))]  # unchanged: the leader rejoins
        else:
            protocols = [("range", subscription(name, name + "-more"))]
        r = m.join(protocols=protocols)
        assert (r.error_code, r.generation_id, r.leader) == (0, 2, m.member_id)
        assert [(x.member_id, bytes(x.metadata)) for x in r.members] == [
            (m.member_id, protocols[0][1])]
        m.send_sync({m.member_id: b"A2"})
        assert m.recv_sync().assignment == b"A2"
        assert m.heartbeat() == 0
    finally:
        m.close()


def test_static_member_restart_before_sync_completes_the_rebalance_within_the_join(
        group_broker, name) -> None:
    """A lone static member restarting while its group completes a rebalance
    replaces the old incarnation and completes the next generation at once."""
    bs = group_broker.bootstrap
    old, new = Member(bs, name), Member(bs, name)
    try:
        r = old.join(instance="inst-1")
        assert r.error_code == 0 and r.generation_id == 1  # no SyncGroup: Completing
        r = new.join(instance="inst-1")
        assert (r.error_code, r.generation_id, r.leader) == (0, 2, new.member_id)
        assert new.member_id != old.member_id
        assert [x.member_id for x in r.members] == [new.member_id]
        new.send_sync({new.member_id: b"mine"})
        assert new.recv_sync().assignment == b"mine"
        assert old.heartbeat(instance="inst-1") == E.FENCED_INSTANCE_ID
        assert new.heartbeat(instance="inst-1") == 0
    finally:
        old.close()
        new.close()
