"""Raw-socket requests: bad input, error codes, idempotence, long polls, ordering."""

from __future__ import annotations

import struct
import time

from kafka_wire import RawClient, latest_offset, produce_body

from pylog.protocol import ApiKey, ErrorCode, encode_request
from pylog.records import BatchBuilder, compression
from pylog.records.pyrecords import crc32c


def batch(n: int = 3, ts: int = 1_700_000_000_000, **kwargs: int) -> bytes:
    """``n`` records stamped ``ts``, ``ts + 1``, ...: a fixed time by default."""
    b = BatchBuilder(**kwargs)
    for i in range(n):
        b.append(ts + i, b"k", b"value-%d" % i)
    return b.build()


def metadata(client: RawClient, *topics: str, allow: bool = True):
    return client.request(ApiKey.METADATA, 9, {
        "topics": [{"name": t} for t in topics], "allow_auto_topic_creation": allow})


def fetch_body(topic: str, offset: int, *, max_wait_ms: int = 0, min_bytes: int = 1) -> dict:
    return {"replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes,
            "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [
                {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""}


def partition_response(r):
    return r.responses[0].partition_responses[0]


SPEC_VERSIONS = {
    ApiKey.API_VERSIONS: (0, 4), ApiKey.METADATA: (0, 12), ApiKey.PRODUCE: (3, 11),
    ApiKey.FETCH: (4, 12), ApiKey.LIST_OFFSETS: (1, 7), ApiKey.CREATE_TOPICS: (0, 7),
    ApiKey.DELETE_TOPICS: (0, 6), ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.DESCRIBE_CONFIGS: (0, 4), ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1), ApiKey.DESCRIBE_CLUSTER: (0, 1),
    ApiKey.DESCRIBE_LOG_DIRS: (0, 4), ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.INIT_PRODUCER_ID: (0, 4), ApiKey.GET_TELEMETRY_SUBSCRIPTIONS: (0, 0),
    ApiKey.PUSH_TELEMETRY: (0, 0),
    ApiKey.DESCRIBE_ACLS: (0, 3), ApiKey.CREATE_ACLS: (0, 3), ApiKey.DELETE_ACLS: (0, 3),
    ApiKey.ELECT_LEADERS: (0, 2), ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0), ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 1),
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 4), ApiKey.ADD_OFFSETS_TO_TXN: (0, 3),
    ApiKey.END_TXN: (0, 3), ApiKey.TXN_OFFSET_COMMIT: (0, 3), ApiKey.WRITE_TXN_MARKERS: (0, 1),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1), ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),
}


def test_api_versions_lists_only_implemented(broker) -> None:
    for version in (3, 4):  # v4: same body, what kafka-python 3.x sends first
        with RawClient(broker.bootstrap) as c:
            r = c.request(ApiKey.API_VERSIONS, version, {"client_software_name": "t",
                                                          "client_software_version": "1"})
        assert r.error_code == 0
        keys = {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}
        for key, versions in SPEC_VERSIONS.items():
            assert keys[key] == versions, key
        # Other APIs (group and transaction ones) are advertised only by the
        # modules that implement them.
        assert ApiKey.SASL_HANDSHAKE not in keys and ApiKey.CONSUMER_GROUP_HEARTBEAT not in keys


def test_unknown_api_versions_version_gets_unsupported_version(broker) -> None:
    with RawClient(broker.bootstrap) as c:
        # A version newer than any schema: header v2, body unknown to the broker.
        frame = struct.pack(">hhih", ApiKey.API_VERSIONS, 99, 7, 1) + b"x" + b"\x00\x00"
        c.send_raw(struct.pack(">i", len(frame)) + frame)
        cid, r = c.recv(ApiKey.API_VERSIONS, 0)
        assert cid == 7
        assert r.error_code == ErrorCode.UNSUPPORTED_VERSION
        assert any(k.api_key == ApiKey.FETCH for k in r.api_keys)
        # The connection stays usable.
        assert c.request(ApiKey.API_VERSIONS, 0, {}).error_code == 0


def test_unsupported_version_of_other_api_gets_error_response(broker) -> None:
    with RawClient(broker.bootstrap) as c:
        # Produce v2 (magic 1) is in the schemas but not served: per-partition errors.
        r = c.request(ApiKey.PRODUCE, 2, produce_body("x", 3, b""))
        part = partition_response(r)
        assert (r.responses[0].name, part.index) == ("x", 3)
        assert part.error_code == ErrorCode.UNSUPPORTED_VERSION
        # An API with a top-level error code (SaslHandshake, not served at all).
        r = c.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
        assert r.error_code == ErrorCode.UNSUPPORTED_VERSION
        # ListOffsets v0 is below the served range.
        r = c.request(ApiKey.LIST_OFFSETS, 0, {"replica_id": -1, "topics": [
            {"name": "x", "partitions": [{"partition_index": 1, "timestamp": -1,
                                          "max_num_offsets": 1}]}]})
        assert r.topics[0].partitions[0].error_code == ErrorCode.UNSUPPORTED_VERSION
        # The connection still serves.
        assert c.request(ApiKey.API_VERSIONS, 0, {}).error_code == 0


def test_unknown_key_or_version_closes_and_broker_serves_others(broker) -> None:
    with RawClient(broker.bootstrap) as bystander:
        for api_key, version in ((999, 0), (ApiKey.METADATA, 99)):
            with RawClient(broker.bootstrap) as c:
                frame = struct.pack(">hhih", api_key, version, 5, 1) + b"x" + b"\x00" * 8
                c.send_raw(struct.pack(">i", len(frame)) + frame)
                assert c.is_closed()
            assert bystander.request(ApiKey.API_VERSIONS, 0, {}).error_code == 0


