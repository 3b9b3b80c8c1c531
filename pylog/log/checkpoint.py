"""Kafka's offset checkpoint files (``recovery-point-offset-checkpoint``,
``log-start-offset-checkpoint``, ``replication-offset-checkpoint``).

Text format: a version line ``0``, a count line, then one
``<topic> <partition> <offset>`` line per partition.  Written atomically: a
temporary file is written and fsynced, renamed over the old one, and the
directory is fsynced so the rename itself survives a crash.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

VERSION = 0
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
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
        data = ("\n".join(lines) + "\n").encode()
        tmp = self.path.with_name(self.path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        dfd = os.open(self.path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)

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
