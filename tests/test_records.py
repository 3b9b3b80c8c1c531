"""Record batch codec: both implementations on the shared vectors, stamping,
every failed check, and a mutation fuzz."""

from __future__ import annotations

import mmap
import random
import struct

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from record_vectors import T0, VECTOR_IDS, VECTORS

from pylog.errors import CodecError, CorruptBatchError
from pylog.records import compression, pyrecords

native = pytest.importorskip("pylog._native.records")

IMPLS = {"native": native, "python": pyrecords}


@pytest.fixture(params=list(IMPLS))
def impl(request):
    return IMPLS[request.param]


def rows(records) -> list[tuple]:
    return [r.as_tuple() for r in records]


def recrc(buf: bytearray, pos: int = 0) -> None:
    """Recompute the CRC of the batch at ``pos`` (after a deliberate edit)."""
    size = struct.unpack_from(">i", buf, pos + 8)[0] + 12
    struct.pack_into(">I", buf, pos + 17, pyrecords.crc32c(bytes(buf[pos + 21:pos + size])))


def small_batch(impl=pyrecords, **kw) -> bytes:
    return impl.build_batch([(T0, b"key", b"value", [("h", b"v")]),
                             (T0 + 1, None, b"v2")], **kw)


# -- vectors -------------------------------------------------------------------

@pytest.mark.parametrize("vec", VECTORS, ids=VECTOR_IDS)
def test_build_validate_read(vec, impl):
    buf = vec.build(impl)
    infos = impl.validate(buf, strict=vec.strict)
    assert len(infos) == len(vec.batches)
    pos = 0
    for info, spec in zip(infos, vec.batches, strict=True):
        kw = spec.kwargs
        assert info.position == pos
        pos += info.size
        assert info.magic == 2
        assert info.record_count == len(spec.records)
        assert info.base_offset == kw.get("base_offset", 0)
        assert info.partition_leader_epoch == kw.get("partition_leader_epoch", -1)
        assert info.compression == kw.get("compression", 0)
        assert info.timestamp_type == kw.get("timestamp_type", 0)
        assert info.is_transactional == kw.get("is_transactional", False)
        assert info.is_control == kw.get("is_control", False)
        assert info.producer_id == kw.get("producer_id", -1)
        assert info.producer_epoch == kw.get("producer_epoch", -1)
        assert info.base_sequence == kw.get("base_sequence", -1)
        assert info.first_timestamp == spec.records[0][0]
        assert info.max_timestamp == max(r[0] for r in spec.records)
        assert info.last_offset == info.base_offset + info.last_offset_delta
    assert pos == len(buf)
    assert rows(impl.iter_records(buf)) == vec.expected()
    assert rows(impl.iter_records(memoryview(bytearray(buf)))) == vec.expected()


@pytest.mark.parametrize("vec", VECTORS, ids=VECTOR_IDS)
def test_native_and_pure_agree(vec):
    a, b = vec.build(native), vec.build(pyrecords)
    if not vec.compressed:
        assert a == b
    # Each reads the other's bytes to the same records and batch facts.
    for buf in (a, b):
        assert rows(native.iter_records(buf)) == rows(pyrecords.iter_records(buf))
        assert ([i.as_dict() for i in native.validate(buf, strict=vec.strict)]
                == [i.as_dict() for i in pyrecords.validate(buf, strict=vec.strict)])
        assert (native.validate_summary(buf, strict=vec.strict)
                == pyrecords.validate_summary(buf, strict=vec.strict))


def test_strict_rejects_compacted_batch(impl):
    vec = next(v for v in VECTORS if v.name == "compacted-gaps")
    with pytest.raises(CorruptBatchError) as e:
        impl.validate(vec.build(impl))
    assert e.value.check == "record_count"
    assert "lastOffsetDelta 9 does not match records count 3" in str(e.value)


def test_empty_buffer(impl):
    assert impl.validate(b"") == []
    assert list(impl.read_batches(b"")) == []
    assert impl.validate_summary(b"") == (0, 0, 0, -1)
    assert impl.stamp(bytearray(), 5) == 5


def test_buffer_kinds(impl):
    buf = small_batch(impl)
    with mmap.mmap(-1, len(buf)) as m:
        m[:] = buf
        for obj in (buf, bytearray(buf), memoryview(buf), m):
            assert impl.validate(obj)[0].record_count == 2
        assert impl.stamp(m, 9) == 11
        assert impl.validate(m)[0].base_offset == 9