def test_oversized_frame_closes_connection(broker) -> None:
    with RawClient(broker.bootstrap) as c:
        c.send_raw(struct.pack(">i", 104857600 + 1) + b"\x00" * 16)
        assert c.is_closed()
    with RawClient(broker.bootstrap) as c:  # a 2 GiB size prefix: refused, not allocated
        c.send_raw(struct.pack(">I", 2**31 - 1) + b"\x00" * 16)
        assert c.is_closed()
    with RawClient(broker.bootstrap) as c:
        c.send_raw(struct.pack(">i", -5))
        assert c.is_closed()


def test_garbage_closes_connection_and_broker_serves_others(broker) -> None:
    with RawClient(broker.bootstrap) as bystander, RawClient(broker.bootstrap) as c:
        assert bystander.request(ApiKey.API_VERSIONS, 0, {}).error_code == 0
        garbage = bytes(range(256)) * 4
        c.send_raw(struct.pack(">i", len(garbage)) + garbage)
        assert c.is_closed()
        assert bystander.request(ApiKey.API_VERSIONS, 0, {}).error_code == 0
    with RawClient(broker.bootstrap) as c:  # a metadata request cut short
        frame = encode_request(ApiKey.METADATA, 9, {"topics": [{"name": "abc"}]}, 1)[:-3]
        c.send_raw(struct.pack(">i", len(frame)) + frame)
        assert c.is_closed()


def test_produce_corrupt_crc_appends_nothing(broker, topic) -> None:
    with RawClient(broker.bootstrap) as c:
        metadata(c, topic)
        good = batch()
        r = c.request(ApiKey.PRODUCE, 9, produce_body(topic, 0, good))
        assert partition_response(r).error_code == 0
        before = latest_offset(c, topic)
        bad = bytearray(batch())
        bad[-1] ^= 0xFF  # a record byte: the CRC no longer matches
        r = c.request(ApiKey.PRODUCE, 9, produce_body(topic, 0, bytes(bad)))
        assert partition_response(r).error_code == ErrorCode.CORRUPT_MESSAGE
        assert latest_offset(c, topic) == before == 3


def test_produce_too_large_batch(start_broker, topic) -> None:
    b = start_broker("message.max.bytes=1000")
    with RawClient(b.bootstrap) as c:
        metadata(c, topic)
        big = BatchBuilder()
        big.append(0, None, b"x" * 2000)
        r = c.request(ApiKey.PRODUCE, 9, produce_body(topic, 0, big.build()))
        assert partition_response(r).error_code == ErrorCode.MESSAGE_TOO_LARGE
        assert latest_offset(c, topic) == 0


def test_unknown_topic_without_auto_create(start_broker) -> None:
    b = start_broker("auto.create.topics.enable=false")
    with RawClient(b.bootstrap) as c:
        r = c.request(ApiKey.PRODUCE, 9, produce_body("nope", 0, batch()))
        assert partition_response(r).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        md = metadata(c, "nope")
        assert md.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        r = c.request(ApiKey.FETCH, 11, fetch_body("nope", 0))
        assert r.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_metadata_auto_create_and_invalid_name(broker, topic) -> None:
    with RawClient(broker.bootstrap) as c:
        md = metadata(c, topic, "bad/name")
        assert md.topics[0].error_code == 0 and len(md.topics[0].partitions) == 1
        assert md.topics[0].partitions[0].leader_id == 0
        assert md.topics[1].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
        assert md.cluster_id and md.controller_id == 0


def test_acks_zero_gets_no_response(broker, topic) -> None:
    with RawClient(broker.bootstrap) as c:
        metadata(c, topic)
        c.send(ApiKey.PRODUCE, 9, produce_body(topic, 0, batch(), acks=0))
        # The next answer on the connection belongs to the next request.
        assert latest_offset(c, topic) == 3


def test_idempotent_duplicates_and_sequence_errors(broker, topic) -> None:
    with RawClient(broker.bootstrap) as c:
        metadata(c, topic)
        init = c.request(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": None,
                                                      "transaction_timeout_ms": 60000})
        pid, epoch = init.producer_id, init.producer_epoch
        assert init.error_code == 0 and pid >= 0

        def send(seq: int, ep: int = epoch):
            body = produce_body(topic, 0, batch(3, producer_id=pid, producer_epoch=ep,
                                                base_sequence=seq))
            return partition_response(c.request(ApiKey.PRODUCE, 9, body))

        first = send(0)
        assert (first.error_code, first.base_offset) == (0, 0)
        assert (send(3).error_code, send(3).base_offset) == (0, 3)  # retry: same offset
        dup = send(0)
        assert (dup.error_code, dup.base_offset) == (0, 0)
        assert send(9).error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert send(6).base_offset == 6
        assert latest_offset(c, topic) == 9
        bumped = send(0, epoch + 1)
        assert bumped.error_code == 0 and bumped.base_offset == 9
        assert send(3, epoch).error_code == ErrorCode.INVALID_PRODUCER_EPOCH


def test_fetch_out_of_range_and_limits(broker, topic) -> None:
    with RawClient(broker.bootstrap) as c:
        metadata(c, topic)
        for _ in range(5):
            c.request(ApiKey.PRODUCE, 9, produce_body(topic, 0, batch(10)))
        r = c.request(ApiKey.FETCH, 11, fetch_body(topic, 999))
        p = r.responses[0].partitions[0]
        assert p.error_code == ErrorCode.OFFSET_OUT_OF_RANGE and p.high_watermark == 50
        body = fetch_body(topic, 0)
        body["topics"][0]["partitions"][0]["partition_max_bytes"] = 1  # first batch still whole
        p = c.request(ApiKey.FETCH, 11, body).responses[0].partitions[0]
        assert p.error_code == 0 and len(p.records) == len(batch(10))
        p = c.request(ApiKey.FETCH, 11, fetch_body(topic, 20)).responses[0].partitions[0]
        assert len(p.records) == 3 * len(batch(10)) and p.high_watermark == 50


