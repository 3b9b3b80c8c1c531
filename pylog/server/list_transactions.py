"""ListTransactions (KIP-664; v1 adds DurationFilter, KIP-994).

As Kafka's TransactionCoordinator.handleListTransactions ->
TransactionStateManager.listTransactionStates with every transaction log
partition loaded: error NONE, each state filter that is not the name of a
TransactionState (case-sensitive) in ``unknown_state_filters`` (the filters
are a set: each name once), and the transactions that pass the state,
producer-id and duration filters.  No transaction can exist here (pylog has
no transaction coordinator: InitProducerId refuses transactional ids), so
that list is always empty, whatever the filters; producer-id and duration
filters are never refused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.protocol import ApiKey

if TYPE_CHECKING:
    from pylog.server.broker import Broker

API_KEY = ApiKey.LIST_TRANSACTIONS
VERSIONS = (0, 1)
# kafka.coordinator.transaction.TransactionState.AllStates' names.
STATES = frozenset(("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit",
                    "CompleteAbort", "Dead", "PrepareEpochFence"))


def handle(broker: Broker, header: Any, body: Any) -> dict[str, Any]:
    unknown = [s for s in dict.fromkeys(body.state_filters) if s not in STATES]
    return {"throttle_time_ms": 0, "error_code": 0, "unknown_state_filters": unknown,
            "transaction_states": []}
