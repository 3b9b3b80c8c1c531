"""Kafka 3.6 tool flags pylog's tools lacked, each against a real broker (one
section per tool)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from broker_process import BrokerProcess
from confluent_kafka import Consumer, Producer, TopicPartition


def _ok(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 0, (r.stdout, r.stderr)
    return r.stdout


def _create(pylog, b: str, topic: str, *extra: str) -> None:
    _ok(pylog("topics", "--bootstrap-server", b, "--create", "--topic", topic, *extra))


# -- topics --topic-id -----------------------------------------------------------

def test_topics_describe_by_topic_id(pylog, tool_broker, topic) -> None:
    b = tool_broker.bootstrap
    _create(pylog, b, topic, "--partitions", "2")
    by_name = _ok(pylog("topics", "--bootstrap-server", b, "--describe", "--topic", topic))
    fields = dict(f.split(": ", 1) for f in by_name.splitlines()[0].split("\t"))
    topic_id = fields["TopicId"]
    by_id = _ok(pylog("topics", "--bootstrap-server", b, "--describe", "--topic-id", topic_id))
    assert by_id == by_name

    unknown = "AAAAAAAAAAAAAAAAAAAAAQ"  # a valid id no topic has
    r = pylog("topics", "--bootstrap-server", b, "--describe", "--topic-id", unknown)
    assert r.returncode == 1
    assert r.stderr == (f"Error while executing topic command : TopicId '{unknown}' does not "
                        "exist as expected\n")
    r = pylog("topics", "--bootstrap-server", b, "--describe", "--topic-id", unknown,
              "--if-exists")
    assert r.returncode == 0 and r.stdout == ""
    r = pylog("topics", "--bootstrap-server", b, "--describe", "--topic-id", "abc")
    assert r.returncode == 1
    assert ("Input string `abc` decoded as 2 bytes, which is not equal to the expected 16 "
            "bytes of a base64-encoded UUID") in r.stderr
    r = pylog("topics", "--bootstrap-server", b, "--create", "--topic", "x", "--topic-id",
              topic_id)
    assert r.returncode == 1
    assert r.stderr == 'Option "[topic-id]" can\'t be used with option "[create]"\n'


# -- consumer-groups --all-groups, --export, --from-file ---------------------------

@pytest.fixture
def groups_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker of the test's own: --all-groups acts on every group it has."""
    b = BrokerProcess(tmp_path / "data", "group.initial.rebalance.delay.ms=0").start()
    yield b
    b.stop()


