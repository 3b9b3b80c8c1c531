"""A crash at each step of the cleaner's segment swap (``Log.replace_segments``).

The on-disk states the swap passes through are made by hand, renaming files
as ``replace_segments`` does (``LogSegment.rename_suffix`` renames the
``.log``, then the ``.index``, then the ``.timeindex``), on a copy of a log
dir; the cleaned segment comes from the real cleaner run on another copy.
The log is then opened as after a crash.  Before the commit point (the
cleaned ``.log`` named ``.swap``) the original segments must come back;
from it on, the cleaned one; either way every record once, the same offsets
and next offset, and appends go on.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from log_helpers import read_log

from pylog.log import Log
from pylog.log.cleaner import LogCleaner
from pylog.log.config import CleanerConfig, LogConfig
from pylog.log.segment import swap_end_path
from pylog.records import build_batch, read_batches

CONFIG = LogConfig(segment_bytes=4096, cleanup_policy=("compact",),
                   min_cleanable_dirty_ratio=0.01, file_delete_delay_ms=0)
SUFFIXES = (".log", ".index", ".timeindex")


_read = read_log


def _name(base: int, suffix: str) -> str:
    return f"{base:020d}{suffix}"


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """An original log of small segments and a cleaned copy of it."""
    root = tmp_path_factory.mktemp("swap")
    lg = Log.open(root / "orig" / "t-0", CONFIG)
    produced = []
    for i in range(120):  # ~4 batches a segment: groups of several segments
        records = [(b"key-%d" % ((i * 7 + k) % 25), b"value-%d-%d" % (i, k)) for k in range(4)]
        lg.append(bytearray(build_batch([(1_000 + i, k, v) for k, v in records],
                                        compression=i % 3)))
        produced.extend(records)
        if i % 4 == 3:
            lg.roll()
    lg.flush()
    original = _read(lg)
    lg.close()
    shutil.copytree(root / "orig" / "t-0", root / "cleaned" / "t-0")
    cl = Log.open(root / "cleaned" / "t-0", CONFIG, had_clean_shutdown=True)
    holder = {("t", 0): cl}
    stats = LogCleaner(root / "cleaned", lambda: holder, CleanerConfig(threads=0)).clean(cl)
    assert stats is not None and len(stats.swapped) > 1
    cleaned = _read(cl)
    bases = [s.base_offset for s in cl.segments]
    cl.close()
    old_bases = sorted(int(p.name[:20]) for p in (root / "orig" / "t-0").glob("*.log"))
    group_end = bases[1]  # the first cleaned segment replaced [0, group_end)
    replaced = [b for b in old_bases if b < group_end]
    assert len(replaced) > 1, "the first group should merge several segments"
    return dict(root=root, produced=produced, original=original, cleaned=cleaned,
                replaced=replaced, group_end=group_end)


def _crash_dir(logs: dict, name: str) -> Path:
    d = logs["root"] / name / "t-0"
    shutil.copytree(logs["root"] / "orig" / "t-0", d)
    # The cleaned segment of the first group, as the cleaner wrote it.
    for suffix in SUFFIXES:
        shutil.copy(logs["root"] / "cleaned" / "t-0" / _name(0, suffix),
                    d / (_name(0, suffix) + ".cleaned"))
    # replace_segments' first step: where the replaced run ends.
    swap_end_path(d, 0).write_text(f"{logs['group_end']}\n")
    return d


def _rename(d: Path, base: int, suffix: str, frm: str, to: str) -> None:
    os.replace(d / (_name(base, suffix) + frm), d / (_name(base, suffix) + to))


def _rename_all(d: Path, base: int, frm: str, to: str, upto: int = 3) -> None:
    for suffix in SUFFIXES[:upto]:
        _rename(d, base, suffix, frm, to)


# Each state: (name, committed, steps to make it from "all .cleaned written").
def _state_cleaned_only(d, replaced):
    pass


def _state_log_swap_indexes_cleaned(d, replaced):
    _rename_all(d, 0, ".cleaned", ".swap", upto=1)


def _state_swap(d, replaced):
    _rename_all(d, 0, ".cleaned", ".swap")


def _state_some_deleted(d, replaced):
    _rename_all(d, 0, ".cleaned", ".swap")
    _rename_all(d, replaced[0], "", ".deleted")
    _rename_all(d, replaced[1], "", ".deleted", upto=1)  # its indexes not yet


def _state_all_deleted(d, replaced):
    _rename_all(d, 0, ".cleaned", ".swap")
    for base in replaced:
        _rename_all(d, base, "", ".deleted")


def _state_log_final_indexes_swap(d, replaced):
    _state_all_deleted(d, replaced)
    _rename(d, 0, ".log", ".swap", "")


def _state_done(d, replaced):
    _state_all_deleted(d, replaced)
    _rename_all(d, 0, ".swap", "")


STATES = [
    (_state_cleaned_only, False),
    (_state_log_swap_indexes_cleaned, True),
    (_state_swap, True),
    (_state_some_deleted, True),
    (_state_all_deleted, True),
    (_state_log_final_indexes_swap, True),
    (_state_done, True),
]


@pytest.mark.parametrize("make, committed", STATES, ids=[f.__name__[7:] for f, _ in STATES])
def test_crash_during_swap(logs: dict, make, committed: bool) -> None:
    d = _crash_dir(logs, make.__name__)
    make(d, logs["replaced"])
    lg = Log.open(d, CONFIG, had_clean_shutdown=False)
    try:
        leftovers = [p.name for p in d.iterdir()
                     if p.name.endswith((".swap", ".cleaned", ".deleted", ".swap-end"))]
        assert not leftovers
        end = logs["group_end"]
        if committed:
            expected = ([r for r in logs["cleaned"] if r[0] < end]
                        + [r for r in logs["original"] if r[0] >= end])
        else:
            expected = logs["original"]
        got = _read(lg)
        assert got == expected
        offsets = [o for o, _, _ in got]
        assert len(offsets) == len(set(offsets))
        produced = logs["produced"]
        assert all(produced[o] == (k, v) for o, k, v in got)
        assert lg.log_end_offset == len(produced)
        assert lg.log_start_offset == 0
        assert sorted(s.base_offset for s in lg.segments) == [s.base_offset for s in lg.segments]
        # Reads from any offset of the swapped part find the next record kept
        # (the indexes are right).
        for o in range(0, end + 2):
            chunk = lg.read(o, 100)
            first = next(r.offset for b in read_batches(os.pread(chunk.fd, chunk.length,
                                                                 chunk.position))
                         for r in b.records() if r.offset >= o)
            assert first == next(x for x in offsets if x >= o), o
        # Appends go on at the same next offset.
        result = lg.append(bytearray(build_batch([(9_999, b"key-1", b"after")])))
        assert result.base_offset == len(produced)
        assert _read(lg)[-1] == (len(produced), b"key-1", b"after")
    finally:
        lg.close()
    # And a clean reopen reads the same.
    lg = Log.open(d, CONFIG, had_clean_shutdown=True)
    try:
        assert _read(lg) == expected + [(len(logs["produced"]), b"key-1", b"after")]
    finally:
        lg.close()
