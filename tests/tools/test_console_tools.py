"""``pylog console-producer`` / ``pylog console-consumer``."""

from __future__ import annotations

import re

TS = re.compile(r"^CreateTime:\d{13}$")


def test_keys_and_formatter_properties(pylog, tool_broker, topic):
    b = tool_broker.bootstrap
    r = pylog("console-producer", "--bootstrap-server", b, "--topic", topic,
              "--property", "parse.key=true", "--property", "key.separator=:",
              "--producer-property", "linger.ms=5", stdin="k1:v1\nk2:v2:x\n")
    assert r.returncode == 0, r.stderr
    r = pylog("console-consumer", "--bootstrap-server", b, "--topic", topic, "--from-beginning",
              "--max-messages", "2", "--property", "print.key=true",
              "--property", "print.timestamp=true", "--property", "print.offset=true",
              "--property", "print.partition=true", "--property", "print.headers=true",
              "--timeout-ms", "10000")
    assert r.returncode == 0, r.stderr
    rows = [line.split("\t") for line in r.stdout.splitlines()]
    assert len(rows) == 2
    for i, (ts, part, off, headers, _key, _value) in enumerate(rows):
        assert TS.match(ts)
        assert part == "Partition:0" and off == f"Offset:{i}" and headers == "NO_HEADERS"
    assert [(row[4], row[5]) for row in rows] == [("k1", "v1"), ("k2", "v2:x")]
    assert r.stderr.splitlines()[-1] == "Processed a total of 2 messages"

    r = pylog("console-consumer", "--bootstrap-server", b, "--topic", topic, "--partition", "0",
              "--offset", "1", "--max-messages", "1", "--property", "print.key=true",
              "--property", "key.separator=|")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "k2|v2:x\n"


def test_compression_flag_and_timeout(pylog, tool_broker, topic):
    b = tool_broker.bootstrap
    lines = "".join(f"line {i}\n" for i in range(50))
    r = pylog("console-producer", "--bootstrap-server", b, "--topic", topic,
              "--compression-codec", stdin=lines)  # bare flag: gzip, as Kafka
    assert r.returncode == 0, r.stderr
    r = pylog("console-consumer", "--bootstrap-server", b, "--topic", topic, "--from-beginning",
              "--timeout-ms", "1500")
    assert r.returncode == 0, r.stderr
    assert r.stdout == lines
    assert "Processed a total of 50 messages" in r.stderr


def test_group_consumer(pylog, tool_broker, topic):
    b = tool_broker.bootstrap
    pylog("console-producer", "--bootstrap-server", b, "--topic", topic, "--sync",
          stdin="a\nb\nc\n")
    r = pylog("console-consumer", "--bootstrap-server", b, "--topic", topic, "--group",
              f"{topic}-g", "--from-beginning", "--max-messages", "3", "--timeout-ms", "10000")
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.split()) == ["a", "b", "c"]


def test_errors_are_one_line(pylog, tool_broker, topic):
    b = tool_broker.bootstrap
    r = pylog("console-producer", "--bootstrap-server", b, "--topic", topic,
              "--property", "parse.key=true", stdin="k\tv\nno separator\n")
    assert r.returncode == 1
    assert r.stderr == "No key separator found on line number 2: 'no separator'\n"
    r = pylog("console-consumer", "--bootstrap-server", b, "--topic", topic, "--offset", "3")
    assert r.returncode == 1
    assert r.stderr == "The partition is required when offset is specified.\n"
    r = pylog("console-producer", "--bootstrap-server", b, "--topic", topic,
              "--compression-codec", "brotli", stdin="")
    assert r.returncode == 2