def test_broker_fetch_max_bytes_caps_the_response(start_broker) -> None:
    """KIP-541's broker ``fetch.max.bytes`` wins over a larger request max_bytes;
    the first batch still goes whole (KIP-74) however small the cap."""
    b = start_broker("fetch.max.bytes=1024")
    one = batch(60)
    assert 512 < len(one) <= 1024
    with RawClient(b.bootstrap) as c:
        metadata(c, "capped")
        for _ in range(3):
            c.request(ApiKey.PRODUCE, 9, produce_body("capped", 0, one))
        p = c.request(ApiKey.FETCH, 11, fetch_body("capped", 0)).responses[0].partitions[0]
        assert p.error_code == 0 and len(p.records) == len(one) and p.high_watermark == 180


def test_fetch_long_poll_wakes_on_produce(broker, topic) -> None:
    with RawClient(broker.bootstrap) as consumer, RawClient(broker.bootstrap) as producer:
        metadata(producer, topic)
        started = time.monotonic()
        consumer.send(ApiKey.FETCH, 11, fetch_body(topic, 0, max_wait_ms=10_000))
        time.sleep(0.3)
        producer.request(ApiKey.PRODUCE, 9, produce_body(topic, 0, batch()))
        _, r = consumer.recv(ApiKey.FETCH, 11)
        assert time.monotonic() - started < 5
        assert len(r.responses[0].partitions[0].records) == len(batch())


def test_fetch_long_poll_times_out_empty(broker, topic) -> None:
    with RawClient(broker.bootstrap) as c:
        metadata(c, topic)
        started = time.monotonic()
        r = c.request(ApiKey.FETCH, 11, fetch_body(topic, 0, max_wait_ms=300))
        assert 0.25 < time.monotonic() - started < 3
        assert len(r.responses[0].partitions[0].records) == 0


def test_fetch_of_unknown_partitions_only_does_not_wait(broker, topic) -> None:
    """KafkaApis sets unknown partitions aside; with none left to read the
    answer goes at once, whatever max_wait_ms (with a known one, it waits)."""
    missing = f"{topic}-missing"
    with RawClient(broker.bootstrap, timeout=20) as c:
        metadata(c, topic)
        r = c.request(ApiKey.FETCH, 11, fetch_body(missing, 0, max_wait_ms=600_000))
        [(name, part)] = [(t.topic, t.partitions[0]) for t in r.responses]
        assert (name, part.error_code) == (missing, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        body = fetch_body(topic, 0, max_wait_ms=300)
        body["topics"].append(fetch_body(missing, 0)["topics"][0])
        started = time.monotonic()
        r = c.request(ApiKey.FETCH, 11, body)
        assert time.monotonic() - started > 0.25  # the known partition waited
        assert [t.partitions[0].error_code for t in r.responses] == [
            0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]


def test_pipelined_responses_keep_request_order(broker, topic) -> None:
    with RawClient(broker.bootstrap) as c, RawClient(broker.bootstrap) as producer:
        metadata(producer, topic)
        # A parked fetch first, then requests that finish at once: answers stay in order.
        ids = [c.send(ApiKey.FETCH, 11, fetch_body(topic, 0, max_wait_ms=400))]
        ids.append(c.send(ApiKey.API_VERSIONS, 0, {}))
        ids.append(c.send(ApiKey.PRODUCE, 9, produce_body(topic, 0, batch())))
        got = [c.recv(ApiKey.FETCH, 11)[0], c.recv(ApiKey.API_VERSIONS, 0)[0],
               c.recv(ApiKey.PRODUCE, 9)[0]]
        assert got == ids


def test_list_offsets(broker, topic) -> None:
    with RawClient(broker.bootstrap) as c:
        metadata(c, topic)
        for _ in range(3):
            c.request(ApiKey.PRODUCE, 9, produce_body(topic, 0, batch(3)))

        def lookup(ts: int) -> int:
            r = c.request(ApiKey.LIST_OFFSETS, 5, {"replica_id": -1, "isolation_level": 0,
                          "topics": [{"name": topic, "partitions": [
                              {"partition_index": 0, "timestamp": ts}]}]})
            return r.topics[0].partitions[0].offset

        assert lookup(-2) == 0
        assert lookup(-1) == 9
        assert lookup(1_700_000_000_001) == 1
        assert lookup(1_800_000_000_000) == -1


def test_fetch_of_data_not_in_page_cache(broker, topic) -> None:
    """Cold data goes the off-loop way (read in by a worker thread, then sendfile)."""
    import os

    from pylog.io import pagecache

    with RawClient(broker.bootstrap) as c:
        metadata(c, topic)
        big = BatchBuilder()
        for i in range(200):
            big.append(i, None, bytes([i % 251]) * 1000)
        data = big.build()
        for _ in range(5):
            c.request(ApiKey.PRODUCE, 9, produce_body(topic, 0, data))
        segment = broker.log_dir / f"{topic}-0" / "00000000000000000000.log"
        fd = os.open(segment, os.O_RDONLY)
        try:
            os.fsync(fd)  # dirty pages cannot be dropped
            pagecache.drop_cache(fd)
        finally:
            os.close(fd)
        body = fetch_body(topic, 0)
        p = c.request(ApiKey.FETCH, 11, body).responses[0].partitions[0]
        assert bytes(p.records)[61:] == data[61:] * 5 or len(p.records) == 5 * len(data)
        assert len(p.records) == 5 * len(data)


def test_idle_connections_are_closed(start_broker) -> None:
    b = start_broker("connections.max.idle.ms=300")
    with RawClient(b.bootstrap) as idle, RawClient(b.bootstrap) as busy:
        started = time.monotonic()
        for _ in range(8):  # the busy one keeps talking and stays open
            assert busy.request(ApiKey.API_VERSIONS, 0, {}).error_code == 0
            time.sleep(0.1)
        assert idle.is_closed(timeout=3)
        assert time.monotonic() - started < 3
        assert busy.request(ApiKey.API_VERSIONS, 0, {}).error_code == 0


def test_two_batches_in_one_partition_is_invalid_record(broker, topic) -> None:
    with RawClient(broker.bootstrap) as c:
        metadata(c, topic)
        r = c.request(ApiKey.PRODUCE, 11, produce_body(topic, 0, batch() + batch()))
        assert partition_response(r).error_code == ErrorCode.INVALID_RECORD
        bad = bytearray(batch())
        bad[16] = 1  # magic 1: not a v2 batch (ProduceRequest.validateRecords)
        r = c.request(ApiKey.PRODUCE, 11, produce_body(topic, 0, bytes(bad)))
        assert partition_response(r).error_code == ErrorCode.INVALID_RECORD
        r = c.request(ApiKey.PRODUCE, 11, produce_body(topic, 0, batch()[:-5]))  # cut short
        assert partition_response(r).error_code == ErrorCode.INVALID_RECORD
        assert latest_offset(c, topic) == 0  # nothing half-appended
        r = c.request(ApiKey.PRODUCE, 11, produce_body(topic, 0, batch()))
        assert partition_response(r).error_code == 0 and partition_response(r).base_offset == 0


def test_random_frames_never_kill_the_broker(broker) -> None:
    import random

    rng = random.Random(7)
    with RawClient(broker.bootstrap) as bystander:
        for _ in range(30):
            with RawClient(broker.bootstrap) as c:
                junk = rng.randbytes(rng.randrange(1, 300))
                c.send_raw(struct.pack(">i", len(junk)) + junk)
                c.is_closed(1)  # closed, or an error answer: either is fine
            assert bystander.request(ApiKey.API_VERSIONS, 0, {}).error_code == 0


def test_malformed_produce_frames_close_and_append_nothing(start_broker, topic) -> None:
    """Produce is decoded in C (``pylog._native.produce_codec``): a frame that
    does not decode closes the connection with a log line, and nothing of it is
    appended, not even a partition that came whole before the damage (the whole
    frame is decoded before any partition is appended)."""
    b = start_broker()
    with RawClient(b.bootstrap) as c:
        metadata(c, topic)
        assert partition_response(c.request(ApiKey.PRODUCE, 9, produce_body(
            topic, 0, batch()))).error_code == 0
    for version in (3, 8, 9, 11):
        body = {"transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [
            {"name": topic, "partition_data": [{"index": 0, "records": batch()}]},
            {"name": topic, "partition_data": [{"index": 0, "records": batch()}]}]}
        whole = encode_request(ApiKey.PRODUCE, version, body, 7)
        empty = encode_request(ApiKey.PRODUCE, version, {**body, "topic_data": []}, 7)
        absurd = (empty[:-4] + b"\x7f\xff\xff\xff" if version < 9  # 2^31-1 topics
                  else empty[:-2] + b"\xff\xff\xff\xff\x07\x00")
        for frame in (whole[:-20], absurd):  # the second topic's records cut short
            with RawClient(b.bootstrap) as c:
                c.send_raw(struct.pack(">i", len(frame)) + frame)
                assert c.is_closed()
    with RawClient(b.bootstrap) as c:
        assert latest_offset(c, topic) == 3
        r = c.request(ApiKey.PRODUCE, 11, produce_body(topic, 0, batch()))
        assert partition_response(r).error_code == 0 and partition_response(r).base_offset == 3
    assert b.stop() == 0
    assert "".join(b.output).count("malformed request") == 8


