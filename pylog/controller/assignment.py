"""Where a new topic's (or partition's) replicas go: Kafka's AdminUtils.assignReplicasToBrokers.

Rack-unaware: the first replica of each partition round-robin over the
brokers from a random start, the others at an increasing shift, so the
replicas of one broker's partitions spread over the others.  Rack-aware
(every broker has ``broker.rack``): the same over a broker list that
alternates racks, each later replica skipping racks (then brokers) that
already hold one while some do not.  A replica assignment given by the
client is checked as Kafka checks it (:func:`check_assignment`).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from pylog.protocol import ErrorCode


class AssignmentError(Exception):
    """Refused with a Kafka error code (INVALID_REPLICATION_FACTOR, ...)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def rack_alternated(racks: Mapping[int, str]) -> list[int]:
    """The brokers ordered rack by rack in turn (racks sorted, brokers sorted
    in each): ``0, 3, 6, 1, 4, 7, ...`` for racks {0,1,2}, {3,4,5}, {6,7,8}."""
    by_rack: dict[str, list[int]] = {}
    for broker in sorted(racks):
        by_rack.setdefault(racks[broker], []).append(broker)
    iters = [iter(by_rack[r]) for r in sorted(by_rack)]
    out: list[int] = []
    i = 0
    while len(out) < len(racks):
        nxt = next(iters[i], None)
        if nxt is not None:
            out.append(nxt)
        i = (i + 1) % len(iters)
    return out


def assign_replicas(brokers: Mapping[int, str | None], partitions: int, replication_factor: int,
                    *, first_partition: int = 0, start: int = -1,
                    rng: random.Random | None = None) -> dict[int, list[int]]:
    """Partition -> replicas for ``partitions`` partitions numbered from
    ``first_partition`` over ``brokers`` (id -> rack or None).  ``start``
    fixes the random start index and shift (tests); AssignmentError with
    Kafka's words when it cannot be done."""
    if partitions <= 0:
        raise AssignmentError(ErrorCode.INVALID_PARTITIONS,
                              "Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise AssignmentError(ErrorCode.INVALID_REPLICATION_FACTOR,
                              "Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise AssignmentError(ErrorCode.INVALID_REPLICATION_FACTOR,
                              f"Replication factor: {replication_factor} larger than available "
                              f"brokers: {len(brokers)}.")
    rng = rng or random.Random()
    racked = [b for b, rack in brokers.items() if rack is not None]
    if racked and len(racked) != len(brokers):
        raise AssignmentError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                              "Not all brokers have rack information for replica rack aware "
                              "assignment.")
    if racked:
        racks = {b: r for b, r in brokers.items() if r is not None}
        order = rack_alternated(racks)
    else:
        racks = {}
        order = sorted(brokers)
    n = len(order)
    start_index = start if start >= 0 else rng.randrange(n)
    shift = start if start >= 0 else rng.randrange(n)
    num_racks = len(set(racks.values()))
    out: dict[int, list[int]] = {}
    partition = max(0, first_partition)
    for _ in range(partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start_index) % n
        replicas = [order[first]]
        if not racks:
            replicas += [order[_replica_index(first, shift, j, n)]
                         for j in range(replication_factor - 1)]
        else:
            with_rack = {racks[order[first]]}
            k = 0
            for _ in range(replication_factor - 1):
                while True:
                    broker = order[_replica_index(first, shift * num_racks, k, n)]
                    k += 1
                    rack = racks[broker]
                    if ((rack not in with_rack or len(with_rack) == num_racks)
                            and (broker not in replicas or len(replicas) == n)):
                        replicas.append(broker)
                        with_rack.add(rack)
                        break
        out[partition] = replicas
        partition += 1
    return out


def check_assignment(assignment: Mapping[int, Sequence[int]], live: set[int],
                     first_partition: int = 0) -> None:
    """A client's replica assignment, as Kafka's validateReplicaAssignment:
    consecutive partitions from ``first_partition``, one replication factor
    for all, no replica twice, every replica a live broker."""
    if sorted(assignment) != list(range(first_partition, first_partition + len(assignment))):
        raise AssignmentError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                              "partitions should be a consecutive 0-based integer sequence")
    sizes = {len(r) for r in assignment.values()}
    if 0 in sizes:
        raise AssignmentError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                              "Replication factor must be larger than 0.")
    if len(sizes) > 1:
        raise AssignmentError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                              "All partitions should have the same number of replicas.")
    for partition, replicas in sorted(assignment.items()):
        if len(set(replicas)) != len(replicas):
            raise AssignmentError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                  f"Duplicate brokers not allowed in replica assignment: "
                                  f"{', '.join(map(str, replicas))} for partition id "
                                  f"{partition}.")
        unknown = sorted(set(replicas) - live)
        if unknown:
            raise AssignmentError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                  f"Unknown broker(s) in replica assignment: "
                                  f"{', '.join(map(str, unknown))}.")
