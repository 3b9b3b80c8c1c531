"""Whether a node of a one-host cluster has joined it.

A node prints its ready line once its listener is bound; the controller's
first UpdateMetadata reaches it a moment later.  Until then its Metadata
lists no nodes and a CreateTopics sent to it fails ("Replication factor: 1
larger than available brokers: 0"), so the supervisor announces the cluster
only once every node's own Metadata lists all the cluster's nodes and names
a controller: a script that waits for that line can use the cluster at once.
"""

from __future__ import annotations

from collections.abc import Collection

from pylog.errors import PylogError
from pylog.protocol import ApiKey
from pylog.tools.common import ToolError
from pylog.tools.wire import WireClient

# One probe's bound: a node that does not answer now is asked again later.
PROBE_TIMEOUT_S = 1.0
WILDCARDS = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}


def has_joined(address: str, node_ids: Collection[int],
               timeout: float = PROBE_TIMEOUT_S) -> bool:
    """Whether the node at ``address`` (``host:port``, as its ready line
    says) lists every one of ``node_ids`` in its Metadata, and a controller."""
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    try:
        with WireClient([(WILDCARDS.get(host, host), int(port))], timeout) as client:
            r = client.request(ApiKey.METADATA, {"topics": [],
                                                 "allow_auto_topic_creation": False})
    except (OSError, ToolError, PylogError, ValueError):
        return False  # not answering yet (or going away): asked again later
    return r.controller_id >= 0 and set(node_ids) <= {b.node_id for b in r.brokers}
