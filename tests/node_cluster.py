"""A ZooKeeper-mode cluster whose nodes are started one by one (``pylog broker
--override zookeeper.connect=...``), so a test can stop (SIGTERM), kill -9,
pause (SIGSTOP), resume and restart each node on its own and keep one down
for as long as it likes (the supervisor of ``--nodes N`` would restart it):
the replication tests' cluster (tests/replication, tests/soak).

ZooKeeper is tests/zk_process.py's server; each node is a
:class:`broker_process.BrokerProcess` (pylog's main run by tests/node_main.py,
which adds an asyncio task dump on SIGUSR1) logging at INFO to
``node-<i>.log`` next to its data dir, which test failures quote.  Cluster state is read from
ZooKeeper with kazoo (registrations, the controller, each partition's leader,
epoch and ISR, as the controller and leaders wrote them) and from the nodes
with confluent-kafka's AdminClient (the metadata clients get).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from broker_process import BrokerProcess, free_ports, wait_for
from confluent_kafka import KafkaException
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from zk_process import start_zookeeper

from pylog.zk.server import ZooKeeperServer

# Liveness bounds (never speed thresholds) for a shared 2-core machine.
NODE_START_TIMEOUT_S = 90
# A controlled shutdown may retry (controlled.shutdown.max.retries, 5 s apart).
NODE_STOP_TIMEOUT_S = 60
CLUSTER_TIMEOUT_S = 90
# Short, so a killed or paused node's registration goes soon (tests/zk_process.py's
# ZooKeeper allows 1 s to 10 s).
SESSION_TIMEOUT_MS = 6000
# The nodes run pylog's main with a task dump on SIGUSR1 (for stuck stops).
NODE_MAIN = Path(__file__).resolve().parent / "node_main.py"
# Each partition's two index files take their whole size on disk at once
# (allocated, not sparse): 10 MiB each by default, 3 GiB for a 3-node
# cluster's __consumer_offsets alone.  A test's logs need far less.
INDEX_BYTES = 65536


def stacks(pid: int) -> str:
    """The Python stacks of a stuck process, where py-spy is installed (a
    diagnosis for the failure's message; nothing needs it)."""
    spy = shutil.which("py-spy") or shutil.which("py-spy", path=os.path.dirname(sys.executable))
    if spy is None:
        return ""
    found = subprocess.run([spy, "dump", "--pid", str(pid)], capture_output=True, text=True,
                           timeout=60, check=False)
    return f"\nits threads (py-spy dump):\n{found.stdout}{found.stderr}"


def segment_bytes(partition_dir: Path) -> bytes:
    """A partition's whole log as the segment files hold it, in offset order."""
    return b"".join(p.read_bytes() for p in sorted(partition_dir.glob("*.log")))


class NodeCluster:
    """ZooKeeper and nodes 0..n-1 on ports ``port``.. with data in
    ``base/node-<i>``; ``overrides`` go to every node."""

    def __init__(self, base: Path, nodes: int, *overrides: str,
                 session_timeout_ms: int = SESSION_TIMEOUT_MS) -> None:
        self.base = base
        self.count = nodes
        self.overrides = (f"zookeeper.session.timeout.ms={session_timeout_ms}",
                          f"log.index.size.max.bytes={INDEX_BYTES}", *overrides)
        self.port = free_ports(nodes)
        self.zk_server: ZooKeeperServer | None = None
        self.zk: KazooClient | None = None
        self.nodes: dict[int, BrokerProcess] = {}  # the latest run of each node
        self.paused: set[int] = set()

    # -- the whole cluster ------------------------------------------------------------

    def start(self) -> NodeCluster:
        self.base.mkdir(parents=True, exist_ok=True)
        self.zk_server = start_zookeeper(self.base / "zookeeper")
        self.zk = KazooClient(hosts=self.zk_server.address)
        self.zk.start(timeout=30)
        for i in range(self.count):
            self.nodes[i] = self._process(i).launch()
        for node in self.nodes.values():
            node.wait_ready(NODE_START_TIMEOUT_S)
        self.wait(lambda: self.registered() == set(range(self.count))
                  and self.controller() is not None, "every node registered, a controller")
        for i in range(self.count):
            self.wait_knows_cluster(i)
        return self

    def cleanup(self) -> None:
        """Everything stopped, whatever state a test left it in (nodes killed:
        a test that wanted a clean stop did it itself)."""
        for i in list(self.paused):
            self.resume(i)
        for node in self.nodes.values():
            node.kill()
        if self.zk is not None:
            self.zk.stop()
            self.zk.close()
        if self.zk_server is not None:
            self.zk_server.stop()

    @property
    def bootstrap(self) -> str:
        return ",".join(self.address(i) for i in range(self.count))

    def address(self, node_id: int) -> str:
        return f"127.0.0.1:{self.port + node_id}"

    def log_dir(self, node_id: int) -> Path:
        return self.base / f"node-{node_id}"

    def partition_dir(self, node_id: int, topic: str, partition: int) -> Path:
        return self.log_dir(node_id) / f"{topic}-{partition}"

    def log_file(self, node_id: int) -> Path:
        return self.base / f"node-{node_id}.log"

    def logs(self, lines: int = 60) -> str:
        """The last ``lines`` of every node's log, for a failure's message."""
        out = []
        for i in range(self.count):
            path = self.log_file(i)
            text = path.read_text(errors="replace").splitlines() if path.exists() else []
            out.append(f"--- node {i} ({path}) ---\n" + "\n".join(text[-lines:]))
        return "\n".join(out)

    def wait(self, predicate: Callable[[], object], what: str,
             timeout: float = CLUSTER_TIMEOUT_S) -> Any:
        """wait_for, with the nodes' logs in the failure."""
        try:
            return wait_for(predicate, timeout, what, interval=0.2)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.logs()}") from None

    # -- one node -----------------------------------------------------------------------

    def _process(self, node_id: int) -> BrokerProcess:
        assert self.zk_server is not None
        return BrokerProcess(self.log_dir(node_id), f"broker.id={node_id}",
                             f"zookeeper.connect={self.zk_server.address}", *self.overrides,
                             port=self.port + node_id, env={"PYLOG_LOG_LEVEL": "INFO"},
                             log_file=self.log_file(node_id), main=(str(NODE_MAIN),))

    def pid(self, node_id: int) -> int:
        proc = self.nodes[node_id].proc
        assert proc is not None
        return proc.pid

    def running(self, node_id: int) -> bool:
        node = self.nodes.get(node_id)
        return node is not None and node.proc is not None and node.proc.poll() is None

    def start_node(self, node_id: int) -> None:
        """Start a node that is down, once its last run's registration is gone
        (after a kill -9 that takes the session timeout, as in Kafka), and wait
        until it is registered again."""
        assert not self.running(node_id), f"node {node_id} is running"
        self.wait(lambda: node_id not in self.registered(),
                  f"node {node_id}'s old registration to go")
        self.nodes[node_id] = self._process(node_id).launch()
        try:
            self.nodes[node_id].wait_ready(NODE_START_TIMEOUT_S)
        except RuntimeError as exc:
            raise AssertionError(f"{exc}\n{self.logs()}") from None
        self.wait(lambda: node_id in self.registered(), f"node {node_id} registered")
        self.wait_knows_cluster(node_id)

    def wait_knows_cluster(self, node_id: int) -> None:
        """Until the node's Metadata names the controller and the live nodes:
        a node answers clients as soon as it listens, with no cluster to tell
        of until the controller's UpdateMetadata reaches it (Kafka's too), and
        a client that met it then may wait long before it asks again
        (librdkafka's admin client: 30 s for a controller)."""
        from confluent_kafka.admin import AdminClient

        def knows() -> bool:
            # A client of its own each time: its first Metadata goes to this node.
            admin = AdminClient({"bootstrap.servers": self.address(node_id)})
            try:
                md = admin.list_topics(timeout=10)
            except KafkaException:  # no answer yet (or a partial one): ask again
                return False
            live = self.registered()
            return md.controller_id in live and set(md.brokers) == live

        self.wait(knows, f"node {node_id}'s metadata to name the controller and the nodes")

    def stop_node(self, node_id: int, wait_unregistered: bool = True) -> int:
        """SIGTERM (a controlled shutdown) and wait for the exit; its status.
        Then (by default) until its registration is gone (ZooKeeper must be
        up for that)."""
        if node_id in self.paused:
            self.resume(node_id)
        proc = self.nodes[node_id].proc
        assert proc is not None
        proc.send_signal(signal.SIGTERM)
        try:
            status = proc.wait(NODE_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            threads = stacks(proc.pid)
            os.kill(proc.pid, signal.SIGUSR1)  # tests/node_main.py: its asyncio tasks
            time.sleep(2)
            tasks = self.nodes[node_id].log_text().rpartition("--- SIGUSR1:")[2]
            raise AssertionError(f"node {node_id} did not stop within {NODE_STOP_TIMEOUT_S}s "
                                 f"of SIGTERM{threads}\nits asyncio tasks:{tasks}\n"
                                 f"{self.logs()}") from None
        if wait_unregistered:
            self.wait(lambda: node_id not in self.registered(), f"node {node_id} unregistered")
        return status

    def kill_node(self, node_id: int, wait_unregistered: bool = True) -> None:
        """kill -9; then (by default) until ZooKeeper expired its session, so
        the controller has moved its leadership (Kafka's hard bounce waits so)."""
        self.nodes[node_id].kill()
        self.paused.discard(node_id)
        if wait_unregistered:
            self.wait(lambda: node_id not in self.registered(),
                      f"node {node_id}'s session to expire")

    def pause(self, node_id: int) -> None:
        """SIGSTOP: the process hangs (a GC pause, a stalled disk, a partition)."""
        os.kill(self.pid(node_id), signal.SIGSTOP)
        self.paused.add(node_id)

    def resume(self, node_id: int) -> None:
        if self.running(node_id):
            os.kill(self.pid(node_id), signal.SIGCONT)
        self.paused.discard(node_id)

    # -- cluster state in ZooKeeper -------------------------------------------------------

    def _json(self, path: str) -> Any:
        assert self.zk is not None
        try:
            data, _ = self.zk.get(path)
        except NoNodeError:
            return None
        return json.loads(data) if data else None

    def registered(self) -> set[int]:
        assert self.zk is not None
        try:
            return {int(x) for x in self.zk.get_children("/brokers/ids")}
        except NoNodeError:
            return set()

    def controller(self) -> int | None:
        found = self._json("/controller")
        return None if found is None else int(found["brokerid"])

    def state(self, topic: str, partition: int) -> dict[str, Any] | None:
        """The partition's state znode: leader, leader_epoch, isr, ..."""
        return self._json(f"/brokers/topics/{topic}/partitions/{partition}/state")

    def leader(self, topic: str, partition: int) -> int:
        st = self.state(topic, partition)
        return -1 if st is None else int(st["leader"])

    def isr(self, topic: str, partition: int) -> list[int]:
        st = self.state(topic, partition)
        return [] if st is None else sorted(st["isr"])

    def wait_isr(self, topic: str, partitions: Iterable[int], isr: Iterable[int],
                 timeout: float = CLUSTER_TIMEOUT_S, by_leader: bool = False) -> None:
        """Until ZooKeeper holds ``isr`` for the partitions.  ``by_leader``:
        and the leader, which changed it, applied it to its own state too
        (it writes ZooKeeper first, so a client may still meet the old ISR
        there for a moment)."""
        want = sorted(isr)
        parts = list(partitions)
        self.wait(lambda: all(self.isr(topic, p) == want for p in parts),
                  f"ISR of {topic} {parts} to be {want} (now "
                  f"{[self.state(topic, p) for p in parts]})", timeout)
        if by_leader:
            for p in parts:
                self.wait(lambda p=p: self._leader_isr(topic, p) == want,
                          f"the leader to apply {topic}-{p}'s ISR {want}", timeout)

    def _leader_isr(self, topic: str, partition: int) -> list[int] | None:
        """The ISR of the partition's leader's last ISR change log line."""
        changes = re.findall(rf"{re.escape(topic)}-{partition}'s ISR: \[[0-9, ]*\] -> "
                             r"\[([0-9, ]*)\]", self.nodes[self.leader(topic, partition)]
                             .log_text())
        return sorted(int(x) for x in changes[-1].split(",")) if changes else None

    def wait_leader(self, topic: str, partition: int, among: Iterable[int],
                    timeout: float = CLUSTER_TIMEOUT_S) -> int:
        allowed = set(among)
        self.wait(lambda: self.leader(topic, partition) in allowed,
                  f"{topic}-{partition} led by one of {sorted(allowed)}", timeout)
        return self.leader(topic, partition)

    # -- topics ---------------------------------------------------------------------------

    def create_topic(self, topic: str, partitions: int = 1, replication: int = 3,
                     config: dict[str, str] | None = None,
                     assignment: list[list[int]] | None = None) -> None:
        """Create it and wait until every partition has its whole replica set
        in sync and every live node's metadata names its leader."""
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        if assignment is not None:
            new = NewTopic(topic, len(assignment), replica_assignment=assignment,
                           config=config or {})
            replicas = [sorted(a) for a in assignment]
        else:
            new = NewTopic(topic, partitions, replication, config=config or {})
            replicas = []
        admin.create_topics([new])[topic].result(60)
        for p in range(partitions if assignment is None else len(assignment)):
            want = replicas[p] if replicas else None
            self.wait(lambda p=p, want=want: (st := self.state(topic, p)) is not None
                      and len(st["isr"]) == (len(want) if want else replication)
                      and (want is None or sorted(st["isr"]) == want),
                      f"{topic}-{p} created with a full ISR")
        self.wait_metadata(topic)

    def metadata_leaders(self, topic: str, node_id: int) -> dict[int, int]:
        """partition -> leader as node ``node_id``'s Metadata answers it."""
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.address(node_id)})
        try:
            md = admin.list_topics(topic, timeout=20)
        except KafkaException:
            return {}
        found = md.topics.get(topic)
        if found is None or found.error is not None:
            return {}
        return {p: pm.leader for p, pm in found.partitions.items()}

    def wait_metadata(self, topic: str, nodes: Iterable[int] | None = None) -> None:
        """Until the metadata of every (given, running) node names each
        partition's leader as ZooKeeper does."""
        ids = [i for i in (range(self.count) if nodes is None else nodes)
               if self.running(i) and i not in self.paused]

        def agree() -> bool:
            for i in ids:
                leaders = self.metadata_leaders(topic, i)
                if not leaders or any(self.leader(topic, p) != leader
                                      for p, leader in leaders.items()):
                    return False
            return True

        self.wait(agree, f"the nodes' metadata of {topic} to follow ZooKeeper")

    def wait_replicas_equal(self, topic: str, partition: int, nodes: Iterable[int],
                            timeout: float = CLUSTER_TIMEOUT_S) -> bytes:
        """Until the partition's segment bytes are the same on every given node
        (replication caught up, nothing diverging left); those bytes."""
        ids = list(nodes)

        def same() -> bytes | None:
            got = [segment_bytes(self.partition_dir(i, topic, partition)) for i in ids]
            return got[0] if all(g == got[0] for g in got) and got[0] else None

        def sizes() -> str:
            return ", ".join(f"node {i}: "
                             f"{len(segment_bytes(self.partition_dir(i, topic, partition)))}"
                             for i in ids)

        try:
            return wait_for(same, timeout, f"{topic}-{partition}'s logs to be equal", 0.2)
        except AssertionError as exc:
            raise AssertionError(f"{exc} ({sizes()})\n{self.logs()}") from None

