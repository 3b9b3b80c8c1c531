"""``pylog topics``: Kafka's ``kafka-topics.sh`` (TopicCommand) for pylog.

Same flags and the same lines as Kafka 3.6, so runbooks and scripts work:
``Created topic T.``, ``--list`` prints names one per line, ``--describe``
prints Kafka's two line shapes (tabs included)::

    Topic: T<TAB>TopicId: ...<TAB>PartitionCount: N<TAB>ReplicationFactor: R<TAB>Configs: k=v,...
    <TAB>Topic: T<TAB>Partition: 0<TAB>Leader: 0<TAB>Replicas: 0<TAB>Isr: 0

``--alter`` and ``--delete`` print nothing on success, as Kafka's.  A failure
prints ``Error while executing topic command : <reason>`` and exits 1 (Kafka
prints that line on stdout and a stack trace; pylog prints the line alone, on
stderr, so a script's captured stdout holds only results).
"""

from __future__ import annotations

import argparse
import base64
import binascii
import re
from typing import Any

from pylog.protocol import ApiKey
from pylog.tools.common import (
    ToolError,
    add_bootstrap,
    admin_client,
    check_reachable,
    error_text,
    parse_bootstrap,
    parse_props,
    refuse_flags,
    run_tool,
    wait_future,
)
from pylog.tools.wire import ClusterClient

ACTIONS = ("create", "list", "describe", "alter", "delete")
REPORTS = ("under_replicated_partitions", "under_min_isr_partitions", "at_min_isr_partitions",
           "unavailable_partitions")
# TopicCommandOptions.checkArgs: option -> the actions it may be used with, and
# the other options it may not be combined with.
ALLOWED_ACTIONS = {
    "config": ("alter", "create"),
    "partitions": ("alter", "create"),
    "replication_factor": ("create",),
    "replica_assignment": ("create", "alter"),
    **{r: ("describe",) for r in REPORTS},
    "topics_with_overrides": ("describe",),
    "if_exists": ("alter", "delete", "describe"),
    "if_not_exists": ("create",),
    "exclude_internal": ("list", "describe"),
    "topic_id": ("describe",),
}
EXCLUSIVE = {
    **{r: tuple(o for o in REPORTS if o != r) + ("topics_with_overrides",) for r in REPORTS},
    "topics_with_overrides": REPORTS,
}
COLLISION_WARNING = ("WARNING: Due to limitations in metric names, topics with a period ('.') "
                     "or underscore ('_') could collide. To avoid issues it is best to use "
                     "either, but not both.")
TIMEOUT_S = 30.0
ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"  # Uuid.ZERO_UUID: --topic-id then means none


def _fail(reason: str) -> ToolError:
    return ToolError(f"Error while executing topic command : {reason}")


def _result(fut: Any) -> Any:
    from confluent_kafka import KafkaException

    try:
        return wait_future(fut, TIMEOUT_S)
    except KafkaException as exc:
        raise _fail(error_text(exc)) from None


def _is_error(exc: BaseException, *names: str) -> bool:
    from confluent_kafka import KafkaError, KafkaException

    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0].name() in names
    return False


def _matching(admin: Any, pattern: str | None, exclude_internal: bool) -> list[str]:
    """Topic names, all or those matching ``--topic`` (Kafka takes a regex there)."""
    try:
        names = sorted(check_reachable(admin).topics)
    except ToolError as exc:
        raise _fail(str(exc)) from None
    if exclude_internal:
        names = [n for n in names if not n.startswith("__")]
    if pattern is None:
        return names
    try:
        regex = re.compile(pattern)
    except re.error:
        return [n for n in names if n == pattern]
    return [n for n in names if n == pattern or regex.fullmatch(n)]


def _uuid_text(topic_id: Any) -> str:
    """Kafka prints Uuids as URL-safe base64 without padding; librdkafka's str()
    uses the standard alphabet."""
    if topic_id is None:
        return ""
    return str(topic_id).replace("+", "-").replace("/", "_").rstrip("=")


