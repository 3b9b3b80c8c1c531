"""File I/O for the log: pwritev/fdatasync/sendfile, page cache, io_uring.

- :mod:`pylog.io.backend`: the :class:`~pylog.io.backend.IOBackend` interface
  and :func:`~pylog.io.backend.get_backend` (``"posix"``, the default, or
  ``"io_uring"``, which falls back to posix where it cannot work).
- :mod:`pylog.io.posix`, :mod:`pylog.io.uring`: the two implementations.
- :mod:`pylog.io.pagecache`: write-back, cache dropping and residency checks.
"""
