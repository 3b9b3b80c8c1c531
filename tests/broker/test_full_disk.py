"""A log dir on a small tmpfs that fills up: KAFKA_STORAGE_ERROR and a log line,
never a signal, and every acknowledged record there after the restart.

Index files are memory-mapped.  Left sparse, the first store into a new page of
an index on a full filesystem is a SIGBUS: the node died with no log line and
the producer with no error.  With the indexes allocated when they are made or
grown, the disk filling up is an ENOSPC from a system call (the segment's
write, the allocation of a rolled segment's indexes) and takes the documented
path: the error to the producer, the dir offline, the node halted (exit 1),
the restart recovering as after kill -9.  The test mounts the tmpfs itself;
it is skipped only where mounting is impossible (not root, no CAP_SYS_ADMIN).
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from broker_process import BrokerProcess
from kafka_wire import RawClient, produce_body
from test_admin_producer_apis import create_topic
from test_log_dir_failure import _read_all

from pylog.protocol import ApiKey, ErrorCode
from pylog.records import build_batch

TMPFS_MIB = 64


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_MIB}m", "tmpfs",
                           str(mount_point)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], capture_output=True)


def _produce(client: RawClient, topic: str, acked: list[bytes], count: int) -> object:
    """``count`` 1 KB batches, 64 requests in flight, each acknowledged value
    appended to ``acked`` in offset order; the first refusal (None: none).
    Small batches touch index pages often (an entry every few KB of log)."""
    error = None
    for _ in range(0, count, 64):
        sent = [os.urandom(1000) for _ in range(64)]
        for value in sent:
            client.send(ApiKey.PRODUCE, 8, produce_body(
                topic, 0, bytes(build_batch([(1_700_000_000_000, b"k", value)])), acks=1))
        for value in sent:
            try:
                response = client.recv(ApiKey.PRODUCE, 8)[1]
            except ConnectionError:
                if error is None:
                    raise
                break  # it halted after the refusal, before answering the rest
            part = response.responses[0].partition_responses[0]
            if part.error_code:
                error = error or part
            else:  # even after a refusal: whatever was acknowledged must be kept
                assert part.base_offset == len(acked)
                acked.append(value)
        if error is not None:
            break
    return error


def _fill_up(directory: Path) -> Path:
    """Fill the filesystem from outside the broker, to the last block."""
    filler = directory / "filler"
    with open(filler, "wb", buffering=0) as f:
        for chunk in (1 << 20, 4096):
            try:
                while True:
                    f.write(b"\0" * chunk)
            except OSError:
                pass
    return filler


@pytest.mark.parametrize("overrides", [
    # Kafka's defaults: a 10 MiB index per segment, an entry every 4 KiB of
    # log (a new index page every 2 MiB of log).
    (),
    # An entry for every batch: a new index page every 512 KB of log, inside
    # the blocks the segment reserved ahead of its appends.
    ("log.index.interval.bytes=64",),
    # Small segments: the disk is full when the next segment (and its
    # indexes) must be made.
    ("log.index.interval.bytes=64", "log.segment.bytes=262144"),
], ids=["defaults", "small-interval", "small-interval-rolling"])
def test_full_tmpfs_answers_storage_error_and_halts(small_disk: Path, overrides) -> None:
    data = small_disk / "data"
    topic = "full"
    node = BrokerProcess(data, *overrides).start()
    acked: list[bytes] = []
    try:
        with RawClient(node.bootstrap, timeout=30) as client:
            create_topic(client, topic)
            assert _produce(client, topic, acked, 256) is None
            # Something else takes the rest of the disk (another log, a
            # core dump): the segment still holds blocks reserved ahead.
            filler = _fill_up(small_disk)
            try:
                error = _produce(client, topic, acked, 64 * 1024)
            except ConnectionError:  # died without answering
                status = node.wait_exit()
                raise AssertionError(f"the broker died (exit status {status}"
                                     f"{', SIGBUS' if -status == signal.SIGBUS else ''})"
                                     ) from None
        assert error is not None, "the broker never noticed the full disk"
        assert error.error_code == ErrorCode.KAFKA_STORAGE_ERROR, error
        assert "No space left on device" in error.error_message
        status = node.wait_exit()
        # Halted as Kafka's LogDirFailureHandler does; never killed by a signal.
        assert status == 1, f"exit status {status}"
    finally:
        node.kill()
    output = "".join(node.output)
    assert f"in dir {data}" in output and "No space left on device" in output, output
    assert f"Halting broker because dir {data} is offline" in output

    # Room again, and the restart recovers every acknowledged record.
    filler.unlink()
    again = BrokerProcess(data, *overrides).start()
    try:
        got = _read_all(again.bootstrap, topic, len(acked))
        assert [offset for offset, _ in got] == list(range(len(acked)))
        assert [value for _, value in got] == acked
    finally:
        assert again.stop() == 0
