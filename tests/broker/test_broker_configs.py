"""Config handling as Kafka 3.6 does it, through the raw protocol against a real
broker: DescribeConfigs synonyms and types, IncrementalAlterConfigs DELETE,
and the checks of cleanup.policy, message.format.version and the compaction
lags on CreateTopics, AlterConfigs and IncrementalAlterConfigs."""

from __future__ import annotations

from typing import Any

from kafka_wire import RawClient, produce_body

from pylog.protocol import ApiKey, ErrorCode
from pylog.records import BatchBuilder

TOPIC, BROKER = 2, 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5
BOOLEAN, STRING, INT, LONG, LIST = 1, 2, 3, 5, 7


def create(c: RawClient, name: str, configs: dict[str, str] | None = None) -> Any:
    """CreateTopics v7 of one single-partition topic; the topic's result."""
    r = c.request(ApiKey.CREATE_TOPICS, 7, {"timeout_ms": 5000, "validate_only": False,
                  "topics": [{"name": name, "num_partitions": 1, "replication_factor": 1,
                              "assignments": [], "configs": [
                                  {"name": k, "value": v} for k, v in (configs or {}).items()]}]})
    return r.topics[0]


def iac(c: RawClient, name: str, ops: list[tuple[str, int, str | None]],
        validate_only: bool = False, resource_type: int = TOPIC) -> Any:
    """IncrementalAlterConfigs of one resource (a topic unless said):
    (name, operation, value) ops."""
    r = c.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"validate_only": validate_only,
                  "resources": [{"resource_type": resource_type, "resource_name": name, "configs": [
                      {"name": k, "config_operation": op, "value": v} for k, op, v in ops]}]})
    return r.responses[0]


def alter(c: RawClient, name: str, configs: dict[str, str]) -> Any:
    """Legacy AlterConfigs: ``configs`` become the topic's whole set of overrides."""
    r = c.request(ApiKey.ALTER_CONFIGS, 2, {"validate_only": False, "resources": [
        {"resource_type": TOPIC, "resource_name": name,
         "configs": [{"name": k, "value": v} for k, v in configs.items()]}]})
    return r.responses[0]


def describe(c: RawClient, resource_type: int, name: str,
             keys: list[str] | None = None) -> dict[str, Any]:
    """DescribeConfigs v4 with synonyms: entries by name."""
    r = c.request(ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [
        {"resource_type": resource_type, "resource_name": name, "configuration_keys": keys}],
        "include_synonyms": True, "include_documentation": False})
    res = r.results[0]
    assert res.error_code == 0, res.error_message
    return {e.name: e for e in res.configs}


def synonyms(entry: Any) -> list[tuple[str, str | None, int]]:
    return [(s.name, s.value, s.source) for s in entry.synonyms]


def test_synonyms_carry_each_key_value_in_its_own_unit(start_broker, topic) -> None:
    """As Kafka's ConfigHelper: log.retention.hours=1 is listed as '1' under its
    own name (and its default 168 after it), while retention.ms itself is the
    effective value in milliseconds."""
    b = start_broker("log.retention.hours=1", "log.roll.ms=5000")
    with RawClient(b.bootstrap) as c:
        assert create(c, topic).error_code == 0
        assert create(c, f"{topic}-o", {"retention.ms": "60000"}).error_code == 0
        got = describe(c, TOPIC, topic, ["retention.ms", "segment.ms", "segment.jitter.ms"])
        over = describe(c, TOPIC, f"{topic}-o", ["retention.ms"])["retention.ms"]
    retention = got["retention.ms"]
    assert (retention.value, retention.config_source) == ("3600000", STATIC_BROKER_CONFIG)
    assert synonyms(retention) == [("log.retention.hours", "1", STATIC_BROKER_CONFIG),
                                   ("log.retention.hours", "168", DEFAULT_CONFIG)]
    segment = got["segment.ms"]
    assert (segment.value, segment.config_source) == ("5000", STATIC_BROKER_CONFIG)
    assert synonyms(segment) == [("log.roll.ms", "5000", STATIC_BROKER_CONFIG),
                                 ("log.roll.hours", "168", DEFAULT_CONFIG)]
    # log.roll.jitter.ms has no Kafka default: the hours key's default is listed
    jitter = got["segment.jitter.ms"]
    assert (jitter.value, jitter.config_source) == ("0", DEFAULT_CONFIG)
    assert synonyms(jitter) == [("log.roll.jitter.hours", "0", DEFAULT_CONFIG)]
    assert (over.value, over.config_source) == ("60000", DYNAMIC_TOPIC_CONFIG)
    assert synonyms(over) == [("retention.ms", "60000", DYNAMIC_TOPIC_CONFIG),
                              ("log.retention.hours", "1", STATIC_BROKER_CONFIG),
                              ("log.retention.hours", "168", DEFAULT_CONFIG)]


def test_broker_configs_have_their_types(broker) -> None:
    """DescribeConfigs v3+ gives each broker config its ConfigDef type, not UNKNOWN."""
    with RawClient(broker.bootstrap) as c:
        got = describe(c, BROKER, "0")
    assert got and all(e.config_type != 0 for e in got.values())
    expected = {"message.max.bytes": INT, "log.retention.ms": LONG,
                "auto.create.topics.enable": BOOLEAN, "listeners": STRING,
                "log.cleanup.policy": LIST, "log.retention.hours": INT}
    assert {k: got[k].config_type for k in expected} == expected


