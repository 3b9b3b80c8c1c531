"""``pylog dump-log`` run as a user runs it, on segment files built here."""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from pylog.records import build_batch, validate

TS = 1_700_000_000_000


def _pylog(*args: str) -> subprocess.CompletedProcess:
    exe = shutil.which("pylog")
    cmd = [exe] if exe else [sys.executable, "-m", "pylog"]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=60)


def _batches() -> list[bytes]:
    b0 = build_batch([(TS + i, f"k{i}".encode(), f"value-{i}".encode()) for i in range(3)],
                     base_offset=100, partition_leader_epoch=0)
    b1 = build_batch([(TS + 10, None, b"hello", [("h1", b"x"), ("h2", None)])],
                     base_offset=103, partition_leader_epoch=1, producer_id=42,
                     producer_epoch=3, base_sequence=7)
    b2 = build_batch([(TS + 20, b"abc", None), (TS + 21, b"def", b"ghi")],
                     base_offset=104, partition_leader_epoch=1)
    return [b0, b1, b2]


def _segment(tmp_path: Path, data: bytes, base: int = 100) -> Path:
    path = tmp_path / f"{base:020d}.log"
    path.write_bytes(data)
    return path


def _line(batch: bytes, position: int, **over: object) -> str:
    info = validate(batch)[0]
    f = dict(base=info.base_offset, last=info.last_offset, count=info.record_count,
             bseq=info.base_sequence, lseq=-1 if info.base_sequence < 0 else
             info.base_sequence + info.last_offset_delta, pid=info.producer_id,
             pep=info.producer_epoch, ple=info.partition_leader_epoch,
             maxts=info.max_timestamp, crc=info.crc, valid="true")
    f.update(over)
    return (f"baseOffset: {f['base']} lastOffset: {f['last']} count: {f['count']} "
            f"baseSequence: {f['bseq']} lastSequence: {f['lseq']} producerId: {f['pid']} "
            f"producerEpoch: {f['pep']} partitionLeaderEpoch: {f['ple']} "
            "isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty "
            f"position: {position} CreateTime: {f['maxts']} size: {len(batch)} magic: 2 "
            f"compresscodec: none crc: {f['crc']} isvalid: {f['valid']}")


def test_batch_lines(tmp_path: Path) -> None:
    bs = _batches()
    seg = _segment(tmp_path, b"".join(bs))
    out = _pylog("dump-log", "--files", str(seg))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == f"Dumping {seg}"
    assert lines[1] == "Log starting offset: 100"
    pos = [0, len(bs[0]), len(bs[0]) + len(bs[1])]
    assert lines[2:] == [_line(b, p) for b, p in zip(bs, pos, strict=True)]
    assert "lastSequence: 7 producerId: 42 producerEpoch: 3 partitionLeaderEpoch: 1" \
        in lines[3]
    assert out.stderr == ""


def test_print_data_log_record_lines(tmp_path: Path) -> None:
    bs = _batches()
    seg = _segment(tmp_path, b"".join(bs))
    out = _pylog("dump-log", "--files", str(seg), "--print-data-log")
    assert out.returncode == 0, out.stderr
    records = [ln for ln in out.stdout.splitlines() if ln.startswith("|")]
    assert records == [
        f"| offset: 100 CreateTime: {TS} keySize: 2 valueSize: 7 sequence: -1 "
        "headerKeys: [] key: k0 payload: value-0",
        f"| offset: 101 CreateTime: {TS + 1} keySize: 2 valueSize: 7 sequence: -1 "
        "headerKeys: [] key: k1 payload: value-1",
        f"| offset: 102 CreateTime: {TS + 2} keySize: 2 valueSize: 7 sequence: -1 "
        "headerKeys: [] key: k2 payload: value-2",
        f"| offset: 103 CreateTime: {TS + 10} keySize: -1 valueSize: 5 sequence: 7 "
        "headerKeys: [h1,h2] payload: hello",
        f"| offset: 104 CreateTime: {TS + 20} keySize: 3 valueSize: -1 sequence: -1 "
        "headerKeys: [] key: abc",
        f"| offset: 105 CreateTime: {TS + 21} keySize: 3 valueSize: 3 sequence: -1 "
        "headerKeys: [] key: def payload: ghi",
    ]
    # Batch lines still come first, each before its records.
    lines = out.stdout.splitlines()
    assert lines[2].startswith("baseOffset: 100 ") and lines[3].startswith("| offset: 100 ")