def test_fetch_every_version_and_isolation_level(broker, topic) -> None:
    """Fetch is decoded and encoded in C (``pylog._native.fetch_codec``): every
    served version answers with the records, the watermarks and, for
    read_committed, an empty aborted-transactions list (null otherwise)."""
    with RawClient(broker.bootstrap) as c:
        metadata(c, topic)
        for _ in range(2):
            c.request(ApiKey.PRODUCE, 9, produce_body(topic, 0, batch(4)))
        for version in range(4, 13):
            for isolation in (0, 1):
                body = {**fetch_body(topic, 4), "isolation_level": isolation}
                r = c.request(ApiKey.FETCH, version, body)
                p = r.responses[0].partitions[0]
                assert (p.error_code, p.high_watermark, p.last_stable_offset) == (0, 8, 8)
                assert bytes(p.records)[16:] == batch(4)[16:]  # offset, epoch: the broker's
                assert p.aborted_transactions == ([] if isolation else None), (version, isolation)
                if version >= 5:
                    assert p.log_start_offset == 0
                if version >= 7:
                    assert (r.error_code, r.session_id) == (0, 0)


def test_fetch_checks_current_leader_epoch(broker, topic) -> None:
    """As Kafka's Partition.localLogWithEpochOrThrow (KIP-320, Fetch v9+): a
    current_leader_epoch ahead of the leader's is UNKNOWN_LEADER_EPOCH, one
    behind it FENCED_LEADER_EPOCH, answered at once (an error read ends the
    long poll) with unknown watermarks; -1 and the leader's epoch are served.
    Before v9 the field does not exist."""
    with RawClient(broker.bootstrap) as c:
        metadata(c, topic)
        c.request(ApiKey.PRODUCE, 9, produce_body(topic, 0, batch(4)))
        epoch = metadata(c, topic).topics[0].partitions[0].leader_epoch
        behind = epoch - 1 if epoch > 0 else -2  # -1 is "no epoch"

        def fetch(version: int, current: int, offset: int = 0, wait: int = 0):
            body = fetch_body(topic, offset, max_wait_ms=wait)
            body["topics"][0]["partitions"][0]["current_leader_epoch"] = current
            return c.request(ApiKey.FETCH, version, body).responses[0].partitions[0]

        for version in range(9, 13):
            for current in (-1, epoch):
                p = fetch(version, current)
                assert (p.error_code, p.high_watermark) == (0, 4)
                assert bytes(p.records)[16:] == batch(4)[16:]
            for current, code in ((epoch + 1, ErrorCode.UNKNOWN_LEADER_EPOCH),
                                  (behind, ErrorCode.FENCED_LEADER_EPOCH)):
                started = time.monotonic()
                p = fetch(version, current, offset=4, wait=20_000)  # at the end: would park
                assert time.monotonic() - started < 10
                assert (p.error_code, p.high_watermark, p.log_start_offset) == (code, -1, -1)
                assert len(p.records) == 0
        for version in range(4, 9):  # no field: the epoch is never checked
            p = fetch(version, epoch + 1)
            assert (p.error_code, p.high_watermark) == (0, 4)


