"""ZooKeeperServer (Debian's package as a subprocess) and the two commands
operators run: ``pylog zookeeper-server-start`` and ``pylog zookeeper-shell``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from broker_process import free_port, wait_for
from kazoo.client import KazooClient

import pylog.zk.server as zk_server_module
from pylog.zk.server import ZooKeeperServer, ZooKeeperServerError, four_letter_word

PYLOG = [sys.executable, "-m", "pylog"]


def pylog(*args: str, stdin: str | None = None, timeout: float = 120
          ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PYLOG, *args], input=stdin, capture_output=True, text=True,
                          timeout=timeout)


def test_server_from_a_kafka_properties_file(zookeeper_installed: None, tmp_path: Path) -> None:
    port = free_port()
    props = tmp_path / "zookeeper.properties"
    # Kafka's config/zookeeper.properties, with a dataDir and port of the test's own.
    props.write_text(f"# the directory where the snapshot is stored.\ndataDir={tmp_path}/zk\n"
                     f"clientPort={port}\nmaxClientCnxns=0\nadmin.enableServer=false\n")
    server = ZooKeeperServer(props, heap_opts="-Xmx128m").start()
    try:
        assert server.address == f"127.0.0.1:{port}"
        assert "Mode: standalone" in four_letter_word(("127.0.0.1", port), "srvr")
        client = KazooClient(hosts=server.address)
        client.start(timeout=15)
        client.stop()
        client.close()
        cfg = (tmp_path / "zk" / "zookeeper.cfg").read_text()
        assert f"clientPort={port}\n" in cfg and "admin.enableServer=false\n" in cfg
    finally:
        server.stop()
    assert not server.running
    # Its log went under dataDir (never /var/log).
    assert "binding to port" in server.log_path.read_text()


def test_port_in_use_is_refused(zk_server: ZooKeeperServer, tmp_path: Path) -> None:
    other = ZooKeeperServer({"dataDir": str(tmp_path), "clientPort": str(zk_server.port),
                             "clientPortAddress": "127.0.0.1"}, heap_opts="-Xmx128m")
    with pytest.raises(ZooKeeperServerError, match=f"port {zk_server.port} is in use"):
        other.start()


@pytest.mark.parametrize("props, message", [
    ({"clientPort": "2181"}, "dataDir is not set"),
    ({"dataDir": "/tmp/x", "clientPort": "http"}, "is not a port number"),
    ({"dataDir": "/tmp/x", "clientPort": "0"}, "is not a port number"),
])
def test_bad_properties(props: dict[str, str], message: str) -> None:
    with pytest.raises(ZooKeeperServerError, match=message):
        ZooKeeperServer(props)


def test_missing_package_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(zk_server_module, "ZOOKEEPER_JAR", tmp_path / "zookeeper.jar")
    server = ZooKeeperServer({"dataDir": str(tmp_path / "zk"), "clientPort": str(free_port())})
    with pytest.raises(ZooKeeperServerError, match="ZooKeeper is not installed: apt-get install "
                                                   "zookeeper"):
        server.start()


def test_zookeeper_server_start_runs_until_sigterm(zookeeper_installed: None,
                                                   tmp_path: Path) -> None:
    port = free_port()
    props = tmp_path / "zookeeper.properties"
    props.write_text(f"dataDir={tmp_path}/zk\nclientPort={port}\nmaxClientCnxns=0\n"
                     "admin.enableServer=false\n")
    proc = subprocess.Popen([*PYLOG, "zookeeper-server-start", str(props)],
                            env={**os.environ, "KAFKA_HEAP_OPTS": "-Xmx128m"},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        lines: list[str] = []
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if "serving clients on" in line:
                break
        assert f"ZooKeeper is serving clients on 127.0.0.1:{port}" in "".join(lines)
        assert "Mode: standalone" in four_letter_word(("127.0.0.1", port), "srvr")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 143  # as the JVM exits on SIGTERM
        rest = proc.stdout.read()
        assert "Traceback" not in rest
        with pytest.raises(OSError):
            four_letter_word(("127.0.0.1", port), "srvr")  # the server went with it
    finally:
        if proc.poll() is None:
            proc.kill()  # the server dies with it (parent-death signal)
            proc.wait()


def test_zookeeper_server_start_takes_the_server_down_when_killed(zookeeper_installed: None,
                                                                  tmp_path: Path) -> None:
    port = free_port()
    props = tmp_path / "zookeeper.properties"
    props.write_text(f"dataDir={tmp_path}/zk\nclientPort={port}\n")
    proc = subprocess.Popen([*PYLOG, "zookeeper-server-start", str(props)],
                            env={**os.environ, "KAFKA_HEAP_OPTS": "-Xmx128m"},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if "serving clients on" in line:
            break
    proc.kill()  # SIGKILL: no cleanup of its own
    proc.wait()
    wait_for(lambda: not _answers(port), 60, "the server gone with its parent")


def _answers(port: int) -> bool:
    try:
        four_letter_word(("127.0.0.1", port), "srvr")
        return True
    except OSError:
        return False


def test_zookeeper_shell_commands(zk_server: ZooKeeperServer, zk_connect: str, zk: object) -> None:
    out = pylog("zookeeper-shell", zk_connect, "ls", "/brokers")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == f"Connecting to {zk_connect}"
    assert out.stdout.splitlines()[-1] == "[ids, seqid, topics]"
    out = pylog("zookeeper-shell", zk_connect, "create", "/x", "hello")
    assert (out.returncode, out.stdout.splitlines()[-1]) == (0, "Created /x")
    out = pylog("zookeeper-shell", zk_connect, "get", "/x")
    assert out.stdout.splitlines()[-1] == "hello"
    out = pylog("zookeeper-shell", zk_connect, "get", "/brokers/ids")
    assert out.stdout.splitlines()[-1] == "null"  # Kafka's persistent paths hold no data
    out = pylog("zookeeper-shell", zk_connect, "stat", "/x")
    assert "dataVersion = 0" in out.stdout and "dataLength = 5" in out.stdout
    out = pylog("zookeeper-shell", zk_connect, "ls", "-s", "/brokers")
    lines = out.stdout.splitlines()
    assert lines[lines.index("[ids, seqid, topics]") + 1].startswith("cZxid = 0x")
    assert "numChildren = 3" in lines
    out = pylog("zookeeper-shell", zk_connect, "create", "/x", "again")
    assert (out.returncode, out.stderr.strip()) == (1, "Node already exists: /x")
    out = pylog("zookeeper-shell", zk_connect, "get", "/nope")
    assert (out.returncode, out.stderr.strip()) == (1, "Node does not exist: /nope")
    out = pylog("zookeeper-shell", zk_connect, "frobnicate", "/x")
    assert out.returncode == 1 and "Command not found: frobnicate" in out.stderr


def test_zookeeper_shell_reads_commands_from_stdin(zk_connect: str, zk: object) -> None:
    script = ("create /a one\ncreate /a/b\nls -R /a\nset /a two\nget -s /a\n"
              "delete /a\ndeleteall /a\nls /\nquit\nls /never\n")
    out = pylog("zookeeper-shell", zk_connect, stdin=script)
    lines = out.stdout.splitlines()
    assert lines[:3] == [f"Connecting to {zk_connect}", "Welcome to ZooKeeper!",
                         "JLine support is disabled"]
    body = lines[lines.index("WatchedEvent state:SyncConnected type:None path:null") + 1:]
    assert body[:5] == ["Created /a", "Created /a/b", "/a", "/a/b", "two"]
    assert "dataVersion = 1" in body and "numChildren = 1" in body
    assert body[-1] == ("[admin, brokers, config, consumers, isr_change_notification, "
                        "latest_producer_id_block, log_dir_event_notification]")
    assert out.stderr.strip() == "Node not empty: /a"  # the delete; deleteall then did it
    assert out.returncode == 1


def test_zookeeper_shell_unreachable_server(zookeeper_installed: None) -> None:
    address = f"127.0.0.1:{free_port()}"
    out = pylog("zookeeper-shell", address, "-timeout", "1000", "ls", "/")
    assert out.returncode == 1
    assert "Unable to connect to ZooKeeper: Timed out waiting for connection while in state: " \
           "CONNECTING" in out.stderr
    assert address in out.stderr
    assert out.stderr.count("\n") == 1  # one line: no retry warnings


def test_server_logs_to_the_console_never_var_log(zookeeper_installed: None,
                                                  tmp_path: Path) -> None:
    server = ZooKeeperServer({"dataDir": str(tmp_path), "clientPort": str(free_port())},
                             log="inherit", heap_opts="-Xmx128m")
    command = server.command()
    assert f"-Dzookeeper.log.dir={tmp_path}" in command
    assert f"-Dlog4j.configuration=file:{tmp_path}/conf/log4j.properties" in command
    log4j = (tmp_path / "conf" / "log4j.properties").read_text()
    assert "rootLogger=INFO, CONSOLE" in log4j and "File" not in log4j
    assert not any("/var/log" in arg for arg in command)


def test_server_ready_whatever_the_4lw_whitelist(zookeeper_installed: None,
                                                 tmp_path: Path) -> None:
    # Readiness is a srvr answer: ZooKeeper keeps srvr allowed even when the
    # whitelist leaves it out (its zkServer.sh status needs it).
    server = ZooKeeperServer({"dataDir": str(tmp_path), "clientPort": str(free_port()),
                              "4lw.commands.whitelist": "ruok"}, heap_opts="-Xmx128m").start()
    try:
        assert "not in the whitelist" in four_letter_word(("127.0.0.1", server.port), "stat")
        assert "Mode: standalone" in four_letter_word(("127.0.0.1", server.port), "srvr")
    finally:
        server.stop()
