"""Pure-Python twin of the native record batch codec (``native/records.pyx``).

Same API, same checks, same error messages; written for reading, not speed.
It is the reference the native codec is tested against, and the fallback
where the extension is not built.  See the native module's docstring for the
``strict`` count rules.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, fields

from pylog.errors import CodecError, CorruptBatchError
from pylog.records.compression import compress, decompress, decompress_bounded

try:
    from pylog._native.crc32c import crc32c as _crc32c
except ImportError:  # the twin must work without any extension built
    _crc32c = None

# baseOffset, batchLength | partitionLeaderEpoch, magic, crc | attributes,
# lastOffsetDelta, baseTimestamp, maxTimestamp, producerId, producerEpoch,
# baseSequence, records count.
_HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: size = batchLength + 12
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD
OFF_LEADER_EPOCH = 12
OFF_MAGIC = 16
OFF_CRC = 17
OFF_ATTRIBUTES = 21
OFF_LAST_OFFSET_DELTA = 23
OFF_MAX_TIMESTAMP = 35
MIN_RECORD = 7

ATTR_COMPRESSION_MASK = 0x07
ATTR_TIMESTAMP_TYPE = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_DELETE_HORIZON = 0x40

CHECK_NAMES = ("ok", "truncated", "size", "magic", "crc", "compression",
               "record_count", "control", "records", "decompress", "timestamp", "key")

BATCH_FIELDS = (
    "base_offset", "last_offset_delta", "last_offset", "partition_leader_epoch", "magic",
    "crc", "attributes", "compression", "timestamp_type", "is_transactional", "is_control",
    "has_delete_horizon", "first_timestamp", "max_timestamp", "producer_id",
    "producer_epoch", "base_sequence", "record_count", "position", "size",
)


def _make_crc_table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC_TABLE = _make_crc_table()


def crc32c(data) -> int:
    """CRC-32C (Castagnoli) of ``data``."""
    if _crc32c is not None:
        return _crc32c(data)
    crc = 0xFFFFFFFF
    table = _CRC_TABLE
    for b in bytes(data):
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


# -- varints -------------------------------------------------------------------

class _BadVarint(Exception):
    """Internal: a varint that is truncated (``truncated``) or too long."""

    def __init__(self, truncated: bool) -> None:
        self.truncated = truncated


def _read_uvarint(buf, pos: int, end: int, max_bytes: int) -> tuple[int, int]:
    value = shift = 0
    for i in range(max_bytes):
        if pos + i >= end:
            raise _BadVarint(True)
        b = buf[pos + i]
        if i == max_bytes - 1 and b & (0xF0 if max_bytes == 5 else 0xFE):
            raise _BadVarint(False)  # continuation or bits beyond the width
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, pos + i + 1
    raise _BadVarint(False)


def _read_varint(buf, pos: int, end: int) -> tuple[int, int]:
    u, pos = _read_uvarint(buf, pos, end, 5)
    return (u >> 1) ^ -(u & 1), pos


def _read_varlong(buf, pos: int, end: int) -> tuple[int, int]:
    u, pos = _read_uvarint(buf, pos, end, 10)
    return (u >> 1) ^ -(u & 1), pos


def _uvarint(u: int) -> bytes:
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def _varint(v: int) -> bytes:
    return _uvarint(((v << 1) ^ (v >> 31)) & 0xFFFFFFFF)


def _varlong(v: int) -> bytes:
    return _uvarint(((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF)


# -- batch facts ---------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class BatchInfo:
    """The header facts of one batch, read-only."""

    base_offset: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    first_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int
    position: int
    size: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def compression(self) -> int:
        return self.attributes & ATTR_COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return 1 if self.attributes & ATTR_TIMESTAMP_TYPE else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & ATTR_DELETE_HORIZON)

    def as_dict(self) -> dict:
        return {name: getattr(self, name) for name in BATCH_FIELDS}


class _Failure(Exception):
    """Internal: a failed check and its message, before batch context is added."""

    def __init__(self, check: str, message: str) -> None:
        self.check = check
        self.message = message


def _scan_header(buf, n: int, pos: int) -> BatchInfo:
    """What is needed to trust the batch's extent: size, magic, bounds."""
    rem = n - pos
    if rem < LOG_OVERHEAD:
        raise _Failure("truncated", f"truncated: {rem} bytes left, a batch header needs "
                                    f"{HEADER_SIZE}")
    (blen,) = struct.unpack_from(">i", buf, pos + 8)
    if blen < MIN_BATCH_LENGTH:
        raise _Failure("size", f"batchLength {blen} is below the minimum of {MIN_BATCH_LENGTH}")
    if rem > OFF_MAGIC:
        magic = struct.unpack_from(">b", buf, pos + OFF_MAGIC)[0]
        if magic != 2:
            raise _Failure("magic", f"magic {magic}, expected 2")
    if blen + LOG_OVERHEAD > rem:
        raise _Failure("truncated", f"truncated: batchLength {blen} needs "
                                    f"{blen + LOG_OVERHEAD} bytes, {rem} left")
    (base, _, epoch, magic, crc, attrs, delta, base_ts, max_ts, pid, pepoch, seq,
     count) = _HEADER.unpack_from(buf, pos)
    return BatchInfo(base, epoch, magic, crc, attrs, delta, base_ts, max_ts, pid, pepoch,
                     seq, count, pos, blen + LOG_OVERHEAD)


