"""The supervisor of a one-host cluster (``pylog broker --nodes N``).

ZooKeeper first (unless ``zookeeper.connect`` names one), then the N nodes
at once; the cluster is announced once every node is in it (its Metadata
lists every node and a controller: :mod:`pylog.cluster.probe`).  A node
that dies is restarted after a back-off (:mod:`pylog.cluster.backoff`); one
that never got ready, or refused its config (exit status 2), stops the
cluster instead, since a restart would fail the same way forever.  The
supervisor's own ZooKeeper is restarted too when it dies, on the same port
and dataDir with the same back-off: the nodes go on serving the partitions
they lead meanwhile and resume their sessions once it is back, as Kafka's
brokers ride out a ZooKeeper outage.  SIGTERM, SIGINT or SIGHUP stop the
nodes (SIGTERM: their controlled shutdown; SIGKILL after
``stop_timeout_s``), then ZooKeeper, and the supervisor exits 0; a second
signal kills the nodes at once.  Every child gets SIGTERM from the kernel if
the supervisor dies, even by SIGKILL (:mod:`pylog.orphans`), so nothing is
left behind.

One thread: a selector waits on the nodes' stdout pipes and on a socket the
signal handlers wake (SIGCHLD too: a child's death is noticed at once).
"""

from __future__ import annotations

import selectors
import signal
import socket
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TextIO

from pylog.cluster import lines
from pylog.cluster.backoff import RestartBackoff
from pylog.cluster.node_process import NodeProcess
from pylog.cluster.plan import ClusterConfigError, ClusterPlan, NodePlan, plan_cluster
from pylog.cluster.probe import has_joined
from pylog.zk.server import ZooKeeperServerError

# A node's controlled shutdown moves its leaders away through the controller
# first; past this it is killed (its next start recovers its logs).
STOP_TIMEOUT_S = 60.0
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
# The loop wakes at least this often even with nothing to do (a safety net:
# SIGCHLD and the pipes wake it for everything that happens).
IDLE_WAKE_S = 1.0
# How often the nodes are asked whether they joined, until the cluster is announced.
JOIN_POLL_S = 0.2


@dataclass(slots=True)
class _Slot:
    """One node id over its runs."""

    plan: NodePlan
    proc: NodeProcess | None = None
    restart_at: float | None = None
    announced: bool = False  # its NODE_READY line is out (first run ready)
    joined: bool = False  # its Metadata lists every node and a controller (probe)
    backoff: RestartBackoff = field(default_factory=RestartBackoff)


