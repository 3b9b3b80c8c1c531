"""Kafka 3.6 tool behaviours pylog's tools lacked: get-offsets --topic-partitions,
console-consumer --include and its option checks, deserializers and
auto.offset.reset=none, topics --topics-with-overrides / --replica-assignment and
option conflicts, configs --delete-config and --describe of every entity, and the
console producer's send failures and header separators."""

from __future__ import annotations

import subprocess
import time

SERDE = "org.apache.kafka.common.serialization."


def _create(pylog, b: str, topic: str, *extra: str) -> None:
    r = pylog("topics", "--bootstrap-server", b, "--create", "--topic", topic, *extra)
    assert r.returncode == 0, r.stderr


def _produce(pylog, b: str, topic: str, text: str, *extra: str) -> subprocess.CompletedProcess:
    return pylog("console-producer", "--bootstrap-server", b, "--topic", topic, *extra, stdin=text)


def _fails(r: subprocess.CompletedProcess, stderr: str) -> None:
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert r.stderr == stderr + "\n"


def test_get_offsets_topic_partitions(pylog, tool_broker, topic):
    b = tool_broker.bootstrap
    _create(pylog, b, f"{topic}-a", "--partitions", "4")
    _create(pylog, b, f"{topic}-b", "--partitions", "2")

    def selected(spec: str) -> list[str]:
        r = pylog(
            "get-offsets", "--bootstrap-server", b, "--topic-partitions", spec, "--time", "-2"
        )
        assert r.returncode == 0, r.stderr
        return r.stdout.split()

    # Ranges exclude their upper bound; "t:" and "t" are every partition; topics are regexes.
    assert selected(f"{topic}-a:1-3,{topic}-b:") == [
        f"{topic}-a:1:0",
        f"{topic}-a:2:0",
        f"{topic}-b:0:0",
        f"{topic}-b:1:0",
    ]
    assert selected(f"{topic}-[ab]:1") == [f"{topic}-a:1:0", f"{topic}-b:1:0"]
    assert selected(f"{topic}-.:3-,{topic}-b:-1") == [f"{topic}-a:3:0", f"{topic}-b:0:0"]
    assert selected(f"{topic}-b") == [f"{topic}-b:0:0", f"{topic}-b:1:0"]

    r = pylog(
        "get-offsets",
        "--bootstrap-server",
        b,
        "--topic-partitions",
        f"{topic}-a:0",
        "--partitions",
        "0",
    )
    _fails(r, "--topic-partitions cannot be used with --topic or --partitions")
    r = pylog("get-offsets", "--bootstrap-server", b, "--topic-partitions", f"{topic}-a:x")
    _fails(r, f"Invalid rule specification: {topic}-a:x")