def _check_fields(info: BatchInfo, strict: bool) -> None:
    """Header fields under the CRC: codec, count vs lastOffsetDelta, control."""
    attrs, count, delta = info.attributes, info.record_count, info.last_offset_delta
    if attrs & ATTR_COMPRESSION_MASK > 4:
        raise _Failure("compression", f"unknown compression codec {attrs & 7}")
    if count < 0:
        raise _Failure("record_count", f"negative records count {count}")
    if strict:
        if count == 0:
            raise _Failure("record_count",
                           f"empty batch (records count 0, lastOffsetDelta {delta})")
        if delta != count - 1:
            raise _Failure("record_count",
                           f"lastOffsetDelta {delta} does not match records count {count}")
    elif delta < count - 1 or delta < 0:
        raise _Failure("record_count",
                       f"lastOffsetDelta {delta} is too small for records count {count}")
    if attrs & ATTR_CONTROL and (count > 1 or (strict and count != 1)):
        raise _Failure("control", f"control batch holds {count} records, expected 1")


# What a topic asks of every record (see the native twin's ``rules``):
# (lowest timestamp, highest timestamp, keys required).
_NO_RULES = (-(1 << 63), (1 << 63) - 1, False)


def _check_body(buf, info: BatchInfo, strict: bool,
                rules: tuple[int, int, bool] = _NO_RULES) -> int | None:
    """CRC first (a corrupt byte is reported as such), then the fields it
    covers, then for uncompressed batches the walk over the records (every
    field when ``strict``, their lengths only otherwise).  The largest record
    timestamp when every field was walked, else None."""
    start, end = info.position, info.position + info.size
    computed = crc32c(memoryview(buf)[start + OFF_ATTRIBUTES:end])
    if computed != info.crc:
        raise _Failure("crc", f"CRC32C mismatch: stored 0x{info.crc:08x}, "
                              f"computed 0x{computed:08x}")
    _check_fields(info, strict)
    if info.compression:
        return None
    p = start + HEADER_SIZE
    if strict:
        return _walk_records(memoryview(buf)[p:end], info.record_count, info.first_timestamp,
                             False, rules)
    # The record lengths must tile the records section exactly.
    for i in range(info.record_count):
        try:
            length, q = _read_varint(buf, p, end)
        except _BadVarint as exc:
            what = "truncated" if exc.truncated else "too long"
            raise _Failure("records", f"record {i} at byte {p}: length varint is {what}") \
                from None
        if length < 0:
            raise _Failure("records", f"record {i} at byte {p}: negative length {length}")
        if length > end - q:
            raise _Failure("records", f"record {i} at byte {p}: length {length} overruns "
                                      f"the batch ({end - q} bytes left)")
        p = q + length
    if p != end:
        raise _Failure("records", f"{end - p} bytes left over after the "
                                  f"{info.record_count} records of the batch")
    return None


def _skip_bytes(data, p: int, rend: int, nullable: bool) -> int:
    length, p = _read_varint(data, p, rend)
    if length < (-1 if nullable else 0) or length > rend - p:
        raise _BadVarint(False)
    return p + max(length, 0)