class Supervisor:
    def __init__(self, plan: ClusterPlan, stop_timeout_s: float = STOP_TIMEOUT_S,
                 out: TextIO | None = None, err: TextIO | None = None) -> None:
        self.plan = plan
        self.stop_timeout_s = stop_timeout_s
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.slots = [_Slot(node) for node in plan.nodes]
        self.status = 0
        self._selector = selectors.DefaultSelector()
        self._signals: list[int] = []
        self._stop_deadline: float | None = None
        self._cluster_announced = False
        # The supervisor's ZooKeeper: when it is due to be started again
        # (it died), and whether a restarted one is not serving yet.
        self._zk_restart_at: float | None = None
        self._zk_started_at = time.monotonic()
        self._zk_starting = False
        self._zk_backoff = RestartBackoff()

    # -- output -------------------------------------------------------------

    def _say(self, line: str, stream: TextIO) -> None:
        try:
            print(line, file=stream, flush=True)
        except (OSError, ValueError):  # a closed pipe: the cluster goes on without a reader
            pass

    # -- the run ------------------------------------------------------------

    def run(self) -> int:
        """Run the cluster until a stop signal (0) or a failure (1)."""
        wake_r, wake_w = socket.socketpair()
        for s in (wake_r, wake_w):
            s.setblocking(False)
        self._selector.register(wake_r, selectors.EVENT_READ, None)
        old_wakeup = signal.set_wakeup_fd(wake_w.fileno(), warn_on_full_buffer=False)
        old_handlers = {sig: signal.signal(sig, self._on_signal)
                        for sig in (*STOP_SIGNALS, signal.SIGCHLD)}
        zookeeper = self.plan.zookeeper
        try:
            if zookeeper is not None:
                try:
                    zookeeper.start()
                except ZooKeeperServerError as exc:
                    self._say(lines.ZOOKEEPER_FAILED.format(error=exc), self.err)
                    return 1
            for slot in self.slots:
                if not self._signals:  # a stop signal while ZooKeeper started
                    self._spawn(slot)
            self._loop(wake_r)  # returns once every node is down
            if zookeeper is not None:
                zookeeper.stop()
            self._say(lines.STOPPED, self.out)
            return self.status
        finally:
            # Only on an error of our own is anything still running here.
            for slot in self.slots:
                if slot.proc is not None:
                    slot.proc.kill()
                    slot.proc.close()
            if zookeeper is not None:
                zookeeper.kill()
            signal.set_wakeup_fd(old_wakeup)
            for sig, handler in old_handlers.items():
                signal.signal(sig, handler)
            self._selector.close()
            wake_r.close()
            wake_w.close()

    def _on_signal(self, signum: int, frame: object) -> None:
        # Runs between two bytecodes of the main thread: only take note.
        if signum != signal.SIGCHLD:
            self._signals.append(signum)

    def _loop(self, wake: socket.socket) -> None:
        while True:
            for key, _ in self._selector.select(self._wait_s()):
                if key.data is None:
                    try:
                        while wake.recv(4096):
                            pass
                    except BlockingIOError:
                        pass
                else:
                    self._forward(key.data)
            self._handle_signals()
            self._reap()
            self._check_zookeeper()
            self._check_joined()
            if self._stop_deadline is None:
                self._restart_due()
                self._restart_zookeeper_due()
            elif all(slot.proc is None for slot in self.slots):
                return
            elif time.monotonic() >= self._stop_deadline:
                self._kill_all(f"it did not stop within {self.stop_timeout_s:g} s")

    def _wait_s(self) -> float:
        now = time.monotonic()
        due = [s.restart_at for s in self.slots if s.restart_at is not None]
        if self._zk_restart_at is not None:
            due.append(self._zk_restart_at)
        if self._joining():
            due.append(now + JOIN_POLL_S)
        if self._stop_deadline is not None:
            due.append(self._stop_deadline)
        return max(0.0, min([now + IDLE_WAKE_S, *due]) - now)

    # -- nodes --------------------------------------------------------------

    def _spawn(self, slot: _Slot) -> None:
        slot.restart_at = None
        try:
            proc = NodeProcess(slot.plan.node_id, self.plan.command(slot.plan))
        except OSError as exc:
            self._say(f"pylog cluster: cannot start node {slot.plan.node_id}: {exc}", self.err)
            self.status = 1
            self._begin_stop()
            return
        slot.proc = proc
        self._selector.register(proc.fd, selectors.EVENT_READ, slot)

    def _forward(self, slot: _Slot) -> None:
        """Pass the node's stdout lines on; announce it when it gets ready."""
        proc = slot.proc
        if proc is None:
            return
        was_ready = proc.ready
        for line in proc.read_lines():
            self._say(line, self.out)
        if proc.eof and self._registered(proc):
            self._selector.unregister(proc.fd)
        if proc.ready and not was_ready and self._stop_deadline is None:
            self._on_ready(slot, proc)

    def _registered(self, proc: NodeProcess) -> bool:
        try:
            self._selector.get_key(proc.fd)
        except KeyError:
            return False
        return True

    def _on_ready(self, slot: _Slot, proc: NodeProcess) -> None:
        node_id = slot.plan.node_id
        if slot.announced:
            self._say(lines.NODE_RESTARTED.format(node_id=node_id, pid=proc.pid,
                                                  address=proc.address), self.err)
            return
        slot.announced = True
        self._say(lines.NODE_READY.format(node_id=node_id, address=proc.address,
                                          log_dir=proc.log_dir), self.out)

    def _joining(self) -> bool:
        """Every node got ready, and the cluster is not announced yet."""
        return (not self._cluster_announced and self._stop_deadline is None
                and all(s.announced for s in self.slots))

    def _check_joined(self) -> None:
        """Announce the cluster once every node is in it (pylog.cluster.probe)."""
        if not self._joining():
            return
        ids = [s.plan.node_id for s in self.slots]
        for slot in self.slots:
            proc = slot.proc
            if not slot.joined and proc is not None and proc.address is not None:
                slot.joined = has_joined(proc.address, ids)
        if all(s.joined for s in self.slots):
            self._cluster_announced = True
            self._say(lines.CLUSTER_READY.format(nodes=len(self.slots),
                                                 zookeeper=self.plan.zookeeper_connect),
                      self.out)

    def _reap(self) -> None:
        """Nodes that exited: restarted later, or the end of the cluster."""
        for slot in self.slots:
            proc = slot.proc
            if proc is None or (returncode := proc.poll()) is None:
                continue
            if not proc.eof and self._registered(proc):
                self._forward(slot)  # its last words come before ours
                if self._registered(proc):  # a grandchild holds the pipe: stop reading it
                    self._selector.unregister(proc.fd)
            proc.close()
            slot.proc = None
            if self._stop_deadline is not None:
                continue
            node_id, how = slot.plan.node_id, lines.describe_exit(returncode)
            why = (lines.REFUSED_CONFIG if returncode == 2
                   else None if slot.announced else lines.NEVER_STARTED)
            if why is not None:
                self._say(lines.NODE_FAILED.format(node_id=node_id, pid=proc.pid, why=why,
                                                   how=how), self.err)
                self.status = 1
                self._begin_stop()
                continue
            delay = slot.backoff.next_delay(proc.ran_for())
            slot.restart_at = time.monotonic() + delay
            self._say(lines.NODE_DIED.format(node_id=node_id, pid=proc.pid, how=how,
                                             delay=delay), self.err)

    def _restart_due(self) -> None:
        now = time.monotonic()
        for slot in self.slots:
            if slot.restart_at is not None and slot.restart_at <= now:
                self._spawn(slot)

    # -- ZooKeeper ----------------------------------------------------------

    def _check_zookeeper(self) -> None:
        """A restarted ZooKeeper that serves again is announced; one that
        died (first run or restart) gets a restart after the back-off."""
        zookeeper = self.plan.zookeeper
        if (zookeeper is None or zookeeper.proc is None or self._zk_restart_at is not None
                or self._stop_deadline is not None):
            return
        returncode = zookeeper.proc.poll()
        if returncode is None:
            if self._zk_starting and zookeeper.serving():
                self._zk_starting = False
                self._say(lines.ZOOKEEPER_RESTARTED.format(pid=zookeeper.proc.pid,
                                                           address=zookeeper.address), self.err)
            return
        # The nodes keep serving what they lead without it and resume their
        # sessions once it is back (same port, same dataDir: same sessions).
        self._zk_starting = False
        delay = self._zk_backoff.next_delay(time.monotonic() - self._zk_started_at)
        self._zk_restart_at = time.monotonic() + delay
        self._say(lines.ZOOKEEPER_DIED.format(pid=zookeeper.proc.pid, delay=delay,
                                              how=lines.describe_exit(returncode)), self.err)

    def _restart_zookeeper_due(self) -> None:
        zookeeper = self.plan.zookeeper
        if zookeeper is None or self._zk_restart_at is None:
            return
        now = time.monotonic()
        if self._zk_restart_at > now:
            return
        self._zk_restart_at = None
        self._zk_started_at = now
        try:
            zookeeper.launch()
        except ZooKeeperServerError as exc:  # its port taken meanwhile, ...: later again
            delay = self._zk_backoff.next_delay(0.0)
            self._zk_restart_at = now + delay
            self._say(lines.ZOOKEEPER_NOT_RESTARTED.format(error=exc, delay=delay), self.err)
            return
        self._zk_starting = True

    # -- stopping -----------------------------------------------------------

    def _handle_signals(self) -> None:
        if not self._signals:
            return
        count, self._signals = len(self._signals), []
        if self._stop_deadline is None:
            self._begin_stop()
            count -= 1
        if count:
            self._kill_all("a second stop signal")

    def _begin_stop(self) -> None:
        if self._stop_deadline is not None:
            return
        self._say(lines.STOPPING, self.out)
        self._stop_deadline = time.monotonic() + self.stop_timeout_s
        self._zk_restart_at = None
        for slot in self.slots:
            slot.restart_at = None
            if slot.proc is not None:
                slot.proc.terminate()

    def _kill_all(self, why: str) -> None:
        for slot in self.slots:
            if slot.proc is not None and slot.proc.poll() is None:
                slot.proc.kill()
                self._say(lines.NODE_KILLED.format(node_id=slot.plan.node_id,
                                                   pid=slot.proc.pid, why=why), self.err)


def run_cluster(config_path: str | None, overrides: Sequence[str], nodes: int,
                zookeeper_config: str | None = None) -> int:
    """``pylog broker --nodes N``: 2 for a cluster refused before it starts,
    1 when it cannot run or fails, 0 after a stop signal."""
    try:
        plan = plan_cluster(config_path, overrides, nodes, zookeeper_config)
    except ClusterConfigError as exc:
        print(f"pylog broker: {exc}", file=sys.stderr)
        return 2
    except ZooKeeperServerError as exc:  # not installed
        print(f"pylog broker: {exc}", file=sys.stderr)
        return 1
    return Supervisor(plan).run()
