"""A cluster node's producer ids (pylog.server.producer_ids.BlockProducerIds)
from blocks in a real ZooKeeper: unique across nodes, never waiting on
ZooKeeper on the caller's thread, and still handed out while it is away."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from broker_process import wait_for

from pylog.server.producer_ids import BlockProducerIds, ProducerIdsUnavailable
from pylog.zk.client import KafkaZkClient
from pylog.zk.server import ZooKeeperServer

NewClient = Callable[..., KafkaZkClient]


def _ids(zk: KafkaZkClient, broker_id: int) -> BlockProducerIds:
    def allocate() -> tuple[int, int]:
        block = zk.allocate_producer_id_block(broker_id)
        return block.first, block.last
    ids = BlockProducerIds(allocate)
    ids.start()
    return ids


def _drain(ids: BlockProducerIds, n: int) -> list[int]:
    """n ids, waiting (off the id source) for a block still being fetched."""
    out: list[int] = []
    while len(out) < n:
        try:
            out.append(ids.next_id())
        except ProducerIdsUnavailable:
            time.sleep(0.01)
    return out


def test_two_nodes_never_hand_out_one_id(new_client: NewClient) -> None:
    a, b = _ids(new_client(), 0), _ids(new_client(), 1)
    try:
        got_a, got_b = _drain(a, 2500), _drain(b, 2500)
        assert len(set(got_a)) == len(set(got_b)) == 2500
        assert not set(got_a) & set(got_b)
        # The first block was taken at start: ids from the first call on.
        assert got_a[0] == 0 and got_b[0] == 1000
    finally:
        a.close()
        b.close()


def test_ids_keep_coming_while_zookeeper_is_away(own_zk_server: ZooKeeperServer,
                                                 new_client: NewClient) -> None:
    zk = new_client(own_zk_server.address + "/p", connection_timeout_ms=1500)
    ids = _ids(zk, 0)
    try:
        first = _drain(ids, 950)  # past 90%: the next block is fetched meanwhile
        wait_for(lambda: ids.next_block_ready, 30,
                 "the next block fetched")
        own_zk_server.stop()
        # The rest of this block and all of the prefetched one, none of them
        # asking ZooKeeper (which would raise now).
        rest = [ids.next_id() for _ in range(1050)]
        assert first + rest == list(range(2000))
        # Both blocks spent, ZooKeeper down: the client is told to retry.
        with pytest.raises(ProducerIdsUnavailable):
            for _ in range(100):
                ids.next_id()
    finally:
        ids.close()
