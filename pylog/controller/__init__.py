"""The controller of a ZooKeeper-mode cluster: elected through ``/controller``,
it assigns replicas, elects leaders and tells the brokers (LeaderAndIsr,
UpdateMetadata, StopReplica).  See :mod:`pylog.controller.controller`."""
