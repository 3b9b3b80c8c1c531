"""``pylog console-producer`` / ``pylog console-consumer``."""

from __future__ import annotations

import math
import re
import struct

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


# -- Kafka's Float, Double, UUID and Void deserializers ------------------------------

SERDE = "org.apache.kafka.common.serialization."
SERIALIZATION_EXCEPTION = "org.apache.kafka.common.errors.SerializationException"


def _produce_bytes(bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes | None]]
                   ) -> None:
    """(key, value) records, in order, to partition 0 through librdkafka."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    failed: list = []
    for key, value in records:
        producer.produce(topic, value=value, key=key, partition=0,
                         on_delivery=lambda err, _msg: err and failed.append(err))
    assert producer.flush(30) == 0 and not failed, failed


def _consume(pylog, bootstrap: str, topic: str, *extra: str):
    return pylog("console-consumer", "--bootstrap-server", bootstrap, "--topic", topic,
                 "--from-beginning", "--timeout-ms", "10000", *extra)


def _stopped(r, printed: list[str], total: int, error: str) -> None:
    """The consumer printed these lines, then stopped on the record its
    deserializer refused (exit 1), as Kafka's does."""
    assert r.returncode == 1
    assert r.stdout.splitlines() == printed
    assert r.stderr.splitlines() == [f"Processed a total of {total} messages",
                                     f"Unknown error when running consumer: {error}"]


def test_float_and_double_deserializers_print_as_java(pylog, tool_broker, topic):
    """FloatDeserializer / DoubleDeserializer: exactly 4 / 8 big-endian bytes,
    printed as Float.toString / Double.toString do."""
    b = tool_broker.bootstrap
    floats = [(struct.pack(">f", v), text) for v, text in (
        (1.0, "1.0"), (1e10, "1.0E10"), (1e-5, "1.0E-5"), (0.1, "0.1"), (-2.5, "-2.5"),
        (100.0, "100.0"), (1234567.0, "1234567.0"), (1e7, "1.0E7"), (0.001, "0.001"),
        (1e-4, "1.0E-4"), (16777216.0, "1.6777216E7"), (-0.0, "-0.0"),
        (math.nan, "NaN"), (math.inf, "Infinity"), (-math.inf, "-Infinity"))]
    floats += [(struct.pack(">I", 1), "1.4E-45"),  # Float.MIN_VALUE
               (struct.pack(">I", 0x7F7FFFFF), "3.4028235E38")]  # Float.MAX_VALUE
    # A null value reaches the deserializer as null.literal's bytes: "null" is 4 bytes.
    floats.append((None, "1.8988725E28"))
    _produce_bytes(b, f"{topic}-f", [(None, v) for v, _ in floats] + [(None, b"abc")])
    r = _consume(pylog, b, f"{topic}-f", "--value-deserializer", SERDE + "FloatDeserializer")
    _stopped(r, [text for _, text in floats], len(floats) + 1,
             f"{SERIALIZATION_EXCEPTION}: Size of data received by Deserializer is not 4")

    doubles = [(struct.pack(">d", v), text) for v, text in (
        (1.0, "1.0"), (1e10, "1.0E10"), (1e-5, "1.0E-5"), (0.1, "0.1"), (1e23, "1.0E23"),
        (0.1 + 0.2, "0.30000000000000004"), (9999999.0, "9999999.0"),
        (2.0**63, "9.223372036854776E18"), (-1e300, "-1.0E300"), (math.nan, "NaN"),
        (-math.inf, "-Infinity"), (5e-324, "4.9E-324"),  # Double.MIN_VALUE
        (1.7976931348623157e308, "1.7976931348623157E308"))]
    # As keys too: the formatter runs each column through its deserializer.
    _produce_bytes(b, f"{topic}-d", [(v, b"x") for v, _ in doubles] + [(b"1234", b"y")])
    r = _consume(pylog, b, f"{topic}-d", "--property", "print.key=true",
                 "--key-deserializer", SERDE + "DoubleDeserializer")
    _stopped(r, [f"{text}\tx" for _, text in doubles], len(doubles) + 1,
             f"{SERIALIZATION_EXCEPTION}: Size of data received by Deserializer is not 8")


def test_uuid_deserializer_prints_java_uuid_from_string(pylog, tool_broker, topic):
    """UUIDDeserializer: UUID.fromString of the UTF-8 text, printed in the
    canonical lowercase form; text that is no UUID is a SerializationException."""
    b = tool_broker.bootstrap
    uuids = [(b"123E4567-E89B-12D3-A456-426614174000", "123e4567-e89b-12d3-a456-426614174000"),
             (b"1-2-3-4-5", "00000001-0002-0003-0004-000000000005"),  # Java is lenient
             (b"00000000-0000-0000-0000-000000000000", "00000000-0000-0000-0000-000000000000")]
    _produce_bytes(b, topic, [(None, v) for v, _ in uuids] + [(None, b"not-a-uuid")])
    r = _consume(pylog, b, topic, "--value-deserializer", SERDE + "UUIDDeserializer")
    _stopped(r, [text for _, text in uuids], len(uuids) + 1,
             f"{SERIALIZATION_EXCEPTION}: Error parsing data into UUID")


def test_void_deserializer_refuses_what_the_formatter_passes(pylog, tool_broker, topic):
    """VoidDeserializer throws IllegalArgumentException for any data but null,
    and Kafka's formatter never passes null: a null value reaches it as the
    null.literal's bytes."""
    b = tool_broker.bootstrap
    _produce_bytes(b, topic, [(None, None), (None, b"v")])
    r = _consume(pylog, b, topic, "--value-deserializer", SERDE + "VoidDeserializer")
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.splitlines() == [
        "Processed a total of 1 messages",
        "Unknown error when running consumer: java.lang.IllegalArgumentException: "
        "Data should be null for a VoidDeserializer."]
    r = _consume(pylog, b, topic, "--value-deserializer", SERDE + "VoidDeserializer",
                 "--skip-message-on-error", "--max-messages", "2")
    assert r.returncode == 0 and r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 5 and lines[-1] == "Processed a total of 2 messages"
    for logged, exception in (lines[0:2], lines[2:4]):
        assert logged.endswith(" ERROR Error processing message, skipping this message:  "
                               "(kafka.tools.ConsoleConsumer$)")
        assert exception == ("java.lang.IllegalArgumentException: Data should be null for a "
                             "VoidDeserializer.")
