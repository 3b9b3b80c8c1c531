"""A memory-mapped index file (Kafka's ``AbstractIndex``).

The file is created at its maximum size (``segment.index.bytes`` rounded down
to whole entries) so appends never grow it, and it is mapped once.  As in
Kafka the file is sparse; unlike Kafka, the blocks the next entries go to are
allocated for real (``posix_fallocate``) before anything is stored there:
appends store entries through the mapping, and a store into a hole the
filesystem cannot fill (a full disk, a full tmpfs) is a SIGBUS that kills the
process with no log line.  Allocated ahead (:meth:`IndexFile.reserve`, from
64 KiB, doubling), a full disk is an ENOSPC from that system call, which
takes the documented path (KAFKA_STORAGE_ERROR, the dir offline), while an
index holds disk in proportion to its entries: a broker's thousands of idle
partitions do not hold 20 MB each.
The
number of valid entries lives in memory: after a clean close the file is
trimmed to exactly its entries, so on open "entries = file length / entry
size"; after a crash the tail may hold zeros, which is why the loader rebuilds
the indexes of every segment after the recovery point and sanity-checks the
others.
"""

from __future__ import annotations

import errno
import mmap
import os
from pathlib import Path

_MADV_RANDOM: int | None = getattr(mmap, "MADV_RANDOM", None)
# The first allocation of an index's blocks; each later one doubles them.
RESERVE_MIN = 64 * 1024


class CorruptIndexError(Exception):
    """An index file that fails its sanity check; the loader rebuilds it."""


class IndexFile:
    entry_size = 8

    def __init__(self, path: Path, base_offset: int, max_index_size: int,
                 writable: bool = True) -> None:
        self.path = Path(path)
        self.base_offset = base_offset
        self.writable = writable
        newly_created = not self.path.exists()
        self._fd = os.open(self.path, (os.O_RDWR | os.O_CREAT) if writable else os.O_RDONLY,
                           0o644)
        self._mm: mmap.mmap | None = None
        # Bytes from the start known to have blocks (see reserve), and as
        # whole entries (what the segment's append path compares).
        self._allocated = 0
        self.room = 0
        try:
            if newly_created and writable:
                os.ftruncate(self._fd, self._round(max_index_size))
            self._length = os.fstat(self._fd).st_size
            self._map()  # mmap takes a descriptor of its own: EMFILE here too
        except BaseException:
            os.close(self._fd)
            self._fd = -1
            raise
        # A fresh file has no entries; an existing one was trimmed to its entries.
        self.entries = 0 if newly_created else self._length // self.entry_size

    # -- mapping -----------------------------------------------------------

    def _round(self, size: int) -> int:
        return size - size % self.entry_size

    def _map(self) -> None:
        self._mm = None
        if self._length > 0:
            access = mmap.ACCESS_WRITE if self.writable else mmap.ACCESS_READ
            self._mm = mmap.mmap(self._fd, self._length, access=access)
            if _MADV_RANDOM is not None:
                # No fault-around readahead: lookups are binary searches and
                # appends touch each page once.  Without it the first entry
                # written to a fresh (sparse) index faults in and zero-fills
                # a readahead window of megabytes: a ~5 ms stall on the
                # first append to every new segment.
                self._mm.madvise(_MADV_RANDOM)

    @property
    def buffer(self) -> mmap.mmap | bytes:
        """The mapped bytes (for the native search); ``b""`` when the file is empty."""
        return self._mm if self._mm is not None else b""

    @property
    def max_entries(self) -> int:
        return self._length // self.entry_size

    @property
    def size_in_bytes(self) -> int:
        return self.entries * self.entry_size

    def reserve(self, entries: int) -> None:
        """Blocks for the first ``entries`` entries (at most the file), before
        they are stored; ENOSPC raises.  Cheap when they already are."""
        need = min(entries * self.entry_size, self._length)
        if need <= self._allocated:
            return
        end = min(self._length, max(need, 2 * self._allocated, RESERVE_MIN))
        _allocate(self._fd, self._allocated, end - self._allocated)
        self._allocated = end
        self.room = end // self.entry_size

    def is_full(self) -> bool:
        return self.entries >= self.max_entries

    def resize(self, new_size: int) -> None:
        """Grow (to append again after a reopen) or shrink (trim) the file."""
        new_length = self._round(new_size)
        if new_length == self._length:
            return
        if self._mm is not None:
            self._mm.close()
            self._mm = None
        os.ftruncate(self._fd, new_length)  # (sparse when it grows: see reserve)
        self._length = new_length
        self._allocated = min(self._allocated, new_length)
        self.room = self._allocated // self.entry_size
        self.entries = min(self.entries, self.max_entries)
        self._map()

    def trim_to_valid_size(self) -> None:
        self.resize(self.entries * self.entry_size)

    def reset(self, max_index_size: int) -> None:
        """Drop every entry (recovery rebuilds them) and make room for a full index."""
        self.entries = 0
        self.resize(0)
        self.resize(max_index_size)

    def set_entries(self, n: int) -> None:
        """Adopt entries written in place by the native indexer."""
        if not 0 <= n <= self.max_entries:
            raise ValueError(f"{n} entries do not fit {self.path.name}")
        self.entries = n

    # -- life cycle --------------------------------------------------------

    def flush(self) -> None:
        if self._mm is not None and self.writable:
            self._mm.flush()

    def close(self) -> None:
        """Trim to the valid entries (so the next open counts them) and close."""
        if self._fd < 0:
            return
        if self.writable:
            self.trim_to_valid_size()
        if self._mm is not None:
            self._mm.close()
            self._mm = None
        os.close(self._fd)
        self._fd = -1

    def close_handler(self) -> None:
        """Close without trimming (the file is about to be deleted)."""
        if self._fd < 0:
            return
        if self._mm is not None:
            self._mm.close()
            self._mm = None
        os.close(self._fd)
        self._fd = -1

    def delete(self) -> None:
        self.close_handler()
        self.path.unlink(missing_ok=True)

    def rename(self, new_path: Path) -> None:
        if self.path.exists():
            os.replace(self.path, new_path)
        self.path = Path(new_path)


def _allocate(fd: int, offset: int, length: int) -> None:
    """Allocate the blocks of ``length`` bytes at ``offset``, inside the file
    (see the module's docstring).  ENOSPC (and EDQUOT) raise.  A filesystem
    that cannot allocate ahead (EOPNOTSUPP, EINVAL) is left as it is: there
    is nothing better to do on it."""
    try:
        os.posix_fallocate(fd, offset, length)
    except OSError as exc:
        if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
            raise
