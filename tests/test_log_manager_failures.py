"""The log manager's periodic tasks and an I/O error: the dir goes offline, once.

Real files in tmp_path.  The failing file is a segment whose descriptor now
names a pipe (dup2), so the kernel itself refuses the fsync (EINVAL).
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from log_helpers import batch

from pylog.log import LogConfig, LogManager


def _manager(tmp_path: Path) -> tuple[LogManager, list[str]]:
    manager = LogManager(tmp_path / "logs", LogConfig(segment_bytes=1 << 20))
    offline: list[str] = []
    manager.failures.on_offline = offline.append
    return manager, offline


def test_io_error_in_a_flush_takes_the_dir_offline_once(tmp_path: Path) -> None:
    manager, offline = _manager(tmp_path)
    lg = manager.get_or_create_log("t", 0)
    lg.append(batch(1_700_000_000_000, 5000))
    segment = lg.segments[0]
    lg.roll()  # the rolled segment is what the next flush pass syncs
    saved = os.dup(segment.fd)
    read_end, write_end = os.pipe()
    os.dup2(read_end, segment.fd)
    try:
        assert manager.flush_rolled() == 0
        assert offline == [str(manager.dir)]
        assert manager.failures.offline
        manager.flush_rolled()  # the same failure again: reported once
        assert offline == [str(manager.dir)]
    finally:
        os.dup2(saved, segment.fd)  # the file again, for the close
        for fd in (saved, read_end, write_end):
            os.close(fd)
        manager.close()


def test_a_log_deleted_during_a_pass_is_not_a_dir_failure(tmp_path: Path) -> None:
    manager, offline = _manager(tmp_path)
    doomed = manager.get_or_create_log("gone", 0)
    kept = manager.get_or_create_log("kept", 0)
    seen = []

    def job(lg) -> int:
        seen.append(lg)
        if lg is doomed:  # its topic deleted under the pass: the files are gone
            lg.close_handlers()
            raise FileNotFoundError(errno.ENOENT, "deleted", str(lg.dir))
        return 1

    assert manager._each_log("flushing", job) == 1
    assert seen == [doomed, kept]  # the pass went on to the next log
    assert offline == [] and not manager.failures.offline
    manager.close()


def _open_fds() -> set[int]:
    """The descriptors open now (not the one listdir itself had open)."""
    def is_open(fd: int) -> bool:
        try:
            os.fstat(fd)
        except OSError:
            return False
        return True
    return {fd for fd in map(int, os.listdir("/proc/self/fd")) if is_open(fd)}


def test_a_log_the_process_has_no_descriptors_for_leaves_none_open_and_no_dir(
        tmp_path: Path) -> None:
    """EMFILE at each step of opening a new log in turn (the segment, each
    index, each index's mmap): the attempt leaves no descriptor open and no
    directory, and the same log opens once descriptors are free."""
    import resource

    manager, offline = _manager(tmp_path)
    manager.get_or_create_log("t", 0).close()  # imports and the manager's own files done
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    failures = 0
    try:
        for room in range(8):  # 5 descriptors a log: every step fails once
            before = _open_fds()
            # The lowest free number is handed out first, holes included:
            # the limit sits at the free number after ``room`` of them.
            free = [n for n in range(max(before) + room + 2) if n not in before]
            resource.setrlimit(resource.RLIMIT_NOFILE, (free[room], hard))
            try:
                lg = manager.get_or_create_log("t", 1 + room)
            except OSError as exc:
                assert exc.errno == errno.EMFILE
                failures += 1
                resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
                assert _open_fds() == before
                assert not (manager.dir / f"t-{1 + room}").exists()
                assert manager.get_log("t", 1 + room) is None
            else:
                resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
                lg.close()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert failures >= 5  # the log, two indexes, two mappings
    assert offline == []
    lg = manager.get_or_create_log("t", 1)
    lg.append(batch(1_700_000_000_000, records=10))
    assert lg.log_end_offset == 10
    manager.close()
