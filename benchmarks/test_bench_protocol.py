"""Protocol codec speed: pylog vs kafka-python on Produce and Fetch requests.

    pytest benchmarks/test_bench_protocol.py --benchmark-enable --benchmark-group-by=group

Groups pair the two implementations ("produce-decode", "fetch-v12-encode", ...);
each result's ``extra_info["requests_per_s"]`` is the throughput of one core.
The "produce-native-*" groups time the broker's C Produce codec
(``pylog._native.produce_codec``) against the generic codec, its reference, on
a typical produce exchange (v9, 1 topic x 4 partitions of 300 KiB); the
"fetch-native-v*" groups time the C Fetch codec (``pylog._native.fetch_codec``)
against the generic codec on a consumer's fetch (v11 and v12, 2 topics x 4
partitions, records sent from the segment files as FileRegions).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pylog._native import fetch_codec, produce_codec
from pylog.net.framing import FileRegion, frame_parts
from pylog.protocol import ApiKey, decode_request, decode_response, encode_request, encode_response
from pylog.protocol.headers import encode_response_header, response_header_version
from pylog.protocol.messages import body_encoder

kp_producer = pytest.importorskip("kafka.protocol.producer")
kp_consumer = pytest.importorskip("kafka.protocol.consumer")

RECORDS = bytes(range(256)) * 64  # 16 KiB per partition


def produce_body() -> dict[str, Any]:
    """Produce v9: 1 topic, 3 partitions, 16 KiB of records each."""
    return {"transactional_id": None, "acks": -1, "timeout_ms": 30000, "topic_data": [
        {"name": "bench-topic", "partition_data": [
            {"index": p, "records": RECORDS} for p in range(3)]}]}


def fetch_body() -> dict[str, Any]:
    """Fetch: 2 topics x 4 partitions."""
    return {"replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 52428800,
            "isolation_level": 1, "session_id": 0, "session_epoch": -1, "topics": [
                {"topic": f"bench-topic-{t}", "partitions": [
                    {"partition": p, "current_leader_epoch": 5, "fetch_offset": 123456789 + p,
                     "last_fetched_epoch": -1, "log_start_offset": -1,
                     "partition_max_bytes": 1048576} for p in range(4)]}
                for t in range(2)],
            "forgotten_topics_data": [], "rack_id": ""}


def _kafka_python(kp_cls: type, body: dict[str, Any], version: int) -> Any:
    """The same request as a kafka-python object."""
    def build(fields: Any, data_class: type, values: dict[str, Any], top: bool = False) -> Any:
        kwargs = {}
        for f in (fields.values() if isinstance(fields, dict) else fields):
            if f.name not in values or not f.for_version_q(version):
                continue
            value = values[f.name]
            if f.is_struct_array():
                value = [build(f.fields, f.data_class, v) for v in value]
            kwargs[f.name] = value
        return data_class(version=version, **kwargs) if top else data_class(**kwargs)

    request = build(kp_cls._struct._fields, kp_cls, body, top=True)
    request.with_header(correlation_id=1, client_id="bench")
    return request


CASES = {
    "produce": (ApiKey.PRODUCE, 9, produce_body, kp_producer.ProduceRequest),
    "fetch-v12": (ApiKey.FETCH, 12, fetch_body, kp_consumer.FetchRequest),
    "fetch-v4": (ApiKey.FETCH, 4, fetch_body, kp_consumer.FetchRequest),
}


def _run(benchmark: Any, group: str, fn: Callable[[], Any]) -> None:
    benchmark.group = group
    benchmark(fn)
    if benchmark.stats is not None:
        benchmark.extra_info["requests_per_s"] = round(1 / benchmark.stats.stats.mean)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("impl", ["pylog", "kafka-python"])
def test_decode(benchmark: Any, case: str, impl: str) -> None:
    api_key, version, make_body, kp_cls = CASES[case]
    frame = encode_request(api_key, version, make_body(), correlation_id=1, client_id="bench")
    if impl == "pylog":
        header, body = decode_request(frame)
        assert header.api_version == version
        _run(benchmark, f"{case}-decode", lambda: decode_request(frame))
    else:
        decoded = kp_cls.decode(frame, version=version, header=True)
        assert decoded.header.correlation_id == 1
        _run(benchmark, f"{case}-decode",
             lambda: kp_cls.decode(frame, version=version, header=True))


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("impl", ["pylog", "pylog-dict", "kafka-python"])
def test_encode(benchmark: Any, case: str, impl: str) -> None:
    api_key, version, make_body, kp_cls = CASES[case]
    expected = encode_request(api_key, version, make_body(), correlation_id=1, client_id="bench")
    if impl == "pylog":
        _, body = decode_request(expected)  # message objects, as a handler holds them
        assert encode_request(api_key, version, body, 1, "bench") == expected
        _run(benchmark, f"{case}-encode",
             lambda: encode_request(api_key, version, body, 1, "bench"))
    elif impl == "pylog-dict":
        values = make_body()  # plain dicts, converted on every encode
        _run(benchmark, f"{case}-encode",
             lambda: encode_request(api_key, version, values, 1, "bench"))
    else:
        request = _kafka_python(kp_cls, make_body(), version)
        assert bytes(request.encode(header=True)) == expected
        _run(benchmark, f"{case}-encode", lambda: request.encode(header=True))


# -- the native Produce codec against the generic one ----------------------------------

NATIVE_VERSION = 9
BIG_RECORDS = bytes(range(256)) * 1200  # 300 KiB per partition


def big_produce_body() -> dict[str, Any]:
    """Produce v9: 1 topic, 4 partitions, 300 KiB of records each."""
    return {"transactional_id": None, "acks": -1, "timeout_ms": 30000, "topic_data": [
        {"name": "bench-topic", "partition_data": [
            {"index": p, "records": BIG_RECORDS} for p in range(4)]}]}


def produce_response() -> list[tuple[str, list[tuple[int, int, int, int, int, str | None]]]]:
    """The answer to it, as the broker's handler builds it for encode_produce_response."""
    return [("bench-topic", [(p, 0, 123456789 + 1000 * p, -1, 0, None) for p in range(4)])]