def test_deep_iteration_without_data(tmp_path: Path) -> None:
    seg = _segment(tmp_path, b"".join(_batches()))
    out = _pylog("dump-log", "--files", str(seg), "--deep-iteration")
    records = [ln for ln in out.stdout.splitlines() if ln.startswith("|")]
    assert len(records) == 6
    assert records[0] == (f"| offset: 100 CreateTime: {TS} keySize: 2 valueSize: 7 "
                          "sequence: -1 headerKeys: []")
    assert not any("payload" in r for r in records)


def test_torn_tail_prints_good_batches_then_the_damage(tmp_path: Path) -> None:
    bs = _batches()
    torn = bs[2][:40]
    seg = _segment(tmp_path, bs[0] + bs[1] + torn)
    out = _pylog("dump-log", "--files", str(seg), "--deep-iteration")
    assert out.returncode == 0  # Kafka reports and carries on
    lines = out.stdout.splitlines()
    assert lines[2] == _line(bs[0], 0)
    batch_lines = [ln for ln in lines if ln.startswith("baseOffset")]
    assert len(batch_lines) == 2
    assert lines[-1] == f"Found {len(torn)} invalid bytes at the end of {seg.name}"
    pos = len(bs[0]) + len(bs[1])
    assert f"Corrupt batch at position {pos}: " in out.stderr
    assert "truncated" in out.stderr


def test_crc_mismatch_prints_invalid_batch_and_continues(tmp_path: Path) -> None:
    bs = _batches()
    bad = bytearray(bs[1])
    bad[-1] ^= 0xFF  # payload byte: the CRC no longer matches
    seg = _segment(tmp_path, bs[0] + bytes(bad) + bs[2])
    out = _pylog("dump-log", "--files", str(seg), "--print-data-log")
    assert out.returncode == 0
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("baseOffset")]
    assert lines[0] == _line(bs[0], 0)
    assert lines[1] == _line(bs[1], len(bs[0]), valid="false")
    assert lines[2] == _line(bs[2], len(bs[0]) + len(bs[1]))
    assert "invalid bytes" not in out.stdout
    assert f"Corrupt batch at position {len(bs[0])}" in out.stderr
    assert "CRC" in out.stderr
    # The bad batch's records are skipped, the others printed.
    offsets = [ln.split()[2] for ln in out.stdout.splitlines() if ln.startswith("|")]
    assert offsets == ["100", "101", "102", "104", "105"]
    assert "Non-consecutive offsets" in out.stderr and "102 is followed by 104" in out.stderr


def test_garbage_tail(tmp_path: Path) -> None:
    bs = _batches()
    seg = _segment(tmp_path, bs[0] + b"\x00" * 30)
    out = _pylog("dump-log", "--files", str(seg))
    assert out.returncode == 0
    assert out.stdout.splitlines()[-1] == f"Found 30 invalid bytes at the end of {seg.name}"


def test_max_bytes_stops_quietly(tmp_path: Path) -> None:
    bs = _batches()
    seg = _segment(tmp_path, b"".join(bs))
    out = _pylog("dump-log", "--files", str(seg), "--max-bytes", str(len(bs[0]) + 10))
    assert out.returncode == 0
    lines = out.stdout.splitlines()
    assert [ln for ln in lines if ln.startswith("baseOffset")] == [_line(bs[0], 0)]
    assert "invalid bytes" not in out.stdout and out.stderr == ""


def test_empty_log(tmp_path: Path) -> None:
    seg = _segment(tmp_path, b"")
    out = _pylog("dump-log", "--files", str(seg))
    assert out.returncode == 0
    assert out.stdout.splitlines() == [f"Dumping {seg}", "Log starting offset: 100"]


