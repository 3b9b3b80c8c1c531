"""The node's request queue: ``queued.max.requests`` bounds the requests held
behind their connections' earlier ones, ``queued.max.request.bytes`` the bytes
of requests read and not yet handled, over all connections.  Past a bound the
node stops reading the connections that would add to it; everything read is
answered, in order, once the queue drains.  Real broker, raw clients, both
event loops; the queue is watched through the broker's metrics page."""

from __future__ import annotations

import re
import threading
import time
import urllib.request

import pytest
from broker_process import EVENT_LOOPS, free_port
from kafka_wire import RawClient, latest_offset, produce_body
from test_broker_configs import BROKER, DEFAULT_CONFIG, STATIC_BROKER_CONFIG, describe
from test_broker_protocol import batch, fetch_body

from pylog.protocol import ApiKey, decode_response, encode_request
from pylog.records import BatchBuilder

admin = pytest.importorskip("confluent_kafka.admin")

INT, LONG = 3, 5  # DescribeConfigs config types
PARK_MS = 3000  # how long each parked fetch holds its connection's requests


def _create(bootstrap: str, *names: str) -> None:
    client = admin.AdminClient({"bootstrap.servers": bootstrap})
    for future in client.create_topics([admin.NewTopic(n, 1, 1) for n in names]).values():
        future.result(10)


def _gauges(url: str) -> dict[str, int | float]:
    with urllib.request.urlopen(url, timeout=10) as resp:
        page = resp.read().decode()
    return {m[1]: int(m[2]) if m[2].lstrip("-").isdigit() else float(m[2])
            for m in re.finditer(r"^(kafka_\w+) (\S+)$", page, re.M)}


def _steady(url: str, name: str) -> float:
    """The gauge once it has stopped moving (the node read what it will)."""
    last = None
    for _ in range(40):
        now = _gauges(url)[name]
        if now == last:
            return now
        last = now
        time.sleep(0.1)
    return last


def _big_batch(seed: int, size: int = 600_000) -> bytes:
    b = BatchBuilder()
    for i in range(size // 6000):
        b.append(1_700_000_000_000 + i, None, bytes([seed % 251]) * 6000)
    return b.build()


def _answers(client: RawClient, api_key: int, version: int, count: int) -> list:
    out = []
    for _ in range(count):
        out.append(decode_response(api_key, version, client.recv_frame()))
    return out


@pytest.mark.parametrize("event_loop", EVENT_LOOPS)
def test_queued_max_request_bytes_bounds_requests_held_over_all_connections(
        start_broker, topic, event_loop: str) -> None:
    url = f"http://127.0.0.1:{free_port()}/metrics"
    bound = 1 << 20
    b = start_broker(f"queued.max.request.bytes={bound}", f"metrics.listener={url}",
                     event_loop=event_loop)
    empty, data = f"{topic}-empty", f"{topic}-data"
    _create(b.bootstrap, empty, data, topic)
    frames = {}
    clients = [RawClient(b.bootstrap, timeout=30) for _ in range(2)]
    try:
        # Each client: a fetch that parks, then four ~600 KB produce requests
        # (in a thread: the node stops reading, so the sends block).
        senders = []
        for n, c in enumerate(clients):
            parts = [encode_request(ApiKey.FETCH, 11, fetch_body(empty, 0, max_wait_ms=PARK_MS),
                                    1, framed=True)]
            for k in range(4):
                frames[n, k] = encode_request(
                    ApiKey.PRODUCE, 9, produce_body(data, 0, _big_batch(n * 4 + k), acks=1),
                    2 + k, framed=True)
                parts.append(frames[n, k])
            senders.append(threading.Thread(target=c.send_raw, args=(b"".join(parts),)))
        for s in senders:
            s.start()
            time.sleep(0.3)  # the first client's requests are read first
        frame = len(frames[0, 0])
        used = _steady(url, "kafka_network_socketserver_memorypoolused")
        # What is held fits the bound, overshot by one request at most (each
        # connection alone may hold 1 MiB: both together would be ~2.4 MB).
        assert bound <= used <= bound + frame, used
        # Small requests of other clients are still served meanwhile.
        with RawClient(b.bootstrap) as other:
            assert latest_offset(other, data) == 0  # held, not appended
            r = other.request(ApiKey.PRODUCE, 9, produce_body(topic, 0, batch(3)))
            assert r.responses[0].partition_responses[0].error_code == 0
        # When the fetches give up waiting, everything is answered in order.
        records = 0
        for c in clients:
            [(cid, fetched)] = _answers(c, ApiKey.FETCH, 11, 1)
            assert cid == 1 and fetched.responses[0].partitions[0].error_code == 0
            produced = _answers(c, ApiKey.PRODUCE, 9, 4)
            assert [cid for cid, _ in produced] == [2, 3, 4, 5]
            assert all(p.responses[0].partition_responses[0].error_code == 0
                       for _, p in produced)
            records += 4 * (600_000 // 6000)
        for s in senders:
            s.join(10)
        with RawClient(b.bootstrap) as other:
            assert latest_offset(other, data) == records
        gauges = _gauges(url)
        assert gauges["kafka_network_socketserver_memorypoolused"] == 0
        assert gauges["kafka_network_socketserver_memorypoolavailable"] == bound
    finally:
        for c in clients:
            c.close()


@pytest.mark.parametrize("event_loop", EVENT_LOOPS)
def test_queued_max_requests_bounds_requests_held_over_all_connections(
        start_broker, topic, event_loop: str) -> None:
    url = f"http://127.0.0.1:{free_port()}/metrics"
    b = start_broker("queued.max.requests=2", f"metrics.listener={url}",
                     event_loop=event_loop)
    _create(b.bootstrap, topic)
    clients = [RawClient(b.bootstrap, timeout=30) for _ in range(3)]
    try:
        for c in clients:
            c.send_raw(encode_request(ApiKey.FETCH, 11, fetch_body(topic, 0, max_wait_ms=PARK_MS),
                                      1, framed=True))
        # Three requests behind each parked fetch, one write (one read) each.
        for k in range(3):
            for c in clients:
                c.send_raw(encode_request(ApiKey.API_VERSIONS, 3, {
                    "client_software_name": "t", "client_software_version": "1"},
                    2 + k, framed=True))
                time.sleep(0.05)
        # Held: two, then the connections that would hold more stop reading.
        assert _steady(url, "kafka_network_requestchannel_requestqueuesize") == 2
        for c in clients:
            [(cid, _)] = _answers(c, ApiKey.FETCH, 11, 1)
            assert cid == 1
            versions = _answers(c, ApiKey.API_VERSIONS, 3, 3)
            assert [cid for cid, _ in versions] == [2, 3, 4]
            assert all(v.error_code == 0 for _, v in versions)
        gauges = _gauges(url)
        assert gauges["kafka_network_requestchannel_requestqueuesize"] == 0
        assert gauges["kafka_network_socketserver_memorypoolused"] == 0
        assert gauges["kafka_network_socketserver_memorypoolavailable"] == 2**63 - 1
    finally:
        for c in clients:
            c.close()


def test_queued_max_request_bytes_is_a_long_config(start_broker) -> None:
    b = start_broker("queued.max.request.bytes=5000000000")
    with RawClient(b.bootstrap) as c:
        got = describe(c, BROKER, "0", ["queued.max.request.bytes", "queued.max.requests"])
    assert {k: (e.value, e.config_type, e.config_source) for k, e in got.items()} == {
        "queued.max.request.bytes": ("5000000000", LONG, STATIC_BROKER_CONFIG),
        "queued.max.requests": ("500", INT, DEFAULT_CONFIG)}
