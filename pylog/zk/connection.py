"""One ZooKeeper session through kazoo, made safe to build on (Kafka's ZooKeeperClient).

* Every call is bounded.  While the client is disconnected a call waits for the
  connection at most ``connection_timeout_ms`` and then raises
  :class:`ZkUnavailableError`; a request cut off by a connection loss is sent
  again once reconnected, within the same bound (Kafka's
  retryRequestsUntilConnected, which waits forever instead).  A write sent
  again may have been done the first time: a create then finds its znode
  (KafkaZkClient's ephemeral creates check the owner, as Kafka's do), a
  compare-and-set reports a conflict and the caller reads again.
* ``max_in_flight`` (Kafka's zookeeper.max.in.flight.requests) caps the
  requests this client has outstanding: kazoo itself pipelines any number on
  its one connection, so a semaphore here holds the rest back.
* Session events and watch callbacks run on one thread of this connection
  ("pylog-zk-events"), one at a time, in the order they happened -- not on
  kazoo's threads -- so a callback may itself call the client (a session
  listener re-registering the broker, say).  A slow callback delays the ones
  behind it: hand long work to a thread of your own.
* Watches survive a reconnect and a session expiry.  kazoo drops its watches
  when the connection drops (it does not re-send them, as Java's client does),
  so every registered watch is re-armed on each (re)connection, and its
  callback runs if the znode changed meanwhile.
"""

from __future__ import annotations

import enum
import logging
import queue
import re
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

import kazoo.exceptions as kz
from kazoo.client import KazooClient, KazooState
from kazoo.protocol.states import EventType, WatchedEvent, ZnodeStat
from kazoo.retry import KazooRetry

from pylog.zk.errors import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    ZkConnectError,
    ZkError,
    ZkUnavailableError,
)

log = logging.getLogger("pylog.zk")
# kazoo's own log (connection drops, retries) goes under pylog.zk, not kazoo.client.
KAZOO_LOG = logging.getLogger("pylog.zk.kazoo")

# A kazoo call: KazooClient -> IAsyncResult.
Issue = Callable[[KazooClient], Any]


class SessionEvent(enum.Enum):
    DISCONNECTED = "disconnected"  # the connection dropped; the session may live on
    RECONNECTED = "reconnected"  # back on the same session: ephemeral znodes are intact
    SESSION_LOST = "session_lost"  # the session expired: its ephemeral znodes are gone
    SESSION_ESTABLISHED = "session_established"  # a new session after a loss: re-register


def split_connect(connect: str) -> tuple[str, str]:
    """Kafka's zookeeper.connect ``h1:2181,h2:2181/chroot`` -> (hosts, chroot or "")."""
    hosts, slash, chroot = connect.strip().partition("/")
    chroot = slash + chroot if chroot else ""
    if not hosts or (chroot and not re.fullmatch(r"(/[^/\x00]+)+", chroot)):
        raise ZkConnectError(f"zookeeper.connect {connect!r} is not host:port[,host:port...]"
                             "[/chroot] (the chroot a path without a trailing '/')")
    return hosts, chroot


def translate(exc: kz.KazooException, what: str, path: str) -> ZkError:
    """A kazoo error as one of pylog.zk's."""
    if isinstance(exc, kz.NodeExistsError):
        return NodeExistsError(path)
    if isinstance(exc, kz.NoNodeError):
        return NoNodeError(path)
    if isinstance(exc, kz.BadVersionError):
        return BadVersionError(f"{what} {path}: the znode's version changed")
    if isinstance(exc, kz.NotEmptyError):
        return NotEmptyError(f"Node not empty: {path}")
    return ZkError(f"{what} {path} failed: {type(exc).__name__} {exc}".rstrip())