def test_control_batch(tmp_path: Path) -> None:
    key = struct.pack(">hh", 0, 1)          # version 0, COMMIT
    value = struct.pack(">hi", 0, 5)         # version 0, coordinator epoch 5
    ctl = build_batch([(TS, key, value)], base_offset=100, is_control=True,
                      is_transactional=True, producer_id=9, producer_epoch=0)
    seg = _segment(tmp_path, ctl)
    out = _pylog("dump-log", "--files", str(seg), "--print-data-log")
    lines = out.stdout.splitlines()
    assert "isTransactional: true isControl: true" in lines[2]
    assert lines[3] == (f"| offset: 100 CreateTime: {TS} keySize: 4 valueSize: 6 "
                        "sequence: -1 headerKeys: [] endTxnMarker: COMMIT coordinatorEpoch: 5")


# -- indexes ---------------------------------------------------------------------

def _index_files(tmp_path: Path, preallocate: int = 4) -> tuple[Path, Path, list[bytes]]:
    bs = _batches()
    _segment(tmp_path, b"".join(bs))
    pos1 = len(bs[0])
    pos2 = pos1 + len(bs[1])
    idx = tmp_path / f"{100:020d}.index"
    # Entries name the batch at the position (pylog writes base offsets).
    idx.write_bytes(struct.pack(">ii", 0, 0) + struct.pack(">ii", 3, pos1)
                    + struct.pack(">ii", 4, pos2) + b"\0" * 8 * preallocate)
    tidx = tmp_path / f"{100:020d}.timeindex"
    tidx.write_bytes(struct.pack(">qi", TS + 2, 0) + struct.pack(">qi", TS + 10, 3)
                     + struct.pack(">qi", TS + 21, 4) + b"\0" * 12 * preallocate)
    return idx, tidx, bs


def test_offset_index_entries(tmp_path: Path) -> None:
    idx, _, bs = _index_files(tmp_path)
    out = _pylog("dump-log", "--files", str(idx))
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        f"Dumping {idx}",
        "offset: 100 position: 0",
        f"offset: 103 position: {len(bs[0])}",
        f"offset: 104 position: {len(bs[0]) + len(bs[1])}",
    ]
    assert out.stderr == ""


def test_offset_index_trimmed_and_mismatch(tmp_path: Path) -> None:
    idx, _, bs = _index_files(tmp_path, preallocate=0)
    data = idx.read_bytes()
    # Entry 1 points at batch 1 but claims offset 110.
    idx.write_bytes(data[:8] + struct.pack(">ii", 10, len(bs[0])) + data[16:])
    out = _pylog("dump-log", "--files", str(idx))
    assert out.returncode == 0
    assert len(out.stdout.splitlines()) == 4
    assert f"Mismatches in :{idx}" in out.stderr
    assert "Index offset: 110, log offset: 103" in out.stderr


def test_time_index_entries(tmp_path: Path) -> None:
    _, tidx, _ = _index_files(tmp_path)
    out = _pylog("dump-log", "--files", str(tidx))
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        f"Dumping {tidx}",
        f"timestamp: {TS + 2} offset: 100",
        f"timestamp: {TS + 10} offset: 103",
        f"timestamp: {TS + 21} offset: 104",
    ]
    assert out.stderr == ""


def test_index_sanity_check(tmp_path: Path) -> None:
    idx, tidx, _ = _index_files(tmp_path)
    out = _pylog("dump-log", "--files", f"{idx},{tidx}", "--index-sanity-check")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        f"Dumping {idx}", f"{idx} passed sanity check.",
        f"Dumping {tidx}", f"{tidx} passed sanity check.",
    ]


