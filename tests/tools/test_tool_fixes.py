"""Behaviours where pylog's tools had drifted from Kafka 3.6's: separators kept
verbatim, get-offsets past the last record, the broker default in configs, Java
client property names, SIGTERM, and consuming a topic that does not exist yet."""

from __future__ import annotations

import fcntl
import signal
import struct
import subprocess
import termios
import time
from pathlib import Path

import pytest

WARN = "WARN The configuration 'bogus.prop' was supplied but isn't a known config."


def _produce(pylog, bootstrap: str, topic: str, text: str, *extra: str) -> None:
    r = pylog("console-producer", "--bootstrap-server", bootstrap, "--topic", topic, "--sync",
              *extra, stdin=text)
    assert r.returncode == 0, r.stderr


def test_key_separator_is_kept_verbatim(pylog, tool_broker, topic):
    b = tool_broker.bootstrap
    # Kafka's parseKeyValueArgs neither trims nor unescapes: ' ' is a space, '\' a backslash.
    _produce(pylog, b, topic, "k1 v1\n", "--property", "parse.key=true",
             "--property", "key.separator= ")
    _produce(pylog, b, topic, "k2\\v2\n", "--property", "parse.key=true",
             "--property", "key.separator=\\")
    consume = ("console-consumer", "--bootstrap-server", b, "--topic", topic,
               "--from-beginning", "--max-messages", "2", "--timeout-ms", "10000",
               "--property", "print.key=true")
    r = pylog(*consume, "--property", "key.separator= => ")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "k1 => v1\nk2 => v2\n"
    r = pylog(*consume, "--property", "key.separator=\\")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "k1\\v1\nk2\\v2\n"
    r = pylog(*consume, "--property", "key.separator=é\t")  # UTF-8, not latin-1 mojibake
    assert r.stdout == "k1é\tv1\nk2é\tv2\n"


def test_get_offsets_omits_partitions_without_an_offset_for_the_time(pylog, tool_broker,
                                                                     topic):
    b = tool_broker.bootstrap
    _produce(pylog, b, topic, "a\nb\n")
    r = pylog("get-offsets", "--bootstrap-server", b, "--topic", topic, "--time", "0")
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"{topic}:0:0\n"
    # Past every record's timestamp: ListOffsets answers -1, and Kafka prints no line.
    r = pylog("get-offsets", "--bootstrap-server", b, "--topic", topic,
              "--time", "9995357336000")
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""


def test_configs_broker_default(pylog, tool_broker):
    b = tool_broker.bootstrap
    for flags in (("--entity-type", "brokers", "--entity-default"), ("--broker-defaults",)):
        r = pylog("configs", "--bootstrap-server", b, *flags, "--describe")
        assert r.returncode == 0, r.stderr
        assert r.stdout == "Default configs for brokers in the cluster are:\n"
    # As Kafka: the default resource holds only the dynamic defaults, --all or not.
    r = pylog("configs", "--bootstrap-server", b, "--broker-defaults", "--describe", "--all")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "Default configs for brokers in the cluster are:\n"
    # The request reaches the broker, whose answer (a key Kafka too only reads
    # at start) is the error shown.
    r = pylog("configs", "--bootstrap-server", b, "--entity-type", "brokers",
              "--entity-default", "--alter", "--add-config", "log.cleaner.enable=false")
    assert r.returncode == 1 and len(r.stderr.splitlines()) == 1
    assert "Invalid ConfigResource" not in r.stderr
    assert r.stderr.rstrip().endswith(
        "Cannot update these configs dynamically: Set(log.cleaner.enable)")
    # A topic default pylog applies while running: set, shown, deleted.
    alter = ("configs", "--bootstrap-server", b, "--entity-type", "brokers",
             "--entity-default", "--alter")
    r = pylog(*alter, "--add-config", "log.retention.bytes=1000000000")
    assert r.returncode == 0, r.stderr
    r = pylog("configs", "--bootstrap-server", b, "--broker-defaults", "--describe")
    assert r.stdout.splitlines()[1].startswith("  log.retention.bytes=1000000000 ")
    r = pylog(*alter, "--delete-config", "log.retention.bytes")
    assert r.returncode == 0, r.stderr


