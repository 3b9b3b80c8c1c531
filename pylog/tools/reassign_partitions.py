"""``pylog reassign-partitions``: Kafka's ``kafka-reassign-partitions.sh`` (3.6).

Moves partitions between brokers, with Kafka's actions, JSON files and lines:

* ``--generate --topics-to-move-json-file F --broker-list 0,1,2``: the current
  assignment of the topics in F (``{"topics": [{"topic": "t"}], "version": 1}``)
  and a proposed one over the listed brokers (Kafka's replica placement,
  rack-aware when every listed broker has a rack, unless
  ``--disable-rack-aware``); nothing changes;
* ``--execute --reassignment-json-file F`` (``{"version": 1, "partitions":
  [{"topic": "t", "partition": 0, "replicas": [1, 2], "log_dirs": ["any",
  "any"]}]}``): prints the current assignment (to roll back with) and starts
  the reassignment (AlterPartitionReassignments); refused while another is
  running unless ``--additional``; ``--throttle B`` first sets the brokers'
  ``leader/follower.replication.throttled.rate`` and the topics'
  ``leader/follower.replication.throttled.replicas`` as Kafka's tool does;
* ``--verify``: each partition's state (ListPartitionReassignments, then the
  metadata) and, once no reassignment is running, the throttles removed
  (unless ``--preserve-throttles``);
* ``--cancel``: the running reassignments of the file's partitions cancelled,
  then the throttles removed;
* ``--list``: the running reassignments.

Moves between a broker's log directories (``log_dirs`` other than ``any``,
``--replica-alter-log-dirs-throttle``) are refused: pylog has no
AlterReplicaLogDirs, so ``--timeout`` (how long Kafka waits for those moves
to start) changes nothing.  The requests go over pylog's codec
(pylog.tools.wire): the reassignment requests to the controller, a broker's
throttle to that broker.  Failures are one line on stderr and status 1 (Kafka
prints them on stdout with a stack trace).
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any

from pylog.controller.assignment import AssignmentError, assign_replicas
from pylog.protocol import ApiKey, ErrorCode
from pylog.tools.common import (
    ToolError,
    add_bootstrap,
    error_message,
    java_exception,
    json_field,
    parse_bootstrap,
    refuse_flags,
    run_tool,
    wire_config,
    wire_timeout,
)
from pylog.tools.wire import ClusterClient

TopicPartition = tuple[str, int]
Assignment = dict[TopicPartition, list[int]]
ANY_LOG_DIR = "any"
TIMEOUT_S = 30.0
REQUEST_TIMEOUT_MS = 15_000
TOPIC, BROKER = 2, 4  # config resource types
SET, DELETE = 0, 1  # IncrementalAlterConfigs operations
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
BROKER_THROTTLES = (LEADER_RATE, FOLLOWER_RATE, "replica.alter.log.dirs.io.max.bytes.per.second")
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
TOPIC_THROTTLES = (LEADER_REPLICAS, FOLLOWER_REPLICAS)
EXISTING = ("Cannot execute because there is an existing partition assignment.  Use --additional "
            "to override this and create a new partition assignment in addition to the existing "
            "one. The --additional flag can also be used to change the throttle by resubmitting "
            "the current reassignment.")
RUN_VERIFY = ("Warning: You must run --verify periodically, until the reassignment completes, "
              "to ensure the throttle is removed.")
ACTIONS = ("generate", "execute", "verify", "cancel", "list")
# validateAndParseArgs: what each action needs, and what it may be given besides.
REQUIRED = {"verify": ("reassignment_json_file",),
            "generate": ("topics_to_move_json_file", "broker_list"),
            "execute": ("reassignment_json_file",), "cancel": ("reassignment_json_file",),
            "list": ()}
PERMITTED = {"verify": ("bootstrap_server", "command_config", "preserve_throttles"),
             "generate": ("bootstrap_server", "broker_list", "command_config",
                          "disable_rack_aware"),
             "execute": ("additional", "bootstrap_server", "command_config", "throttle",
                         "timeout"),
             "cancel": ("bootstrap_server", "command_config", "preserve_throttles", "timeout"),
             "list": ("bootstrap_server", "command_config")}
OPTIONS = ("reassignment_json_file", "topics_to_move_json_file", "broker_list",
           "disable_rack_aware", "throttle", "timeout", "additional", "preserve_throttles",
           "bootstrap_server", "command_config")


def _error(message: str) -> ToolError:
    """Kafka's main: ``Error: <message>`` (then a stack trace, left out here)."""
    return ToolError(f"Error: {message}")