def test_index_sanity_check_fails(tmp_path: Path) -> None:
    idx, tidx, _ = _index_files(tmp_path)
    data = idx.read_bytes()
    idx.write_bytes(data[:8] + struct.pack(">ii", 5, 10) + struct.pack(">ii", 4, 20))
    tdata = tidx.read_bytes()
    tidx.write_bytes(tdata[:12] + struct.pack(">qi", TS - 5, 3) + b"\x01")
    out = _pylog("dump-log", "--files", f"{idx},{tidx}", "--index-sanity-check")
    assert out.returncode == 1
    assert f"{idx} failed sanity check: entry 2" in out.stderr
    assert f"{tidx} failed sanity check: found 25 bytes" in out.stderr
    assert "passed" not in out.stdout


def test_empty_index(tmp_path: Path) -> None:
    idx = tmp_path / f"{0:020d}.index"
    idx.write_bytes(b"")
    out = _pylog("dump-log", "--files", str(idx))
    assert out.returncode == 0
    assert out.stdout.splitlines() == [f"Dumping {idx}", f"{idx} is empty."]


def test_several_files_unknown_and_missing(tmp_path: Path) -> None:
    seg = _segment(tmp_path, _batches()[0])
    other = tmp_path / "notes.txt"
    other.write_text("x")
    missing = tmp_path / f"{5:020d}.log"
    out = _pylog("dump-log", "--files", f"{seg},{other},{missing}")
    assert out.returncode == 1
    assert f"Dumping {seg}" in out.stdout and f"Dumping {other}" in out.stdout
    assert f"Ignoring unknown file {other}" in out.stderr
    assert f"Cannot read {missing}" in out.stderr


def test_files_is_required() -> None:
    out = _pylog("dump-log")
    assert out.returncode == 2
    assert "--files" in out.stderr


def test_listed_in_help() -> None:
    out = _pylog("--help")
    assert "dump-log" in out.stdout


@pytest.mark.parametrize("flag", ["--print-data-log", "--deep-iteration"])
def test_compressed_batch(tmp_path: Path, flag: str) -> None:
    batch = build_batch([(TS, b"k", b"v" * 100)] * 3, base_offset=100, compression=1)
    seg = _segment(tmp_path, batch)
    out = _pylog("dump-log", "--files", str(seg), flag)
    assert out.returncode == 0, out.stderr
    assert "compresscodec: gzip" in out.stdout
    assert sum(ln.startswith("|") for ln in out.stdout.splitlines()) == 3


# -- producer snapshots, transaction indexes, decoder flags ------------------------

def _kafka_snapshot(entries: list[tuple], version: int = 1) -> bytes:
    """Kafka's producer snapshot file (ProducerStateManager.writeSnapshot):
    version, crc32c of what follows it, then the entries (producer id, epoch,
    last sequence, last offset, offset delta, timestamp, coordinator epoch,
    current transaction's first offset)."""
    import crc32c

    body = struct.pack(">i", len(entries)) + b"".join(
        struct.pack(">qhiqiqiq", *e) for e in entries)
    return struct.pack(">hI", version, crc32c.crc32c(body)) + body


def test_kafka_producer_snapshot(tmp_path: Path) -> None:
    path = tmp_path / f"{120:020d}.snapshot"
    path.write_bytes(_kafka_snapshot([
        (42, 3, 9, 119, 4, TS, -1, -1),
        (43, 0, 2_147_483_646, 110, 5, TS + 1, 7, 108),  # a sequence that wrapped
        (44, 1, -1, -1, 0, TS + 2, 2, 100),  # no batch left: only the transaction
    ]))
    out = _pylog("dump-log", "--files", str(path))
    assert out.returncode == 0 and out.stderr == ""
    assert out.stdout.splitlines() == [
        f"Dumping {path}",
        f"producerId: 42 producerEpoch: 3 coordinatorEpoch: -1 currentTxnFirstOffset: "
        f"OptionalLong.empty lastTimestamp: {TS} firstSequence: 5 lastSequence: 9 "
        f"lastOffset: 119 offsetDelta: 4 timestamp: {TS}",
        f"producerId: 43 producerEpoch: 0 coordinatorEpoch: 7 currentTxnFirstOffset: "
        f"OptionalLong[108] lastTimestamp: {TS + 1} firstSequence: 2147483641 "
        f"lastSequence: 2147483646 lastOffset: 110 offsetDelta: 5 timestamp: {TS + 1}",
        f"producerId: 44 producerEpoch: 1 coordinatorEpoch: 2 currentTxnFirstOffset: "
        f"OptionalLong[100] lastTimestamp: {TS + 2} ",
    ]