def parse_topic_id(text: str) -> str:
    """``--topic-id`` checked as Kafka's Uuid.fromString checks it (URL-safe
    base64 of 16 bytes), in the form Kafka prints."""
    if len(text) > 24:
        raise _fail(f"Input string with prefix `{text[:24]}` is too long to be decoded as a "
                    "base64 UUID")
    bad = next((c for c in text if not (c.isascii() and (c.isalnum() or c in "-_="))), None)
    if bad is not None:
        raise _fail(f"Illegal base64 character {ord(bad):x}")
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError) as exc:
        raise _fail(str(exc)) from None
    if len(raw) != 16:
        raise _fail(f"Input string `{text}` decoded as {len(raw)} bytes, which is not equal "
                    "to the expected 16 bytes of a base64-encoded UUID")
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _ensure_found(found: list[str], requested: str | None, if_exists: bool) -> None:
    if requested is not None and not found and not if_exists:
        raise _fail(f"Topic '{requested}' does not exist as expected")


def _opt(dest: str) -> str:
    """An option as joptsimple prints it: ``[replica-assignment]``."""
    return f"[{dest.replace('_', '-')}]"


def _given(args: argparse.Namespace, dest: str) -> bool:
    value = getattr(args, dest)
    return value is not None and value is not False


def _check_options(args: argparse.Namespace, action: str) -> None:
    """Kafka's checkInvalidArgs: ``Option "[x]" can't be used with option "[y]"``."""
    for dest, actions in ALLOWED_ACTIONS.items():
        if not _given(args, dest):
            continue
        if action not in actions:
            raise ToolError(f'Option "{_opt(dest)}" can\'t be used with option "[{action}]"')
        for other in EXCLUSIVE.get(dest, ()):
            if _given(args, other):
                raise ToolError(f'Option "{_opt(dest)}" can\'t be used with option '
                                f'"{_opt(other)}"')
    if action == "create" and _given(args, "replica_assignment"):
        for other in ("partitions", "replication_factor"):
            if _given(args, other):
                raise ToolError(f'Option "[replica-assignment]" can\'t be used with option '
                                f'"{_opt(other)}"')


def parse_replica_assignment(text: str) -> list[list[int]]:
    """TopicCommand.parseReplicaAssignment: ``0:1,1:2`` -> one replica list per
    partition, in partition order."""
    out: list[list[int]] = []
    for i, item in enumerate(text.split(",")):
        brokers = []
        for b in item.split(":"):
            try:
                brokers.append(int(b.strip()))
            except ValueError:
                raise _fail(f'For input string: "{b.strip()}"') from None
        duplicates = sorted({b for b in brokers if brokers.count(b) > 1})
        if duplicates:
            raise _fail("Partition replica lists may not contain duplicate entries: "
                        + ",".join(map(str, duplicates)))
        if out and len(brokers) != len(out[0]):
            raise _fail(f"Partition {i} has different replication factor: "
                        + ":".join(map(str, brokers)))
        out.append(brokers)
    return out


def _check_brokers(admin: Any, assignment: list[list[int]]) -> None:
    """Refuse broker ids the cluster does not have, as Kafka's controller does."""
    try:
        registered = set(check_reachable(admin).brokers)
    except ToolError as exc:
        raise _fail(str(exc)) from None
    for replicas in assignment:
        for b in replicas:
            if b not in registered:
                raise _fail(f"The manual partition assignment includes broker {b}, but no "
                            "such broker is registered.")


def _create(admin: Any, args: argparse.Namespace) -> None:
    from confluent_kafka.admin import NewTopic

    if not args.topic:
        raise _fail('Missing required argument "[topic]"')
    if args.partitions is not None and args.partitions < 1:
        raise _fail("The partitions must be greater than 0")
    if args.replication_factor is not None and args.replication_factor < 1:
        raise _fail("The replication factor must be greater than 0")
    configs = parse_props(args.config, "topic config", strip=True)
    if args.replica_assignment:  # the partition count is the assignment's
        assignment = parse_replica_assignment(args.replica_assignment)
        _check_brokers(admin, assignment)
        # librdkafka wants the count given too; it sends -1 with the assignment.
        topic = NewTopic(args.topic, num_partitions=len(assignment), replication_factor=-1,
                         replica_assignment=assignment, config=configs)
    else:
        topic = NewTopic(args.topic, num_partitions=args.partitions or -1,
                         replication_factor=args.replication_factor or -1, config=configs)
    if "." in args.topic or "_" in args.topic:
        print(COLLISION_WARNING)
    fut = admin.create_topics([topic], request_timeout=TIMEOUT_S)[args.topic]
    try:
        wait_future(fut, TIMEOUT_S)
    except Exception as exc:
        if _is_error(exc, "TOPIC_ALREADY_EXISTS"):
            if args.if_not_exists:
                return
            raise _fail(f"Topic '{args.topic}' already exists.") from None
        raise _fail(error_text(exc)) from None
    print(f"Created topic {args.topic}.")


