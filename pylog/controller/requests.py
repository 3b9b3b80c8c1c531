"""The bodies of the controller's requests (Kafka's ControllerBrokerRequestBatch).

LeaderAndIsr (to a partition's replicas: who leads at which epoch, the ISR),
UpdateMetadata (to every live broker: the live brokers' endpoints and racks,
each partition's state) and StopReplica (to the replicas of a partition that
is deleted or moved away), in the ZooKeeper-mode shapes Kafka 3.6's
controller sends (LeaderAndIsr v6, UpdateMetadata v7, StopReplica v3).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pylog.controller.context import LEADER_DURING_DELETE, ControllerContext, TopicPartition
from pylog.zk.znodes import BrokerInfo

# Kafka's SecurityProtocol ids.
SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}


def _by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for topic, p in sorted(set(partitions)):
        out.setdefault(topic, []).append(p)
    return out


def leader_and_isr(ctx: ControllerContext, controller_id: int, controller_epoch: int,
                   broker_id: int, partitions: Iterable[TopicPartition],
                   new: frozenset[TopicPartition] = frozenset(),
                   listener: str = "PLAINTEXT") -> dict[str, Any]:
    """LeaderAndIsr for ``broker_id`` about ``partitions`` (each with a state)."""
    topic_states = []
    leaders: set[int] = set()
    for topic, indexes in _by_topic(partitions).items():
        states = []
        for p in indexes:
            st = ctx.states[(topic, p)]
            leaders.add(st.leader)
            states.append({"partition_index": p, "controller_epoch": st.controller_epoch,
                           "leader": st.leader, "leader_epoch": st.leader_epoch,
                           "isr": list(st.isr), "partition_epoch": st.zk_version,
                           "replicas": ctx.replicas((topic, p)), "adding_replicas": [],
                           "removing_replicas": [], "is_new": (topic, p) in new,
                           "leader_recovery_state": st.leader_recovery_state})
        topic_states.append({"topic_name": topic, "topic_id": ctx.topic_id(topic),
                             "partition_states": states})
    live_leaders = []
    for leader in sorted(leaders):
        info = ctx.brokers.get(leader)
        if info is not None:
            ep = endpoint(info, listener)
            if ep is not None:
                live_leaders.append({"broker_id": leader, "host_name": ep[0], "port": ep[1]})
    return {"controller_id": controller_id, "controller_epoch": controller_epoch,
            "broker_epoch": _epoch(ctx, broker_id), "type": 0, "topic_states": topic_states,
            "live_leaders": live_leaders}


def update_metadata(ctx: ControllerContext, controller_id: int, controller_epoch: int,
                    broker_id: int, partitions: Iterable[TopicPartition],
                    deleting: Iterable[TopicPartition] = ()) -> dict[str, Any]:
    """UpdateMetadata for ``broker_id``: every live broker, and the states of
    ``partitions`` (those in ``deleting`` with leader -2, Kafka's
    LeaderDuringDelete, so brokers drop them)."""
    live = set(ctx.brokers)
    gone = set(deleting)
    topic_states = []
    for topic, indexes in _by_topic(list(partitions) + list(gone)).items():
        states = []
        for p in indexes:
            tp = (topic, p)
            st = ctx.states.get(tp)
            replicas = ctx.replicas(tp)
            if st is None and tp not in gone:
                continue  # not initialised yet (no replica was live)
            states.append({
                "partition_index": p,
                "controller_epoch": st.controller_epoch if st else controller_epoch,
                "leader": LEADER_DURING_DELETE if tp in gone else st.leader,
                "leader_epoch": st.leader_epoch if st else 0,
                "isr": list(st.isr) if st else [], "zk_version": st.zk_version if st else 0,
                "replicas": replicas, "offline_replicas": [r for r in replicas if r not in live]})
        if states:
            topic_states.append({"topic_name": topic, "topic_id": ctx.topic_id(topic),
                                 "partition_states": states})
    return {"controller_id": controller_id, "controller_epoch": controller_epoch,
            "broker_epoch": _epoch(ctx, broker_id), "topic_states": topic_states,
            "live_brokers": [_live_broker(b) for _, b in sorted(ctx.brokers.items())]}


def stop_replica(ctx: ControllerContext, controller_id: int, controller_epoch: int,
                 broker_id: int, partitions: Iterable[TopicPartition],
                 delete: bool) -> dict[str, Any]:
    topic_states = []
    for topic, indexes in _by_topic(partitions).items():
        topic_states.append({"topic_name": topic, "partition_states": [
            {"partition_index": p, "leader_epoch": _stop_epoch(ctx, (topic, p), delete),
             "delete_partition": delete} for p in indexes]})
    return {"controller_id": controller_id, "controller_epoch": controller_epoch,
            "broker_epoch": _epoch(ctx, broker_id), "topic_states": topic_states}


def _stop_epoch(ctx: ControllerContext, tp: TopicPartition, delete: bool) -> int:
    # Kafka: -2 (EpochDuringDelete) for a deletion, the current epoch else.
    if delete:
        return -2
    st = ctx.states.get(tp)
    return st.leader_epoch if st is not None else -1


def _epoch(ctx: ControllerContext, broker_id: int) -> int:
    info = ctx.brokers.get(broker_id)
    return info.epoch if info is not None else -1


def endpoint(info: BrokerInfo, listener: str) -> tuple[str, int] | None:
    """(host, port) of a broker's ``listener``, else of its first endpoint."""
    for ep in info.endpoints:
        if ep.listener_name == listener:
            return ep.host, ep.port
    return (info.endpoints[0].host, info.endpoints[0].port) if info.endpoints else None


def _live_broker(info: BrokerInfo) -> dict[str, Any]:
    return {"id": info.id, "rack": info.rack, "endpoints": [
        {"port": ep.port, "host": ep.host, "listener": ep.listener_name,
         "security_protocol": SECURITY_PROTOCOL_IDS.get(ep.security_protocol, 0)}
        for ep in info.endpoints]}