def test_corrupt_kafka_producer_snapshot(tmp_path: Path) -> None:
    path = tmp_path / f"{120:020d}.snapshot"
    data = bytearray(_kafka_snapshot([(42, 3, 9, 119, 4, TS, -1, -1)]))
    stored = struct.unpack_from(">I", data, 2)[0]
    data[-1] ^= 1
    path.write_bytes(bytes(data))
    out = _pylog("dump-log", "--files", str(path))
    assert out.returncode == 0  # reported, as Kafka does, not fatal
    assert out.stdout == f"Dumping {path}\n"
    assert out.stderr.startswith(f"Snapshot is corrupt (CRC is no longer valid). Stored crc: "
                                 f"{stored}. Computed crc: ")
    path.write_bytes(_kafka_snapshot([], version=2))
    out = _pylog("dump-log", "--files", str(path))
    assert out.stderr == "Snapshot contained an unknown file version 2\n"


def test_pylog_producer_snapshot_of_a_broker(tmp_path: Path) -> None:
    """The snapshot a broker writes at shutdown, dumped as Kafka dumps its own."""
    import re

    from broker_process import BrokerProcess
    from confluent_kafka import Producer

    broker = BrokerProcess(tmp_path / "data").start()
    try:
        producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True,
                             "linger.ms": 100})
        for i in range(5):
            producer.produce("snap", f"v{i}".encode(), partition=0)
        assert producer.flush(30) == 0
    finally:
        assert broker.stop() == 0
    (snapshot,) = (tmp_path / "data" / "snap-0").glob("*.snapshot")
    out = _pylog("dump-log", "--files", str(snapshot))
    assert out.returncode == 0 and out.stderr == ""
    lines = out.stdout.splitlines()
    assert lines[0] == f"Dumping {snapshot}" and len(lines) == 2
    found = re.fullmatch(
        r"producerId: (\d+) producerEpoch: 0 coordinatorEpoch: -?\d+ currentTxnFirstOffset: "
        r"OptionalLong.empty lastTimestamp: (\d+) firstSequence: (\d+) lastSequence: 4 "
        r"lastOffset: 4 offsetDelta: (\d+) timestamp: (\d+)", lines[1])
    assert found, lines[1]
    assert int(found[3]) + int(found[4]) == 4 and found[2] == found[5]


def test_transaction_index(tmp_path: Path) -> None:
    path = tmp_path / f"{0:020d}.txnindex"
    path.write_bytes(struct.pack(">hqqqq", 0, 42, 10, 14, 12)
                     + struct.pack(">hqqqq", 0, 43, 20, 21, 20))
    out = _pylog("dump-log", "--files", str(path))
    assert out.returncode == 0 and out.stderr == ""
    assert out.stdout.splitlines()[1:] == [
        "version: 0 producerId: 42 firstOffset: 10 lastOffset: 14 lastStableOffset: 12",
        "version: 0 producerId: 43 firstOffset: 20 lastOffset: 21 lastStableOffset: 20"]


def test_decoder_class_flags(tmp_path: Path) -> None:
    seg = _segment(tmp_path, _batches()[0])
    # Kafka's StringDecoder (the default value) implies --print-data-log.
    out = _pylog("dump-log", "--files", str(seg), "--value-decoder-class")
    assert out.returncode == 0, out.stderr
    assert "key: k0 payload: value-0" in out.stdout
    out = _pylog("dump-log", "--files", str(seg), "--key-decoder-class",
                 "kafka.serializer.StringDecoder")
    assert out.returncode == 0 and "payload: value-2" in out.stdout
    out = _pylog("dump-log", "--files", str(seg), "--value-decoder-class", "com.example.Dec")
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr == ("--value-decoder-class com.example.Dec is not supported by pylog: "
                          "it decodes with kafka.serializer.StringDecoder only\n")