def _configs(admin: Any, names: list[str]) -> dict[str, dict[str, Any]]:
    """Each topic's configs (DescribeConfigs: every entry, defaults included);
    a topic whose configs cannot be read (deleted meanwhile) has none."""
    from confluent_kafka.admin import ConfigResource, ResourceType

    if not names:
        return {}
    resources = [ConfigResource(ResourceType.TOPIC, n) for n in names]
    out: dict[str, dict[str, Any]] = {}
    for resource, fut in admin.describe_configs(resources, request_timeout=TIMEOUT_S).items():
        try:
            out[resource.name] = dict(wait_future(fut, TIMEOUT_S))
        except Exception:
            out[resource.name] = {}
    return out


def _overrides_text(entries: dict[str, Any]) -> str:
    """``k=v,...`` of a topic's non-default configs (what Kafka's describe shows)."""
    return ",".join(f"{e.name}={e.value}" for e in entries.values() if not e.is_default)


def _min_isr(entries: dict[str, Any]) -> int | None:
    entry = entries.get("min.insync.replicas")
    try:
        return int(entry.value) if entry is not None else None
    except (TypeError, ValueError):
        return None


def _reassignments(args: argparse.Namespace, names: list[str]) -> dict[tuple[str, int], Any]:
    """The running reassignments of these topics (ListPartitionReassignments,
    which librdkafka lacks, from the controller over pylog's codec); none when
    the cluster cannot tell, as Kafka's tool ignores an unsupported request."""
    try:
        with ClusterClient(parse_bootstrap(args.bootstrap_server), TIMEOUT_S) as cluster:
            if int(ApiKey.LIST_PARTITION_REASSIGNMENTS) not in cluster.bootstrap.versions:
                return {}
            resp = cluster.request_controller(ApiKey.LIST_PARTITION_REASSIGNMENTS, {
                "timeout_ms": int(TIMEOUT_S * 1000),
                "topics": [{"name": n, "partition_indexes": list(range(count))}
                           for n, count in names]})
    except ToolError as exc:
        raise _fail(str(exc)) from None
    if resp.error_code:
        return {}
    return {(t.name, p.partition_index): p for t in resp.topics for p in t.partitions}


def _replication_factor(replicas: list[int], reassignment: Any) -> int:
    """Kafka's getReplicationFactor: the replicas, less those being removed."""
    removing = len(reassignment.removing_replicas) if reassignment is not None else 0
    return len(replicas) - removing


def _topic_line(name: str, desc: Any, parts: list[Any], configs: str, rf: int) -> str:
    topic_id = _uuid_text(desc.topic_id)
    line = f"Topic: {name}"
    if topic_id and topic_id != "AAAAAAAAAAAAAAAAAAAAAA":  # Uuid.ZERO_UUID
        line += f"\tTopicId: {topic_id}"
    return line + (f"\tPartitionCount: {len(parts)}\tReplicationFactor: {rf}"
                   f"\tConfigs: {configs}")


def _partition_listed(args: argparse.Namespace, leader: int | None, isr: list[int], rf: int,
                      min_isr: int | None, live: set[int]) -> bool:
    """Kafka 3.6's DescribeOptions: every partition without a report flag,
    else those the flags given select."""
    if not (args.under_replicated_partitions or args.unavailable_partitions
            or args.under_min_isr_partitions or args.at_min_isr_partitions):
        return True
    return bool(
        (args.under_replicated_partitions and rf - len(isr) > 0)
        or (args.unavailable_partitions and (leader is None or leader not in live))
        or (args.under_min_isr_partitions
            and (leader is None or (min_isr is not None and len(isr) < min_isr)))
        or (args.at_min_isr_partitions and min_isr is not None and len(isr) == min_isr))


