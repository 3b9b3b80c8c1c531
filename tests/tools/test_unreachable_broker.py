"""Every tool against an address where nothing listens fails at once, naming the
address and the cause (pylog.tools.common.connect_any), instead of waiting out
a client timeout to say "Timed out waiting for a node assignment"."""

from __future__ import annotations

import pytest
from broker_process import free_port

# Each tool that talks to a broker, on each of its ways in: librdkafka clients
# (admin, producer, consumer) and pylog's own codec (pylog.tools.wire).
# "{B}" is the closed address.
CLOSED_PORT_CASES = {
    "topics-create": ["topics", "--bootstrap-server", "{B}", "--create", "--topic", "t"],
    "topics-list": ["topics", "--bootstrap-server", "{B}", "--list"],
    "topics-describe": ["topics", "--bootstrap-server", "{B}", "--describe", "--topic", "t"],
    "topics-alter": ["topics", "--bootstrap-server", "{B}", "--alter", "--topic", "t",
                     "--partitions", "2"],
    "topics-delete": ["topics", "--bootstrap-server", "{B}", "--delete", "--topic", "t"],
    "configs-describe-topic": ["configs", "--bootstrap-server", "{B}", "--describe",
                               "--topic", "t"],
    "configs-alter-topic": ["configs", "--bootstrap-server", "{B}", "--alter", "--topic", "t",
                            "--add-config", "retention.ms=1"],
    "configs-broker-default": ["configs", "--bootstrap-server", "{B}", "--describe",
                               "--entity-type", "brokers", "--entity-default"],
    "configs-quotas": ["configs", "--bootstrap-server", "{B}", "--describe",
                       "--entity-type", "users"],
    "consumer-groups-list": ["consumer-groups", "--bootstrap-server", "{B}", "--list"],
    "consumer-groups-describe": ["consumer-groups", "--bootstrap-server", "{B}",
                                 "--describe", "--group", "g"],
    "console-producer": ["console-producer", "--bootstrap-server", "{B}", "--topic", "t"],
    "console-consumer": ["console-consumer", "--bootstrap-server", "{B}", "--topic", "t"],
    "producer-perf-test": ["producer-perf-test", "--topic", "t", "--num-records", "1",
                           "--record-size", "1", "--throughput", "-1",
                           "--producer-props", "bootstrap.servers={B}"],
    "consumer-perf-test": ["consumer-perf-test", "--bootstrap-server", "{B}", "--topic", "t",
                           "--messages", "1"],
    "get-offsets": ["get-offsets", "--bootstrap-server", "{B}"],
    "log-dirs": ["log-dirs", "--bootstrap-server", "{B}", "--describe"],
    "transactions-list": ["transactions", "--bootstrap-server", "{B}", "list"],
    "transactions-describe": ["transactions", "--bootstrap-server", "{B}", "describe",
                              "--transactional-id", "x"],
}


@pytest.mark.parametrize("argv", CLOSED_PORT_CASES.values(), ids=CLOSED_PORT_CASES.keys())
def test_closed_port_fails_naming_address_and_cause(pylog, argv: list[str]) -> None:
    address = f"127.0.0.1:{free_port()}"
    # The timeout only catches a hang (a client retrying until its own timeout).
    r = pylog(*(a.replace("{B}", address) for a in argv), stdin="", timeout=20)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert f"Cannot connect to the broker at {address} (Connection refused)" in r.stderr
    assert r.stderr.strip().count("\n") == 0  # one line


def test_every_bootstrap_address_is_named(pylog) -> None:
    closed = [f"127.0.0.1:{free_port()}" for _ in range(2)]
    unresolvable = "no-such-host.invalid:9092"
    r = pylog("get-offsets", "--bootstrap-server", ",".join([unresolvable, *closed]),
              timeout=20)
    assert r.returncode == 1
    line = r.stderr.strip()
    assert line.startswith(f"Cannot connect to the broker at {unresolvable} (")
    assert all(f"{a} (Connection refused)" in line for a in closed)


def test_topics_keeps_kafkas_error_prefix(pylog) -> None:
    address = f"127.0.0.1:{free_port()}"
    r = pylog("topics", "--bootstrap-server", address, "--create", "--topic", "t", timeout=20)
    assert r.returncode == 1
    assert r.stderr == (f"Error while executing topic command : Cannot connect to the broker "
                        f"at {address} (Connection refused)\n")


def test_security_protocol_pylog_does_not_serve_is_refused(pylog, tmp_path) -> None:
    config = tmp_path / "client.properties"
    config.write_text("security.protocol=SASL_SSL\n")
    address = f"127.0.0.1:{free_port()}"
    for argv in (["topics", "--list"], ["consumer-groups", "--list"],
                 ["log-dirs", "--describe"]):
        r = pylog(argv[0], "--bootstrap-server", address, "--command-config", str(config),
                  *argv[1:], timeout=20)
        assert r.returncode == 1
        assert "security.protocol=SASL_SSL is not supported by pylog" in r.stderr
