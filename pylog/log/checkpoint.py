"""Kafka's offset checkpoint files (``recovery-point-offset-checkpoint``,
``log-start-offset-checkpoint``, ``replication-offset-checkpoint``).

Text format: a version line ``0``, a count line, then one
``<topic> <partition> <offset>`` line per partition.  Written atomically: a
temporary file is written and fsynced, renamed over the old one, and the
directory is fsynced so the rename itself survives a crash.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pylog.log.durable import write_atomically

VERSION = 0
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
# Each partition's high watermark (Kafka's replication-offset-checkpoint): a
# replica that restarts does not expose more than was committed before.
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"

TopicPartition = tuple[str, int]


class CorruptCheckpointError(ValueError):
    pass


class OffsetCheckpointFile:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def write(self, offsets: Mapping[TopicPartition, int]) -> None:
        lines = [str(VERSION), str(len(offsets))]
        lines += [f"{topic} {partition} {offset}"
                  for (topic, partition), offset in sorted(offsets.items())]
        write_atomically(self.path, ("\n".join(lines) + "\n").encode())

    def read(self) -> dict[TopicPartition, int]:
        """The offsets; an empty dict when the file does not exist."""
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return {}
        lines = text.splitlines()
        try:
            if int(lines[0]) != VERSION:
                raise CorruptCheckpointError(f"{self.path}: unknown version {lines[0]!r}")
            count = int(lines[1])
            out: dict[TopicPartition, int] = {}
            for line in lines[2:2 + count]:
                topic, partition, offset = line.split()
                out[(topic, int(partition))] = int(offset)
        except (IndexError, ValueError) as exc:
            if isinstance(exc, CorruptCheckpointError):
                raise
            raise CorruptCheckpointError(f"malformed checkpoint file {self.path}: {exc}") from None
        if len(out) != count:
            raise CorruptCheckpointError(f"{self.path}: expected {count} entries, "
                                         f"found {len(out)}")
        return out
