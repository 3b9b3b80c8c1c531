"""DescribeConfigs of a broker started with a properties file, as
``kafka-server-start.sh server.properties``: the file's values are
STATIC_BROKER_CONFIG, listed after the dynamic layers and before the default
(Kafka's ConfigHelper order); node.id and broker.id name one id, so the one
the file sets shows under both (Kafka's populateSynonyms).  ``pylog configs
--describe`` prints every synonym: librdkafka keys them by name, which would
keep only the default of a key the file sets."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from broker_process import BrokerProcess, free_port
from kafka_wire import RawClient
from test_broker_configs import create, describe, iac, synonyms

BROKER = 4
SET = 0
DYN_BROKER, DYN_DEFAULT, STATIC, DEFAULT = 2, 3, 4, 5
NODE = 3

SERVER_PROPERTIES = """\
{id_key}={node}
listeners=PLAINTEXT://127.0.0.1:{port}
log.dirs={log_dir}
num.partitions=3
log.retention.hours=100
"""


def _configs_tool(bootstrap: str, *args: str) -> list[str]:
    out = subprocess.run([sys.executable, "-m", "pylog", "configs", "--bootstrap-server",
                          bootstrap, "--describe", "--all", *args],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


@pytest.mark.parametrize("id_key", ["node.id", "broker.id"])
def test_file_values_are_static_broker_config(tmp_path: Path, id_key: str) -> None:
    port = free_port()
    config = tmp_path / "server.properties"
    config.write_text(SERVER_PROPERTIES.format(id_key=id_key, node=NODE, port=port,
                                               log_dir=tmp_path / "data"))
    node = BrokerProcess(tmp_path / "data", port=port, config=config,
                         own_listener=False).start()
    try:
        with RawClient(node.bootstrap) as c:
            got = describe(c, BROKER, str(NODE))
            for key in ("node.id", "broker.id"):
                assert (got[key].value, got[key].config_source) == (str(NODE), STATIC)
                assert synonyms(got[key]) == [(key, str(NODE), STATIC), (key, "0", DEFAULT)]
            assert synonyms(got["num.partitions"]) == [("num.partitions", "3", STATIC),
                                                       ("num.partitions", "1", DEFAULT)]
            assert got["listeners"].config_source == STATIC
            assert synonyms(got["message.max.bytes"]) == [
                ("message.max.bytes", "1048588", DEFAULT)]

            # The dynamic layers go over the file's value, in Kafka's order.
            assert iac(c, str(NODE), [("log.retention.hours", SET, "50")],
                       resource_type=BROKER).error_code == 0
            assert iac(c, "", [("log.retention.hours", SET, "70")],
                       resource_type=BROKER).error_code == 0
            hours = describe(c, BROKER, str(NODE), ["log.retention.hours"])
            assert synonyms(hours["log.retention.hours"]) == [
                ("log.retention.hours", "50", DYN_BROKER),
                ("log.retention.hours", "70", DYN_DEFAULT),
                ("log.retention.hours", "100", STATIC),
                ("log.retention.hours", "168", DEFAULT)]
            assert create(c, "static-t").error_code == 0

        lines = _configs_tool(node.bootstrap, "--entity-type", "brokers",
                              "--entity-name", str(NODE))
        assert lines[0] == f"All configs for broker {NODE} are:"
        for key in ("node.id", "broker.id"):
            assert (f"  {key}={NODE} sensitive=false synonyms={{STATIC_BROKER_CONFIG:"
                    f"{key}={NODE}, DEFAULT_CONFIG:{key}=0}}") in lines
        retention = ("DYNAMIC_BROKER_CONFIG:log.retention.hours=50, "
                     "DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.hours=70, "
                     "STATIC_BROKER_CONFIG:log.retention.hours=100, "
                     "DEFAULT_CONFIG:log.retention.hours=168")
        assert f"  log.retention.hours=50 sensitive=false synonyms={{{retention}}}" in lines
        # A topic's synonyms are the broker keys', each source kept.
        lines = _configs_tool(node.bootstrap, "--entity-type", "topics",
                              "--entity-name", "static-t")
        assert (f"  retention.ms={50 * 3_600_000} sensitive=false "
                f"synonyms={{{retention}}}") in lines
    finally:
        node.stop()


def test_broker_id_without_a_file_is_the_default_node_id(broker) -> None:
    with RawClient(broker.bootstrap) as c:
        got = describe(c, BROKER, "0", ["broker.id", "node.id"])
    for key in ("broker.id", "node.id"):
        assert (got[key].value, got[key].config_source) == ("0", DEFAULT)
        assert synonyms(got[key]) == [(key, "0", DEFAULT)]
