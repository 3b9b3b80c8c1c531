"""The session underneath KafkaZkClient against a real server that goes away:
bounded calls, session events, re-registration after expiry, and watches that
keep firing after a reconnect and after a session expiry."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from broker_process import free_port, wait_for
from zk_process import chroot_for, expire_session, start_zookeeper

from pylog.zk.client import KafkaZkClient, SessionEvent
from pylog.zk.errors import NodeExistsError, ZkConnectError, ZkUnavailableError
from pylog.zk.server import ZooKeeperServer
from pylog.zk.znodes import BrokerInfo, EndPoint

NewClient = Callable[..., KafkaZkClient]
# Generous: only to tell a bounded call from a hung one, never a speed check.
HANG = 120.0


def broker(broker_id: int) -> BrokerInfo:
    return BrokerInfo(broker_id, [EndPoint("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9092)])


def restart(server: ZooKeeperServer, down_s: float = 0.5) -> ZooKeeperServer:
    """Stop the server, wait, and start it again on the same port and dataDir."""
    server.stop()
    time.sleep(down_s)
    return start_zookeeper(server.data_dir, server.port)


def in_thread(fn: Callable[[], object]) -> tuple[list[object], float]:
    """``fn()``'s outcome (a value or the exception) and how long it took;
    fails if it does not return within HANG seconds."""
    out: list[object] = []

    def run() -> None:
        try:
            out.append(fn())
        except Exception as exc:
            out.append(exc)

    start = time.monotonic()
    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(HANG)
    assert not t.is_alive(), f"the call hung for {HANG} s"
    return out, time.monotonic() - start


def test_unreachable_server_at_start_is_zk_connect_error(zookeeper_installed: None) -> None:
    address = f"127.0.0.1:{free_port()}"  # nobody listens there
    client = KafkaZkClient(address, session_timeout_ms=6000, connection_timeout_ms=1000)
    out, _ = in_thread(client.start)
    assert isinstance(out[0], ZkConnectError)
    message = str(out[0])
    assert "Timed out waiting for connection while in state: CONNECTING" in message
    assert address in message


@pytest.mark.parametrize("connect", ["", "/chroot", "127.0.0.1:2181/trailing/",
                                     "127.0.0.1:2181//x"])
def test_malformed_connect_string(connect: str) -> None:
    with pytest.raises(ZkConnectError, match="is not host:port"):
        KafkaZkClient(connect)


def test_calls_fail_within_the_bound_while_the_server_is_down(own_zk_server: ZooKeeperServer,
                                                              new_client: NewClient) -> None:
    zk = new_client(own_zk_server.address + "/c", connection_timeout_ms=1500)
    events: list[SessionEvent] = []
    zk.add_state_listener(events.append)
    zk.create_topic("t", {0: [1]})
    own_zk_server.stop()
    wait_for(lambda: SessionEvent.DISCONNECTED in events, 30, "the disconnection seen")
    for call in (lambda: zk.get_topic_assignment("t"), lambda: zk.create_topic("u", {0: [1]}),
                 lambda: zk.watch_topics(lambda _: None), zk.get_all_brokers):
        out, _ = in_thread(call)
        assert isinstance(out[0], ZkUnavailableError), out
        assert "not connected to ZooKeeper" in str(out[0])
        assert "zookeeper.connection.timeout.ms=1500" in str(out[0])
    server = restart(own_zk_server, 0)
    try:
        # Back on the same session: the data and the client work again.
        wait_for(lambda: SessionEvent.RECONNECTED in events, 60, "the reconnection")
        assert zk.get_topic_assignment("t") is not None
        assert events == [SessionEvent.DISCONNECTED, SessionEvent.RECONNECTED]
    finally:
        server.kill()


def test_a_call_waits_out_a_short_outage(own_zk_server: ZooKeeperServer,
                                         new_client: NewClient) -> None:
    zk = new_client(own_zk_server.address + "/c", connection_timeout_ms=60000)
    zk.create_topic("t", {0: [1]})
    own_zk_server.stop()
    result: list[object] = []
    t = threading.Thread(target=lambda: result.append(zk.topic_exists("t")), daemon=True)
    t.start()
    server = start_zookeeper(own_zk_server.data_dir, own_zk_server.port)
    try:
        t.join(HANG)
        assert result == [True]  # sent once the connection was back
    finally:
        server.kill()


def test_watches_fire_after_a_reconnect(own_zk_server: ZooKeeperServer,
                                        new_client: NewClient) -> None:
    connect = own_zk_server.address + "/c"
    node, admin = new_client(connect), new_client(connect)
    node.register_broker(broker(1))
    session = node.session_id
    topics: list[set[str]] = []
    controller: list[int | None] = []
    admin.watch_topics(topics.append)
    admin.watch_controller(controller.append)
    events: list[SessionEvent] = []
    admin.add_state_listener(events.append)
    server = restart(own_zk_server)
    try:
        wait_for(lambda: events == [SessionEvent.DISCONNECTED, SessionEvent.RECONNECTED], 60,
                 "the admin client back on its session")
        wait_for(lambda: node.connected, 60, "the node back")
        assert node.session_id == session and admin.get_broker(1) is not None  # still there
        node.create_topic("t", {0: [1]})
        node.try_create_controller(1)
        wait_for(lambda: topics[-1] == {"t"} and controller[-1] == 1, 15,
                 "both watches fired after the reconnect")
        node.create_topic("u", {0: [1]})  # and they stay armed
        wait_for(lambda: topics[-1] == {"t", "u"}, 15, "the next change")
    finally:
        server.kill()


def test_no_change_lost_across_a_restart(own_zk_server: ZooKeeperServer,
                                         new_client: NewClient) -> None:
    """A change made as soon as the server is back -- before or after the
    watcher's client reconnects, whichever comes first -- reaches the watch."""
    connect = own_zk_server.address + "/c"
    watcher = new_client(connect)
    seen: list[set[int]] = []
    watcher.watch_broker_ids(seen.append)
    own_zk_server.stop()
    server = start_zookeeper(own_zk_server.data_dir, own_zk_server.port)
    try:
        writer = new_client(connect)
        writer.register_broker(broker(7))
        wait_for(lambda: seen[-1] == {7}, 60, "the change made during the outage")
    finally:
        server.kill()