def test_java_client_property_names(pylog, tool_broker, topic):
    b = tool_broker.bootstrap
    group = f"{topic}-g"
    r = pylog("console-producer", "--bootstrap-server", b, "--topic", topic,
              "--producer-property", "metadata.max.idle.ms=1000",
              "--producer-property", "bogus.prop=1", stdin="a\nb\nc\n")
    assert r.returncode == 0, r.stderr
    assert WARN in r.stderr
    r = pylog("console-consumer", "--bootstrap-server", b, "--topic", topic, "--group", group,
              "--from-beginning", "--max-messages", "1", "--timeout-ms", "10000",
              "--consumer-property", "fetch.max.wait.ms=100",
              "--consumer-property",
              "partition.assignment.strategy=org.apache.kafka.clients.consumer.RoundRobinAssignor",
              "--consumer-property", "bogus.prop=1")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "a\n" and WARN in r.stderr
    # auto.offset.reset=none (librdkafka: error) is valid with a committed offset.
    r = pylog("console-consumer", "--bootstrap-server", b, "--topic", topic, "--group", group,
              "--max-messages", "2", "--timeout-ms", "10000",
              "--consumer-property", "auto.offset.reset=none")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "b\nc\n"


def _group_offsets(pylog, bootstrap: str, group: str, topic: str) -> list[str]:
    r = pylog("consumer-groups", "--bootstrap-server", bootstrap, "--describe",
              "--group", group)
    assert r.returncode == 0, r.stderr
    rows = [line.split() for line in r.stdout.splitlines()]
    return [row[3] for row in rows if len(row) > 3 and row[1] == topic]


def test_sigterm_stops_console_consumer_gracefully(pylog, pylog_cmd, tool_broker, topic):
    b = tool_broker.bootstrap
    group = f"{topic}-g"
    _produce(pylog, b, topic, "a\nb\nc\n")
    proc = subprocess.Popen([*pylog_cmd, "console-consumer", "--bootstrap-server", b,
                             "--topic", topic, "--group", group, "--from-beginning"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines = [proc.stdout.readline() for _ in range(3)]
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert lines == ["a\n", "b\n", "c\n"]
    # The JVM's status after its shutdown hooks ran; not killed by the signal (-15).
    assert proc.returncode == 143, err
    assert err.splitlines()[-1] == "Processed a total of 3 messages"
    assert _group_offsets(pylog, b, group, topic) == ["3"]  # committed on close


def _pipe_pending(fd: int) -> int:
    buf = fcntl.ioctl(fd, termios.FIONREAD, struct.pack("i", 0))
    return struct.unpack("i", buf)[0]


def _reading_stdin(pid: int) -> bool:
    """The main thread blocked in read(0, ...): every line before was handled."""
    fields = Path(f"/proc/{pid}/syscall").read_text().split()
    return fields[:2] == ["0", "0x0"]


def test_sigterm_flushes_console_producer(pylog, pylog_cmd, tool_broker, topic):
    if not Path("/proc/self/syscall").exists():
        pytest.skip("needs /proc/<pid>/syscall to see the producer wait for input")
    b = tool_broker.bootstrap
    pylog("topics", "--bootstrap-server", b, "--create", "--topic", topic)
    # linger.ms of 200 s: the record can only reach the broker by the flush.
    proc = subprocess.Popen([*pylog_cmd, "console-producer", "--bootstrap-server", b,
                             "--topic", topic, "--timeout", "200000"],
                            stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        proc.stdin.write(b"hello\n")
        proc.stdin.flush()
        while _pipe_pending(proc.stdin.fileno()) or not _reading_stdin(proc.pid):
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 143, err
    r = pylog("get-offsets", "--bootstrap-server", b, "--topic", topic)
    assert r.stdout == f"{topic}:0:1\n"


def test_console_consumer_waits_for_a_missing_topic(pylog, pylog_cmd, tool_broker, topic):
    b = tool_broker.bootstrap
    # Kafka's consumer subscribes and waits; its metadata request auto-creates the topic.
    r = pylog("console-consumer", "--bootstrap-server", b, "--topic", topic,
              "--timeout-ms", "1000")
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines()[-1] == "Processed a total of 0 messages"
    r = pylog("topics", "--bootstrap-server", b, "--list")
    assert topic in r.stdout.split()

    later = f"{topic}-later"
    proc = subprocess.Popen([*pylog_cmd, "console-consumer", "--bootstrap-server", b,
                             "--topic", later, "--from-beginning", "--max-messages", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        while later not in pylog("topics", "--bootstrap-server", b, "--list").stdout.split():
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.1)
        _produce(pylog, b, later, "first\n")
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert out == "first\n"