class Watch:
    """A watch on a znode's data (or its children), re-armed after every
    (re)connection.  ``on_change(value, stat)`` gets (data, stat), or for a
    children watch (names, stat); (None, None) while the znode is missing."""

    def __init__(self, conn: ZkConnection, path: str, children: bool,
                 on_change: Callable[[Any, ZnodeStat | None], None]) -> None:
        self.path = path
        self.children = children
        self._conn = conn
        self._on_change = on_change
        self._seen: Any = self  # the version delivered last (self: nothing yet)
        self.cancelled = False

    def cancel(self) -> None:
        """No more callbacks (ZooKeeper may still fire the armed one; it is ignored)."""
        self.cancelled = True
        self._conn._forget(self)

    def _fired(self, event: WatchedEvent) -> None:
        # kazoo's thread.  A NONE event means the connection dropped (kazoo
        # dropped the watch): the reconnection re-arms it.
        if not self.cancelled and event.type != EventType.NONE:
            self._conn.submit(self._arm)

    def _read(self) -> tuple[Any, ZnodeStat | None]:
        c, path = self._conn, self.path
        try:
            if self.children:
                return c.call("get children of", path,
                              lambda zk: zk.get_children_async(path, self._fired, True))
            return c.call("get", path, lambda zk: zk.get_async(path, self._fired))
        except NoNodeError:
            # Watch for its creation instead; if it came back meanwhile, read again.
            if c.call("exists", path, lambda zk: zk.exists_async(path, self._fired)) is None:
                return None, None
            return self._read()

    def _arm(self, raise_errors: bool = False) -> None:
        """(Event thread.) Read with a watch set; call back if the znode changed."""
        if self.cancelled:
            return
        try:
            value, stat = self._read()
        except ZkError:
            if raise_errors:
                raise
            log.debug("watch on %s not armed; re-armed on reconnection", self.path, exc_info=True)
            return
        # pzxid moves with every child change (even a child gone and back), mzxid with data.
        version = None if stat is None else stat.pzxid if self.children else stat.mzxid
        if version != self._seen and not self.cancelled:
            seen, self._seen = self._seen, version
            try:
                self._on_change(value, stat)
            except BaseException:
                self._seen = seen  # not delivered: called again on the next arming
                raise


