"""Topic administration through confluent-kafka's AdminClient and kafka-python's
KafkaAdminClient: create, list, describe/alter configs (legacy and incremental),
create partitions, delete records, delete topics; configs validated, persisted
across a restart and in effect."""

from __future__ import annotations

import time

import pytest
from kafka_wire import RawClient, latest_offset, produce_body

from pylog.protocol import ApiKey, ErrorCode
from pylog.records import BatchBuilder

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)


def raw_configs(bootstrap: str, topic: str, synonyms: bool = False) -> dict:
    with RawClient(bootstrap) as c:
        r = c.request(ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [
            {"resource_type": 2, "resource_name": topic, "configuration_keys": None}],
            "include_synonyms": synonyms, "include_documentation": False})
    res = r.results[0]
    assert res.error_code == 0, res.error_message
    return {c.name: c for c in res.configs}


def produce(bootstrap: str, topic: str, n: int = 10, size: int = 10, partition: int = 0) -> int:
    b = BatchBuilder()
    for i in range(n):
        b.append(1_700_000_000_000 + i, None, b"x" * size)
    with RawClient(bootstrap) as c:
        r = c.request(ApiKey.PRODUCE, 9, produce_body(topic, partition, b.build()))
    return r.responses[0].partition_responses[0].error_code


@pytest.fixture
def admin(broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def test_confluent_admin_lifecycle(broker, admin) -> None:
    name = "ck-admin"
    fs = admin.create_topics([NewTopic(name, 3, 1, config={"retention.ms": "60000",
                                                          "cleanup.policy": "compact,delete"})])
    fs[name].result(10)
    md = admin.list_topics(timeout=10)
    assert len(md.topics[name].partitions) == 3
    # errors as Kafka names them
    for topic, parts, rf, conf, error in [
            (name, 1, 1, {}, "TOPIC_ALREADY_EXISTS"),
            ("ck-rf3", 1, 3, {}, "INVALID_REPLICATION_FACTOR"),
            ("bad name!", 1, 1, {}, "TOPIC_EXCEPTION"),  # librdkafka: INVALID_TOPIC_EXCEPTION (17)
            ("x" * 250, 1, 1, {}, "TOPIC_EXCEPTION"),  # librdkafka: INVALID_TOPIC_EXCEPTION (17)
            ("..", 1, 1, {}, "TOPIC_EXCEPTION"),  # librdkafka: INVALID_TOPIC_EXCEPTION (17)
            ("ck-badcfg", 1, 1, {"retention.ms": "soon"}, "INVALID_CONFIG"),
            ("ck-unknown", 1, 1, {"no.such.config": "1"}, "INVALID_CONFIG"),
            ("ck-parts", 0, 1, {}, "INVALID_PARTITIONS")]:
        fut = admin.create_topics([NewTopic(topic, parts, rf, config=conf)])[topic]
        with pytest.raises(ck.KafkaException, match=error):
            fut.result(10)
    assert "ck-badcfg" not in admin.list_topics(timeout=10).topics

    # describe: sources and synonyms
    res = ConfigResource(ConfigResource.Type.TOPIC, name)
    desc = admin.describe_configs([res])[res].result(10)
    assert desc["retention.ms"].value == "60000"
    assert desc["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert desc["cleanup.policy"].value == "compact,delete"
    assert desc["segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    assert desc["segment.bytes"].value == "1073741824"
    assert len(desc) >= 30  # every topic-level config of Kafka 3.6
    raw = raw_configs(broker.bootstrap, name, synonyms=True)
    assert [(s.name, s.source) for s in raw["retention.ms"].synonyms] == [
        ("retention.ms", 1), ("log.retention.hours", 5)]  # Kafka's default is in hours

    # incremental: SET, DELETE, APPEND, SUBTRACT
    res = ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=[
        ConfigEntry("max.message.bytes", "5000",
                    incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
        ConfigEntry("cleanup.policy", "compact",
                    incremental_operation=AlterConfigOpType.SUBTRACT)])
    admin.incremental_alter_configs([res])[res].result(10)
    raw = raw_configs(broker.bootstrap, name)
    assert raw["max.message.bytes"].value == "5000" and raw["max.message.bytes"].config_source == 1
    assert raw["retention.ms"].value == "604800000" and raw["retention.ms"].config_source == 5
    assert raw["cleanup.policy"].value == "delete"
    bad = ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=[
        ConfigEntry("segment.bytes", "10", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(ck.KafkaException, match="INVALID_CONFIG|segment.bytes"):
        admin.incremental_alter_configs([bad])[bad].result(10)
    # and it takes effect: a batch over max.message.bytes is refused
    assert produce(broker.bootstrap, name, n=1, size=6000) == ErrorCode.MESSAGE_TOO_LARGE
    assert produce(broker.bootstrap, name, n=1, size=100) == 0

    # legacy AlterConfigs replaces the whole set of overrides
    res = ConfigResource(ConfigResource.Type.TOPIC, name,
                         set_config={"segment.ms": "3600000"})
    admin.alter_configs([res])[res].result(10)
    raw = raw_configs(broker.bootstrap, name)
    assert raw["segment.ms"].value == "3600000" and raw["segment.ms"].config_source == 1
    assert raw["max.message.bytes"].config_source == 5  # reset to the default
    res = ConfigResource(ConfigResource.Type.TOPIC, name,
                         set_config={"message.timestamp.type": "Sometime"})
    with pytest.raises(ck.KafkaException, match="INVALID_CONFIG"):
        admin.alter_configs([res])[res].result(10)

    # partitions: only up
    admin.create_partitions([NewPartitions(name, 5)])[name].result(10)
    assert len(admin.list_topics(timeout=10).topics[name].partitions) == 5
    assert produce(broker.bootstrap, name, partition=4) == 0
    with pytest.raises(ck.KafkaException, match="INVALID_PARTITIONS"):
        admin.create_partitions([NewPartitions(name, 2)])[name].result(10)

    # delete records
    assert produce(broker.bootstrap, name, n=10, partition=1) == 0
    tp = ck.TopicPartition(name, 1, 4)
    done = admin.delete_records([tp])[tp].result(10)
    assert done.low_watermark == 4
    c = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "x"})
    low, high = c.get_watermark_offsets(ck.TopicPartition(name, 1), timeout=10)
    c.close()
    assert (low, high) == (4, 10)
    beyond = ck.TopicPartition(name, 1, 99)
    with pytest.raises(ck.KafkaException, match="OFFSET_OUT_OF_RANGE"):
        admin.delete_records([beyond])[beyond].result(10)

    admin.delete_topics([name])[name].result(10)
    assert name not in admin.list_topics(timeout=10).topics
    with pytest.raises(ck.KafkaException, match="UNKNOWN_TOPIC"):
        admin.delete_topics([name])[name].result(10)


def test_kafka_python_admin_lifecycle(broker) -> None:
    from kafka import KafkaAdminClient, TopicPartition
    from kafka.admin import ConfigResource as KConfigResource
    from kafka.admin import ConfigResourceType
    from kafka.errors import InvalidConfigurationError, InvalidPartitionsError

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        name = "kp-admin"
        admin.create_topics({name: {"num_partitions": 2, "replication_factor": 1,
                                    "configs": {"retention.bytes": "1048576"}}})
        assert name in admin.list_topics()
        with pytest.raises(InvalidConfigurationError):
            admin.create_topics({"kp-bad": {"num_partitions": 1, "replication_factor": 1,
                                            "configs": {"retention.bytes": "lots"}}})
        described = admin.describe_configs([KConfigResource(ConfigResourceType.TOPIC, name)])
        assert "1048576" in repr(described)
        admin.alter_configs([KConfigResource(ConfigResourceType.TOPIC, name,
                                             configs={"flush.messages": "1"})],
                            incremental=True)
        raw = raw_configs(broker.bootstrap, name)
        assert raw["flush.messages"].value == "1"
        assert raw["retention.bytes"].value == "1048576"  # incremental keeps the others
        admin.alter_configs([KConfigResource(ConfigResourceType.TOPIC, name,
                                             configs={"retention.ms": "120000"})],
                            incremental=False, raise_on_unknown=False)
        raw = raw_configs(broker.bootstrap, name)
        assert raw["retention.ms"].value == "120000"
        admin.create_partitions({name: 4})
        assert len(admin.describe_topics([name])[0]["partitions"]) == 4
        with pytest.raises(InvalidPartitionsError):
            admin.create_partitions({name: 3})
        assert produce(broker.bootstrap, name, n=20) == 0
        admin.delete_records({TopicPartition(name, 0): 15})
        with RawClient(broker.bootstrap) as c:
            r = c.request(ApiKey.LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 0,
                                                   "topics": [{"name": name, "partitions": [
                                                       {"partition_index": 0,
                                                        "timestamp": -2}]}]})
            assert r.topics[0].partitions[0].offset == 15
            assert latest_offset(c, name) == 20
        dirs = admin.describe_log_dirs()
        assert name in repr(dirs)
        admin.delete_topics([name])
        assert name not in admin.list_topics()
    finally:
        admin.close()


def test_configs_persist_and_take_effect_after_restart(start_broker, tmp_path) -> None:
    data = tmp_path / "cfg-data"
    b = start_broker(log_dir=data)
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic("cfg", 1, 1, config={
        "message.timestamp.type": "LogAppendTime", "segment.bytes": "2000",
        "max.message.bytes": "1500"})])["cfg"].result(10)
    assert produce(b.bootstrap, "cfg", n=3, size=100) == 0
    assert b.stop() == 0
    b2 = start_broker(log_dir=data, port=b.port)
    raw = raw_configs(b2.bootstrap, "cfg")
    assert raw["message.timestamp.type"].value == "LogAppendTime"
    assert raw["message.timestamp.type"].config_source == 1
    assert produce(b2.bootstrap, "cfg", n=1, size=1800) == ErrorCode.MESSAGE_TOO_LARGE
    for _ in range(5):  # segment.bytes=2000: several segments
        assert produce(b2.bootstrap, "cfg", n=3, size=300) == 0
    assert len(list((data / "cfg-0").glob("*.log"))) >= 3
    # LogAppendTime: the stored timestamps are the broker's, not the producer's
    c = ck.Consumer({"bootstrap.servers": b2.bootstrap, "group.id": "x",
                     "fetch.queue.backoff.ms": 10})
    c.assign([ck.TopicPartition("cfg", 0, 0)])
    msgs = [m for m in c.consume(100, 5) if not m.error()]
    c.close()
    assert msgs and all(m.timestamp()[0] == ck.TIMESTAMP_LOG_APPEND_TIME for m in msgs)
    assert all(m.timestamp()[1] > 1_700_000_000_000 + 10_000 for m in msgs)


