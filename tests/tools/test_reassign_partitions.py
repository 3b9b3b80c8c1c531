"""``pylog reassign-partitions`` (kafka-reassign-partitions.sh 3.6): Kafka's
checks, JSON formats and lines, against a real broker and a real 3-node
cluster; the throttle lists and move maps against Kafka's own unit cases."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from broker_process import wait_for

from pylog.tools.reassign_partitions import move_map, topic_throttles

TIMEOUT_S = 120  # liveness bound: replicas copied to their new brokers
UNKNOWN = "org.apache.kafka.common.errors.UnknownTopicOrPartitionException"
ROLLBACK = "Save this to use as the --reassignment-json-file option during rollback"
RUN_VERIFY = ("Warning: You must run --verify periodically, until the reassignment completes, "
              "to ensure the throttle is removed.")


def _reassign(pylog, bootstrap: str, *args: str):
    return pylog("reassign-partitions", "--bootstrap-server", bootstrap, *args)


def _file(tmp_path, data, name: str = "reassign.json") -> str:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return str(path)


def _plan(*entries: tuple[str, int, list[int]]) -> dict:
    return {"version": 1, "partitions": [{"topic": t, "partition": p, "replicas": r}
                                         for t, p, r in entries]}


def _json(*entries: tuple[str, int, list[int]]) -> str:
    """Kafka's formatAsReassignmentJson of these (sorted) entries."""
    return json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)}
        for t, p, r in sorted(entries)]}, separators=(",", ":"))


def _create(pylog, bootstrap: str, topic: str, *args: str) -> None:
    r = pylog("topics", "--bootstrap-server", bootstrap, "--create", "--topic", topic, *args)
    assert r.returncode == 0, r.stderr


def _topic_configs(pylog, bootstrap: str, topic: str) -> str:
    r = pylog("configs", "--bootstrap-server", bootstrap, "--describe", "--entity-type",
              "topics", "--entity-name", topic)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_move_map_and_throttles_as_kafka_computes_them():
    """Kafka's ReassignPartitionsUnitTest.testMoveMap: running reassignments
    overwritten, kept, narrowed and widened, and a new one."""
    def running(replicas, adding, removing):
        return SimpleNamespace(replicas=replicas, adding_replicas=adding,
                               removing_replicas=removing)

    moves = move_map({
        ("foo", 0): running([1, 2, 3, 4], [4], [3]),
        ("foo", 1): running([4, 5, 6, 7, 8], [7, 8], [4, 5]),
        ("foo", 2): running([1, 2, 3, 4], [3, 4], [1, 2]),
        ("foo", 3): running([1, 2, 3, 4], [3, 4], [1, 2]),
        ("foo", 4): running([1, 2, 3, 4], [3, 4], [1, 2]),
        ("foo", 5): running([1, 2, 3, 4], [3, 4], [1, 2]),
    }, {("foo", 0): [1, 2, 5], ("foo", 2): [3, 4], ("foo", 3): [5, 6], ("foo", 4): [3],
        ("foo", 5): [3, 4, 5, 6], ("bar", 0): [1, 2, 3]},
        {("foo", p): [1, 2, 3, 4] for p in (0, 2, 3, 4, 5)} | {
            ("foo", 1): [4, 5, 6, 7, 8], ("bar", 0): [2, 3, 4], ("baz", 0): [1, 2, 3]})
    assert moves == {("foo", 0): ({1, 2, 3}, {5}), ("foo", 1): ({4, 5, 6}, {7, 8}),
                     ("foo", 2): ({1, 2}, {3, 4}), ("foo", 3): ({1, 2}, {5, 6}),
                     ("foo", 4): ({1, 2}, {3}), ("foo", 5): ({1, 2}, {3, 4, 5, 6}),
                     ("bar", 0): ({2, 3, 4}, {1})}
    assert topic_throttles(moves) == {
        "foo": ("0:1,0:2,0:3,1:4,1:5,1:6,2:1,2:2,3:1,3:2,4:1,4:2,5:1,5:2",
                "0:5,1:7,1:8,2:3,2:4,3:5,3:6,4:3,5:3,5:4,5:5,5:6"),
        "bar": ("0:2,0:3,0:4", "0:1")}


