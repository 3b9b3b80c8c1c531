"""pylog's record batches against kafka-python's and aiokafka's.

Batches built by their builders validate and read with both pylog
implementations; batches built (and stamped) by pylog read with their
readers to the same records.  kafka-python compresses snappy/lz4/zstd with
the optional ``python-snappy``/``lz4``/``zstandard`` packages: without them
those codecs are skipped for kafka-python (aiokafka uses cramjam, so it
covers every codec).
"""

from __future__ import annotations

import pytest

from pylog.records import pyrecords

native = pytest.importorskip("pylog._native.records")
kafka_records = pytest.importorskip("kafka.record.default_records")
kafka_memory = pytest.importorskip("kafka.record.memory_records")
kafka_codec = pytest.importorskip("kafka.codec")
aio_records = pytest.importorskip("aiokafka.record.default_records")
aio_memory = pytest.importorskip("aiokafka.record.memory_records")

try:
    from aiokafka.record._crecords import default_records as aio_c
except ImportError:  # pragma: no cover - aiokafka built without extensions
    aio_c = None

PYLOG = {"native": native, "python": pyrecords}
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
KAFKA_HAS = {0: True, 1: kafka_codec.has_gzip(), 2: kafka_codec.has_snappy(),
             3: kafka_codec.has_lz4(), 4: kafka_codec.has_zstd()}
KAFKA_NEEDS = {2: "python-snappy", 3: "lz4", 4: "zstandard"}

T0 = 1_700_000_000_000

BUILDERS = {
    "kafka-python": kafka_records.DefaultRecordBatchBuilder,
    "aiokafka-py": aio_records._DefaultRecordBatchBuilderPy,
}
READERS = {
    "kafka-python": kafka_records.DefaultRecordBatch,
    "aiokafka-py": aio_records._DefaultRecordBatchPy,
}
if aio_c is not None:
    BUILDERS["aiokafka-c"] = aio_c.DefaultRecordBatchBuilder
    READERS["aiokafka-c"] = aio_c.DefaultRecordBatch


def skip_unsupported(lib: str, codec: int) -> None:
    if lib == "kafka-python" and not KAFKA_HAS[codec]:
        pytest.skip(f"kafka-python needs the {KAFKA_NEEDS[codec]} package for this codec")


def sample_records(n: int = 60) -> list[tuple]:
    """(offset, timestamp, key, value, headers) with nulls, empties and headers."""
    out = []
    for i in range(n):
        key = None if i % 7 == 3 else f"key-{i}".encode()
        value = None if i % 11 == 5 else (b"" if i % 13 == 1 else bytes([i % 256]) * (i * 9))
        headers = [(f"h{j}", None if j == 1 else f"v{i}.{j}".encode()) for j in range(i % 3)]
        out.append((i, T0 + (i * 37) % 101, key, value, headers))
    return out


def their_rows(batch) -> list[tuple]:
    return [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch]


def our_rows(records) -> list[tuple]:
    return [r.as_tuple() for r in records]


# -- theirs -> pylog -------------------------------------------------------------

@pytest.mark.parametrize("codec", list(CODECS.values()), ids=list(CODECS))
@pytest.mark.parametrize("lib", list(BUILDERS))
@pytest.mark.parametrize("transactional", [False, True], ids=["plain", "txn"])
def test_pylog_reads_theirs(lib, codec, transactional):
    skip_unsupported(lib, codec)
    pid, epoch, seq = (4242, 3, 100) if transactional else (-1, -1, -1)
    builder = BUILDERS[lib](2, codec, transactional, pid, epoch, seq, 10 * 2**20)
    recs = sample_records()
    for offset, ts, key, value, headers in recs:
        assert builder.append(offset, ts, key, value, headers) is not None
    buf = bytes(builder.build())
    for name, impl in PYLOG.items():
        (info,) = impl.validate(buf)
        assert info.record_count == len(recs), name
        assert info.compression == codec
        assert info.is_transactional == transactional
        assert (info.producer_id, info.producer_epoch, info.base_sequence) == (pid, epoch, seq)
        assert info.first_timestamp == min(r[1] for r in recs[:1])
        assert info.max_timestamp == max(r[1] for r in recs)
        assert our_rows(impl.iter_records(buf)) == recs, name


@pytest.mark.parametrize("lib", list(BUILDERS))
def test_pylog_stamps_theirs(lib):
    builder = BUILDERS[lib](2, 0, False, -1, -1, -1, 2**20)
    for offset, ts, key, value, headers in sample_records(5):
        builder.append(offset, ts, key, value, headers)
    buf = bytearray(builder.build() * 2)
    assert native.stamp(buf, 500, 2, T0 + 9) == 510
    for impl in PYLOG.values():
        assert [r.offset for r in impl.iter_records(buf)] == list(range(500, 510))
        assert {r.timestamp for r in impl.iter_records(buf)} == {T0 + 9}


# -- pylog -> theirs -------------------------------------------------------------

def pylog_batch(impl, codec: int, recs: list[tuple], **kw) -> bytes:
    b = impl.BatchBuilder(compression=codec, **kw)
    for offset, ts, key, value, headers in recs:
        b.append(ts, key, value, headers, offset_delta=offset)
    return b.build()


@pytest.mark.parametrize("codec", list(CODECS.values()), ids=list(CODECS))
@pytest.mark.parametrize("lib", list(READERS))
@pytest.mark.parametrize("ours", list(PYLOG))
def test_theirs_read_pylog(ours, lib, codec):
    skip_unsupported(lib, codec)
    recs = sample_records()
    buf = pylog_batch(PYLOG[ours], codec, recs, producer_id=7, producer_epoch=1,
                      base_sequence=0)
    batch = READERS[lib](buf)
    assert batch.validate_crc()
    assert batch.compression_type == codec
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (7, 1, 0)
    assert batch.last_offset_delta == len(recs) - 1
    assert their_rows(batch) == recs


@pytest.mark.parametrize("lib", ["kafka-python", "aiokafka"])
def test_theirs_read_stamped_log(lib):
    """Several stamped batches (offsets, leader epoch, LogAppendTime) as a
    consumer would fetch them from the log."""
    parts = [pylog_batch(native, 0, sample_records(5)),
             pylog_batch(pyrecords, 1, sample_records(8)),
             pylog_batch(native, 0, sample_records(3))]
    buf = bytearray(b"".join(parts))
    assert native.stamp(buf, 1000, 6, log_append_time=T0 + 123) == 1016
    memory = (kafka_memory if lib == "kafka-python" else aio_memory).MemoryRecords(bytes(buf))
    offsets, stamps = [], set()
    while memory.has_next():
        batch = memory.next_batch()
        assert batch.validate_crc()
        assert batch.timestamp_type == 1
        for r in batch:
            offsets.append(r.offset)
            stamps.add(r.timestamp)
    assert offsets == list(range(1000, 1016))
    assert stamps == {T0 + 123}


@pytest.mark.parametrize("lib", list(READERS))
def test_theirs_read_control_batch(lib):
    buf = native.build_batch([(T0, b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x07")],
                             producer_id=9, producer_epoch=0, is_transactional=True,
                             is_control=True)
    batch = READERS[lib](buf)
    assert batch.validate_crc()
    assert batch.is_control_batch and batch.is_transactional