def test_record_objects(impl):
    (rec, rec2) = impl.iter_records(small_batch(impl))
    assert (rec.offset, rec.timestamp, rec.key, rec.value, rec.headers) == (
        0, T0, b"key", b"value", [("h", b"v")])
    assert rec2.headers == [] and rec2.key is None
    assert rec != rec2 and rec == rec
    assert "Record(" in repr(rec)


def test_summary(impl):
    buf = b"".join(small_batch(impl, base_offset=i) for i in range(3))
    assert impl.validate_summary(buf) == (3, 6, 6, T0 + 1)


# -- builder -------------------------------------------------------------------

def test_builder_errors(impl):
    with pytest.raises(ValueError):
        impl.BatchBuilder().build()
    with pytest.raises(ValueError):
        impl.BatchBuilder(compression=5)
    with pytest.raises(ValueError):
        impl.BatchBuilder(timestamp_type=2)
    b = impl.BatchBuilder()
    b.append(T0, b"a", b"b", offset_delta=3)
    with pytest.raises(ValueError):
        b.append(T0, b"a", b"b", offset_delta=3)
    with pytest.raises(TypeError):
        b.append(T0, "str key", b"b")
    assert len(b) == 1


def test_builder_accepts_bytes_like(impl):
    buf = impl.build_batch([(T0, bytearray(b"k"), memoryview(b"v"), [(b"raw", b"x")])])
    assert rows(impl.iter_records(buf)) == [(0, T0, b"k", b"v", [("raw", b"x")])]


# -- stamp ---------------------------------------------------------------------

def test_stamp_offsets_and_epoch(impl):
    parts = [small_batch(impl), impl.build_batch([(T0, b"x", b"y")] * 5),
             small_batch(impl, compression=3)]
    buf = bytearray(b"".join(parts))
    before = impl.validate(buf)
    assert impl.stamp(buf, 1000, partition_leader_epoch=4) == 1000 + 2 + 5 + 2
    after = impl.validate(buf)  # CRC untouched: neither field is covered
    assert [i.base_offset for i in after] == [1000, 1002, 1007]
    assert [i.partition_leader_epoch for i in after] == [4, 4, 4]
    assert [i.crc for i in after] == [i.crc for i in before]
    assert [i.timestamp_type for i in after] == [0, 0, 0]
    assert [r.offset for r in impl.iter_records(buf)] == list(range(1000, 1009))


def test_stamp_log_append_time(impl):
    buf = bytearray(small_batch(impl) + small_batch(impl, compression=1))
    assert impl.stamp(buf, 0, log_append_time=T0 + 5000) == 4
    infos = impl.validate(buf)  # CRC recomputed
    assert all(i.timestamp_type == 1 and i.max_timestamp == T0 + 5000 for i in infos)
    assert [r.timestamp for r in impl.iter_records(buf)] == [T0 + 5000] * 4
    assert infos[0].first_timestamp == T0


def test_stamp_read_only(impl):
    buf = small_batch(impl)
    for obj in (buf, memoryview(buf)):
        with pytest.raises(TypeError, match="writable"):
            impl.stamp(obj, 0)


def test_stamp_same_bytes_both_impls():
    buf = b"".join([small_batch(), small_batch(compression=2)])
    a, b = bytearray(buf), bytearray(buf)
    assert native.stamp(a, 77, 3, T0) == pyrecords.stamp(b, 77, 3, T0)
    assert a == b


def test_stamp_bounds(impl):
    buf = bytearray(small_batch(impl))
    with pytest.raises(CorruptBatchError) as e:
        impl.stamp(buf[:-1], 0)
    assert e.value.check == "truncated"


# -- every failed check --------------------------------------------------------

def check_of(impl, buf, strict: bool = True) -> CorruptBatchError:
    """The error of validate(), checked to be the one reading raises too."""
    with pytest.raises(CorruptBatchError) as e:
        impl.validate(buf, strict=strict)
    with pytest.raises(CorruptBatchError) as e2:
        list(impl.iter_records(buf, strict=strict))
    assert e2.value.check == e.value.check
    return e.value


def test_truncated_at_every_cut(impl):
    buf = small_batch(impl)
    for cut in range(1, len(buf)):
        err = check_of(impl, buf[:cut])
        assert (err.batch_index, err.position, err.check) == (0, 0, "truncated"), cut


