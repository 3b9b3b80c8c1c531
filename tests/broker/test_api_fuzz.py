"""Structured fuzzing of every API the broker serves: well-formed frames with odd values.

Kafka answers a request with a negative partition, an illegal topic name, a
null where one is allowed, a duplicate entry, an unknown topic id, an extreme
timeout or offset, an unknown tagged field ... with an error code in the
response, never by closing the connection.  The first tests pin down the
answers this fuzzing found wrong; the last is a seeded sweep over every API and
version the broker advertises, which checks that each answer decodes, carries
only Kafka error codes, that the broker logs no handler failure, and that
normal requests still work afterwards.
"""

from __future__ import annotations

import csv
import random
import re
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from broker_process import BrokerProcess
from kafka_wire import RawClient
from log_helpers import batch

from pylog.protocol import ApiKey, ErrorCode, message_schema, struct_classes
from pylog.protocol.structs import UNKNOWN_TAGS, Struct

ZERO = uuid.UUID(int=0)
INT32_MAX, INT32_MIN = 2**31 - 1, -2**31
INT64_MAX, INT64_MIN = 2**63 - 1, -2**63
ERROR_CODES = Path("/work/shared/kafka-protocol/error_codes.csv")


class _Broker:
    """A broker process whose output is read as it comes (the pipe never
    fills), so a test can tell whether a request made a handler fail."""

    def __init__(self, log_dir: Path) -> None:
        self.process = BrokerProcess(log_dir, "group.initial.rebalance.delay.ms=0").start()
        self.bootstrap = self.process.bootstrap
        self.lines: list[str] = list(self.process.output)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        try:
            for line in self.process.proc.stdout:
                self.lines.append(line)
        except (ValueError, OSError):  # closed by stop()
            pass

    def failures(self, since: int = 0) -> str:
        return "".join(line for line in self.lines[since:]
                       if "Traceback" in line or " ERROR " in line)

    def stop(self) -> None:
        self.process.stop()


@pytest.fixture(scope="module")
def fuzz_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Broker]:
    b = _Broker(tmp_path_factory.mktemp("fuzz-broker"))
    yield b
    b.stop()


def _create(c: RawClient, name: str, partitions: int = 3) -> None:
    r = c.request(ApiKey.CREATE_TOPICS, 4, {"topics": [
        {"name": name, "num_partitions": partitions, "replication_factor": 1,
         "assignments": [], "configs": []}], "timeout_ms": 5000, "validate_only": False})
    assert r.topics[0].error_code in (0, ErrorCode.TOPIC_ALREADY_EXISTS), r


def _partition_count(c: RawClient, name: str) -> int:
    r = c.request(ApiKey.METADATA, 1, {"topics": [{"name": name}]})
    assert r.topics[0].error_code == 0, r
    return len(r.topics[0].partitions)


