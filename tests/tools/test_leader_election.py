"""``pylog leader-election`` (kafka-leader-election.sh): Kafka 3.6's flags,
checks and lines, against a real broker and a real 3-node cluster."""

from __future__ import annotations

import json
import os
import signal

import pytest
from broker_process import wait_for

TIMEOUT_S = 120  # liveness bound: a node restarting and catching up
UNKNOWN = "org.apache.kafka.common.errors.UnknownTopicOrPartitionException"


def _elect(pylog, bootstrap: str, *args: str):
    return pylog("leader-election", "--bootstrap-server", bootstrap, *args)


def _create(pylog, bootstrap: str, topic: str, *args: str) -> None:
    r = pylog("topics", "--bootstrap-server", bootstrap, "--create", "--topic", topic, *args)
    assert r.returncode == 0, r.stderr


def _json_file(tmp_path, data) -> str:
    path = tmp_path / "election.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return str(path)


def test_one_node_has_its_leaders_already(pylog, tool_broker, topic, tmp_path):
    """One node leads every partition it has: any election is not needed."""
    b = tool_broker.bootstrap
    _create(pylog, b, topic, "--partitions", "2")
    for kind in ("PREFERRED", "unclean", "Preferred"):  # case-insensitive, as Kafka's
        r = _elect(pylog, b, "--election-type", kind, "--topic", topic, "--partition", "1")
        assert (r.returncode, r.stdout, r.stderr) == (
            0, f"Valid replica already elected for partitions {topic}-1\n", "")
    path = _json_file(tmp_path, {"partitions": [{"topic": topic, "partition": 1},
                                                {"topic": topic, "partition": 0}]})
    r = _elect(pylog, b, "--election-type", "preferred", "--path-to-json-file", path)
    assert (r.returncode, r.stdout, r.stderr) == (
        0, f"Valid replica already elected for partitions {topic}-0, {topic}-1\n", "")
    # Every partition: only those elected are answered, so nothing is printed.
    r = _elect(pylog, b, "--election-type", "preferred", "--all-topic-partitions")
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")


def test_unknown_partitions_fail(pylog, tool_broker, topic, tmp_path):
    b = tool_broker.bootstrap
    _create(pylog, b, topic)
    r = _elect(pylog, b, "--election-type", "preferred", "--topic", topic, "--partition", "3")
    assert (r.returncode, r.stderr) == (1, "1 replica(s) could not be elected\n")
    assert r.stdout == (f"Error completing leader election (PREFERRED) for partition: {topic}-3: "
                        f"{UNKNOWN}: No such partition as {topic}-3\n")
    path = _json_file(tmp_path, {"partitions": [{"topic": topic, "partition": 0},
                                                {"topic": f"{topic}-gone", "partition": 0},
                                                {"topic": topic, "partition": 9}]})
    r = _elect(pylog, b, "--election-type", "unclean", "--path-to-json-file", path)
    assert (r.returncode, r.stderr) == (1, "2 replica(s) could not be elected\n")
    assert r.stdout.splitlines() == [
        f"Valid replica already elected for partitions {topic}-0",
        f"Error completing leader election (UNCLEAN) for partition: {topic}-9: {UNKNOWN}: "
        f"No such partition as {topic}-9",
        f"Error completing leader election (UNCLEAN) for partition: {topic}-gone-0: "
        f"{UNKNOWN}: No such topic as {topic}-gone"]


@pytest.mark.parametrize(("args", "message"), [
    (["--bootstrap-server", "127.0.0.1:1", "--topic", "t", "--partition", "0"],
     "Missing required option(s): election-type"),
    (["--election-type", "preferred", "--all-topic-partitions"],
     "Missing required option(s): bootstrap-server"),
    ([], "Missing required option(s): election-type, bootstrap-server"),
    (["--bootstrap-server", "127.0.0.1:1", "--election-type", "preferred"],
     "One and only one of the following options is required: topic, all-topic-partitions, "
     "path-to-json-file"),
    (["--bootstrap-server", "127.0.0.1:1", "--election-type", "preferred", "--topic", "t",
      "--partition", "0", "--all-topic-partitions"],
     "One and only one of the following options is required: topic, all-topic-partitions, "
     "path-to-json-file"),
    (["--bootstrap-server", "127.0.0.1:1", "--election-type", "preferred", "--topic", "t"],
     "Missing required option(s): partition"),
    (["--bootstrap-server", "127.0.0.1:1", "--election-type", "preferred",
      "--all-topic-partitions", "--partition", "0"],
     "Option partition is only allowed if topic is used"),
])
def test_option_checks(pylog, args, message):
    r = pylog("leader-election", *args)
    assert (r.returncode, r.stdout, r.stderr) == (1, "", message + "\n")


