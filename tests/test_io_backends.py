"""Both I/O backends against real files and sockets, and the backend choice."""

from __future__ import annotations

import builtins
import logging
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from pylog.io import backend as backend_mod
from pylog.io.backend import IOBackend, get_backend
from pylog.io.posix import IOV_MAX, PosixBackend, remaining


def _uring_available() -> bool:
    try:
        from pylog.io.uring import UringBackend

        UringBackend().close()
        return True
    except Exception:
        return False


BACKENDS = [
    "posix",
    pytest.param("io_uring", marks=pytest.mark.skipif(
        not _uring_available(), reason="io_uring not usable here (module, kernel or opcode)")),
]


@pytest.fixture(params=BACKENDS)
def io(request: pytest.FixtureRequest) -> Iterator[IOBackend]:
    b = get_backend(request.param)
    assert b.name == request.param  # no silent fallback where io_uring works
    yield b
    b.close()


@pytest.fixture
def fd(tmp_path: Path) -> Iterator[int]:
    f = os.open(tmp_path / "seg.log", os.O_RDWR | os.O_CREAT, 0o644)
    yield f
    os.close(f)


def _content(fd: int) -> bytes:
    return os.pread(fd, os.fstat(fd).st_size, 0)


def test_is_an_iobackend(io: IOBackend) -> None:
    assert isinstance(io, IOBackend)


def test_pwritev_mixed_buffers(io: IOBackend, fd: int) -> None:
    bufs = [b"abc", bytearray(b"defg"), memoryview(b"--hijk")[2:], b"", memoryview(b"lm")]
    assert io.pwritev(fd, bufs, 0) == 13
    assert _content(fd) == b"abcdefghijklm"


def test_pwritev_at_offset_leaves_a_hole(io: IOBackend, fd: int) -> None:
    assert io.pwritev(fd, [b"xyz"], 5) == 3
    assert _content(fd) == b"\0" * 5 + b"xyz"


def test_write_all_many_buffers(io: IOBackend, fd: int) -> None:
    # More buffers than one writev takes: split in IOV_MAX chunks.
    bufs = [bytes([i % 251]) * (i % 97 + 1) for i in range(IOV_MAX * 2 + 17)]
    io.write_all(fd, bufs, 100)
    data = _content(fd)
    assert data[100:] == b"".join(bufs)


def test_write_all_large(io: IOBackend, fd: int) -> None:
    big = os.urandom(8 << 20)
    io.write_all(fd, [big[:3], memoryview(big)[3:]], 0)
    assert _content(fd) == big


