"""A real ZooKeeper server (Debian's package, through pylog.zk.server) for any
test directory that needs one; the session's server is tests/conftest.py's
zk_server fixture."""

from __future__ import annotations

import uuid
from pathlib import Path

from broker_process import free_port, safe_name
from kazoo.client import KazooClient

from pylog.zk.connection import ZkConnection
from pylog.zk.server import ZooKeeperServer

# Sessions between 1 s and 20 s (2 and 20 ticks): short enough for expiry tests.
TICK_TIME_MS = 500
# A small heap: the tests share the machine with brokers.
HEAP_OPTS = "-Xmx128m"
ZK_SERVER_SH = Path("/usr/share/zookeeper/bin/zkServer.sh")


def start_zookeeper(data_dir: Path, port: int | None = None) -> ZooKeeperServer:
    """A standalone server on 127.0.0.1 (a free port unless given), gone with
    the test process even if that is killed."""
    return ZooKeeperServer({"dataDir": str(data_dir), "clientPort": str(port or free_port()),
                            "clientPortAddress": "127.0.0.1", "tickTime": str(TICK_TIME_MS)},
                           heap_opts=HEAP_OPTS, die_with_parent=True).start()


def chroot_for(test_name: str) -> str:
    """A chroot of one test's own, so tests never see each other's znodes."""
    return f"/{safe_name(test_name, limit=60)}-{uuid.uuid4().hex[:8]}"


def expire_session(conn: ZkConnection, address: str) -> None:
    """Expire ``conn``'s session the way ZooKeeper's own tests do: a second
    client joins the session (with its id and password) and closes it."""
    client_id = conn.client_id
    assert client_id is not None
    other = KazooClient(hosts=address, client_id=client_id)
    other.start(timeout=15)
    other.stop()
    other.close()