def test_one_node_generate_execute_verify_list_cancel(pylog, tool_broker, topic, tmp_path):
    """One node: every replica is already where it can be; each action's lines."""
    b = tool_broker.bootstrap
    _create(pylog, b, topic, "--partitions", "2")
    current = _json((topic, 0, [0]), (topic, 1, [0]))
    topics_file = _file(tmp_path, {"topics": [{"topic": topic}], "version": 1}, "topics.json")
    r = _reassign(pylog, b, "--generate", "--topics-to-move-json-file", topics_file,
                  "--broker-list", "0")
    assert (r.returncode, r.stderr) == (0, "")
    assert r.stdout == (f"Current partition replica assignment\n{current}\n\n"
                        f"Proposed partition reassignment configuration\n{current}\n")

    plan = _file(tmp_path, _plan((topic, 1, [0]), (topic, 0, [0])))
    r = _reassign(pylog, b, "--execute", "--reassignment-json-file", plan)
    assert (r.returncode, r.stderr) == (0, "")
    assert r.stdout == (f"Current partition replica assignment\n\n{current}\n\n{ROLLBACK}\n"
                        f"Successfully started partition reassignments for {topic}-0,{topic}-1\n")
    r = _reassign(pylog, b, "--verify", "--reassignment-json-file", plan)
    assert (r.returncode, r.stderr) == (0, "")
    assert r.stdout == ("Status of partition reassignment:\n"
                        f"Reassignment of partition {topic}-0 is completed.\n"
                        f"Reassignment of partition {topic}-1 is completed.\n\n"
                        "Clearing broker-level throttles on broker 0\n"
                        f"Clearing topic-level throttles on topic {topic}\n")
    r = _reassign(pylog, b, "--verify", "--preserve-throttles", "--reassignment-json-file",
                  _file(tmp_path, _plan((topic, 0, [1])), "other.json"))
    assert r.stdout == ("Status of partition reassignment:\nThere is no active reassignment of "
                        f"partition {topic}-0, but replica set is 0 rather than 1.\n\n")
    r = _reassign(pylog, b, "--list")
    assert (r.returncode, r.stdout, r.stderr) == (0, "No partition reassignments found.\n", "")
    r = _reassign(pylog, b, "--cancel", "--reassignment-json-file", plan)
    assert (r.returncode, r.stderr) == (0, "")
    assert r.stdout == ("None of the specified partition reassignments are active.\n"
                        "None of the specified partition moves are active.\n"
                        "Clearing broker-level throttles on broker 0\n"
                        f"Clearing topic-level throttles on topic {topic}\n")


