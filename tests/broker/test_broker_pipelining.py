"""Requests pipelined behind one in progress (a parked fetch) wait for it, as on
a muted Kafka connection: one parked fetch per connection, never hundreds.  A
response the socket cannot take at once is finished by sendfile as the client
reads, ahead of the responses behind it.  On both event loops."""

from __future__ import annotations

import socket
import time

import pytest
from broker_process import EVENT_LOOPS
from kafka_wire import RawClient, latest_offset, produce_body
from test_broker_protocol import batch, fetch_body

from pylog.protocol import ApiKey, decode_response, encode_request
from pylog.records import BatchBuilder

admin = pytest.importorskip("confluent_kafka.admin")

FLOOD_CLIENTS = 8
FLOOD_FETCHES = 300


def _create(bootstrap: str, *names: str) -> None:
    client = admin.AdminClient({"bootstrap.servers": bootstrap})
    for future in client.create_topics([admin.NewTopic(n, 1, 1) for n in names]).values():
        future.result(10)


@pytest.mark.parametrize("event_loop", EVENT_LOOPS)
def test_requests_behind_a_parked_fetch_wait_their_turn(start_broker, topic,
                                                        event_loop: str) -> None:
    b = start_broker(event_loop=event_loop)
    empty, data = f"{topic}-empty", f"{topic}-data"
    _create(b.bootstrap, empty, data)
    with RawClient(b.bootstrap) as a, RawClient(b.bootstrap) as other:
        # A fetch that parks (nothing to read, a long max wait), then a
        # produce to another topic, in one write.
        a.send_raw(encode_request(ApiKey.FETCH, 11, fetch_body(empty, 0, max_wait_ms=60_000),
                                  1, framed=True)
                   + encode_request(ApiKey.PRODUCE, 9, produce_body(data, 0, batch(2), acks=1),
                                    2, framed=True))
        # The produce waits behind the parked fetch: nothing appended yet.
        # (The pause gives the broker time to read both requests; were the
        # produce not held, it would have been appended by then.)
        time.sleep(0.5)
        assert latest_offset(other, data) == 0
        # Data for the parked fetch wakes it; then the produce runs.
        r = other.request(ApiKey.PRODUCE, 9, produce_body(empty, 0, batch(1)))
        assert r.responses[0].partition_responses[0].error_code == 0
        cid, fetched = decode_response(ApiKey.FETCH, 11, a.recv_frame())
        assert cid == 1
        assert fetched.responses[0].partitions[0].high_watermark == 1
        cid, produced = decode_response(ApiKey.PRODUCE, 9, a.recv_frame())
        assert cid == 2
        assert produced.responses[0].partition_responses[0].base_offset == 0
        assert latest_offset(other, data) == 2


@pytest.mark.parametrize("event_loop", EVENT_LOOPS)
def test_clients_pipelining_parked_fetches_cannot_hold_up_others_or_shutdown(
        start_broker, topic, event_loop: str) -> None:
    b = start_broker(event_loop=event_loop)
    _create(b.bootstrap, topic)
    flood = encode_request(ApiKey.FETCH, 11, fetch_body(topic, 0, max_wait_ms=60_000), 1,
                           framed=True) * FLOOD_FETCHES
    host, port = b.bootstrap.rsplit(":", 1)
    floods = [socket.create_connection((host, int(port)), timeout=30)
              for _ in range(FLOOD_CLIENTS)]
    try:
        for s in floods:
            s.sendall(flood)  # and never read an answer
        with RawClient(b.bootstrap) as other:
            # Appends wake one fetch per flooding connection, not 300 each;
            # the broker keeps answering everyone else.
            for _ in range(20):
                r = other.request(ApiKey.PRODUCE, 9, produce_body(topic, 0, batch(1)))
                assert r.responses[0].partition_responses[0].error_code == 0
            assert latest_offset(other, topic) == 20
        assert b.stop() == 0  # the held fetches answer at once while stopping
    finally:
        for s in floods:
            s.close()
    out = "".join(b.output)
    assert "stopped" in out
    assert "Traceback" not in out, out


def _big_batch(seed: int) -> bytes:
    b = BatchBuilder()
    for i in range(110):
        b.append(i, None, bytes([(seed + i) % 251]) * 8000)
    return b.build()  # about 880 KB


@pytest.mark.parametrize("event_loop", EVENT_LOOPS)
def test_fetch_larger_than_the_socket_takes_is_finished_as_the_client_reads(
        start_broker, topic, event_loop: str) -> None:
    """10 MB of records to a client with an 8 KiB receive buffer: sendfile
    fills the socket and the rest waits for it to drain (the loop watches the
    socket for room), then the request pipelined behind it is answered."""
    b = start_broker(event_loop=event_loop)
    _create(b.bootstrap, topic)
    batches = [_big_batch(i) for i in range(12)]
    with RawClient(b.bootstrap) as producer:
        for data in batches:
            r = producer.request(ApiKey.PRODUCE, 9, produce_body(topic, 0, data))
            assert r.responses[0].partition_responses[0].error_code == 0
    body = {**fetch_body(topic, 0), "max_bytes": 64 << 20}
    body["topics"][0]["partitions"][0]["partition_max_bytes"] = 64 << 20
    for _ in range(2):
        with RawClient(b.bootstrap, timeout=30, rcvbuf=8192) as slow:
            fetch_id = slow.send(ApiKey.FETCH, 11, body)
            versions_id = slow.send(ApiKey.API_VERSIONS, 0, {})
            time.sleep(0.5)  # the broker's sendfile meets a full socket
            got, response = slow.recv(ApiKey.FETCH, 11)
            assert got == fetch_id
            records = bytes(response.responses[0].partitions[0].records)
            assert len(records) == sum(len(d) for d in batches)
            # Base offset and leader epoch are the broker's; the rest is as sent.
            pos = 0
            for i, data in enumerate(batches):
                assert int.from_bytes(records[pos:pos + 8], "big") == 110 * i
                assert records[pos + 16:pos + len(data)] == data[16:]
                pos += len(data)
            assert slow.recv(ApiKey.API_VERSIONS, 0)[0] == versions_id
    # A client that goes away while its response waits for room: no error, no leak.
    with RawClient(b.bootstrap, rcvbuf=8192) as gone:
        gone.send(ApiKey.FETCH, 11, body)
        time.sleep(0.3)
    with RawClient(b.bootstrap) as other:
        assert other.request(ApiKey.API_VERSIONS, 0, {}).error_code == 0
    assert b.stop() == 0
    out = "".join(b.output)
    assert "Traceback" not in out and "never awaited" not in out, out
