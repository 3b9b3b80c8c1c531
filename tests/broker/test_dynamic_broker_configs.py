"""Dynamic broker configs (Kafka's KIP-226) against the real broker process,
through real clients (confluent-kafka, kafka-python, ``pylog configs``) and the
raw protocol: the cluster-wide default (resource ``""``) and this broker
(``"0"``) change the topic defaults at once, topics with their own override
keep it, DescribeConfigs shows Kafka's sources and synonym order, refusals
carry Kafka's codes and messages, and the changes survive a restart and a
``kill -9``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

import confluent_kafka as ck
import pytest
from broker_process import wait_for
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)
from kafka_wire import RawClient
from test_broker_configs import describe, synonyms
from test_broker_configs import iac as topic_or_broker_iac
from test_log_compaction import _cleaned_to
from test_net_load import _served

from pylog.protocol import ApiKey, ErrorCode

BROKER = 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
DYN_TOPIC, DYN_BROKER, DYN_DEFAULT, STATIC, DEFAULT = 1, 2, 3, 4, 5
DAY_MS = 86_400_000


def iac(c: RawClient, name: str, ops: list[tuple[str, int, str | None]],
        validate_only: bool = False) -> Any:
    return topic_or_broker_iac(c, name, ops, validate_only, BROKER)


def legacy(c: RawClient, name: str, configs: dict[str, str | None],
           validate_only: bool = False) -> Any:
    r = c.request(ApiKey.ALTER_CONFIGS, 2, {"validate_only": validate_only, "resources": [
        {"resource_type": BROKER, "resource_name": name,
         "configs": [{"name": k, "value": v} for k, v in configs.items()]}]})
    return r.responses[0]



def produce(bootstrap: str, topic: str, size: int, timestamp: int = 0) -> int:
    """One message of ``size`` bytes, flushed; its delivery error code (0: ok)."""
    errors: list[Any] = []
    p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0,
                     "message.max.bytes": 10_000_000, "retries": 0})
    p.produce(topic, b"x" * size, timestamp=timestamp,
              on_delivery=lambda err, msg: errors.append(err))
    assert p.flush(30) == 0
    return 0 if errors[0] is None else errors[0].code()


def log_start(bootstrap: str, topic: str) -> int:
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "dyn"})
    try:
        return c.get_watermark_offsets(ck.TopicPartition(topic, 0), timeout=10)[0]
    finally:
        c.close()


def create(admin: AdminClient, name: str, config: dict[str, str] | None = None) -> None:
    admin.create_topics([NewTopic(name, 1, 1, config=config or {})])[name].result(10)


def test_cluster_default_and_broker_value_apply_to_the_next_produce(start_broker, topic):
    """message.max.bytes set cluster-wide, then for this broker: the next
    Produce to a topic without max.message.bytes follows it, a topic with its
    own keeps it; DescribeConfigs shows the layers in Kafka's order."""
    b = start_broker()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    plain, own = topic, f"{topic}-own"
    create(admin, plain)
    create(admin, own, {"max.message.bytes": "100000"})
    assert produce(b.bootstrap, plain, 5000) == 0

    # confluent-kafka refuses the resource name "" itself: the raw request.
    with RawClient(b.bootstrap) as c:
        assert iac(c, "", [("message.max.bytes", SET, "1000")]).error_code == 0
    assert produce(b.bootstrap, plain, 5000) == ck.KafkaError.MSG_SIZE_TOO_LARGE
    assert produce(b.bootstrap, own, 5000) == 0

    mine = ConfigResource(ResourceType.BROKER, "0", incremental_configs=[
        ConfigEntry("message.max.bytes", "3000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([mine])[mine].result(10)
    assert produce(b.bootstrap, plain, 2000) == 0
    assert produce(b.bootstrap, plain, 5000) == ck.KafkaError.MSG_SIZE_TOO_LARGE

    with RawClient(b.bootstrap) as c:
        t = describe(c, 2, plain, ["max.message.bytes"])["max.message.bytes"]
        o = describe(c, 2, own, ["max.message.bytes"])["max.message.bytes"]
        node = describe(c, BROKER, "0")
        cluster = describe(c, BROKER, "")
    assert (t.value, t.config_source) == ("3000", DYN_BROKER)
    assert synonyms(t) == [("message.max.bytes", "3000", DYN_BROKER),
                           ("message.max.bytes", "1000", DYN_DEFAULT),
                           ("message.max.bytes", "1048588", DEFAULT)]
    assert (o.value, o.config_source) == ("100000", DYN_TOPIC)
    assert [s[2] for s in synonyms(o)] == [DYN_TOPIC, DYN_BROKER, DYN_DEFAULT, DEFAULT]
    m = node["message.max.bytes"]
    assert (m.value, m.config_source, m.read_only) == ("3000", DYN_BROKER, False)
    assert [s[2] for s in synonyms(m)] == [DYN_BROKER, DYN_DEFAULT, DEFAULT]
    assert node["listeners"].read_only and node["listeners"].config_source == STATIC
    # The cluster default resource: the dynamic defaults only, their synonyms only.
    assert list(cluster) == ["message.max.bytes"]
    d = cluster["message.max.bytes"]
    assert (d.value, d.config_source) == ("1000", DYN_DEFAULT)
    assert synonyms(d) == [("message.max.bytes", "1000", DYN_DEFAULT)]
    # confluent-kafka reads the same sources
    got = admin.describe_configs([ConfigResource(ResourceType.BROKER, "0")])
    entry = next(iter(got.values())).result(10)["message.max.bytes"]
    assert entry.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value

    # DELETE on the broker: back to the cluster default.
    back = ConfigResource(ResourceType.BROKER, "0", incremental_configs=[
        ConfigEntry("message.max.bytes", None, incremental_operation=AlterConfigOpType.DELETE)])
    admin.incremental_alter_configs([back])[back].result(10)
    assert produce(b.bootstrap, plain, 2000) == ck.KafkaError.MSG_SIZE_TOO_LARGE


def test_lower_retention_deletes_old_segments(start_broker, topic):
    """log.retention.ms lowered cluster-wide: the next retention check deletes
    the segments older than it (log start offset moves), but not those of a
    topic with its own retention.ms."""
    b = start_broker("log.retention.check.interval.ms=50")
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    kept = f"{topic}-kept"
    create(admin, topic, {"segment.bytes": "200"})
    create(admin, kept, {"segment.bytes": "200", "retention.ms": "-1"})
    two_days_ago = int(time.time() * 1000) - 2 * DAY_MS
    for name in (topic, kept):
        for _ in range(4):
            assert produce(b.bootstrap, name, 50, timestamp=two_days_ago) == 0
    assert log_start(b.bootstrap, topic) == 0

    r = subprocess.run([sys.executable, "-m", "pylog", "configs", "--bootstrap-server",
                        b.bootstrap, "--entity-type", "brokers", "--entity-default", "--alter",
                        "--add-config", f"log.retention.ms={DAY_MS}"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "Completed updating default config for brokers in the cluster.\n"
    deadline = time.monotonic() + 30
    while log_start(b.bootstrap, topic) == 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert log_start(b.bootstrap, topic) >= 3
    assert log_start(b.bootstrap, kept) == 0

    r = subprocess.run([sys.executable, "-m", "pylog", "configs", "--bootstrap-server",
                        b.bootstrap, "--entity-type", "brokers", "--entity-default",
                        "--describe"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout == (
        "Default configs for brokers in the cluster are:\n"
        f"  log.retention.ms={DAY_MS} sensitive=false "
        f"synonyms={{DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms={DAY_MS}}}\n")


@pytest.mark.parametrize("crash", [True, False], ids=["kill-9", "clean-stop"])
def test_changes_survive_a_restart(start_broker, tmp_path, topic, crash):
    """Set with kafka-python's KafkaAdminClient; acknowledged means saved."""
    from kafka.admin import ConfigResource as KConfigResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient

    data = tmp_path / "data"
    b = start_broker(log_dir=data)
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    try:
        res = KConfigResource(ConfigResourceType.BROKER, "0",
                              configs={"message.max.bytes": "2000",
                                       "log.retention.hours": "5"})
        admin.alter_configs([res])
    finally:
        admin.close()
    with RawClient(b.bootstrap) as c:
        assert legacy(c, "", {"log.segment.bytes": "4096"}).error_code == 0
    b.kill() if crash else b.stop()
    saved = json.loads((data / "pylog-dynamic-configs.json").read_text())
    assert saved["cluster_default"] == {"log.segment.bytes": "4096"}
    assert saved["brokers"]["0"] == {"message.max.bytes": "2000", "log.retention.hours": "5"}

    b2 = start_broker(log_dir=data)
    with RawClient(b2.bootstrap) as c:
        node = describe(c, BROKER, "0", ["message.max.bytes", "log.retention.hours",
                                          "log.segment.bytes"])
    assert {k: (e.value, e.config_source) for k, e in node.items()} == {
        "message.max.bytes": ("2000", DYN_BROKER),
        "log.retention.hours": ("5", DYN_BROKER),
        "log.segment.bytes": ("4096", DYN_DEFAULT)}
    assert produce(b2.bootstrap, topic, 5000) == ck.KafkaError.MSG_SIZE_TOO_LARGE
    with RawClient(b2.bootstrap) as c:
        t = describe(c, 2, topic, ["retention.ms", "segment.bytes"])
    assert (t["retention.ms"].value, t["retention.ms"].config_source) == (
        str(5 * 3_600_000), DYN_BROKER)
    assert synonyms(t["retention.ms"]) == [("log.retention.hours", "5", DYN_BROKER),
                                           ("log.retention.hours", "168", DEFAULT)]
    assert (t["segment.bytes"].value, t["segment.bytes"].config_source) == ("4096", DYN_DEFAULT)


def test_refusals_validation_and_replacement(broker):
    """Kafka's answers: read-only keys, bad values, another broker id,
    validate_only, legacy AlterConfigs replacing the whole set, APPEND on a
    list key, and a custom key kept (sensitive: no known type)."""
    with RawClient(broker.bootstrap) as c:
        try:
            r = iac(c, "0", [("listeners", SET, "PLAINTEXT://127.0.0.1:1"),
                             ("log.retention.ms", SET, "1000")])
            assert (r.error_code, r.error_message) == (
                ErrorCode.INVALID_REQUEST, "Cannot update these configs dynamically: "
                "Set(listeners)")
            r = legacy(c, "", {"auto.create.topics.enable": "false"})
            assert r.error_code == ErrorCode.INVALID_REQUEST
            assert r.error_message.endswith("Set(auto.create.topics.enable)")
            r = iac(c, "", [("log.retention.ms", SET, "soon")])
            assert r.error_code == ErrorCode.INVALID_CONFIG
            assert "log.retention.ms" in r.error_message and "soon" in r.error_message
            r = iac(c, "", [("log.segment.bytes", SET, "10")])
            assert r.error_code == ErrorCode.INVALID_CONFIG
            assert "log.segment.bytes" in r.error_message
            r = iac(c, "1", [("log.retention.ms", SET, "1000")])
            assert (r.error_code, r.error_message) == (
                ErrorCode.INVALID_REQUEST, "Unexpected broker id, expected 0, but received 1")
            r = c.request(ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [
                {"resource_type": BROKER, "resource_name": "1", "configuration_keys": None}],
                "include_synonyms": False, "include_documentation": False}).results[0]
            assert r.error_code == ErrorCode.INVALID_REQUEST
            assert iac(c, "", [("log.retention.ms", SET, "1000")],
                       validate_only=True).error_code == 0
            assert legacy(c, "0", {"log.flush.interval.messages": "5"},
                          validate_only=True).error_code == 0
            assert describe(c, BROKER, "") == {}
            assert describe(c, BROKER, "0")["log.retention.ms"].config_source == DEFAULT

            # Legacy AlterConfigs: the request is the resource's whole dynamic set.
            assert legacy(c, "", {"log.retention.ms": "1000",
                                  "log.flush.interval.messages": "5"}).error_code == 0
            assert sorted(describe(c, BROKER, "")) == ["log.flush.interval.messages",
                                                       "log.retention.ms"]
            assert legacy(c, "", {"log.retention.ms": "2000"}).error_code == 0
            assert {k: e.value for k, e in describe(c, BROKER, "").items()} == {
                "log.retention.ms": "2000"}

            r = iac(c, "", [("log.cleanup.policy", APPEND, "compact")])
            assert r.error_code == 0, r.error_message
            assert describe(c, BROKER, "")["log.cleanup.policy"].value == "delete,compact"
            r = iac(c, "", [("message.max.bytes", APPEND, "5")])
            assert r.error_code == ErrorCode.INVALID_CONFIG
            r = iac(c, "", [("my.custom.setting", SET, "x")])
            assert r.error_code == 0, r.error_message
            custom = describe(c, BROKER, "")["my.custom.setting"]
            assert (custom.value, custom.is_sensitive, custom.config_source) == (
                None, True, DYN_DEFAULT)
        finally:  # the broker is shared: leave it as it was
            assert legacy(c, "", {}).error_code == 0
            assert legacy(c, "0", {}).error_code == 0
        assert describe(c, BROKER, "") == {}


def test_connection_quotas_change_while_running(start_broker, tmp_path):
    """Kafka's DynamicConnectionQuota: max.connections.per.ip, its overrides
    and max.connections change at run time; the new limits count the
    connections already open and apply to the next ones; lifted, they stop
    refusing; set, they survive a restart."""
    b = start_broker(log_dir=tmp_path / "data")
    held = [_served(b.bootstrap) for _ in range(3)]
    assert all(held)
    c = held[0]
    assert iac(c, "", [("max.connections.per.ip", SET, "4")]).error_code == 0
    held.append(_served(b.bootstrap))  # the fourth from this address
    assert held[-1] is not None
    assert _served(b.bootstrap) is None
    r = iac(c, "0", [("max.connections.per.ip.overrides", SET, "127.0.0.1:6")])
    assert r.error_code == 0, r.error_message
    held += [_served(b.bootstrap) for _ in range(2)]
    assert all(held) and _served(b.bootstrap) is None
    r = iac(c, "", [("max.connections", SET, "5")])  # below what is open: none more
    assert r.error_code == 0, r.error_message
    held.pop().close()
    assert _served(b.bootstrap) is None
    got = describe(c, BROKER, "0", ["max.connections", "max.connections.per.ip",
                                    "max.connections.per.ip.overrides"])
    assert {k: (e.value, e.config_source) for k, e in got.items()} == {
        "max.connections": ("5", DYN_DEFAULT), "max.connections.per.ip": ("4", DYN_DEFAULT),
        "max.connections.per.ip.overrides": ("127.0.0.1:6", DYN_BROKER)}
    r = iac(c, "", [("max.connections.per.ip.overrides", SET, "127.0.0.1")])
    assert r.error_code == ErrorCode.INVALID_CONFIG
    # Lifted: connections are let in again.
    assert iac(c, "", [("max.connections", DELETE, None),
                       ("max.connections.per.ip", DELETE, None)]).error_code == 0
    assert iac(c, "0", [("max.connections.per.ip.overrides", DELETE, None)]).error_code == 0
    more = [_served(b.bootstrap) for _ in range(3)]
    assert all(more)
    assert iac(c, "", [("max.connections.per.ip", SET, "2")]).error_code == 0
    for x in held + more:
        x.close()
    b.stop()
    b = start_broker(log_dir=tmp_path / "data")
    two = [_served(b.bootstrap) for _ in range(2)]
    assert all(two) and _served(b.bootstrap) is None
    for x in two:
        x.close()


def _cleaner_threads(b: Any) -> int:
    """The broker's log cleaner threads, by the names they give the OS."""
    tasks = f"/proc/{b.proc.pid}/task"
    names = []
    for tid in os.listdir(tasks):
        try:
            with open(f"{tasks}/{tid}/comm") as f:
                names.append(f.read().strip())
        except FileNotFoundError:  # a thread that just ended
            pass
    return sum(n.startswith("log-cleaner-") for n in names)


def test_log_cleaner_configs_change_while_running(start_broker, tmp_path, topic):
    """Kafka's "Updating Log Cleaner Configs" (docs 3.1.1): the six
    log.cleaner.* keys change at run time and the cleaner restarts with them.
    A cleaner asleep for an hour's log.cleaner.backoff.ms cleans at once
    when the backoff drops; log.cleaner.threads halves or doubles at most,
    as Kafka's LogCleaner.validateReconfiguration; the values survive a
    restart."""
    data = tmp_path / "data"
    b = start_broker("log.cleaner.backoff.ms=3600000", log_dir=data)
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    create(admin, topic, {"cleanup.policy": "compact", "segment.bytes": "4096",
                          "min.cleanable.dirty.ratio": "0.01"})
    p = ck.Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0})
    for i in range(400):  # 10 rewrites of 40 keys: many 4 KiB segments
        p.produce(topic, b"v" * 60, b"key-%d" % (i % 40))
        if i % 20 == 19:
            p.flush(30)
    assert p.flush(30) == 0
    wait_for(lambda: _cleaner_threads(b) == 1, 30, "the cleaner thread to start")
    with RawClient(b.bootstrap) as c:
        # Asleep for the hour it was given: the checkpoint says nothing is cleaned.
        assert _cleaned_to(data, topic) == -1
        r = iac(c, "", [("log.cleaner.backoff.ms", SET, "50")])
        assert r.error_code == 0, r.error_message
        wait_for(lambda: _cleaned_to(data, topic) > 0, 60, "a clean after the new backoff")

        assert iac(c, "", [("log.cleaner.threads", SET, "2")]).error_code == 0
        wait_for(lambda: _cleaner_threads(b) == 2, 30, "a second cleaner thread")
        prefix = "Invalid config value for resource ConfigResource(type=BROKER, name='0'): "
        for value, why in (
                ("5", "cannot be increased to more than double the current value 2"),
                ("0", "should be at least 1")):
            r = iac(c, "0", [("log.cleaner.threads", SET, value)])
            assert (r.error_code, r.error_message) == (
                ErrorCode.INVALID_CONFIG,
                f"{prefix}Invalid dynamic configuration: Log cleaner threads {why}")
        r = iac(c, "", [("log.cleaner.dedupe.buffer.size", SET, str(3 << 19))])
        assert r.error_code == ErrorCode.INVALID_CONFIG  # 768 KiB a thread: under 1 MiB
        assert "at least 1MB per cleaner thread" in r.error_message
        r = iac(c, "", [("log.cleaner.io.max.bytes.per.second", SET, "0.5")])
        assert r.error_code == ErrorCode.INVALID_CONFIG
        for key, value in (("log.cleaner.io.max.bytes.per.second", "1048576.0"),
                           ("log.cleaner.dedupe.buffer.size", "16777216"),
                           ("log.cleaner.io.buffer.size", "65536"),
                           ("log.cleaner.io.buffer.load.factor", "0.5")):
            r = iac(c, "", [(key, SET, value)])
            assert r.error_code == 0, r.error_message
        assert describe(c, BROKER, "0", ["log.cleaner.threads"])[
            "log.cleaner.threads"].read_only is False
        r = iac(c, "", [("log.cleaner.enable", SET, "false")])  # read-only, as in Kafka
        assert (r.error_code, r.error_message) == (
            ErrorCode.INVALID_REQUEST,
            "Cannot update these configs dynamically: Set(log.cleaner.enable)")
    # Still cleaning under the new settings: a fresh rewrite of every key.
    cleaned = _cleaned_to(data, topic)
    for i in range(400):
        p.produce(topic, b"w" * 60, b"key-%d" % (i % 40))
        if i % 20 == 19:
            p.flush(30)
    assert p.flush(30) == 0
    wait_for(lambda: _cleaned_to(data, topic) > cleaned, 60, "a clean with the new buffers")

    b.stop()
    b2 = start_broker(log_dir=data)
    wait_for(lambda: _cleaner_threads(b2) == 2, 30, "two cleaner threads after the restart")
    with RawClient(b2.bootstrap) as c:
        got = describe(c, BROKER, "0", ["log.cleaner.threads", "log.cleaner.backoff.ms"])
    assert {k: (e.value, e.config_source) for k, e in got.items()} == {
        "log.cleaner.threads": ("2", DYN_DEFAULT), "log.cleaner.backoff.ms": ("50", DYN_DEFAULT)}