def _join(c: RawClient, group: str) -> tuple[str, int]:
    body = {"group_id": group, "session_timeout_ms": 30000, "rebalance_timeout_ms": 1000,
            "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}]}
    r = c.request(ApiKey.JOIN_GROUP, 5, body)
    if r.error_code == ErrorCode.MEMBER_ID_REQUIRED:
        r = c.request(ApiKey.JOIN_GROUP, 5, dict(body, member_id=r.member_id))
    assert r.error_code == 0, r
    s = c.request(ApiKey.SYNC_GROUP, 3, {
        "group_id": group, "generation_id": r.generation_id, "member_id": r.member_id,
        "group_instance_id": None, "assignments": [{"member_id": r.member_id,
                                                     "assignment": b""}]})
    assert s.error_code == 0, s
    return r.member_id, r.generation_id


# -- the answers found wrong -------------------------------------------------


@pytest.mark.parametrize("version", [10, 11])
def test_metadata_v10_v11_refuse_topic_ids_and_null_names(fuzz_broker: _Broker,
                                                         version: int) -> None:
    """Topic ids in requests came with v12: Kafka throws InvalidRequestException
    for a null name or a topic id at v10-11, and the error response lists each
    requested topic with INVALID_REQUEST (a null name as "").  pylog looked the
    null name up by id and failed to encode the null name in its answer,
    closing the connection."""
    with RawClient(fuzz_broker.bootstrap) as c:
        _create(c, "fuzz-md")
        some_id = uuid.UUID(int=random.Random(7).getrandbits(128))
        for topics in ([{"name": None, "topic_id": ZERO}],
                       [{"name": None, "topic_id": some_id}],
                       [{"name": "fuzz-md", "topic_id": some_id}, {"name": "fuzz-md",
                                                                   "topic_id": ZERO}]):
            r = c.request(ApiKey.METADATA, version, {
                "topics": topics, "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False})
            assert [(t.name, t.topic_id, t.error_code, t.partitions) for t in r.topics] == [
                (t["name"] or "", t["topic_id"], ErrorCode.INVALID_REQUEST, [])
                for t in topics]
            assert r.brokers == [] and r.controller_id == -1
        # The connection is still good for a request by name.
        r = c.request(ApiKey.METADATA, version, {
            "topics": [{"name": "fuzz-md", "topic_id": ZERO}],
            "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
        assert r.topics[0].error_code == 0 and len(r.topics[0].partitions) == 3
    assert not fuzz_broker.failures()


@pytest.mark.parametrize("key_type", [2, 3, 127, -1, -128])
def test_find_coordinator_unknown_key_type_is_invalid_request(fuzz_broker: _Broker,
                                                              key_type: int) -> None:
    """CoordinatorType.forId throws InvalidRequestException for a key type
    other than 0 (group) and 1 (transaction); Kafka answers INVALID_REQUEST
    with no node.  pylog named itself coordinator of anything."""
    with RawClient(fuzz_broker.bootstrap) as c:
        for version in (1, 2, 3):
            r = c.request(ApiKey.FIND_COORDINATOR, version, {"key": "g", "key_type": key_type})
            assert (r.error_code, r.node_id, r.host, r.port) == (
                ErrorCode.INVALID_REQUEST, -1, "", -1), r
        r = c.request(ApiKey.FIND_COORDINATOR, 4, {"key_type": key_type,
                                                   "coordinator_keys": ["a", "b"]})
        assert [(k.key, k.error_code, k.node_id, k.port) for k in r.coordinators] == [
            ("a", ErrorCode.INVALID_REQUEST, -1, -1), ("b", ErrorCode.INVALID_REQUEST, -1, -1)]
        # Groups and transactional ids still find this node.
        for kt in (0, 1):
            r = c.request(ApiKey.FIND_COORDINATOR, 3, {"key": "g", "key_type": kt})
            assert r.error_code == 0 and r.node_id == 0, r


def test_create_partitions_to_int32_max_is_refused(fuzz_broker: _Broker) -> None:
    """CreatePartitions to 2**31-1 partitions: pylog saved that count first,
    then made logs until the process ran out of file descriptors (the handler
    failed, the connection closed, and the saved count would be made again at
    the next start).  Kafka's controller bounds what one request may create;
    pylog now refuses more than CreateTopics' 10,000 partitions per request
    with POLICY_VIOLATION, and the topic keeps its partitions."""
    with RawClient(fuzz_broker.bootstrap, timeout=30) as c:
        _create(c, "fuzz-grow")
        for count, validate_only in ((INT32_MAX, True), (INT32_MAX, False), (10_004, False)):
            r = c.request(ApiKey.CREATE_PARTITIONS, 3, {
                "topics": [{"name": "fuzz-grow", "count": count, "assignments": None}],
                "timeout_ms": INT32_MAX, "validate_only": validate_only})
            assert [(x.name, x.error_code) for x in r.results] == [
                ("fuzz-grow", ErrorCode.POLICY_VIOLATION)], r
        assert _partition_count(c, "fuzz-grow") == 3
        r = c.request(ApiKey.CREATE_PARTITIONS, 3, {
            "topics": [{"name": "fuzz-grow", "count": 5, "assignments": None}],
            "timeout_ms": 1000, "validate_only": False})
        assert r.results[0].error_code == 0, r
        assert _partition_count(c, "fuzz-grow") == 5
    assert not fuzz_broker.failures()


def test_offset_commit_unknown_partitions_answered_before_the_member(
        fuzz_broker: _Broker) -> None:
    """KafkaApis answers the partitions that do not exist with
    UNKNOWN_TOPIC_OR_PARTITION before the coordinator validates the member or
    generation; pylog answered UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION for them."""
    with RawClient(fuzz_broker.bootstrap) as c:
        _create(c, "fuzz-oc")
        member, generation = _join(c, "fuzz-oc-group")

        def commit(group: str, gen: int, member_id: str,
                   parts: list[tuple[str, int]]) -> list[tuple[str, int, int]]:
            topics: dict[str, list[dict[str, Any]]] = {}
            for name, p in parts:
                topics.setdefault(name, []).append({"partition_index": p,
                                                    "committed_offset": 5})
            r = c.request(ApiKey.OFFSET_COMMIT, 7, {
                "group_id": group, "generation_id_or_member_epoch": gen,
                "member_id": member_id, "group_instance_id": None,
                "topics": [{"name": n, "partitions": ps} for n, ps in topics.items()]})
            return [(t.name, p.partition_index, p.error_code)
                    for t in r.topics for p in t.partitions]

        unknown = [("fuzz-oc", 99), ("fuzz-oc", -1), ("no-such-topic", 0), ("", 0)]
        u = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        # A member the group does not know: the real partition gets that error.
        assert commit("fuzz-oc-group", generation, "stranger",
                      [("fuzz-oc", 0), *unknown]) == [
            ("fuzz-oc", 0, ErrorCode.UNKNOWN_MEMBER_ID), ("fuzz-oc", 99, u),
            ("fuzz-oc", -1, u), ("no-such-topic", 0, u), ("", 0, u)]
        # A stale generation, and a group that does not exist with a generation.
        assert commit("fuzz-oc-group", generation + 7, member, unknown) == [
            (n, p, u) for n, p in unknown]
        assert commit("fuzz-oc-nobody", 3, "m", unknown) == [(n, p, u) for n, p in unknown]
        # The member's own commit still works.
        assert commit("fuzz-oc-group", generation, member, [("fuzz-oc", 1)]) == [
            ("fuzz-oc", 1, 0)]
    assert not fuzz_broker.failures()


def test_describe_log_dirs_duplicate_partition_described_once(fuzz_broker: _Broker) -> None:
    """Kafka collects the requested partitions into a set: a partition named
    twice is described once (pylog listed it twice); unknown ones are left out."""
    with RawClient(fuzz_broker.bootstrap) as c:
        _create(c, "fuzz-dld")
        for version in (0, 4):
            r = c.request(ApiKey.DESCRIBE_LOG_DIRS, version, {"topics": [
                {"topic": "fuzz-dld", "partitions": [1, 1, -1, 0, INT32_MAX, 1]},
                {"topic": "fuzz-dld", "partitions": [0]},
                {"topic": "no-such-topic", "partitions": [0]}]})
            assert r.results[0].error_code == 0
            assert [(t.name, [p.partition_index for p in t.partitions])
                    for t in r.results[0].topics] == [("fuzz-dld", [1, 0])]


# -- the seeded sweep ---------------------------------------------------------

ODD_STRINGS = ["", "a" * 249, "a" * 250, "bad name!", ".", "..", "é✓中文", "__consumer_offsets",
               "x" * 300, "a\x00b", "fuzz", "fuzz.", "fuzz_", "no-such-topic", "-", "g"]
INT_VALUES = {
    "int8": [-1, 0, 1, 2, 3, 4, 5, 6, 127, -128],
    "int16": [-1, 0, 1, 32767, -32768],
    "int32": [-1, -2, 0, 1, 3, 1000, INT32_MAX, INT32_MIN],
    "int64": [-1, -2, -3, 0, 1, 10**15, INT64_MAX, INT64_MIN],
    "uint16": [0, 1, 65535], "uint32": [0, 1, 2**32 - 1],
}
SEEDS_PER_VERSION = 12
_ACL_ENUMS = ("resource_type", "resource_type_filter", "resource_pattern_type",
              "pattern_type_filter", "operation", "permission_type")


class _Gen:
    """Request bodies from the schemas: each value is a plausible one (the
    topic "fuzz", partition 0-2, the group "g") or, with ``oddness``, an odd
    one; arrays are empty, single or repeat their first element; nullable
    fields are sometimes null; flexible versions sometimes carry unknown tags."""

    def __init__(self, rng: random.Random, topic_ids: list[uuid.UUID], oddness: float,
                 flexible: bool) -> None:
        self.rng, self.topic_ids, self.oddness, self.flexible = (
            rng, topic_ids, oddness, flexible)

    def scalar(self, name: str, ftype: str, normal: bool) -> Any:
        rng, n = self.rng, name.lower()
        if ftype == "string":
            if not normal:
                return rng.choice(ODD_STRINGS)
            if "topic" in n or n in ("name", "resource_name"):
                return "fuzz"
            return "g" if "group" in n else ("" if "member" in n else "x")
        if ftype in INT_VALUES:
            if normal and ftype == "int32":
                if "partition" in n and "count" not in n:
                    return rng.choice([0, 1, 2])
                if "timeout" in n or "wait" in n:
                    return 100
            if normal and ftype == "int8" and "resource" in n:
                return rng.choice([2, 4])
            value = rng.choice(INT_VALUES[ftype] if not normal else [0, 1, -1])
            return min(value, 500) if "wait" in n else value  # no long fetch waits
        if ftype == "bool":
            return rng.random() < 0.5
        if ftype == "float64":
            return rng.choice([0.0, -1.0, 1e308])
        if ftype == "uuid":
            return rng.choice([ZERO, uuid.UUID(int=rng.getrandbits(128)), *self.topic_ids])
        if ftype in ("bytes", "records"):
            return rng.choice([b"", b"\x00\x01\x02", bytes(rng.getrandbits(8) for _ in range(40))])
        raise AssertionError(ftype)

    def value(self, field: Any, version: int, classes: dict[str, type]) -> Any:
        normal = self.rng.random() > self.oddness
        if field.nullable(version) and self.rng.random() < (0.05 if normal else 0.35):
            return None
        if field.is_array:
            elem = field._replace(type=field.element_type, nullable_versions=None)
            items = [self.value(elem, version, classes)
                     for _ in range(self.rng.choice([1, 1, 2] if normal else [0, 1, 3]))]
            if not normal and items and self.rng.random() < 0.5:
                items.append(items[0])
            return items
        if field.is_struct:
            return self.struct(field.fields, field.element_type, version, classes)
        return self.scalar(field.name, field.type, normal)

    def struct(self, fields: Any, name: str, version: int, classes: dict[str, type]) -> Any:
        obj = classes[name](**{f.name: self.value(f, version, classes)
                               for f in fields if f.present(version)})
        if self.flexible and self.rng.random() < 0.15:
            setattr(obj, UNKNOWN_TAGS, {self.rng.choice([77, 9999]): b"junk"})
        return obj


def _body(api_key: int, version: int, seed: int, topic_ids: list[uuid.UUID]) -> Any:
    schema = message_schema(api_key, "request")
    gen = _Gen(random.Random(f"fuzz-{api_key}-{version}-{seed}"), topic_ids,
               (0.1, 0.3, 0.6)[seed % 3], schema.is_flexible(version))
    body = gen.struct(schema.fields, schema.name, version, struct_classes(api_key, "request"))
    if api_key == ApiKey.PRODUCE and body.acks == 0:
        body.acks = 1  # acks=0 reads no answer: an error closes the connection, as in Kafka
    if api_key == ApiKey.JOIN_GROUP:
        body.rebalance_timeout_ms = min(body.rebalance_timeout_ms, 1000)  # no long parks
    if api_key in (ApiKey.DESCRIBE_ACLS, ApiKey.CREATE_ACLS, ApiKey.DELETE_ACLS):
        # An UNKNOWN (0) ACL type, operation or permission fails Kafka's parsing
        # of the request, which closes the connection, as in Kafka
        # (test_admin_cluster_apis.py): the sweep sends the ones answered.
        for entry in [body, *getattr(body, "creations", ()), *getattr(body, "filters", ())]:
            for name in _ACL_ENUMS:
                if getattr(entry, name, None) == 0:
                    setattr(entry, name, 1)
    return body


def _error_codes(value: Any) -> Iterator[int]:
    """Every error code in a decoded response (``error_code`` fields, at any depth)."""
    if isinstance(value, list):
        for v in value:
            yield from _error_codes(v)
    elif isinstance(value, Struct):
        for name in value._field_names:
            v = getattr(value, name)
            if name == "error_code" or name.endswith("_error_code"):
                yield v
            else:
                yield from _error_codes(v)


def _kafka_codes() -> set[int]:
    if ERROR_CODES.exists():
        with ERROR_CODES.open() as f:
            return {int(row["code"]) for row in csv.DictReader(f)}
    return {int(c) for c in ErrorCode}


def _normal_requests_work(bootstrap: str, round_: int) -> None:
    """Produce, fetch, list offsets, a group's join/sync/commit/fetch/leave."""
    with RawClient(bootstrap, timeout=30) as c:
        _create(c, "fuzz")
        r = c.request(ApiKey.PRODUCE, 9, {
            "transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [
                {"name": "fuzz", "partition_data": [
                    {"index": 0, "records": bytes(batch(1_700_000_000_000))}]}]})
        assert r.responses[0].partition_responses[0].error_code == 0, r
        start = c.request(ApiKey.LIST_OFFSETS, 7, {
            "replica_id": -1, "isolation_level": 0, "topics": [{"name": "fuzz", "partitions": [
                {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -2}]}]})
        offset = start.topics[0].partitions[0].offset
        r = c.request(ApiKey.FETCH, 12, {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1, "topics": [
                {"topic": "fuzz", "partitions": [
                    {"partition": 0, "current_leader_epoch": -1, "fetch_offset": offset,
                     "last_fetched_epoch": -1, "log_start_offset": -1,
                     "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""})
        assert r.error_code == 0 and r.responses[0].partitions[0].error_code == 0, r
        group = f"fuzz-sane-{round_}"
        member, generation = _join(c, group)
        r = c.request(ApiKey.OFFSET_COMMIT, 7, {
            "group_id": group, "generation_id_or_member_epoch": generation,
            "member_id": member, "group_instance_id": None, "topics": [
                {"name": "fuzz", "partitions": [{"partition_index": 1, "committed_offset": 7,
                                                 "committed_metadata": "m"}]}]})
        assert r.topics[0].partitions[0].error_code == 0, r
        r = c.request(ApiKey.OFFSET_FETCH, 7, {"group_id": group, "topics": [
            {"name": "fuzz", "partition_indexes": [1]}], "require_stable": False})
        assert r.topics[0].partitions[0].committed_offset == 7, r
        r = c.request(ApiKey.LEAVE_GROUP, 4, {"group_id": group, "members": [
            {"member_id": member, "group_instance_id": None}]})
        assert r.error_code == 0, r


def test_seeded_sweep_of_every_api_and_version(fuzz_broker: _Broker) -> None:
    """Every API and version from ApiVersions, a few seeded bodies each: every
    answer decodes on the same connection, every error code is Kafka's, the
    broker logs no handler failure, and normal requests work after each API."""
    known = _kafka_codes()
    with RawClient(fuzz_broker.bootstrap) as c:
        apis = c.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "fuzz",
                                                  "client_software_version": "1"}).api_keys
    assert len(apis) > 20
    problems: list[str] = []
    answered = 0
    for round_, api in enumerate(apis):
        with RawClient(fuzz_broker.bootstrap, timeout=20) as c:
            _create(c, "fuzz")
            topic_ids = [t.topic_id for t in c.request(ApiKey.METADATA, 12, {
                "topics": None, "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False}).topics]
        for version in range(api.min_version, api.max_version + 1):
            c = RawClient(fuzz_broker.bootstrap, timeout=20)
            for seed in range(SEEDS_PER_VERSION):
                body = _body(api.api_key, version, seed, topic_ids)
                mark = len(fuzz_broker.lines)
                where = f"api {api.api_key} v{version} seed {seed}: {body!r:.300}"
                try:
                    response = c.request(api.api_key, version, body)
                except (ConnectionError, TimeoutError, OSError) as exc:
                    problems.append(f"{where}: {exc!r}")
                    c.close()
                    c = RawClient(fuzz_broker.bootstrap, timeout=20)
                    continue
                answered += 1
                unknown = {e for e in _error_codes(response) if e not in known}
                if unknown:
                    problems.append(f"{where}: error codes {unknown} are not Kafka's")
                failed = fuzz_broker.failures(mark)
                if failed:
                    problems.append(f"{where}: broker logged {failed[:500]}")
            c.close()
        try:
            _normal_requests_work(fuzz_broker.bootstrap, round_)
        except (AssertionError, ConnectionError, TimeoutError) as exc:
            problems.append(f"after api {api.api_key}: normal requests fail: {exc!r:.500}")
    assert fuzz_broker.process.proc.poll() is None, "the broker died"
    assert not problems, "\n".join(problems)
    assert answered == SEEDS_PER_VERSION * sum(a.max_version - a.min_version + 1 for a in apis)
    assert not re.search(r"Traceback", "".join(fuzz_broker.lines))