def produce_response_dict() -> dict[str, Any]:
    """The same answer as plain dicts for the generic encoder."""
    return {"throttle_time_ms": 0, "responses": [
        {"name": name, "partition_responses": [
            {"index": p[0], "error_code": p[1], "base_offset": p[2], "log_append_time_ms": p[3],
             "log_start_offset": p[4], "error_message": p[5]} for p in parts]}
        for name, parts in produce_response()]}


@pytest.mark.parametrize("impl", ["pylog-native", "generic"])
def test_produce_native_decode(benchmark: Any, impl: str) -> None:
    # A bytearray, as the broker reads frames; decoded with allow_trailing, as it does.
    frame = bytearray(encode_request(ApiKey.PRODUCE, NATIVE_VERSION, big_produce_body(),
                                     correlation_id=1, client_id="bench"))
    if impl == "pylog-native":
        decode = produce_codec.decode_produce_request
        topics = decode(frame)[6]
        assert [bytes(r) == BIG_RECORDS for _, parts in topics for _, r in parts] == [True] * 4
        _run(benchmark, "produce-native-decode", lambda: decode(frame))
    else:
        _, body = decode_request(frame, allow_trailing=True)
        assert bytes(body.topic_data[0].partition_data[3].records) == BIG_RECORDS
        _run(benchmark, "produce-native-decode",
             lambda: decode_request(frame, allow_trailing=True))


