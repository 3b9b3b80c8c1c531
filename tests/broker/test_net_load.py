"""The network layer under hostile and slow clients, on the real broker process:
what a client can make the node hold (memory, file descriptors) is bounded, as
on a muted Kafka connection, whatever it pipelines or however it stops reading,
and connections.max.idle.ms reaps clients that stopped reading.  Assertions
are on memory, descriptor counts and answers, never on speed."""

from __future__ import annotations

import os
import resource
import socket
import struct
import subprocess
import sys
import threading
import time

import pytest
from broker_process import EVENT_LOOPS, rss_mib, wait_for
from kafka_wire import RawClient, produce_body
from test_broker_protocol import batch, fetch_body

from pylog.protocol import ApiKey, encode_request
from pylog.records import BatchBuilder


def _open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _settled_fds(pid: int) -> int:
    """The node's open fds once connections just closed are gone."""
    last = _open_fds(pid)
    while True:
        time.sleep(0.2)
        now = _open_fds(pid)
        if now == last:
            return now
        last = now


def _create(bootstrap: str, *names: str) -> None:
    with RawClient(bootstrap, timeout=30) as c:
        r = c.request(
            ApiKey.CREATE_TOPICS,
            4,
            {
                "topics": [
                    {
                        "name": n,
                        "num_partitions": 1,
                        "replication_factor": 1,
                        "assignments": [],
                        "configs": [],
                    }
                    for n in names
                ],
                "timeout_ms": 10000,
                "validate_only": False,
            },
        )
        assert [t.error_code for t in r.topics] == [0] * len(names)


def _fill(bootstrap: str, topic: str, requests: int) -> int:
    """About ``requests`` x 1 MB of records in partition 0; returns its size."""
    b = BatchBuilder()
    for i in range(60):
        b.append(i, None, os.urandom(16000))
    records = b.build()
    with RawClient(bootstrap, timeout=30) as c:
        for _ in range(requests):
            r = c.request(ApiKey.PRODUCE, 9, produce_body(topic, 0, records))
            assert r.responses[0].partition_responses[0].error_code == 0
    return requests * len(records)


def _big_fetch(topic: str) -> dict:
    body = fetch_body(topic, 0)
    body["max_bytes"] = 50 << 20
    body["topics"][0]["partitions"][0]["partition_max_bytes"] = 50 << 20
    return body


def _check_clean_stop(b) -> None:
    assert b.stop() == 0
    out = "".join(b.output)
    assert "Traceback" not in out, out


HELD_FRAMES = 8
HELD_FRAME_BYTES = 16 << 20


@pytest.mark.parametrize("event_loop", EVENT_LOOPS)
def test_requests_pipelined_behind_a_parked_fetch_are_not_all_read_into_memory(
    start_broker, topic, event_loop: str
) -> None:
    """A client parks a fetch, then pipelines large requests behind it.  Kafka
    reads nothing more from a muted connection; pylog used to read up to 100
    requests ahead whatever their size (3 connections x 10 frames of 50 MB:
    1.5 GB of RSS).  Now it stops reading once 1 MiB waits, and every request
    is still answered, in order, once the fetch is."""
    b = start_broker(event_loop=event_loop)
    empty = f"{topic}-empty"
    _create(b.bootstrap, empty)
    # ApiVersions v0 padded to 16 MB: the header decodes, the rest is ignored.
    head = encode_request(ApiKey.API_VERSIONS, 0, {}, 0)
    cids = list(range(1, HELD_FRAMES + 1))
    frames = [
        struct.pack(">i", HELD_FRAME_BYTES)
        + encode_request(ApiKey.API_VERSIONS, 0, {}, cid)
        + bytes(HELD_FRAME_BYTES - len(head))
        for cid in cids
    ]
    pid = b.proc.pid
    baseline = rss_mib(pid)
    with RawClient(b.bootstrap, timeout=60) as client, RawClient(b.bootstrap) as other:
        parked = client.send(ApiKey.FETCH, 11, fetch_body(empty, 0, max_wait_ms=60_000))
        client.correlation_id = HELD_FRAMES
        sent = [0]

        def send_all() -> None:
            for frame in frames:
                view = memoryview(frame)
                while view:
                    n = client.sock.send(view[: 1 << 20])
                    sent[0] += n
                    view = view[n:]

        sender = threading.Thread(target=send_all, daemon=True)
        sender.start()
        # Until the broker stops taking bytes (or takes them all).
        peak, last, still = baseline, -1, 0
        while sender.is_alive() and still < 20:
            time.sleep(0.1)
            peak = max(peak, rss_mib(pid))
            still = still + 1 if sent[0] == last else 0
            last = sent[0]
        peak = max(peak, rss_mib(pid))
        # Read ahead whole: 128 MB.  Now: one frame past the 1 MiB budget.
        assert peak - baseline < 3 * HELD_FRAME_BYTES / (1 << 20), (baseline, peak)
        assert sender.is_alive() and sent[0] < HELD_FRAMES * HELD_FRAME_BYTES
        # Another connection is served meanwhile; its produce wakes the fetch.
        r = other.request(ApiKey.PRODUCE, 9, produce_body(empty, 0, batch(2)))
        assert r.responses[0].partition_responses[0].error_code == 0
        got, response = client.recv(ApiKey.FETCH, 11)
        assert got == parked and response.responses[0].partitions[0].error_code == 0
        for cid in cids:
            got, response = client.recv(ApiKey.API_VERSIONS, 0)
            assert (got, response.error_code) == (cid, 0)
        sender.join(30)
        assert not sender.is_alive()
        assert client.request(ApiKey.API_VERSIONS, 0, {}).error_code == 0
    _check_clean_stop(b)


