"""``pylog topics``: Kafka's flags, Kafka's output lines, one-line errors."""

from __future__ import annotations

import re

DESCRIBE_TOPIC = re.compile(
    r"^Topic: (?P<name>\S+)\tTopicId: [A-Za-z0-9_-]{22}\tPartitionCount: (?P<n>\d+)"
    r"\tReplicationFactor: 1\tConfigs: (?P<configs>.*)$")
DESCRIBE_PARTITION = re.compile(
    r"^\tTopic: (?P<name>\S+)\tPartition: (?P<p>\d+)\tLeader: 0\tReplicas: 0\tIsr: 0$")


def _describe(pylog, broker, topic):
    r = pylog("topics", "--bootstrap-server", broker.bootstrap, "--describe", "--topic", topic)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    head = DESCRIBE_TOPIC.match(lines[0])
    assert head, lines[0]
    parts = [DESCRIBE_PARTITION.match(line) for line in lines[1:]]
    assert all(parts), lines
    return head, parts


def test_create_describe_alter_delete(pylog, tool_broker, topic):
    b = tool_broker.bootstrap
    r = pylog("topics", "--bootstrap-server", b, "--create", "--topic", topic,
              "--partitions", "2", "--replication-factor", "1",
              "--config", "retention.ms=86400000", "--config", "segment.bytes=1048576")
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"Created topic {topic}.\n"

    head, parts = _describe(pylog, tool_broker, topic)
    assert head["name"] == topic and head["n"] == "2"
    assert sorted(head["configs"].split(",")) == ["retention.ms=86400000",
                                                   "segment.bytes=1048576"]
    assert [int(p["p"]) for p in parts] == [0, 1]

    r = pylog("topics", "--bootstrap-server", b, "--list")
    assert topic in r.stdout.splitlines()

    r = pylog("topics", "--bootstrap-server", b, "--alter", "--topic", topic, "--partitions", "4")
    assert r.returncode == 0, r.stderr
    head, parts = _describe(pylog, tool_broker, topic)
    assert head["n"] == "4" and len(parts) == 4

    r = pylog("topics", "--bootstrap-server", b, "--alter", "--topic", topic, "--partitions", "2")
    assert r.returncode == 1
    assert r.stderr.startswith("Error while executing topic command : ")
    assert len(r.stderr.splitlines()) == 1

    r = pylog("topics", "--bootstrap-server", b, "--delete", "--topic", topic)
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""
    r = pylog("topics", "--bootstrap-server", b, "--list")
    assert topic not in r.stdout.splitlines()


def test_create_existing_is_one_line_error(pylog, tool_broker, topic):
    b = tool_broker.bootstrap
    assert pylog("topics", "--bootstrap-server", b, "--create", "--topic", topic).returncode == 0
    r = pylog("topics", "--bootstrap-server", b, "--create", "--topic", topic)
    assert r.returncode == 1
    assert r.stderr == (f"Error while executing topic command : Topic '{topic}' "
                        "already exists.\n")
    r = pylog("topics", "--bootstrap-server", b, "--create", "--topic", topic, "--if-not-exists")
    assert r.returncode == 0 and r.stdout == "" and r.stderr == ""


def test_unknown_topic_and_bad_flags(pylog, tool_broker):
    b = tool_broker.bootstrap
    r = pylog("topics", "--bootstrap-server", b, "--describe", "--topic", "no-such-topic")
    assert r.returncode == 1
    assert r.stderr == ("Error while executing topic command : Topic 'no-such-topic' does not "
                        "exist as expected\n")
    r = pylog("topics", "--bootstrap-server", b, "--delete", "--topic", "no-such-topic")
    assert r.returncode == 1 and len(r.stderr.splitlines()) == 1
    r = pylog("topics", "--bootstrap-server", b, "--create", "--topic", "rf3",
              "--replication-factor", "3")
    assert r.returncode == 1
    assert "larger than available brokers: 1" in r.stderr
    r = pylog("topics", "--bootstrap-server", b)  # no action
    assert r.returncode == 1 and "exactly one action" in r.stderr
    r = pylog("topics", "--bootstrap-server", b, "--list", "--no-such-flag")
    assert r.returncode == 2 and "unrecognized arguments" in r.stderr


def test_unreachable_broker_fails_fast(pylog):
    r = pylog("topics", "--bootstrap-server", "127.0.0.1:1", "--list", timeout=30)
    assert r.returncode == 1
    assert len(r.stderr.splitlines()) == 1
    assert r.stderr.startswith("Error while executing topic command : ")