def test_console_consumer_include(pylog, pylog_cmd, tool_broker, topic):
    b = tool_broker.bootstrap
    for suffix in ("1", "2", "x"):
        assert (
            _produce(pylog, b, f"{topic}-{suffix}", f"{suffix}a\n{suffix}b\n", "--sync").returncode
            == 0
        )
    regex = f"{topic}-[0-9]"
    for flag in ("--include", "--whitelist"):
        r = pylog(
            "console-consumer",
            "--bootstrap-server",
            b,
            flag,
            regex,
            "--from-beginning",
            "--max-messages",
            "4",
            "--timeout-ms",
            "10000",
        )
        assert r.returncode == 0, r.stderr
        assert sorted(r.stdout.split()) == ["1a", "1b", "2a", "2b"]

    r = pylog(
        "console-consumer",
        "--bootstrap-server",
        b,
        "--topic",
        f"{topic}-1",
        "--include",
        regex,
        "--timeout-ms",
        "1000",
    )
    _fails(r, "Exactly one of --include/--topic is required. ")

    # A topic created after the consumer started is picked up once it matches.
    later = f"{topic}-later-{time.monotonic_ns()}"
    proc = subprocess.Popen(
        [
            *pylog_cmd,
            "console-consumer",
            "--bootstrap-server",
            b,
            "--include",
            f"{later}-.*",
            "--from-beginning",
            "--max-messages",
            "2",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert _produce(pylog, b, f"{later}-1", "first\n", "--sync").returncode == 0
        assert _produce(pylog, b, f"{later}-2", "second\n", "--sync").returncode == 0
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert sorted(out.split()) == ["first", "second"]


def test_console_consumer_option_conflicts(pylog, tool_broker, topic, tmp_path):
    b = tool_broker.bootstrap
    consume = (
        "console-consumer",
        "--bootstrap-server",
        b,
        "--topic",
        topic,
        "--timeout-ms",
        "1000",
    )
    r = pylog(*consume, "--group", "g1", "--partition", "0")
    _fails(r, "Options group and partition cannot be specified together.")
    r = pylog(*consume, "--consumer-property", "group.id=g1", "--partition", "0")
    _fails(r, "Options group and partition cannot be specified together.")
    mismatch = (
        "The group ids provided in different places (directly using '--group', via "
        "'--consumer-property', or via '--consumer.config') do not match. Detected "
        "group ids: 'g1', 'g2'"
    )
    r = pylog(*consume, "--group", "g1", "--consumer-property", "group.id=g2")
    _fails(r, mismatch)
    config = tmp_path / "consumer.properties"
    config.write_text("group.id=g2\n")
    r = pylog(*consume, "--group", "g1", "--consumer.config", str(config))
    _fails(r, mismatch)
    r = pylog(*consume, "--from-beginning", "--consumer-property", "auto.offset.reset=latest")
    _fails(
        r,
        "Can't simultaneously specify --from-beginning and 'auto.offset.reset=latest', "
        "please remove one option",
    )
    r = pylog(*consume, "--include", f"{topic}.*", "--partition", "0")
    _fails(r, "Exactly one of --include/--topic is required. ")

    # Without a group, the reset policy decides where each partition starts.
    assert _produce(pylog, b, topic, "a\nb\n", "--sync").returncode == 0
    r = pylog(*consume, "--consumer-property", "auto.offset.reset=earliest")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "a\nb\n"


def test_console_consumer_deserializers(pylog, tool_broker, topic):
    b = tool_broker.bootstrap
    text = "k1\tabcd\nk2\ttoo long\n"
    assert _produce(pylog, b, topic, text, "--sync", "--property", "parse.key=true").returncode == 0
    consume = (
        "console-consumer",
        "--bootstrap-server",
        b,
        "--topic",
        topic,
        "--from-beginning",
        "--timeout-ms",
        "10000",
        "--property",
        "print.key=true",
    )
    r = pylog(
        *consume,
        "--max-messages",
        "2",
        "--key-deserializer",
        SERDE + "StringDeserializer",
        "--value-deserializer",
        SERDE + "ByteArrayDeserializer",
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == text
    # The first value is 4 bytes, a big-endian int; the second is not.
    r = pylog(
        *consume, "--max-messages", "1", "--value-deserializer", SERDE + "IntegerDeserializer"
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == "k1\t1633837924\n"
    r = pylog(*consume, "--value-deserializer", SERDE + "IntegerDeserializer")
    assert r.returncode == 1
    assert r.stdout == "k1\t1633837924\n"
    assert r.stderr.splitlines() == [
        "Processed a total of 2 messages",
        "Unknown error when running consumer: org.apache.kafka.common.errors."
        "SerializationException: Size of data received by IntegerDeserializer is not 4",
    ]
    r = pylog(*consume, "--value-deserializer", "com.example.NoSuchDeserializer")
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.startswith("value.deserializer com.example.NoSuchDeserializer: ")


def test_console_consumer_offset_reset_none_without_committed_offset(pylog, tool_broker, topic):
    b = tool_broker.bootstrap
    _create(pylog, b, topic, "--partitions", "1")
    # Kafka's ConsoleConsumer logs what poll() threw and ends normally (status 0).
    for group in (("--group", f"{topic}-g"), ()):
        r = pylog(
            "console-consumer",
            "--bootstrap-server",
            b,
            "--topic",
            topic,
            *group,
            "--consumer-property",
            "auto.offset.reset=none",
            "--timeout-ms",
            "10000",
        )
        assert r.returncode == 0, r.stderr
        lines = r.stderr.splitlines()
        assert lines[0].endswith(
            " ERROR Error processing message, terminating consumer "
            "process:  (kafka.tools.ConsoleConsumer$)"
        )
        assert lines[1:] == [
            "org.apache.kafka.clients.consumer.NoOffsetForPartitionException: Undefined "
            f"offset with no reset policy for partitions: [{topic}-0]",
            "Processed a total of 0 messages",
        ]


def test_topics_with_overrides(pylog, tool_broker, topic):
    b = tool_broker.bootstrap
    _create(pylog, b, f"{topic}-o", "--config", "retention.ms=86400000", "--partitions", "2")
    _create(pylog, b, f"{topic}-p")
    r = pylog(
        "topics",
        "--bootstrap-server",
        b,
        "--describe",
        "--topic",
        f"{topic}-.*",
        "--topics-with-overrides",
    )
    assert r.returncode == 0, r.stderr
    (line,) = r.stdout.splitlines()  # the topic line only, no partition lines
    fields = line.split("\t")
    assert fields[0] == f"Topic: {topic}-o" and fields[1].startswith("TopicId: ")
    assert fields[2:] == [
        "PartitionCount: 2",
        "ReplicationFactor: 1",
        "Configs: retention.ms=86400000",
    ]


def test_topics_replica_assignment(pylog, tool_broker, topic):
    b = tool_broker.bootstrap
    topics = ("topics", "--bootstrap-server", b)
    r = pylog(*topics, "--create", "--topic", topic, "--replica-assignment", "0,0,0")
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"Created topic {topic}.\n"
    r = pylog(
        *topics, "--alter", "--topic", topic, "--partitions", "4", "--replica-assignment", "0,0,0,0"
    )
    assert r.returncode == 0, r.stderr
    r = pylog(*topics, "--describe", "--topic", topic)
    assert [line.split("\t")[2:] for line in r.stdout.splitlines()[1:]] == [
        [f"Partition: {p}", "Leader: 0", "Replicas: 0", "Isr: 0"] for p in range(4)
    ]

    prefix = "Error while executing topic command : "
    create = (*topics, "--create", "--topic", f"{topic}-bad", "--replica-assignment")
    _fails(
        pylog(*create, "0,7"),
        prefix + "The manual partition assignment includes broker 7, "
        "but no such broker is registered.",
    )
    _fails(
        pylog(*create, "0:0"),
        prefix + "Partition replica lists may not contain duplicate entries: 0",
    )
    _fails(pylog(*create, "0,x"), prefix + 'For input string: "x"')
    _fails(
        pylog(*create, "0", "--partitions", "2"),
        'Option "[replica-assignment]" can\'t be used with option "[partitions]"',
    )
    assert f"{topic}-bad" not in pylog(*topics, "--list").stdout.split()


def test_topics_option_conflicts(pylog, tool_broker, topic):
    topics = ("topics", "--bootstrap-server", tool_broker.bootstrap)
    for args, message in [
        (
            ("--describe", "--partitions", "3"),
            '"[partitions]" can\'t be used with option "[describe]"',
        ),
        (
            ("--list", "--config", "retention.ms=1"),
            '"[config]" can\'t be used with option "[list]"',
        ),
        (
            ("--describe", "--replica-assignment", "0"),
            '"[replica-assignment]" can\'t be used with option "[describe]"',
        ),
        (
            ("--list", "--topics-with-overrides"),
            '"[topics-with-overrides]" can\'t be used with option "[list]"',
        ),
        (
            ("--describe", "--topics-with-overrides", "--unavailable-partitions"),
            '"[unavailable-partitions]" can\'t be used with option "[topics-with-overrides]"',
        ),
        (("--list", "--if-exists"), '"[if-exists]" can\'t be used with option "[list]"'),
        (
            ("--create", "--topic", topic, "--exclude-internal"),
            '"[exclude-internal]" can\'t be used with option "[create]"',
        ),
    ]:
        _fails(pylog(*topics, *args), "Option " + message)


def test_configs_delete_config_that_is_not_overridden(pylog, tool_broker, topic):
    b = tool_broker.bootstrap
    _create(pylog, b, topic, "--config", "retention.ms=3600000")
    alter = (
        "configs",
        "--bootstrap-server",
        b,
        "--entity-type",
        "topics",
        "--entity-name",
        topic,
        "--alter",
        "--delete-config",
    )
    # A valid name the topic does not override: Kafka's InvalidConfigurationException.
    _fails(pylog(*alter, "segment.bytes"), "Invalid config(s): segment.bytes")
    _fails(
        pylog(*alter, "retention.ms,segment.bytes,no.such.config"),
        "Invalid config(s): segment.bytes,no.such.config",
    )
    r = pylog(*alter, "retention.ms")
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"Completed updating config for topic {topic}.\n"
    _fails(pylog(*alter, "retention.ms"), "Invalid config(s): retention.ms")


def test_configs_describe_every_entity(pylog, tool_broker):
    b = tool_broker.bootstrap
    r = pylog("configs", "--bootstrap-server", b, "--entity-type", "brokers", "--describe")
    assert r.returncode == 0, r.stderr
    headers = [line for line in r.stdout.splitlines() if not line.startswith("  ")]
    assert headers == [
        "Dynamic configs for broker 0 are:",
        "Default configs for brokers in the cluster are:",
    ]
    # Every topic, internal ones included (kafka-topics --list shows them too).
    listed = pylog("topics", "--bootstrap-server", b, "--list").stdout.split()
    r = pylog("configs", "--bootstrap-server", b, "--entity-type", "topics", "--describe")
    assert r.returncode == 0, r.stderr
    described = [
        line.removeprefix("Dynamic configs for topic ").removesuffix(" are:")
        for line in r.stdout.splitlines()
        if not line.startswith("  ")
    ]
    assert sorted(described) == sorted(listed)


def test_console_producer_send_failures(pylog, tool_broker, topic):
    b = tool_broker.bootstrap
    _create(pylog, b, topic, "--config", "max.message.bytes=200")
    big = "x" * 500
    error = (
        f"Error when sending message to topic {topic} with key: null, value: 500 bytes with error: "
    )
    # Asynchronous: the failure is logged, the exit status stays 0 (ErrorLoggingCallback).
    r = _produce(pylog, b, topic, big + "\n")
    assert r.returncode == 0, r.stderr
    assert r.stderr.startswith(error)
    # --sync: the failed send ends the run, status 1; the next line is never sent.
    r = _produce(pylog, b, topic, f"ok1\n{big}\nok2\n", "--sync")
    assert r.returncode == 1
    assert r.stderr.startswith(error) and len(r.stderr.splitlines()) == 1
    r = pylog("get-offsets", "--bootstrap-server", b, "--topic", topic)
    assert r.stdout == f"{topic}:0:1\n"


def test_console_producer_header_separators(pylog, tool_broker, topic):
    b = tool_broker.bootstrap
    headers = ("--property", "parse.headers=true")
    # Kafka splits headers with headers.separator as a regular expression: an empty one
    # splits between characters, and "h" has no key separator.
    r = _produce(pylog, b, topic, "h1:v1\tval\n", *headers, "--property", "headers.separator=")
    _fails(r, "No header key separator found in pair 'h' on line number 1")
    r = _produce(pylog, b, topic, "h1\tval\n", *headers)
    _fails(r, "No header key separator found in pair 'h1' on line number 1")
    r = _produce(
        pylog,
        b,
        topic,
        "h1:v1\tval\n",
        *headers,
        "--property",
        "headers.separator=",
        "--property",
        "headers.key.separator=",
    )
    _fails(r, "headers.separator and headers.key.separator may not be equal")
    # An empty headers.key.separator matches at 0: the key is empty, the value the pair.
    r = _produce(
        pylog,
        b,
        topic,
        "h1:v1|h2:v2\tval\n",
        *headers,
        "--sync",
        "--property",
        "headers.key.separator=",
        "--property",
        "headers.separator=[|]",
    )
    assert r.returncode == 0, r.stderr
    r = pylog(
        "console-consumer",
        "--bootstrap-server",
        b,
        "--topic",
        topic,
        "--from-beginning",
        "--max-messages",
        "1",
        "--timeout-ms",
        "10000",
        "--property",
        "print.headers=true",
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == ":h1:v1,:h2:v2\tval\n"