def _tp(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"


def _plural(n: int, word: str) -> str:
    return word if n == 1 else word + "s"


# -- the JSON files ------------------------------------------------------------------------


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError as exc:
        raise _error(f"{path} ({exc.strerror})") from None


def _parse_json(text: str) -> Any:
    if not text:
        raise _error("The input string shouldn't be empty")
    try:
        return json.loads(text)
    except ValueError as exc:
        raise _error(f"The input string is not a valid JSON: {exc}") from None


def _version(data: Any) -> None:
    version = json_field(data, "version", "Int") if isinstance(data, dict) and \
        "version" in data else 1
    if version != 1:
        raise _error(f"Not supported version field value {version}")


def _entries(data: Any, field: str) -> list[Any]:
    if not isinstance(data, dict) or field not in data:
        return []
    entries = data[field]
    if not isinstance(entries, list):
        raise _error(f"Expected JSON array, received {json.dumps(entries)}")
    return entries


def parse_topics_to_move(text: str) -> list[str]:
    """``--topics-to-move-json-file``: the topics, as Kafka's parseTopicsData."""
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if data is None:
        raise _error("The input string is not a valid JSON")
    try:
        _version(data)
        return [json_field(e, "topic", "String") for e in _entries(data, "topics")]
    except ToolError as exc:
        raise _prefixed(exc) from None


def _prefixed(exc: ToolError) -> ToolError:
    text = str(exc)
    return exc if text.startswith("Error: ") else _error(text)


def parse_reassignment(text: str) -> list[tuple[TopicPartition, list[int]]]:
    """``--reassignment-json-file``: (partition, replicas) in file order,
    duplicates kept for the caller to refuse (Kafka's
    parsePartitionReassignmentData).  ``log_dirs`` must match the replicas in
    length; pylog only takes ``any`` there."""
    data = _parse_json(text)
    out = []
    try:
        _version(data)
        for entry in _entries(data, "partitions"):
            tp = (json_field(entry, "topic", "String"), json_field(entry, "partition", "Int"))
            replicas = json_field(entry, "replicas", "Seq[Int]")
            dirs = (json_field(entry, "log_dirs", "Seq[String]") if "log_dirs" in entry
                    else [ANY_LOG_DIR] * len(replicas))
            if len(dirs) != len(replicas):
                raise _error(f"Size of replicas list List({', '.join(map(str, replicas))}) is "
                             f"different from size of log dirs list "
                             f"List({', '.join(dirs)}) for partition {_tp(tp)}")
            if any(d != ANY_LOG_DIR for d in dirs):
                raise _error(f"Partition {_tp(tp)}: moving replicas between log directories "
                             f"(log_dirs other than \"{ANY_LOG_DIR}\") is not supported by "
                             "pylog")
            out.append((tp, list(replicas)))
    except ToolError as exc:
        raise _prefixed(exc) from None
    return out


def check_execute(parsed: list[tuple[TopicPartition, list[int]]]) -> Assignment:
    """Kafka's parseExecuteAssignmentArgs checks, in its order."""
    if not parsed:
        raise _error("Partition reassignment list cannot be empty")
    if any(not replicas for _, replicas in parsed):
        raise _error("Partition replica list cannot be empty")
    twice = [tp for tp, n in Counter(tp for tp, _ in parsed).items() if n > 1]
    if twice:
        raise _error("Partition reassignment contains duplicate topic partitions: "
                     + ",".join(map(_tp, twice)))
    repeated = [(tp, [b for b, n in Counter(replicas).items() if n > 1])
                for tp, replicas in parsed]
    repeated = [(tp, bs) for tp, bs in repeated if bs]
    if repeated:
        raise _error("Partition replica lists may not contain duplicate entries: " + ". ".join(
            f"{_tp(tp)} contains multiple entries for {','.join(map(str, bs))}"
            for tp, bs in repeated))
    return dict(parsed)


def format_assignment(assignment: Assignment) -> str:
    """Kafka's formatAsReassignmentJson: compact, partitions sorted."""
    return json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": assignment[(t, p)],
         "log_dirs": [ANY_LOG_DIR] * len(assignment[(t, p)])}
        for t, p in sorted(assignment)]}, separators=(",", ":"), ensure_ascii=False)


