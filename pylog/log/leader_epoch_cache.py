"""Which leader epoch wrote which offsets (Kafka's LeaderEpochFileCache, KIP-101).

Each entry is (epoch, start offset): the first offset written under that
leader epoch.  A leader adds one when it starts appending under a new
epoch; a follower adds one for each batch whose partitionLeaderEpoch is new.
From it, a leader answers where a follower's last epoch ends
(OffsetForLeaderEpoch, and Fetch's diverging epoch), so a returning replica
truncates what the leader never had instead of keeping a divergent tail.

Kept in ``<partition dir>/leader-epoch-checkpoint`` in Kafka's format (a
version line ``0``, a count, then ``epoch startOffset`` lines), written
atomically on every change.
"""

from __future__ import annotations

import bisect
import logging
import threading
from pathlib import Path

from pylog.log.durable import write_atomically

log = logging.getLogger(__name__)

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


class LeaderEpochCache:
    def __init__(self, partition_dir: Path) -> None:
        self.path = Path(partition_dir) / LEADER_EPOCH_CHECKPOINT
        self._lock = threading.Lock()
        self._epochs: list[int] = []
        self._starts: list[int] = []
        try:
            self._read()
        except (OSError, ValueError) as exc:
            # As Kafka: an unreadable checkpoint is rebuilt from what follows.
            log.warning("ignoring %s: %s", self.path, exc)
            self._epochs, self._starts = [], []

    def _read(self) -> None:
        if not self.path.exists():
            return
        lines = self.path.read_text().split("\n")
        if lines[0].strip() != "0":
            raise ValueError(f"unknown version {lines[0]!r}")
        count = int(lines[1])
        for line in lines[2:2 + count]:
            epoch, start = line.split()
            self._epochs.append(int(epoch))
            self._starts.append(int(start))
        if len(self._epochs) != count:
            raise ValueError(f"{count} entries announced, {len(self._epochs)} found")

    def _write(self) -> None:
        body = "".join(f"{e} {s}\n" for e, s in zip(self._epochs, self._starts, strict=True))
        write_atomically(self.path, f"0\n{len(self._epochs)}\n{body}".encode())

    @property
    def entries(self) -> list[tuple[int, int]]:
        with self._lock:
            return list(zip(self._epochs, self._starts, strict=True))

    @property
    def latest_epoch(self) -> int:
        return self._epochs[-1] if self._epochs else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> bool:
        """``epoch`` starts at ``start_offset`` (no-op unless it is newer than
        the latest); entries that would start at or after it are dropped
        first, as Kafka's assign keeps the cache monotonic.  True if changed."""
        if epoch < 0:
            return False
        with self._lock:
            if self._epochs and epoch <= self._epochs[-1]:
                return False
            while self._starts and self._starts[-1] >= start_offset:
                self._epochs.pop()
                self._starts.pop()
            self._epochs.append(epoch)
            self._starts.append(start_offset)
            self._write()
            return True

    def end_offset_for(self, requested: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) of ``requested``: Kafka's endOffsetFor.  The
        latest epoch ends at the log end; an older one where the next newer
        starts (its own epoch the largest known at or below it); one newer
        than all, or undefined: (-1, -1)."""
        with self._lock:
            if requested == UNDEFINED_EPOCH or not self._epochs:
                return UNDEFINED_EPOCH, UNDEFINED_OFFSET
            if requested == self._epochs[-1]:
                return requested, log_end_offset
            higher = bisect.bisect_right(self._epochs, requested)
            if higher == len(self._epochs):
                return UNDEFINED_EPOCH, UNDEFINED_OFFSET
            if higher == 0:
                return requested, self._starts[0]
            return self._epochs[higher - 1], self._starts[higher]

    def truncate_from_end(self, end_offset: int) -> None:
        """The log was cut at ``end_offset``: epochs starting there or later go."""
        with self._lock:
            changed = False
            while self._starts and self._starts[-1] >= end_offset:
                self._epochs.pop()
                self._starts.pop()
                changed = True
            if changed:
                self._write()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset``: the epoch holding it starts
        there, older ones go."""
        with self._lock:
            i = bisect.bisect_right(self._starts, start_offset) - 1
            if i < 0 or (i == 0 and self._starts[0] == start_offset):
                return
            self._epochs = self._epochs[i:]
            self._starts = [start_offset] + self._starts[i + 1:]
            self._write()

    def clear(self) -> None:
        with self._lock:
            self._epochs, self._starts = [], []
            self._write()