@pytest.mark.parametrize(("plan", "message"), [
    ({"version": 1, "partitions": []}, "Error: Partition reassignment list cannot be empty"),
    ({"version": 1}, "Error: Partition reassignment list cannot be empty"),
    (_plan(("T", 0, [])), "Error: Partition replica list cannot be empty"),
    (_plan(("T", 0, [0]), ("T", 0, [0])),
     "Error: Partition reassignment contains duplicate topic partitions: T-0"),
    (_plan(("T", 0, [0, 0]), ("T", 1, [0, 1, 1])),
     "Error: Partition replica lists may not contain duplicate entries: T-0 contains multiple "
     "entries for 0. T-1 contains multiple entries for 1"),
    (_plan(("T", 0, [0, 5, 9])), "Error: Unknown broker id 5"),
    ({"version": 1, "partitions": [{"topic": "T", "partition": 0, "replicas": [0],
                                    "log_dirs": ["any", "any"]}]},
     "Error: Size of replicas list List(0) is different from size of log dirs list "
     "List(any, any) for partition T-0"),
    ({"version": 1, "partitions": [{"topic": "T", "partition": 0, "replicas": [0],
                                    "log_dirs": ["/data/a"]}]},
     'Error: Partition T-0: moving replicas between log directories (log_dirs other than '
     '"any") is not supported by pylog'),
    ({"version": 2, "partitions": []}, "Error: Not supported version field value 2"),
    ({"version": 1, "partitions": [{"topic": "T", "replicas": [0]}]},
     "Error: No such field exists: `partition`"),
    ({"version": 1, "partitions": [{"topic": "T", "partition": 0, "replicas": "0"}]},
     'Error: Expected `Seq[Int]` value, received "0"'),
    ("", "Error: The input string shouldn't be empty"),
])
def test_execute_refusals(pylog, tool_broker, topic, tmp_path, plan, message):
    if not isinstance(plan, str):  # T: the test's own topic
        plan = json.loads(json.dumps(plan).replace('"T"', json.dumps(topic)))
    message = message.replace("T-", f"{topic}-")
    r = _reassign(pylog, tool_broker.bootstrap, "--execute", "--reassignment-json-file",
                  _file(tmp_path, plan))
    assert (r.returncode, r.stdout, r.stderr) == (1, "", message + "\n")


def test_execute_of_what_does_not_exist(pylog, tool_broker, topic, tmp_path):
    b = tool_broker.bootstrap
    r = _reassign(pylog, b, "--execute", "--reassignment-json-file",
                  _file(tmp_path, _plan((topic, 0, [0]))))
    assert (r.returncode, r.stdout) == (1, "")
    assert r.stderr == f"Error: {UNKNOWN}: Topic {topic} not found.\n"
    _create(pylog, b, topic)
    r = _reassign(pylog, b, "--execute", "--reassignment-json-file",
                  _file(tmp_path, _plan((topic, 0, [0]), (topic, 7, [0]))))
    assert r.returncode == 1
    assert r.stdout == (f"Current partition replica assignment\n\n{_json((topic, 0, [0]))}\n\n"
                        f"{ROLLBACK}\n")
    assert r.stderr == f"Error reassigning partition(s):\n{topic}-7: Unable to find partition " \
                       f"{topic}:7.\n"
    r = _reassign(pylog, b, "--execute", "--reassignment-json-file", str(tmp_path / "missing"))
    assert (r.returncode, r.stderr) == (1, f"Error: {tmp_path / 'missing'} (No such file or "
                                           "directory)\n")
    r = _reassign(pylog, b, "--execute", "--reassignment-json-file",
                  _file(tmp_path, "{not json"))
    assert r.returncode == 1
    assert r.stderr.startswith("Error: The input string is not a valid JSON: ")


def test_generate_refusals(pylog, tool_broker, topic, tmp_path):
    b = tool_broker.bootstrap
    _create(pylog, b, topic)

    def generate(topics, brokers: str):
        return _reassign(pylog, b, "--generate", "--broker-list", brokers,
                         "--topics-to-move-json-file", _file(tmp_path, topics, "topics.json"))

    one = {"topics": [{"topic": topic}], "version": 1}
    for topics, brokers, message in [
        (one, "0,0", "Error: Broker list contains duplicate entries: 0"),
        (one, "0,x", 'Error: For input string: "x"'),
        (one, "0, 1", 'Error: For input string: " 1"'),
        ({"topics": [{"topic": topic}, {"topic": topic}]}, "0",
         f"Error: List of topics to reassign contains duplicate entries: {topic}"),
        ({"topics": [{"topic": f"{topic}-gone"}]}, "0",
         f"Error: {UNKNOWN}: Topic {topic}-gone not found."),
        (one, "7", "Error: Replication factor: 1 larger than available brokers: 0."),
        ("{oops", "0", "Error: The input string is not a valid JSON"),
        ({"topics": [], "version": 3}, "0", "Error: Not supported version field value 3"),
        ({"topics": [{"name": topic}]}, "0", "Error: No such field exists: `topic`"),
    ]:
        r = generate(topics, brokers)
        assert (r.returncode, r.stdout, r.stderr) == (1, "", message + "\n"), brokers
    # A listed broker the cluster does not have is left out, as Kafka does.
    r = generate(one, "0,7")
    assert r.returncode == 0, r.stderr
    assert r.stdout.endswith(f"configuration\n{_json((topic, 0, [0]))}\n")
    r = generate({"topics": []}, "0")
    empty = _json()
    assert r.stdout == (f"Current partition replica assignment\n{empty}\n\n"
                        f"Proposed partition reassignment configuration\n{empty}\n")