# -- the cluster ---------------------------------------------------------------------------


class Cluster:
    """The requests the tool makes, as Kafka's AdminClient would route them.
    Connected at the first request, so a bad input file is reported first,
    as Kafka's (lazily connecting) AdminClient lets it be."""

    def __init__(self, bootstrap: list[tuple[str, int]], timeout: float) -> None:
        self._bootstrap = bootstrap
        self._timeout = timeout
        self._client: ClusterClient | None = None

    @property
    def client(self) -> ClusterClient:
        if self._client is None:
            self._client = ClusterClient(self._bootstrap, self._timeout)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()

    def assignment(self, topics: list[str]) -> Assignment:
        """Each partition's replicas (Kafka's describeTopics: an unknown topic fails)."""
        if not topics:
            return {}
        meta = self.client.metadata(sorted(set(topics)))
        out: Assignment = {}
        for t in meta.topics:
            if t.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                raise _error(java_exception(t.error_code, f"Topic {t.name} not found."))
            if t.error_code:
                raise _error(java_exception(t.error_code))
            for p in t.partitions:
                out[(t.name, p.partition_index)] = list(p.replica_nodes)
        return out

    def reassignments(self, partitions: list[TopicPartition] | None = None
                      ) -> dict[TopicPartition, Any]:
        """The running reassignments (of ``partitions`` only, when given)."""
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for t, p in partitions:
                by_topic.setdefault(t, []).append(p)
            topics = [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]
        resp = self.client.request_controller(ApiKey.LIST_PARTITION_REASSIGNMENTS, {
            "timeout_ms": REQUEST_TIMEOUT_MS, "topics": topics})
        if resp.error_code:
            raise _error(java_exception(resp.error_code, resp.error_message))
        return {(t.name, p.partition_index): p for t in resp.topics for p in t.partitions}

    def alter(self, targets: dict[TopicPartition, list[int] | None]) -> dict[TopicPartition, str]:
        """AlterPartitionReassignments (None: cancel); the failed partitions' messages."""
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (t, p), replicas in targets.items():
            by_topic.setdefault(t, []).append({"partition_index": p, "replicas": replicas})
        resp = self.client.request_controller(ApiKey.ALTER_PARTITION_REASSIGNMENTS, {
            "timeout_ms": REQUEST_TIMEOUT_MS,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]})
        if resp.error_code:  # Kafka's AdminClient fails every partition with it
            return {tp: error_message(resp.error_code, resp.error_message) for tp in targets}
        return {(t.name, p.partition_index): error_message(p.error_code, p.error_message)
                for t in resp.responses for p in t.partitions if p.error_code}

    def alter_configs(self, resource_type: int, name: str,
                      ops: list[tuple[str, int, str | None]]) -> None:
        """IncrementalAlterConfigs of one resource: a broker's to that broker."""
        target = (self.client.client(int(name)) if resource_type == BROKER
                  else self.client.bootstrap)
        resp = target.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, {"validate_only": False,
                              "resources": [{"resource_type": resource_type,
                                             "resource_name": name, "configs": [
                                                 {"name": k, "config_operation": op, "value": v}
                                                 for k, op, v in ops]}]})
        for r in resp.responses:
            if r.error_code:
                raise _error(java_exception(r.error_code, r.error_message))


# -- throttles -----------------------------------------------------------------------------


def move_map(ongoing: dict[TopicPartition, Any], proposed: Assignment,
             current: Assignment) -> dict[TopicPartition, tuple[set[int], set[int]]]:
    """Kafka's calculateProposedMoveMap: partition -> (sources, destinations),
    the running reassignments' first, then the proposed ones'."""
    moves = {tp: (set(r.replicas) - set(r.adding_replicas), set(r.adding_replicas))
             for tp, r in ongoing.items()}
    for tp, replicas in proposed.items():
        if tp in moves:
            sources = moves[tp][0]
        elif tp in current:
            sources = set(current[tp])
        else:
            raise _error(f"Trying to reassign a topic partition {_tp(tp)} with 0 replicas")
        moves[tp] = (sources, set(replicas) - sources)
    return moves


