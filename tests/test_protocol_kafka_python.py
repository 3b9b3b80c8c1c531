"""Cross-check pylog's codec against kafka-python's independent implementation.

For every API and version both know: kafka-python's encoded requests (with their
headers) decode with ``decode_request`` to the values they were built from, and
pylog's encoded responses decode with kafka-python to the values pylog encoded.
Field values are compared by the Kafka field name both libraries start from.
"""

from __future__ import annotations

import inspect
import uuid
from typing import Any

import pytest
from protocol_samples import sample_body

from pylog.protocol import decode_request, encode_response, message_schema
from pylog.protocol.schema import MESSAGE_SCHEMAS

kafka_api = pytest.importorskip("kafka.protocol.api_message")
import kafka.protocol.admin as kp_admin  # noqa: E402
import kafka.protocol.consumer as kp_consumer  # noqa: E402
import kafka.protocol.metadata as kp_metadata  # noqa: E402
import kafka.protocol.producer as kp_producer  # noqa: E402
import kafka.protocol.sasl as kp_sasl  # noqa: E402


def _our_name(ours: Any, kafka_name: str) -> str | None:
    """pylog's attribute for a Kafka field name, None if pylog's schema lacks it."""
    for f in type(ours)._fields:
        if f.kafka_name == kafka_name:
            return f.name
    return None


def _kafka_python_classes() -> dict[tuple[int, str], type]:
    found = {}
    for module in (kp_producer, kp_consumer, kp_metadata, kp_admin, kp_sasl):
        for obj in vars(module).values():
            if (inspect.isclass(obj) and issubclass(obj, kafka_api.ApiMessage)
                    and obj is not kafka_api.ApiMessage and obj._class_version is None):
                found[(obj.API_KEY, obj.type)] = obj
    return found


KP_CLASSES = _kafka_python_classes()


def _shared_versions(kind: str) -> list[tuple[int, int]]:
    """(api key, version) both libraries support, with the same message name."""
    cases = []
    for (api_key, k), kp_cls in sorted(KP_CLASSES.items()):
        schema = MESSAGE_SCHEMAS.get((api_key, k))
        if k != kind or schema is None or schema.name != kp_cls.name:
            continue
        lo, hi = kp_cls.valid_versions
        for version in range(max(lo, schema.min_version), min(hi, schema.max_version) + 1):
            cases.append((api_key, version))
    return cases


REQUEST_CASES = _shared_versions("request")
RESPONSE_CASES = _shared_versions("response")


def _field_list(fields: Any) -> list[Any]:
    return list(fields.values()) if isinstance(fields, dict) else list(fields)


def _to_kafka_python(kp_fields: Any, data_class: type, ours: Any, version: int,
                     top: bool = False) -> Any:
    """kafka-python object with the values of pylog object ``ours``."""
    kwargs = {}
    for f in _field_list(kp_fields):
        if not f.for_version_q(version):
            continue
        name = _our_name(ours, f._name)
        if name is None:
            continue  # a field this schema copy does not have: kafka-python's default
        value = getattr(ours, name)
        if value is not None and f.is_struct():
            value = _to_kafka_python(f.fields, f.data_class, value, version)
        elif value is not None and f.is_struct_array():
            value = [_to_kafka_python(f.fields, f.data_class, v, version) for v in value]
        kwargs[f.name] = value
    return data_class(version=version, **kwargs) if top else data_class(**kwargs)


def _normal(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, uuid.UUID):
        return value.bytes
    return value


def _assert_same(kp_fields: Any, kp_obj: Any, ours: Any, version: int, path: str) -> None:
    for f in _field_list(kp_fields):
        if not f.for_version_q(version):
            continue
        name = _our_name(ours, f._name)
        if name is None:
            continue
        theirs, mine = getattr(kp_obj, f.name), getattr(ours, name)
        where = f"{path}.{name}"
        if f.is_struct() and mine is not None:
            assert theirs is not None, where
            _assert_same(f.fields, theirs, mine, version, where)
        elif f.is_struct_array() and mine is not None:
            assert theirs is not None and len(theirs) == len(mine), where
            for i, (t, m) in enumerate(zip(theirs, mine, strict=True)):
                _assert_same(f.fields, t, m, version, f"{where}[{i}]")
        elif isinstance(theirs, set):  # kafka-python turns bit fields into sets of bits
            assert theirs == {i for i in range(32) if (mine & 0xFFFFFFFF) >> i & 1}, where
        elif isinstance(mine, list):
            assert [_normal(x) for x in theirs] == [_normal(x) for x in mine], where
        else:
            assert _normal(theirs) == _normal(mine), where


def _kp_request(api_key: int, version: int, seed: int) -> tuple[Any, Any]:
    ours = sample_body(api_key, version, "request", seed)
    kp_cls = KP_CLASSES[(api_key, "request")]
    return ours, _to_kafka_python(kp_cls._struct._fields, kp_cls, ours, version, top=True)


def test_shared_apis_cover_the_common_ones() -> None:
    keys = {k for k, _v in REQUEST_CASES} & {k for k, _v in RESPONSE_CASES}
    for required in (0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 17, 18, 19, 20, 21, 22, 24, 26,
                     32, 33, 35, 36, 37, 60):
        assert required in keys, message_schema(required, "request").name


@pytest.mark.parametrize("api_key,version", REQUEST_CASES)
def test_kafka_python_requests_decode(api_key: int, version: int) -> None:
    for seed in range(2):
        ours, theirs = _kp_request(api_key, version, seed)
        theirs.with_header(correlation_id=1234 + seed, client_id="kp-client")
        frame = bytes(theirs.encode(header=True))
        header, body = decode_request(frame)
        assert (header.api_key, header.api_version) == (api_key, version)
        assert (header.correlation_id, header.client_id) == (1234 + seed, "kp-client")
        _assert_same(theirs._struct._fields, theirs, body, version, theirs.name)
        _assert_same(theirs._struct._fields, theirs, ours, version, theirs.name)


@pytest.mark.parametrize("api_key,version", RESPONSE_CASES)
def test_pylog_responses_decode_with_kafka_python(api_key: int, version: int) -> None:
    kp_cls = KP_CLASSES[(api_key, "response")]
    for seed in range(2):
        ours = sample_body(api_key, version, "response", seed)
        if api_key == 18:
            ours.error_code = 0  # kafka-python reads any ApiVersions error as v0
        frame = encode_response(api_key, version, 99 + seed, ours, framed=True)
        theirs = kp_cls.decode(frame, version=version, header=True, framed=True)
        assert theirs.header.correlation_id == 99 + seed
        _assert_same(kp_cls._struct._fields, theirs, ours, version, kp_cls.name)
