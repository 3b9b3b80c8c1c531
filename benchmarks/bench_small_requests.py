"""Small requests, pylog vs librdkafka's in-memory mock broker: time per request.

    python benchmarks/bench_small_requests.py            # 200 rounds of 200 requests
    python benchmarks/bench_small_requests.py --rounds 50

Clients send many small requests besides produce and fetch: ApiVersions on
every connection, Metadata, a ListOffsets per partition when a consumer
starts, heartbeats.  For each of ApiVersions v0, Metadata v4 and ListOffsets
v2 this measures, against a pylog broker (a subprocess, data in a temporary
directory) and against the mock (``test.mock.num.brokers=1``), over one
connection:

* pipelined: 200 requests written at once, then every answer read; the
  median round, per request (what a broker spends on one, when it is busy);
* one at a time: a request, its answer, the next (the median round trip: on a
  2-core VM mostly the two wake-ups).

Requests are encoded with pylog's codec; answers are only framed, not decoded.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import struct
import sys
import tempfile
import time

import confluent_kafka as ck

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_broker as bb  # noqa: E402

from pylog.protocol import ApiKey, encode_request  # noqa: E402

TOPIC = "small-requests"
PIPELINED = 200
_SIZE = struct.Struct(">i")

REQUESTS = (
    ("ApiVersions v0", ApiKey.API_VERSIONS, 0, {}),
    ("Metadata v4", ApiKey.METADATA, 4,
     {"topics": [{"name": TOPIC}], "allow_auto_topic_creation": False}),
    ("ListOffsets v2", ApiKey.LIST_OFFSETS, 2,
     {"replica_id": -1, "isolation_level": 0,
      "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "timestamp": -1}]}]}),
)


def round_trip(sock: socket.socket, blob: bytes, answers: int) -> float:
    """Send ``blob`` (``answers`` framed requests); seconds until every answer is in."""
    started = time.perf_counter()
    sock.sendall(blob)
    buf = bytearray()
    pos = 0
    for _ in range(answers):
        while len(buf) - pos < 4 or len(buf) - pos < 4 + _SIZE.unpack_from(buf, pos)[0]:
            chunk = sock.recv(1 << 20)
            if not chunk:
                raise SystemExit("the broker closed the connection")
            buf += chunk
        pos += 4 + _SIZE.unpack_from(buf, pos)[0]
    return time.perf_counter() - started


def measure(target: bb.Target, rounds: int) -> dict[str, tuple[float, float]]:
    host, port = target.bootstrap.split(",")[0].rsplit(":", 1)
    out = {}
    with socket.create_connection((host, int(port))) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for name, key, version, body in REQUESTS:
            one = encode_request(key, version, body, 1, "bench", framed=True)
            batch = b"".join(encode_request(key, version, body, i, "bench", framed=True)
                             for i in range(PIPELINED))
            round_trip(sock, batch, PIPELINED)  # warm up
            piped = statistics.median(round_trip(sock, batch, PIPELINED) / PIPELINED
                                      for _ in range(rounds))
            single = statistics.median(round_trip(sock, one, 1) for _ in range(rounds * 5))
            out[name] = (piped, single)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pylog-small-") as data:
        targets = [bb.start_pylog(os.path.join(data, "pylog")), bb.start_mock()]
        try:
            results = {}
            for target in targets:
                bb.make_topic(target, TOPIC)
                producer = ck.Producer({"bootstrap.servers": target.bootstrap})
                producer.produce(TOPIC, b"x", partition=0)  # the mock creates it on use
                producer.flush(30)
                del producer  # before the mock stops: it would log connection failures
                results[target.name] = measure(target, args.rounds)
        finally:
            for target in targets:
                target.stop()
    print("| request | pylog pipelined us | mock pipelined us | pylog/mock "
          "| pylog one-at-a-time us | mock one-at-a-time us |")
    print("|---|--:|--:|--:|--:|--:|")
    for name, *_ in REQUESTS:
        (pp, ps), (mp, ms) = results["pylog"][name], results["mock"][name]
        print(f"| {name} | {pp * 1e6:.1f} | {mp * 1e6:.1f} | {pp / mp:.2f} "
              f"| {ps * 1e6:.0f} | {ms * 1e6:.0f} |")
    print(f"\npipelined: {PIPELINED} requests written at once on one connection, the "
          f"median of {args.rounds} rounds per request; one at a time: the median "
          f"round trip of {args.rounds * 5}.")


if __name__ == "__main__":
    main()