SLOW_READ_BYTES = 64 << 10


def test_idle_timeout_reaps_clients_that_stopped_reading(start_broker, topic) -> None:
    """connections.max.idle.ms counts reads and writes, as Kafka's selector
    does: a client that stopped reading its answers is idle, whether the
    answer waits in the transport (many pipelined requests) or half-sent by
    sendfile (a large fetch).  Such connections were never reaped, each
    holding its socket and pinned segment fds.  A client that keeps reading a
    long answer slowly is not idle."""
    # A small send buffer: the kernel takes little of what the client does not read.
    b = start_broker("connections.max.idle.ms=1000", "socket.send.buffer.bytes=8192")
    _create(b.bootstrap, topic)
    size = _fill(b.bootstrap, topic, 2)
    pid = b.proc.pid
    with RawClient(b.bootstrap) as c:  # the node's lazily opened files, before the baseline
        c.request(ApiKey.FETCH, 11, _big_fetch(topic))
    baseline = _settled_fds(pid)
    api_versions = encode_request(
        ApiKey.API_VERSIONS,
        3,
        {"client_software_name": "t", "client_software_version": "1"},
        1,
        framed=True,
    )
    stuck = [RawClient(b.bootstrap, rcvbuf=4096) for _ in range(4)]
    try:
        for i, c in enumerate(stuck):
            if i % 2:
                c.send(ApiKey.FETCH, 11, _big_fetch(topic))  # answered by sendfile
            else:
                c.send_raw(api_versions * 2000)  # ~1 MB of answers from the transport
        # A slow reader of a long answer, reading a little at a time.
        with RawClient(b.bootstrap, rcvbuf=SLOW_READ_BYTES) as slow:
            slow.send(ApiKey.FETCH, 11, _big_fetch(topic))
            got = 0
            while got < size:
                chunk = slow.sock.recv(SLOW_READ_BYTES)
                assert chunk, f"closed after {got} of {size} bytes"
                got += len(chunk)
                time.sleep(0.05)
            assert slow.request(ApiKey.API_VERSIONS, 0, {}).error_code == 0
        wait_for(lambda: _open_fds(pid) <= baseline, 30, "the stuck connections to be closed")
    finally:
        for c in stuck:
            c.close()
    _check_clean_stop(b)


IDLE_CONNECTIONS = 1000


