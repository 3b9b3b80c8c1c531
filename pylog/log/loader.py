"""Opening a partition directory and recovering it (Kafka's ``LogLoader``).

The steps, and why:

1. Finish a segment swap the log cleaner had committed (a ``<base>.log.swap``,
   see ``Log.replace_segments``): the segments it replaces (bases from its
   own up to its last offset) go, and the swap files take the segment
   names; its indexes are rebuilt.  Then remove leftovers of interrupted
   operations: ``*.deleted`` (retention or a swap had already dropped those
   segments), ``*.cleaned`` and other ``*.swap`` files (a cleaner pass that
   never committed; the originals are intact), and index files whose
   ``.log`` is gone.
2. Open every ``.log`` file as a segment.  A missing index, or one failing its
   sanity check, is rebuilt from the segment: indexes are derived data.
3. After an unclean stop (no ``.kafka_cleanshutdown`` marker), every segment
   from the one holding the recovery point onwards may hold data that never
   reached the disk in full: the kernel can persist a file's new size before
   its data, so the tail may be zeros or garbage.  Each such segment is
   rescanned batch by batch (size, magic, CRC32C, record count, offsets
   continuing) and cut at the first bad batch, and its indexes are rebuilt.
   Everything after a cut is deleted: later data cannot follow a hole.
   Batches before the cut keep their offsets, since offsets are in the bytes.
4. The last segment becomes the active one: its indexes are grown back to
   ``segment.index.bytes`` so appends can continue.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pylog.io.backend import IOBackend
from pylog.log.config import LogConfig
from pylog.log.index_file import CorruptIndexError
from pylog.log.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_END_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    file_name,
    swap_end_path,
)

log = logging.getLogger(__name__)


@dataclass
class LoadedLog:
    segments: list[LogSegment]
    next_offset: int
    recovery_point: int
    log_start_offset: int
    truncated_bytes: int = 0
    rebuilt_indexes: int = 0


class LogLoader:
    def __init__(self, directory: Path, config: LogConfig, backend: IOBackend,
                 time_ms: Callable[[], int], *, recovery_point: int = 0,
                 log_start_offset: int = 0, had_clean_shutdown: bool = False,
                 cleaned_to: int = 0) -> None:
        self.dir = directory
        self.config = config
        self.backend = backend
        self.time_ms = time_ms
        self.recovery_point = recovery_point
        self.log_start_offset = log_start_offset
        self.had_clean_shutdown = had_clean_shutdown
        # Segments below the cleaner's checkpoint may have offset gaps even if
        # the topic is no longer compacted: recovery must not cut them there.
        self.cleaned_to = cleaned_to
        self._opened: list[LogSegment] = []  # closed again if the load fails

    def load(self) -> LoadedLog:
        try:
            return self._load()
        except BaseException:
            # Out of descriptors at the tenth segment, say: the nine opened
            # would otherwise stay open, unreachable, after every attempt.
            for segment in self._opened:
                segment.close_handlers()
            raise

    def _load(self) -> LoadedLog:
        self.dir.mkdir(parents=True, exist_ok=True)
        self._complete_swaps()
        self._remove_temp_files()
        segments, rebuilt, cut = self._load_segments()
        truncated = 0
        if not segments:
            start = max(self.log_start_offset, 0)
            segments = [self._segment(start)]
        elif not self.had_clean_shutdown:
            truncated = self._recover(segments, cut)
        active = segments[-1]
        active.resize_indexes(self.config.segment_index_bytes)
        next_offset = active.next_offset
        if self.had_clean_shutdown and not rebuilt:
            recovery_point = next_offset  # a clean close flushed everything
        else:
            recovery_point = min(self.recovery_point, next_offset)
        log_start = min(max(self.log_start_offset, segments[0].base_offset), next_offset)
        return LoadedLog(segments, next_offset, recovery_point, log_start, truncated, rebuilt)

    def _segment(self, base_offset: int, config: LogConfig | None = None,
                 file_suffix: str = "") -> LogSegment:
        segment = LogSegment(self.dir, base_offset, config or self.config, self.backend,
                             self.time_ms, file_suffix=file_suffix)
        self._opened.append(segment)
        return segment

    def _complete_swaps(self) -> None:
        for path in sorted(self.dir.glob("*" + LOG_SUFFIX + SWAP_SUFFIX)):
            stem = path.name[:-len(LOG_SUFFIX + SWAP_SUFFIX)]
            if not (stem.isdigit() and len(stem) == 20):
                continue
            base = int(stem)
            for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):  # rebuilt below
                for left in (SWAP_SUFFIX, CLEANED_SUFFIX):
                    (self.dir / (file_name(base, suffix) + left)).unlink(missing_ok=True)
            # A cleaned segment may have gaps whatever the policy is now.
            config = dataclasses.replace(self.config, cleanup_policy=("compact",))
            swap = self._segment(base, config, SWAP_SUFFIX)
            swap.recover(gaps=True)
            try:  # where the replaced segments end (its own data may end sooner)
                end = int(swap_end_path(self.dir, base).read_text())
            except (OSError, ValueError):
                end = max(swap.next_offset, base + 1)
            for old in self.dir.glob("*" + LOG_SUFFIX):
                if old.stem.isdigit() and len(old.stem) == 20 and base <= int(old.stem) < end:
                    log.info("deleting %s, replaced by the cleaned %s", old, path)
                    for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                        (self.dir / file_name(int(old.stem), suffix)).unlink(missing_ok=True)
            swap.close()
            swap.rename_suffix("")
            swap_end_path(self.dir, base).unlink(missing_ok=True)
            log.info("completed the swap of cleaned segment %s", path)

    def _remove_temp_files(self) -> None:
        logs = {p.stem for p in self.dir.glob("*" + LOG_SUFFIX)}
        for path in self.dir.iterdir():
            name = path.name
            if not path.is_file():
                continue
            if name.endswith((DELETED_SUFFIX, CLEANED_SUFFIX, SWAP_SUFFIX, SWAP_END_SUFFIX,
                              ".tmp")):
                log.info("deleting stray file %s", path)
                path.unlink(missing_ok=True)
            elif name.endswith((INDEX_SUFFIX, TIME_INDEX_SUFFIX)) and path.stem not in logs:
                log.info("deleting index %s whose segment is gone", path)
                path.unlink(missing_ok=True)

    def _load_segments(self) -> tuple[list[LogSegment], int, int | None]:
        bases = []
        for path in self.dir.glob("*" + LOG_SUFFIX):
            if path.stem.isdigit() and len(path.stem) == 20:
                bases.append(int(path.stem))
        segments = []
        rebuilt = 0
        cut: int | None = None  # index of the first segment cut while rebuilding its index
        bases.sort()
        # After a crash, _recover rescans the segment holding the recovery point
        # and every later one, rebuilding their indexes: checking those here
        # would only report their preallocated, zero-filled tails as corrupt
        # (an index is trimmed to its entries on a clean close) and scan them twice.
        rescanned = None if self.had_clean_shutdown or not bases else max(
            [b for b in bases if b <= self.recovery_point] or bases[:1])
        for base in bases:
            missing = not (self.dir / file_name(base, INDEX_SUFFIX)).exists() or not (
                self.dir / file_name(base, TIME_INDEX_SUFFIX)).exists()
            segment = self._segment(base)
            if rescanned is not None and base >= rescanned:
                segments.append(segment)
                continue
            if missing:
                log.warning("rebuilding missing index of %s", segment.log_path)
            else:
                try:
                    segment.offset_index.sanity_check(segment.size)
                    segment.time_index.sanity_check()
                    continue_ok = True
                except CorruptIndexError as exc:
                    log.warning("rebuilding corrupt index of %s: %s", segment.log_path, exc)
                    continue_ok = False
                if continue_ok:
                    segments.append(segment)
                    continue
            truncated = segment.recover(gaps=base < self.cleaned_to)
            if truncated:
                log.warning("truncated %d invalid bytes of %s", truncated, segment.log_path)
                if cut is None:
                    cut = len(segments)
            segment.on_become_inactive()
            rebuilt += 1
            segments.append(segment)
        return segments, rebuilt, cut

    def _recover(self, segments: list[LogSegment], cut: int | None = None) -> int:
        """Rescan the segments from the one holding the recovery point.

        ``cut``: a segment already cut while its index was rebuilt on load;
        when it lies at or after the recovery point, it is a cut too."""
        first = 0
        for i, segment in enumerate(segments):
            if segment.base_offset <= self.recovery_point:
                first = i
        truncated_total = 0
        for i in range(first, len(segments)):
            segment = segments[i]
            truncated = segment.recover(gaps=segment.base_offset < self.cleaned_to)
            if i + 1 < len(segments):
                segment.on_become_inactive()
            if truncated or i == cut:
                truncated_total += truncated
                log.warning("recovery truncated %d bytes of %s at offset %d", truncated,
                            segment.log_path, segment.next_offset)
                # Nothing after a cut can be kept: offsets must stay contiguous.
                for later in segments[i + 1:]:
                    log.warning("deleting %s after the truncation point", later.log_path)
                    later.delete()
                del segments[i + 1:]
                break
        return truncated_total
