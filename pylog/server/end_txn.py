"""EndTxn: commit or abort a producer's transaction (v0-3).

The coordinator writes PrepareCommit/PrepareAbort, the markers into every
partition of the transaction, then CompleteCommit/CompleteAbort, and this
answers after the last step, or in a cluster once the Prepare state is in
the in-sync replicas and the markers are on their way
(:mod:`pylog.coordinator.transactions`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.coordinator.acked import answer
from pylog.protocol import ApiKey
from pylog.server.add_partitions_to_txn import old_fenced

if TYPE_CHECKING:
    from pylog.server.context import NodeServices, RequestContext

API_KEY = ApiKey.END_TXN
VERSIONS = (0, 3)


def handle(node: NodeServices, ctx: RequestContext, body: Any) -> Any:
    return answer(node.txns.end_txn(body.transactional_id, body.producer_id,
                                    body.producer_epoch, body.committed),
                  lambda code: {"throttle_time_ms": 0,
                                "error_code": old_fenced(code, ctx.api_version)})