def test_fetch_with_an_unknown_session_id_gets_fetch_session_id_not_found(broker, topic) -> None:
    """An incremental fetch on a session the broker never made (or evicted)."""
    with RawClient(broker.bootstrap) as c:
        metadata(c, topic)
        for version in (7, 12):
            r = c.request(ApiKey.FETCH, version, {**fetch_body(topic, 0), "session_id": 42,
                                                  "session_epoch": 3})
            assert r.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND and r.responses == []
        # Session id 0 (no session) on the same connection is served.
        r = c.request(ApiKey.FETCH, 12, fetch_body(topic, 0))
        assert r.error_code == 0 and r.responses[0].partitions[0].error_code == 0


def test_malformed_fetch_frames_close_and_the_broker_serves_others(start_broker, topic) -> None:
    b = start_broker()
    with RawClient(b.bootstrap) as c:
        metadata(c, topic)
        c.request(ApiKey.PRODUCE, 9, produce_body(topic, 0, batch()))
    for version in (4, 11, 12):
        whole = encode_request(ApiKey.FETCH, version, fetch_body(topic, 0), 7)
        for frame in (whole[:-7], whole[:14] + b"\xff" * 8):
            with RawClient(b.bootstrap) as c:
                c.send_raw(struct.pack(">i", len(frame)) + frame)
                assert c.is_closed()
    with RawClient(b.bootstrap) as c:
        p = c.request(ApiKey.FETCH, 12, fetch_body(topic, 0)).responses[0].partitions[0]
        assert p.error_code == 0 and bytes(p.records)[16:] == batch()[16:]
    assert b.stop() == 0
    assert "".join(b.output).count("malformed request") == 6


def test_fetch_partition_errors_carry_empty_records_not_null(broker, topic) -> None:
    """Kafka answers a partition error with MemoryRecords.EMPTY (a zero-length
    record set), never null: librdkafka rejects a whole Fetch response with a
    null record set ("invalid MessageSetSize -1") and so never sees the error."""
    with RawClient(broker.bootstrap) as c:
        metadata(c, topic)
        c.request(ApiKey.PRODUCE, 9, produce_body(topic, 0, batch()))
        for version in (4, 11, 12):  # classic and flexible (compact) encodings
            p = c.request(ApiKey.FETCH, version, fetch_body(topic, 999)).responses[0].partitions[0]
            assert p.error_code == ErrorCode.OFFSET_OUT_OF_RANGE and p.high_watermark == 3
            assert p.records is not None and len(p.records) == 0, version
            body = fetch_body(topic, 0)
            body["topics"][0]["partitions"][0]["partition"] = 7  # the topic has one
            p = c.request(ApiKey.FETCH, version, body).responses[0].partitions[0]
            assert p.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            assert p.records is not None and len(p.records) == 0, version
            r = c.request(ApiKey.FETCH, version, fetch_body(f"{topic}-none", 0))
            p = r.responses[0].partitions[0]
            assert p.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            assert p.records is not None and len(p.records) == 0, version


def test_list_offsets_duplicate_partition_is_invalid_request(broker, topic) -> None:
    """As Kafka: a partition named more than once in one ListOffsets request gets
    INVALID_REQUEST on every row naming it; the other partitions are answered."""
    other = f"{topic}-other"
    with RawClient(broker.bootstrap) as c:
        metadata(c, topic, other)
        c.request(ApiKey.PRODUCE, 9, produce_body(other, 0, batch()))
        for version in (1, 7):
            r = c.request(ApiKey.LIST_OFFSETS, version, {
                "replica_id": -1, "isolation_level": 0, "topics": [
                    {"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1},
                                                   {"partition_index": 0, "timestamp": -2}]},
                    {"name": other, "partitions": [{"partition_index": 0, "timestamp": -1}]}]})
            rows = [(t.name, p.partition_index, p.error_code)
                    for t in r.topics for p in t.partitions]
            assert rows == [(topic, 0, ErrorCode.INVALID_REQUEST),
                            (topic, 0, ErrorCode.INVALID_REQUEST), (other, 0, 0)], version
            assert r.topics[1].partitions[0].offset == 3


def test_create_topics_assignment_indexes_must_be_0_to_n(broker, topic) -> None:
    """As Kafka: manual replica assignments must name partitions 0..n-1, each
    once (in any order), else INVALID_REPLICA_ASSIGNMENT and nothing is created."""
    def create(name: str, version: int, *indexes: int):
        r = c.request(ApiKey.CREATE_TOPICS, version, {"timeout_ms": 5000, "validate_only": False,
                      "topics": [{"name": name, "num_partitions": -1, "replication_factor": -1,
                                  "configs": [], "assignments": [
                                      {"partition_index": i, "broker_ids": [0]}
                                      for i in indexes]}]})
        return r.topics[0].error_code

    with RawClient(broker.bootstrap) as c:
        for version in (4, 7):
            gap, dup, ok = (f"{topic}-{version}-{s}" for s in ("gap", "dup", "ok"))
            assert create(gap, version, 5) == ErrorCode.INVALID_REPLICA_ASSIGNMENT
            assert create(dup, version, 0, 0) == ErrorCode.INVALID_REPLICA_ASSIGNMENT
            assert create(ok, version, 1, 0) == 0
            md = metadata(c, gap, dup, ok, allow=False)
            assert [t.error_code for t in md.topics] == [
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 0]
            assert len(md.topics[2].partitions) == 2