def _describe(admin: Any, args: argparse.Namespace) -> None:
    from confluent_kafka import TopicCollection

    # --topic-id (not the zero id) wins over --topic, as in Kafka: every topic
    # is described and the one with that id kept (librdkafka looks topics up by name).
    topic_id = parse_topic_id(args.topic_id) if args.topic_id is not None else None
    if topic_id == ZERO_UUID:
        topic_id = None
    names = _matching(admin, args.topic if topic_id is None else None, args.exclude_internal)
    if topic_id is None:
        _ensure_found(names, args.topic, args.if_exists)
    if not names:
        if topic_id is not None and not args.if_exists:
            raise _fail(f"TopicId '{topic_id}' does not exist as expected")
        return
    futures = admin.describe_topics(TopicCollection(names), request_timeout=TIMEOUT_S)
    descriptions = {}
    for name, fut in futures.items():
        try:
            descriptions[name] = wait_future(fut, TIMEOUT_S)
        except Exception as exc:
            if _is_error(exc, "UNKNOWN_TOPIC_OR_PART"):
                continue  # deleted between list and describe
            raise _fail(error_text(exc)) from None
    if topic_id is not None:
        descriptions = {n: d for n, d in descriptions.items()
                        if _uuid_text(d.topic_id) == topic_id}
        if not descriptions and not args.if_exists:
            raise _fail(f"TopicId '{topic_id}' does not exist as expected")
    only_partitions = (args.under_replicated_partitions or args.unavailable_partitions
                       or args.under_min_isr_partitions or args.at_min_isr_partitions)
    configs = _configs(admin, sorted(descriptions))
    live = set(check_reachable(admin).brokers)
    reassigning = _reassignments(args, [(n, len(d.partitions))
                                        for n, d in sorted(descriptions.items())])
    for name in sorted(descriptions):
        desc = descriptions[name]
        parts = sorted(desc.partitions, key=lambda p: p.id)
        entries = configs.get(name, {})
        overrides = _overrides_text(entries)
        first = reassigning.get((name, parts[0].id)) if parts else None
        rf = _replication_factor([r.id for r in parts[0].replicas], first) if parts else 0
        if args.topics_with_overrides:
            # Kafka: the topic line of topics with a non-default config, no partitions.
            if overrides:
                print(_topic_line(name, desc, parts, overrides, rf))
            continue
        if not only_partitions:
            print(_topic_line(name, desc, parts, overrides, rf))
        min_isr = _min_isr(entries)
        for p in parts:
            replicas = [r.id for r in p.replicas]
            isr = [r.id for r in p.isr]
            leader = p.leader.id if p.leader is not None and p.leader.id >= 0 else None
            moving = reassigning.get((name, p.id))
            if not _partition_listed(args, leader, isr, _replication_factor(replicas, moving),
                                     min_isr, live):
                continue
            line = (f"\tTopic: {name}\tPartition: {p.id}"
                    f"\tLeader: {leader if leader is not None else 'none'}"
                    f"\tReplicas: {','.join(map(str, replicas))}"
                    f"\tIsr: {','.join(map(str, isr))}")
            if moving is not None:
                line += (f"\tAdding Replicas: {','.join(map(str, moving.adding_replicas))}"
                         f"\tRemoving Replicas: {','.join(map(str, moving.removing_replicas))}")
            print(line)


def _alter(admin: Any, args: argparse.Namespace) -> None:
    from confluent_kafka.admin import NewPartitions

    if not args.topic:
        raise _fail('Missing required argument "[topic]"')
    if args.config:
        raise _fail("Option \"[config]\" can't be used with option \"[alter]\"; use "
                    "pylog configs --alter to change topic configs")
    if args.partitions is None:
        raise _fail("The --partitions option is required with --alter (only the partition "
                    "count can be altered)")
    assignment = None
    if args.replica_assignment:
        assignment = parse_replica_assignment(args.replica_assignment)
        _check_brokers(admin, assignment)
    names = _matching(admin, args.topic, args.exclude_internal)
    _ensure_found(names, args.topic, args.if_exists)
    meta = check_reachable(admin) if assignment is not None else None
    for name in names:
        if assignment is None:
            new = NewPartitions(name, args.partitions)
        else:  # Kafka drops the entries of the partitions the topic already has
            current = len(meta.topics[name].partitions)
            new = NewPartitions(name, args.partitions, replica_assignment=assignment[current:])
        fut = admin.create_partitions([new], request_timeout=TIMEOUT_S)[name]
        _result(fut)


