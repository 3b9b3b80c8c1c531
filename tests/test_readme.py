"""The README's commands run as written, and the config files it names are there.

The README's ``sh`` blocks are read from the file itself: every ``pylog``
command in them parses with the real command line (the subcommand exists,
its flags parse), the tool examples run one after another against a real
broker (its address put in for ``127.0.0.1:9092``), and Kafka's KRaft
quickstart runs as shown on a copy of ``config/kraft/server.properties`` that
has only its ports and log dir changed.  Blocks that call ``pylog`` bare
activate the venv first, since only ``.venv/bin/pylog`` is there after the
install line.  The shipped config files load with ``BrokerConfig.load`` and
a broker starts with each.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from broker_process import BrokerProcess, free_port, free_ports, wait_for

from pylog.cli import build_parser
from pylog.log import meta_properties
from pylog.server.config import BrokerConfig, read_properties

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
CONFIG = ROOT / "config"
# The address the README's tool examples use (pylog's default listener).
README_BOOTSTRAP = "127.0.0.1:9092"
ACTIVATE = (". .venv/bin/activate", "source .venv/bin/activate")
TIMEOUT_S = 120  # a liveness bound for each command, never a speed threshold


def sh_blocks(text: str) -> list[list[str]]:
    """The README's ```sh blocks, each as its lines with backslash
    continuations joined (comments and blank lines kept out)."""
    blocks = []
    for body in re.findall(r"^```sh\n(.*?)^```", text, re.S | re.M):
        lines = []
        for line in body.replace("\\\n", " ").splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                lines.append(line)
        blocks.append(lines)
    return blocks


def pylog_commands(line: str) -> list[list[str]]:
    """The pylog command lines in one shell line (its ``&&`` steps and any
    ``$(...)``), as argv after the program name."""
    out = []
    for step in line.removesuffix("&").split("&&"):  # (a trailing &: in the background)
        inner = re.fullmatch(r'\w+="\$\((.*)\)"', step.strip())
        words = shlex.split(inner[1] if inner else step)
        if words and words[0] in ("pylog", ".venv/bin/pylog"):
            out.append(words[1:])
    return out


def inline_commands(text: str) -> list[list[str]]:
    """The ``pylog ...`` code spans of the prose (blocks left out), as argv
    after the program name; a closing ``...`` (the rest elided) is dropped."""
    prose = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    out = []
    for span in re.findall(r"`(pylog [^`]*)`", re.sub(r"\s+", " ", prose)):
        words = shlex.split(span)[1:]
        out.append(words[:-1] if words[-1:] == ["..."] else words)
    return out


def _blocks() -> list[list[str]]:
    return sh_blocks(README.read_text())


def _block_with(command: str) -> list[str]:
    """The one block with a line starting with ``command``."""
    (block,) = [b for b in _blocks() if any(line.startswith(command) for line in b)]
    return block


def _env() -> dict[str, str]:
    """The shell an operator has after activating the venv: its bin first on PATH."""
    bin_dir = Path(sys.executable).parent
    assert (bin_dir / "pylog").exists(), f"no pylog console script in {bin_dir}"
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}


def _sh(line: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", line], cwd=cwd, env=_env(), input=stdin,
                          capture_output=True, text=True, timeout=TIMEOUT_S)


def _parse(argv: list[str]) -> None:
    """``pylog argv`` through the real parser; a failure shows argparse's words."""
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            build_parser().parse_args(argv)
        except SystemExit as exc:
            if exc.code != 0 or "--help" not in argv:
                pytest.fail(f"pylog {shlex.join(argv)}: exit {exc.code}: {err.getvalue()}")


def test_every_pylog_command_parses() -> None:
    commands = [argv for block in _blocks() for line in block for argv in pylog_commands(line)]
    # The install line's broker, the tools, the KRaft quickstart.
    assert {argv[0] for argv in commands} >= {
        "broker", "topics", "console-producer", "console-consumer", "consumer-groups",
        "producer-perf-test", "consumer-perf-test", "storage"}
    for argv in commands:
        _parse(argv)


def test_commands_in_the_prose_parse() -> None:
    """A span with flags is a command, and parses; one without names a
    (sub)command, which must exist (its --help)."""
    commands = inline_commands(README.read_text())
    assert {argv[0] for argv in commands if argv} >= {"broker", "configs", "storage"}
    for argv in commands:
        _parse(argv if any(w.startswith("-") for w in argv) else [*argv, "--help"])


def test_tools_named_in_comments_exist() -> None:
    """``# also: pylog configs, get-offsets, ...`` names subcommands too."""
    (also,) = re.findall(r"# also: pylog ([\w, -]+?) \(", README.read_text())
    for name in (n.strip() for n in also.split(",")):
        _parse([name, "--help"])