@pytest.mark.parametrize(("args", "message"), [
    ([], "Command must include exactly one action: --generate, --execute, --verify, --cancel, "
         "--list"),
    (["--list", "--verify"], "Command must include exactly one action: --generate, --execute, "
                             "--verify, --cancel, --list"),
    (["--execute"], 'Missing required argument "[reassignment-json-file]"'),
    (["--generate", "--broker-list", "0"],
     'Missing required argument "[topics-to-move-json-file]"'),
    (["--generate", "--topics-to-move-json-file", "t.json"],
     'Missing required argument "[broker-list]"'),
    (["--verify", "--reassignment-json-file", "r.json", "--throttle", "100"],
     'Option "[throttle]" can\'t be used with action "[verify]"'),
    (["--list", "--additional"], 'Option "[additional]" can\'t be used with action "[list]"'),
    (["--cancel", "--reassignment-json-file", "r.json", "--broker-list", "0"],
     'Option "[broker-list]" can\'t be used with action "[cancel]"'),
    (["--generate", "--topics-to-move-json-file", "t.json", "--broker-list", "0",
      "--timeout", "5"], 'Option "[timeout]" can\'t be used with action "[generate]"'),
])
def test_option_checks(pylog, args, message):
    r = _reassign(pylog, "127.0.0.1:1", *args)
    assert (r.returncode, r.stdout, r.stderr) == (1, "", message + "\n")


def test_usage_errors(pylog):
    r = pylog("reassign-partitions", "--list")
    assert (r.returncode, r.stderr) == (1, "Please specify --bootstrap-server\n")
    r = _reassign(pylog, "127.0.0.1:1", "--execute", "--reassignment-json-file", "r.json",
                  "--replica-alter-log-dirs-throttle", "100")
    assert r.returncode == 2
    assert r.stderr.splitlines()[-1] == (
        "pylog reassign-partitions: error: --replica-alter-log-dirs-throttle is not supported "
        "by pylog: pylog does not move replicas between log directories")
    r = _reassign(pylog, "127.0.0.1:1", "--list")
    assert (r.returncode, r.stderr) == (
        1, "Cannot connect to the broker at 127.0.0.1:1 (Connection refused)\n")


def test_throttle_set_and_cleared_on_one_node(pylog, tool_broker, topic, tmp_path):
    b = tool_broker.bootstrap
    _create(pylog, b, topic)
    plan = _file(tmp_path, _plan((topic, 0, [0])))
    r = _reassign(pylog, b, "--execute", "--reassignment-json-file", plan, "--throttle", "5000")
    assert (r.returncode, r.stderr) == (0, "")
    assert r.stdout == (f"Current partition replica assignment\n\n{_json((topic, 0, [0]))}\n\n"
                        f"{ROLLBACK}\n{RUN_VERIFY}\n"
                        "The inter-broker throttle limit was set to 5000 B/s\n"
                        f"Successfully started partition reassignment for {topic}-0\n")
    configs = _topic_configs(pylog, b, topic)
    assert "leader.replication.throttled.replicas=0:0 " in configs
    r = _reassign(pylog, b, "--verify", "--reassignment-json-file", plan)
    assert r.returncode == 0, r.stderr
    assert "leader.replication.throttled" not in _topic_configs(pylog, b, topic)


