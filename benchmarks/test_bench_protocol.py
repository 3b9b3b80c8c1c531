"""Protocol codec speed: pylog vs kafka-python on Produce and Fetch requests.

    pytest benchmarks/test_bench_protocol.py --benchmark-enable --benchmark-group-by=group

Groups pair the two implementations ("produce-decode", "fetch-v12-encode", ...);
each result's ``extra_info["requests_per_s"]`` is the throughput of one core.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pylog.protocol import ApiKey, decode_request, encode_request

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