def test_incremental_delete_of_an_unset_key_changes_nothing(broker, topic) -> None:
    """Kafka validates the resulting config: deleting a key that is not set,
    even an unknown one, is accepted; setting an unknown key is not."""
    with RawClient(broker.bootstrap) as c:
        assert create(c, topic, {"retention.ms": "1000"}).error_code == 0
        r = iac(c, topic, [("no.such.config", DELETE, None), ("segment.ms", DELETE, None)])
        assert r.error_code == 0, r.error_message
        r = iac(c, topic, [("no.such.config", DELETE, None), ("flush.messages", SET, "7")])
        assert r.error_code == 0, r.error_message
        got = describe(c, TOPIC, topic, ["retention.ms", "flush.messages"])
        assert got["retention.ms"].value == "1000"
        assert got["flush.messages"].value == "7"
        for op, value in ((SET, "1"), (APPEND, "x")):
            r = iac(c, topic, [("no.such.config", op, value)])
            assert r.error_code == ErrorCode.INVALID_CONFIG
            assert "no.such.config" in r.error_message


def test_empty_cleanup_policy_is_accepted(broker, topic) -> None:
    """Kafka 3.6's ValidList takes an empty list: no policy, stored as given."""
    with RawClient(broker.bootstrap) as c:
        assert create(c, topic, {"cleanup.policy": ""}).error_code == 0
        entry = describe(c, TOPIC, topic, ["cleanup.policy"])["cleanup.policy"]
        assert (entry.value, entry.config_source) == ("", DYNAMIC_TOPIC_CONFIG)
        batch = BatchBuilder()
        batch.append(1_700_000_000_000, None, b"v")
        r = c.request(ApiKey.PRODUCE, 9, produce_body(topic, 0, batch.build()))
        assert r.responses[0].partition_responses[0].error_code == 0
        assert alter(c, topic, {"cleanup.policy": "compact"}).error_code == 0
        assert iac(c, topic, [("cleanup.policy", SUBTRACT, "compact")]).error_code == 0
        assert describe(c, TOPIC, topic, ["cleanup.policy"])["cleanup.policy"].value == ""
        assert iac(c, topic, [("cleanup.policy", SET, "delete")]).error_code == 0
        assert alter(c, topic, {"cleanup.policy": ""}).error_code == 0
        assert iac(c, topic, [("cleanup.policy", SET, "")]).error_code == 0
        r = iac(c, topic, [("cleanup.policy", SET, "delete,bogus")])
        assert r.error_code == ErrorCode.INVALID_CONFIG


def test_empty_cleanup_policy_survives_a_restart(start_broker, tmp_path, topic) -> None:
    b = start_broker(log_dir=tmp_path / "data")
    with RawClient(b.bootstrap) as c:
        assert create(c, topic, {"cleanup.policy": ""}).error_code == 0
    assert b.stop() == 0
    b = start_broker(log_dir=tmp_path / "data", port=b.port)
    with RawClient(b.bootstrap) as c:
        assert describe(c, TOPIC, topic, ["cleanup.policy"])["cleanup.policy"].value == ""


def test_message_format_version_is_checked(broker, topic) -> None:
    """Deprecated and ignored, but Kafka parses it as a MetadataVersion."""
    with RawClient(broker.bootstrap) as c:
        r = create(c, topic, {"message.format.version": "foo"})
        assert r.error_code == ErrorCode.INVALID_CONFIG
        assert "message.format.version" in r.error_message
        assert create(c, topic, {"message.format.version": "0.10.0-IV1"}).error_code == 0
        for good in ("0.8.2", "2.8", "3.6-IV2", "3.0.1"):
            r = iac(c, topic, [("message.format.version", SET, good)])
            assert r.error_code == 0, (good, r.error_message)
        for bad in ("foo", "3", "3.6-IVX", ""):
            r = iac(c, topic, [("message.format.version", SET, bad)])
            assert r.error_code == ErrorCode.INVALID_CONFIG, bad
        assert alter(c, topic, {"message.format.version": "x.y"}).error_code == \
            ErrorCode.INVALID_CONFIG
        got = describe(c, TOPIC, topic, ["message.format.version"])["message.format.version"]
        assert got.value == "3.0.1"


def test_min_compaction_lag_above_max_is_refused(broker, topic) -> None:
    """As Kafka's LogConfig.validateValues, on the resulting combination of
    the topic's overrides over the defaults."""
    conflict = "conflict topic config setting min.compaction.lag.ms (1000) > " \
               "max.compaction.lag.ms (10)"
    lags = {"min.compaction.lag.ms": "1000", "max.compaction.lag.ms": "10"}
    with RawClient(broker.bootstrap) as c:
        r = create(c, topic, lags)
        assert (r.error_code, r.error_message) == (ErrorCode.INVALID_CONFIG, conflict)
        assert create(c, topic, {"min.compaction.lag.ms": "1000"}).error_code == 0
        # with the min already set on the topic, a lower max alone conflicts
        for validate_only in (True, False):
            r = iac(c, topic, [("max.compaction.lag.ms", SET, "10")], validate_only)
            assert (r.error_code, r.error_message) == (ErrorCode.INVALID_CONFIG, conflict)
        r = alter(c, topic, lags)
        assert (r.error_code, r.error_message) == (ErrorCode.INVALID_CONFIG, conflict)
        got = describe(c, TOPIC, topic, list(lags))
        assert got["min.compaction.lag.ms"].value == "1000"
        assert got["max.compaction.lag.ms"].config_source == DEFAULT_CONFIG
        # legacy AlterConfigs replaces every override: the min is back to 0
        assert alter(c, topic, {"max.compaction.lag.ms": "10"}).error_code == 0
        r = iac(c, topic, [("min.compaction.lag.ms", SET, "10")])
        assert r.error_code == 0, r.error_message
        r = iac(c, topic, [("min.compaction.lag.ms", SET, "11")])
        assert r.error_code == ErrorCode.INVALID_CONFIG
