"""Client quotas against the real broker process: AlterClientQuotas and
DescribeClientQuotas over the wire and through ``pylog configs``, the quotas
kept across a ``kill -9``, and producers, consumers and busy clients over
their quota answered with Kafka's throttle_time_ms and then not read for that
long (KIP-219), with confluent-kafka seeing the throttle and losing nothing.

The brokers here measure over ``quota.window.num=2`` windows of one second,
so a quota is crossed in one request and the throttles last about a second."""

from __future__ import annotations

import subprocess
import sys
import time

import confluent_kafka as ck
from kafka_wire import RawClient, latest_offset, produce_body
from test_broker_protocol import fetch_body, metadata

from pylog.protocol import ApiKey, ErrorCode
from pylog.records import BatchBuilder

WINDOWS = ("quota.window.num=2", "quota.window.size.seconds=1")


def alter(bootstrap: str, entity: list, validate_only: bool = False, **ops: float | None):
    """One AlterClientQuotas entry; a None value removes the key."""
    with RawClient(bootstrap) as c:
        r = c.request(ApiKey.ALTER_CLIENT_QUOTAS, 1, {"entries": [{
            "entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
            "ops": [{"key": k, "value": v or 0.0, "remove": v is None}
                    for k, v in ops.items()]}], "validate_only": validate_only})
    (entry,) = r.entries
    return entry.error_code, entry.error_message


def describe(bootstrap: str, components: list, strict: bool = False) -> dict:
    with RawClient(bootstrap) as c:
        r = c.request(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, {"components": [
            {"entity_type": t, "match_type": m, "match": n} for t, m, n in components],
            "strict": strict})
    assert r.error_code == 0, r.error_message
    return {tuple((e.entity_type, e.entity_name) for e in entry.entity):
            {v.key: v.value for v in entry.values} for entry in r.entries}


def records(n: int, size: int) -> bytes:
    b = BatchBuilder()
    for i in range(n):
        b.append(1_700_000_000_000 + i, None, b"v" * size)
    return b.build()


def test_quotas_are_set_described_and_survive_kill_9(start_broker, tmp_path) -> None:
    b = start_broker(log_dir=tmp_path / "q")
    assert alter(b.bootstrap, [("client-id", "c1")], producer_byte_rate=1024,
                 consumer_byte_rate=2048) == (0, None)
    assert alter(b.bootstrap, [("user", "u1"), ("client-id", None)],
                 request_percentage=12.5) == (0, None)
    assert alter(b.bootstrap, [("user", None)], validate_only=True,
                 producer_byte_rate=1) == (0, None)
    code, message = alter(b.bootstrap, [("client-id", "c1")], producer_byte_rate=0.5)
    assert (code, message) == (ErrorCode.INVALID_REQUEST,
                               "Configuration producer_byte_rate must be a Long value")
    code, message = alter(b.bootstrap, [("client-id", "c1")], controller_mutation_rate=5)
    assert code == ErrorCode.INVALID_REQUEST and "does not enforce" in message
    want = {(("client-id", "c1"),): {"producer_byte_rate": 1024.0, "consumer_byte_rate": 2048.0},
            (("client-id", None), ("user", "u1")): {"request_percentage": 12.5}}
    assert describe(b.bootstrap, []) == want
    assert describe(b.bootstrap, [("client-id", 2, None)], strict=True) == {
        (("client-id", "c1"),): want[(("client-id", "c1"),)]}
    b.kill()  # acknowledged quotas were written before the answer
    b = start_broker(log_dir=tmp_path / "q")
    assert describe(b.bootstrap, []) == want
    assert alter(b.bootstrap, [("client-id", "c1")], producer_byte_rate=None) == (0, None)
    assert describe(b.bootstrap, [("client-id", 0, "c1")]) == {
        (("client-id", "c1"),): {"consumer_byte_rate": 2048.0}}


def test_configs_tool_sets_and_describes_quotas(start_broker) -> None:
    b = start_broker()

    def tool(*args: str) -> str:
        out = subprocess.run([sys.executable, "-m", "pylog", "configs", "--bootstrap-server",
                              b.bootstrap, *args], capture_output=True, text=True, timeout=60)
        return (out.stdout + out.stderr).strip()

    assert tool("--alter", "--add-config", "producer_byte_rate=1024,request_percentage=200",
                "--entity-type", "users", "--entity-name", "user1", "--entity-type", "clients",
                "--entity-name", "clientA") == "Completed updating config for user user1."
    assert tool("--alter", "--add-config", "consumer_byte_rate=2048", "--entity-type",
                "clients", "--entity-default") == (
        "Completed updating default config for clients in the cluster.")
    assert tool("--describe", "--entity-type", "users", "--entity-name", "user1",
                "--entity-type", "clients", "--entity-name", "clientA") == (
        "Quota configs for user-principal 'user1', client-id 'clientA' are "
        "producer_byte_rate=1024.0, request_percentage=200.0")
    assert tool("--describe", "--entity-type", "clients") == (
        "Quota configs for the default client-id are consumer_byte_rate=2048.0")
    assert tool("--alter", "--delete-config", "consumer_byte_rate", "--entity-type", "clients",
                "--entity-name", "clientA") == "Invalid config(s): consumer_byte_rate"
    assert tool("--alter", "--add-config", "producer_byte_rate=lots", "--entity-type",
                "clients", "--entity-name", "x") == (
        "Cannot parse quota configuration value for producer_byte_rate: lots")