@pytest.mark.parametrize("impl", ["pylog-native", "generic", "generic-dict"])
def test_produce_native_encode(benchmark: Any, impl: str) -> None:
    version = NATIVE_VERSION
    expected = encode_response(ApiKey.PRODUCE, version, 1, produce_response_dict())
    if impl == "pylog-native":
        encode = produce_codec.encode_produce_response
        responses = produce_response()
        assert encode(version, 1, responses) == expected
        _run(benchmark, "produce-native-encode", lambda: encode(version, 1, responses))
    elif impl == "generic":
        _, body = decode_response(ApiKey.PRODUCE, version, expected[4:])  # message objects
        assert encode_response(ApiKey.PRODUCE, version, 1, body) == expected
        _run(benchmark, "produce-native-encode",
             lambda: encode_response(ApiKey.PRODUCE, version, 1, body))
    else:
        values = produce_response_dict()  # plain dicts, converted on every encode
        _run(benchmark, "produce-native-encode",
             lambda: encode_response(ApiKey.PRODUCE, version, 1, values))


# -- the native Fetch codec against the generic one ------------------------------------

FETCH_NATIVE_VERSIONS = [11, 12]


def fetch_response() -> list[tuple[str, list[tuple]]]:
    """A consumer's fetch answered from the log, as the broker's handler builds it
    for encode_fetch_response: every partition's records a region of a segment
    file (a dummy fd: nothing is sent)."""
    return [(f"bench-topic-{t}", [
        (p, 0, 123456789 + p, 123456789 + p, 0, None, FileRegion(0, 4096 * p, 1048576))
        for p in range(4)]) for t in range(2)]


def fetch_response_dict(topics: list[tuple[str, list[tuple]]]) -> dict[str, Any]:
    """The same answer as plain dicts for the generic encoder (as the handler
    passed it before the native codec)."""
    return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [
        {"topic": name, "partitions": [
            {"partition_index": p[0], "error_code": p[1], "high_watermark": p[2],
             "last_stable_offset": p[3], "log_start_offset": p[4],
             "aborted_transactions": p[5], "preferred_read_replica": -1, "records": p[6]}
            for p in parts]}
        for name, parts in topics]}


def _generic_fetch_encode(version: int, body: dict[str, Any]) -> Any:
    """The generic path: body encoder, response header, frame_parts."""
    pieces: list = [encode_response_header(1, response_header_version(ApiKey.FETCH, version))]
    body_encoder(ApiKey.FETCH, version, "response")(body, pieces.append)
    framed = frame_parts(pieces)
    return framed[0] if len(framed) == 1 else framed


@pytest.mark.parametrize("version", FETCH_NATIVE_VERSIONS)
@pytest.mark.parametrize("impl", ["pylog-native", "generic"])
def test_fetch_native_decode(benchmark: Any, impl: str, version: int) -> None:
    # A bytearray, as the broker reads frames; decoded with allow_trailing, as it does.
    frame = bytearray(encode_request(ApiKey.FETCH, version, fetch_body(), correlation_id=1,
                                     client_id="bench"))
    if impl == "pylog-native":
        decode = fetch_codec.decode_fetch_request
        topics = decode(frame)[9]
        assert [len(parts) for _, parts in topics] == [4, 4]
        _run(benchmark, f"fetch-native-v{version}-decode", lambda: decode(frame))
    else:
        _, body = decode_request(frame, allow_trailing=True)
        assert [len(t.partitions) for t in body.topics] == [4, 4]
        _run(benchmark, f"fetch-native-v{version}-decode",
             lambda: decode_request(frame, allow_trailing=True))


@pytest.mark.parametrize("version", FETCH_NATIVE_VERSIONS)
@pytest.mark.parametrize("impl", ["pylog-native", "generic-dict"])
def test_fetch_native_encode(benchmark: Any, impl: str, version: int) -> None:
    topics = fetch_response()
    values = fetch_response_dict(topics)
    expected = _generic_fetch_encode(version, values)
    if impl == "pylog-native":
        encode = fetch_codec.encode_fetch_response
        got = encode(version, 1, 0, 0, topics)
        assert len(got) == len(expected) == (17 if version >= 12 else 16)
        assert all(a is b if type(b) is FileRegion else a == b
                   for a, b in zip(got, expected, strict=True))
        _run(benchmark, f"fetch-native-v{version}-encode",
             lambda: encode(version, 1, 0, 0, topics))
    else:
        _run(benchmark, f"fetch-native-v{version}-encode",
             lambda: _generic_fetch_encode(version, values))
