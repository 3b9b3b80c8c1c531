"""``pylog leader-election``: Kafka's ``kafka-leader-election.sh`` (LeaderElectionCommand).

Asks the controller to elect leaders (the ElectLeaders API) for one partition
(``--topic T --partition P``), the partitions of a JSON file
(``--path-to-json-file``, Kafka's ``{"partitions": [{"topic": "t",
"partition": 0}]}``) or every partition (``--all-topic-partitions``), by
``--election-type``: PREFERRED moves leadership back to each partition's
first replica when it is in sync; UNCLEAN lets an out-of-sync replica lead a
partition that has no leader.  Kafka 3.6's lines::

    Successfully completed leader election (PREFERRED) for partitions t-0, t-1
    Valid replica already elected for partitions t-2
    Error completing leader election (PREFERRED) for partition: t-3: <exception>

and exit status 1 after the last when any partition failed.  Kafka prints
the partitions of one line in hash order; pylog sorts them.  The request goes
to the controller over pylog's codec (pylog.tools.wire).
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any

from pylog.protocol import ApiKey, ErrorCode
from pylog.tools.common import (
    ToolError,
    check_security,
    java_exception,
    json_field,
    parse_bootstrap,
    read_properties_file,
    run_tool,
)
from pylog.tools.wire import ClusterClient

ELECTION_TYPES = {"PREFERRED": 0, "UNCLEAN": 1}
# Kafka's tool: default.api.timeout.ms 30 s, request.timeout.ms half of it.
TIMEOUT_S = 30.0
REQUEST_TIMEOUT_MS = 15_000
TopicPartition = tuple[str, int]


def election_type(text: str) -> str:
    """--election-type, case-insensitive as Kafka's enum converter."""
    found = text.strip().upper()
    if found not in ELECTION_TYPES:
        raise argparse.ArgumentTypeError(
            f"Value [{text}] is not one of [{', '.join(ELECTION_TYPES)}]")
    return found


def parse_election_data(text: str) -> list[TopicPartition]:
    """The partitions of a --path-to-json-file (Kafka's parseReplicaElectionData)."""
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if data is None:  # Kafka's Json.parseFull: None for empty and malformed input alike
        raise ToolError("Replica election data is empty")
    if not isinstance(data, dict) or "partitions" not in data:
        raise ToolError('Replica election data is missing "partitions" field')
    entries = data["partitions"]
    if not isinstance(entries, list):
        raise ToolError(f"Expected JSON array, received {json.dumps(entries)}")
    partitions = [(json_field(entry, "topic", "String"), json_field(entry, "partition", "Int"))
                  for entry in entries]
    duplicates = [tp for tp, n in Counter(partitions).items() if n > 1]
    if duplicates:
        raise ToolError("Replica election data contains duplicate partitions: "
                        + ",".join(f"{t}-{p}" for t, p in duplicates))
    return sorted(set(partitions))


def _validate(args: argparse.Namespace) -> None:
    """Kafka's LeaderElectionCommand.validate, its messages and order."""
    missing = []
    if args.bootstrap_server is None:
        missing.insert(0, "bootstrap-server")
    if args.election_type is None:
        missing.insert(0, "election-type")
    if missing:
        raise ToolError(f"Missing required option(s): {', '.join(missing)}")
    given = [args.topic is not None, args.all_topic_partitions,
             args.path_to_json_file is not None]
    if sum(given) != 1:
        raise ToolError("One and only one of the following options is required: topic, "
                        "all-topic-partitions, path-to-json-file")
    if args.topic is not None and args.partition is None:
        raise ToolError("Missing required option(s): partition")
    if args.topic is None and args.partition is not None:
        raise ToolError("Option partition is only allowed if topic is used")


def _partitions(args: argparse.Namespace) -> list[TopicPartition] | None:
    """The partitions asked for; None: every partition (--all-topic-partitions)."""
    if args.path_to_json_file is not None:
        try:
            text = Path(args.path_to_json_file).read_text()
        except OSError as exc:
            raise ToolError(f"{args.path_to_json_file} ({exc.strerror})") from None
        return parse_election_data(text)
    if args.topic is not None:
        return [(args.topic, args.partition)]
    return None


