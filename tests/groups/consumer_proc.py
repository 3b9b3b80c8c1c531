"""A confluent-kafka group consumer as a process of its own (tests kill it with
SIGKILL).  ``python consumer_proc.py BOOTSTRAP GROUP TOPIC [k=v ...]``; prints one
JSON line per event: {"assigned": [partitions]} after each rebalance, {"record":
[partition, offset, value]} per record (committed synchronously before the next)."""

from __future__ import annotations

import json
import sys

from confluent_kafka import Consumer


def main() -> None:
    bootstrap, group, topic, *extra = sys.argv[1:]
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 300, "enable.auto.commit": False,
            "auto.offset.reset": "earliest"}
    conf.update(kv.split("=", 1) for kv in extra)
    consumer = Consumer(conf)

    def emit(**event: object) -> None:
        print(json.dumps(event), flush=True)

    def assigned(c: Consumer, parts: list) -> None:
        emit(assigned=sorted(p.partition for p in parts))

    consumer.subscribe([topic], on_assign=assigned,
                       on_revoke=lambda c, parts: emit(revoked=sorted(p.partition
                                                                      for p in parts)))
    while True:
        msg = consumer.poll(0.2)
        if msg is None or msg.error():
            continue
        emit(record=[msg.partition(), msg.offset(), msg.value().decode()])
        consumer.commit(msg, asynchronous=False)


if __name__ == "__main__":
    main()