def topic_throttles(moves: dict[TopicPartition, tuple[set[int], set[int]]]
                    ) -> dict[str, tuple[str, str]]:
    """topic -> (leader.replication.throttled.replicas,
    follower.replication.throttled.replicas): ``partition:broker`` entries of
    the sources, and of the destinations that are not sources, each list
    sorted as strings (Kafka's TreeSet)."""
    leaders: dict[str, set[str]] = {}
    followers: dict[str, set[str]] = {}
    for (topic, p), (sources, destinations) in moves.items():
        leaders.setdefault(topic, set()).update(f"{p}:{b}" for b in sources)
        followers.setdefault(topic, set()).update(f"{p}:{b}" for b in destinations
                                                  if b not in sources)
    return {t: (",".join(sorted(leaders[t])), ",".join(sorted(followers[t]))) for t in leaders}


def set_throttles(cluster: Cluster, moves: dict[TopicPartition, tuple[set[int], set[int]]],
                  rate: int) -> None:
    for topic, (leader, follower) in sorted(topic_throttles(moves).items()):
        cluster.alter_configs(TOPIC, topic, [(LEADER_REPLICAS, SET, leader),
                                             (FOLLOWER_REPLICAS, SET, follower)])
    brokers = sorted({b for sources, dests in moves.values() for b in sources | dests})
    for b in brokers:
        cluster.alter_configs(BROKER, str(b), [(LEADER_RATE, SET, str(rate)),
                                               (FOLLOWER_RATE, SET, str(rate))])
    print(f"The inter-broker throttle limit was set to {rate} B/s")


def clear_throttles(cluster: Cluster, targets: list[tuple[TopicPartition, list[int]]]) -> None:
    """Kafka's clearAllThrottles: every live broker's (and every target
    replica's broker's) rates, and the throttled replica lists of the topics."""
    live = set(cluster.client.brokers())
    brokers = sorted(live | {b for _, replicas in targets for b in replicas})
    print(f"Clearing broker-level throttles on {_plural(len(brokers), 'broker')} "
          f"{','.join(map(str, brokers))}")
    for b in brokers:
        if b in live:  # nothing to clear on a broker that is not there
            cluster.alter_configs(BROKER, str(b), [(k, DELETE, None) for k in BROKER_THROTTLES])
    topics = sorted({tp[0] for tp, _ in targets})
    print(f"Clearing topic-level throttles on {_plural(len(topics), 'topic')} "
          f"{','.join(topics)}")
    for t in topics:
        cluster.alter_configs(TOPIC, t, [(k, DELETE, None) for k in TOPIC_THROTTLES])


# -- the actions ---------------------------------------------------------------------------


def parse_broker_list(text: str) -> list[int]:
    """``--broker-list 0,1,2`` as Kafka's ``split(',').map(_.toInt)``."""
    items = text.split(",")
    while items and items[-1] == "":  # Java's split drops trailing empty strings
        items.pop()
    out = []
    for item in items:
        if not item.lstrip("-+").isdigit() or item != item.strip():
            raise _error(f'For input string: "{item}"')
        out.append(int(item))
    twice = [b for b, n in Counter(out).items() if n > 1]
    if twice:
        raise _error(f"Broker list contains duplicate entries: {','.join(map(str, twice))}")
    return out


def propose(current: Assignment, brokers: dict[int, str | None]) -> Assignment:
    """Kafka's calculateAssignment: each topic placed afresh over ``brokers``
    (id -> rack, or None without rack awareness), as many partitions and
    replicas as it has now."""
    proposed: Assignment = {}
    for topic in sorted({t for t, _ in current}):
        parts = [p for t, p in current if t == topic]
        rf = len(current[(topic, min(parts))])
        try:
            placed = assign_replicas(brokers, len(parts), rf)
        except AssignmentError as exc:
            raise _error(str(exc)) from None
        proposed.update({(topic, p): replicas for p, replicas in placed.items()})
    return proposed


def generate(cluster: Cluster, args: argparse.Namespace) -> None:
    wanted = parse_broker_list(args.broker_list)
    topics = parse_topics_to_move(_read(args.topics_to_move_json_file))
    twice = [t for t, n in Counter(topics).items() if n > 1]
    if twice:
        raise _error(f"List of topics to reassign contains duplicate entries: {','.join(twice)}")
    current = cluster.assignment(topics)
    live = cluster.client.brokers()
    racks = {b: (live[b].rack if not args.disable_rack_aware else None)
             for b in wanted if b in live}
    racked = [b for b, r in racks.items() if r is not None]
    if racked and len(racked) != len(racks):
        raise _error("Not all brokers have rack information. Add --disable-rack-aware in "
                     "command line to make replica assignment without rack information.")
    proposed = propose(current, racks)
    print(f"Current partition replica assignment\n{format_assignment(current)}\n")
    print(f"Proposed partition reassignment configuration\n{format_assignment(proposed)}")