def _walk_records(data, count: int, base_ts: int = 0, deltas: bool = True,
                  rules: tuple[int, int, bool] = _NO_RULES) -> int:
    """Every field of ``count`` records, as a consumer parses them, and the
    topic's ``rules``; returns the largest record timestamp (see the native
    twin's walk_records)."""
    lo, hi, keys = rules
    p, end = 0, len(data)
    max_ts = -1
    for k in range(count):
        rstart = p

        def fail(what: str, k: int = k, at: int = rstart):
            raise _Failure("records", f"record {k} (byte {at} of the records): {what}")

        try:
            length, p = _read_varint(data, p, end)
            if length < 0 or length > end - p:
                raise _BadVarint(False)
        except _BadVarint:
            fail("bad or overrunning length")
        rend = p + length
        if p >= rend:
            fail("empty record")
        p += 1  # attributes: unused
        try:
            ts_delta, p = _read_varlong(data, p, rend)
        except _BadVarint:
            fail("bad timestampDelta")
        ts = (base_ts + ts_delta + (1 << 63)) % (1 << 64) - (1 << 63)  # wraps, as in Java
        if not lo <= ts <= hi and ts != -1:
            raise _Failure("timestamp", f"record {k} (byte {rstart} of the records): "
                                        f"timestamp {ts} is out of range: it should be "
                                        f"within [{lo}, {hi}]")
        max_ts = max(max_ts, ts)
        try:
            delta, p = _read_varint(data, p, rend)
        except _BadVarint:
            fail("bad offsetDelta")
        if deltas and delta != k:
            fail(f"offsetDelta {delta}, expected {k}")
        if keys:
            try:
                if _read_varint(data, p, rend)[0] < 0:
                    raise _Failure("key", f"record {k} (byte {rstart} of the records): "
                                          "Compacted topic cannot accept message without key")
            except _BadVarint:
                pass  # reported just below
        try:
            p = _skip_bytes(data, _skip_bytes(data, p, rend, True), rend, True)
        except _BadVarint:
            fail("bad key or value length")
        try:
            hcount, p = _read_varint(data, p, rend)
            if hcount < 0 or hcount * 2 > rend - p:
                raise _BadVarint(False)
        except _BadVarint:
            fail("bad headers count")
        for _ in range(hcount):
            try:
                p = _skip_bytes(data, p, rend, False)
            except _BadVarint:
                fail("bad (or null) header key length")
            try:
                p = _skip_bytes(data, p, rend, True)
            except _BadVarint:
                fail("bad header value length")
        if p != rend:
            fail(f"fields end {rend - p} bytes before the record's length")
    if p != end:
        raise _Failure("records", f"record {count} (byte {p} of the records): "
                                  f"{end - p} bytes left over after the last record")
    return max_ts


def _check_compressed(buf, info: BatchInfo, rules: tuple[int, int, bool]) -> int:
    start = info.position + HEADER_SIZE
    try:
        inflated = decompress_bounded(info.compression,
                                      memoryview(buf)[start:info.position + info.size])
    except CodecError as exc:
        raise _Failure("decompress", str(exc)) from None
    with inflated:
        return _walk_records(inflated, info.record_count, info.first_timestamp, True, rules)


def _check(buf, n: int, pos: int, index: int, strict: bool, deep: bool = False,
           rules: tuple[int, int, bool] = _NO_RULES) -> tuple[BatchInfo, int | None]:
    """The batch's facts, and its largest record timestamp if its records
    were walked."""
    try:
        info = _scan_header(buf, n, pos)
        walked = _check_body(buf, info, strict, rules)
        if deep and info.compression:
            walked = _check_compressed(buf, info, rules)
    except _Failure as f:
        raise CorruptBatchError(f"batch {index} at byte {pos}: {f.message}",
                                batch_index=index, position=pos, check=f.check) from None
    return info, walked


def _view(buf) -> memoryview:
    return memoryview(buf).cast("B")


def _validate(buf, strict: bool, deep: bool, rules: tuple[int, int, bool] = _NO_RULES,
              fix_max_timestamp: bool = False) -> list[BatchInfo]:
    view = _view(buf)
    if fix_max_timestamp and view.readonly:
        raise TypeError("fix_max_timestamp needs a writable buffer")
    out, pos, n = [], 0, len(view)
    while pos < n:
        info, walked = _check(view, n, pos, len(out), strict, deep, rules)
        if (fix_max_timestamp and walked is not None and walked != info.max_timestamp
                and not info.attributes & ATTR_TIMESTAMP_TYPE):
            struct.pack_into(">q", view, pos + OFF_MAX_TIMESTAMP, walked)
            struct.pack_into(">I", view, pos + OFF_CRC,
                             crc32c(view[pos + OFF_ATTRIBUTES:pos + info.size]))
            info = _scan_header(view, n, pos)
        out.append(info)
        pos += info.size
    return out


