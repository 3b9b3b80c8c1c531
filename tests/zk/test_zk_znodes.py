"""Kafka's znode JSON: every codec writes the bytes a Kafka 3.6 broker writes
(literal strings below, keys in Kafka's order) and reads them back; malformed
data is a BadZnodeError naming the znode."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pylog.zk.errors import BadZnodeError
from pylog.zk.znodes import (
    PERSISTENT_PATHS,
    BrokerIdZNode,
    BrokerInfo,
    ClusterIdZNode,
    ConfigChangesZNode,
    ConfigEntityZNode,
    ControllerEpochZNode,
    ControllerZNode,
    EndPoint,
    IsrChangeNotificationZNode,
    LeaderIsrState,
    PreferredReplicaElectionZNode,
    ProducerIdBlock,
    ProducerIdBlockZNode,
    ReassignPartitionsZNode,
    TopicAssignment,
    TopicPartitionStateZNode,
    TopicZNode,
    desanitize,
    sanitize,
    scala_hashmap_order,
)

PLAIN = EndPoint("PLAINTEXT", "PLAINTEXT", "localhost", 9092)
TOPIC_ID = "vUTnxuUuRRW5mOYDMWI-Rg"


def test_cluster_id() -> None:
    data = ClusterIdZNode.encode("mR9PKW2kQgeSbnRjBZpBJw")
    assert data == b'{"version":"1","id":"mR9PKW2kQgeSbnRjBZpBJw"}'
    assert ClusterIdZNode.decode(data) == "mR9PKW2kQgeSbnRjBZpBJw"
    assert ClusterIdZNode.path() == "/cluster/id"


def test_broker_registration_as_kafka_writes_it() -> None:
    info = BrokerInfo(0, [PLAIN])
    data = BrokerIdZNode.encode(info, 1700000000000)
    assert data == (b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
                    b'"endpoints":["PLAINTEXT://localhost:9092"],"jmx_port":-1,"port":9092,'
                    b'"host":"localhost","version":5,"timestamp":"1700000000000"}')
    back = BrokerIdZNode.decode(0, data)
    assert (back.id, back.endpoints, back.rack, back.jmx_port, back.version, back.timestamp_ms) \
        == (0, [PLAIN], None, -1, 5, 1700000000000)
    assert BrokerIdZNode.path(0) == "/brokers/ids/0"


def test_broker_registration_with_rack_and_listeners() -> None:
    info = BrokerInfo(3, [EndPoint("INTERNAL", "SSL", "10.0.0.3", 9093),
                          EndPoint("CLIENT", "PLAINTEXT", "::1", 9092)], rack="rack-a")
    data = BrokerIdZNode.encode(info, 5)
    assert data == (b'{"features":{},"listener_security_protocol_map":{"INTERNAL":"SSL",'
                    b'"CLIENT":"PLAINTEXT"},"endpoints":["INTERNAL://10.0.0.3:9093",'
                    b'"CLIENT://[::1]:9092"],"rack":"rack-a","jmx_port":-1,"port":9092,'
                    b'"host":"::1","version":5,"timestamp":"5"}')
    back = BrokerIdZNode.decode(3, data)
    assert back.endpoints == info.endpoints and back.rack == "rack-a"


def test_broker_registration_without_plaintext_has_null_host() -> None:
    data = BrokerIdZNode.encode(BrokerInfo(1, [EndPoint("SSL", "SSL", "h", 9093)]), 7)
    assert b'"port":-1,"host":null' in data


@pytest.mark.parametrize("data, endpoints, rack", [
    # Kafka's own examples of the older versions (BrokerIdZNode.decode's docs and tests)
    (b'{"jmx_port":-1,"timestamp":"1420485325400","host":"172.16.8.243","version":1,'
     b'"port":9091}', [EndPoint("PLAINTEXT", "PLAINTEXT", "172.16.8.243", 9091)], None),
    (b'{"version":2,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666",'
     b'"endpoints":["PLAINTEXT://host1:9092","SSL://host1:9093"]}',
     [EndPoint("PLAINTEXT", "PLAINTEXT", "host1", 9092), EndPoint("SSL", "SSL", "host1", 9093)],
     None),
    (b'{"version":4,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666",'
     b'"endpoints":["CLIENT://host1:9092","REPLICATION://host1:9093"],"rack":"dc1",'
     b'"listener_security_protocol_map":{"CLIENT":"SSL","REPLICATION":"PLAINTEXT"}}',
     [EndPoint("CLIENT", "SSL", "host1", 9092), EndPoint("REPLICATION", "PLAINTEXT", "host1",
                                                          9093)], "dc1"),
    (b'{"version":5,"host":null,"port":-1,"jmx_port":-1,"timestamp":"1","rack":null,'
     b'"endpoints":["SSL://:9093"],"features":{"f":{"min_version":1,"max_version":2}}}',
     [EndPoint("SSL", "SSL", "", 9093)], None),
])
def test_broker_registration_older_versions(data: bytes, endpoints: list[EndPoint],
                                            rack: str | None) -> None:
    info = BrokerIdZNode.decode(7, data)
    assert (info.endpoints, info.rack) == (endpoints, rack)


def test_topic_assignment_as_kafka_writes_it() -> None:
    a = TopicAssignment("t", {0: [1, 2], 1: [2, 3], 2: [3, 1]}, TOPIC_ID)
    data = TopicZNode.encode(a)
    assert data == (b'{"partitions":{"0":[1,2],"1":[2,3],"2":[3,1]},"topic_id":"'
                    + TOPIC_ID.encode() + b'","adding_replicas":{},"removing_replicas":{},'
                    b'"version":3}')
    assert TopicZNode.decode("t", data) == a
    assert TopicZNode.path("t") == "/brokers/topics/t"


def test_topic_assignment_reassigning_and_without_id() -> None:
    a = TopicAssignment("t", {0: [1, 2, 3]}, None, adding_replicas={0: [3]},
                        removing_replicas={0: [1]})
    data = TopicZNode.encode(a)
    assert data == (b'{"partitions":{"0":[1,2,3]},"adding_replicas":{"0":[3]},'
                    b'"removing_replicas":{"0":[1]},"version":3}')
    assert TopicZNode.decode("t", data) == a
    # Version 1 (before KIP-455 and topic ids) still reads.
    old = TopicZNode.decode("t", b'{"version":1,"partitions":{"0":[1],"1":[2]}}')
    assert (old.partitions, old.topic_id, old.adding_replicas) == ({0: [1], 1: [2]}, None, {})


def test_partition_state_as_kafka_writes_it() -> None:
    # The order of Kafka's docs: {"controller_epoch":..,"leader":..,"version":..,...}
    s = LeaderIsrState(leader=1, leader_epoch=5, isr=[1, 2, 3], controller_epoch=2)
    data = TopicPartitionStateZNode.encode(s)
    assert data == b'{"controller_epoch":2,"leader":1,"version":1,"leader_epoch":5,"isr":[1,2,3]}'
    assert TopicPartitionStateZNode.decode("t", 0, data, 4) == LeaderIsrState(1, 5, [1, 2, 3], 2,
                                                                               0, 4)
    recovering = LeaderIsrState(1, 6, [1], 2, leader_recovery_state=1)
    data = TopicPartitionStateZNode.encode(recovering)
    assert data == (b'{"controller_epoch":2,"leader":1,"version":1,"leader_recovery_state":1,'
                    b'"leader_epoch":6,"isr":[1]}')
    assert TopicPartitionStateZNode.decode("t", 0, data) == recovering
    assert TopicPartitionStateZNode.path("t", 0) == "/brokers/topics/t/partitions/0/state"


def test_controller() -> None:
    data = ControllerZNode.encode(1, 1700000000000)
    assert data == (b'{"version":2,"brokerid":1,"timestamp":"1700000000000",'
                    b'"kraftControllerEpoch":-1}')
    assert ControllerZNode.decode(data) == 1
    assert ControllerZNode.decode(b'{"version":1,"brokerid":4,"timestamp":"1"}') == 4
    assert ControllerZNode.decode(b"3") == 3  # Kafka 0.8's bare integer
    assert ControllerEpochZNode.encode(17) == b"17"
    assert ControllerEpochZNode.decode(b"17") == 17


def test_entity_config_and_change_notice() -> None:
    data = ConfigEntityZNode.encode({"retention.ms": "1000"})
    assert data == b'{"version":1,"config":{"retention.ms":"1000"}}'
    assert ConfigEntityZNode.decode("topics", "t", data) == {"retention.ms": "1000"}
    assert ConfigEntityZNode.decode("topics", "t", None) == {}
    assert ConfigEntityZNode.path("brokers", "<default>") == "/config/brokers/<default>"
    notice = ConfigChangesZNode.encode("topics/t")
    assert notice == b'{"version":2,"entity_path":"topics/t"}'
    assert ConfigChangesZNode.decode("config_change_0000000000", notice) == "topics/t"
    v1 = b'{"version":1,"entity_type":"clients","entity_name":"c1"}'
    assert ConfigChangesZNode.decode("config_change_0000000001", v1) == "clients/c1"


def test_sanitized_entity_names() -> None:
    # Kafka's SanitizerTest principal: URL-encoded, '*' and ' ' percent-encoded too.
    principal = "CN=Some characters !@#$%&*()_-+=';:,/~"
    assert sanitize(principal) == ("CN%3DSome%20characters%20%21%40%23%24%25%26%2A%28%29_-%2B"
                                   "%3D%27%3B%3A%2C%2F%7E")
    assert desanitize(sanitize(principal)) == principal


def test_admin_and_notification_znodes() -> None:
    reassign = {("t", 0): [1, 2], ("u", 3): [3]}
    data = ReassignPartitionsZNode.encode(reassign)
    assert data == (b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]},'
                    b'{"topic":"u","partition":3,"replicas":[3]}]}')
    assert ReassignPartitionsZNode.decode(data) == reassign
    data = PreferredReplicaElectionZNode.encode([("t", 0)])
    assert data == b'{"version":1,"partitions":[{"topic":"t","partition":0}]}'
    assert PreferredReplicaElectionZNode.decode(data) == {("t", 0)}
    data = IsrChangeNotificationZNode.encode([("t", 1), ("t", 2)])
    assert data == (b'{"version":1,"partitions":[{"topic":"t","partition":1},'
                    b'{"topic":"t","partition":2}]}')
    assert IsrChangeNotificationZNode.decode("isr_change_0000000000", data) == [("t", 1), ("t", 2)]


def test_producer_id_block() -> None:
    block = ProducerIdBlock(broker=1, first=1000, last=1999)
    data = ProducerIdBlockZNode.encode(block)
    assert data == b'{"version":1,"broker":1,"block_start":"1000","block_end":"1999"}'
    assert ProducerIdBlockZNode.decode(data) == block


def test_persistent_paths_are_kafkas() -> None:
    assert PERSISTENT_PATHS == (
        "/consumers", "/brokers/ids", "/brokers/topics", "/config/changes",
        "/admin/delete_topics", "/brokers/seqid", "/isr_change_notification",
        "/latest_producer_id_block", "/log_dir_event_notification", "/config/topics",
        "/config/clients", "/config/users", "/config/brokers", "/config/ips")


def test_key_order_is_scala_hashmap_order() -> None:
    # Kafka's broker registration: a mutable.HashMap of 6 keys (table 16) and 3 more.
    keys = ["version", "host", "port", "endpoints", "jmx_port", "timestamp", "rack",
            "listener_security_protocol_map", "features"]
    assert scala_hashmap_order(keys) == ["features", "listener_security_protocol_map",
                                         "endpoints", "rack", "jmx_port", "port", "host",
                                         "version", "timestamp"]


Decoder = Callable[[bytes | None], Any]
DECODERS: dict[str, tuple[str, Decoder]] = {
    "cluster id": ("/cluster/id", ClusterIdZNode.decode),
    "broker": ("/brokers/ids/1", lambda d: BrokerIdZNode.decode(1, d)),
    "topic": ("/brokers/topics/t", lambda d: TopicZNode.decode("t", d)),
    "state": ("/brokers/topics/t/partitions/0/state",
              lambda d: TopicPartitionStateZNode.decode("t", 0, d)),
    "controller": ("/controller", ControllerZNode.decode),
    "config": ("/config/topics/t", lambda d: ConfigEntityZNode.decode("topics", "t", d)),
    "config change": ("/config/changes/config_change_0000000001",
                      lambda d: ConfigChangesZNode.decode("config_change_0000000001", d)),
    "reassign": ("/admin/reassign_partitions", ReassignPartitionsZNode.decode),
    "preferred": ("/admin/preferred_replica_election", PreferredReplicaElectionZNode.decode),
    "isr change": ("/isr_change_notification/isr_change_0000000002",
                   lambda d: IsrChangeNotificationZNode.decode("isr_change_0000000002", d)),
    "producer ids": ("/latest_producer_id_block", ProducerIdBlockZNode.decode),
}
MALFORMED = {
    "not json": b'{"version":1,',
    "not utf-8": b'\xff\xfe{}',
    "an array": b'[1,2]',
    "a string": b'"text"',
    "nan": b'NaN',
    "unknown version": b'{"version":99}',
    "version as float": b'{"version":1.0}',
    "empty object": b'{}',
}


@pytest.mark.parametrize("kind", sorted(DECODERS))
@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_data_is_bad_znode_error(kind: str, case: str) -> None:
    path, decode = DECODERS[kind]
    with pytest.raises(BadZnodeError) as info:
        decode(MALFORMED[case])
    assert info.value.path == path
    assert path in str(info.value)


@pytest.mark.parametrize("data, reason", [
    (b'{"version":1,"leader":"1","leader_epoch":0,"isr":[1],"controller_epoch":1}',
     "field 'leader' is a JSON string"),
    (b'{"version":1,"leader":1,"leader_epoch":0,"isr":[1,true],"controller_epoch":1}',
     "field 'isr' is a JSON array"),
    (b'{"version":1,"leader":1,"leader_epoch":0,"isr":[1]}', "field 'controller_epoch' is missing"),
    (b'{"version":1,"leader":1,"leader_epoch":0,"isr":[1],"controller_epoch":1,'
     b'"leader_recovery_state":7}', "leader_recovery_state"),
    (b'{"version":1,"leader":4294967296,"leader_epoch":0,"isr":[1],"controller_epoch":1}',
     "an integer in"),
])
def test_partition_state_field_errors(data: bytes, reason: str) -> None:
    with pytest.raises(BadZnodeError, match=reason):
        TopicPartitionStateZNode.decode("t", 0, data)


@pytest.mark.parametrize("data, reason", [
    (b'{"version":5,"jmx_port":-1,"endpoints":["nonsense"]}', "not LISTENER://host:port"),
    (b'{"version":5,"jmx_port":-1,"endpoints":["X://h:1"],'
     b'"listener_security_protocol_map":{"Y":"SSL"}}', "not in listener_security_protocol_map"),
    (b'{"version":5,"jmx_port":-1,"endpoints":["X://h:1"],'
     b'"listener_security_protocol_map":{"X":"TLS"}}', "unknown security protocol"),
    (b'{"version":5,"endpoints":[]}', "field 'jmx_port' is missing"),
])
def test_broker_field_errors(data: bytes, reason: str) -> None:
    with pytest.raises(BadZnodeError, match=reason):
        BrokerIdZNode.decode(1, data)


@pytest.mark.parametrize("data", [
    b'{"version":3,"partitions":{"x":[1]}}',
    b'{"version":3,"partitions":{"0":[1]},"topic_id":"short"}',
    b'{"version":3,"partitions":[1]}',
])
def test_topic_field_errors(data: bytes) -> None:
    with pytest.raises(BadZnodeError):
        TopicZNode.decode("t", data)


@pytest.mark.parametrize("data", [b"", b"x", b"1.5", b"99999999999", None])
def test_controller_epoch_errors(data: bytes | None) -> None:
    with pytest.raises(BadZnodeError, match="/controller_epoch"):
        ControllerEpochZNode.decode(data)


@pytest.mark.parametrize("data", [
    b'{"version":1,"broker":1,"block_start":"-1","block_end":"5"}',
    b'{"version":1,"broker":1,"block_start":"10","block_end":"5"}',
    b'{"version":1,"broker":1,"block_start":"0","block_end":"9223372036854775808"}',
    b'{"version":1,"broker":1,"block_start":0,"block_end":"5"}',
])
def test_producer_id_block_errors(data: bytes) -> None:
    with pytest.raises(BadZnodeError, match="/latest_producer_id_block"):
        ProducerIdBlockZNode.decode(data)
