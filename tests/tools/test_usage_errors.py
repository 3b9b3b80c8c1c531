"""A wrong flag prints the usage of the tool it was given to, not ``pylog``'s
(pylog.tools.common.ToolParser), and a Kafka flag pylog does not implement is
refused by name (refuse_flags)."""

from __future__ import annotations

import pytest

# Each tool with arguments it would otherwise accept, so only the wrong flag is wrong.
VALID_ARGS = {
    "topics": ["--bootstrap-server", "127.0.0.1:1", "--list"],
    "configs": ["--bootstrap-server", "127.0.0.1:1", "--describe", "--topic", "t"],
    "consumer-groups": ["--bootstrap-server", "127.0.0.1:1", "--list"],
    "console-producer": ["--bootstrap-server", "127.0.0.1:1", "--topic", "t"],
    "console-consumer": ["--bootstrap-server", "127.0.0.1:1", "--topic", "t"],
    "producer-perf-test": ["--topic", "t", "--num-records", "1", "--throughput", "-1",
                           "--record-size", "1", "--bootstrap-server", "127.0.0.1:1"],
    "consumer-perf-test": ["--bootstrap-server", "127.0.0.1:1", "--topic", "t",
                           "--messages", "1"],
    "get-offsets": ["--bootstrap-server", "127.0.0.1:1"],
    "log-dirs": ["--bootstrap-server", "127.0.0.1:1", "--describe"],
    "dump-log": ["--files", "00000000000000000000.log"],
    "storage": ["random-uuid"],
}


@pytest.mark.parametrize("tool", VALID_ARGS)
def test_wrong_flag_prints_the_tools_usage(pylog, tool: str) -> None:
    r = pylog(tool, *VALID_ARGS[tool], "--no-such-flag", "x")
    assert r.returncode == 2
    prog = "pylog storage random-uuid" if tool == "storage" else f"pylog {tool}"
    assert r.stderr.startswith(f"usage: {prog} "), r.stderr
    assert r.stderr.endswith(f"{prog}: error: unrecognized arguments: --no-such-flag\n")


def test_wrong_flag_is_named_before_missing_required_ones(pylog) -> None:
    # The example of the issue: no --bootstrap-server either.
    r = pylog("topics", "--topik", "x")
    assert r.returncode == 2
    assert r.stderr.startswith("usage: pylog topics ")
    assert r.stderr.endswith("pylog topics: error: unrecognized arguments: --topik\n")


def test_transactions_usage_is_the_commands(pylog) -> None:
    r = pylog("transactions", "--bootstrap-server", "127.0.0.1:1", "describe",
              "--transactional-id", "x", "--topik", "t")
    assert r.returncode == 2
    assert r.stderr.startswith("usage: pylog transactions describe ")
    r = pylog("transactions", "--topik", "t", "list")
    assert r.returncode == 2
    assert r.stderr.startswith("usage: pylog transactions ")
    assert "pylog transactions: error: unrecognized arguments: --topik" in r.stderr


def test_flags_are_not_abbreviated(pylog) -> None:
    # Kafka's option parser takes no abbreviation; argparse would read --part as
    # --partitions.
    r = pylog("topics", "--bootstrap-server", "127.0.0.1:1", "--create", "--topic", "t",
              "--part", "3")
    assert r.returncode == 2
    assert "unrecognized arguments: --part" in r.stderr


# Kafka 3.6 flags pylog refuses by name: (tool, valid arguments, the flag and its value).
REFUSED = {
    "topics --delete-config": (["topics", "--bootstrap-server", "127.0.0.1:1", "--alter",
                                "--topic", "t"], ["--delete-config", "retention.ms"]),
    "configs --zookeeper": (["configs", "--describe", "--topic", "t"],
                            ["--zookeeper", "localhost:2181"]),
    "configs --zk-tls-config-file": (["configs", "--bootstrap-server", "127.0.0.1:1",
                                      "--describe", "--topic", "t"],
                                     ["--zk-tls-config-file", "zk.properties"]),
    "console-consumer --enable-systest-events": (
        ["console-consumer", "--bootstrap-server", "127.0.0.1:1", "--topic", "t"],
        ["--enable-systest-events"]),
    "dump-log --offsets-decoder": (["dump-log", "--files", "x.log"], ["--offsets-decoder"]),
    "dump-log --transaction-log-decoder": (["dump-log", "--files", "x.log"],
                                           ["--transaction-log-decoder"]),
    "dump-log --cluster-metadata-decoder": (["dump-log", "--files", "x.log"],
                                            ["--cluster-metadata-decoder"]),
}


@pytest.mark.parametrize("argv,flag", REFUSED.values(), ids=REFUSED.keys())
def test_unsupported_kafka_flag_is_refused_by_name(pylog, argv: list[str],
                                                   flag: list[str]) -> None:
    r = pylog(*argv, *flag)
    assert r.returncode == 2
    assert r.stderr.startswith(f"usage: pylog {argv[0]} ")
    assert f"pylog {argv[0]}: error: {flag[0]} is not supported by pylog: " in r.stderr
    help_text = pylog(argv[0], "--help").stdout
    assert flag[0] in help_text.split("Kafka options pylog does not support:")[1]


def test_version_flag_of_each_tool(pylog) -> None:
    from pylog import __version__

    for argv in (["topics", "--version"], ["transactions", "-v"], ["dump-log", "--version"]):
        r = pylog(*argv)
        assert r.returncode == 0 and r.stdout == f"pylog {__version__}\n"
