"""Produce: validate, stamp and append each partition's record set; answer per partition.

The request is decoded and the response encoded in C
(:mod:`pylog._native.produce_codec`, the generic codec's twin): on the
busiest API the broker touches no per-struct Python objects, only a tuple per
topic and per partition.  The records field is a memoryview into the request
frame, a writable bytearray, so the log stamps offsets in place and writes
those same bytes: no copy and no per-record Python.  acks=0 gets no response;
on a single node acks=1 and acks=all are both satisfied once the append
returns (the ISR is this node), except that acks=all fails with
NOT_ENOUGH_REPLICAS when the topic's min.insync.replicas asks for more
replicas than one.  In a cluster, acks=all waits for the in-sync replicas
(:func:`_replicated`), and a transactional batch whose transaction another
node coordinates is verified there first (:mod:`pylog.server.txn_verification`).
"""

from __future__ import annotations

import inspect
import struct
import time
from typing import TYPE_CHECKING, Any

from pylog._native.produce_codec import (
    MAX_VERSION,
    MIN_VERSION,
    decode_produce_request,
    encode_produce_response,
)
from pylog.errors import CorruptBatchError
from pylog.log import RecordBatchTooLargeError, RecordSetTooLargeError
from pylog.log.errors import LogClosedError
from pylog.net.connection import CloseConnection, Throttled
from pylog.protocol import ApiKey, ErrorCode, encode_response
from pylog.server.partition import isr_too_small
from pylog.server.producer_state import max_timestamp, producer_batch
from pylog.server.txn_verification import produce_error

if TYPE_CHECKING:
    from pylog.server.context import NodeServices
    from pylog.server.replica_manager import Waiting

API_KEY = ApiKey.PRODUCE
# v3 is the first with record batches (magic 2), the only format pylog stores.
VERSIONS = (MIN_VERSION, MAX_VERSION)
_BATCH_LENGTH = struct.Struct(">i")  # after the 8-byte base offset
_ATTRIBUTES = struct.Struct(">h")    # at byte 21 of the batch
_CONTROL_FLAG = 0x20
# Kafka's internal topics: only the broker itself writes them (ReplicaManager
# refuses client appends unless the client id is Kafka's own admin client).
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
# CorruptBatchError checks that Kafka answers INVALID_RECORD (its
# InvalidRecordException): what a correct CRC vouches for (LogValidator's
# validateBatch and record walk), and what ProduceRequest.validateRecords
# refuses before it (no whole batch, magic other than 2).
_RECORD_CHECKS = frozenset({"record_count", "control", "records", "decompress", "key",
                            "magic", "truncated"})
_TIMESTAMP_FLAG = 0x08  # LogAppendTime: the broker's to set
_TRANSACTIONAL_FLAG = 0x10
_CODEC_MASK = 0x07
_ZSTD = 4

# Produce v10 (KIP-951): NOT_LEADER_OR_FOLLOWER names the current leader.
FIRST_CURRENT_LEADER = 10
_NOT_LEADER = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
# A partition's answer, in the order encode_produce_response takes it:
# (index, error_code, base_offset, log_append_time_ms, log_start_offset, error_message)
PartitionResponse = tuple[int, int, int, int, int, "str | None"]


def _error(index: int, code: int, message: str | None = None) -> PartitionResponse:
    return (index, code, -1, -1, -1, message)