def execute(cluster: Cluster, args: argparse.Namespace) -> None:
    proposed = check_execute(parse_reassignment(_read(args.reassignment_json_file)))
    ongoing = cluster.reassignments()
    if ongoing and not args.additional:
        raise ToolError(EXISTING)
    live = set(cluster.client.brokers())
    unknown = sorted({b for replicas in proposed.values() for b in replicas} - live)
    if unknown:
        raise _error(f"Unknown broker id {unknown[0]}")
    current = cluster.assignment([t for t, _ in proposed])
    current = {tp: r for tp, r in current.items() if tp in proposed}
    print(f"Current partition replica assignment\n\n{format_assignment(current)}\n\n"
          "Save this to use as the --reassignment-json-file option during rollback")
    if args.throttle >= 0:
        print(RUN_VERIFY)
        set_throttles(cluster, move_map(ongoing, proposed, current), args.throttle)
    errors = cluster.alter(dict(proposed))
    if errors:
        raise ToolError("Error reassigning partition(s):\n" + "\n".join(
            f"{_tp(tp)}: {errors[tp]}" for tp in sorted(errors)))
    print(f"Successfully started partition {_plural(len(proposed), 'reassignment')} for "
          + ",".join(map(_tp, sorted(proposed))))


def verify(cluster: Cluster, args: argparse.Namespace) -> None:
    targets = parse_reassignment(_read(args.reassignment_json_file))
    ongoing = cluster.reassignments()
    lookup = sorted({tp[0] for tp, _ in targets if tp not in ongoing})
    current: Assignment = {}
    for topic in lookup:  # one by one: a topic that is gone is a state, not an error
        try:
            current.update(cluster.assignment([topic]))
        except ToolError:
            pass
    lines = ["Status of partition reassignment:"]
    for tp, target in sorted(dict(targets).items()):
        if tp in ongoing:
            lines.append(f"Reassignment of partition {_tp(tp)} is still in progress.")
        elif current.get(tp, []) == target:
            lines.append(f"Reassignment of partition {_tp(tp)} is completed.")
        else:
            lines.append(f"There is no active reassignment of partition {_tp(tp)}, but replica "
                         f"set is {','.join(map(str, current.get(tp, [])))} rather than "
                         f"{','.join(map(str, target))}.")
    print("\n".join(lines))
    print()  # Kafka's (empty) report of log directory moves
    if not ongoing and not args.preserve_throttles:
        clear_throttles(cluster, targets)


def cancel(cluster: Cluster, args: argparse.Namespace) -> None:
    targets = parse_reassignment(_read(args.reassignment_json_file))
    running = cluster.reassignments([tp for tp, _ in targets])
    active = sorted(tp for tp, r in running.items() if r.adding_replicas or r.removing_replicas)
    if active:
        errors = cluster.alter(dict.fromkeys(active))
        if errors:
            raise ToolError(f"Error cancelling partition {_plural(len(errors), 'reassignment')} "
                            "for:\n" + "\n".join(f"{_tp(tp)}: {errors[tp]}"
                                                 for tp in sorted(errors)))
        print(f"Successfully cancelled partition {_plural(len(active), 'reassignment')} for: "
              + ",".join(map(_tp, active)))
    else:
        print("None of the specified partition reassignments are active.")
    print("None of the specified partition moves are active.")
    if not args.preserve_throttles:
        clear_throttles(cluster, targets)


def list_reassignments(cluster: Cluster, args: argparse.Namespace) -> None:
    running = cluster.reassignments()
    if not running:
        print("No partition reassignments found.")
        return
    lines = []
    for tp in sorted(running):
        r = running[tp]
        line = f"{_tp(tp)}: replicas: {','.join(map(str, r.replicas))}."
        if r.adding_replicas:
            line += f" adding: {','.join(map(str, r.adding_replicas))}."
        if r.removing_replicas:
            line += f" removing: {','.join(map(str, r.removing_replicas))}."
        lines.append(line)
    print("Current partition reassignments:\n" + "\n".join(lines))