def test_reregistration_and_watches_after_session_expiry(zk_server: ZooKeeperServer,
                                                         new_client: NewClient) -> None:
    node, other = new_client(), new_client()
    ids: list[set[int]] = []
    data: list[int | None] = []
    node.watch_broker_ids(ids.append)
    node.watch_controller(data.append)
    events: list[SessionEvent] = []

    def on_event(event: SessionEvent) -> None:
        events.append(event)
        if event is SessionEvent.SESSION_ESTABLISHED:
            node.register_broker(broker(1))  # what a broker does: register again

    node.add_state_listener(on_event)
    node.register_broker(broker(1))
    first_epoch = node.get_broker(1).epoch  # type: ignore[union-attr]
    old_session = node.session_id
    expire_session(node.conn, zk_server.address)
    wait_for(lambda: SessionEvent.SESSION_ESTABLISHED in events, 60, "a new session")
    assert events[-2:] == [SessionEvent.SESSION_LOST, SessionEvent.SESSION_ESTABLISHED]
    assert node.session_id != old_session
    info = wait_for(lambda: other.get_broker(1), 15, "the broker registered again")
    assert info.epoch > first_epoch  # type: ignore[attr-defined]
    # Watches set by the old session still fire.
    other.try_create_controller(2)
    wait_for(lambda: data[-1] == 2, 15, "the controller watch after the expiry")
    other.register_broker(broker(2))
    wait_for(lambda: ids[-1] == {1, 2}, 15, "the broker ids watch after the expiry")


def test_registration_refused_to_another_session_after_expiry(zk_server: ZooKeeperServer,
                                                              new_client: NewClient) -> None:
    node, intruder = new_client(), new_client()
    node.register_broker(broker(1))
    expire_session(node.conn, zk_server.address)
    # The expired session's znode is gone: another client may take the id...
    wait_for(lambda: intruder.get_broker(1) is None, 30, "the ephemeral znode gone")
    intruder.register_broker(broker(1))
    wait_for(lambda: node.connected and node.session_id is not None, 60, "the node's new session")
    # ...and then the node's own re-registration is refused, naming the id.
    with pytest.raises(NodeExistsError, match="broker id 1"):
        node.register_broker(broker(1))


def test_chroot_is_created_and_isolates(zk_server: ZooKeeperServer,
                                        new_client: NewClient) -> None:
    chroot = chroot_for("nested") + "/a/b"
    a = new_client(zk_server.address + chroot)
    b = new_client(zk_server.address + chroot_for("other"))
    a.create_topic("t", {0: [1]})
    assert a.get_all_topics() == {"t"} and b.get_all_topics() == set()


def test_a_closed_client_refuses_calls(new_client: NewClient) -> None:
    zk = new_client()
    zk.close()
    for call in (zk.get_all_topics, lambda: zk.watch_topics(lambda _: None)):
        out, _ = in_thread(call)
        assert isinstance(out[0], ZkUnavailableError), out
        assert "closed" in str(out[0]) or "not running" in str(out[0])
