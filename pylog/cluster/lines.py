"""The lines the supervisor prints.  Scripts and tests wait for them: change
them only together with their readers.

On stdout, once each: a node's line as soon as that node printed its own
ready line (in the order the nodes get ready), then the cluster's line once
every node has and is in the cluster (its Metadata lists every node and a
controller: pylog.cluster.probe); ``STOPPING`` and ``STOPPED`` around a stop.  The nodes' own
stdout lines (``pylog broker: node 0 ...``) are passed on there as well.  On
stderr: restarts (of nodes and of ZooKeeper), give-ups and kills.
"""

from __future__ import annotations

import signal

# stdout
NODE_READY = "pylog cluster: node {node_id} listening on {address}, data in {log_dir}"
CLUSTER_READY = "pylog cluster: {nodes} nodes ready, zookeeper at {zookeeper}"
STOPPING = "pylog cluster: stopping"
STOPPED = "pylog cluster: stopped"

# stderr
NODE_DIED = "pylog cluster: node {node_id} (pid {pid}) {how}; restarting it in {delay:g} s"
NODE_RESTARTED = "pylog cluster: node {node_id} restarted (pid {pid}), listening on {address}"
NODE_FAILED = "pylog cluster: node {node_id} (pid {pid}) {why} ({how}); stopping the cluster"
NODE_KILLED = "pylog cluster: node {node_id} (pid {pid}) killed: {why}"
ZOOKEEPER_DIED = "pylog cluster: ZooKeeper (pid {pid}) {how}; restarting it in {delay:g} s"
ZOOKEEPER_RESTARTED = "pylog cluster: ZooKeeper restarted (pid {pid}), serving on {address}"
ZOOKEEPER_NOT_RESTARTED = ("pylog cluster: ZooKeeper could not be restarted: {error}; "
                           "trying again in {delay:g} s")
ZOOKEEPER_FAILED = "pylog cluster: {error}"

# NODE_FAILED's reasons
REFUSED_CONFIG = "refused its configuration"
NEVER_STARTED = "could not start"


def describe_exit(returncode: int) -> str:
    """``exited with status 1`` or ``was killed by SIGKILL`` (Popen's returncode)."""
    if returncode >= 0:
        return f"exited with status {returncode}"
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = f"signal {-returncode}"
    return f"was killed by {name}"