def test_blocks_that_call_pylog_bare_activate_the_venv() -> None:
    for block in _blocks():
        bare = [i for i, line in enumerate(block)
                if any(step.strip().startswith("pylog ") or "$(pylog " in step
                       for step in line.split("&&"))]
        if bare:
            assert block[0] in ACTIVATE, f"block calls pylog before activating: {block}"


def test_scripts_the_readme_runs_exist() -> None:
    for block in _blocks():
        for line in block:
            for step in line.split("&&"):
                words = shlex.split(step)
                if words[:1] == [".venv/bin/python"] and words[1].endswith(".py"):
                    assert (ROOT / words[1]).is_file(), words[1]


def test_tool_examples_run_against_a_broker(tmp_path: Path) -> None:
    """The tool block, line by line, against a real broker: the topic made,
    two lines produced and consumed (the consumer stops on SIGTERM as on
    Ctrl-C), the group described, the perf tests' million records."""
    block = _block_with("pylog console-producer")
    assert block[0] in ACTIVATE
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        for line in block[1:]:
            line = line.replace(README_BOOTSTRAP, broker.bootstrap)
            words = shlex.split(line)
            if words[1] == "console-consumer":
                _consume_until(line, tmp_path, ["first", "second"])
                continue
            stdin = "first\nsecond\n" if words[1] == "console-producer" else None
            out = _sh(line, tmp_path, stdin)
            assert out.returncode == 0, f"{line}\n{out.stdout}{out.stderr}"
            if words[1] == "topics":
                assert out.stdout == "Created topic t.\n"
            elif words[1] == "consumer-groups":
                # The console consumer's group, stopped: its committed offsets.
                rows = [r.split() for r in out.stdout.splitlines()[2:] if r.strip()]
                assert sum(int(r[3]) for r in rows if r[3] != "-") == 2, out.stdout
            elif words[1] == "producer-perf-test":
                assert out.stdout.splitlines()[-1].startswith("1000000 records sent")
            elif words[1] == "consumer-perf-test":
                assert ", 1000000, " in out.stdout.splitlines()[-1], out.stdout
    finally:
        broker.stop()