def test_producer_over_quota_is_throttled_and_muted(start_broker) -> None:
    b = start_broker(*WINDOWS)
    assert alter(b.bootstrap, [("client-id", "slow")], producer_byte_rate=10_000) == (0, None)
    batch = records(30, 1000)
    with RawClient(b.bootstrap, client_id="slow") as c, \
            RawClient(b.bootstrap, client_id="other") as other:
        metadata(other, "quota-t")  # created
        body = produce_body("quota-t", 0, batch)
        r = c.request(ApiKey.PRODUCE, 9, body)
        assert r.responses[0].partition_responses[0].error_code == 0
        # ~31 KB in one 1 s window against 10 KB/s: about 2 s to come back to it.
        assert 1800 <= r.throttle_time_ms <= 2300, r.throttle_time_ms
        # Muted: a request sent now is read once the throttle is over.
        sent = time.monotonic()
        c.request(ApiKey.METADATA, 12, {"topics": [], "allow_auto_topic_creation": False,
                                        "include_topic_authorized_operations": False})
        assert time.monotonic() - sent >= r.throttle_time_ms / 1000 - 0.05
        # Another client id is not throttled, and both batches are in the log.
        r = other.request(ApiKey.PRODUCE, 9, body)
        assert r.throttle_time_ms == 0
        assert latest_offset(other, "quota-t") == 60


def test_confluent_producer_sees_throttle_and_delivers_everything(start_broker) -> None:
    b = start_broker(*WINDOWS)
    assert alter(b.bootstrap, [("client-id", None)], producer_byte_rate=20_000) == (0, None)
    throttles: list[int] = []
    delivered: list[int] = []
    p = ck.Producer({"bootstrap.servers": b.bootstrap, "client.id": "anyone",
                     "linger.ms": 50, "throttle_cb": lambda e: throttles.append(e.throttle_time),
                     "on_delivery": lambda err, m: delivered.append(m.offset())})
    for i in range(100):
        p.produce("quota-conf", b"%04d" % i + b"x" * 996, partition=0)
        p.poll(0)
    assert p.flush(60) == 0
    p.poll(0.5)
    assert sorted(delivered) == list(range(100))
    assert throttles and max(throttles) > 0


def test_consumer_over_quota_gets_empty_answers_then_the_rest(start_broker) -> None:
    b = start_broker(*WINDOWS)
    with RawClient(b.bootstrap) as c:
        metadata(c, "quota-f")  # created
        for _ in range(20):  # 20 batches of ~5 KB
            r = c.request(ApiKey.PRODUCE, 9, produce_body("quota-f", 0, records(5, 1000)))
            assert r.responses[0].partition_responses[0].error_code == 0
    assert alter(b.bootstrap, [("client-id", "reader")], consumer_byte_rate=20_000) == (0, None)
    with RawClient(b.bootstrap, client_id="reader") as c:
        # One response carries at most what the quota allows in its window.
        r = c.request(ApiKey.FETCH, 12, fetch_body("quota-f", 0))
        first = r.responses[0].partitions[0]
        assert r.throttle_time_ms == 0 and 0 < len(first.records) <= 20_000
        r = c.request(ApiKey.FETCH, 12, fetch_body("quota-f", 0))
        assert r.throttle_time_ms > 0 and r.responses == [] and r.error_code == 0
    throttles: list[int] = []
    consumer = ck.Consumer({"bootstrap.servers": b.bootstrap, "group.id": "g",
                            "client.id": "reader", "auto.offset.reset": "earliest",
                            "fetch.queue.backoff.ms": 10,
                            "throttle_cb": lambda e: throttles.append(e.throttle_time)})
    consumer.subscribe(["quota-f"])
    offsets = []
    deadline = time.monotonic() + 60
    while len(offsets) < 100 and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None and m.error() is None:
            offsets.append(m.offset())
    consumer.close()
    assert offsets == list(range(100))
    assert throttles and max(throttles) > 0


def test_request_percentage_throttle_is_capped_at_a_window(start_broker) -> None:
    b = start_broker(*WINDOWS)
    assert alter(b.bootstrap, [("client-id", "busy")], request_percentage=0.0001) == (0, None)
    with RawClient(b.bootstrap, client_id="busy") as c:
        r = c.request(ApiKey.METADATA, 12, {"topics": None, "allow_auto_topic_creation": False,
                                            "include_topic_authorized_operations": False})
        assert r.throttle_time_ms == 1000  # Kafka's request quota: at most one window
    with RawClient(b.bootstrap, client_id="calm") as c:
        r = c.request(ApiKey.METADATA, 12, {"topics": None, "allow_auto_topic_creation": False,
                                            "include_topic_authorized_operations": False})
        assert r.throttle_time_ms == 0
