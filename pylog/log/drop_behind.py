"""Drop-behind: a log keeps only its newest bytes in the page cache.

Kafka leaves written data in the page cache until the kernel needs the
memory.  While the cache still grows, every append lands on a page the
kernel must find, and on a virtual machine whose memory the host backs on
first touch, on a page the host must back too.  Appending 1 GB through a
log took 3.46 CPU-s that way here, and 0.86 CPU-s with the pages of data
written earlier evicted and reused (``python
benchmarks/bench_drop_behind.py``).  On a host whose memory is already full
of cache the kernel's reclaim recycles pages anyway; there drop-behind costs
a little (0.83 against 0.72 CPU-s per GB in this process: it starts the
write-back the kernel's flusher threads would do later).

So, once a partition has more than ``log.cache.drop.behind.bytes`` of data
behind its end (a pylog setting, not Kafka's), what lies further back is
written back and evicted (``sync_file_range`` then ``POSIX_FADV_DONTNEED``,
on a worker thread, since the first waits for the disk), a few MiB at a time.
The next appends then reuse those pages.  A consumer within the window reads
from memory, as from Kafka; one further behind reads from disk, and the fetch
path already sends such reads off the event loop.  Nothing about durability
changes: the write-back is not a flush, and the recovery point does not move.

Off by default (-1), as Kafka: a consumer more than the window behind would
read from disk, and the write-back moves into the broker's own CPU account
and time (produce p99 at 50,000 records/s, medians of 3 runs: 9.5 ms with an
8 MiB window against 7.7 ms without, within this VM's run-to-run noise but
not better).  It pays where memory is plentiful and freshly backed, as on
this VM.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future

from pylog.io import pagecache
from pylog.log.segment import LogSegment

_log = logging.getLogger(__name__)

#: The most bytes one write-back-and-drop round takes; also how far past the
#: window a log runs before the next round (one round per few MiB appended).
CHUNK = 4 << 20


class DropBehind:
    """One log's drop-behind bookkeeping (:attr:`Log.drop_behind`).

    ``appended`` runs under the log's lock after every append; it costs an
    addition and a comparison until ``CHUNK`` bytes are due.  The extents are
    the segment ranges appended since tracking began and not yet dropped,
    oldest first; at most one round per log is in flight.
    """

    __slots__ = ("window", "_extents", "_active", "_pending", "_trigger", "_round",
                 "dropped")

    def __init__(self, window: int, active: LogSegment) -> None:
        if window < 0:
            raise ValueError("drop-behind window must be >= 0")
        self.window = window
        # [segment, position from which its bytes are still cached]; the data
        # there when tracking begins (a restart) is left to the kernel.
        self._extents: list[list] = [[active, active.size]]
        self._active = active
        self._pending = 0  # bytes in the extents (corrected at each round)
        self._trigger = window + CHUNK
        self._round: Future | None = None
        self.dropped = 0  # bytes handed to rounds so far

    def appended(self, active: LogSegment, size: int) -> None:
        """``size`` bytes were appended; ``active`` is the log's active segment."""
        if active is not self._active:  # rolled (or truncated to a new segment)
            self._extents.append([active, 0])
            self._active = active
        self._pending += size
        if self._pending >= self._trigger:
            try:
                self._start_round()
            except Exception as exc:  # the records are written: never fail their append
                self._trigger = self._pending + CHUNK
                _log.warning("drop-behind round not started: %s", exc)

    def wait(self, timeout: float | None = None) -> None:
        """Until the rounds started so far have ended (one worker thread runs
        them in order, so the last one's end is everyone's)."""
        if self._round is not None:
            self._round.result(timeout)

    def _start_round(self) -> None:
        busy = self._round is not None and not self._round.done()
        # Recount what is cached behind: segments deleted or truncated since
        # took their bytes with them.
        extents = [e for e in self._extents if e[0].fd >= 0]
        for e in extents:
            e[1] = min(e[1], e[0].size)
        self._extents = extents or [[self._active, self._active.size]]
        pending = sum(seg.size - pos for seg, pos in self._extents)
        self._pending = pending
        excess = pending - self.window
        if busy or excess < CHUNK:
            self._trigger = max(pending, self.window) + CHUNK
            return
        saved = [list(e) for e in self._extents]  # restored if no round can start
        take = excess
        work: list[tuple[LogSegment, int, int, int]] = []  # segment, pos, length, bytes
        while take > 0 and self._extents:
            extent = self._extents[0]
            segment, pos = extent
            avail = segment.size - pos
            if segment is not self._active and avail <= take:
                if avail > 0:
                    work.append((segment, pos, 0, avail))  # to its end, last partial page too
                take -= avail
                self._extents.pop(0)
                continue
            # Page-aligned end: the kernel keeps a partly covered last page.
            end = (pos + min(avail, take)) & ~(pagecache.PAGE_SIZE - 1)
            if end > pos:
                work.append((segment, pos, end - pos, end - pos))
                take -= end - pos
                extent[1] = end
            break
        self._pending = pending - (excess - take)
        self._trigger = self.window + CHUNK
        for segment, pos, length, nbytes in work:
            try:
                # One worker thread: the last round submitted ends after the others.
                self._round = pagecache.drop_behind_in_background(segment.fd, pos, length)
            except OSError:
                # Out of descriptors (the dup): appended() gives up the round, and
                # a later one takes it all again (evicting twice what went
                # already costs nothing).
                self._extents, self._pending = saved, pending
                raise
            self._round.add_done_callback(_report)
            self.dropped += nbytes


def _report(future: Future) -> None:
    """A failed round only leaves pages cached; the flush that needs them to
    reach the disk reports I/O errors itself."""
    exc = future.exception()
    if exc is not None:
        _log.debug("drop-behind round failed: %s", exc)
