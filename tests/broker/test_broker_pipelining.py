"""Requests pipelined behind one in progress (a parked fetch) wait for it, as on
a muted Kafka connection: one parked fetch per connection, never hundreds.  A
response the socket cannot take at once is finished by sendfile as the client
reads, ahead of the responses behind it.  On both event loops."""

from __future__ import annotations

import os
import socket
import time

import pytest
from broker_process import EVENT_LOOPS, rss_mib
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


NOREAD_CLIENTS = 8
NOREAD_FETCHES = 150  # more than connection.MAX_QUEUED, in one write


def _open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _flood_without_reading(bootstrap: str, flood: bytes, clients: int, measure) -> tuple:
    """``clients`` connections with a tiny receive buffer each send ``flood``
    (pipelined requests) and read nothing; returns them, once each one's
    first response is under way, and the peak of ``measure()`` over a moment."""
    stuck = [RawClient(bootstrap, timeout=30, rcvbuf=4096) for _ in range(clients)]
    for c in stuck:
        c.send_raw(flood)
    for c in stuck:
        assert c.sock.recv(1, socket.MSG_PEEK) == b"\x00"
    peak = 0
    for _ in range(10):
        peak = max(peak, measure())
        time.sleep(0.05)
    return stuck, peak


@pytest.mark.parametrize("event_loop", EVENT_LOOPS)
def test_clients_that_never_read_cannot_make_the_broker_hold_every_response(
        start_broker, topic, event_loop: str) -> None:
    """Clients with a tiny receive buffer pipeline fetches of 128 KB each and
    do not read: the first response fills the socket and the requests behind
    it wait as request bytes, not as built responses each pinning a dup of the
    segment's fd (a few such clients used to exhaust the broker's open files).
    Others are served meanwhile; a client that starts reading gets every
    response, in order."""
    b = start_broker(event_loop=event_loop)
    other_topic = f"{topic}-other"
    _create(b.bootstrap, topic, other_topic)
    builder = BatchBuilder()
    for i in range(16):
        builder.append(i, None, bytes([i]) * 8000)
    records = builder.build()
    with RawClient(b.bootstrap) as producer:
        r = producer.request(ApiKey.PRODUCE, 9, produce_body(topic, 0, records))
        assert r.responses[0].partition_responses[0].error_code == 0
    flood = b"".join(encode_request(ApiKey.FETCH, 11, fetch_body(topic, 0), cid, framed=True)
                     for cid in range(NOREAD_FETCHES))
    pid = b.proc.pid
    baseline = _open_fds(pid)
    stuck, peak = _flood_without_reading(b.bootstrap, flood, NOREAD_CLIENTS,
                                         lambda: _open_fds(pid))
    try:
        with RawClient(b.bootstrap) as other:
            r = other.request(ApiKey.PRODUCE, 9, produce_body(other_topic, 0, batch(2)))
            assert r.responses[0].partition_responses[0].error_code == 0
            r = other.request(ApiKey.FETCH, 11, fetch_body(topic, 0))
            assert len(bytes(r.responses[0].partitions[0].records)) == len(records)
            peak = max(peak, _open_fds(pid))
        # A few fds per stuck connection (its socket, the response being sent,
        # a watch on the socket), never one per pipelined request.
        assert peak - baseline <= 4 * NOREAD_CLIENTS + 16, (baseline, peak)
        reader = stuck[0]
        for cid in range(NOREAD_FETCHES):
            got, response = reader.recv(ApiKey.FETCH, 11)
            assert got == cid
            part = response.responses[0].partitions[0]
            assert part.error_code == 0
            assert bytes(part.records)[16:] == records[16:]
        assert reader.request(ApiKey.API_VERSIONS, 0, {}).error_code == 0
    finally:
        for c in stuck:
            c.close()
    _wait_for(lambda: _open_fds(pid) <= baseline + 2, 10, "the stuck clients' fds to go")
    assert b.stop() == 0
    out = "".join(b.output)
    assert "Traceback" not in out, out


NOREAD_TOPICS = 100
NOREAD_METADATA_CLIENTS = 4
NOREAD_METADATA = 1500  # about 30 KB of requests, 36 MB of answers per connection


@pytest.mark.parametrize("event_loop", EVENT_LOOPS)
def test_clients_that_never_read_cannot_make_the_broker_buffer_every_response(
        start_broker, topic, event_loop: str) -> None:
    """Small requests with large answers (Metadata of every topic), pipelined
    by clients that do not read: once the transport stops taking the answers
    (writing paused) the rest wait as request bytes, so the broker's memory
    stays put instead of buffering every answer of a whole read of requests."""
    b = start_broker(event_loop=event_loop)
    names = [f"{topic[:40]}-{i:03d}-".ljust(200, "x") for i in range(NOREAD_TOPICS)]
    with RawClient(b.bootstrap, timeout=30) as admin_client:
        r = admin_client.request(ApiKey.CREATE_TOPICS, 4, {"topics": [
            {"name": n, "num_partitions": 1, "replication_factor": 1, "assignments": [],
             "configs": []} for n in names], "timeout_ms": 10000, "validate_only": False})
        assert [t.error_code for t in r.topics] == [0] * NOREAD_TOPICS
        answer = admin_client.request(ApiKey.METADATA, 1, {"topics": None})
        assert len(answer.topics) == NOREAD_TOPICS
    flood = b"".join(encode_request(ApiKey.METADATA, 1, {"topics": None}, cid, framed=True)
                     for cid in range(NOREAD_METADATA))
    pid = b.proc.pid
    baseline = rss_mib(pid)
    stuck, peak = _flood_without_reading(b.bootstrap, flood, NOREAD_METADATA_CLIENTS,
                                         lambda: rss_mib(pid))
    try:
        with RawClient(b.bootstrap) as other:
            assert len(other.request(ApiKey.METADATA, 1, {"topics": None}).topics) == (
                NOREAD_TOPICS)
            peak = max(peak, rss_mib(pid))
        # Were every answer of the read built: 4 x 36 MB; held: a few hundred KB.
        assert peak - baseline < 40, (baseline, peak)
        reader = stuck[0]
        for cid in range(NOREAD_METADATA):
            got, response = reader.recv(ApiKey.METADATA, 1)
            assert got == cid and len(response.topics) == NOREAD_TOPICS
        assert reader.request(ApiKey.API_VERSIONS, 0, {}).error_code == 0
    finally:
        for c in stuck:
            c.close()
    assert b.stop() == 0
    out = "".join(b.output)
    assert "Traceback" not in out, out