def test_clients_cannot_write_internal_topics_or_control_batches(start_broker, tmp_path,
                                                                 topic) -> None:
    """As Kafka: a client append to __consumer_offsets gets INVALID_TOPIC_EXCEPTION
    and a client control batch (attributes bit 0x20) gets INVALID_RECORD; neither
    is appended, so the group coordinator still loads its topic at the next start
    and consumers are not stuck behind a bogus control batch."""
    data = tmp_path / "data"
    b = start_broker("offsets.topic.num.partitions=2", log_dir=data)
    garbage = BatchBuilder()
    garbage.append(1_700_000_000_000, b"\x00\x01garbage", b"x")  # a cut-short offset key
    with RawClient(b.bootstrap) as c:
        assert c.request(ApiKey.FIND_COORDINATOR, 3, {"key": "g", "key_type": 0}).error_code == 0
        assert len(metadata(c, "__consumer_offsets", allow=False).topics[0].partitions) == 2
        for index in (0, 1):
            # The partitions other than the group's are created off the loop.
            deadline = time.monotonic() + 20
            while latest_offset(c, "__consumer_offsets", index) != 0:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            r = c.request(ApiKey.PRODUCE, 9, produce_body("__consumer_offsets", index,
                                                          garbage.build()))
            assert partition_response(r).error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
            assert latest_offset(c, "__consumer_offsets", index) == 0
        metadata(c, topic)
        r = c.request(ApiKey.PRODUCE, 9, produce_body(topic, 0, batch(is_control=True)))
        assert partition_response(r).error_code == ErrorCode.INVALID_RECORD
        assert latest_offset(c, topic) == 0
        r = c.request(ApiKey.PRODUCE, 9, produce_body(topic, 0, batch()))
        assert (partition_response(r).error_code, partition_response(r).base_offset) == (0, 0)
    assert b.stop() == 0
    b2 = start_broker(log_dir=data, port=b.port)  # raises if the node cannot start
    with RawClient(b2.bootstrap) as c:
        assert latest_offset(c, "__consumer_offsets", 0) == 0
        assert c.request(ApiKey.FIND_COORDINATOR, 3, {"key": "g", "key_type": 0}).error_code == 0
        p = c.request(ApiKey.FETCH, 12, fetch_body(topic, 0)).responses[0].partitions[0]
        assert p.error_code == 0 and bytes(p.records)[16:] == batch()[16:]


def _recompressed(good: bytes, payload: bytes) -> bytes:
    """``good``'s header around another records section, its CRC made right."""
    buf = bytearray(good[:61] + payload)
    struct.pack_into(">i", buf, 8, len(buf) - 12)
    struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
    return bytes(buf)


def test_compressed_batches_are_checked_inside(broker, topic) -> None:
    """As Kafka's LogValidator: a compressed batch whose CRC is right but whose
    payload does not decompress, or holds records that do not parse, gets
    INVALID_RECORD and is not stored (a consumer could not get past it); the
    same records well compressed are stored and read back."""
    good = batch(5, compression=4)
    section = compression.decompress(4, good[61:])
    bad = [_recompressed(good, good[61:70] + b"\x00" * (len(good) - 70)),  # not zstd
           _recompressed(good, compression.compress(4, section[:-1])),  # last record cut
           _recompressed(good, compression.compress(4, section + section[-9:]))]  # bytes over
    with RawClient(broker.bootstrap) as c:
        metadata(c, topic)
        for records in bad:
            r = c.request(ApiKey.PRODUCE, 9, produce_body(topic, 0, records))
            p = partition_response(r)
            assert p.error_code == ErrorCode.INVALID_RECORD, p
            assert p.error_message.startswith("batch 0 at byte 0: ")
        assert latest_offset(c, topic) == 0
        r = c.request(ApiKey.PRODUCE, 9, produce_body(topic, 0, good))
        assert (partition_response(r).error_code, partition_response(r).base_offset) == (0, 0)
        p = c.request(ApiKey.FETCH, 12, fetch_body(topic, 0)).responses[0].partitions[0]
        assert p.error_code == 0 and bytes(p.records)[16:] == good[16:]


def test_batches_kafka_refuses_before_the_log(broker, topic) -> None:
    """As Kafka's ProduceRequest.validateRecords, KafkaApis and LogValidator:
    no batch at all, an idempotent batch without a sequence, a transactional
    batch without a transactional id, or whose producer has no transaction
    with the partition in it, and a client's LogAppendTime batch are each
    refused with Kafka's error, and nothing is appended."""
    txn = batch(producer_id=7, producer_epoch=0, base_sequence=0, is_transactional=True)
    with RawClient(broker.bootstrap) as c:
        metadata(c, topic)
        cases = [(b"", ErrorCode.INVALID_RECORD, "at least one record batch", None),
                 (None, ErrorCode.INVALID_RECORD, "at least one record batch", None),
                 (batch(producer_id=7, producer_epoch=0, base_sequence=-1),
                  ErrorCode.INVALID_RECORD, "Invalid sequence number -1", None),
                 (txn, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None, None),
                 (txn, ErrorCode.INVALID_TXN_STATE, "not in an ongoing transaction", "t-id"),
                 (batch(timestamp_type=1), ErrorCode.INVALID_TIMESTAMP, "LogAppendTime", None)]
        for records, code, text, txn_id in cases:
            body = produce_body(topic, 0, records)
            body["transactional_id"] = txn_id
            p = partition_response(c.request(ApiKey.PRODUCE, 9, body))
            assert (p.error_code, p.base_offset) == (code, -1), records
            assert text is None or text in p.error_message
        assert latest_offset(c, topic) == 0
        p = partition_response(c.request(ApiKey.PRODUCE, 9, produce_body(
            topic, 0, batch(producer_id=7, producer_epoch=0, base_sequence=0))))
        assert (p.error_code, p.base_offset) == (0, 0)