def test_static_broker_default_is_shown_as_such(start_broker) -> None:
    b = start_broker("log.retention.hours=2")
    with RawClient(b.bootstrap) as c:
        c.request(ApiKey.METADATA, 9, {"topics": [{"name": "st"}],
                                       "allow_auto_topic_creation": True})
    raw = raw_configs(b.bootstrap, "st", synonyms=True)
    assert raw["retention.ms"].value == "7200000"
    assert raw["retention.ms"].config_source == 4  # STATIC_BROKER_CONFIG
    assert [(s.name, s.value, s.source) for s in raw["retention.ms"].synonyms] == [
        ("log.retention.hours", "2", 4), ("log.retention.hours", "168", 5)]


def test_topic_names_colliding_on_dot_and_underscore_are_refused(broker, admin, topic) -> None:
    """As Kafka (Topic.hasCollision): '.' and '_' map to the same metric name, so
    a topic differing from an existing one only by them is INVALID_TOPIC_EXCEPTION,
    whether through CreateTopics or through Metadata auto-creation."""
    dotted = f"{topic}.a.b"
    admin.create_topics([NewTopic(dotted, 1, 1)])[dotted].result(10)
    with RawClient(broker.bootstrap) as c:
        r = c.request(ApiKey.CREATE_TOPICS, 7, {"timeout_ms": 5000, "validate_only": False,
                      "topics": [{"name": f"{topic}_a_b", "num_partitions": 1,
                                  "replication_factor": 1, "assignments": [], "configs": []}]})
        assert r.topics[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
        assert f"collides with existing topic: {dotted}" in r.topics[0].error_message
        md = c.request(ApiKey.METADATA, 9, {"topics": [{"name": f"{topic}.a_b"}],
                                            "allow_auto_topic_creation": True})
        assert md.topics[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    fut = admin.create_topics([NewTopic(f"{topic}_a.b", 1, 1)])[f"{topic}_a.b"]
    with pytest.raises(ck.KafkaException, match="collides"):
        fut.result(10)
    names = admin.list_topics(timeout=10).topics
    assert dotted in names
    assert not {f"{topic}_a_b", f"{topic}.a_b", f"{topic}_a.b"} & set(names)


def test_delete_topic_with_a_249_character_name(broker, admin, topic) -> None:
    """249 characters is Kafka's longest topic name: deleting it works (the
    partition directory's rename for deletion keeps within 255 bytes), leaves no
    directory behind, and the topic created again starts from offset 0."""
    name = topic.ljust(249, "L")
    admin.create_topics([NewTopic(name, 2, 1)])[name].result(10)
    assert produce(broker.bootstrap, name, n=5) == 0
    assert produce(broker.bootstrap, name, n=5, partition=1) == 0
    admin.delete_topics([name])[name].result(10)
    assert name not in admin.list_topics(timeout=10).topics
    assert not [d for d in broker.log_dir.iterdir() if d.name.startswith(topic)]
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(10)
    assert len(admin.list_topics(timeout=10).topics[name].partitions) == 1
    with RawClient(broker.bootstrap) as c:
        assert latest_offset(c, name) == 0
        assert produce(broker.bootstrap, name, n=1) == 0
        assert latest_offset(c, name) == 1


@pytest.mark.parametrize("reset", ["earliest", "latest"])
def test_consumer_below_log_start_resets_per_auto_offset_reset(broker, admin, topic,
                                                                reset) -> None:
    """A librdkafka consumer positioned below the log start offset (after
    DeleteRecords) gets OFFSET_OUT_OF_RANGE and resets per auto.offset.reset:
    earliest to the log start offset, latest to the end of the log."""
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)
    assert produce(broker.bootstrap, topic, n=10) == 0
    tp = ck.TopicPartition(topic, 0, 5)
    assert admin.delete_records([tp])[tp].result(10).low_watermark == 5
    c = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": topic,
                     "auto.offset.reset": reset, "enable.auto.commit": False})
    try:
        c.assign([ck.TopicPartition(topic, 0, 2)])
        first = None
        deadline = time.monotonic() + 20
        while first is None and time.monotonic() < deadline:
            if reset == "latest":  # something past the end to reset onto
                assert produce(broker.bootstrap, topic, n=1) == 0
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                first = m.offset()
    finally:
        c.close()
    if reset == "earliest":
        assert first == 5
    else:
        assert first is not None and first >= 10


