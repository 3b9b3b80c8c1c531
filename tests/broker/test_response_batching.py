"""Responses to requests read together leave together: Connection, in process,
on a real socket, on both event loops.

A client that pipelines small requests (a consumer's ListOffsets for each
partition, a group member's heartbeat behind a commit) gets every answer of
one read in one write, in order; a close, a sendfile response, a response
that waited for an awaitable, and a batch larger than CORK_BYTES keep their
order and their bytes.  The transport is the loop's own, seen through a
wrapper that records each write.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from broker_process import EVENT_LOOPS

from pylog.net.connection import CORK_BYTES, CloseConnection, Connection
from pylog.net.framing import FileRegion, frame_parts

_SIZE = struct.Struct(">i")


def _frame(payload: bytes) -> bytes:
    return _SIZE.pack(len(payload)) + payload


def _echo(frame: bytearray) -> bytes:
    return _frame(b"re:" + bytes(frame))


class _Recorder:
    """The loop's transport, recording what goes through ``write``."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        self.writes: list[bytes] = []

    def write(self, data: Any) -> None:
        self.writes.append(bytes(data))
        self._transport.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class _Recorded(Connection):
    """A Connection whose reads that completed frames, and writes, are counted."""

    def __init__(self, handler: Callable[[Connection, bytearray], Any]) -> None:
        def handle(conn: Connection, frame: bytearray) -> Any:
            self._handled += 1
            return handler(conn, frame)

        super().__init__(handle, 1 << 20, -1)
        self._handled = 0
        self.reads_with_frames = 0
        self.recorder: _Recorder | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.recorder = _Recorder(transport)  # type: ignore[arg-type]
        super().connection_made(self.recorder)  # type: ignore[arg-type]

    def buffer_updated(self, nbytes: int) -> None:
        before = self._handled
        super().buffer_updated(nbytes)
        self.reads_with_frames += self._handled != before


def _run(event_loop: str, scenario: Callable[..., Any]) -> Any:
    if event_loop == "uvloop":
        uvloop = pytest.importorskip("uvloop")
        loop = uvloop.new_event_loop()
    else:
        loop = asyncio.new_event_loop()

    async def bounded() -> Any:
        async with asyncio.timeout(30):
            return await scenario()

    try:
        return loop.run_until_complete(bounded())
    finally:
        loop.close()


async def _serve(handler: Callable[[Connection, bytearray], Any]
                 ) -> tuple[asyncio.AbstractServer, list[_Recorded], int]:
    made: list[_Recorded] = []

    def factory() -> _Recorded:
        made.append(_Recorded(handler))
        return made[-1]

    server = await asyncio.get_running_loop().create_server(factory, "127.0.0.1", 0)
    return server, made, server.sockets[0].getsockname()[1]


async def _read_frames(reader: asyncio.StreamReader) -> list[bytes]:
    """Every frame until the server closes."""
    out = []
    while True:
        try:
            size, = _SIZE.unpack(await reader.readexactly(4))
        except asyncio.IncompleteReadError:
            return out
        out.append(await reader.readexactly(size))


@pytest.mark.parametrize("event_loop", EVENT_LOOPS)
def test_pipelined_requests_are_answered_in_one_write_per_read(event_loop: str) -> None:
    payloads = [b"req-%03d" % i for i in range(60)]

    async def scenario() -> tuple[list[bytes], _Recorded]:
        server, made, port = await _serve(lambda conn, frame: _echo(frame))
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"".join(map(_frame, payloads)))  # one write: all pipelined
        got = [await reader.readexactly(_SIZE.unpack(await reader.readexactly(4))[0])
               for _ in payloads]
        writer.close()
        server.close()
        return got, made[0]

    got, conn = _run(event_loop, scenario)
    assert got == [b"re:" + p for p in payloads]
    # One write for each read that brought frames, not one per request.
    assert len(conn.recorder.writes) == conn.reads_with_frames < len(payloads)
    assert b"".join(conn.recorder.writes) == b"".join(_frame(g) for g in got)


@pytest.mark.parametrize("event_loop", EVENT_LOOPS)
def test_answers_before_a_request_that_closes_are_still_sent(event_loop: str) -> None:
    def handler(conn: Connection, frame: bytearray) -> bytes:
        if frame == b"bad":
            raise CloseConnection("malformed")
        return _echo(frame)

    async def scenario() -> list[bytes]:
        server, _, port = await _serve(handler)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"".join(map(_frame, [b"a", b"b", b"bad", b"c"])))
        got = await _read_frames(reader)  # until the server closes
        writer.close()
        server.close()
        return got

    assert _run(event_loop, scenario) == [b"re:a", b"re:b"]


@pytest.mark.parametrize("event_loop", EVENT_LOOPS)
def test_a_batch_over_cork_bytes_is_written_as_it_grows(event_loop: str) -> None:
    big = 10_000
    n = 3 * CORK_BYTES // big

    async def scenario() -> tuple[list[bytes], _Recorded]:
        server, made, port = await _serve(
            lambda conn, frame: _frame(bytes(frame) * (big // len(frame))))
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"".join(_frame(b"%04d" % i) for i in range(n)))
        got = [await reader.readexactly(_SIZE.unpack(await reader.readexactly(4))[0])
               for _ in range(n)]
        writer.close()
        server.close()
        return got, made[0]

    got, conn = _run(event_loop, scenario)
    assert got == [(b"%04d" % i) * (big // 4) for i in range(n)]
    writes = conn.recorder.writes
    assert b"".join(writes) == b"".join(_frame(g) for g in got)
    # Never more than one response past the bound before the transport sees it.
    assert max(map(len, writes)) < CORK_BYTES + big + 4
    assert len(writes) >= n * big // (CORK_BYTES + big + 4)


@pytest.mark.parametrize("event_loop", EVENT_LOOPS)
def test_sendfile_and_awaited_responses_keep_their_place(event_loop: str,
                                                        tmp_path: Path) -> None:
    data = bytes(range(256)) * 64
    path = tmp_path / "segment"
    path.write_bytes(data)

    async def later(frame: bytes) -> bytes:
        await asyncio.sleep(0.05)
        return _echo(bytearray(frame))

    async def scenario() -> list[bytes]:
        with path.open("rb") as f:
            def handler(conn: Connection, frame: bytearray) -> Any:
                if frame == b"file":  # a fetch: header bytes, then the file by sendfile
                    return frame_parts([b"hdr:", FileRegion(f.fileno(), 100, 5000)])
                if frame == b"wait":  # a parked request: answered later
                    return later(bytes(frame))
                return _echo(frame)

            server, _, port = await _serve(handler)
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"".join(map(_frame, [b"a", b"file", b"b", b"wait", b"c", b"d"])))
            got = [await reader.readexactly(_SIZE.unpack(await reader.readexactly(4))[0])
                   for _ in range(6)]
            writer.close()
            server.close()
            return got

    assert _run(event_loop, scenario) == [b"re:a", b"hdr:" + data[100:5100], b"re:b",
                                          b"re:wait", b"re:c", b"re:d"]
