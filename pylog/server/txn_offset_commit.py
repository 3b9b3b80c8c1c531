"""TxnOffsetCommit: a group's offsets committed inside a producer's transaction (v0-3).

Sent to the group coordinator after AddOffsetsToTxn.  The producer must hold
its transaction, with the group's offsets partition in it (checked with the
local transaction coordinator, as the partition verification does for
produce); the group then checks the member and generation when they are
given (v3+, KIP-447) and writes the offsets in the transaction
(:meth:`pylog.coordinator.GroupCoordinator.commit_txn_offsets`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.coordinator.acked import answer
from pylog.coordinator.coordinator import Commits, OffsetCommit
from pylog.coordinator.offsets_store import OFFSETS_TOPIC
from pylog.coordinator.txn_log import TXN_TOPIC
from pylog.protocol import ApiKey, ErrorCode
from pylog.server.add_partitions_to_txn import old_fenced

if TYPE_CHECKING:
    from pylog.server.context import NodeServices, RequestContext

API_KEY = ApiKey.TXN_OFFSET_COMMIT
VERSIONS = (0, 3)


def _coordinated_here(node: NodeServices, transactional_id: str) -> bool:
    found = node.metadata.partition(TXN_TOPIC, node.txns.store.partition_for(transactional_id))
    return found is None or found.leader == node.node_id


def handle(node: NodeServices, ctx: RequestContext, body: Any) -> Any:
    version = ctx.api_version
    commits = [OffsetCommit(t.name, p.partition_index, p.committed_offset,
                            p.committed_leader_epoch if version >= 2 else -1,
                            p.committed_metadata)
               for t in body.topics for p in t.partitions]
    code = ErrorCode.NONE
    # The group's coordinator answers first (NOT_COORDINATOR sends the client
    # to find it): commit_txn_offsets gives its error.  The transaction is
    # checked when this node coordinates it; one coordinated by another node
    # of a cluster is not (Kafka 3.6 does not check TxnOffsetCommit at all).
    if not node.groups.coordinator_error(body.group_id, create=True) \
            and _coordinated_here(node, body.transactional_id):
        partition = node.groups.store.partition_for(body.group_id)
        code = node.txns.verify(body.transactional_id, body.producer_id,
                                body.producer_epoch, OFFSETS_TOPIC, partition)
    if code == ErrorCode.INVALID_PRODUCER_EPOCH:
        code = ErrorCode.PRODUCER_FENCED
    if code:
        return _response({(c.topic, c.partition): old_fenced(code, version) for c in commits})
    generation = body.generation_id if version >= 3 else -1
    member = body.member_id if version >= 3 else ""
    instance = body.group_instance_id if version >= 3 else None
    # Answered once the offsets are in the in-sync replicas (as OffsetCommit).
    return answer(node.groups.commit_txn_offsets(body.group_id, body.producer_id,
                                                 body.producer_epoch, generation, member,
                                                 instance, commits), _response)


def _response(errors: Commits) -> dict[str, Any]:
    by_topic: dict[str, list[dict[str, int]]] = {}
    for (topic, p), error in errors.items():
        by_topic.setdefault(topic, []).append({"partition_index": p, "error_code": error})
    return {"throttle_time_ms": 0, "topics": [{"name": t, "partitions": parts}
                                              for t, parts in by_topic.items()]}
