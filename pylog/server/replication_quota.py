"""Replication throttles (Kafka's ReplicationQuotaManager, KIP-73).

Used to keep a reassignment from starving the cluster: on the leader side,
the bytes served to followers of the throttled replicas are kept near
``leader.replication.throttled.rate``; on the follower side, the bytes
fetched for them near ``follower.replication.throttled.rate`` (broker
configs, dynamic).  Which replicas are throttled is the topic's
``leader.replication.throttled.replicas`` / ``follower.replication.throttled.replicas``
(``partition:broker`` pairs naming this broker, or ``*``).  As Kafka, only a
replica out of the ISR is ever held back, and a throttled partition is left
out of a fetch (leader: its records; follower: the partition) while the
measured rate is over the bound, so the rate averages out at it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from pylog.server.client_quotas import Rate

LONG_MAX = 2**63 - 1


def _now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class ReplicationQuota:
    """One direction's bound and measured rate."""

    def __init__(self, bound: Callable[[], int], samples: int, window_ms: int) -> None:
        self.bound = bound  # bytes/s, read each time (a dynamic config)
        # Measured over replication.quota.window.num windows (never less
        # than all but one of them: a start lets that much through at once).
        self.rate = Rate(samples, window_ms, _now_ms())

    def exceeded(self) -> bool:
        bound = self.bound()
        return bound < LONG_MAX and self.rate.measure(_now_ms()) > bound

    def record(self, size: int) -> None:
        self.rate.record(size, _now_ms())


class ReplicationThrottles:
    def __init__(self, node_id: int, config: Mapping[str, object],
                 topic_configs: Mapping[str, Mapping[str, str]]) -> None:
        self.node_id = node_id
        self.topic_configs = topic_configs  # each topic's explicit configs
        samples = int(config["replication.quota.window.num"])  # type: ignore[call-overload]
        window_ms = 1000 * int(config["replication.quota.window.size.seconds"])  # type: ignore[call-overload]
        self.leader = ReplicationQuota(lambda: config["leader.replication.throttled.rate"],
                                       samples, window_ms)
        self.follower = ReplicationQuota(lambda: config["follower.replication.throttled.rate"],
                                         samples, window_ms)

    def _listed(self, topic: str, partition: int, key: str) -> bool:
        value = self.topic_configs.get(topic, {}).get(key, "").strip()
        if not value:
            return False
        if value == "*":
            return True
        for item in value.split(","):
            p, _, broker = item.strip().partition(":")
            if p.strip() == str(partition) and broker.strip() == str(self.node_id):
                return True
        return False

    def leader_throttled(self, topic: str, partition: int) -> bool:
        return self._listed(topic, partition, "leader.replication.throttled.replicas")

    def follower_throttled(self, topic: str, partition: int) -> bool:
        return self._listed(topic, partition, "follower.replication.throttled.replicas")
