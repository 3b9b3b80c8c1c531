"""A one-host cluster (``python -m pylog broker --nodes N``) as a subprocess,
and the processes under it as /proc shows them, for tests/cluster (the
fixtures live in its conftest)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from broker_process import free_ports, wait_for
from zk_process import HEAP_OPTS

from pylog.cluster import lines
from pylog.cluster.processes import argv_of, children, override_of

# Liveness bounds (never speed thresholds): ZooKeeper's JVM and N nodes
# starting on a shared 2-core machine; a stop that may wait for all of them.
START_TIMEOUT_S = 120
STOP_TIMEOUT_S = 90
# A short ZooKeeper session for the nodes: a killed node's registration (and
# with it its partitions' leadership) goes after this, and only then can its
# restart register again (until then it exits, as Kafka's broker does).
SESSION_TIMEOUT_MS = 6000
SESSION_TIMEOUT = f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}"


def alive(pid: int) -> bool:
    return argv_of(pid) is not None


def processes_with(text: str) -> list[int]:
    """Live processes whose command line mentions ``text`` (a test's own temp
    dir: what a cluster started there left running)."""
    return [int(name) for name in os.listdir("/proc")
            if name.isdigit() and any(text in arg for arg in argv_of(int(name)) or ())]


class ClusterProcess:
    """``pylog broker --nodes N`` on 127.0.0.1 ports ``port``.. and ``data_dir``;
    its stdout and stderr lines gathered as they come (``out``, ``err``)."""

    def __init__(self, data_dir: Path, nodes: int, *overrides: str, port: int | None = None,
                 args: tuple[str, ...] = (), env: dict[str, str] | None = None) -> None:
        self.data_dir = data_dir
        self.nodes = nodes
        self.port = free_ports(nodes) if port is None else port
        self.argv = [sys.executable, "-m", "pylog", "broker", "--nodes", str(nodes),
                     "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
                     "--override", f"log.dirs={data_dir}", *args]
        for item in overrides:
            self.argv += ["--override", item]
        # A small heap for the supervisor's ZooKeeper: the machine is shared.
        self.env = {**os.environ, "KAFKA_HEAP_OPTS": HEAP_OPTS, **(env or {})}
        self.proc: subprocess.Popen[str] | None = None
        self.out: list[str] = []
        self.err: list[str] = []
        self._readers: list[threading.Thread] = []
        self.seen: dict[int, list[str]] = {}  # every child seen, for the cleanup

    def start(self, wait: bool = True) -> ClusterProcess:
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=self.env)
        for stream, into in ((self.proc.stdout, self.out), (self.proc.stderr, self.err)):
            reader = threading.Thread(target=lambda s=stream, i=into: i.extend(
                line.rstrip("\n") for line in s), daemon=True)
            reader.start()
            self._readers.append(reader)
        if wait:
            self.wait_line(self.out, self.ready_prefix(), START_TIMEOUT_S)
            self.children()
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def ready_prefix(self) -> str:
        return lines.CLUSTER_READY.format(nodes=self.nodes, zookeeper="")

    def address(self, node_id: int) -> str:
        """Where node ``node_id`` listens (``host:port``)."""
        return f"127.0.0.1:{self.port + node_id}"

    @property
    def addresses(self) -> list[str]:
        return [self.address(i) for i in range(self.nodes)]

    @property
    def bootstrap(self) -> str:
        """bootstrap.servers naming every node."""
        return ",".join(self.addresses)

    def log_dir(self, node_id: int) -> Path:
        return self.data_dir / f"node-{node_id}"

    @property
    def zookeeper_address(self) -> str:
        (line,) = [x for x in self.out if x.startswith(self.ready_prefix())]
        return line[len(self.ready_prefix()):]

    def wait_line(self, stream: list[str], prefix: str, timeout: float = START_TIMEOUT_S,
                  count: int = 1) -> list[str]:
        """The first ``count`` lines of ``stream`` that start with ``prefix``,
        waiting for them; an AssertionError with all the output otherwise."""
        def found() -> list[str]:
            got = [line for line in list(stream) if line.startswith(prefix)]
            return got[:count] if len(got) >= count else []
        try:
            return wait_for(found, timeout, f"{prefix!r}")  # type: ignore[return-value]
        except AssertionError as exc:
            raise AssertionError(f"{exc}\nstdout:\n" + "\n".join(self.out)
                                 + "\nstderr:\n" + "\n".join(self.err)) from None

    def children(self) -> dict[int, list[str]]:
        found = children(self.pid)
        self.seen.update(found)
        return found

    def node_pids(self) -> dict[int, int]:
        """node id -> pid of the node processes running now."""
        out = {}
        for pid, argv in self.children().items():
            node_id = override_of(argv, "broker.id")
            if "pylog" in argv and node_id is not None:
                out[int(node_id)] = pid
        return out

    def zookeeper_pids(self) -> list[int]:
        return [pid for pid, argv in self.children().items()
                if "org.apache.zookeeper.server.quorum.QuorumPeerMain" in argv]

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    @contextmanager
    def held(self) -> Iterator[None]:
        """The supervisor stopped (SIGSTOP) meanwhile: a child that dies is
        restarted only after, when it notices (SIGCONT), so a test sees the
        cluster without it first."""
        self.signal(signal.SIGSTOP)
        try:
            yield
        finally:
            self.signal(signal.SIGCONT)

    def wait_restarted(self, node_id: int, pid: int) -> None:
        """The supervisor saw node ``node_id`` (pid ``pid``) killed by SIGKILL
        and got it running (and ready) again."""
        self.wait_line(self.err, lines.NODE_DIED.format(node_id=node_id, pid=pid,
                                                        how="was killed by SIGKILL", delay=1))
        self.wait_line(self.err, f"pylog cluster: node {node_id} restarted (pid ")

    def wait_exit(self, timeout: float = STOP_TIMEOUT_S) -> int:
        assert self.proc is not None
        status = self.proc.wait(timeout)
        for reader in self._readers:
            reader.join(timeout)
        return status

    def stop(self) -> int:
        """SIGTERM, as an operator (or systemd) stops it; its exit status."""
        self.signal(signal.SIGTERM)
        return self.wait_exit()

    def cleanup(self) -> None:
        """Whatever a failed test left running."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for pid, argv in self.seen.items():
            if argv_of(pid) == argv:  # still that process, not a reused pid
                os.kill(pid, signal.SIGKILL)
