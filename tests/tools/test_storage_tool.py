"""``pylog storage`` (kafka-storage.sh) and Kafka's KRaft quickstart, step by step.

The 3.6 quickstart: a cluster id from ``random-uuid``, ``format`` with the
KRaft combined node's server.properties (written here as Kafka ships it in
``config/kraft/server.properties``, on free ports), then the broker started
with that file alone.  The node answers with the formatted cluster id, takes
records, and never opens its controller listener.  Then the tool's errors
and the listener checks a KRaft config goes through, each with Kafka's words.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import confluent_kafka as ck
import pytest
from broker_process import BrokerProcess, free_port
from confluent_kafka.admin import AdminClient

KRAFT_SERVER_PROPERTIES = """\
############################# Server Basics #############################
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@localhost:{controller}
############################# Socket Server Settings #############################
listeners=PLAINTEXT://:{port},CONTROLLER://:{controller}
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://localhost:{port}
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,\
SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
############################# Log Basics #############################
log.dirs={log_dir}
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
"""


def _kraft_config(tmp_path: Path, **changes: str) -> tuple[Path, int, Path]:
    port, log_dir = free_port(), tmp_path / "kraft-combined-logs"
    text = KRAFT_SERVER_PROPERTIES.format(port=port, controller=free_port(), log_dir=log_dir)
    for key, value in changes.items():
        key = key.replace("_", ".")
        lines = [ln for ln in text.splitlines() if not ln.startswith(key + "=")]
        text = "\n".join(lines + ([f"{key}={value}"] if value is not None else [])) + "\n"
    path = tmp_path / "server.properties"
    path.write_text(text)
    return path, port, log_dir


def test_kraft_quickstart(pylog, tmp_path) -> None:
    config, port, log_dir = _kraft_config(tmp_path)
    out = pylog("storage", "random-uuid")
    assert out.returncode == 0, out.stderr
    cluster_id = out.stdout.strip()
    assert len(cluster_id) == 22 and not cluster_id.startswith("-")
    assert pylog("storage", "random-uuid").stdout.strip() != cluster_id

    out = pylog("storage", "info", "-c", str(config))
    assert out.returncode == 1
    assert out.stdout == f"Found problem:\n  {log_dir} does not exist\n\n"

    out = pylog("storage", "format", "-t", cluster_id, "-c", str(config))
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"Formatting {log_dir} with metadata.version 3.6-IV2.\n"
    out = pylog("storage", "info", "-c", str(config))
    assert out.returncode == 0, out.stdout
    assert out.stdout == (f"Found log directory:\n  {log_dir}\n\n"
                          f"Found metadata: {{cluster.id={cluster_id}, node.id=1, version=1}}\n\n")

    # Formatting again: refused, or skipped with --ignore-formatted.
    out = pylog("storage", "format", "-t", cluster_id, "-c", str(config))
    assert out.returncode == 1
    assert out.stderr.strip() == (f"Log directory {log_dir} is already formatted. Use "
                                  "--ignore-formatted to ignore this directory and format "
                                  "the others.")
    out = pylog("storage", "format", "-t", cluster_id, "-c", str(config), "--ignore-formatted")
    assert (out.returncode, out.stdout) == (0, "All of the log directories are already "
                                               "formatted.\n")

    node = BrokerProcess(log_dir, port=port, config=config, own_listener=False).start()
    try:
        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        described = admin.describe_cluster().result(15)
        assert described.cluster_id == cluster_id
        assert [(n.id, n.host, n.port) for n in described.nodes] == [(1, "localhost", port)]
        p = ck.Producer({"bootstrap.servers": f"localhost:{port}"})
        p.produce("quickstart-events", b"This is my first event")
        assert p.flush(20) == 0
        # The controller listener is named, and not opened: the node keeps
        # the cluster's metadata in its log dir.
        controller_port = int(config.read_text().split("CONTROLLER://:")[1].split()[0])
        with pytest.raises(ConnectionRefusedError), socket.socket() as s:
            s.connect(("127.0.0.1", controller_port))
    finally:
        node.stop()
    assert (log_dir / "quickstart-events-0").is_dir()


def test_kafka_4_server_properties(pylog, tmp_path) -> None:
    """Kafka 3.9+/4.0's stock server.properties (KIP-853: controllers found
    through controller.quorum.bootstrap.servers, the controller advertised,
    share-group keys) and its quickstart's ``format --standalone``: accepted,
    and clients are told only of the broker listener."""
    config, port, log_dir = _kraft_config(
        tmp_path, controller_quorum_voters=None,
        controller_quorum_bootstrap_servers="localhost:9093",
        advertised_listeners=None, share_coordinator_state_topic_replication_factor="1",
        share_coordinator_state_topic_min_isr="1")
    text = config.read_text().replace(
        "inter.broker.listener.name=PLAINTEXT",
        f"advertised.listeners=CONTROLLER://localhost:9093,PLAINTEXT://localhost:{port}")
    config.write_text(text)
    out = pylog("storage", "format", "--standalone", "-t", "biyqvtpDTBq9dsHTrMd1pw",
                "-c", str(config))
    assert out.returncode == 0, out.stderr
    node = BrokerProcess(log_dir, port=port, config=config, own_listener=False).start()
    try:
        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        described = admin.describe_cluster().result(15)
        assert [(n.host, n.port) for n in described.nodes] == [("localhost", port)]
    finally:
        node.stop()


@pytest.mark.parametrize(("args", "error"), [
    (["-t", "foo"], "Cluster ID string foo does not appear to be a valid UUID: Input string "
                    "`foo` decoded as 2 bytes, which is not equal to the expected 16 bytes of "
                    "a base64-encoded UUID"),
    (["-t", "biyqvtpDTBq9dsHTrMd1pw", "-r", "3.7"], "Unknown metadata.version '3.7'"),
    (["-t", "biyqvtpDTBq9dsHTrMd1pw", "-S", "SCRAM-SHA-256=[name=alice,password=a]"],
     "--add-scram: pylog has no SASL"),
])
def test_format_refuses(pylog, tmp_path, args: list[str], error: str) -> None:
    config, _, log_dir = _kraft_config(tmp_path)
    out = pylog("storage", "format", "-c", str(config), *args)
    assert out.returncode == 1 and out.stderr.startswith(error), out.stderr
    assert not log_dir.exists()


def test_format_needs_kraft(pylog, tmp_path) -> None:
    config, _, _ = _kraft_config(tmp_path, process_roles=None, controller_listener_names=None,
                                 listeners="PLAINTEXT://127.0.0.1:9092")
    out = pylog("storage", "format", "-t", "biyqvtpDTBq9dsHTrMd1pw", "-c", str(config))
    assert out.returncode == 1
    assert "appears to be for a legacy cluster" in out.stderr


@pytest.mark.parametrize(("changes", "error"), [
    ({"process_roles": "controller"}, "pylog nodes are brokers"),
    ({"process_roles": "broker,observer"}, "unknown process role 'observer'"),
    ({"controller_listener_names": None}, "controller.listener.names must contain at least "
                                          "one value when running in KRaft mode"),
    ({"controller_listener_names": "OTHER"}, "controller.listener.names must contain at least "
                                             "one value appearing in the 'listeners'"),
    ({"advertised_listeners": "PLAINTEXT://localhost:1,EXTERNAL://localhost:2"},
     "advertised.listeners: listener EXTERNAL is not one of the listeners"),
    ({"listener_security_protocol_map": "CONTROLLER:PLAINTEXT,PLAINTEXT:SSL"},
     "listeners: listener PLAINTEXT uses SSL; pylog serves PLAINTEXT only"),
    ({"listener_security_protocol_map": "CONTROLLER:PLAINTEXT"},
     "no security protocol defined for listener PLAINTEXT"),
    ({"listener_security_protocol_map": "PLAINTEXT:TLS"}, "listener.security.protocol.map"),
    ({"inter_broker_listener_name": "REPLICATION"}, "inter.broker.listener.name: "
                                                    "REPLICATION is not a client listener"),
    ({"listeners": "PLAINTEXT://:1,EXTERNAL://:2,CONTROLLER://:3",
      "listener_security_protocol_map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,"
                                        "EXTERNAL:PLAINTEXT"},
     "pylog serves one client listener"),
])
def test_kraft_listener_checks(tmp_path, changes: dict[str, str | None], error: str) -> None:
    config, _, log_dir = _kraft_config(tmp_path, **changes)
    out = subprocess.run([sys.executable, "-m", "pylog", "broker", "--config", str(config)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and error in out.stderr, out.stderr
    assert not log_dir.exists()


def test_format_refuses_a_dir_another_process_holds(pylog, tmp_path) -> None:
    """The log dir lock, as the broker takes it: format writes nothing into a
    dir that another process (here this test, through the broker's own lock)
    is using."""
    from pylog.log.dir_lock import LogDirLock

    config, _, log_dir = _kraft_config(tmp_path)
    log_dir.mkdir()
    with LogDirLock(log_dir):
        out = pylog("storage", "format", "-t", "MkU3OEVBNTcwNTJENDM2Qk", "-c", str(config))
        assert out.returncode == 1
        assert f"Failed to acquire lock on file .lock in {log_dir}." in out.stderr
        assert not (log_dir / "meta.properties").exists()
    out = pylog("storage", "format", "-t", "MkU3OEVBNTcwNTJENDM2Qk", "-c", str(config))
    assert out.returncode == 0, out.stderr
    assert (log_dir / "meta.properties").exists()