def _confluent_send(bootstrap: str, topic: str, timestamp_ms: int) -> str | None:
    """One record with this CreateTime through librdkafka: its error's name."""
    errors: list = []
    p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "retries": 0})
    p.produce(topic, b"v", timestamp=timestamp_ms, on_delivery=lambda e, m: errors.append(e))
    assert p.flush(10) == 0
    return errors[0].name() if errors[0] else None


def test_timestamp_limits_take_effect(broker, admin, topic) -> None:
    """message.timestamp.before/after.max.ms (and the deprecated
    difference.max.ms they fall back to) refuse CreateTime records too far
    from the append time with INVALID_TIMESTAMP, as Kafka 3.6; a change through
    IncrementalAlterConfigs applies to the next append; LogAppendTime topics
    are not checked; a client batch that sets LogAppendTime is refused."""
    admin.create_topics([NewTopic(topic, 1, 1, config={
        "message.timestamp.before.max.ms": "3600000",
        "message.timestamp.after.max.ms": "60000"})])[topic].result(10)
    now = int(time.time() * 1000)
    assert _confluent_send(broker.bootstrap, topic, now - 7_200_000) == "INVALID_TIMESTAMP"
    assert _confluent_send(broker.bootstrap, topic, now + 600_000) == "INVALID_TIMESTAMP"
    assert _confluent_send(broker.bootstrap, topic, now - 1_800_000) is None
    with RawClient(broker.bootstrap) as c:
        assert latest_offset(c, topic) == 1
        b = BatchBuilder(compression=4)  # one bad record among good ones, compressed
        for ts in (now, now + 1, now - 86_400_000, now + 2):
            b.append(ts, None, b"x")
        p = c.request(ApiKey.PRODUCE, 9, produce_body(topic, 0, b.build()))
        p = p.responses[0].partition_responses[0]
        assert p.error_code == ErrorCode.INVALID_TIMESTAMP
        assert "record 2" in p.error_message and "out of range" in p.error_message
        b = BatchBuilder(timestamp_type=1)
        b.append(now, None, b"x")
        p = c.request(ApiKey.PRODUCE, 9, produce_body(topic, 0, b.build()))
        assert p.responses[0].partition_responses[0].error_code == ErrorCode.INVALID_TIMESTAMP
        assert latest_offset(c, topic) == 1
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("message.timestamp.before.max.ms", None,
                    incremental_operation=AlterConfigOpType.DELETE),
        ConfigEntry("message.timestamp.difference.max.ms", "86400000",
                    incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(10)
    assert _confluent_send(broker.bootstrap, topic, now - 7_200_000) is None  # now 1 day
    assert _confluent_send(broker.bootstrap, topic, now - 2 * 86_400_000) == "INVALID_TIMESTAMP"
    assert _confluent_send(broker.bootstrap, topic, now + 120_000) == "INVALID_TIMESTAMP"
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("message.timestamp.type", "LogAppendTime",
                    incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(10)
    assert _confluent_send(broker.bootstrap, topic, now - 2 * 86_400_000) is None
