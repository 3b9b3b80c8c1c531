"""``pylog consumer-groups`` on a group built by the test: describe, reset, delete."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, TopicPartition
from group_helpers import create_topic, produce, wait_for
from test_confluent_groups import ThreadConsumer

from pylog.cli import main


def run(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, list[list[str]], str]:
    """Exit status, stdout as rows of columns (blank lines dropped), stderr."""
    status = main(["consumer-groups", *argv])
    out, err = capsys.readouterr()
    return status, [line.split() for line in out.splitlines() if line.strip()], err


def test_describe_reset_delete(group_broker, name, capsys) -> None:
    bs = group_broker.bootstrap
    create_topic(bs, name, 3)
    produce(bs, name, 30, 3)  # 10 per partition
    consumer = ThreadConsumer(bs, name, name, **{"client.id": "tool-client"})
    try:
        wait_for(lambda: len(consumer.values) >= 30, 30, "30 records")
        time.sleep(0.3)
        status, rows, _ = run(capsys, "--bootstrap-server", bs, "--list")
        assert status == 0 and [name] in rows

        status, rows, _ = run(capsys, "--bootstrap-server", bs, "--describe", "--group", name)
        assert status == 0
        assert rows[0] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET",
                           "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]
        assert [r[:6] for r in rows[1:]] == [[name, name, str(p), "10", "10", "0"]
                                            for p in range(3)]
        assert all(r[6].startswith("tool-client-") and r[7:] == ["/127.0.0.1", "tool-client"]
                   for r in rows[1:])

        status, rows, _ = run(capsys, "--bootstrap-server", bs, "--describe", "--group", name,
                              "--members", "--verbose")
        assert rows[0] == ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID",
                           "#PARTITIONS", "ASSIGNMENT"]
        assert rows[1][2:] == ["-", "/127.0.0.1", "tool-client", "3", f"{name}(0,1,2)"]

        status, rows, _ = run(capsys, "--bootstrap-server", bs, "--describe", "--group", name,
                              "--state")
        assert rows[0] == ["GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY", "STATE",
                           "#MEMBERS"]
        assert rows[1] == [name, f"127.0.0.1:{group_broker.port}", "(0)", "range", "Stable",
                           "1"]

        # Refused while the group has members.
        status, _, err = run(capsys, "--bootstrap-server", bs, "--reset-offsets", "--group",
                             name, "--all-topics", "--to-earliest", "--execute")
        assert status == 1 and "current state is Stable" in err
        status, _, err = run(capsys, "--bootstrap-server", bs, "--delete", "--group", name)
        assert status == 1 and "NON_EMPTY_GROUP" in err
    finally:
        consumer.close()

    status, rows, err = run(capsys, "--bootstrap-server", bs, "--describe", "--group", name)
    assert f"Consumer group '{name}' has no active members." in err
    assert [r[6:] for r in rows[1:]] == [["-", "-", "-"]] * 3

    # Dry run by default: shows, changes nothing.
    status, rows, err = run(capsys, "--bootstrap-server", bs, "--reset-offsets", "--group",
                            name, "--topic", name, "--to-earliest")
    assert status == 0 and "--execute option is missing" in err
    assert rows == [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]] + [
        [name, name, str(p), "0"] for p in range(3)]
    _, rows, _ = run(capsys, "--bootstrap-server", bs, "--describe", "--group", name)
    assert [r[3] for r in rows[1:]] == ["10", "10", "10"]

    status, rows, _ = run(capsys, "--bootstrap-server", bs, "--reset-offsets", "--group", name,
                          "--topic", f"{name}:1", "--shift-by", "-4", "--execute")
    assert status == 0 and rows[1:] == [[name, name, "1", "6"]]
    status, rows, _ = run(capsys, "--bootstrap-server", bs, "--reset-offsets", "--group", name,
                          "--topic", f"{name}:2", "--to-offset", "99", "--execute")
    assert rows[1:] == [[name, name, "2", "10"]]  # past the end: clamped to it
    status, rows, _ = run(capsys, "--bootstrap-server", bs, "--reset-offsets", "--group", name,
                          "--topic", f"{name}:0", "--by-duration", "PT1H", "--dry-run")
    assert rows[1:] == [[name, name, "0", "0"]]
    _, rows, _ = run(capsys, "--bootstrap-server", bs, "--describe", "--group", name)
    assert [(r[2], r[3], r[5]) for r in rows[1:]] == [("0", "10", "0"), ("1", "6", "4"),
                                                      ("2", "10", "0")]

    status, rows, _ = run(capsys, "--bootstrap-server", bs, "--delete-offsets", "--group", name,
                          "--topic", f"{name}:0")
    assert status == 0 and rows[-1] == [name, "0", "Successful"]
    _, rows, _ = run(capsys, "--bootstrap-server", bs, "--describe", "--group", name)
    assert [r[2] for r in rows[1:]] == ["1", "2"]

    status, rows, _ = run(capsys, "--bootstrap-server", bs, "--delete", "--group", name)
    assert status == 0
    assert " ".join(rows[0]) == f"Deletion of requested consumer groups ('{name}') was successful."
    status, _, err = run(capsys, "--bootstrap-server", bs, "--describe", "--group", name)
    assert status == 1 and f"Consumer group '{name}' does not exist." in err


def commit(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    """Commit as a consumer outside the group would (no subscription): no range checks."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        c.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()],
                 asynchronous=False)
    finally:
        c.close()


