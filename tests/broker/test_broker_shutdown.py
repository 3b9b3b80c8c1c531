"""SIGTERM with clients connected: a consumer parked in a long poll, requests in
flight, connections the peer reset mid-batch.  The shutdown is clean: nothing
"never awaited", no traceback, no task exception left unretrieved."""

from __future__ import annotations

import socket
import struct

import pytest
from broker_process import EVENT_LOOPS
from kafka_wire import RawClient, produce_body
from test_broker_protocol import batch, fetch_body

from pylog.protocol import ApiKey, encode_request

ck = pytest.importorskip("confluent_kafka")
admin = pytest.importorskip("confluent_kafka.admin")

# A broker-side request queue this deep pauses reading the connection (MAX_QUEUED).
QUEUE_PAST_PAUSE = 120
RESET_CLIENTS = 30


def _frame(api_key: int, version: int, body: dict, correlation_id: int) -> bytes:
    return encode_request(api_key, version, body, correlation_id, framed=True)


def _send_and_reset(bootstrap: str, data: bytes, *, answered_first: bool = False) -> None:
    """Pipeline ``data`` and close with an RST (SO_LINGER 0): the broker's
    writes for these requests fail while it is still handling them.  With
    ``answered_first``, wait for the first response (the broker has read the
    batch) before the reset."""
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(data)
        if answered_first:
            assert len(s.recv(4)) > 0
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


@pytest.mark.parametrize("event_loop", EVENT_LOOPS)
def test_sigterm_with_parked_fetch_and_reset_clients_is_clean(start_broker, topic,
                                                              event_loop: str) -> None:
    b = start_broker(event_loop=event_loop)
    empty, full = f"{topic}-empty", f"{topic}-data"
    client = admin.AdminClient({"bootstrap.servers": b.bootstrap})
    for future in client.create_topics([admin.NewTopic(empty, 1, 1),
                                        admin.NewTopic(full, 1, 1)]).values():
        future.result(10)
    with RawClient(b.bootstrap) as raw:
        for _ in range(20):
            r = raw.request(ApiKey.PRODUCE, 9, produce_body(full, 0, batch(50)))
            assert r.responses[0].partition_responses[0].error_code == 0

    api_versions = _frame(ApiKey.API_VERSIONS, 3, {"client_software_name": "t",
                                                   "client_software_version": "1"}, 1)
    # Parks: nothing to read on the empty topic.
    parked = _frame(ApiKey.FETCH, 11, fetch_body(empty, 0, max_wait_ms=300), 2)
    # Answered at once, from the segment file with sendfile.
    records = _frame(ApiKey.FETCH, 11, fetch_body(full, 0), 3)
    for _ in range(RESET_CLIENTS):
        # A queue deep enough to pause reading (the reset goes unseen) behind a
        # parked fetch: once it is answered, the queued sendfile answers fail.
        _send_and_reset(b.bootstrap, api_versions + parked + records * QUEUE_PAST_PAUSE,
                        answered_first=True)
    for _ in range(RESET_CLIENTS):
        # Answers written while the peer is gone, then requests that park:
        # they must not start once the transport is closing.  (Last: nothing
        # here waits for the broker, whose output is only read at the stop.)
        _send_and_reset(b.bootstrap, (api_versions * 40 + parked) * 20)

    consumer = ck.Consumer({"bootstrap.servers": b.bootstrap, "group.id": topic,
                            "fetch.wait.max.ms": 500, "enable.auto.commit": False})
    try:
        consumer.assign([ck.TopicPartition(empty, 0, 0)])
        assert consumer.poll(1.0) is None  # nothing there: its fetches park
        assert b.stop() == 0  # SIGTERM while the consumer's fetch is parked
    finally:
        consumer.close()

    out = "".join(b.output)
    assert "stopped" in out
    assert "never awaited" not in out, out
    assert "Traceback" not in out, out
    assert "exception was never retrieved" not in out, out
    assert "Task was destroyed" not in out, out
