"""Helpers shared by the Spark harness tests."""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def java_available() -> bool:
    home = os.environ.get("JAVA_HOME")
    return bool(home and (Path(home) / "bin" / "java").is_file()) or bool(shutil.which("java"))


def topic_record_count(bootstrap: str, topic: str) -> int:
    """Records in ``topic``: high minus low watermark (ListOffsets) summed over partitions."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "count", "log_level": 3})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        total = 0
        for p in partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            total += high - low
        return total
    finally:
        consumer.close()