def test_idle_connections_cost_little_memory_and_no_fds_once_gone(start_broker, topic) -> None:
    """Each connection had a 64 KiB receive buffer of its own: 5000 idle
    connections took 330 MB of RSS (kept after they closed).  Now the staging
    buffer is the event loop's.  Connections opened and closed in a hurry --
    some mid-frame, some reset while a sendfile is under way -- leave no fd
    behind."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = IDLE_CONNECTIONS + 200
    if soft < want:
        if hard != resource.RLIM_INFINITY and hard < want:
            pytest.skip(f"needs {want} open files (hard limit {hard})")
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))  # the broker inherits it
    b = start_broker()
    _create(b.bootstrap, topic)
    _fill(b.bootstrap, topic, 4)
    pid = b.proc.pid
    host, port = b.bootstrap.rsplit(":", 1)
    address = (host, int(port))
    with RawClient(b.bootstrap) as c:
        c.request(ApiKey.FETCH, 11, _big_fetch(topic))
    fds, rss = _settled_fds(pid), rss_mib(pid)
    idle = []
    try:
        for i in range(IDLE_CONNECTIONS):
            s = socket.create_connection(address, timeout=10)
            if i % 2:
                s.sendall(b"\x00\x00")  # half a size prefix
            idle.append(s)
        wait_for(lambda: _open_fds(pid) >= fds + IDLE_CONNECTIONS, 30, "the connections")
        grown = rss_mib(pid) - rss
        # Was ~66 MB (64 KiB each); now a few KiB each.
        assert grown < IDLE_CONNECTIONS * 24 / 1024, grown
        with RawClient(b.bootstrap) as other:
            assert other.request(ApiKey.API_VERSIONS, 0, {}).error_code == 0
    finally:
        for s in idle:
            s.close()
    fetches = b"".join(
        encode_request(ApiKey.FETCH, 11, _big_fetch(topic), cid, framed=True) for cid in range(3)
    )
    for i in range(300):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.settimeout(10)
        s.connect(address)
        if i % 3 == 1:
            s.sendall(fetches)
            s.recv(100)  # an answer is under way
        if i % 3:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
    wait_for(lambda: _open_fds(pid) <= fds, 30, "the closed connections' fds to go")
    with RawClient(b.bootstrap) as other:
        assert other.request(ApiKey.API_VERSIONS, 0, {}).error_code == 0
    _check_clean_stop(b)


def _served(bootstrap: str) -> RawClient | None:
    """A connection that was admitted (answers ApiVersions), or None: closed
    by the node without an answer."""
    c = RawClient(bootstrap)
    try:
        assert c.request(ApiKey.API_VERSIONS, 0, {}).error_code == 0
    except (ConnectionError, OSError, EOFError, AssertionError):
        c.close()
        return None
    return c


def test_connection_quotas_close_connections_past_them(start_broker) -> None:
    """Kafka's max.connections.per.ip (with max.connections.per.ip.overrides)
    and max.connections: a connection past them is closed before anything is
    read from it, the others are served, and a slot freed by a close is
    taken by the next connection."""
    b = start_broker("max.connections.per.ip=3")
    held = [_served(b.bootstrap) for _ in range(3)]
    assert all(held)
    assert _served(b.bootstrap) is None
    held.pop().close()
    wait_for(lambda: (c := _served(b.bootstrap)) is not None and held.append(c) is None,
             10, "the freed slot")
    assert _served(b.bootstrap) is None
    for c in held:
        c.close()
    _check_clean_stop(b)

    # An override for this address, and the node-wide cap below it.
    b = start_broker("max.connections.per.ip=1", "max.connections.per.ip.overrides=127.0.0.1:5",
                     "max.connections=4")
    held = [_served(b.bootstrap) for _ in range(4)]
    assert all(held)
    assert _served(b.bootstrap) is None
    for c in held:
        c.close()
    _check_clean_stop(b)


def test_connection_quota_configs_are_checked(tmp_path) -> None:
    for bad in ("max.connections.per.ip.overrides=127.0.0.1", "max.connections=-1",
                "max.connections.per.ip.overrides=127.0.0.1:x"):
        out = subprocess.run([sys.executable, "-m", "pylog", "broker", "--override", bad,
                              "--override", f"log.dirs={tmp_path}"],
                             capture_output=True, text=True, timeout=60)
        # A known key with a bad value, not an unknown key.
        assert out.returncode == 2 and bad.split("=")[0] in out.stderr, out.stderr
        assert "invalid value" in out.stderr and "unknown" not in out.stderr, out.stderr
