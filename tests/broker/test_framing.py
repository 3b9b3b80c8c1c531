"""FrameBuffer and FileRegion, in process."""

from __future__ import annotations

import struct

import pytest

from pylog.net.framing import (
    STAGING_BYTES,
    FileRegion,
    FrameBuffer,
    FrameTooLargeError,
    frame_parts,
)
from pylog.net.request_queue import RequestQueue
from pylog.protocol import ApiKey, encode_response


def feed(fb: FrameBuffer, data: bytes, chunk: int) -> list[bytearray]:
    out: list[bytearray] = []
    pos = 0
    while pos < len(data):
        buf = fb.get_buffer()
        n = min(len(buf), chunk, len(data) - pos)
        buf[:n] = data[pos:pos + n]
        out += fb.buffer_updated(n)
        pos += n
    return out


@pytest.mark.parametrize("chunk", [1, 3, 4, 5, 1000, 1 << 20])
def test_frames_split_anywhere(chunk: int) -> None:
    payloads = [b"a" * 10, b"", b"b" * 70_000, b"c" * 5, b"d" * (STAGING_BYTES - 4)]
    data = b"".join(struct.pack(">i", len(p)) + p for p in payloads)
    frames = feed(FrameBuffer(1 << 20), data, chunk)
    assert [bytes(f) for f in frames] == payloads
    assert all(type(f) is bytearray for f in frames)  # writable: produce stamps in place


def test_after_a_large_frame_the_next_read_is_its_size_prefix() -> None:
    """A large frame is usually followed by another: its bytes should go
    straight into their own buffer, not through the staging buffer."""
    fb = FrameBuffer(1 << 20)
    assert len(fb.get_buffer()) == STAGING_BYTES
    big = b"x" * (STAGING_BYTES * 2)
    data = struct.pack(">i", len(big)) + big
    assert [bytes(f) for f in feed(fb, data, 1 << 20)] == [big]
    assert len(fb.get_buffer()) == 4  # only the next size prefix
    buf = fb.get_buffer()
    buf[:4] = struct.pack(">i", len(big))
    assert fb.buffer_updated(4) == []
    assert len(fb.get_buffer()) == len(big)  # the whole frame, straight into its buffer
    assert [bytes(f) for f in feed(fb, big, 1 << 20)] == [big]
    # A small frame after it: back to reading through the staging buffer.
    assert [bytes(f) for f in feed(fb, struct.pack(">i", 3) + b"abc", 1 << 20)] == [b"abc"]
    assert len(fb.get_buffer()) == STAGING_BYTES


def test_every_frame_counts_against_the_queue_until_released() -> None:
    queue = RequestQueue()
    fb = FrameBuffer(1 << 20, queue)
    big = b"y" * (STAGING_BYTES * 3)
    data = b"".join(struct.pack(">i", len(p)) + p for p in (b"abc", big, b"de"))
    frames = feed(fb, data, 10_000)
    assert [bytes(f) for f in frames] == [b"abc", big, b"de"]
    assert queue.bytes == 3 + len(big) + 2
    for f in frames:
        queue.release(len(f))
    assert queue.bytes == 0


def test_a_frame_needing_its_own_buffer_waits_while_the_queue_is_out_of_memory() -> None:
    """queued.max.request.bytes: no buffer for a new frame while the node's
    requests hold that much; the bytes that came wait, and the frame starts
    once the queue drains (not strict, as Kafka's pool: one frame may go over)."""
    queue = RequestQueue(max_bytes=100_000)
    fb = FrameBuffer(1 << 20, queue)
    first, second = b"1" * 150_000, b"2" * 150_000
    # The first frame fits (the queue was empty) though it overshoots.
    assert feed(fb, struct.pack(">i", len(first)) + first[:1000], 1 << 20) == []
    assert not fb.blocked
    assert queue.bytes == len(first)
    [got] = feed(fb, first[1000:], 1 << 20)
    assert bytes(got) == first
    # The second frame's start arrives while the first is not handled yet.
    # (After a large frame the next read is the size prefix alone.)
    assert feed(fb, struct.pack(">i", len(second)), 1 << 20) == []
    assert fb.blocked and not fb.unblock() and queue.bytes == len(first)
    queue.release(len(got))  # handled
    assert fb.unblock() and not fb.blocked and queue.bytes == len(second)
    [got] = feed(fb, second, 7000)
    assert bytes(got) == second
    # Blocked with part of the frame read through the staging buffer: a
    # small frame (handled at once), then the start of a large one.
    third = b"3" * 90_000
    frames = feed(fb, struct.pack(">i", 2) + b"ok" + struct.pack(">i", len(third))
                  + third[:500], 1 << 20)
    assert [bytes(f) for f in frames] == [b"ok"] and fb.blocked
    queue.release(2)
    assert fb.blocked  # the second frame still holds the queue's bytes
    queue.release(len(got))
    assert fb.unblock() and queue.bytes == len(third)
    assert [bytes(f) for f in feed(fb, third[500:], 1 << 20)] == [third]


def test_oversized_size_rejected_before_allocation() -> None:
    fb = FrameBuffer(100)
    with pytest.raises(FrameTooLargeError):
        feed(fb, struct.pack(">i", 101), 4)
    with pytest.raises(FrameTooLargeError):
        feed(FrameBuffer(100), struct.pack(">i", -1), 4)


def test_file_region_encodes_as_records() -> None:
    region = FileRegion(fd=3, position=100, length=500)
    assert len(region) == 500
    parts: list = []
    from pylog.protocol.messages import body_encoder

    body = {"responses": [{"topic": "t", "partitions": [
        {"partition_index": 0, "high_watermark": 1, "records": region}]}]}
    body_encoder(ApiKey.FETCH, 11, "response")(body, parts.append)
    framed = frame_parts([b"\x00\x00\x00\x01", *parts])
    assert framed[1] is region  # records come last in v11: nothing after it
    size, = struct.unpack(">i", framed[0][:4])
    plain = dict(body)
    plain["responses"][0]["partitions"][0]["records"] = b"x" * 500
    expect = encode_response(ApiKey.FETCH, 11, 1, plain)
    assert size == len(expect) - 4
    assert framed[0] + b"x" * 500 + b"".join(framed[2:]) == expect


def test_alloc_frame_is_a_bytearray_of_the_size_asked() -> None:
    from pylog._native.buffers import alloc_frame

    frame = alloc_frame(1 << 20)
    assert type(frame) is bytearray and len(frame) == 1 << 20
    frame[-3:] = b"end"  # writable, the whole length
    assert frame[-3:] == b"end"
    assert alloc_frame(0) == bytearray()
    with pytest.raises(ValueError):
        alloc_frame(-1)
