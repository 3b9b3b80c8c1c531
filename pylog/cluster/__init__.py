"""A cluster on one host: ``pylog broker --nodes N``.

The supervisor (:mod:`pylog.cluster.supervisor`) runs a ZooKeeper server
(unless ``zookeeper.connect`` names one) and N node processes, each a plain
``python -m pylog broker`` with its own node id, port and log dir
(:mod:`pylog.cluster.plan`), restarts a node that dies and stops them all on
SIGTERM.  What it prints is in :mod:`pylog.cluster.lines`.
"""