def test_crc_bit_flips(impl):
    buf = small_batch(impl)
    for byte in range(21, len(buf)):
        for bit in (0, 3, 7):
            bad = bytearray(buf)
            bad[byte] ^= 1 << bit
            err = check_of(impl, bytes(bad))
            assert err.check == "crc", (byte, bit)
            assert "CRC32C mismatch" in str(err)
    bad = bytearray(buf)
    bad[17] ^= 0x10  # the stored CRC itself
    assert check_of(impl, bytes(bad)).check == "crc"


def test_bits_outside_crc_do_not_matter(impl):
    bad = bytearray(small_batch(impl))
    bad[0:8] = b"\x11" * 8  # base offset
    bad[12:16] = b"\x22" * 4  # leader epoch
    assert impl.validate(bytes(bad))[0].partition_leader_epoch == 0x22222222


def test_wrong_magic(impl):
    for magic in (0, 1, 3, -1):
        bad = bytearray(small_batch(impl))
        bad[16] = magic & 0xFF
        err = check_of(impl, bytes(bad))
        assert err.check == "magic" and f"magic {magic}, expected 2" in str(err)


def test_batch_length(impl):
    buf = small_batch(impl)
    for length in (0, 48, -1, -(2**31)):
        bad = bytearray(buf)
        struct.pack_into(">i", bad, 8, length)
        assert check_of(impl, bytes(bad)).check == "size"
    for extra in (1, 1000, 2**31 - 1 - len(buf)):
        bad = bytearray(buf)
        struct.pack_into(">i", bad, 8, len(buf) - 12 + extra)
        err = check_of(impl, bytes(bad))
        assert err.check == "truncated"
    # One byte short: the batch ends early and the leftover is a partial batch.
    bad = bytearray(buf)
    struct.pack_into(">i", bad, 8, len(buf) - 13)
    assert check_of(impl, bytes(bad)).check in ("crc", "records")


def test_record_count_mismatch(impl):
    buf = bytearray(impl.build_batch([(T0, b"a", b"b")] * 3))
    struct.pack_into(">i", buf, 23, 5)  # lastOffsetDelta 5 with 3 records
    recrc(buf)
    err = check_of(impl, bytes(buf))
    assert err.check == "record_count"
    assert "lastOffsetDelta 5 does not match records count 3" in str(err)
    # Not strict: gaps are allowed, fewer offsets than records are not.
    assert impl.validate(bytes(buf), strict=False)[0].last_offset == 5
    struct.pack_into(">i", buf, 23, 1)
    recrc(buf)
    assert check_of(impl, bytes(buf), strict=False).check == "record_count"


def test_records_walk(impl):
    buf = bytearray(impl.build_batch([(T0, b"a", b"b")] * 3))
    # Count says 2 with lastOffsetDelta 1: header checks pass, the walk does not.
    struct.pack_into(">i", buf, 57, 2)
    struct.pack_into(">i", buf, 23, 1)
    recrc(buf)
    err = check_of(impl, bytes(buf))
    assert err.check == "records" and "left over" in str(err)
    # Count says 4: the walk runs off the end.
    struct.pack_into(">i", buf, 57, 4)
    struct.pack_into(">i", buf, 23, 3)
    recrc(buf)
    assert check_of(impl, bytes(buf)).check == "records"


def test_negative_count_and_codec(impl):
    buf = bytearray(small_batch(impl))
    struct.pack_into(">i", buf, 57, -1)
    recrc(buf)
    assert check_of(impl, bytes(buf)).check == "record_count"
    buf = bytearray(small_batch(impl))
    buf[22] |= 0x07  # codec 7
    recrc(buf)
    err = check_of(impl, bytes(buf))
    assert err.check == "compression" and "codec 7" in str(err)


def test_empty_batch(impl):
    buf = bytearray(impl.build_batch([(T0, b"a", b"b")]))
    del buf[61:]
    struct.pack_into(">i", buf, 8, 49)
    struct.pack_into(">i", buf, 57, 0)
    recrc(buf)
    assert check_of(impl, bytes(buf)).check == "record_count"  # strict: Kafka rejects
    (info,) = impl.validate(bytes(buf), strict=False)  # the cleaner may leave these
    assert info.record_count == 0 and list(impl.iter_records(bytes(buf))) == []


def test_control_batch_count(impl):
    buf = impl.build_batch([(T0, b"\0\0\0\1", b"\0\0\0\0\0\7")] * 2, is_control=True,
                           is_transactional=True)
    assert check_of(impl, buf).check == "control"
    assert check_of(impl, buf, strict=False).check == "control"