def _append(node: NodeServices, topic: str, index: int, records: Any,
            acks: int, version: int, transactional_id: str | None,
            waiting: list[Waiting]) -> PartitionResponse:
    if topic in INTERNAL_TOPICS:
        # What a client writes there is read back by the group coordinator at
        # start: a malformed record would stop the node from starting.
        return _error(index, ErrorCode.INVALID_TOPIC_EXCEPTION,
                      f"Cannot append to internal topic {topic}")
    part = node.replicas.leader_partition(topic, index)
    if type(part) is int:
        return _error(index, part, "This server does not host this topic-partition."
                      if part == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                      else "This server is not the leader for that topic-partition.")
    log = part.log
    failures = node.logs.failures
    if failures.offline:  # the node halts: see pylog.log.dir_failure
        return _error(index, ErrorCode.KAFKA_STORAGE_ERROR,
                      f"Log dir {failures.log_dir} is offline")
    if records is None or len(records) == 0:  # as Kafka's ProduceRequest.validateRecords
        return _error(index, ErrorCode.INVALID_RECORD, "Produce requests with version 3 "
                      "and above must have at least one record batch per partition")
    if len(records) >= 12 and 12 + _BATCH_LENGTH.unpack_from(records, 8)[0] < len(records):
        # As Kafka (LogValidator): one batch per partition from v3 on, which
        # is also what lets a retried batch be recognised by its sequences.
        return _error(index, ErrorCode.INVALID_RECORD, "Produce requests with version 3 "
                      "and above are only allowed to contain exactly one record batch")
    attributes = _ATTRIBUTES.unpack_from(records, 21)[0] if len(records) >= 23 else 0
    if attributes & _CONTROL_FLAG:
        # As Kafka (LogValidator.validateBatch): control batches are the
        # broker's (transaction markers); consumers cannot read past a bad one.
        return _error(index, ErrorCode.INVALID_RECORD,
                      "Clients are not allowed to write control records")
    if attributes & _TIMESTAMP_FLAG:  # as Kafka's LogValidator.validateTimestamp
        return _error(index, ErrorCode.INVALID_TIMESTAMP,
                      "Producer should not set timestamp type to LogAppendTime")
    if attributes & _CODEC_MASK == _ZSTD and version < 7:  # ProduceRequest.validateRecords
        return _error(index, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                      f"Produce requests with version {version} cannot carry zstd batches "
                      "(KIP-110: version 7 and above)")
    config = log.config
    if acks == -1 and len(part.isr) < config.min_insync_replicas:
        # Partition.appendRecordsToLeader: checked before the append.
        return _error(index, ErrorCode.NOT_ENOUGH_REPLICAS, isr_too_small(part))
    batch = producer_batch(records)
    producers = None
    if batch is not None and batch.first_seq < 0:  # as Kafka's LogValidator.validateBatch
        return _error(index, ErrorCode.INVALID_RECORD,
                      f"Invalid sequence number {batch.first_seq} in record batch "
                      f"with producerId {batch.producer_id}")
    transactional = bool(attributes & _TRANSACTIONAL_FLAG)
    if transactional:
        if batch is None:
            return _error(index, ErrorCode.INVALID_RECORD,
                          "Transactional record batch without a producer id")
        if transactional_id is None:
            # KafkaApis.handleProduceRequest: transactional records need a
            # transactional id the client may write as (no authorizer here).
            return _error(index, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        if node.verify_txn_partitions and node.txn_verifier is None:
            # Kafka 3.6's verification (KIP-890) on the single node: the
            # partition must be in the producer's open transaction, asked of
            # the coordinator here.  (A cluster node asks before the appends:
            # _verification.)
            code = node.txns.verify(transactional_id, batch.producer_id, batch.epoch,
                                      topic, index)
            if code:
                return _error(index, code, _not_in_txn(batch.producer_id, batch.epoch, topic,
                                                       index, transactional_id)
                              if code == ErrorCode.INVALID_TXN_STATE else None)
    if batch is not None:
        producers = node.replicas.producers_of(topic, index)
        verdict = producers.check(batch, transactional)
        if verdict is not None:
            if type(verdict) is tuple:  # a retry of a batch already written
                return (index, 0, verdict[0], verdict[1], log.log_start_offset, None)
            return _error(index, verdict)
    try:
        result = log.append(records)
    except CorruptBatchError as exc:
        # As Kafka: a batch that fails its CRC or size is CORRUPT_MESSAGE
        # (retriable: the bytes were damaged on the way); records that do not
        # parse, or do not decompress, under a correct CRC are INVALID_RECORD
        # (not retriable: the producer built them so).
        code = (ErrorCode.INVALID_RECORD if exc.check in _RECORD_CHECKS
                else ErrorCode.INVALID_TIMESTAMP if exc.check == "timestamp"
                else ErrorCode.CORRUPT_MESSAGE)
        return _error(index, code, str(exc))
    except RecordSetTooLargeError as exc:  # segment.bytes, checked after max.message.bytes
        return _error(index, ErrorCode.RECORD_LIST_TOO_LARGE, str(exc))
    except RecordBatchTooLargeError as exc:
        return _error(index, ErrorCode.MESSAGE_TOO_LARGE, str(exc))
    except LogClosedError as exc:  # deleted while the request was on its way
        return _error(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, str(exc))
    except ValueError as exc:
        return _error(index, ErrorCode.CORRUPT_MESSAGE, str(exc))
    except OSError as exc:
        # The disk refused (full, failing): nothing of the batch counts (the
        # file is cut back), and as Kafka the dir goes offline.
        message = f"Error while appending records to {topic}-{index} in dir {failures.log_dir}"
        failures.fail(message, exc)
        return _error(index, ErrorCode.KAFKA_STORAGE_ERROR, f"{message}: {exc}")
    if producers is not None:
        # The producer's last timestamp (for producer.id.expiration.ms): the
        # append time, or the header's maxTimestamp once validated (in place).
        append_time = result.log_append_time
        producers.record(batch, result.base_offset, append_time,
                         append_time if append_time >= 0 else max_timestamp(records),
                         transactional)
        if transactional:  # the last stable offset stays at the transaction's start
            log.first_unstable_offset = producers.first_unstable_offset()
    metrics = node.metrics
    if metrics is not None:  # per batch, never per record
        metrics.bytes_in += len(records)
        metrics.messages_in += result.last_offset - result.base_offset + 1
    node.replicas.notify_append(topic, index)
    if acks == -1 and not log.hw_follows_leo:
        # Replicated: answered once the high watermark passes the batch
        # (Kafka's DelayedProduce).
        waiting.append((part, result.last_offset + 1))
    return (index, 0, result.base_offset, result.log_append_time, log.log_start_offset, None)


def handle_frame(node: NodeServices, frame: bytearray) -> bytes | Throttled | None:
    """Answer a Produce request frame (v3-11): the framed response, or None for
    acks=0; wrapped in Throttled when the client is over a quota.  Malformed
    frames raise ProtocolError (the router closes the connection, as for any
    request that does not decode)."""
    started = time.perf_counter_ns() if node.quotas.request.enabled else 0
    request = decode_produce_request(frame)
    transactional_id, acks = request[3], request[4]
    if transactional_id is not None and node.txn_verifier is not None and acks in (0, 1, -1):
        refused, asked = _verification(node, transactional_id, request[6])
        if asked:
            return _verified_then_produced(node, request, len(frame), started, refused, asked)
        return _produce(node, request, len(frame), started, refused)
    return _produce(node, request, len(frame), started)


def _produce(node: NodeServices, request: tuple, size: int, started: int,
             refused: dict[tuple[str, int], PartitionResponse] | None = None
             ) -> bytes | Throttled | None | Any:
    """``size``: the request's bytes, what producer_byte_rate counts;
    ``refused``: partitions answered without an append (their transaction
    did not verify)."""
    quotas = node.quotas
    version, correlation_id, client_id, transactional_id, acks, timeout_ms, topics = request
    waiting: list[Waiting] = []
    if acks not in (0, 1, -1):
        responses = [(name, [_error(index, ErrorCode.INVALID_REQUIRED_ACKS)
                             for index, _ in parts]) for name, parts in topics]
    elif refused is None:
        responses = [(name, [_append(node, name, index, records, acks, version,
                                     transactional_id, waiting)
                             for index, records in parts]) for name, parts in topics]
    else:
        responses = [(name, [refused.get((name, index)) or
                             _append(node, name, index, records, acks, version,
                                     transactional_id, waiting)
                             for index, records in parts]) for name, parts in topics]
    if node.metrics is not None:
        node.metrics.produced(responses, topics)
    throttle = 0
    if quotas.produce.enabled:
        throttle = quotas.produce.record(client_id, size)
    if waiting:
        return _replicated(node, version, correlation_id, client_id, responses, waiting,
                           timeout_ms, started, throttle)
    if acks == 0:
        # No response to carry an error: Kafka closes the connection instead, so
        # the producer notices and refreshes its metadata.
        if any(p[1] for _, parts in responses for p in parts):
            raise CloseConnection("acks=0 produce failed")
        # Exempt from the request quota, as in Kafka; the byte rate still mutes.
        return Throttled(None, throttle) if throttle else None
    return _respond(node, version, correlation_id, client_id, responses, started, throttle)


# A transactional batch whose transaction a remote coordinator is asked
# about: (topic, index, producer id, epoch, the partition's producer state,
# its verification guard).
Asked = tuple[str, int, int, int, Any, object]


def _not_in_txn(pid: int, epoch: int, topic: str, index: int, transactional_id: str) -> str:
    return (f"Producer {pid} with epoch {epoch}: {topic}-{index} is not in an ongoing "
            f"transaction of transactional id {transactional_id!r}")


def _verification(node: NodeServices, transactional_id: str, topics: list
                  ) -> tuple[dict[tuple[str, int], PartitionResponse], list[Asked]]:
    """A cluster node's transaction verification of a transactional request:
    (the partitions refused now, those to ask a remote coordinator about).
    With the coordinator here, every transactional batch is checked with it
    at once; with one on another node, only a producer's first batch of a
    transaction in each partition is asked about (as Kafka's
    maybeStartTransactionVerification)."""
    verifier = node.txn_verifier
    assert verifier is not None
    local = verifier.coordinator(transactional_id) == node.node_id
    coordinator_error = node.txns.coordinator_error(transactional_id) if local else 0
    refused: dict[tuple[str, int], PartitionResponse] = {}
    asked: list[Asked] = []
    for name, parts in topics:
        for index, records in parts:
            if records is None or len(records) < 61 or not (
                    _ATTRIBUTES.unpack_from(records, 21)[0] & _TRANSACTIONAL_FLAG):
                continue
            part = node.replicas.leader_partition(name, index)
            batch = producer_batch(records)
            if type(part) is int or batch is None:
                continue  # _append answers it
            pid, epoch = batch.producer_id, batch.epoch
            if local:
                code = coordinator_error or node.txns.verify(transactional_id, pid, epoch,
                                                             name, index)
                if code == ErrorCode.INVALID_TXN_STATE:
                    refused[(name, index)] = _error(index, code, _not_in_txn(
                        pid, epoch, name, index, transactional_id))
                elif code:
                    refused[(name, index)] = _error(index, *produce_error(code))
                continue
            producers = node.replicas.producers_of(name, index)
            guard = producers.start_verification(pid)
            if guard is not None:
                asked.append((name, index, pid, epoch, producers, guard))
    return refused, asked


async def _verified_then_produced(node: NodeServices, request: tuple, size: int, started: int,
                                  refused: dict[tuple[str, int], PartitionResponse],
                                  asked: list[Asked]) -> bytes | Throttled | None:
    """Ask the coordinator (one request per producer and epoch: a request
    normally carries one), then append what it verified, as Kafka's
    ReplicaManager.appendRecords after its AddPartitionsToTxnManager."""
    verifier = node.txn_verifier
    assert verifier is not None
    transactional_id = request[3]
    by_producer: dict[tuple[int, int], list[Asked]] = {}
    for a in asked:
        by_producer.setdefault((a[2], a[3]), []).append(a)
    for (pid, epoch), group in by_producer.items():
        answers = await verifier.verify(transactional_id, pid, epoch,
                                        [(a[0], a[1]) for a in group])
        for name, index, _, _, producers, guard in group:
            code = answers[(name, index)]
            if code:
                refused[(name, index)] = _error(index, *produce_error(code))
            elif not producers.still_verified(pid, guard):
                # Its transaction ended (a marker came) while it was asked.
                refused[(name, index)] = _error(
                    index, ErrorCode.INVALID_TXN_STATE,
                    "The transaction ended while the partition was being verified")
    result = _produce(node, request, size, started, refused)
    if inspect.isawaitable(result):
        result = await result
    return result


def _respond(node: NodeServices, version: int, correlation_id: int, client_id: str | None,
             responses: list, started: int, throttle: int) -> bytes | Throttled:
    if started:
        throttle = max(throttle, node.quotas.record_request(client_id, started))
    if version >= FIRST_CURRENT_LEADER and any(
            r[1] == _NOT_LEADER for _, rows in responses for r in rows):
        response = _redirecting(node, version, correlation_id, responses, throttle)
    else:
        response = encode_produce_response(version, correlation_id, responses, throttle)
    return Throttled(response, throttle) if throttle else response


def _redirecting(node: NodeServices, version: int, correlation_id: int, responses: list,
                 throttle: int) -> bytes:
    """A v10+ answer with NOT_LEADER_OR_FOLLOWER (KIP-951): each such
    partition's current leader and epoch, and those leaders' endpoints, so
    the producer sends there without a Metadata round trip.  The rare case,
    through the generic encoder (the native one leaves tagged fields out)."""
    endpoints: dict[int, dict[str, Any]] = {}

    def row(topic: str, r: tuple) -> dict[str, Any]:
        out = {"index": r[0], "error_code": r[1], "base_offset": r[2],
               "log_append_time_ms": r[3], "log_start_offset": r[4], "record_errors": [],
               "error_message": r[5]}
        if r[1] == _NOT_LEADER:
            info = node.metadata.partition(topic, r[0])
            if info is not None and info.leader >= 0:
                out["current_leader"] = {"leader_id": info.leader,
                                         "leader_epoch": info.leader_epoch}
                broker = node.metadata.broker(info.leader)
                if broker is not None:
                    endpoints[broker.node_id] = {"node_id": broker.node_id,
                                                 "host": broker.host, "port": broker.port,
                                                 "rack": broker.rack}
        return out

    body = {"responses": [{"name": name, "partition_responses": [row(name, r) for r in rows]}
                          for name, rows in responses],
            "throttle_time_ms": throttle}
    body["node_endpoints"] = list(endpoints.values())
    return encode_response(ApiKey.PRODUCE, version, correlation_id, body)


async def _replicated(node: NodeServices, version: int, correlation_id: int,
                      client_id: str | None, responses: list, waiting: list[Waiting],
                      timeout_ms: int, started: int, throttle: int) -> bytes | Throttled:
    """acks=all on replicated partitions (Kafka's DelayedProduce): answered
    when every partition's high watermark passes its batch, or at
    ``timeout_ms``; those that did not make it get the error
    :meth:`ReplicaManager.replicated` gives them."""
    outcome = await node.replicas.replicated(waiting, timeout_ms)
    if outcome:
        responses = [(name, [_error(r[0], *outcome[(name, r[0])]) if (name, r[0]) in outcome
                             else r for r in rows]) for name, rows in responses]
    # (The request quota counts the loop's time, not the wait.)
    return _respond(node, version, correlation_id, client_id, responses,
                    time.perf_counter_ns() if started else 0, throttle)
