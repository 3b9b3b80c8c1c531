"""The cluster's metadata in ZooKeeper, in Kafka's ZooKeeper-mode layout.

* :mod:`pylog.zk.znodes` -- the znode paths and their JSON (Kafka's ZkData);
* :mod:`pylog.zk.connection` -- one kazoo session: bounded calls, session
  events and watches that survive reconnects and session expiry;
* :mod:`pylog.zk.client` -- :class:`KafkaZkClient`, Kafka's operations on them;
* :mod:`pylog.zk.server` -- a ZooKeeper server from Debian's package.

Nothing here imports the broker (pylog.server), the controller or the
coordinators: they stand on this package.
"""