def test_third_of_three_batches(impl):
    one = small_batch(impl)
    bad = bytearray(one)
    bad[-1] ^= 0xFF
    buf = one + one + bytes(bad)
    err = check_of(impl, buf)
    assert (err.batch_index, err.position, err.check) == (2, 2 * len(one), "crc")
    assert str(err).startswith(f"batch 2 at byte {2 * len(one)}: CRC32C mismatch: stored 0x")
    # Trailing partial batch after two good ones.
    err = check_of(impl, one + one + one[:30])
    assert (err.batch_index, err.position, err.check) == (2, 2 * len(one), "truncated")


def test_bad_compressed_payload(impl):
    buf = bytearray(impl.build_batch([(T0, b"a", b"b" * 100)], compression=4))
    buf[70:80] = b"\xff" * 10
    recrc(buf)
    assert len(impl.validate(bytes(buf))) == 1  # validate does not decompress
    with pytest.raises(CorruptBatchError) as e:
        list(impl.iter_records(bytes(buf)))
    assert e.value.check == "compression"


def test_bad_header_key_utf8(impl):
    buf = bytearray(impl.build_batch([(T0, b"a", b"b", [("ab", b"")])]))
    i = buf.index(b"ab")
    buf[i] = 0xFF
    recrc(buf)
    with pytest.raises(CorruptBatchError, match="UTF-8"):
        list(impl.iter_records(bytes(buf)))


# -- fuzz ----------------------------------------------------------------------

def _mutate(rnd: random.Random, buf: bytes) -> bytes:
    b = bytearray(buf)
    for _ in range(rnd.randint(1, 4)):
        op = rnd.random()
        if op < 0.6 and len(b) > 21:
            b[rnd.randrange(21, len(b))] = rnd.randrange(256)
        elif op < 0.8 and len(b) > 1:
            del b[rnd.randrange(1, len(b)):]
        else:
            i = rnd.randrange(len(b) + 1)
            b[i:i] = rnd.randbytes(rnd.randint(1, 8))
    if len(b) >= 61 and rnd.random() < 0.9:  # keep the CRC right: reach the deep checks
        size = min(len(b), max(61, struct.unpack_from(">i", b, 8)[0] + 12))
        if rnd.random() < 0.5:
            struct.pack_into(">i", b, 8, len(b) - 12)
            size = len(b)
        struct.pack_into(">I", b, 17, pyrecords.crc32c(bytes(b[21:size])))
    return bytes(b)


def _outcome(impl, buf: bytes):
    try:
        infos = impl.validate(buf, strict=False)
        return "ok", [i.as_dict() for i in infos], rows(impl.iter_records(buf))
    except CorruptBatchError as exc:
        return "corrupt", exc.check, exc.batch_index, exc.position
    except CodecError as exc:  # pragma: no cover - both must report batch errors
        return "codec", str(exc)


def test_fuzz_mutations():
    rnd = random.Random(1234)
    seeds = [small_batch(), pyrecords.build_batch(
        [(T0 + i, b"k" * i, b"v" * (i * 7), [("h", None)] * (i % 3)) for i in range(12)]),
        small_batch(compression=1), small_batch(compression=2), small_batch(compression=3),
        small_batch(compression=4), small_batch() + small_batch()]
    outcomes = {"ok": 0, "corrupt": 0}
    for _ in range(2500):
        buf = _mutate(rnd, rnd.choice(seeds))
        a, b = _outcome(native, buf), _outcome(pyrecords, buf)
        assert a == b, buf.hex()
        outcomes[a[0]] += 1
    assert outcomes["ok"] > 50 and outcomes["corrupt"] > 500, outcomes


# -- compressed payloads other writers produce --------------------------------

def with_payload(records_section_codec: int, payload: bytes, count: int) -> bytes:
    """A batch around an already compressed records section."""
    hdr = bytearray(pyrecords.build_batch([(T0 + i, b"k", b"v") for i in range(count)])[:61])
    struct.pack_into(">i", hdr, 8, 49 + len(payload))
    struct.pack_into(">h", hdr, 21, records_section_codec)
    buf = hdr + payload
    recrc(buf)
    return bytes(buf)


def records_section(count: int) -> bytes:
    return pyrecords.build_batch([(T0 + i, b"k", b"v") for i in range(count)])[61:]