def validate(buf, *, strict: bool = True, deep: bool = False) -> list[BatchInfo]:
    """Check every batch in ``buf``; return their facts (see the native twin)."""
    return _validate(buf, strict, deep)


def validate_summary(buf, *, strict: bool = True, deep: bool = False,
                     timestamps: tuple[int, int] | None = None, keys: bool = False,
                     fix_max_timestamp: bool = False) -> tuple[int, int, int, int]:
    """``(batch_count, record_count, offset_count, max_timestamp)``."""
    lo, hi = timestamps or _NO_RULES[:2]
    infos = _validate(buf, strict, deep, (lo, hi, keys), fix_max_timestamp)
    return (len(infos), sum(i.record_count for i in infos),
            sum(i.last_offset_delta + 1 for i in infos),
            max((i.max_timestamp for i in infos), default=-1))


# -- stamping in place ---------------------------------------------------------

def stamp(buf, base_offset: int, partition_leader_epoch: int = -1,
          log_append_time: int | None = None) -> int:
    """Assign offsets, the leader epoch and optionally LogAppendTime in place."""
    try:
        view = _view(buf)
    except TypeError:
        view = None
    if view is None or view.readonly:
        raise TypeError(f"stamp() needs a writable buffer (bytearray, writable memoryview "
                        f"or mmap), got read-only {type(buf).__name__}")
    pos, index, n = 0, 0, len(view)
    while pos < n:
        rem = n - pos
        try:
            if rem < HEADER_SIZE:
                raise _Failure("truncated", f"truncated: {rem} bytes left, a batch header "
                                            f"needs {HEADER_SIZE}")
            (blen,) = struct.unpack_from(">i", view, pos + 8)
            if blen < MIN_BATCH_LENGTH:
                raise _Failure("size", f"batchLength {blen} is below the minimum of "
                                       f"{MIN_BATCH_LENGTH}")
            magic = struct.unpack_from(">b", view, pos + OFF_MAGIC)[0]
            if magic != 2:
                raise _Failure("magic", f"magic {magic}, expected 2")
            size = blen + LOG_OVERHEAD
            if size > rem:
                raise _Failure("truncated", f"truncated: batchLength {blen} needs {size} "
                                            f"bytes, {rem} left")
        except _Failure as f:
            raise CorruptBatchError(f"batch {index} at byte {pos}: {f.message}",
                                    batch_index=index, position=pos, check=f.check) from None
        struct.pack_into(">q", view, pos, base_offset)
        struct.pack_into(">i", view, pos + OFF_LEADER_EPOCH, partition_leader_epoch)
        if log_append_time is not None:
            (attrs,) = struct.unpack_from(">H", view, pos + OFF_ATTRIBUTES)
            struct.pack_into(">H", view, pos + OFF_ATTRIBUTES, attrs | ATTR_TIMESTAMP_TYPE)
            struct.pack_into(">q", view, pos + OFF_MAX_TIMESTAMP, log_append_time)
            struct.pack_into(">I", view, pos + OFF_CRC,
                             crc32c(view[pos + OFF_ATTRIBUTES:pos + size]))
        (delta,) = struct.unpack_from(">i", view, pos + OFF_LAST_OFFSET_DELTA)
        base_offset += delta + 1
        pos += size
        index += 1
    return base_offset


# -- reading -------------------------------------------------------------------