def test_broker_compression_type_is_the_topic_default(start_broker, topic) -> None:
    """compression.type in server.properties is every topic's default (Kafka's
    synonym): a batch produced uncompressed is stored and served in lz4."""
    b = start_broker("compression.type=lz4")
    with RawClient(b.bootstrap) as c:
        metadata(c, topic)
        r = c.request(ApiKey.PRODUCE, 9, produce_body(topic, 0, batch(5)))
        assert (partition_response(r).error_code, partition_response(r).base_offset) == (0, 0)
        p = c.request(ApiKey.FETCH, 12, fetch_body(topic, 0)).responses[0].partitions[0]
        stored = bytes(p.records)
        assert stored[22] & 7 == 3  # lz4
        assert compression.decompress(3, stored[61:]) == batch(5)[61:]


def test_init_producer_id_without_transactional_id_is_always_a_new_id(broker) -> None:
    """As Kafka's TransactionCoordinator for a null transactional id: a new
    producer id at epoch 0 whatever id and epoch the client names (one it was
    never given included); an id without an epoch, or the reverse, is
    INVALID_REQUEST (KafkaApis)."""
    with RawClient(broker.bootstrap) as c:
        def init(pid: int, epoch: int):
            return c.request(ApiKey.INIT_PRODUCER_ID, 4, {
                "transactional_id": None, "transaction_timeout_ms": 60000,
                "producer_id": pid, "producer_epoch": epoch})
        first = init(-1, -1)
        assert (first.error_code, first.producer_epoch) == (0, 0)
        again = init(first.producer_id, 0)
        assert (again.error_code, again.producer_epoch) == (0, 0)
        assert again.producer_id != first.producer_id
        stranger = init(first.producer_id + 1000, 7)
        assert stranger.error_code == 0 and stranger.producer_id not in (
            first.producer_id, first.producer_id + 1000)
        for pid, epoch in ((-1, 5), (5, -1)):
            r = init(pid, epoch)
            assert (r.error_code, r.producer_id, r.producer_epoch) == (
                ErrorCode.INVALID_REQUEST, -1, -1)


def test_duplicate_names_in_create_topics_and_partitions(broker, topic) -> None:
    """As Kafka's ControllerApis: a topic named twice in one CreateTopics or
    CreatePartitions gets one INVALID_REQUEST and nothing is done to it; the
    other topics in the request are handled."""
    other = topic + "-other"
    with RawClient(broker.bootstrap) as c:
        def create(*names: str):
            return c.request(ApiKey.CREATE_TOPICS, 7, {"topics": [
                {"name": n, "num_partitions": 1, "replication_factor": 1, "assignments": [],
                 "configs": []} for n in names], "timeout_ms": 5000, "validate_only": False})
        r = create(topic, other, topic)
        assert [(t.name, t.error_code) for t in r.topics] == [
            (topic, ErrorCode.INVALID_REQUEST), (other, 0)]
        assert metadata(c, topic, allow=False).topics[0].error_code == \
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        r = c.request(ApiKey.CREATE_PARTITIONS, 3, {"topics": [
            {"name": other, "count": 3, "assignments": None}] * 2,
            "timeout_ms": 5000, "validate_only": False})
        assert [(t.name, t.error_code) for t in r.results] == [(other, ErrorCode.INVALID_REQUEST)]
        assert len(metadata(c, other).topics[0].partitions) == 1


def test_produce_checks_in_kafkas_order(start_broker, topic) -> None:
    """zstd before Produce v7 is UNSUPPORTED_COMPRESSION_TYPE (KIP-110); a batch
    over max.message.bytes is MESSAGE_TOO_LARGE even when it is over
    segment.bytes too (the producer splits on that one), and the limit holds
    for the batch as sent before compression.type re-encodes it; one only over
    segment.bytes is RECORD_LIST_TOO_LARGE; on a compacted topic a record
    without a key is INVALID_RECORD."""
    b = start_broker()
    compact, small = topic + "-compact", topic + "-small-segments"
    with RawClient(b.bootstrap) as c:
        r = c.request(ApiKey.CREATE_TOPICS, 7, {"topics": [
            {"name": n, "num_partitions": 1, "replication_factor": 1, "assignments": [],
             "configs": [{"name": k, "value": v} for k, v in cfg]}
            for n, cfg in ((topic, [("max.message.bytes", "1000"), ("segment.bytes", "900"),
                                    ("compression.type", "gzip")]),
                           (compact, [("cleanup.policy", "compact")]),
                           (small, [("segment.bytes", "2000")]))],
            "timeout_ms": 5000, "validate_only": False})
        assert [t.error_code for t in r.topics] == [0, 0, 0]
        zstd = batch(3, compression=4)
        for version, code in ((3, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE),
                              (6, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE), (7, 0)):
            p = partition_response(c.request(ApiKey.PRODUCE, version,
                                             produce_body(compact, 0, zstd)))
            assert p.error_code == code, version
        big = BatchBuilder()
        for i in range(30):
            big.append(1_700_000_000_000 + i, b"k", b"x" * 100)  # ~3.5 KB, gzips small
        p = partition_response(c.request(ApiKey.PRODUCE, 9, produce_body(topic, 0, big.build())))
        assert p.error_code == ErrorCode.MESSAGE_TOO_LARGE
        assert latest_offset(c, topic) == 0
        p = partition_response(c.request(ApiKey.PRODUCE, 9, produce_body(small, 0, big.build())))
        assert p.error_code == ErrorCode.RECORD_LIST_TOO_LARGE
        assert latest_offset(c, small) == 0
        keyless = BatchBuilder(compression=1)
        keyless.append(1_700_000_000_000, b"k", b"v")
        keyless.append(1_700_000_000_001, None, b"v")
        p = partition_response(c.request(ApiKey.PRODUCE, 9,
                                         produce_body(compact, 0, keyless.build())))
        assert p.error_code == ErrorCode.INVALID_RECORD
        assert "without key" in p.error_message
        assert latest_offset(c, compact) == 3


# -- the long poll, as Kafka's DelayedFetch decides it ---------------------------------
# Each fetch below asks to wait a minute; the client gives up after 10 s, so
# one that waited when Kafka answers at once fails with a socket timeout.

