"""ListTransactions (KIP-664; v1 adds DurationFilter, KIP-994).

As Kafka's TransactionCoordinator.handleListTransactions ->
TransactionStateManager.listTransactionStates with every transaction log
partition loaded: error NONE, each state filter that is not the name of a
TransactionState (case-sensitive) in ``unknown_state_filters`` (the filters
are a set: each name once), and the transactional ids that pass the
filters: never a Dead one; with producer-id filters, those ids only; with
state filters, those states only (when every filter named is unknown, none
passes); with a duration filter >= 0 (v1), those whose transaction started
more than that many ms ago.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from pylog.coordinator.txn_log import STATE_NAMES, TxnState
from pylog.protocol import ApiKey

if TYPE_CHECKING:
    from pylog.server.context import NodeServices, RequestContext

API_KEY = ApiKey.LIST_TRANSACTIONS
VERSIONS = (0, 1)


def handle(node: NodeServices, ctx: RequestContext, body: Any) -> dict[str, Any]:
    names = list(dict.fromkeys(body.state_filters))
    unknown = [s for s in names if s not in STATE_NAMES]
    states = {STATE_NAMES[s] for s in names if s in STATE_NAMES}
    pids = set(body.producer_id_filters)
    duration = body.duration_filter if ctx.api_version >= 1 else -1
    now = time.time_ns() // 1_000_000
    # COORDINATOR_LOAD_IN_PROGRESS and none while a partition loads.
    error, found = node.txns.list_states()
    listed = [
        {"transactional_id": m.transactional_id, "producer_id": m.producer_id,
         "transaction_state": m.state.label}
        for m in found
        if m.state != TxnState.DEAD
        and (not pids or m.producer_id in pids)
        and (not names or m.state in states)
        and not (duration >= 0 and now - m.start_ms <= duration)]
    return {"throttle_time_ms": 0, "error_code": error, "unknown_state_filters": unknown,
            "transaction_states": listed}