@dataclass(slots=True)
class Record:
    """One record: offset, timestamp, key, value, headers."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)

    def as_tuple(self) -> tuple:
        return (self.offset, self.timestamp, self.key, self.value, self.headers)

    def __eq__(self, other):
        if not hasattr(other, "as_tuple"):
            return NotImplemented
        return self.as_tuple() == other.as_tuple()

    __hash__ = None


def _parse_records(data, start: int, end: int, info: BatchInfo,
                   index: int) -> Iterator[Record]:
    def fail(k: int, at: int, what: str):
        raise CorruptBatchError(
            f"batch {index} at byte {info.position}: record {k} (byte {at} of the records): "
            f"{what}", batch_index=index, position=info.position, check="records")

    count = info.record_count
    if count * MIN_RECORD > end - start:
        fail(0, 0, f"records count {count} cannot fit in {end - start} bytes")
    log_append = info.timestamp_type == 1

    def bytes_field(p: int, rend: int) -> tuple[bytes | None, int]:
        length, p = _read_varint(data, p, rend)
        if length < -1 or length > rend - p:
            raise _BadVarint(False)
        if length == -1:
            return None, p
        return bytes(data[p:p + length]), p + length

    p = start
    for k in range(count):
        rstart = p
        try:
            length, p = _read_varint(data, p, end)
            if length < 0 or length > end - p:
                raise _BadVarint(False)
        except _BadVarint:
            fail(k, rstart - start, "bad or overrunning length")
        rend = p + length
        if p >= rend:
            fail(k, rstart - start, "empty record")
        p += 1  # attributes: unused
        try:
            ts_delta, p = _read_varlong(data, p, rend)
        except _BadVarint:
            fail(k, rstart - start, "bad timestampDelta")
        try:
            offset_delta, p = _read_varint(data, p, rend)
        except _BadVarint:
            fail(k, rstart - start, "bad offsetDelta")
        try:
            key, p = bytes_field(p, rend)
            value, p = bytes_field(p, rend)
        except _BadVarint:
            fail(k, rstart - start, "bad key or value length")
        try:
            hcount, p = _read_varint(data, p, rend)
            if hcount < 0 or hcount * 2 > rend - p:
                raise _BadVarint(False)
        except _BadVarint:
            fail(k, rstart - start, "bad headers count")
        headers = []
        for _ in range(hcount):
            try:
                hklen, p = _read_varint(data, p, rend)
                if hklen < 0 or hklen > rend - p:
                    raise _BadVarint(False)
            except _BadVarint:
                fail(k, rstart - start, "bad (or null) header key length")
            try:
                hkey = bytes(data[p:p + hklen]).decode("utf-8")
            except UnicodeDecodeError:
                fail(k, rstart - start, "header key is not UTF-8")
            p += hklen
            try:
                hval, p = bytes_field(p, rend)
            except _BadVarint:
                fail(k, rstart - start, "bad header value length")
            headers.append((hkey, hval))
        if p != rend:
            fail(k, rstart - start, f"fields end {rend - p} bytes before the record's length")
        timestamp = info.max_timestamp if log_append else info.first_timestamp + ts_delta
        yield Record(info.base_offset + offset_delta, timestamp, key, value, headers)
    if p != end:
        fail(count, p - start, f"{end - p} bytes left over after the last record")


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Batch(BatchInfo):
    """A validated batch in a buffer; :meth:`records` decodes its records."""

    _owner: object = None
    _index: int = 0

    def records(self) -> Iterator[Record]:
        """An iterator over the batch's records (decompressed if needed)."""
        index = self._index
        view = _view(self._owner)
        if self.position + self.size > len(view):
            raise CorruptBatchError(f"batch {index} at byte {self.position}: buffer shrank "
                                    f"under it", batch_index=index, position=self.position,
                                    check="truncated")
        start, end = self.position + HEADER_SIZE, self.position + self.size
        if not self.compression:
            return _parse_records(view, start, end, self, index)
        try:
            data = decompress(self.compression, view[start:end])
        except CodecError as exc:
            raise CorruptBatchError(f"batch {index} at byte {self.position}: {exc}",
                                    batch_index=index, position=self.position,
                                    check="compression") from exc
        return _parse_records(data, 0, len(data), self, index)

    def __iter__(self) -> Iterator[Record]:
        return self.records()

    def __repr__(self) -> str:
        return (f"Batch(base_offset={self.base_offset}, record_count={self.record_count}, "
                f"position={self.position}, size={self.size}, compression={self.compression})")


def read_batches(buf, *, strict: bool = False) -> Iterator[Batch]:
    """Yield each batch of ``buf`` (checked as by :func:`validate`)."""
    pos = index = 0
    while True:
        view = _view(buf)
        if pos >= len(view):
            return
        info, _ = _check(view, len(view), pos, index, strict)
        yield Batch(*(getattr(info, f.name) for f in fields(BatchInfo)), buf, index)
        pos += info.size
        index += 1