def test_write_all_retries_short_writes(io: IOBackend, fd: int,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # A short write is a kernel decision (signals, RLIMIT_FSIZE, full disk):
    # make every call write at most 5 bytes and check nothing is lost.
    real = io.pwritev
    calls = []

    def short(fd_: int, buffers, offset: int) -> int:
        first = remaining(buffers, 0)
        head = bytes(b"".join(bytes(b) for b in first))[:5]
        calls.append(offset)
        return real(fd_, [head], offset)

    monkeypatch.setattr(io, "pwritev", short)
    io.write_all(fd, [b"hello ", b"short ", b"writes"], 0)
    assert _content(fd) == b"hello short writes"
    assert calls == [0, 5, 10, 15]


def test_write_all_raises_on_bad_fd(io: IOBackend) -> None:
    r, w = os.pipe()
    os.close(w)
    with pytest.raises(OSError):
        io.write_all(r, [b"x"], 0)
    os.close(r)


def test_fdatasync(io: IOBackend, fd: int) -> None:
    io.write_all(fd, [b"durable"], 0)
    io.fdatasync(fd)
    assert _content(fd) == b"durable"


def test_fdatasync_bad_fd_raises(io: IOBackend) -> None:
    with pytest.raises(OSError):
        io.fdatasync(987654)


def test_pread_into(io: IOBackend, fd: int) -> None:
    io.write_all(fd, [b"0123456789"], 0)
    buf = bytearray(4)
    assert io.pread_into(fd, buf, 3) == 4 and buf == b"3456"
    big = bytearray(100)
    assert io.pread_into(fd, big, 8) == 2 and big[:2] == b"89"
    assert io.pread_into(fd, bytearray(8), 50) == 0  # past EOF
    mv = memoryview(bytearray(6))[1:5]
    assert io.pread_into(fd, mv, 0) == 4 and bytes(mv) == b"0123"


def test_sendfile_to_socket(io: IOBackend, fd: int) -> None:
    payload = os.urandom(200_000)
    io.write_all(fd, [payload], 0)
    a, b = socket.socketpair()
    with a, b:
        b.setblocking(True)
        sent = 0
        got = bytearray()
        while sent < 150_000:
            sent += io.sendfile(a.fileno(), fd, 1000 + sent, 150_000 - sent)
            got += b.recv(1 << 20)
        while len(got) < 150_000:
            got += b.recv(1 << 20)
        assert bytes(got) == payload[1000:151_000]


def test_close_is_idempotent_enough(io: IOBackend) -> None:
    io.close()


# -- selection -----------------------------------------------------------------

def test_default_is_posix() -> None:
    assert isinstance(get_backend(), PosixBackend)


def test_unknown_backend_lists_valid_names() -> None:
    with pytest.raises(ValueError, match="posix, io_uring"):
        get_backend("aio")


def test_fallback_warns_once(monkeypatch: pytest.MonkeyPatch,
                             caplog: pytest.LogCaptureFixture) -> None:
    # Simulate a machine without pyuring: the import itself fails.
    real_import = builtins.__import__

    def no_pyuring(name, *args, **kwargs):
        if name == "pyuring" or name.startswith("pyuring.") or name == "pylog.io.uring":
            raise ImportError(f"No module named {name!r} (simulated)")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pyuring)
    monkeypatch.setattr(backend_mod, "_fallback_warned", False)
    import sys
    monkeypatch.delitem(sys.modules, "pylog.io.uring", raising=False)
    with caplog.at_level(logging.WARNING, logger="pylog.io.backend"):
        first = get_backend("io_uring")
        second = get_backend("io_uring")
    assert first.name == second.name == "posix"
    warnings = [r for r in caplog.records if "io_uring" in r.getMessage()]
    assert len(warnings) == 1
    assert "simulated" in warnings[0].getMessage()


def test_fallback_when_kernel_refuses(monkeypatch: pytest.MonkeyPatch,
                                      caplog: pytest.LogCaptureFixture) -> None:
    pytest.importorskip("pyuring")
    from pylog.io import uring

    def refuse(*args, **kwargs):
        raise OSError(38, "io_uring_setup: Function not implemented (simulated)")

    monkeypatch.setattr(uring.pyuring, "UringCtx", refuse)
    monkeypatch.setattr(backend_mod, "_fallback_warned", False)
    with caplog.at_level(logging.WARNING, logger="pylog.io.backend"):
        b = get_backend("io_uring")
    assert b.name == "posix"
    assert "Function not implemented" in caplog.text


@pytest.mark.skipif(not _uring_available(), reason="io_uring not usable here")
def test_uring_async_fdatasync(fd: int) -> None:
    from pylog.io.uring import UringBackend

    with UringBackend() as io:
        io.write_all(fd, [b"a" * 4096], 0)
        handle = io.fdatasync_async(fd)
        # Writes go on while the sync is in flight.
        io.write_all(fd, [b"b" * 4096], 4096)
        assert handle.result() == 0
        assert handle.done()
        assert _content(fd) == b"a" * 4096 + b"b" * 4096


@pytest.mark.skipif(not _uring_available(), reason="io_uring not usable here")
def test_uring_from_two_threads(tmp_path: Path) -> None:
    import threading

    from pylog.io.uring import UringBackend

    fds = [os.open(tmp_path / f"t{i}", os.O_RDWR | os.O_CREAT) for i in range(2)]
    with UringBackend() as io:
        def work(f: int) -> None:
            for i in range(200):
                io.write_all(f, [bytes([i])] * 64, i * 64)
                if i % 50 == 0:
                    io.fdatasync(f)

        threads = [threading.Thread(target=work, args=(f,)) for f in fds]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    for f in fds:
        assert _content(f) == b"".join(bytes([i]) * 64 for i in range(200))
        os.close(f)


@pytest.mark.skipif(not _uring_available(), reason="io_uring not usable here")
def test_uring_closed_backend_refuses_work(fd: int) -> None:
    from pylog.io.uring import UringBackend

    io = UringBackend()
    io.close()
    io.close()
    with pytest.raises(OSError, match="closed"):
        io.write_all(fd, [b"x"], 0)
