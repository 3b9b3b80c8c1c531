"""A standalone ZooKeeper server from Debian's ``zookeeper`` package, as a subprocess.

What Kafka's ``zookeeper-server-start.sh config/zookeeper.properties`` runs:
the properties file is a ZooKeeper cfg (dataDir, clientPort, maxClientCnxns,
admin.enableServer, tickTime, ...), handed to ``QuorumPeerMain``.  pylog writes
the cfg (and a console-only log4j setup) into dataDir, so the server never
writes under /var/log: its log goes to ``<dataDir>/zookeeper.out`` or, for a
foreground server, to this process's stdout.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO

from pylog.orphans import die_with_parent
from pylog.properties import read_properties
from pylog.zk.errors import ZkError

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
# Debian's libslf4j-java and liblog4j1.2-java (dependencies of the package):
# without them on the classpath ZooKeeper logs nothing at all.
LOGGING_JARS = (Path("/usr/share/java/slf4j-log4j12.jar"), Path("/usr/share/java/log4j-1.2.jar"))
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
# Kafka's zookeeper-server-start.sh heap, unless KAFKA_HEAP_OPTS says otherwise.
DEFAULT_HEAP_OPTS = "-Xmx512M -Xms512M"
# Kafka's config/zookeeper.properties sets these; ZooKeeper's own defaults
# (60 connections per address, an admin server on port 8080) would clash
# with several servers, or many nodes, on one host.
DEFAULTS = {"clientPort": "2181", "maxClientCnxns": "0", "admin.enableServer": "false"}
_LOG4J = """\
log4j.rootLogger=INFO, CONSOLE
log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender
log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout
log4j.appender.CONSOLE.layout.ConversionPattern=[%d] %p %m (%c)%n
"""


class ZooKeeperServerError(ZkError):
    """The server could not be started: not installed, bad config, or it died."""


def java_command() -> str:
    """The java binary, or a ZooKeeperServerError saying how to install one."""
    java = shutil.which("java") or ("/usr/bin/java" if os.access("/usr/bin/java", os.X_OK)
                                    else None)
    if java is None:
        raise ZooKeeperServerError("Java is not installed (ZooKeeper runs on it): "
                                   "apt-get install default-jre-headless")
    return java


def check_installed() -> None:
    """A ZooKeeperServerError unless Debian's zookeeper package and java are here."""
    if not ZOOKEEPER_JAR.is_file():
        raise ZooKeeperServerError("ZooKeeper is not installed: apt-get install zookeeper "
                                   f"({ZOOKEEPER_JAR} is missing)")
    java_command()


def four_letter_word(address: tuple[str, int], word: str, timeout: float = 2.0) -> str:
    """A ZooKeeper four-letter command's answer (``srvr`` is always allowed)."""
    with socket.create_connection(address, timeout=timeout) as s:
        s.sendall(word.encode())
        chunks = []
        while chunk := s.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