def iter_records(buf, *, strict: bool = False) -> Iterator[Record]:
    """Yield every record of every batch in ``buf``."""
    for batch in read_batches(buf, strict=strict):
        yield from batch.records()


# -- building ------------------------------------------------------------------

class BatchBuilder:
    """Builds one v2 batch: ``append()`` records, then ``build()`` the bytes."""

    def __init__(self, compression: int = 0, timestamp_type: int = 0, base_offset: int = 0,
                 partition_leader_epoch: int = -1, producer_id: int = -1,
                 producer_epoch: int = -1, base_sequence: int = -1,
                 is_transactional: bool = False, is_control: bool = False,
                 delete_horizon_ms: int | None = None) -> None:
        """``delete_horizon_ms``: a batch as the log cleaner leaves one that
        keeps tombstones (KIP-534): the horizon is the base timestamp, with
        attribute bit 6, and record timestamps are deltas from it."""
        if not 0 <= compression <= 4:
            raise ValueError(f"unknown compression codec {compression}")
        if timestamp_type not in (0, 1):
            raise ValueError(f"timestamp_type must be 0 or 1, not {timestamp_type}")
        self._compression = compression
        self._attributes = (compression | (ATTR_TIMESTAMP_TYPE if timestamp_type else 0)
                            | (ATTR_TRANSACTIONAL if is_transactional else 0)
                            | (ATTR_CONTROL if is_control else 0)
                            | (ATTR_DELETE_HORIZON if delete_horizon_ms is not None else 0))
        self._horizon = delete_horizon_ms
        self._base_offset = base_offset
        self._epoch = partition_leader_epoch
        self._producer = (producer_id, producer_epoch, base_sequence)
        self._records = bytearray()
        self._count = 0
        self._last_delta = -1
        self._base_ts = self._max_ts = 0

    def __len__(self) -> int:
        return self._count

    def append(self, timestamp: int, key, value,
               headers: Iterable[tuple[str | bytes, object]] = (),
               offset_delta: int | None = None) -> None:
        delta = self._last_delta + 1 if offset_delta is None else offset_delta
        if delta < 0 or delta > 0x7FFFFFFF or (self._count and delta <= self._last_delta):
            raise ValueError(f"offset delta {delta} must exceed the previous "
                             f"{self._last_delta}")
        hdrs = [((hk.encode("utf-8") if isinstance(hk, str) else bytes(hk)),
                 None if hv is None else bytes(hv)) for hk, hv in headers]
        if self._count == 0:
            self._base_ts = self._max_ts = timestamp
            if self._horizon is not None:
                self._base_ts = self._horizon
        body = bytearray(b"\x00")  # attributes
        body += _varlong(timestamp - self._base_ts)
        body += _varint(delta)
        for field_ in (key, value):
            if field_ is None:
                body += _varint(-1)
            else:
                data = bytes(field_)
                body += _varint(len(data)) + data
        body += _varint(len(hdrs))
        for hk, hv in hdrs:
            body += _varint(len(hk)) + hk
            body += _varint(-1) if hv is None else _varint(len(hv)) + hv
        if len(body) > 0x7FFFFFFF - 64:
            raise ValueError(f"record of {len(body)} bytes is too large")
        self._records += _varint(len(body)) + body
        self._max_ts = max(self._max_ts, timestamp)
        self._last_delta = delta
        self._count += 1

    def build(self) -> bytes:
        if self._count == 0:
            raise ValueError("cannot build a batch without records")
        payload = (compress(self._compression, bytes(self._records)) if self._compression
                   else bytes(self._records))
        pid, pepoch, seq = self._producer
        out = bytearray(_HEADER.pack(
            self._base_offset, MIN_BATCH_LENGTH + len(payload), self._epoch, 2, 0,
            self._attributes, self._last_delta, self._base_ts, self._max_ts, pid, pepoch, seq,
            self._count))
        out += payload
        struct.pack_into(">I", out, OFF_CRC, crc32c(memoryview(out)[OFF_ATTRIBUTES:]))
        return bytes(out)


def build_batch(records: Iterable[tuple], **kwargs) -> bytes:
    """One batch from ``(timestamp, key, value[, headers])`` tuples."""
    builder = BatchBuilder(**kwargs)
    for rec in records:
        builder.append(*rec)
    return builder.build()