def test_cluster_example_runs(tmp_path: Path) -> None:
    """The cluster block: three nodes under the supervisor (in the
    background, on free ports and the test's dir), a topic of replication
    factor 3 made and described through them, then SIGTERM stops it all."""
    block = _block_with("pylog broker --nodes")
    assert block[0] in ACTIVATE
    port = free_ports(3)
    start = block[1].removesuffix("&").strip().replace(
        "/tmp/pylog-cluster", str(tmp_path / "cluster"))
    start += f" --override listeners=PLAINTEXT://127.0.0.1:{port}"
    cluster = subprocess.Popen(["bash", "-c", f"exec {start}"], cwd=tmp_path, env=_env(),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    assert cluster.stdout is not None
    reader = threading.Thread(target=lambda: lines.extend(cluster.stdout), daemon=True)
    reader.start()
    try:
        wait_for(lambda: any("3 nodes ready" in line for line in lines), TIMEOUT_S,
                 "the cluster's ready line")
        for line in block[2:]:
            line = line.replace(README_BOOTSTRAP, f"127.0.0.1:{port}")
            out = _sh(line, tmp_path)
            assert out.returncode == 0, f"{line}\n{out.stdout}{out.stderr}"
            if " --describe" in line:
                rows = [r for r in out.stdout.splitlines() if "\tPartition: " in r]
                assert len(rows) == 3 and all("Replicas: " in r and "Isr: " in r
                                              for r in rows), out.stdout
                # Each partition's ISR holds its three replicas.
                assert all(len(r.split("Isr: ")[1].split(",")) == 3 for r in rows), out.stdout
    finally:
        cluster.send_signal(signal.SIGTERM)
        assert cluster.wait(TIMEOUT_S) == 0
        reader.join(TIMEOUT_S)


def _consume_until(line: str, cwd: Path, values: list[str]) -> None:
    """Run the console consumer until it has printed ``values``, then SIGTERM."""
    proc = subprocess.Popen(["bash", "-c", f"exec {line}"], cwd=cwd, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen: list[str] = []
    assert proc.stdout is not None
    # A thread reads, so that waiting for the lines has a bound.
    reader = threading.Thread(target=lambda: seen.extend(proc.stdout), daemon=True)
    reader.start()
    try:
        wait_for(lambda: len(seen) >= len(values), TIMEOUT_S, "the console consumer's lines")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(TIMEOUT_S)
        reader.join(TIMEOUT_S)
    err = proc.stderr.read()
    assert [s.rstrip("\n") for s in seen] == values
    # Stopped cleanly, with the JVM's status for SIGTERM as Kafka's tool.
    assert proc.returncode == 143 and "Processed a total of 2 messages" in err, err


def _kraft_copy(cwd: Path) -> tuple[Path, int, Path]:
    """config/kraft/server.properties under ``cwd`` with free ports and a log
    dir of the test's own: nothing else changed."""
    port, controller, log_dir = free_port(), free_port(), cwd / "kraft-combined-logs"
    text = (CONFIG / "kraft" / "server.properties").read_text()
    assert "log.dirs=/tmp/kraft-combined-logs" in text
    text = (text.replace(":9092", f":{port}").replace(":9093", f":{controller}")
            .replace("/tmp/kraft-combined-logs", str(log_dir)))
    path = cwd / "config" / "kraft" / "server.properties"
    path.parent.mkdir(parents=True)
    path.write_text(text)
    return path, port, log_dir


def test_kraft_quickstart_runs_as_written(tmp_path: Path) -> None:
    """The README's KRaft block: refused before the format, as Kafka refuses
    an unformatted dir; then formatted by the block's own commands and served."""
    block = _block_with("pylog storage format")
    assert block[0] in ACTIVATE
    *setup, start = block[1:]
    assert start == "pylog broker --config config/kraft/server.properties"
    config, port, log_dir = _kraft_copy(tmp_path)

    out = _sh(start, tmp_path)
    assert out.returncode == 1
    assert out.stderr == (f"pylog broker: No `meta.properties` found in {log_dir} (have you "
                          "run `pylog storage format` to format the directory?)\n")
    assert not (log_dir / meta_properties.META_PROPERTIES).exists()

    out = _sh("set -e; " + "; ".join(setup) + '; echo "$KAFKA_CLUSTER_ID"', tmp_path)
    assert out.returncode == 0, out.stderr
    *formatted, cluster_id = out.stdout.splitlines()
    assert formatted == [f"Formatting {log_dir} with metadata.version 3.6-IV2."]
    node = BrokerProcess(log_dir, port=port, config=config, own_listener=False).start()
    try:
        created = _sh(f"pylog topics --bootstrap-server 127.0.0.1:{port} --create "
                      "--topic quickstart-events", tmp_path)
        assert created.returncode == 0, created.stderr
    finally:
        assert node.stop() == 0
    assert meta_properties.read(log_dir) == {"cluster.id": cluster_id, "node.id": "1",
                                             "version": "1"}


def test_config_files_load() -> None:
    zk_mode = BrokerConfig.load(CONFIG / "server.properties")
    assert (zk_mode.node_id, zk_mode["process.roles"]) == (0, ())
    assert str(zk_mode.log_dir) == "/tmp/kafka-logs"
    assert [str(e) for e in zk_mode.listeners] == ["PLAINTEXT://127.0.0.1:9092"]
    kraft = BrokerConfig.load(CONFIG / "kraft" / "server.properties")
    assert (kraft.node_id, kraft["process.roles"]) == (1, ("broker", "controller"))
    assert str(kraft.log_dir) == "/tmp/kraft-combined-logs"
    assert [str(e) for e in kraft.listeners] == ["PLAINTEXT://127.0.0.1:9092"]
    assert [str(e) for e in kraft.controller_listeners] == ["CONTROLLER://127.0.0.1:9093"]
    # Kafka's ZooKeeper file, for the ZooKeeper server of a cluster.
    zk = read_properties((CONFIG / "zookeeper.properties").read_text())
    assert zk == {"dataDir": "/tmp/zookeeper", "clientPort": "2181", "maxClientCnxns": "0",
                  "admin.enableServer": "false"}


def test_broker_starts_with_server_properties(tmp_path: Path, zk_server) -> None:
    """Kafka's ZooKeeper quickstart: config/server.properties names a
    ZooKeeper (config/zookeeper.properties runs one; here the suite's, on its
    own port and a chroot), and the dir is formatted on the first start."""
    from zk_process import chroot_for

    log_dir = tmp_path / "kafka-logs"
    node = BrokerProcess(log_dir, f"zookeeper.connect={zk_server.address}"
                         f"{chroot_for('readme-quickstart')}",
                         config=CONFIG / "server.properties").start()
    try:
        assert f"node 0 listening on {node.bootstrap}" in "".join(node.output)
        created = _sh(f"pylog topics --bootstrap-server {node.bootstrap} --create --topic t",
                      tmp_path)
        assert created.returncode == 0, created.stderr
    finally:
        assert node.stop() == 0
    assert meta_properties.read(log_dir)["node.id"] == "0"
