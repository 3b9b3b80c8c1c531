"""Read segment files outside the broker, zero-copy, through a memory map.

Tools (``dump-log``, recovery checks, tests) map a ``.log`` file with
``pyarrow.memory_map`` and hand the mapped buffer straight to the native
record codec: the file is never copied into Python ``bytes``, and a 1 GiB
segment costs address space, not memory.

A log may end in a torn batch (a crash mid-append) or hold a corrupt one.
Readers here yield every good batch, then *report* the first bad one (as a
:class:`SegmentError`) instead of raising, so a tool still shows what is
readable and where the damage starts.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pyarrow as pa

from pylog.errors import CorruptBatchError
from pylog.records import read_batches

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SegmentError:
    """Where a segment stops being readable, and why."""

    path: str
    position: int        # byte position of the first bad batch in the file
    batch_index: int     # how many good batches precede it
    check: str           # the failed check ("truncated", "crc", "size", ...)
    message: str
    trailing_bytes: int  # bytes from ``position`` to the end of what was read

    def __str__(self) -> str:
        return (f"{self.path}: corrupt batch {self.batch_index} at position "
                f"{self.position} ({self.check}): {self.message}")


@dataclass
class SegmentScan:
    """Result of :func:`scan_segment`: the good batches and the first error."""

    batches: list = field(default_factory=list)
    valid_bytes: int = 0
    size: int = 0
    error: SegmentError | None = None


class MappedSegment:
    """A read-only memory map of one segment file.

    ``max_bytes`` limits the view to the file's first bytes (a cut batch at the
    limit is then not an error, as in Kafka's ``--max-bytes``).  Batches keep
    the map alive; ``close()`` only drops this object's reference.
    """

    def __init__(self, path: str | os.PathLike[str], max_bytes: int | None = None) -> None:
        self.path = os.fspath(path)
        self._map = pa.memory_map(self.path, "r")
        buf = self._map.read_buffer()  # zero-copy for a memory-mapped file
        self.file_size: int = buf.size
        if max_bytes is not None and max_bytes < buf.size:
            buf = buf.slice(0, max_bytes)
        self.buffer: pa.Buffer = buf
        self.size: int = buf.size
        self.limited = self.size < self.file_size
        self.error: SegmentError | None = None

    def batches(self, start: int = 0) -> Iterator[tuple[int, object]]:
        """Yield ``(position, batch)`` for each good batch from ``start`` on.

        ``position`` is the batch's byte position in the file.  At the first
        bad batch iteration stops and ``self.error`` says where and why.
        """
        self.error = None
        view = self.buffer if start == 0 else self.buffer.slice(start)
        index = 0
        pos = start
        try:
            for batch in read_batches(view):
                yield start + batch.position, batch
                pos = start + batch.position + batch.size
                index += 1
        except CorruptBatchError as exc:
            at = start + exc.position if exc.position >= 0 else pos
            if self.limited and exc.check == "truncated":
                return  # cut by max_bytes, not damaged
            self.error = SegmentError(self.path, at, index, exc.check, str(exc),
                                      self.size - at)

    def records(self) -> Iterator[object]:
        """Every record of every good batch, in file order."""
        for _, batch in self.batches():
            yield from batch.records()

    def close(self) -> None:
        self._map.close()

    def __enter__(self) -> MappedSegment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


OnError = Callable[[SegmentError], None]


def _report(error: SegmentError | None, on_error: OnError | None) -> None:
    if error is None:
        return
    if on_error is None:
        log.warning("%s", error)
    else:
        on_error(error)


def iter_segment_batches(path: str | os.PathLike[str],
                         on_error: OnError | None = None) -> Iterator[object]:
    """Yield each good batch (a BatchInfo with ``.records()``) of a ``.log`` file.

    A bad or torn batch ends the iteration; it is passed to ``on_error``
    (default: logged as a warning), never raised.
    """
    seg = MappedSegment(path)
    for _, batch in seg.batches():
        yield batch
    _report(seg.error, on_error)


def read_segment_records(path: str | os.PathLike[str],
                         on_error: OnError | None = None) -> Iterator[object]:
    """Yield every Record (offset, timestamp, key, value, headers) of a ``.log`` file."""
    for batch in iter_segment_batches(path, on_error):
        yield from batch.records()


def scan_segment(path: str | os.PathLike[str], max_bytes: int | None = None) -> SegmentScan:
    """All good batches of a segment, the bytes they cover, and the first error."""
    seg = MappedSegment(path, max_bytes)
    scan = SegmentScan(size=seg.size)
    for pos, batch in seg.batches():
        scan.batches.append(batch)
        scan.valid_bytes = pos + batch.size
    scan.error = seg.error
    return scan
