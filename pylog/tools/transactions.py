"""``pylog transactions``: Kafka's ``kafka-transactions.sh`` (TransactionsCommand, KIP-664).

Analyses the transactional state of producers, and recovers from hanging
transactions (a partition left unstable, holding back read_committed
consumers and the log cleaner, with no coordinator left to end it)::

    pylog transactions --bootstrap-server HOST:PORT list
    pylog transactions --bootstrap-server HOST:PORT describe --transactional-id ID
    pylog transactions --bootstrap-server HOST:PORT describe-producers --topic T --partition P
    pylog transactions --bootstrap-server HOST:PORT find-hanging --broker-id 0
    pylog transactions --bootstrap-server HOST:PORT abort --topic T --partition P \\
        --start-offset OFFSET

Kafka's tables (tab-separated, padded columns) and error lines, the error
named by its Java exception class.  confluent-kafka has none of these admin
calls, so the requests go over pylog's own codec (pylog.tools.wire) to the
bootstrap node, which is every partition's leader and every transactional
id's coordinator on a single node.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterable, Sequence
from typing import Any

from pylog import __version__
from pylog.protocol import ApiKey
from pylog.tools.common import (
    ToolError,
    add_bootstrap,
    exception_name,
    parse_bootstrap,
    run_tool,
    wire_config,
    wire_timeout,
)
from pylog.tools.wire import WireClient

MAX_BATCH_SIZE = 500  # partitions per DescribeProducers, topics per Metadata (Kafka's)
DEBUG_HINT = ". Enable debug logging for additional detail."
TIMEOUT_S = 10.0


def _fail(message: str, code: int | None = None, detail: str | None = None) -> ToolError:
    """Kafka's printErrorAndExit: the message, then the cause's (the broker's
    message, else the error's exception class)."""
    cause = detail or (exception_name(code) if code else None)
    return ToolError(message if cause is None else f"{message}: {cause}{DEBUG_HINT}")


def print_table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> None:
    """Kafka's prettyPrintTable: each column padded to its widest value, a tab after each."""
    rows = [list(map(str, r)) for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    for row in [list(headers), *rows]:
        print("".join(v.ljust(w) + "\t" for v, w in zip(row, widths, strict=True)))


def _batches(items: list, size: int = MAX_BATCH_SIZE) -> Iterable[list]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


def _producers(client: WireClient, partitions: list[tuple[str, int]]
               ) -> dict[tuple[str, int], Any]:
    """DescribeProducers: (topic, partition) -> its answer (error_code, active_producers)."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    resp = client.request(ApiKey.DESCRIBE_PRODUCERS, {"topics": [
        {"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]})
    return {(t.name, p.partition_index): p for t in resp.topics for p in t.partitions}


def _describe_producers(client: WireClient, topic: str, partition: int, what: str) -> Any:
    found = _producers(client, [(topic, partition)])[(topic, partition)]
    if found.error_code:
        raise _fail(what, found.error_code, found.error_message)
    return found


def _none(value: int) -> str:
    return "None" if value < 0 else str(value)


# -- the commands ------------------------------------------------------------

def _list(client: WireClient, node: int, args: argparse.Namespace) -> None:
    resp = client.request(ApiKey.LIST_TRANSACTIONS, {"state_filters": [],
                                                     "producer_id_filters": []})
    if resp.error_code:
        raise _fail("Failed to list transactions", resp.error_code)
    print_table(("TransactionalId", "Coordinator", "ProducerId", "TransactionState"),
                [(t.transactional_id, node, t.producer_id, t.transaction_state)
                 for t in resp.transaction_states])


def _describe(client: WireClient, node: int, args: argparse.Namespace) -> None:
    txn_id = args.transactional_id
    resp = client.request(ApiKey.DESCRIBE_TRANSACTIONS, {"transactional_ids": [txn_id]})
    (state,) = resp.transaction_states
    if state.error_code:
        raise _fail(f"Failed to describe transaction state of transactional-id `{txn_id}`",
                    state.error_code)
    start = state.transaction_start_time_ms
    partitions = sorted(f"{t.topic}-{p}" for t in state.topics for p in t.partitions)
    print_table(("CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch",
                 "TransactionState", "TransactionTimeoutMs", "CurrentTransactionStartTimeMs",
                 "TransactionDurationMs", "TopicPartitions"),
                [(node, txn_id, state.producer_id, state.producer_epoch,
                  state.transaction_state, state.transaction_timeout_ms, _none(start),
                  _none(_now_ms() - start if start >= 0 else -1), ",".join(partitions))])


def _describe_producers_cmd(client: WireClient, node: int, args: argparse.Namespace) -> None:
    if args.broker_id is not None and args.broker_id != node:
        raise _fail(f"Failed to describe producers for partition {args.topic}-{args.partition} "
                    f"on broker {args.broker_id}",
                    detail=f"no broker {args.broker_id} in the cluster (its node is {node})")
    found = _describe_producers(
        client, args.topic, args.partition,
        f"Failed to describe producers for partition {args.topic}-{args.partition} on "
        + ("leader" if args.broker_id is None else f"broker {args.broker_id}"))
    print_table(("ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
                 "LastTimestamp", "CurrentTransactionStartOffset"),
                [(p.producer_id, p.producer_epoch, p.coordinator_epoch, p.last_sequence,
                  p.last_timestamp, _none(p.current_txn_start_offset))
                 for p in found.active_producers])


def _abort(client: WireClient, node: int, args: argparse.Namespace) -> None:
    tp = f"{args.topic}-{args.partition}"
    if args.start_offset is None and args.producer_id is None:
        raise _fail("The transaction to abort must be identified either with --start-offset "
                    "(for brokers on 3.0 or above) or with --producer-id, --producer-epoch, "
                    "and --coordinator-epoch (for older brokers)")
    if args.start_offset is None:
        if args.producer_epoch is None:
            raise _fail("Missing required argument --producer-epoch")
        if args.coordinator_epoch is None:
            raise _fail("Missing required argument --coordinator-epoch")
        # A transaction that hung before its producer's first marker shows
        # coordinator epoch -1: 0 is at most any real one (as Kafka).
        spec = (args.producer_id, args.producer_epoch, max(args.coordinator_epoch, 0))
    else:
        found = _describe_producers(client, args.topic, args.partition,
                                    f"Failed to validate producer state for partition {tp}")
        match = [p for p in found.active_producers
                 if p.current_txn_start_offset == args.start_offset]
        if not match:
            raise _fail(f"Could not find any open transactions starting at offset "
                        f"{args.start_offset} on partition {tp}")
        p = match[0]
        spec = (p.producer_id, p.producer_epoch, max(p.coordinator_epoch, 0))
    resp = client.request(ApiKey.WRITE_TXN_MARKERS, {"markers": [
        {"producer_id": spec[0], "producer_epoch": spec[1], "transaction_result": False,
         "coordinator_epoch": spec[2],
         "topics": [{"name": args.topic, "partition_indexes": [args.partition]}]}]})
    code = resp.markers[0].topics[0].partitions[0].error_code
    if code:
        raise _fail(f"Failed to abort transaction AbortTransactionSpec(topicPartition={tp}, "
                    f"producerId={spec[0]}, producerEpoch={spec[1]}, "
                    f"coordinatorEpoch={spec[2]})", code)


def _find_hanging(client: WireClient, node: int, args: argparse.Namespace) -> None:
    if args.topic is None and args.broker_id is None:
        raise _fail("The `find-hanging` command requires either --topic or --broker-id to "
                    "limit the scope of the search")
    if args.partition is not None and args.topic is None:
        raise _fail("The --partition argument requires --topic to be provided")
    max_timeout_ms = args.max_transaction_timeout * 60_000
    partitions = _partitions_to_search(client, args)
    candidates: list[tuple[tuple[str, int], Any]] = []
    now = _now_ms()
    for batch in _batches(partitions):
        for tp, found in _producers(client, batch).items():
            if found.error_code:
                raise _fail(f"Failed to describe producers for {len(batch)} partitions on "
                            f"broker {_optional(args.broker_id)}", found.error_code)
            candidates += [(tp, p) for p in found.active_producers
                           if p.current_txn_start_offset >= 0
                           and now - p.last_timestamp > max_timeout_ms]
    hanging = []
    if candidates:
        pids = sorted({p.producer_id for _, p in candidates})
        listed = client.request(ApiKey.LIST_TRANSACTIONS, {"state_filters": [],
                                                           "producer_id_filters": pids})
        if listed.error_code:
            raise _fail(f"Failed to list transactions for {len(pids)} producers",
                        listed.error_code)
        ids = {t.producer_id: t.transactional_id for t in listed.transaction_states
               if t.producer_id in pids}
        described = {}
        if ids:
            resp = client.request(ApiKey.DESCRIBE_TRANSACTIONS,
                                  {"transactional_ids": sorted(set(ids.values()))})
            described = {s.transactional_id: s for s in resp.transaction_states}
        for tp, p in candidates:
            state = described.get(ids.get(p.producer_id, ""))
            # Still in the coordinator's transaction (Ongoing, or a Prepare
            # state with markers to write): the coordinator will end it.
            if state is None or state.error_code or tp not in {
                    (t.topic, q) for t in state.topics for q in t.partitions}:
                hanging.append((tp, p))
    print_table(("Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch",
                 "StartOffset", "LastTimestamp", "Duration(min)"),
                [(t, part, p.producer_id, p.producer_epoch, p.coordinator_epoch,
                  p.current_txn_start_offset, p.last_timestamp,
                  (now - p.last_timestamp) // 60_000) for (t, part), p in hanging])


def _optional(value: object) -> str:
    return f"Optional[{value}]" if value is not None else "Optional.empty"


def _partitions_to_search(client: WireClient, args: argparse.Namespace
                          ) -> list[tuple[str, int]]:
    if args.topic is not None and args.partition is not None:
        return [(args.topic, args.partition)]
    topics = [args.topic] if args.topic is not None else None
    out = []
    for batch in _batches(topics) if topics is not None else [None]:
        meta = client.request(ApiKey.METADATA, {
            "topics": None if batch is None else [{"name": t, "topic_id": None} for t in batch],
            "allow_auto_topic_creation": False})
        for t in meta.topics:
            if t.error_code:
                raise _fail(f"Failed to describe {len(meta.topics)} topics", t.error_code)
            out += [(t.name, p.partition_index) for p in t.partitions
                    if args.broker_id is None or args.broker_id in p.replica_nodes]
    return sorted(out)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


COMMANDS = {"list": _list, "describe": _describe, "describe-producers": _describe_producers_cmd,
            "abort": _abort, "find-hanging": _find_hanging}


def run(args: argparse.Namespace) -> int:
    timeout = wire_timeout(wire_config(args), TIMEOUT_S)
    with WireClient(parse_bootstrap(args.bootstrap_server), timeout) as client:
        meta = client.request(ApiKey.METADATA, {"topics": [],
                                                "allow_auto_topic_creation": False})
        if len(meta.brokers) != 1:
            raise ToolError("pylog transactions speaks to single-node clusters: the "
                            f"bootstrap server knows {len(meta.brokers)} brokers")
        COMMANDS[args.transactions_command](client, meta.brokers[0].node_id, args)
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "transactions", help="list, describe and abort transactions (kafka-transactions)",
        description="This tool is used to analyze the transactional state of producers in "
                    "the cluster. It can be used to detect and recover from hanging "
                    "transactions.")
    add_bootstrap(p)
    p.add_argument("-v", action="version", version=f"pylog {__version__}",
                   help="display the pylog version (as --version)")
    commands = p.add_subparsers(dest="transactions_command", metavar="COMMAND", required=True)
    commands.add_parser("list", help="list transactions")
    q = commands.add_parser("describe", help="describe the state of an active transactional-id",
                            description="Describe the state of an active transactional-id.")
    q.add_argument("--transactional-id", required=True, help="transactional id")
    q = commands.add_parser("describe-producers",
                            help="describe the states of active producers for a topic partition")
    q.add_argument("--broker-id", type=int, help="optional broker id to describe the producer "
                   "state on a specific replica")
    q.add_argument("--topic", required=True, help="topic name")
    q.add_argument("--partition", type=int, required=True, help="partition number")
    q = commands.add_parser("abort", help="abort a hanging transaction (requires "
                            "administrative privileges)")
    q.add_argument("--topic", required=True, help="topic name")
    q.add_argument("--partition", type=int, required=True, help="partition number")
    new = q.add_argument_group("Brokers on versions 3.0 and above", "For newer brokers, only "
                               "the start offset of the transaction to be aborted is required")
    new.add_argument("--start-offset", type=int, help="start offset of the transaction to abort")
    old = q.add_argument_group("Brokers on versions older than 3.0",
                               "For older brokers, you must provide all of these arguments")
    old.add_argument("--producer-id", type=int, help="producer id")
    old.add_argument("--producer-epoch", type=int, help="producer epoch")
    old.add_argument("--coordinator-epoch", type=int, help="coordinator epoch")
    q = commands.add_parser("find-hanging", help="find hanging transactions")
    q.add_argument("--broker-id", type=int, help="broker id to search for hanging transactions")
    q.add_argument("--max-transaction-timeout", type=int, default=15, help="maximum "
                   "transaction timeout in minutes to limit the scope of the search")
    q.add_argument("--topic", help="topic name to limit search to")
    q.add_argument("--partition", type=int, help="partition number")
    p.set_defaults(func=run_tool(run))