def test_usage_errors(pylog):
    r = pylog("leader-election", "--bootstrap-server", "127.0.0.1:1", "--election-type",
              "fastest", "--all-topic-partitions")
    assert r.returncode == 2
    assert r.stderr.splitlines()[-1] == ("pylog leader-election: error: argument --election-type: "
                                         "Value [fastest] is not one of [PREFERRED, UNCLEAN]")
    r = pylog("leader-election", "--bootstrap-server", "127.0.0.1:1", "--election-type",
              "preferred", "--topic", "t", "--partition", "one")
    assert r.returncode == 2 and "--partition: invalid int value: 'one'" in r.stderr


@pytest.mark.parametrize(("data", "message"), [
    ("", "Replica election data is empty"),
    ("{not json", "Replica election data is empty"),
    ("[]", 'Replica election data is missing "partitions" field'),
    ({"version": 1}, 'Replica election data is missing "partitions" field'),
    ({"partitions": [{"topic": "a", "partition": 0}, {"topic": "b", "partition": 1},
                     {"topic": "a", "partition": 0}]},
     "Replica election data contains duplicate partitions: a-0"),
    ({"partitions": [{"partition": 0}]}, "No such field exists: `topic`"),
    ({"partitions": [{"topic": "a", "partition": "0"}]}, 'Expected `Int` value, received "0"'),
    ({"partitions": [{"topic": 7, "partition": 0}]}, "Expected `String` value, received 7"),
    ({"partitions": {"topic": "a"}}, 'Expected JSON array, received {"topic": "a"}'),
])
def test_json_file_errors(pylog, tool_broker, tmp_path, data, message):
    r = _elect(pylog, tool_broker.bootstrap, "--election-type", "preferred",
               "--path-to-json-file", _json_file(tmp_path, data))
    assert (r.returncode, r.stdout, r.stderr) == (1, "", message + "\n")


def test_admin_config_and_unreachable_broker(pylog, tool_broker, tmp_path):
    config = tmp_path / "admin.properties"
    config.write_text("security.protocol=SASL_SSL\n")
    r = _elect(pylog, tool_broker.bootstrap, "--election-type", "preferred",
               "--all-topic-partitions", "--admin.config", str(config))
    assert (r.returncode, r.stdout) == (1, "")
    assert r.stderr.startswith("security.protocol=SASL_SSL is not supported by pylog")
    r = _elect(pylog, tool_broker.bootstrap, "--election-type", "preferred",
               "--all-topic-partitions", "--admin.config", str(tmp_path / "missing"))
    assert r.returncode == 1 and r.stderr.startswith("cannot read properties file")
    r = _elect(pylog, "127.0.0.1:1", "--election-type", "preferred", "--all-topic-partitions")
    assert (r.returncode, r.stdout) == (1, "")
    assert r.stderr == "Cannot connect to the broker at 127.0.0.1:1 (Connection refused)\n"


def _partition_line(pylog, bootstrap: str, topic: str) -> dict[str, str]:
    r = pylog("topics", "--bootstrap-server", bootstrap, "--describe", "--topic", topic)
    assert r.returncode == 0, r.stderr
    line = r.stdout.splitlines()[1]
    return dict(f.split(": ", 1) for f in line.strip("\t").split("\t"))


def test_preferred_leader_back_after_a_restart(pylog, tool_cluster, topic, tmp_path):
    """Node 2, the partition's preferred replica, stops (a controlled shutdown
    moves the leadership to node 0) and is restarted by the supervisor; once
    it is back in the ISR, a PREFERRED election makes it the leader again,
    and a second one is not needed."""
    b = tool_cluster.node_bootstrap(0)
    _create(pylog, b, topic, "--replica-assignment", "2:0:1")
    wait_for(lambda: _partition_line(pylog, b, topic)["Isr"] == "2,0,1", TIMEOUT_S,
             f"{topic} in sync")
    os.kill(tool_cluster.process.node_pids()[2], signal.SIGTERM)

    def moved_and_back() -> bool:
        line = _partition_line(pylog, b, topic)
        return line["Leader"] == "0" and "2" in line["Isr"].split(",")

    wait_for(moved_and_back, TIMEOUT_S, "node 2 restarted and back in the ISR, node 0 leading")
    path = _json_file(tmp_path, {"partitions": [{"topic": topic, "partition": 0}]})
    r = _elect(pylog, b, "--election-type", "preferred", "--path-to-json-file", path)
    assert (r.returncode, r.stdout, r.stderr) == (
        0, f"Successfully completed leader election (PREFERRED) for partitions {topic}-0\n", "")
    assert _partition_line(pylog, b, topic)["Leader"] == "2"
    r = _elect(pylog, b, "--election-type", "preferred", "--topic", topic, "--partition", "0")
    assert (r.returncode, r.stdout, r.stderr) == (
        0, f"Valid replica already elected for partitions {topic}-0\n", "")