class ZkConnection:
    """One kazoo client and its session, thread-safe and with bounded calls."""

    def __init__(self, connect: str, session_timeout_ms: int = 18000,
                 connection_timeout_ms: int | None = None, max_in_flight: int = 10,
                 create_chroot: bool = True) -> None:
        self.connect = connect
        self.create_chroot = create_chroot
        self.hosts, self.chroot = split_connect(connect)
        self.session_timeout_ms = session_timeout_ms
        # Kafka: zookeeper.connection.timeout.ms defaults to the session timeout.
        self.connection_timeout_ms = connection_timeout_ms or session_timeout_ms
        if max_in_flight < 1:
            raise ValueError("max_in_flight must be at least 1")
        self.max_in_flight = max_in_flight
        self._slots = threading.BoundedSemaphore(max_in_flight)
        self._zk: KazooClient | None = None
        self._connected = threading.Event()
        self._closed = False
        self._lock = threading.Lock()
        self._session_id: int | None = None
        self._lost = False
        self._listeners: list[Callable[[SessionEvent], None]] = []
        self._watches: set[Watch] = set()
        self._events: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run_events, name="pylog-zk-events",
                                        daemon=True)

    # -- lifecycle ----------------------------------------------------------------------

    def start(self) -> None:
        """Connect (creating the chroot if missing, as Kafka does, unless told
        not to), or raise ZkConnectError after connection_timeout_ms."""
        if self.chroot and self.create_chroot:
            self._create_chroot()
        retry = KazooRetry(max_tries=-1, delay=0.05, backoff=2, max_delay=1.0, max_jitter=0.2)
        try:
            self._zk = KazooClient(hosts=self.connect, timeout=self.session_timeout_ms / 1000,
                                   connection_retry=retry, logger=KAZOO_LOG)
        except (ValueError, kz.ConfigurationError) as exc:
            raise ZkConnectError(f"zookeeper.connect {self.connect!r}: {exc}") from None
        self._zk.add_listener(self._on_state)
        self._thread.start()
        try:
            self._zk.start(timeout=self.connection_timeout_ms / 1000)
        except self._zk.handler.timeout_exception:
            self.close()
            raise ZkConnectError(
                f"Timed out waiting for connection while in state: CONNECTING (ZooKeeper "
                f"at {self.connect}, zookeeper.connection.timeout.ms="
                f"{self.connection_timeout_ms})") from None

    def _create_chroot(self) -> None:
        root = ZkConnection(self.hosts, self.session_timeout_ms, self.connection_timeout_ms, 1)
        root.start()
        try:
            parts = self.chroot.split("/")[1:]
            for i in range(1, len(parts) + 1):
                path = "/" + "/".join(parts[:i])
                try:
                    root.call("create", path, lambda zk, p=path: zk.create_async(p, None))
                except NodeExistsError:
                    pass
        finally:
            root.close()

    def close(self) -> None:
        """Close the session (its ephemeral znodes go at once) and the event thread."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self._zk is not None:
            self._zk.stop()
            self._zk.close()
        self._events.put(None)
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(10)

    @property
    def connected(self) -> bool:
        return self._connected.is_set()

    @property
    def session_id(self) -> int | None:
        """The current session's id (None before the first connection)."""
        return self._session_id

    @property
    def client_id(self) -> tuple[int, bytes] | None:
        """(session id, password) of the current session, as kazoo's client_id."""
        return self._zk.client_id if self._zk is not None else None

    # -- session events -----------------------------------------------------------------

    def add_state_listener(self, listener: Callable[[SessionEvent], None]) -> None:
        with self._lock:
            self._listeners.append(listener)

    def remove_state_listener(self, listener: Callable[[SessionEvent], None]) -> None:
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def _on_state(self, state: str) -> None:
        # kazoo's connection thread: must not block, so only record and queue.
        if state == KazooState.CONNECTED:
            client_id = self._zk.client_id if self._zk is not None else None
            with self._lock:
                previous, self._session_id = self._session_id, client_id[0] if client_id else None
                lost, self._lost = self._lost, False
            self._connected.set()
            if previous is not None:
                if not lost and self._session_id != previous:
                    self._emit(SessionEvent.SESSION_LOST)  # a new session without a LOST seen
                self._emit(SessionEvent.SESSION_ESTABLISHED if lost or self._session_id != previous
                           else SessionEvent.RECONNECTED)
            for w in list(self._watches):
                self.submit(w._arm)
        elif state == KazooState.SUSPENDED:
            self._connected.clear()
            self._emit(SessionEvent.DISCONNECTED)
        else:  # LOST: the session expired, or we closed it
            self._connected.clear()
            if not self._closed:
                with self._lock:
                    self._lost = True
                self._emit(SessionEvent.SESSION_LOST)

    def _emit(self, event: SessionEvent) -> None:
        log.info("ZooKeeper %s: %s", self.connect, event.value)

        def deliver() -> None:
            with self._lock:
                listeners = list(self._listeners)
            for listener in listeners:
                try:
                    listener(event)
                except Exception:
                    log.exception("ZooKeeper session listener failed on %s", event.value)

        self.submit(deliver)

    # -- the event thread ---------------------------------------------------------------

    def submit(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the event thread, after what is queued there."""
        self._events.put(fn)

    def on_event_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def _run_events(self) -> None:
        while (fn := self._events.get()) is not None:
            if self._closed:
                continue
            try:
                fn()
            except Exception:
                log.exception("ZooKeeper callback failed")

    # -- watches ------------------------------------------------------------------------

    def watch(self, path: str, children: bool,
              on_change: Callable[[Any, ZnodeStat | None], None]) -> Watch:
        """Register a watch and arm it: ``on_change`` runs once now (on the event
        thread, before this returns) and then after each change.  Raises
        ZkUnavailableError (and registers nothing) if it cannot be armed."""
        if self._closed or self._zk is None:
            raise ZkUnavailableError(f"watch {path}: the ZooKeeper client is not running")
        w = Watch(self, path, children, on_change)
        with self._lock:
            self._watches.add(w)
        try:
            self.run_on_event_thread(lambda: w._arm(raise_errors=True))
        except BaseException:
            w.cancel()
            raise
        return w

    def run_on_event_thread(self, fn: Callable[[], Any]) -> Any:
        """``fn()`` on the event thread, waiting for it (inline if already there)."""
        if self.on_event_thread():
            return fn()
        done: Future[Any] = Future()

        def run() -> None:
            try:
                done.set_result(fn())
            except BaseException as exc:
                done.set_exception(exc)

        self.submit(run)
        while True:
            try:
                return done.result(timeout=1.0)
            except TimeoutError:
                # A closed client's event thread runs nothing more: do not wait for it.
                if not self._thread.is_alive():
                    raise ZkUnavailableError("the ZooKeeper client is closed") from None

    def _forget(self, w: Watch) -> None:
        with self._lock:
            self._watches.discard(w)

    # -- bounded calls ------------------------------------------------------------------

    def call(self, what: str, path: str, issue: Issue) -> Any:
        """``issue(kazoo_client)``'s result (it returns kazoo's IAsyncResult).
        ``what`` and ``path`` name the request in errors."""
        result = self.call_many(what, [(path, issue)])[0]
        if isinstance(result, ZkError):
            raise result
        return result

    def call_many(self, what: str, requests: Sequence[tuple[str, Issue]]) -> list[Any]:
        """Several requests pipelined; each one's result, or its ZkError (a
        missing znode is NoNodeError...).  ZkUnavailableError is raised for all."""
        if self._zk is None:
            raise ZkUnavailableError("the ZooKeeper client is not started")
        deadline = time.monotonic() + self.connection_timeout_ms / 1000
        results: list[Any] = [None] * len(requests)
        pending = list(range(len(requests)))
        while pending:
            sent = [(i, self._send(what, requests[i], deadline)) for i in pending]
            pending = []
            for i, async_result in sent:
                wait = max(deadline - time.monotonic(), 0.0) + self.session_timeout_ms / 1000
                try:
                    results[i] = async_result.get(timeout=wait)
                except (kz.ConnectionLoss, kz.SessionExpiredError, kz.ConnectionClosedError):
                    pending.append(i)  # sent again once reconnected, as Kafka does
                except self._zk.handler.timeout_exception:
                    raise ZkUnavailableError(
                        f"{what} {requests[i][0]}: no answer from ZooKeeper at {self.connect} "
                        f"within {wait * 1000:.0f} ms; whether it was done is unknown") from None
                except kz.KazooException as exc:
                    results[i] = translate(exc, what, requests[i][0])
        return results

    def _send(self, what: str, request: tuple[str, Issue], deadline: float) -> Any:
        path, issue = request
        if self._closed:
            raise ZkUnavailableError(f"{what} {path}: the ZooKeeper client is closed")
        if not self._connected.wait(max(deadline - time.monotonic(), 0.0)):
            state = self._zk.client_state if self._zk is not None else "CLOSED"
            raise ZkUnavailableError(
                f"{what} {path}: not connected to ZooKeeper at {self.connect} (state {state}) "
                f"within zookeeper.connection.timeout.ms={self.connection_timeout_ms}")
        if not self._slots.acquire(timeout=max(deadline - time.monotonic(), 0.0)):
            raise ZkUnavailableError(
                f"{what} {path}: all {self.max_in_flight} in-flight requests to ZooKeeper "
                f"(zookeeper.max.in.flight.requests) still unanswered after "
                f"{self.connection_timeout_ms} ms")
        try:
            async_result = issue(self._zk)
        except BaseException:
            self._slots.release()
            raise
        async_result.rawlink(lambda _: self._slots.release())
        return async_result