def _fetch_one(c: RawClient, topic: str, offset: int, *, min_bytes: int,
               partition_max_bytes: int = 1 << 20, max_bytes: int = 50 << 20,
               version: int = 12, wait_ms: int = 60_000):
    body = fetch_body(topic, offset, max_wait_ms=wait_ms, min_bytes=min_bytes)
    body["max_bytes"] = max_bytes
    body["topics"][0]["partitions"][0]["partition_max_bytes"] = partition_max_bytes
    return c.request(ApiKey.FETCH, version, body).responses[0].partitions[0]


def _fill(c: RawClient, topic: str, batches: int, values: int = 30, size: int = 100) -> None:
    for _ in range(batches):
        b = BatchBuilder()
        for i in range(values):
            b.append(1_700_000_000_000 + i, None, b"x" * size)
        assert partition_response(c.request(ApiKey.PRODUCE, 9, produce_body(
            topic, 0, b.build()))).error_code == 0


def test_fetch_on_an_older_segment_answers_at_once(start_broker, topic) -> None:
    """DelayedFetch "Case F": a read never crosses a segment, so a fetch from
    an older segment than the log end is answered with what it found, however
    far below min_bytes (a consumer catching up does not wait at every
    segment boundary)."""
    b = start_broker("log.segment.bytes=20000")
    with RawClient(b.bootstrap) as c:
        metadata(c, topic)
        _fill(c, topic, 20)  # ~3.2 KB a batch: several segments
        p = _fetch_one(c, topic, 0, min_bytes=10 << 20)
        assert p.error_code == 0 and 0 < len(p.records) <= 20000


def test_fetch_min_bytes_counts_available_bytes_not_whole_batches(broker, topic) -> None:
    """DelayedFetch counts min(available, partition max bytes), so min_bytes
    equal to partition_max_bytes is met by a backlog larger than it, although
    the answer (whole batches) is smaller."""
    with RawClient(broker.bootstrap) as c:
        metadata(c, topic)
        _fill(c, topic, 40)  # ~128 KB in ~3.2 KB batches
        p = _fetch_one(c, topic, 0, min_bytes=100_000, partition_max_bytes=100_000)
        assert p.error_code == 0 and 90_000 < len(p.records) < 100_000


def test_fetch_unknown_partition_does_not_cut_the_wait_short(broker, topic) -> None:
    """Kafka sets partitions unknown to its metadata aside before the read: a
    fetch naming one beside a live partition still waits for data there."""
    with RawClient(broker.bootstrap) as c, RawClient(broker.bootstrap) as producer:
        metadata(c, topic)
        body = fetch_body(topic, 0, max_wait_ms=60_000, min_bytes=1)
        body["topics"] = [{"topic": topic + "-missing", "partitions": [
            {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]},
            *body["topics"], {"topic": topic, "partitions": [
                {"partition": 7, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]
        c.send(ApiKey.FETCH, 12, body)
        time.sleep(0.5)  # the fetch is parked (an early answer fails below)
        _fill(producer, topic, 1, values=3)
        _, r = c.recv(ApiKey.FETCH, 12)
        codes = [(t.topic, p.partition_index, p.error_code, len(p.records or b""))
                 for t in r.responses for p in t.partitions]
        assert codes[0][2] == codes[2][2] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert codes[1][:3] == (topic, 0, 0) and codes[1][3] > 0


def test_fetch_names_a_partition_twice(broker, topic) -> None:
    """As Kafka's map of fetch partitions: one answer, for the last offset."""
    with RawClient(broker.bootstrap) as c:
        metadata(c, topic)
        _fill(c, topic, 2, values=10)
        body = fetch_body(topic, 0)
        body["topics"][0]["partitions"].append(
            {"partition": 0, "fetch_offset": 10, "partition_max_bytes": 1 << 20})
        parts = c.request(ApiKey.FETCH, 12, body).responses[0].partitions
        assert len(parts) == 1
        assert struct.unpack_from(">q", bytes(parts[0].records))[0] == 10


def test_fetch_of_a_zstd_topic_needs_version_10(start_broker, topic) -> None:
    """KafkaApis: a topic whose compression.type is zstd is
    UNSUPPORTED_COMPRESSION_TYPE to Fetch below v10 (KIP-110)."""
    b = start_broker("compression.type=zstd")
    with RawClient(b.bootstrap) as c:
        metadata(c, topic)
        _fill(c, topic, 1, values=3)
        for version, code in ((9, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE), (10, 0)):
            p = c.request(ApiKey.FETCH, version, fetch_body(topic, 0)).responses[0].partitions[0]
            assert p.error_code == code, version


def test_batch_max_timestamp_is_its_records_largest(broker, topic) -> None:
    """As Kafka's LogValidator: a batch whose header claims another
    maxTimestamp than its records' largest is stored with the records' one, so
    ListOffsets by max timestamp (-3), the time index and retention see it."""
    b = BatchBuilder(compression=1)
    for ts in (1_700_000_000_500, 1_700_000_009_000, 1_700_000_001_000):
        b.append(ts, b"k", b"v")
    buf = bytearray(b.build())
    struct.pack_into(">q", buf, 35, 1_700_000_000_000)  # a lie, under the CRC
    buf = _recompressed(bytes(buf[:61]), bytes(buf[61:]))
    with RawClient(broker.bootstrap) as c:
        metadata(c, topic)
        assert partition_response(c.request(ApiKey.PRODUCE, 9, produce_body(
            topic, 0, buf))).error_code == 0
        r = c.request(ApiKey.LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 0,
                                               "topics": [{"name": topic, "partitions": [
                                                   {"partition_index": 0, "timestamp": -3,
                                                    "current_leader_epoch": -1}]}]})
        p = r.topics[0].partitions[0]
        assert (p.error_code, p.timestamp) == (0, 1_700_000_009_000)
        stored = c.request(ApiKey.FETCH, 12, fetch_body(topic, 0)).responses[0].partitions[0]
        assert struct.unpack_from(">q", bytes(stored.records), 35)[0] == 1_700_000_009_000