def test_generate_in_a_cluster(pylog, tool_cluster, topic, tmp_path):
    """The proposal places each partition's replicas on the listed brokers
    only (Kafka's placement, from a random start), as many as it has now."""
    b = tool_cluster.bootstrap
    _create(pylog, b, topic, "--partitions", "4", "--replication-factor", "2")
    topics_file = _file(tmp_path, {"topics": [{"topic": topic}], "version": 1}, "topics.json")
    r = _reassign(pylog, b, "--generate", "--topics-to-move-json-file", topics_file,
                  "--broker-list", "1,2")
    assert (r.returncode, r.stderr) == (0, "")
    lines = r.stdout.splitlines()
    assert lines[0] == "Current partition replica assignment"
    assert lines[2:4] == ["", "Proposed partition reassignment configuration"]
    assert len(lines) == 5
    current, proposed = json.loads(lines[1]), json.loads(lines[4])
    described = pylog("topics", "--bootstrap-server", b, "--describe", "--topic", topic).stdout
    assert [f"Replicas: {','.join(map(str, p['replicas']))}" for p in current["partitions"]] \
        == [f for line in described.splitlines()[1:] for f in line.split("\t")
            if f.startswith("Replicas: ")]
    assert [p["partition"] for p in proposed["partitions"]] == [0, 1, 2, 3]
    for p in proposed["partitions"]:
        assert sorted(p["replicas"]) == [1, 2] and p["log_dirs"] == ["any", "any"]
        assert p["topic"] == topic
    # Kafka's placement: the first replicas go round the brokers.
    assert sorted(p["replicas"][0] for p in proposed["partitions"]) == [1, 1, 2, 2]


def test_move_a_partition_in_a_cluster(pylog, tool_cluster, topic, tmp_path):
    """A partition on nodes 0,1 moved to 1,2 with a throttle: started, verified
    until complete (then the throttles are gone), its new replicas in sync."""
    b = tool_cluster.bootstrap
    _create(pylog, b, topic, "--replica-assignment", "0:1")
    r = pylog("console-producer", "--bootstrap-server", b, "--topic", topic,
              stdin="".join(f"record {i}\n" for i in range(100)))
    assert r.returncode == 0, r.stderr
    plan = _file(tmp_path, _plan((topic, 0, [1, 2])))
    r = _reassign(pylog, b, "--execute", "--reassignment-json-file", plan,
                  "--throttle", "10000000")
    assert (r.returncode, r.stderr) == (0, "")
    assert r.stdout == (f"Current partition replica assignment\n\n{_json((topic, 0, [0, 1]))}\n\n"
                        f"{ROLLBACK}\n{RUN_VERIFY}\n"
                        "The inter-broker throttle limit was set to 10000000 B/s\n"
                        f"Successfully started partition reassignment for {topic}-0\n")
    configs = _topic_configs(pylog, b, topic)
    assert "leader.replication.throttled.replicas=0:0,0:1 " in configs
    assert "follower.replication.throttled.replicas=0:2 " in configs

    def verified() -> str | None:
        out = _reassign(pylog, b, "--verify", "--reassignment-json-file", plan).stdout
        return out if f"Reassignment of partition {topic}-0 is completed." in out else None

    out = wait_for(verified, TIMEOUT_S, f"{topic}-0 moved")
    assert out.endswith("\n\nClearing broker-level throttles on brokers 0,1,2\n"
                        f"Clearing topic-level throttles on topic {topic}\n")
    assert "replication.throttled" not in _topic_configs(pylog, b, topic)
    described = pylog("topics", "--bootstrap-server", b, "--describe", "--topic", topic).stdout
    assert "\tReplicas: 1,2\t" in described
    r = _reassign(pylog, b, "--list")
    assert r.stdout == "No partition reassignments found.\n"