def test_reset_to_current_without_committed_offset(group_broker, name, capsys) -> None:
    bs = group_broker.bootstrap
    create_topic(bs, name, 3)
    produce(bs, name, 15, 3)  # 5 per partition
    commit(bs, name, name, {0: 3, 2: 99})  # 99: past the log end
    # Kafka keeps committed offsets as they are and takes the log end where there is none.
    status, rows, err = run(capsys, "--bootstrap-server", bs, "--reset-offsets", "--group",
                            name, "--topic", name, "--to-current", "--execute")
    assert status == 0, err
    assert rows[1:] == [[name, name, "0", "3"], [name, name, "1", "5"], [name, name, "2", "99"]]
    _, rows, _ = run(capsys, "--bootstrap-server", bs, "--describe", "--group", name)
    assert [r[2:4] for r in rows[1:]] == [["0", "3"], ["1", "5"], ["2", "99"]]


def test_list_state_filter(group_broker, name, capsys) -> None:
    bs = group_broker.bootstrap
    create_topic(bs, name, 1)
    empty, stable = f"{name}-empty", f"{name}-stable"
    commit(bs, empty, name, {0: 0})  # offsets, no members: Empty
    consumer = ThreadConsumer(bs, stable, name)
    try:
        wait_for(lambda: consumer.assignment == {0}, 30, "the partition assigned")

        def listed(*state: str) -> list[list[str]]:
            status, rows, err = run(capsys, "--bootstrap-server", bs, "--list", "--state",
                                    *state)
            assert status == 0 and rows[0] == ["GROUP", "STATE"], err
            return rows[1:]

        # No value: every group, with its state.
        rows = listed()
        assert [empty, "Empty"] in rows and [stable, "Stable"] in rows
        # A comma separated list, case-insensitive.
        rows = listed("STABLE")
        assert [stable, "Stable"] in rows and all(r[1] == "Stable" for r in rows)
        rows = listed("stable,empty")
        assert [empty, "Empty"] in rows and [stable, "Stable"] in rows
        assert {r[1] for r in rows} <= {"Stable", "Empty"}

        status, _, err = run(capsys, "--bootstrap-server", bs, "--list", "--state", "bogus")
        assert status == 1 and "Invalid state list 'bogus'. Valid states are: " in err
        # --describe --state keeps its meaning, and takes no value.
        status, rows, _ = run(capsys, "--bootstrap-server", bs, "--describe", "--group",
                              stable, "--state")
        assert status == 0 and rows[1][0] == stable and rows[1][-2:] == ["Stable", "1"]
        status, _, err = run(capsys, "--bootstrap-server", bs, "--describe", "--group",
                             stable, "--state", "Stable")
        assert status == 1 and "does not take a value for --state" in err
    finally:
        consumer.close()