def _delete(admin: Any, args: argparse.Namespace) -> None:
    if not args.topic:
        raise _fail('Missing required argument "[topic]"')
    names = _matching(admin, args.topic, args.exclude_internal)
    _ensure_found(names, args.topic, args.if_exists)
    if not names:
        return
    for fut in admin.delete_topics(names, operation_timeout=TIMEOUT_S,
                                   request_timeout=TIMEOUT_S).values():
        _result(fut)


def _list(admin: Any, args: argparse.Namespace) -> None:
    for name in _matching(admin, args.topic, args.exclude_internal):
        print(name)


@run_tool
def run(args: argparse.Namespace) -> int:
    chosen = [a for a in ACTIONS if getattr(args, a)]
    if len(chosen) != 1:
        raise ToolError("Command must include exactly one action: --list, --describe, "
                        "--create, --alter or --delete")
    action = chosen[0]
    _check_options(args, action)
    if action == "describe" and args.if_exists and args.topic is None and args.topic_id is None:
        raise ToolError("--topic or --topic-id is required to describe a topic")
    if action == "describe" and args.topic is not None and args.topic_id is not None:
        print("Only topic id will be used when both --topic and --topic-id are specified and "
              "topicId is not Uuid.ZERO_UUID")
    try:
        admin = admin_client(args)
    except ToolError as exc:  # no broker at --bootstrap-server: Kafka's error line
        raise _fail(str(exc)) from None
    {"create": _create, "list": _list, "describe": _describe, "alter": _alter,
     "delete": _delete}[action](admin, args)
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "topics", help="create, delete, describe, or change a topic (kafka-topics)",
        description="Create, delete, describe, or change a topic.")
    add_bootstrap(p)
    actions = p.add_argument_group("actions (exactly one)")
    actions.add_argument("--create", action="store_true", help="create a new topic")
    actions.add_argument("--list", action="store_true", help="list all available topics")
    actions.add_argument("--describe", action="store_true", help="list details for topics")
    actions.add_argument("--alter", action="store_true",
                         help="alter the number of partitions of a topic")
    actions.add_argument("--delete", action="store_true", help="delete a topic")
    p.add_argument("--topic", metavar="topic",
                   help="the topic to create, alter, describe or delete (a regular expression "
                        "except with --create)")
    p.add_argument("--topic-id", metavar="topic-id",
                   help="the topic id to describe (with --describe; wins over --topic)")
    p.add_argument("--partitions", type=int, metavar="# of partitions",
                   help="the number of partitions for the topic being created or altered")
    p.add_argument("--replication-factor", type=int, metavar="replication factor",
                   help="the replication factor for each partition (1 on one node)")
    p.add_argument("--replica-assignment", metavar="broker_id_for_part1_replica1 : "
                   "broker_id_for_part1_replica2 , broker_id_for_part2_replica1 : "
                   "broker_id_for_part2_replica2 , ...",
                   help="a list of manual partition-to-broker assignments for the topic being "
                        "created or altered (one node: its id for each partition)")
    p.add_argument("--config", action="append", metavar="name=value",
                   help="a topic configuration override for the topic being created "
                        "(repeatable)")
    p.add_argument("--if-not-exists", action="store_true",
                   help="with --create: only create the topic if it does not exist")
    p.add_argument("--if-exists", action="store_true",
                   help="with --alter, --describe or --delete: only act if the topic exists")
    p.add_argument("--exclude-internal", action="store_true",
                   help="exclude internal topics with --list and --describe")
    p.add_argument("--under-replicated-partitions", action="store_true",
                   help="with --describe: only partitions whose ISR is smaller than the "
                        "replica set")
    p.add_argument("--unavailable-partitions", action="store_true",
                   help="with --describe: only partitions without a leader")
    p.add_argument("--under-min-isr-partitions", action="store_true",
                   help="with --describe: only partitions whose ISR is below min.insync")
    p.add_argument("--at-min-isr-partitions", action="store_true",
                   help="with --describe: only partitions whose ISR is at min.insync")
    p.add_argument("--topics-with-overrides", action="store_true",
                   help="with --describe: only show topics that have overridden configs")
    refuse_flags(p, {
        # Kafka 3.6 refuses it with --bootstrap-server too.
        "--delete-config": "topic configs are removed with pylog configs --alter "
                           "--delete-config",
    })
    p.set_defaults(func=run)