@pytest.mark.parametrize("codec,encode", [
    (2, lambda d: bytes(cramjam.snappy.compress_raw(d))),  # raw snappy (no xerial frame)
    (2, lambda d: bytes(cramjam.snappy.compress(d))),  # snappy framing format: refused
    (3, lambda d: bytes(cramjam.lz4.compress(d))),  # linked blocks, checksums
    (4, lambda d: _zstd_stream(d)),  # no content size in the frame, like zstd-jni
    (4, lambda d: bytes(cramjam.zstd.compress(d[:20])) + bytes(cramjam.zstd.compress(d[20:]))),
    (1, lambda d: bytes(cramjam.gzip.compress(d[:20])) + bytes(cramjam.gzip.compress(d[20:]))),
], ids=["snappy-raw", "snappy-stream-format", "lz4-linked", "zstd-stream", "zstd-2-frames",
        "gzip-2-members"])
def test_foreign_compressed_payloads(impl, codec, encode):
    data = records_section(5)
    buf = with_payload(codec, encode(data), 5)
    if encode(data)[:4] == b"\xff\x06\x00\x00":
        # cramjam.snappy.compress writes the snappy *framing* format, which no
        # Kafka client writes: it must fail cleanly, as a corrupt batch.
        with pytest.raises(CorruptBatchError) as e:
            list(impl.iter_records(buf))
        assert e.value.check == "compression"
        return
    assert [r.timestamp for r in impl.iter_records(buf)] == [T0 + i for i in range(5)]


def _zstd_stream(data: bytes) -> bytes:
    c = cramjam.zstd.Compressor()
    c.compress(data)
    return bytes(c.finish())


@given(st.binary(max_size=300))
@settings(max_examples=300, deadline=None)
def test_fuzz_random_bytes(data):
    a, b = _outcome(native, data), _outcome(pyrecords, data)
    assert a == b


# -- deep validation: the records inside compressed batches (produce path) ----

def _section(records: list[tuple]) -> bytes:
    return pyrecords.build_batch(records)[61:]


def _rec(delta: int, key=b"k", value=b"v", headers=b"\x00") -> bytes:
    """One record's bytes, fields spelled out, so that each can be broken."""
    body = (b"\x00" + pyrecords._varlong(0) + pyrecords._varint(delta)
            + pyrecords._varint(len(key)) + key + pyrecords._varint(len(value)) + value
            + headers)
    return pyrecords._varint(len(body)) + body


