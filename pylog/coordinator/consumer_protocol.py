"""Read the embedded consumer protocol (protocol type ``consumer``).

The coordinator never interprets assignor data to choose anything; it only
reads the topics of a subscription (OffsetDelete refuses partitions of topics a
live group subscribes to, as Kafka does) and tools read assignments to show
which member owns which partition.  Layouts: Kafka's
ConsumerProtocolSubscription / ConsumerProtocolAssignment (v0-v3), of which
every version starts with the fields read here.
"""

from __future__ import annotations

import struct

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def _string(data: bytes, pos: int) -> tuple[str, int]:
    n, = _I16.unpack_from(data, pos)
    pos += 2
    return data[pos:pos + max(n, 0)].decode("utf-8"), pos + max(n, 0)


def subscription_topics(metadata: bytes) -> set[str] | None:
    """Topics of a ConsumerProtocolSubscription; None when it does not parse (then
    nothing may be concluded from it: no offset is treated as unsubscribed)."""
    try:
        pos = 2  # version
        count, = _I32.unpack_from(metadata, pos)
        pos += 4
        topics = set()
        for _ in range(count):
            topic, pos = _string(metadata, pos)
            topics.add(topic)
        return topics
    except (struct.error, UnicodeDecodeError):
        return None


def assignment_partitions(assignment: bytes) -> list[tuple[str, int]]:
    """(topic, partition) pairs of a ConsumerProtocolAssignment; [] when it does not parse."""
    out: list[tuple[str, int]] = []
    try:
        if len(assignment) < 6:
            return out
        pos = 2
        count, = _I32.unpack_from(assignment, pos)
        pos += 4
        for _ in range(count):
            topic, pos = _string(assignment, pos)
            n, = _I32.unpack_from(assignment, pos)
            pos += 4
            for _ in range(n):
                p, = _I32.unpack_from(assignment, pos)
                pos += 4
                out.append((topic, p))
    except (struct.error, UnicodeDecodeError):
        return []
    return out
