"""The storage engine's file I/O interface and the choice of implementation.

Two implementations share one small surface: ``posix`` (plain syscalls through
``os``) and ``io_uring`` (through pyuring).  The log core only ever talks to an
:class:`IOBackend`, so the choice is one config value.  Asking for io_uring
where it cannot work (module missing, kernel refuses rings, opcode missing)
is not fatal: the broker logs why, once, and runs on POSIX.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from pylog.io.posix import Buffer, PosixBackend

log = logging.getLogger(__name__)

BACKENDS = ("posix", "io_uring")

# One warning per process: a broker opens a backend per log, and the reason
# io_uring is missing does not change between them.
_fallback_warned = False


@runtime_checkable
class IOBackend(Protocol):
    """Positional file I/O used by segments, indexes and fetches."""

    name: str

    def pwritev(self, fd: int, buffers: Sequence[Buffer], offset: int) -> int:
        """Write ``buffers`` at ``offset``; may write less than asked (short write)."""
        ...

    def write_all(self, fd: int, buffers: Sequence[Buffer], offset: int) -> None:
        """Write every byte of ``buffers`` at ``offset``, retrying short writes."""
        ...

    def fdatasync(self, fd: int) -> None:
        """Make written data (and the size) durable."""
        ...

    def pread_into(self, fd: int, buf: Buffer, offset: int) -> int:
        """Read into writable ``buf`` from ``offset``; returns bytes read (0 at EOF)."""
        ...

    def sendfile(self, out_fd: int, in_fd: int, offset: int, count: int) -> int:
        """Copy up to ``count`` file bytes from ``offset`` to a socket, in the kernel."""
        ...

    def close(self) -> None:
        """Release what the backend holds (a ring); the fds stay the caller's."""
        ...


def get_backend(name: str = "posix") -> IOBackend:
    """A new backend by name: ``"posix"`` or ``"io_uring"``.

    ``io_uring`` falls back to ``posix`` (with one warning per process naming
    the reason) when the module, the kernel or a needed opcode is missing.
    """
    if name == "posix":
        return PosixBackend()
    if name == "io_uring":
        try:
            from pylog.io.uring import UringBackend

            return UringBackend()
        except Exception as exc:  # ImportError, UringError/OSError, UringUnavailable
            _warn_fallback(exc)
            return PosixBackend()
    raise ValueError(f"unknown I/O backend {name!r}; valid names: {', '.join(BACKENDS)}")


def _warn_fallback(exc: BaseException) -> None:
    global _fallback_warned
    if _fallback_warned:
        return
    _fallback_warned = True
    log.warning("io_uring backend unavailable (%s: %s); using the posix backend",
                type(exc).__name__, exc)