def _request(partitions: list[TopicPartition] | None, kind: str) -> dict[str, Any]:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions or ():
        by_topic.setdefault(topic, []).append(partition)
    return {"election_type": ELECTION_TYPES[kind], "timeout_ms": REQUEST_TIMEOUT_MS,
            "topic_partitions": None if partitions is None else [
                {"topic": t, "partitions": ps} for t, ps in by_topic.items()]}


def _elect(cluster: ClusterClient, partitions: list[TopicPartition] | None,
           kind: str) -> int:
    resp = cluster.request_controller(ApiKey.ELECT_LEADERS, _request(partitions, kind))
    top = getattr(resp, "error_code", 0)
    if top == ErrorCode.REQUEST_TIMED_OUT:
        raise ToolError("Timeout waiting for election results")
    if top == ErrorCode.CLUSTER_AUTHORIZATION_FAILED:
        raise ToolError("Not authorized to perform leader election")
    if top:
        raise ToolError(java_exception(top))
    succeeded, noop, failed = [], [], []
    for topic in resp.replica_election_results:
        for p in topic.partition_result:
            tp = (topic.topic, p.partition_id)
            if p.error_code == ErrorCode.ELECTION_NOT_NEEDED:
                noop.append(tp)
            elif p.error_code:
                failed.append((tp, java_exception(p.error_code, p.error_message)))
            else:
                succeeded.append(tp)

    def names(tps: list[TopicPartition]) -> str:
        return ", ".join(f"{t}-{p}" for t, p in sorted(set(tps)))

    if succeeded:
        print(f"Successfully completed leader election ({kind}) for partitions "
              f"{names(succeeded)}")
    if noop:
        print(f"Valid replica already elected for partitions {names(noop)}")
    for (topic, partition), error in sorted(dict(failed).items()):
        print(f"Error completing leader election ({kind}) for partition: "
              f"{topic}-{partition}: {error}")
    if failed:
        raise ToolError(f"{len(dict(failed))} replica(s) could not be elected")
    return 0


@run_tool
def run(args: argparse.Namespace) -> int:
    _validate(args)
    partitions = _partitions(args)
    if args.admin_config is not None:
        check_security(read_properties_file(args.admin_config))
    with ClusterClient(parse_bootstrap(args.bootstrap_server), TIMEOUT_S) as cluster:
        return _elect(cluster, partitions, args.election_type)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "leader-election", help="elect preferred or unclean leaders (kafka-leader-election)",
        description="This tool attempts to elect a new leader for a set of topic partitions. "
                    "The type of elections supported are preferred replicas and unclean "
                    "replicas.")
    p.add_argument("--bootstrap-server", metavar="host:port",
                   help="a hostname and port for the broker to connect to, in the form "
                        "host:port; multiple comma separated URLs can be given. REQUIRED.")
    p.add_argument("--admin.config", dest="admin_config", metavar="config file",
                   help="configuration properties files to pass to the admin client")
    p.add_argument("--path-to-json-file", metavar="Path to JSON file",
                   help='the JSON file with the list of partitions for which leader elections '
                        'should be performed: {"partitions": [{"topic": "foo", "partition": '
                        '1}, {"topic": "foobar", "partition": 2}]}. Not allowed if '
                        '--all-topic-partitions or --topic flags are specified.')
    p.add_argument("--topic", metavar="topic name",
                   help="name of topic for which to perform an election. Not allowed if "
                        "--path-to-json-file or --all-topic-partitions is specified.")
    p.add_argument("--partition", type=int, metavar="partition id",
                   help="partition id for which to perform an election. REQUIRED if --topic "
                        "is specified.")
    p.add_argument("--all-topic-partitions", action="store_true",
                   help="perform election on all of the eligible topic partitions based on the "
                        "type of election (see the --election-type flag). Not allowed if "
                        "--topic or --path-to-json-file is specified.")
    p.add_argument("--election-type", type=election_type, metavar="election type",
                   help='type of election to attempt: "preferred" elects the preferred leader '
                        'where it is not the leader; "unclean" elects a leader where there is '
                        'none. REQUIRED.')
    p.set_defaults(func=run)
