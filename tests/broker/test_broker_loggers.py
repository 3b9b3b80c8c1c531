"""Kafka's BROKER_LOGGER config resource (KIP-412, resource type 8) against
the real broker process: DescribeConfigs lists the node's ``logging`` loggers
with their levels in Kafka's names, IncrementalAlterConfigs SET/DELETE change
them at once (the broker really emits, on its stderr, the DEBUG lines of a
logger set to DEBUG, and stops when the level is deleted), refusals carry
Kafka 3.6's codes and messages, and ``pylog configs --entity-type
broker-loggers`` works as Kafka's kafka-configs.  confluent-kafka has no
BROKER_LOGGER resource type (its ResourceType stops at TRANSACTIONAL_ID), so
the protocol is driven with raw frames."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from kafka_wire import RawClient

from pylog.protocol import ApiKey, ErrorCode

TOPIC, BROKER_LOGGER = 2, 8
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
DYNAMIC_BROKER_LOGGER_CONFIG = 6
NODE = "0"  # the broker's default node.id
# The broker runs with logging's default level for PYLOG_LOG_LEVEL unset: WARNING.
ROOT_LEVEL = "WARN"


def iac(c: RawClient, name: str, ops: list[tuple[str, int, str | None]],
        validate_only: bool = False, version: int = 1) -> Any:
    r = c.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, version, {
        "validate_only": validate_only, "resources": [
            {"resource_type": BROKER_LOGGER, "resource_name": name, "configs": [
                {"name": k, "config_operation": op, "value": v} for k, op, v in ops]}]})
    return r.responses[0]


def describe_raw(c: RawClient, name: str, keys: list[str] | None = None,
                 version: int = 4, resource_type: int = BROKER_LOGGER) -> Any:
    body: dict[str, Any] = {"resources": [{"resource_type": resource_type,
                                           "resource_name": name, "configuration_keys": keys}]}
    if version >= 1:
        body["include_synonyms"] = True
    if version >= 3:
        body["include_documentation"] = True
    return c.request(ApiKey.DESCRIBE_CONFIGS, version, body).results[0]


def levels(c: RawClient, keys: list[str] | None = None) -> dict[str, str]:
    res = describe_raw(c, NODE, keys)
    assert res.error_code == 0, res.error_message
    return {e.name: e.value for e in res.configs}


@pytest.fixture
def node(start_broker) -> Any:
    b = start_broker()
    assert f"pylog broker: node {NODE} " in "".join(b.output)
    return b


def test_describe_lists_root_and_the_pylog_loggers(node):
    with RawClient(node.bootstrap) as c:
        res = describe_raw(c, NODE)
        assert res.error_code == 0 and res.error_message is None
        entries = {e.name: e for e in res.configs}
        names = list(entries)
        assert names[0] == "root"
        # Real loggers of the running broker, and the hierarchy nodes above them.
        for name in ("pylog", "pylog.server", "pylog.server.describe_configs",
                     "pylog.server.broker_loggers", "pylog.log.log", "pylog.net.connection"):
            assert name in entries, name
        assert all(n == "root" or n.startswith("pylog.") or n == "pylog" for n in names)
        for e in entries.values():
            assert e.value == ROOT_LEVEL
            assert e.config_source == DYNAMIC_BROKER_LOGGER_CONFIG
            assert (e.read_only, e.is_sensitive, list(e.synonyms)) == (False, False, [])
            assert e.documentation is None
        # configuration_keys filters; an unknown key gives nothing.
        assert levels(c, ["root", "pylog.server", "nope"]) == {"root": ROOT_LEVEL,
                                                               "pylog.server": ROOT_LEVEL}
        v0 = describe_raw(c, NODE, ["root"], version=0)
        assert (v0.error_code, [(e.name, e.value) for e in v0.configs]) == (0, [("root", "WARN")])
        # Kafka's ConfigHelper refusals of the resource name.
        for name, message in (("", "Broker id must not be empty"),
                              ("x", "Broker id must be an integer, but it is: x"),
                              ("7", "Unexpected broker id, expected 0 but received 7")):
            res = describe_raw(c, name)
            assert (res.error_code, res.error_message, list(res.configs)) == (
                ErrorCode.INVALID_REQUEST, message, []), name


def test_set_delete_and_validate_only(node):
    with RawClient(node.bootstrap) as c:
        r = iac(c, NODE, [("pylog.server", SET, "DEBUG")], validate_only=True)
        assert (r.error_code, r.error_message) == (0, None)
        assert levels(c)["pylog.server"] == ROOT_LEVEL  # validate_only changes nothing

        r = iac(c, NODE, [("pylog.server", SET, "DEBUG"), ("pylog.log", SET, "FATAL")])
        assert (r.error_code, r.error_message) == (0, None)
        now = levels(c)
        assert now["pylog.server"] == "DEBUG"
        assert now["pylog.server.describe_configs"] == "DEBUG"  # effective: the parent's
        assert now["pylog.log"] == now["pylog.log.log"] == "FATAL"
        assert now["pylog.net.connection"] == now["root"] == ROOT_LEVEL

        assert iac(c, NODE, [("pylog.server.describe_configs", SET, "TRACE"),
                             ("root", SET, "ERROR")]).error_code == 0
        now = levels(c)
        assert (now["pylog.server.describe_configs"], now["pylog.server"], now["root"],
                now["pylog.net.connection"]) == ("TRACE", "DEBUG", "ERROR", "ERROR")

        # DELETE unsets the logger's own level: it follows its parents again.
        r = iac(c, NODE, [("pylog.server", DELETE, None),
                          ("pylog.server.describe_configs", DELETE, ""),
                          ("pylog.log", DELETE, None)])
        assert (r.error_code, r.error_message) == (0, None)
        now = levels(c)
        assert {now[n] for n in ("pylog.server", "pylog.server.describe_configs",
                                 "pylog.log.log", "root")} == {"ERROR"}
        # Deleting a level that is not set is fine (Kafka's unsetLogLevel).
        assert iac(c, NODE, [("pylog.server", DELETE, None)]).error_code == 0
        assert iac(c, NODE, [("root", SET, "WARN")], version=0).error_code == 0
        assert set(levels(c).values()) == {ROOT_LEVEL}


def test_refusals_have_kafkas_codes_and_messages(node):
    valid = "Valid log levels are DEBUG, ERROR, FATAL, INFO, TRACE, WARN"
    cases = [
        ([("no.such.logger", SET, "DEBUG")], ErrorCode.INVALID_CONFIG,
         "Logger no.such.logger does not exist!"),
        ([("asyncio", SET, "DEBUG")], ErrorCode.INVALID_CONFIG,
         "Logger asyncio does not exist!"),  # only root and the pylog hierarchy
        ([("no.such.logger", DELETE, None)], ErrorCode.INVALID_CONFIG,
         "Logger no.such.logger does not exist!"),
        ([("pylog.server", SET, "VERBOSE")], ErrorCode.INVALID_CONFIG,
         f"Cannot set the log level of pylog.server to VERBOSE as it is not a supported log "
         f"level. {valid}"),
        ([("pylog.server", SET, "debug")], ErrorCode.INVALID_CONFIG,
         f"Cannot set the log level of pylog.server to debug as it is not a supported log "
         f"level. {valid}"),
        ([("root", SET, "OFF")], ErrorCode.INVALID_CONFIG,
         f"Cannot set the log level of root to OFF as it is not a supported log level. {valid}"),
        ([("root", DELETE, None)], ErrorCode.INVALID_REQUEST,
         "Removing the log level of the root logger is not allowed"),
        ([("pylog.server", APPEND, "DEBUG")], ErrorCode.INVALID_REQUEST,
         "APPEND operation is not allowed for the BROKER_LOGGER resource"),
        ([("pylog.server", SUBTRACT, "DEBUG")], ErrorCode.INVALID_REQUEST,
         "SUBTRACT operation is not allowed for the BROKER_LOGGER resource"),
        ([("pylog.server", 9, "DEBUG")], ErrorCode.INVALID_REQUEST,
         "Unknown operation type 9 is not allowed for the BROKER_LOGGER resource"),
        ([("pylog.server", SET, None)], ErrorCode.INVALID_REQUEST,
         "Null value not supported for : pylog.server"),
        ([("pylog.server", SET, "DEBUG"), ("pylog.server", DELETE, None)],
         ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys"),
        # One bad operation refuses the resource: the good one is not applied.
        ([("pylog.server", SET, "DEBUG"), ("pylog.log", SET, "LOUD")], ErrorCode.INVALID_CONFIG,
         f"Cannot set the log level of pylog.log to LOUD as it is not a supported log level. "
         f"{valid}"),
    ]
    with RawClient(node.bootstrap) as c:
        for ops, code, message in cases:
            r = iac(c, NODE, ops)
            assert (r.error_code, r.error_message) == (code, message), ops
            assert (r.resource_type, r.resource_name) == (BROKER_LOGGER, NODE)
        for name, message in (("7", "Unexpected broker id, expected 0, but received 7"),
                              ("x", "Node id must be an integer, but it is: x"),
                              ("", "Node id must be an integer, but it is: ")):
            r = iac(c, name, [("pylog.server", SET, "DEBUG")])
            assert (r.error_code, r.error_message) == (ErrorCode.INVALID_REQUEST, message), name
        assert set(levels(c).values()) == {ROOT_LEVEL}  # nothing refused was applied

        # The legacy AlterConfigs does not take BROKER_LOGGER, as in Kafka.
        r = c.request(ApiKey.ALTER_CONFIGS, 2, {"validate_only": False, "resources": [
            {"resource_type": BROKER_LOGGER, "resource_name": NODE,
             "configs": [{"name": "pylog.server", "value": "DEBUG"}]}]}).responses[0]
        assert (r.error_code, r.error_message) == (
            ErrorCode.INVALID_REQUEST,
            "AlterConfigs is deprecated and does not support the resource type BROKER_LOGGER")
        assert set(levels(c).values()) == {ROOT_LEVEL}


def test_debug_level_makes_the_broker_emit_debug_lines_and_delete_stops_them(node):
    logger = "pylog.server.describe_configs"

    def marker(c: RawClient, name: str) -> None:
        # Logged at DEBUG by the DescribeConfigs handler, whatever the answer.
        assert describe_raw(c, name, resource_type=TOPIC).error_code == (
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)

    with RawClient(node.bootstrap) as c:
        marker(c, "marker-before")
        assert iac(c, NODE, [(logger, SET, "DEBUG")]).error_code == 0
        marker(c, "marker-debug")
        assert iac(c, NODE, [(logger, DELETE, None)]).error_code == 0
        assert levels(c, [logger]) == {logger: ROOT_LEVEL}
        marker(c, "marker-after")
    assert node.stop() == 0
    # The broker's stderr (basicConfig's handler), merged into the captured output.
    out = "".join(node.output)
    debug = [line for line in out.splitlines() if f" DEBUG {logger}: " in line]
    assert any("2:marker-debug" in line for line in debug), out
    assert "marker-before" not in out and "marker-after" not in out


def test_changes_are_not_persisted(start_broker, tmp_path):
    b = start_broker(log_dir=tmp_path / "data")
    with RawClient(b.bootstrap) as c:
        assert iac(c, NODE, [("pylog.server", SET, "DEBUG")]).error_code == 0
    assert b.stop() == 0
    b = start_broker(log_dir=tmp_path / "data")
    with RawClient(b.bootstrap) as c:
        assert levels(c, ["pylog.server"]) == {"pylog.server": ROOT_LEVEL}


def configs(bootstrap: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pylog", "configs", "--bootstrap-server",
                           bootstrap, "--entity-type", "broker-loggers", *args],
                          capture_output=True, text=True, timeout=60)


def test_configs_cli_for_broker_loggers(node):
    b = node.bootstrap
    r = configs(b, "--entity-name", NODE, "--describe")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "Dynamic configs for broker-logger 0 are:"
    assert "  root=WARN sensitive=false synonyms={}" in lines
    assert "  pylog.server=WARN sensitive=false synonyms={}" in lines

    r = configs(b, "--entity-name", NODE, "--alter", "--add-config",
                "pylog.server=DEBUG,pylog.log=ERROR")
    assert (r.returncode, r.stdout) == (0, "Completed updating config for broker-logger 0.\n"), \
        r.stderr
    r = configs(b, "--describe")  # no name: every broker
    assert "  pylog.server=DEBUG sensitive=false synonyms={}" in r.stdout.splitlines()
    assert "  pylog.log.log=ERROR sensitive=false synonyms={}" in r.stdout.splitlines()
    assert r.stdout.startswith("Dynamic configs for broker-logger 0 are:\n")

    r = configs(b, "--entity-name", NODE, "--alter", "--delete-config", "pylog.server,pylog.log")
    assert (r.returncode, r.stdout) == (0, "Completed updating config for broker-logger 0.\n"), \
        r.stderr
    with RawClient(b) as c:
        assert set(levels(c).values()) == {ROOT_LEVEL}

    # Loggers the broker does not list are refused before any request, as Kafka's tool.
    r = configs(b, "--entity-name", NODE, "--alter", "--add-config", "nope=DEBUG",
                "--delete-config", "nada")
    assert r.returncode == 1
    assert "Invalid broker logger(s): nada,nope" in r.stderr
    # The broker's refusal, as Kafka's tool prints it.
    r = configs(b, "--entity-name", NODE, "--alter", "--add-config", "pylog.server=LOUD")
    assert r.returncode == 1
    assert ("Cannot set the log level of pylog.server to LOUD as it is not a supported log "
            "level. Valid log levels are DEBUG, ERROR, FATAL, INFO, TRACE, WARN") in r.stderr
    r = configs(b, "--entity-name", NODE, "--alter", "--delete-config", "root")
    assert r.returncode == 1
    assert "Removing the log level of the root logger is not allowed" in r.stderr
    r = configs(b, "--alter", "--add-config", "pylog.server=DEBUG")
    assert r.returncode == 1 and "entity name must be specified" in r.stderr