def _given(args: argparse.Namespace, dest: str) -> bool:
    value = getattr(args, dest)
    return value is not None and value is not False


def _check_options(args: argparse.Namespace) -> str:
    """Kafka's validateAndParseArgs: one action, --bootstrap-server, the
    action's required options, and no option the action does not take."""
    chosen = [a for a in ACTIONS if getattr(args, a)]
    if len(chosen) != 1:
        raise ToolError("Command must include exactly one action: "
                        + ", ".join(f"--{a}" for a in ACTIONS))
    action = chosen[0]
    if args.bootstrap_server is None:
        raise ToolError("Please specify --bootstrap-server")
    for dest in REQUIRED[action]:
        if not _given(args, dest):
            raise ToolError(f'Missing required argument "[{dest.replace("_", "-")}]"')
    for dest in OPTIONS:
        if _given(args, dest) and dest not in REQUIRED[action] + PERMITTED[action]:
            raise ToolError(f'Option "[{dest.replace("_", "-")}]" can\'t be used with action '
                            f'"[{action}]"')
    return action


@run_tool
def run(args: argparse.Namespace) -> int:
    action = _check_options(args)
    timeout = wire_timeout(wire_config(args), TIMEOUT_S)
    if args.throttle is None:
        args.throttle = -1
    cluster = Cluster(parse_bootstrap(args.bootstrap_server), timeout)
    try:
        {"generate": generate, "execute": execute, "verify": verify, "cancel": cancel,
         "list": list_reassignments}[action](cluster, args)
    finally:
        cluster.close()
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "reassign-partitions", help="move partitions between brokers "
                                    "(kafka-reassign-partitions)",
        description="This tool helps to move topic partitions between replicas.")
    actions = p.add_argument_group("actions (exactly one)")
    actions.add_argument("--generate", action="store_true",
                         help="generate a candidate partition reassignment configuration "
                              "(it is not executed)")
    actions.add_argument("--execute", action="store_true",
                         help="kick off the reassignment as specified by the "
                              "--reassignment-json-file option")
    actions.add_argument("--verify", action="store_true",
                         help="verify if the reassignment completed as specified by the "
                              "--reassignment-json-file option; once it has, the throttles "
                              "are removed")
    actions.add_argument("--cancel", action="store_true", help="cancel an active reassignment")
    actions.add_argument("--list", action="store_true",
                         help="list all active partition reassignments")
    add_bootstrap(p, required=False)
    p.add_argument("--reassignment-json-file", metavar="manual assignment json file path",
                   help='the JSON file with the partition reassignment configuration: '
                        '{"partitions": [{"topic": "foo", "partition": 1, "replicas": [1,2,3], '
                        '"log_dirs": ["any","any","any"]}], "version": 1}; "log_dirs" is '
                        'optional and only "any" is supported')
    p.add_argument("--topics-to-move-json-file", metavar="topics to reassign json file path",
                   help='generate a reassignment configuration to move the partitions of the '
                        'specified topics to the list of brokers given by --broker-list: '
                        '{"topics": [{"topic": "foo"}, {"topic": "foo1"}], "version": 1}')
    p.add_argument("--broker-list", metavar="brokerlist",
                   help='the list of brokers to which the partitions need to be reassigned, '
                        'in the form "0,1,2" (with --generate)')
    p.add_argument("--disable-rack-aware", action="store_true",
                   help="disable rack aware replica assignment")
    p.add_argument("--throttle", type=int, metavar="throttle",
                   help="with --execute: the movement of partitions between brokers is "
                        "throttled to this value (bytes/sec); with --additional it changes "
                        "the throttle of a running reassignment")
    p.add_argument("--timeout", type=int, metavar="timeout",
                   help="the maximum time in ms to wait for log directory replica assignment "
                        "to begin (pylog moves no replica between log directories, so it "
                        "changes nothing)")
    p.add_argument("--additional", action="store_true",
                   help="execute this reassignment in addition to any other ongoing ones "
                        "(also: change the throttle of an ongoing reassignment)")
    p.add_argument("--preserve-throttles", action="store_true",
                   help="do not modify broker or topic throttles")
    refuse_flags(p, {
        "--replica-alter-log-dirs-throttle": "pylog does not move replicas between log "
                                             "directories",
    })
    p.set_defaults(func=run)