def _commit(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    """Commit as a consumer outside the group would: an Empty group with offsets."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        c.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()],
                 asynchronous=False)
    finally:
        c.close()


def _committed(pylog, b: str, group: str) -> dict[tuple[str, str], str]:
    out = _ok(pylog("consumer-groups", "--bootstrap-server", b, "--describe", "--group", group))
    rows = [line.split() for line in out.splitlines() if line.strip()][1:]
    return {(r[1], r[2]): r[3] for r in rows}


def test_consumer_groups_all_groups_export_and_from_file(pylog, groups_broker,
                                                         tmp_path) -> None:
    b = groups_broker.bootstrap
    _create(pylog, b, "t", "--partitions", "2")
    producer = Producer({"bootstrap.servers": b})
    for i in range(20):
        producer.produce("t", str(i).encode(), partition=i % 2)  # 10 in each partition
    assert producer.flush(30) == 0
    _commit(b, "g1", "t", {0: 4, 1: 5})
    _commit(b, "g2", "t", {0: 1})
    cg = ["consumer-groups", "--bootstrap-server", b]

    out = _ok(pylog(*cg, "--describe", "--all-groups"))
    rows = [line.split() for line in out.splitlines() if line.strip()]
    assert [r[:4] for r in rows if r[0] != "GROUP"] == [
        ["g1", "t", "0", "4"], ["g1", "t", "1", "5"], ["g2", "t", "0", "1"]]

    # --export: group,topic,partition,offset for several groups; a dry run.
    r = pylog(*cg, "--reset-offsets", "--all-groups", "--all-topics", "--to-earliest",
              "--export", "--dry-run")
    assert _ok(r) == "g1,t,0,0\ng1,t,1,0\ng2,t,0,0\n\n"
    assert _committed(pylog, b, "g1") == {("t", "0"): "4", ("t", "1"): "5"}

    # One group: topic,partition,offset; then that plan back with --from-file.
    plan = tmp_path / "plan.csv"
    plan.write_text(_ok(pylog(*cg, "--reset-offsets", "--group", "g1", "--topic", "t",
                              "--to-offset", "2", "--export", "--dry-run")))
    assert plan.read_text() == "t,0,2\nt,1,2\n\n"
    _ok(pylog(*cg, "--reset-offsets", "--group", "g1", "--from-file", str(plan), "--execute"))
    assert _committed(pylog, b, "g1") == {("t", "0"): "2", ("t", "1"): "2"}

    # A plan for several groups; out of range offsets are clamped to the log.
    plan.write_text("g1,t,0,7\ng2,t,0,99\n")
    out = _ok(pylog(*cg, "--reset-offsets", "--all-groups", "--from-file", str(plan),
                    "--execute"))
    assert [line.split() for line in out.splitlines() if line.strip()][1:] == [
        ["g1", "t", "0", "7"], ["g2", "t", "0", "10"]]
    assert _committed(pylog, b, "g1") == {("t", "0"): "7", ("t", "1"): "2"}

    r = pylog(*cg, "--reset-offsets", "--group", "g1", "--topic", "t", "--to-latest",
              "--to-earliest")
    assert r.returncode == 1
    assert r.stderr == 'Error: Option "[to-earliest]" can\'t be used with option "[to-latest]"\n'
    r = pylog(*cg, "--describe", "--group", "g1", "--all-groups")
    assert r.returncode == 1
    assert r.stderr == 'Error: Option "[group]" can\'t be used with option "[all-groups]"\n'

    out = _ok(pylog(*cg, "--delete", "--all-groups"))
    assert out == "Deletion of requested consumer groups ('g1', 'g2') was successful.\n"
    assert _ok(pylog(*cg, "--list")) == ""


# -- configs' entity shortcuts -------------------------------------------------------

def test_configs_entity_shortcuts(pylog, tool_broker, topic) -> None:
    b = tool_broker.bootstrap
    user, client = f"u-{topic}", f"c-{topic}"
    configs = ["configs", "--bootstrap-server", b]
    # --client before --user: Kafka's (user, client-id) order is restored.
    _ok(pylog(*configs, "--alter", "--client", client, "--user", user,
              "--add-config", "producer_byte_rate=104857600"))
    out = _ok(pylog(*configs, "--describe", "--user", user, "--client", client))
    assert out == (f"Quota configs for user-principal '{user}', client-id '{client}' are "
                   "producer_byte_rate=104857600.0\n")
    out = _ok(pylog(*configs, "--describe", "--entity-type", "clients", "--entity-name",
                    client, "--entity-type", "users", "--entity-name", user))
    assert "producer_byte_rate=104857600.0" in out
    _ok(pylog(*configs, "--alter", "--user", user, "--client", client,
              "--delete-config", "producer_byte_rate"))
    assert _ok(pylog(*configs, "--describe", "--user", user, "--client", client)) == ""

    _ok(pylog(*configs, "--alter", "--client-defaults", "--add-config",
              "consumer_byte_rate=104857600"))
    out = _ok(pylog(*configs, "--describe", "--client-defaults"))
    assert out == "Quota configs for the default client-id are consumer_byte_rate=104857600.0\n"
    _ok(pylog(*configs, "--alter", "--client-defaults", "--delete-config",
              "consumer_byte_rate"))

    out = _ok(pylog(*configs, "--describe", "--broker-logger", "0"))
    assert out.splitlines()[0] == "Dynamic configs for broker-logger 0 are:"

    _create(pylog, b, topic)
    out = _ok(pylog(*configs, "--alter", "--topic", topic, "--add-config", "retention.ms=1000",
                    "--force"))
    assert out == f"Completed updating config for topic {topic}.\n"

    r = pylog(*configs, "--describe", "--entity-type", "topics", "--topic", topic)
    assert r.returncode == 1
    assert r.stderr == ("--entity-{type,name,default} should not be used in conjunction with "
                        "specific entity flags\n")
    r = pylog(*configs, "--describe", "--user", "a", "--user-defaults")
    assert r.returncode == 1 and r.stderr == "Duplicate entity type(s) specified: users\n"


# -- console producer and consumer ---------------------------------------------------

def test_console_producer_reader_config_and_client_flags(pylog, tool_broker, topic,
                                                         tmp_path) -> None:
    b = tool_broker.bootstrap
    reader = tmp_path / "reader.properties"
    reader.write_text("parse.key=true\nkey.separator=:\n")
    # --property wins over --reader-config; --broker-list stands in for --bootstrap-server.
    _ok(pylog("console-producer", "--broker-list", b, "--topic", topic,
              "--reader-config", str(reader), "--property", "key.separator=|",
              "--line-reader", "kafka.tools.ConsoleProducer$LineMessageReader",
              "--retry-backoff-ms", "50", "--metadata-expiry-ms", "10000",
              "--socket-buffer-size", "65536", "--max-partition-memory-bytes", "32768",
              "--max-memory-bytes", "1048576", "--max-block-ms", "5000",
              stdin="a|1\nb|2\n"))
    formatter = tmp_path / "formatter.properties"
    formatter.write_text("print.key=true\nkey.separator=-\n")
    out = _ok(pylog("console-consumer", "--bootstrap-server", b, "--topic", topic,
                    "--from-beginning", "--max-messages", "2", "--formatter-config",
                    str(formatter), "--formatter", "kafka.tools.DefaultMessageFormatter"))
    assert out == "a-1\nb-2\n"
    # --property wins over --formatter-config.
    out = _ok(pylog("console-consumer", "--bootstrap-server", b, "--topic", topic,
                    "--from-beginning", "--max-messages", "2", "--formatter-config",
                    str(formatter), "--property", "print.key=false"))
    assert out == "1\n2\n"


def test_console_producer_max_block_ms(pylog, tool_broker, topic) -> None:
    """A record that cannot get room in the client's queue (--max-memory-bytes)
    within --max-block-ms is reported as Kafka's send() reports it; the next
    one is sent."""
    b = tool_broker.bootstrap
    r = pylog("console-producer", "--bootstrap-server", b, "--topic", topic,
              "--max-memory-bytes", "1024", "--max-block-ms", "100",
              stdin="x" * 4000 + "\nsmall\n")
    assert r.returncode == 0, r.stderr  # asynchronous failures are only logged
    assert r.stderr == (f"Error when sending message to topic {topic} with key: null, value: "
                        "4000 bytes with error: Failed to allocate memory within the "
                        "configured max blocking time 100 ms.\n")
    out = _ok(pylog("console-consumer", "--bootstrap-server", b, "--topic", topic,
                    "--from-beginning", "--max-messages", "1"))
    assert out == "small\n"


def test_console_tools_refuse_other_classes(pylog, tool_broker, topic) -> None:
    b = tool_broker.bootstrap
    r = pylog("console-producer", "--bootstrap-server", b, "--topic", topic,
              "--line-reader", "com.example.Reader", stdin="x\n")
    assert r.returncode == 1
    assert r.stderr == ("--line-reader com.example.Reader is not supported by pylog: it reads "
                        "lines with Kafka's default reader "
                        "(kafka.tools.ConsoleProducer$LineMessageReader) only\n")
    r = pylog("console-consumer", "--bootstrap-server", b, "--topic", topic,
              "--formatter", "kafka.tools.LoggingMessageFormatter")
    assert r.returncode == 1
    assert r.stderr.startswith("--formatter kafka.tools.LoggingMessageFormatter is not "
                               "supported by pylog")


# -- perf tests and get-offsets -------------------------------------------------------

def test_producer_perf_transactions(pylog, tool_broker, topic) -> None:
    b = tool_broker.bootstrap
    _create(pylog, b, topic)
    txn_id = f"perf-{topic}"[:200]
    _ok(pylog("producer-perf-test", "--topic", topic, "--num-records", "500",
              "--record-size", "10", "--throughput", "2000", "--producer-props",
              f"bootstrap.servers={b}", "--transaction-duration-ms", "50",
              "--transactional-id", txn_id))
    # Committed: read_committed sees every record, and the log holds commit markers.
    r = pylog("console-consumer", "--bootstrap-server", b, "--topic", topic,
              "--from-beginning", "--isolation-level", "read_committed",
              "--max-messages", "500", "--timeout-ms", "10000")
    assert r.returncode == 0 and len(r.stdout.splitlines()) == 500
    end = int(_ok(pylog("get-offsets", "--broker-list", b, "--topic", topic)).split(":")[2])
    assert end > 500  # the 500 records and the commit markers after them
    out = _ok(pylog("transactions", "--bootstrap-server", b, "describe",
                    "--transactional-id", txn_id))
    assert "CompleteCommit" in out


def test_consumer_perf_print_metrics(pylog, tool_broker, topic) -> None:
    b = tool_broker.bootstrap
    _ok(pylog("console-producer", "--bootstrap-server", b, "--topic", topic,
              stdin="".join(f"{i}\n" for i in range(10))))
    out = _ok(pylog("consumer-perf-test", "--broker-list", b, "--topic", topic,
                    "--messages", "10", "--print-metrics", "--hide-header"))
    lines = out.splitlines()
    assert lines[2].split() == ["Metric", "Name", "Value"]
    metrics = dict(line.rsplit(" : ", 1) for line in lines[3:])
    metrics = {k.strip(): float(v) for k, v in metrics.items()}
    tags = "{client-id=perf-consumer-client}"
    assert metrics[f"consumer-fetch-manager-metrics:records-consumed-total:{tags}"] == 10
    assert metrics[f"consumer-fetch-manager-metrics:bytes-consumed-total:{tags}"] >= 10
    assert metrics[f"consumer-metrics:connection-count:{tags}"] == 1