CODEC_IDS = {1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


@pytest.mark.parametrize("codec", list(CODEC_IDS), ids=list(CODEC_IDS.values()))
def test_deep_accepts_what_builders_write(impl, codec):
    recs = [(T0 + i, b"k%d" % i, b"v" * i, [("h", b"x")] * (i % 3)) for i in range(200)]
    buf = impl.build_batch(recs, compression=codec)
    assert impl.validate_summary(buf, deep=True) == impl.validate_summary(buf)
    data = records_section(5)
    two_members = bytes(cramjam.gzip.compress(data[:20])) + bytes(cramjam.gzip.compress(data[20:]))
    for payload in (bytes(cramjam.lz4.compress(data)), _zstd_stream(data), two_members,
                    bytes(cramjam.snappy.compress_raw(data))):
        codec_of = {b"\x04\x22": 3, b"\x28\xb5": 4, b"\x1f\x8b": 1}.get(payload[:2], 2)
        assert impl.validate_summary(with_payload(codec_of, payload, 5), deep=True)[1] == 5


@pytest.mark.parametrize("codec", list(CODEC_IDS), ids=list(CODEC_IDS.values()))
def test_deep_refuses_payload_that_does_not_decompress(impl, codec):
    good = compression.compress(codec, records_section(5))
    for payload in (good[:-7], b"\x00" * 40, good[:12] + bytes(b ^ 0x5A for b in good[12:])):
        buf = with_payload(codec, payload, 5)
        impl.validate(buf)  # the CRC is right: only deep sees it
        err = deep_error(impl, buf)
        assert err.check in ("decompress", "records"), (payload, err)
        assert err.batch_index == 0 and str(err).startswith("batch 0 at byte 0: ")


def deep_error(impl, buf: bytes) -> CorruptBatchError:
    with pytest.raises(CorruptBatchError) as e:
        impl.validate(buf, deep=True)
    with pytest.raises(CorruptBatchError) as e2:
        impl.validate_summary(buf, deep=True)
    assert str(e2.value) == str(e.value)
    return e.value


@pytest.mark.parametrize("section,count,message", [
    (_section([(T0, b"k", b"v")] * 3), 4,
     "record 3 (byte 27 of the records): bad or overrunning length"),
    (_section([(T0, b"k", b"v")] * 3), 2,
     "record 2 (byte 18 of the records): 9 bytes left over after the last record"),
    (_rec(0) + _rec(2), 2, "record 1 (byte 9 of the records): offsetDelta 2, expected 1"),
    (_rec(0) + _rec(1)[:-1] + b"\x05", 2, "record 1 (byte 9 of the records): bad headers count"),
    (_rec(0, key=b"k" * 5)[:4] + b"\x3e" + _rec(0, key=b"k" * 5)[5:], 1,
     "record 0 (byte 0 of the records): bad key or value length"),
    (_rec(0, headers=b"\x02\x01\x00"), 1,
     "record 0 (byte 0 of the records): bad (or null) header key length"),
    (_rec(0, headers=b"\x02\x02h\x0a\x02h\x02"), 1,
     "record 0 (byte 0 of the records): bad header value length"),
    (b"\x00", 1, "record 0 (byte 0 of the records): empty record"),
    (b"\x10\x00\x00\x00\x01\x01\x00\x00\x00", 1,
     "record 0 (byte 0 of the records): fields end 2 bytes before the record's length"),
    (b"\x02\x00\xff", 1, "record 0 (byte 0 of the records): bad timestampDelta"),
    (b"\x04\x00\x00", 1, "record 0 (byte 0 of the records): bad offsetDelta"),
], ids=["count-too-big", "left-over", "delta-gap", "headers-count", "key-overruns",
        "null-header-key", "header-value-overruns", "empty", "short-fields", "timestamp",
        "offset-delta"])
@pytest.mark.parametrize("codec", [0, *CODEC_IDS], ids=["none", *CODEC_IDS.values()])
def test_deep_record_walk(impl, codec, section, count, message):
    """Every field of every record, in compressed batches (deep) and, on the
    produce path (strict), in uncompressed ones."""
    buf = with_payload(codec, compression.compress(codec, section) if codec else section, count)
    if codec == 0 and "offsetDelta 2, expected 1" in message:
        # Kafka takes an uncompressed batch's deltas as they are (and rebuilds
        # a compressed one, which pylog refuses instead).
        assert impl.validate_summary(buf, deep=True)[1] == count
        return
    err = deep_error(impl, buf)
    assert (err.check, str(err)) == ("records", f"batch 0 at byte 0: {message}")
    if codec == 0:
        assert str(check_of(impl, buf)) == str(err)  # strict alone walks them


def test_deep_names_the_batch(impl):
    good = small_batch(impl, compression=4)
    bad = with_payload(4, compression.compress(4, records_section(2)), 3)
    err = deep_error(impl, good + bad)
    assert (err.batch_index, err.position, err.check) == (1, len(good), "records")


def _zstd_rle_frame(blocks: int, block: int = 128 * 1024) -> bytes:
    """A zstd frame of RLE blocks: 4 bytes each that claim ``block`` bytes."""
    out = bytearray(struct.pack("<I", 0xFD2FB528) + b"\x00\x38")  # no size; 128 KiB window
    for i in range(blocks):
        out += (int(i == blocks - 1) | 1 << 1 | block << 3).to_bytes(3, "little") + b"\x00"
    return bytes(out)


def test_decompression_is_bounded():
    """A few kilobytes that inflate past the limit are refused without the
    limit's worth of memory being promised to them."""
    bomb = _zstd_rle_frame(8)  # 1 MiB of zeros from 38 bytes
    assert compression.inflated_bound(4, bomb) == 1 << 20
    assert len(compression.decompress_bounded(4, bomb)) == 1 << 20
    with pytest.raises(CodecError, match="does not decompress within 1000000 bytes"):
        compression.decompress_bounded(4, bomb, limit=1_000_000)
    for codec in (1, 2):  # exact sizes: refused before decompressing
        big = compression.compress(codec, bytes(2 << 20))
        with pytest.raises(CodecError, match="within 1000000 bytes"):
            compression.decompress_bounded(codec, big, limit=1_000_000)
    lz4 = compression.compress(3, bytes(3 << 20))
    assert compression.inflated_bound(3, lz4) >= 3 << 20
    with pytest.raises(CodecError, match="within 1000000 bytes"):
        compression.decompress_bounded(3, lz4, limit=1_000_000)


def test_deep_refuses_a_zstd_bomb(impl):
    blocks = compression.INFLATE_LIMIT // (128 * 1024) + 1
    buf = with_payload(4, _zstd_rle_frame(blocks), 1)
    assert len(buf) < 10_000
    err = deep_error(impl, buf)
    assert err.check == "decompress" and "does not decompress within" in str(err)


def _deep_outcome(impl, buf: bytes):
    try:
        return "ok", impl.validate_summary(buf, strict=True, deep=True)
    except CorruptBatchError as exc:
        return "corrupt", exc.check, str(exc)


def test_fuzz_deep_both_impls_agree():
    """Mutations inside records sections, compressed or not (the CRC fixed
    up, so that only the record walk can tell), reported the same by both
    twins."""
    rnd = random.Random(99)
    sections = [records_section(n) for n in (1, 3, 12)]
    outcomes = {"ok": 0, "corrupt": 0}
    for _ in range(600):
        section = bytearray(rnd.choice(sections))
        count = section.count(b"\x02k\x02v")  # one key "k", value "v" per record
        for _ in range(rnd.randint(0, 3)):
            i = rnd.randrange(len(section))
            section[i] = rnd.randrange(256) if rnd.random() < 0.7 else section[i] ^ 1
        codec = rnd.choice([0, *CODEC_IDS])  # none: the strict walk alone
        payload = compression.compress(codec, bytes(section)) if codec else bytes(section)
        if codec and rnd.random() < 0.2:  # damage the compressed bytes themselves
            i = rnd.randrange(len(payload))
            payload = payload[:i] + bytes([payload[i] ^ 0x40]) + payload[i + 1:]
        buf = with_payload(codec, payload, max(1, count + rnd.choice((0, 0, 0, 1, -1))))
        a, b = _deep_outcome(native, buf), _deep_outcome(pyrecords, buf)
        assert a == b, buf.hex()
        outcomes[a[0]] += 1
    assert outcomes["ok"] > 50 and outcomes["corrupt"] > 200, outcomes


def test_fuzz_strict_walk_every_record_shape():
    """The native walk takes records whose fields are all one- or two-byte
    varints by a shortcut and walks every other record (and every broken
    one) field by field; the pure twin has no shortcut.  Both must agree on
    what passes, on its largest timestamp, and on the error and its byte
    position, across records on each side of that line: two-byte lengths
    and offset deltas, null keys, empty records too short for the shortcut,
    headers, and three-byte timestamp deltas and value lengths."""
    rnd = random.Random(2026)
    shapes = [
        [(T0 + i, b"k%d" % i, b"v" * 70) for i in range(70)],
        [(T0 + i % 3, None, b"") for i in range(6)],
        [(T0 + i, b"k", b"x", [("h", b"y"), ("h2", None)]) for i in range(4)],
        [(T0 + 9000 * i, b"k", b"v") for i in range(3)],
        [(T0, b"k", b"v" * 9000), (T0 + 1, None, b"v"), (-1, b"", b"v" * 100)],
    ]
    sections = [(pyrecords.build_batch(recs)[61:], len(recs)) for recs in shapes]
    outcomes = {"ok": 0, "corrupt": 0}
    for _ in range(1500):
        clean, count = rnd.choice(sections)
        section = bytearray(clean)
        for _ in range(rnd.randint(0, 3)):
            # Half the hits in the first bytes of the section, where the varints are
            # dense (most bytes of a long record are its value).
            i = rnd.randrange(min(len(section), 24) if rnd.random() < 0.5 else len(section))
            section[i] = rnd.randrange(256) if rnd.random() < 0.6 else section[i] ^ 1
        buf = with_payload(0, bytes(section), max(1, count + rnd.choice((0, 0, 0, 0, 1, -1))))
        rules = {"timestamps": rnd.choice((None, (T0, T0 + 20_000), (T0 + 1, T0 + 50))),
                 "keys": rnd.random() < 0.3}

        def outcome(impl, buf=buf, rules=rules):
            try:
                return "ok", impl.validate_summary(buf, strict=True, **rules)
            except CorruptBatchError as exc:
                return "corrupt", exc.check, str(exc)

        a, b = outcome(native), outcome(pyrecords)
        assert a == b, (buf.hex(), rules)
        outcomes[a[0]] += 1
    assert outcomes["ok"] > 200 and outcomes["corrupt"] > 500, outcomes


# -- record timestamps (message.timestamp.before/after.max.ms) ----------------

@pytest.mark.parametrize("codec", [0, *CODEC_IDS], ids=["none", *CODEC_IDS.values()])
def test_timestamp_limits(impl, codec):
    recs = [(T0, b"k", b"v"), (T0 + 5, b"k", b"v"), (T0 + 10, b"k", b"v")]
    buf = impl.build_batch(recs, compression=codec)
    assert impl.validate_summary(buf, deep=True, timestamps=(T0, T0 + 10))[1] == 3
    for limits, k, ts in (((T0 + 1, T0 + 10), 0, T0), ((T0, T0 + 9), 2, T0 + 10),
                          ((T0 + 6, T0 + 7), 0, T0)):
        with pytest.raises(CorruptBatchError) as e:
            impl.validate_summary(buf, deep=True, timestamps=limits)
        assert e.value.check == "timestamp"
        assert str(e.value).startswith(f"batch 0 at byte 0: record {k} (byte ")
        assert str(e.value).endswith(f"timestamp {ts} is out of range: it should be "
                                     f"within [{limits[0]}, {limits[1]}]")
    # Without limits, or not strict, or compressed and not deep: no check.
    assert impl.validate_summary(buf, strict=False, timestamps=(0, 1))[1] == 3
    if codec:
        assert impl.validate_summary(buf, timestamps=(0, 1))[1] == 3


def test_timestamp_none_is_not_checked(impl):
    """-1 is "no timestamp" (old clients): Kafka checks only real ones."""
    buf = impl.build_batch([(-1, b"k", b"v")])
    assert impl.validate_summary(buf, timestamps=(T0, T0))[1] == 1


def test_timestamp_limits_twins_agree_on_wrapping():
    buf = bytearray(pyrecords.build_batch([(T0, b"k", b"v")]))
    struct.pack_into(">q", buf, 27, (1 << 63) - 1)  # firstTimestamp at the top: +delta wraps
    i = 61 + 2  # record length, attributes, then timestampDelta (0: one byte)
    buf[i:i + 1] = pyrecords._varlong(5)  # one byte too
    recrc(buf)
    for impl in IMPLS.values():
        with pytest.raises(CorruptBatchError) as e:
            impl.validate_summary(bytes(buf), timestamps=(0, 1 << 62))
        assert e.value.check == "timestamp" and "timestamp -9223372036854775804" in str(e.value)


@pytest.mark.parametrize("codec", [0, *CODEC_IDS], ids=["none", *CODEC_IDS.values()])
def test_keys_required(impl, codec):
    """cleanup.policy=compact (Kafka's LogValidator.validateKey): every record
    needs a key; checked only when asked."""
    recs = [(T0, b"k", b"v"), (T0 + 1, b"k", b"v"), (T0 + 2, None, b"v")]
    buf = impl.build_batch(recs, compression=codec)
    assert impl.validate_summary(buf, deep=True)[1] == 3
    assert impl.validate_summary(impl.build_batch(recs[:2], compression=codec), deep=True,
                                 keys=True)[1] == 2
    with pytest.raises(CorruptBatchError) as e:
        impl.validate_summary(buf, deep=True, keys=True)
    assert e.value.check == "key"
    assert str(e.value) == ("batch 0 at byte 0: record 2 (byte 18 of the records): "
                            "Compacted topic cannot accept message without key")


@pytest.mark.parametrize("codec", [0, *CODEC_IDS], ids=["none", *CODEC_IDS.values()])
def test_fix_max_timestamp(impl, codec):
    """As Kafka's LogValidator: a CreateTime batch gets its records' largest
    timestamp as maxTimestamp (the CRC made right again) when the producer
    wrote another; a right one, a LogAppendTime batch or records not walked
    are left alone."""
    recs = [(T0 + 5, b"k", b"v"), (T0 + 30, b"k", b"v"), (T0 + 10, b"k", b"v")]
    good = bytearray(impl.build_batch(recs, compression=codec))
    for claimed in (T0, T0 + 99, -1):
        buf = bytearray(good)
        struct.pack_into(">q", buf, 35, claimed)
        recrc(buf)
        assert impl.validate_summary(buf, deep=True)[3] == claimed
        assert impl.validate_summary(buf, deep=True, fix_max_timestamp=True)[3] == T0 + 30
        assert bytes(buf) == bytes(good)
    same = bytearray(good)
    impl.validate_summary(same, deep=True, fix_max_timestamp=True)
    assert same == good
    appended = bytearray(impl.build_batch(recs, compression=codec, timestamp_type=1))
    struct.pack_into(">q", appended, 35, T0)
    recrc(appended)
    before = bytes(appended)
    assert impl.validate_summary(appended, deep=True, fix_max_timestamp=True)[3] == T0
    assert bytes(appended) == before
    if codec:  # not deep: the compressed records were not looked at
        buf = bytearray(good)
        struct.pack_into(">q", buf, 35, T0)
        recrc(buf)
        assert impl.validate_summary(buf, fix_max_timestamp=True)[3] == T0
    with pytest.raises(TypeError):
        impl.validate_summary(bytes(good), fix_max_timestamp=True)
