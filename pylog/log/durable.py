"""Small files written so that a crash leaves either the old one or the new
one, whole: the topic registry, producer snapshots and id blocks, dynamic
broker configs, offset checkpoints.

Write to ``<name>.tmp``, fsync it, rename it over the file, then fsync the
directory: without that last step the rename itself may not survive a power
cut, and an answered change (a created topic, a handed-out id block) would
be lost.
"""

from __future__ import annotations

import os
from pathlib import Path


def fsync_dir(path: Path) -> None:
    """fsync a directory: a rename or create in it is on disk once this returns."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` (tmp, fsync, rename, fsync the directory)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)
