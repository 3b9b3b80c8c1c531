"""DescribeLogDirs: the node's one log dir, its partitions' sizes and disk space."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from pylog.protocol import ApiKey

if TYPE_CHECKING:
    from pylog.server.context import NodeServices, RequestContext

API_KEY = ApiKey.DESCRIBE_LOG_DIRS
VERSIONS = (0, 4)


def handle(node: NodeServices, ctx: RequestContext, body: Any) -> dict[str, Any]:
    logs = node.logs.logs()
    if body.topics is None:  # null: every partition
        wanted = sorted(logs)
    else:
        # A set in Kafka (LogManager.describeLogDirs): a partition named
        # twice is described once.
        wanted = list(dict.fromkeys((t.topic, p) for t in body.topics for p in t.partitions
                                    if (t.topic, p) in logs))
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for name, p in wanted:
        by_topic.setdefault(name, []).append({
            "partition_index": p, "partition_size": logs[(name, p)].size,
            "offset_lag": 0, "is_future_key": False})
    st = os.statvfs(node.logs.dir)
    return {"throttle_time_ms": 0, "error_code": 0, "results": [{
        "error_code": 0, "log_dir": str(node.logs.dir),
        "topics": [{"name": n, "partitions": parts} for n, parts in by_topic.items()],
        "total_bytes": st.f_blocks * st.f_frsize, "usable_bytes": st.f_bavail * st.f_frsize}]}
