"""A chroot of its own for each pylog.zk test on the session's real ZooKeeper
server (zk_server, tests/conftest.py), and a started KafkaZkClient on it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from zk_process import chroot_for, start_zookeeper

from pylog.zk.client import KafkaZkClient
from pylog.zk.server import ZooKeeperServer

# Client timeouts: sessions outlive a quick server restart; calls give up fast.
SESSION_TIMEOUT_MS = 8000
CONNECTION_TIMEOUT_MS = 3000


@pytest.fixture
def own_zk_server(zookeeper_installed: None, tmp_path: Path) -> Iterator[ZooKeeperServer]:
    """A server of the test's own, for tests that stop and restart it."""
    server = start_zookeeper(tmp_path / "zookeeper")
    yield server
    server.kill()


@pytest.fixture
def zk_connect(zk_server: ZooKeeperServer, request: pytest.FixtureRequest) -> str:
    """zookeeper.connect with a chroot of this test's own."""
    return zk_server.address + chroot_for(request.node.name)


@pytest.fixture
def new_client(zk_connect: str) -> Iterator[Callable[..., KafkaZkClient]]:
    """``new_client()`` -> a started KafkaZkClient on the test's chroot (closed after)."""
    clients: list[KafkaZkClient] = []

    def make(connect: str = zk_connect, **kwargs: int) -> KafkaZkClient:
        kwargs.setdefault("session_timeout_ms", SESSION_TIMEOUT_MS)
        kwargs.setdefault("connection_timeout_ms", CONNECTION_TIMEOUT_MS)
        client = KafkaZkClient(connect, **kwargs)
        clients.append(client)
        return client.start()

    yield make
    for client in clients:
        client.close()


@pytest.fixture
def zk(new_client: Callable[..., KafkaZkClient]) -> KafkaZkClient:
    return new_client()


@pytest.fixture
def raw(zk_connect: str, zk: KafkaZkClient) -> Iterator[KazooClient]:
    """A plain kazoo client on the same chroot: what another tool would see or write."""
    client = KazooClient(hosts=zk_connect)
    client.start(timeout=15)
    yield client
    client.stop()
    client.close()