class ZooKeeperServer:
    """One standalone ZooKeeper server.

    ``properties``: Kafka's ``config/zookeeper.properties`` keys, as a dict or
    the file's path.  ``log``: ``"file"`` (``<dataDir>/zookeeper.out``) or
    ``"inherit"`` (this process's stdout, for a server in the foreground).
    ``heap_opts``: the JVM's heap flags (default: $KAFKA_HEAP_OPTS, else Kafka's).
    ``die_with_parent``: the server gets SIGTERM when the thread that started
    it dies, even by SIGKILL (as Kafka's script, which execs java, dies with
    it); only for a process that starts it from its main thread.
    """

    def __init__(self, properties: Mapping[str, str] | str | Path, log: str = "file",
                 heap_opts: str | None = None, die_with_parent: bool = False) -> None:
        if isinstance(properties, (str, Path)):
            try:
                text = Path(properties).read_text()
            except OSError as exc:
                raise ZooKeeperServerError(f"cannot read {properties}: {exc.strerror}") from None
            try:
                properties = read_properties(text, str(properties))
            except ValueError as exc:
                raise ZooKeeperServerError(str(exc)) from None
        self.properties = {**DEFAULTS, **{str(k): str(v) for k, v in properties.items()}}
        if not self.properties.get("dataDir"):
            raise ZooKeeperServerError("dataDir is not set (ZooKeeper keeps its snapshots there)")
        try:
            self.port = int(self.properties["clientPort"])
        except ValueError:
            raise ZooKeeperServerError(
                f"clientPort {self.properties['clientPort']!r} is not a port number") from None
        if not 0 < self.port < 65536:
            raise ZooKeeperServerError(f"clientPort {self.port} is not a port number (1-65535)")
        if log not in ("file", "inherit"):
            raise ValueError(f"log must be 'file' or 'inherit', not {log!r}")
        self.log = log
        self.heap_opts = heap_opts or os.environ.get("KAFKA_HEAP_OPTS") or DEFAULT_HEAP_OPTS
        self.die_with_parent = die_with_parent
        self.data_dir = Path(self.properties["dataDir"])
        self.proc: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None

    @property
    def host(self) -> str:
        """Where clients connect: clientPortAddress, or loopback for a wildcard."""
        bind = self.properties.get("clientPortAddress", "")
        return "127.0.0.1" if bind in ("", "0.0.0.0", "::") else bind

    @property
    def address(self) -> str:
        """``host:port``, a zookeeper.connect string."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "zookeeper.out"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def command(self) -> list[str]:
        """The java command line (after writing the cfg and log4j files)."""
        check_installed()
        java = java_command()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        cfg = self.data_dir / "zookeeper.cfg"
        cfg.write_text("".join(f"{k}={v}\n" for k, v in self.properties.items()))
        conf = self.data_dir / "conf"  # first on the classpath: our log4j.properties wins
        conf.mkdir(exist_ok=True)
        (conf / "log4j.properties").write_text(_LOG4J)
        classpath = [str(conf), str(ZOOKEEPER_JAR), *(str(j) for j in LOGGING_JARS if j.exists())]
        return [*(die_with_parent("TERM") if self.die_with_parent else []), java,
                *self.heap_opts.split(), f"-Dzookeeper.log.dir={self.data_dir}",
                "-Dzookeeper.root.logger=INFO,CONSOLE",
                f"-Dlog4j.configuration=file:{conf / 'log4j.properties'}",
                "-cp", ":".join(classpath), MAIN_CLASS, str(cfg)]

    def start(self, timeout: float = 60.0) -> ZooKeeperServer:
        """Start the server and wait until it answers ``srvr`` on its port."""
        if self.running:
            return self
        self.launch()
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise self._exited_while_starting()
            if self.serving():
                return self
            if time.monotonic() > deadline:
                self.stop()
                raise ZooKeeperServerError(f"ZooKeeper did not answer on {self.address} within "
                                           f"{timeout:g} s{self._log_tail()}")
            time.sleep(0.1)

    def launch(self) -> None:
        """Start the server's process without waiting for it to serve (a
        supervisor polls :meth:`serving` meanwhile); ZooKeeperServerError when
        it cannot be started at all (not installed, the port taken)."""
        if self.running:
            return
        self._close_log()  # a previous run's, when this is a restart
        command = self.command()
        with socket.socket(socket.AF_INET6 if ":" in self.host else socket.AF_INET) as probe:
            # Another server already on the port would answer our readiness check.
            if probe.connect_ex((self.host, self.port)) == 0:
                raise ZooKeeperServerError(f"port {self.port} is in use on {self.host}: "
                                           "another server is listening there")
        out: int | IO[bytes] | None = None
        if self.log == "file":
            self._log_file = out = open(self.log_path, "ab")  # closed by stop()
        self.proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out,
                                     stderr=subprocess.STDOUT if out else None,
                                     start_new_session=self.log == "file")
        # A server in its own session outlives us unless stopped: at least a
        # normal exit (or an uncaught error) of this interpreter takes it down.
        atexit.register(self.kill)

    def _exited_while_starting(self) -> ZooKeeperServerError:
        """The error for a server whose process ended before it served."""
        assert self.proc is not None and self.proc.returncode is not None
        self._close_log()
        return ZooKeeperServerError(f"ZooKeeper exited with status {self.proc.returncode} "
                                    f"while starting{self._log_tail()}")

    def serving(self) -> bool:
        """Whether the server answers clients yet: it listens before it serves.
        (ZooKeeper always allows ``srvr``, whatever 4lw.commands.whitelist says:
        its own zkServer.sh status needs it.)"""
        try:
            answer = four_letter_word((self.host, self.port), "srvr")
        except OSError:
            return False
        return answer.startswith("Zookeeper version")

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM (ZooKeeper shuts down cleanly on it), then SIGKILL after ``timeout``."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._close_log()

    def kill(self) -> None:
        """SIGKILL: a crash."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._close_log()

    def _close_log(self) -> None:
        atexit.unregister(self.kill)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def _log_tail(self) -> str:
        if self.log != "file" or not self.log_path.exists():
            return ""
        lines = self.log_path.read_text(errors="replace").splitlines()[-15:]
        return ": " + "\n".join(lines) if lines else ""

    def __enter__(self) -> ZooKeeperServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
