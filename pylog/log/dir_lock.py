"""The exclusive lock on a log dir (Kafka's ``FileLock`` on ``<dir>/.lock``).

Two processes writing one log dir append into the same segment files and lose
acknowledged records at the next start; the lock makes the second one refuse
to start instead.  ``flock`` locks belong to the open file description, so a
second lock in the same process (another thread, another LogManager) is
refused too, and the kernel drops the lock when the holder dies, ``kill -9``
included: no stale lock to clean up after a crash.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from pylog.log.errors import LogError

LOCK_FILE = ".lock"


class LogDirLockedError(LogError):
    """Another process (or another open in this one) holds the dir's lock."""


class LogDirLock:
    """Holds ``<dir>/.lock`` from :meth:`acquire` until :meth:`release`."""

    def __init__(self, directory: Path | str) -> None:
        self.dir = Path(directory)
        self.path = self.dir / LOCK_FILE
        self._fd = -1

    @property
    def held(self) -> bool:
        return self._fd >= 0

    def acquire(self) -> LogDirLock:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            # Kafka's words (LogManager.lockLogDirs), so operators find them.
            raise LogDirLockedError(
                f"Failed to acquire lock on file {LOCK_FILE} in {self.dir}. A Kafka instance "
                f"in another process or thread is using this directory.") from None
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)  # closing the description drops the flock
            self._fd = -1

    def __enter__(self) -> LogDirLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
