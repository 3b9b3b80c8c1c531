"""Kafka record batches (magic v2): validate, stamp, read and build.

The broker's produce path calls :func:`validate` and :func:`stamp` on every
partition's record set; both walk batch headers in C, never creating a Python
object per record.  Reading (:func:`read_batches`, :func:`iter_records`) and
building (:class:`BatchBuilder`) serve tools, tests and consumers of logs.
``pylog/records/pyrecords.py`` is the pure-Python twin with the same API,
the same checks and the same error messages.

Count rules (``strict``), after Kafka:

- ``strict=True`` (produce path; Kafka's ``LogValidator`` for client batches):
  ``records count >= 1`` and ``lastOffsetDelta == count - 1``; a control
  batch holds exactly one record; every field of every uncompressed record
  parses (``walk_records``) and the offset deltas run 0, 1, 2, ...
- ``strict=False`` (reading logs; the log cleaner keeps batches whose records
  it removed, to preserve producer state): ``count >= 0`` and
  ``lastOffsetDelta >= max(count - 1, 0)``; a control batch holds at most one.

- ``deep=True`` (produce path): the same walk over the records inside each
  compressed batch, decompressed into a reused buffer of bounded size.

Check order: extent first (size, magic, truncation), then the CRC, then the
fields under it (codec, counts, control), then the walk over the records
(every field when strict, the lengths only otherwise; decompressed first when
deep); so a flipped byte is reported as a CRC mismatch.
``Batch.records()`` returns an iterator that decodes (and bounds-checks) one
record per step; ``validate`` never creates an object per record.
"""

cimport cython
from cpython.buffer cimport (PyBUF_READ, PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_Release,
                             PyObject_GetBuffer)
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.memoryview cimport PyMemoryView_FromMemory
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport (INT64_MAX, INT64_MIN, int8_t, int16_t, int32_t, int64_t, uint8_t,
                          uint16_t, uint32_t, uint64_t)
from libc.stdlib cimport free, realloc
from libc.string cimport memcpy

from batch_layout cimport *
from bigendian cimport rd16, rd32, rd64, wr16, wr32, wr64
from cvarint cimport *

# Which check failed (index into CHECK_NAMES in records.pyx).
cdef enum:
    CHECK_OK = 0
    CHECK_TRUNCATED
    CHECK_SIZE
    CHECK_MAGIC
    CHECK_CRC
    CHECK_COMPRESSION
    CHECK_RECORD_COUNT
    CHECK_CONTROL
    CHECK_RECORDS
    CHECK_DECOMPRESS
    CHECK_TIMESTAMP
    CHECK_KEY

# What a topic asks of every record a client produces (Kafka's LogValidator):
# CreateTime timestamps within [ts_lo, ts_hi] (message.timestamp.before/after.
# max.ms) and, on a compacted topic, a key.
cdef struct rules:
    int64_t ts_lo
    int64_t ts_hi
    bint keys

cdef rules NO_RULES = rules(INT64_MIN, INT64_MAX, False)
cdef int64_t NOT_WALKED = INT64_MIN  # the records' timestamps were not looked at


cdef struct batch_header:
    int64_t base_offset
    int32_t batch_length
    int32_t leader_epoch
    int8_t magic
    uint32_t crc
    int16_t attributes
    int32_t last_offset_delta
    int64_t base_timestamp
    int64_t max_timestamp
    int64_t producer_id
    int16_t producer_epoch
    int32_t base_sequence
    int32_t record_count
    Py_ssize_t position
    Py_ssize_t size

# Why a check failed: the check, a sub-reason and up to four numbers for the
# message, filled by the nogil code and turned into text only on failure.
cdef struct failure:
    int check
    int reason
    int64_t a
    int64_t b
    int64_t c
    int64_t d
    int64_t e


cdef extern from *:
    """
    #include <structmember.h>
    /* Replace a getset property of `type` by a read-only T_OBJECT_EX member
     * at `offset`: CPython specialises attribute loads of those
     * (LOAD_ATTR_SLOT), not of C getters.  The PyMemberDef must outlive the
     * type, hence the allocation that is never freed. */
    static int pylog_fast_member(PyTypeObject *type, const char *name, Py_ssize_t offset) {
        PyMemberDef *def = (PyMemberDef *)PyMem_Calloc(1, sizeof(PyMemberDef));
        PyObject *descr;
        int rc;
        if (!def) { PyErr_NoMemory(); return -1; }
        def->name = name;
        def->type = T_OBJECT_EX;
        def->offset = offset;
        def->flags = READONLY;
        descr = PyDescr_NewMember(type, def);
        if (!descr) return -1;
        rc = PyDict_SetItemString(type->tp_dict, name, descr);
        Py_DECREF(descr);
        PyType_Modified(type);
        return rc;
    }
    /* Record's object struct as Cython lays it out (fields in declaration
     * order, no vtable); checked against a live instance before use. */
    typedef struct {
        PyObject_HEAD
        int64_t offset;
        int64_t timestamp;
        PyObject *key;
        PyObject *value;
        PyObject *headers;
    } PylogRecordLayout;

    static int pylog_record_layout_ok(PyObject *rec, PyObject *key, PyObject *value) {
        PylogRecordLayout *r = (PylogRecordLayout *)rec;
        return Py_TYPE(rec)->tp_basicsize == (Py_ssize_t)sizeof(PylogRecordLayout)
            && r->key == key && r->value == value;
    }
    #define PYLOG_RECORD_KEY_OFFSET ((Py_ssize_t)offsetof(PylogRecordLayout, key))
    #define PYLOG_RECORD_VALUE_OFFSET ((Py_ssize_t)offsetof(PylogRecordLayout, value))
    """
    int pylog_fast_member(type t, const char *name, Py_ssize_t offset) except -1
    bint pylog_record_layout_ok(object rec, object key, object value)
    Py_ssize_t PYLOG_RECORD_KEY_OFFSET
    Py_ssize_t PYLOG_RECORD_VALUE_OFFSET


cdef extern from "crc32c.h" nogil:
    uint32_t pylog_crc32c(uint32_t crc, const void *buf, size_t len)

from pylog.errors import CodecError, CorruptBatchError
from pylog.records.compression import compress as _compress
from pylog.records.compression import decompress as _decompress
from pylog.records.compression import decompress_bounded as _decompress_bounded

cdef enum:
    # Batches at least this big are checksummed with the GIL released.
    NOGIL_BYTES = 65536
    # A record is at least 7 bytes: length, attributes, timestampDelta,
    # offsetDelta, keyLength, valueLength, headers count.
    MIN_RECORD = 7

CHECK_NAMES = ("ok", "truncated", "size", "magic", "crc", "compression",
               "record_count", "control", "records", "decompress", "timestamp", "key")


cdef inline int _fail(failure *f, int check, int reason, int64_t a=0, int64_t b=0,
                      int64_t c=0, int64_t d=0, int64_t e=0) noexcept nogil:
    f.check = check
    f.reason = reason
    f.a = a
    f.b = b
    f.c = c
    f.d = d
    f.e = e
    return check


# -- the checks, pure C -------------------------------------------------------

cdef int scan_header(const uint8_t *buf, Py_ssize_t buflen, Py_ssize_t pos,
                     batch_header *h, failure *f) noexcept nogil:
    """What is needed to trust the batch's extent: size, magic, bounds."""
    cdef Py_ssize_t rem = buflen - pos
    cdef const uint8_t *p = buf + pos
    cdef int32_t blen
    if rem < LOG_OVERHEAD:
        return _fail(f, CHECK_TRUNCATED, 0, HEADER_SIZE, rem)
    blen = <int32_t>rd32(p + OFF_BATCH_LENGTH)
    if blen < MIN_BATCH_LENGTH:
        return _fail(f, CHECK_SIZE, 0, blen)
    if rem > OFF_MAGIC and <int8_t>p[OFF_MAGIC] != 2:
        return _fail(f, CHECK_MAGIC, 0, <int8_t>p[OFF_MAGIC])
    if <int64_t>blen + LOG_OVERHEAD > rem:
        return _fail(f, CHECK_TRUNCATED, 1, <int64_t>blen + LOG_OVERHEAD, rem, blen)
    h.base_offset = <int64_t>rd64(p)
    h.batch_length = blen
    h.leader_epoch = <int32_t>rd32(p + OFF_LEADER_EPOCH)
    h.magic = 2
    h.crc = rd32(p + OFF_CRC)
    h.attributes = <int16_t>rd16(p + OFF_ATTRIBUTES)
    h.last_offset_delta = <int32_t>rd32(p + OFF_LAST_OFFSET_DELTA)
    h.base_timestamp = <int64_t>rd64(p + OFF_BASE_TIMESTAMP)
    h.max_timestamp = <int64_t>rd64(p + OFF_MAX_TIMESTAMP)
    h.producer_id = <int64_t>rd64(p + OFF_PRODUCER_ID)
    h.producer_epoch = <int16_t>rd16(p + OFF_PRODUCER_EPOCH)
    h.base_sequence = <int32_t>rd32(p + OFF_BASE_SEQUENCE)
    h.record_count = <int32_t>rd32(p + OFF_RECORD_COUNT)
    h.position = pos
    h.size = <Py_ssize_t>blen + LOG_OVERHEAD
    return CHECK_OK


cdef int check_fields(const batch_header *h, bint strict, failure *f) noexcept nogil:
    """Header fields under the CRC: codec, count vs lastOffsetDelta, control."""
    cdef int32_t count = h.record_count, delta = h.last_offset_delta
    if (h.attributes & ATTR_COMPRESSION_MASK) > 4:
        return _fail(f, CHECK_COMPRESSION, 0, h.attributes & ATTR_COMPRESSION_MASK)
    if count < 0:
        return _fail(f, CHECK_RECORD_COUNT, 0, count, delta)
    if strict:
        if count == 0:
            return _fail(f, CHECK_RECORD_COUNT, 1, count, delta)
        if delta != count - 1:
            return _fail(f, CHECK_RECORD_COUNT, 2, count, delta)
    elif delta < count - 1 or delta < 0:
        return _fail(f, CHECK_RECORD_COUNT, 3, count, delta)
    if h.attributes & ATTR_CONTROL:
        if count > 1 or (strict and count != 1):
            return _fail(f, CHECK_CONTROL, 0, count)
    return CHECK_OK


cdef enum:
    # walk_records' reasons (CHECK_RECORDS), after the tiling walk's 0-3
    WALK_LENGTH = 4
    WALK_EMPTY
    WALK_TIMESTAMP
    WALK_OFFSET_DELTA
    WALK_OFFSET_ORDER
    WALK_KEY_VALUE
    WALK_HEADERS
    WALK_HEADER_KEY
    WALK_HEADER_VALUE
    WALK_SHORT_FIELDS
    WALK_LEFT_OVER


cdef inline int _skip_bytes(const uint8_t **pp, const uint8_t *rend, bint nullable) noexcept nogil:
    """Step over a length-prefixed field; 0, or -1 when it does not fit."""
    cdef int32_t length
    cdef int n = pylog_varint_decode(pp[0], rend, &length)
    if n < 0 or length < (-1 if nullable else 0) or length > rend - pp[0] - n:
        return -1
    pp[0] += n + (length if length > 0 else 0)
    return 0


cdef inline bint _short_varint(const uint8_t **pp, uint32_t *out) noexcept nogil:
    """A varint of one or two bytes at ``pp[0]``, whose two bytes the caller
    knows are readable; False (``pp[0]`` unmoved) for a longer one."""
    cdef const uint8_t *p = pp[0]
    if p[0] < 0x80:
        out[0] = p[0]
        pp[0] = p + 1
        return True
    if p[1] < 0x80:
        out[0] = (p[0] & 0x7F) | (<uint32_t>p[1] << 7)
        pp[0] = p + 2
        return True
    return False


cdef inline const uint8_t *_walk_usual(const uint8_t *p, const uint8_t *end, int32_t k,
                                       int64_t base_ts, bint deltas, int64_t lo, int64_t hi,
                                       bint keys, int64_t *largest) noexcept nogil:
    """Record ``k`` at ``p`` when it has the usual shape, or NULL: its length,
    timestamp and offset deltas, key and value lengths and header count each
    a varint of one or two bytes, and at least 7 bytes long.  The same checks
    as walk_records' loop in the order it makes them, but with the bounds of
    the first fields proved once by the record's length instead of before
    every byte, and no failure described: a record declined here (odd shape
    or broken) is walked again by the loop, which names what is wrong.
    Returns the end of the record; ``largest`` is raised to its timestamp."""
    cdef uint32_t u
    cdef int32_t length, n
    cdef int64_t ts
    cdef const uint8_t *rend
    if end - p < 2 or not _short_varint(&p, &u):
        return NULL
    length = pylog_unzigzag32(u)
    # attributes, then three varints of at most 2 bytes each: p[0..6]
    if length < 7 or length > end - p:
        return NULL
    rend = p + length
    p += 1  # attributes: unused
    if not _short_varint(&p, &u):
        return NULL
    ts = <int64_t>(<uint64_t>base_ts + <uint64_t>pylog_unzigzag64(u))  # wraps, as in Java
    if (ts < lo or ts > hi) and ts != -1:
        return NULL
    if ts > largest[0]:
        largest[0] = ts
    if not _short_varint(&p, &u) or (deltas and pylog_unzigzag32(u) != k):
        return NULL
    if not _short_varint(&p, &u):
        return NULL
    n = pylog_unzigzag32(u)  # key length
    if n < -1 or (keys and n < 0) or n > rend - p:
        return NULL
    if n > 0:
        p += n
    if rend - p < 2 or not _short_varint(&p, &u):
        return NULL
    n = pylog_unzigzag32(u)  # value length
    if n < -1 or n > rend - p:
        return NULL
    if n > 0:
        p += n
    if rend - p < 1 or p[0] >= 0x80:
        return NULL
    n = pylog_unzigzag32(p[0])  # header count
    p += 1
    if n < 0 or <int64_t>n * 2 > rend - p:
        return NULL
    for _ in range(n):
        if _skip_bytes(&p, rend, False) or _skip_bytes(&p, rend, True):
            return NULL
    return p if p == rend else NULL


cdef int walk_records(const uint8_t *start, const uint8_t *end, int32_t count,
                      int64_t base_ts, bint deltas, const rules *r, int64_t *max_ts,
                      failure *f) noexcept nogil:
    """Every field of ``count`` records, as a consumer parses them (Kafka's
    DefaultRecord.readFrom): each record fills its own length exactly, the
    records fill the section exactly; with ``deltas`` the offset deltas run
    0, 1, 2, ... (inside a compressed batch, as Kafka's LogValidator
    requires; it takes an uncompressed batch's as they are).  A
    correct CRC only proves these are the bytes the producer sent.  Records
    of the usual shape take ``_walk_usual`` (about 8 ns for one of 100 B, a
    quarter less than this loop; benchmarks/test_bench_records.py), the rest
    this loop.  Then the topic's ``rules``: timestamps (base + delta) other
    than -1 within [ts_lo, ts_hi], and keys.  ``max_ts``: the largest record
    timestamp (-1 for none), which Kafka writes into the batch header."""
    cdef const uint8_t *p = start
    cdef const uint8_t *rstart
    cdef const uint8_t *rend
    cdef int32_t k, j, length, delta, hcount
    cdef int64_t ts_delta, ts
    cdef int n
    # Locals, not reads through r and max_ts: a store through one int64_t
    # pointer would make the compiler reload the others every record.
    cdef int64_t lo = r.ts_lo, hi = r.ts_hi, largest = -1
    cdef bint keys = r.keys
    for k in range(count):
        rstart = _walk_usual(p, end, k, base_ts, deltas, lo, hi, keys, &largest)
        if rstart != NULL:
            p = rstart
            continue
        rstart = p
        n = pylog_varint_decode(p, end, &length)
        if n < 0 or length < 0 or length > end - p - n:
            return _fail(f, CHECK_RECORDS, WALK_LENGTH, k, rstart - start)
        p += n
        rend = p + length
        if p >= rend:
            return _fail(f, CHECK_RECORDS, WALK_EMPTY, k, rstart - start)
        p += 1  # attributes: unused
        n = pylog_varlong_decode(p, rend, &ts_delta)
        if n < 0:
            return _fail(f, CHECK_RECORDS, WALK_TIMESTAMP, k, rstart - start)
        ts = <int64_t>(<uint64_t>base_ts + <uint64_t>ts_delta)  # wraps, as in Java
        if (ts < lo or ts > hi) and ts != -1:
            return _fail(f, CHECK_TIMESTAMP, 0, k, rstart - start, ts, lo, hi)
        if ts > largest:
            largest = ts
        p += n
        n = pylog_varint_decode(p, rend, &delta)
        if n < 0:
            return _fail(f, CHECK_RECORDS, WALK_OFFSET_DELTA, k, rstart - start)
        if deltas and delta != k:
            # LogValidator: "does not have incremental offsets", an
            # InvalidRecordException; a consumer would read these offsets.
            return _fail(f, CHECK_RECORDS, WALK_OFFSET_ORDER, k, rstart - start, delta)
        p += n
        if keys and pylog_varint_decode(p, rend, &length) > 0 and length < 0:
            return _fail(f, CHECK_KEY, 0, k, rstart - start)
        if _skip_bytes(&p, rend, True) or _skip_bytes(&p, rend, True):
            return _fail(f, CHECK_RECORDS, WALK_KEY_VALUE, k, rstart - start)
        n = pylog_varint_decode(p, rend, &hcount)
        if n < 0 or hcount < 0 or <int64_t>hcount * 2 > rend - p - n:
            return _fail(f, CHECK_RECORDS, WALK_HEADERS, k, rstart - start)
        p += n
        for j in range(hcount):
            if _skip_bytes(&p, rend, False):
                return _fail(f, CHECK_RECORDS, WALK_HEADER_KEY, k, rstart - start)
            if _skip_bytes(&p, rend, True):
                return _fail(f, CHECK_RECORDS, WALK_HEADER_VALUE, k, rstart - start)
        if p != rend:
            return _fail(f, CHECK_RECORDS, WALK_SHORT_FIELDS, k, rstart - start, rend - p)
    if p != end:
        return _fail(f, CHECK_RECORDS, WALK_LEFT_OVER, count, p - start, end - p)
    max_ts[0] = largest
    return CHECK_OK


cdef int check_body(const uint8_t *buf, const batch_header *h, bint strict,
                    failure *f, const rules *r, int64_t *max_ts) noexcept nogil:
    """CRC first (a corrupt byte is reported as such), then the fields it
    covers, then for uncompressed batches the walk over the records: every
    field when ``strict`` (what a client sends, as Kafka's LogValidator),
    their lengths only otherwise (logs already written)."""
    cdef const uint8_t *p = buf + h.position
    cdef const uint8_t *end = p + h.size
    cdef uint32_t crc = pylog_crc32c(0, p + OFF_ATTRIBUTES, <size_t>(h.size - OFF_ATTRIBUTES))
    cdef int32_t i, length
    cdef int n, rc
    if crc != h.crc:
        return _fail(f, CHECK_CRC, 0, h.crc, crc)
    rc = check_fields(h, strict, f)
    if rc != CHECK_OK:
        return rc
    if h.attributes & ATTR_COMPRESSION_MASK:
        return CHECK_OK
    p += HEADER_SIZE
    if strict:
        return walk_records(p, end, h.record_count, h.base_timestamp, False, r, max_ts, f)
    # The record lengths must tile the records section exactly.
    for i in range(h.record_count):
        n = pylog_varint_decode(p, end, &length)
        if n < 0:
            return _fail(f, CHECK_RECORDS, 0, i, p - buf, n)
        if length < 0:
            return _fail(f, CHECK_RECORDS, 1, i, p - buf, length)
        p += n
        if length > end - p:
            return _fail(f, CHECK_RECORDS, 2, i, p - n - buf, length, end - p)
        p += length
    if p != end:
        return _fail(f, CHECK_RECORDS, 3, h.record_count, end - p)
    return CHECK_OK


# walk_records' failures, worded as the record parser's (_parse_one); {0} is
# the failure's third number, {1} the record's index.
_WALK_WHAT = ("bad or overrunning length", "empty record", "bad timestampDelta",
              "bad offsetDelta", "offsetDelta {0}, expected {1}", "bad key or value length",
              "bad headers count", "bad (or null) header key length",
              "bad header value length", "fields end {0} bytes before the record's length",
              "{0} bytes left over after the last record")


cdef str _describe(const failure *f):
    cdef int c = f.check, r = f.reason
    if c == CHECK_TRUNCATED:
        if r == 0:
            return f"truncated: {f.b} bytes left, a batch header needs {f.a}"
        return f"truncated: batchLength {f.c} needs {f.a} bytes, {f.b} left"
    if c == CHECK_SIZE:
        return f"batchLength {f.a} is below the minimum of {MIN_BATCH_LENGTH}"
    if c == CHECK_MAGIC:
        return f"magic {f.a}, expected 2"
    if c == CHECK_CRC:
        return f"CRC32C mismatch: stored 0x{f.a:08x}, computed 0x{f.b:08x}"
    if c == CHECK_KEY:
        return (f"record {f.a} (byte {f.b} of the records): Compacted topic cannot accept "
                f"message without key")
    if c == CHECK_TIMESTAMP:
        return (f"record {f.a} (byte {f.b} of the records): timestamp {f.c} is out of range: "
                f"it should be within [{f.d}, {f.e}]")
    if c == CHECK_COMPRESSION:
        return f"unknown compression codec {f.a}"
    if c == CHECK_RECORD_COUNT:
        if r == 0:
            return f"negative records count {f.a}"
        if r == 1:
            return f"empty batch (records count 0, lastOffsetDelta {f.b})"
        if r == 2:
            return f"lastOffsetDelta {f.b} does not match records count {f.a}"
        return f"lastOffsetDelta {f.b} is too small for records count {f.a}"
    if c == CHECK_CONTROL:
        return f"control batch holds {f.a} records, expected 1"
    if c == CHECK_RECORDS and r >= WALK_LENGTH:
        what = _WALK_WHAT[r - WALK_LENGTH].format(f.c, f.a)
        return f"record {f.a} (byte {f.b} of the records): {what}"
    if c == CHECK_RECORDS:
        if r == 0:
            what = "truncated" if f.c == PYLOG_VARINT_TRUNCATED else "too long"
            return f"record {f.a} at byte {f.b}: length varint is {what}"
        if r == 1:
            return f"record {f.a} at byte {f.b}: negative length {f.c}"
        if r == 2:
            return (f"record {f.a} at byte {f.b}: length {f.c} overruns the batch "
                    f"({f.d} bytes left)")
        return f"{f.b} bytes left over after the {f.a} records of the batch"
    return "unknown failure"


cdef object _raise(Py_ssize_t index, Py_ssize_t pos, const failure *f):
    raise CorruptBatchError(f"batch {index} at byte {pos}: {_describe(f)}",
                            batch_index=index, position=pos, check=CHECK_NAMES[f.check])


cdef int _check_compressed(const uint8_t *buf, const batch_header *h, Py_ssize_t index,
                           const rules *r, int64_t *max_ts) except -1:
    """Decompress the batch (bounded: compression.decompress_bounded) and walk
    every record inside; one Python call per batch, none per record."""
    cdef Py_buffer out
    cdef failure f
    cdef int rc
    payload = PyMemoryView_FromMemory(<char *>buf + h.position + HEADER_SIZE,
                                      h.size - HEADER_SIZE, PyBUF_READ)
    try:
        inflated = _decompress_bounded(h.attributes & ATTR_COMPRESSION_MASK, payload)
    except CodecError as exc:
        raise CorruptBatchError(f"batch {index} at byte {h.position}: {exc}",
                                batch_index=index, position=h.position,
                                check="decompress") from None
    finally:
        payload.release()
    _get_buffer(inflated, &out, PyBUF_SIMPLE)
    try:
        with nogil:
            rc = walk_records(<const uint8_t *>out.buf, <const uint8_t *>out.buf + out.len,
                              h.record_count, h.base_timestamp, True, r, max_ts, &f)
    finally:
        PyBuffer_Release(&out)
        inflated.release()
    if rc != CHECK_OK:
        _raise(index, h.position, &f)
    return 0


cdef inline int _check(const uint8_t *buf, Py_ssize_t buflen, Py_ssize_t pos, Py_ssize_t index,
                       bint strict, batch_header *h, bint deep=False,
                       const rules *r=&NO_RULES, int64_t *max_ts=NULL) except -1:
    """Full check of the batch at ``pos``: header, then CRC and record walk;
    ``deep``, the records inside a compressed batch too.  ``max_ts`` gets the
    largest record timestamp when the records were walked, else NOT_WALKED."""
    cdef failure f
    cdef int64_t walked = NOT_WALKED
    cdef int rc = scan_header(buf, buflen, pos, h, &f)
    if rc == CHECK_OK:
        if h.size >= NOGIL_BYTES:
            with nogil:
                rc = check_body(buf, h, strict, &f, r, &walked)
        else:
            rc = check_body(buf, h, strict, &f, r, &walked)
    if rc != CHECK_OK:
        _raise(index, pos, &f)
    if deep and h.attributes & ATTR_COMPRESSION_MASK:
        _check_compressed(buf, h, index, r, &walked)
    if max_ts != NULL:
        max_ts[0] = walked
    return 0


cdef inline int _get_buffer(object obj, Py_buffer *view, int flags) except -1:
    return PyObject_GetBuffer(obj, view, flags)


# -- batch facts --------------------------------------------------------------

@cython.freelist(16)
cdef class BatchInfo:
    """The header facts of one batch, read-only."""
    cdef batch_header h

    @property
    def base_offset(self) -> int:
        return self.h.base_offset

    @property
    def last_offset_delta(self) -> int:
        return self.h.last_offset_delta

    @property
    def last_offset(self) -> int:
        return self.h.base_offset + self.h.last_offset_delta

    @property
    def partition_leader_epoch(self) -> int:
        return self.h.leader_epoch

    @property
    def magic(self) -> int:
        return self.h.magic

    @property
    def crc(self) -> int:
        return self.h.crc

    @property
    def attributes(self) -> int:
        return self.h.attributes

    @property
    def compression(self) -> int:
        return self.h.attributes & ATTR_COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return 1 if self.h.attributes & ATTR_TIMESTAMP_TYPE else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.h.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.h.attributes & ATTR_CONTROL)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.h.attributes & ATTR_DELETE_HORIZON)

    @property
    def first_timestamp(self) -> int:
        return self.h.base_timestamp

    @property
    def max_timestamp(self) -> int:
        return self.h.max_timestamp

    @property
    def producer_id(self) -> int:
        return self.h.producer_id

    @property
    def producer_epoch(self) -> int:
        return self.h.producer_epoch

    @property
    def base_sequence(self) -> int:
        return self.h.base_sequence

    @property
    def record_count(self) -> int:
        return self.h.record_count

    @property
    def position(self) -> int:
        return self.h.position

    @property
    def size(self) -> int:
        return self.h.size

    def as_dict(self) -> dict:
        return {name: getattr(self, name) for name in BATCH_FIELDS}

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(base_offset={self.h.base_offset}, "
                f"record_count={self.h.record_count}, position={self.h.position}, "
                f"size={self.h.size}, compression={self.compression})")


BATCH_FIELDS = (
    "base_offset", "last_offset_delta", "last_offset", "partition_leader_epoch", "magic",
    "crc", "attributes", "compression", "timestamp_type", "is_transactional", "is_control",
    "has_delete_horizon", "first_timestamp", "max_timestamp", "producer_id",
    "producer_epoch", "base_sequence", "record_count", "position", "size",
)


cdef BatchInfo _info(const batch_header *h):
    cdef BatchInfo info = BatchInfo.__new__(BatchInfo)
    info.h = h[0]
    return info


def validate(buf, *, bint strict=True, bint deep=False) -> list:
    """Check every batch in ``buf`` (concatenated v2 batches); return their facts.

    Raises :class:`CorruptBatchError` naming the batch, its byte position and
    the failed check.  A trailing partial batch is an error; an empty buffer
    holds no batches.  ``deep`` (the produce path, as Kafka's LogValidator)
    also decompresses each compressed batch and checks every record in it:
    its CRC only proves the bytes are what the producer sent.
    """
    cdef Py_buffer view
    cdef batch_header h
    cdef Py_ssize_t pos = 0, index = 0
    cdef list out = []
    _get_buffer(buf, &view, PyBUF_SIMPLE)
    try:
        while pos < view.len:
            _check(<const uint8_t *>view.buf, view.len, pos, index, strict, &h, deep)
            out.append(_info(&h))
            pos += h.size
            index += 1
    finally:
        PyBuffer_Release(&view)
    return out


def validate_summary(buf, *, bint strict=True, bint deep=False,
                     tuple timestamps=None, bint keys=False,
                     bint fix_max_timestamp=False) -> tuple:
    """Like :func:`validate`, without per-batch objects.

    Returns ``(batch_count, record_count, offset_count, max_timestamp)``;
    ``offset_count`` is the number of offsets :func:`stamp` will assign (the
    sum of ``lastOffsetDelta + 1``), ``max_timestamp`` is -1 for no batches.
    ``timestamps=(lo, hi)``, with ``strict``: every record's timestamp (but
    -1, none) must lie in that range, else the check "timestamp" fails;
    ``keys``, with ``strict``: every record must have a key (check "key").
    ``fix_max_timestamp`` (``buf`` writable): as Kafka's LogValidator, a
    CreateTime batch whose records were walked gets the largest record
    timestamp as its maxTimestamp (and its CRC again) when the producer wrote
    another; ``max_timestamp`` is then the corrected one.
    """
    cdef Py_buffer view
    cdef batch_header h
    cdef Py_ssize_t pos = 0, index = 0
    cdef int64_t records = 0, offsets = 0, max_ts = -1, walked = NOT_WALKED
    cdef rules r = NO_RULES
    cdef uint8_t *p
    if timestamps is not None:
        r.ts_lo, r.ts_hi = timestamps
    r.keys = keys
    try:
        _get_buffer(buf, &view, PyBUF_WRITABLE if fix_max_timestamp else PyBUF_SIMPLE)
    except BufferError:
        raise TypeError(f"fix_max_timestamp needs a writable buffer, got read-only "
                        f"{type(buf).__name__}") from None
    try:
        while pos < view.len:
            _check(<const uint8_t *>view.buf, view.len, pos, index, strict, &h, deep, &r,
                   &walked)
            if (fix_max_timestamp and walked != NOT_WALKED and walked != h.max_timestamp
                    and not h.attributes & ATTR_TIMESTAMP_TYPE):
                p = <uint8_t *>view.buf + pos
                wr64(p + OFF_MAX_TIMESTAMP, <uint64_t>walked)
                wr32(p + OFF_CRC, pylog_crc32c(0, p + OFF_ATTRIBUTES,
                                               <size_t>(h.size - OFF_ATTRIBUTES)))
                h.max_timestamp = walked
            records += h.record_count
            offsets += <int64_t>h.last_offset_delta + 1
            if h.max_timestamp > max_ts:
                max_ts = h.max_timestamp
            pos += h.size
            index += 1
    finally:
        PyBuffer_Release(&view)
    return index, records, offsets, max_ts


# -- stamping in place --------------------------------------------------------

def stamp(buf, int64_t base_offset, int32_t partition_leader_epoch=-1,
          log_append_time=None) -> int:
    """Assign offsets (and the leader epoch, and optionally LogAppendTime) in place.

    ``buf`` must be writable and already validated.  Batch i gets the base
    offset following batch i-1's last offset; returns the offset after the
    last batch.  With ``log_append_time`` (ms), each batch's timestamp type
    becomes LogAppendTime and its maxTimestamp the given time, and its CRC is
    recomputed (both fields are under the CRC; the leader epoch is not).
    """
    cdef Py_buffer view
    cdef failure f
    cdef Py_ssize_t pos = 0, index = 0, size, rem
    cdef int32_t blen
    cdef uint8_t *p
    cdef bint set_time = log_append_time is not None
    cdef int64_t t = log_append_time if set_time else 0
    cdef uint32_t crc
    try:
        _get_buffer(buf, &view, PyBUF_WRITABLE)
    except BufferError:
        raise TypeError(f"stamp() needs a writable buffer (bytearray, writable memoryview "
                        f"or mmap), got read-only {type(buf).__name__}") from None
    try:
        while pos < view.len:
            p = <uint8_t *>view.buf + pos
            rem = view.len - pos
            # Only what keeps the writes in bounds; validate() did the rest.
            if rem < HEADER_SIZE:
                _fail(&f, CHECK_TRUNCATED, 0, HEADER_SIZE, rem)
                _raise(index, pos, &f)
            blen = <int32_t>rd32(p + OFF_BATCH_LENGTH)
            if blen < MIN_BATCH_LENGTH:
                _fail(&f, CHECK_SIZE, 0, blen)
                _raise(index, pos, &f)
            if <int8_t>p[OFF_MAGIC] != 2:
                _fail(&f, CHECK_MAGIC, 0, <int8_t>p[OFF_MAGIC])
                _raise(index, pos, &f)
            size = <Py_ssize_t>blen + LOG_OVERHEAD
            if size > rem:
                _fail(&f, CHECK_TRUNCATED, 1, size, rem, blen)
                _raise(index, pos, &f)
            wr64(p, <uint64_t>base_offset)
            wr32(p + OFF_LEADER_EPOCH, <uint32_t>partition_leader_epoch)
            if set_time:
                wr16(p + OFF_ATTRIBUTES, rd16(p + OFF_ATTRIBUTES) | ATTR_TIMESTAMP_TYPE)
                wr64(p + OFF_MAX_TIMESTAMP, <uint64_t>t)
                if size >= NOGIL_BYTES:
                    with nogil:
                        crc = pylog_crc32c(0, p + OFF_ATTRIBUTES, <size_t>(size - OFF_ATTRIBUTES))
                else:
                    crc = pylog_crc32c(0, p + OFF_ATTRIBUTES, <size_t>(size - OFF_ATTRIBUTES))
                wr32(p + OFF_CRC, crc)
            base_offset += <int64_t>(<int32_t>rd32(p + OFF_LAST_OFFSET_DELTA)) + 1
            pos += size
            index += 1
    finally:
        PyBuffer_Release(&view)
    return base_offset


# -- reading ------------------------------------------------------------------

# no_gc: a record holds only bytes, str and a private list of tuples of them,
# so it cannot be part of a cycle; untracked, decoding 10k records triggers
# no generation-0 collections (half the decode time otherwise).
@cython.freelist(256)
@cython.final
@cython.no_gc
cdef class Record:
    """One record: offset, timestamp, key, value, headers."""
    cdef readonly int64_t offset
    cdef readonly int64_t timestamp
    cdef readonly object key
    cdef readonly object value
    cdef list _headers  # None when the record has none (the common case)

    def __init__(self, offset: int, timestamp: int, key, value, headers=None) -> None:
        self.offset = offset
        self.timestamp = timestamp
        self.key = key
        self.value = value
        self._headers = list(headers) if headers else None

    @property
    def headers(self) -> list:
        return self._headers if self._headers is not None else []

    def as_tuple(self) -> tuple:
        return (self.offset, self.timestamp, self.key, self.value, self.headers)

    def __eq__(self, other):
        if not hasattr(other, "as_tuple"):
            return NotImplemented
        return self.as_tuple() == other.as_tuple()

    __hash__ = None

    def __repr__(self) -> str:
        return (f"Record(offset={self.offset}, timestamp={self.timestamp}, key={self.key!r}, "
                f"value={self.value!r}, headers={self.headers!r})")


cdef _install_fast_members():
    """key and value are what every consumer reads: make them member slots
    (about 2x faster attribute loads), if the layout is the expected one."""
    k, v = object(), object()
    if pylog_record_layout_ok(Record(0, 0, k, v), k, v):
        pylog_fast_member(Record, "key", PYLOG_RECORD_KEY_OFFSET)
        pylog_fast_member(Record, "value", PYLOG_RECORD_VALUE_OFFSET)


_install_fast_members()


cdef object _record_error(Py_ssize_t index, Py_ssize_t pos, Py_ssize_t k, Py_ssize_t at,
                          str what):
    raise CorruptBatchError(
        f"batch {index} at byte {pos}: record {k} (byte {at} of the records): {what}",
        batch_index=index, position=pos, check="records")


cdef inline object _bytes_field(const uint8_t **pp, const uint8_t *rend, int *err):
    """A length-prefixed byte string, or None for length -1; err=1 on bad input."""
    cdef int32_t length
    cdef int n = pylog_varint_decode(pp[0], rend, &length)
    if n < 0 or length < -1 or length > rend - (pp[0] + n):
        err[0] = 1
        return None
    pp[0] += n
    if length == -1:
        return None
    s = PyBytes_FromStringAndSize(<const char *>pp[0], length)
    pp[0] += length
    return s


cdef Record _parse_one(const uint8_t **pp, const uint8_t *start, const uint8_t *end,
                       const batch_header *h, Py_ssize_t index, int32_t k):
    """Record ``k`` at ``pp[0]``, bounded by its own length; advances ``pp[0]``."""
    cdef const uint8_t *p = pp[0]
    cdef const uint8_t *rstart = p
    cdef const uint8_t *rend
    cdef int32_t length = 0, offset_delta = 0, hcount = 0, hklen = 0, j
    cdef int64_t ts_delta = 0
    cdef int n, err = 0
    cdef Record rec
    cdef list headers
    cdef object hkey, hval
    n = pylog_varint_decode(p, end, &length)
    if n < 0 or length < 0 or length > end - p - n:
        _record_error(index, h.position, k, p - start, "bad or overrunning length")
    p += n
    rend = p + length
    if p >= rend:
        _record_error(index, h.position, k, rstart - start, "empty record")
    p += 1  # attributes: unused
    n = pylog_varlong_decode(p, rend, &ts_delta)
    if n < 0:
        _record_error(index, h.position, k, rstart - start, "bad timestampDelta")
    p += n
    n = pylog_varint_decode(p, rend, &offset_delta)
    if n < 0:
        _record_error(index, h.position, k, rstart - start, "bad offsetDelta")
    p += n
    rec = Record.__new__(Record)
    rec.offset = h.base_offset + offset_delta
    if h.attributes & ATTR_TIMESTAMP_TYPE:
        rec.timestamp = h.max_timestamp  # LogAppendTime: the batch's time for all
    else:
        rec.timestamp = h.base_timestamp + ts_delta
    rec.key = _bytes_field(&p, rend, &err)
    rec.value = _bytes_field(&p, rend, &err)
    if err:
        _record_error(index, h.position, k, rstart - start, "bad key or value length")
    n = pylog_varint_decode(p, rend, &hcount)
    if n < 0 or hcount < 0 or <int64_t>hcount * 2 > rend - p - n:
        _record_error(index, h.position, k, rstart - start, "bad headers count")
    p += n
    if hcount:
        headers = []
        for j in range(hcount):
            n = pylog_varint_decode(p, rend, &hklen)
            if n < 0 or hklen < 0 or hklen > rend - p - n:
                _record_error(index, h.position, k, rstart - start,
                              "bad (or null) header key length")
            p += n
            try:
                hkey = PyUnicode_DecodeUTF8(<const char *>p, hklen, NULL)
            except UnicodeDecodeError:
                _record_error(index, h.position, k, rstart - start, "header key is not UTF-8")
            p += hklen
            hval = _bytes_field(&p, rend, &err)
            if err:
                _record_error(index, h.position, k, rstart - start, "bad header value length")
            headers.append((hkey, hval))
        rec._headers = headers
    if p != rend:
        _record_error(index, h.position, k, rstart - start,
                      f"fields end {rend - p} bytes before the record's length")
    pp[0] = p
    return rec


@cython.final
cdef class RecordIterator:
    """Decodes a batch's records one at a time (objects are created as the
    consumer asks, so they are freed and reused while still in cache).

    Holds the buffer (or the decompressed bytes) until exhausted; every field
    is bounds-checked, a corrupt record raises CorruptBatchError when reached.
    """
    cdef Py_buffer view
    cdef bint has_view
    cdef object data  # the decompressed records section, if compressed
    cdef const uint8_t *start
    cdef const uint8_t *p
    cdef const uint8_t *end
    cdef batch_header h
    cdef Py_ssize_t index
    cdef int32_t k

    def __dealloc__(self):
        if self.has_view:
            PyBuffer_Release(&self.view)

    cdef int _begin(self) except -1:
        if <int64_t>self.h.record_count * MIN_RECORD > self.end - self.start:
            _record_error(self.index, self.h.position, 0, 0,
                          f"records count {self.h.record_count} cannot fit in "
                          f"{self.end - self.start} bytes")
        self.p = self.start
        return 0

    cdef void _release(self) noexcept:
        if self.has_view:
            self.has_view = False
            PyBuffer_Release(&self.view)
        self.data = None
        self.start = self.p = self.end = NULL

    def __iter__(self):
        return self

    def __next__(self) -> Record:
        cdef Record rec
        if self.k >= self.h.record_count:
            if self.p != self.end:
                self._release_after_error()
            self._release()
            raise StopIteration
        # On a corrupt record this raises and stays put (p only advances on
        # success): asking again raises again.  No try block on the hot path.
        rec = _parse_one(&self.p, self.start, self.end, &self.h, self.index, self.k)
        self.k += 1
        return rec

    cdef int _release_after_error(self) except -1:
        cdef Py_ssize_t left = self.end - self.p, at = self.p - self.start
        self._release()
        _record_error(self.index, self.h.position, self.h.record_count, at,
                      f"{left} bytes left over after the last record")
        return -1

    def __length_hint__(self) -> int:
        return max(self.h.record_count - self.k, 0)


cdef class Batch(BatchInfo):
    """A validated batch in a buffer; :meth:`records` decodes its records."""
    cdef object _owner
    cdef Py_ssize_t _index

    def records(self) -> RecordIterator:
        """An iterator over the batch's records (decompressed if needed)."""
        cdef RecordIterator it = RecordIterator.__new__(RecordIterator)
        cdef const uint8_t *p
        cdef bytes data
        it.h = self.h
        it.index = self._index
        _get_buffer(self._owner, &it.view, PyBUF_SIMPLE)
        it.has_view = True
        if self.h.position + self.h.size > it.view.len:
            it._release()
            raise CorruptBatchError(
                f"batch {self._index} at byte {self.h.position}: buffer shrank under it",
                batch_index=self._index, position=self.h.position, check="truncated")
        p = <const uint8_t *>it.view.buf + self.h.position
        if not self.h.attributes & ATTR_COMPRESSION_MASK:
            it.start = p + HEADER_SIZE
            it.end = p + self.h.size
            it._begin()
            return it
        data = PyBytes_FromStringAndSize(<const char *>p + HEADER_SIZE, self.h.size - HEADER_SIZE)
        it._release()
        try:
            data = _decompress(self.h.attributes & ATTR_COMPRESSION_MASK, data)
        except CodecError as exc:
            raise CorruptBatchError(
                f"batch {self._index} at byte {self.h.position}: {exc}",
                batch_index=self._index, position=self.h.position,
                check="compression") from exc
        it.data = data
        it.start = <const uint8_t *>PyBytes_AS_STRING(data)
        it.end = it.start + len(data)
        it._begin()
        return it

    def __iter__(self):
        return self.records()


def read_batches(buf, *, bint strict=False):
    """Yield each batch of ``buf`` (checked as by :func:`validate`) as a Batch."""
    cdef Py_buffer view
    cdef batch_header h
    cdef Py_ssize_t pos = 0, index = 0, n
    cdef Batch batch
    while True:
        _get_buffer(buf, &view, PyBUF_SIMPLE)
        try:
            n = view.len
            if pos < n:
                _check(<const uint8_t *>view.buf, n, pos, index, strict, &h)
        finally:
            PyBuffer_Release(&view)
        if pos >= n:
            return
        batch = Batch.__new__(Batch)
        batch.h = h
        batch._owner = buf
        batch._index = index
        yield batch
        pos += h.size
        index += 1


def iter_records(buf, *, bint strict=False):
    """Yield every record of every batch in ``buf``."""
    for batch in read_batches(buf, strict=strict):
        yield from batch.records()


# -- building -----------------------------------------------------------------

cdef class BatchBuilder:
    """Builds one v2 batch: ``append()`` records, then ``build()`` the bytes.

    baseTimestamp is the first record's timestamp and maxTimestamp the
    largest (as Kafka's builder does); offset deltas count up from 0 unless
    given (they must increase, gaps allowed as in compacted batches).  With
    ``delete_horizon_ms`` the batch is one the log cleaner leaves keeping
    tombstones (KIP-534): attribute bit 6, the horizon as baseTimestamp,
    record timestamps as deltas from it.
    """
    cdef int compression, timestamp_type
    cdef int64_t base_offset, producer_id
    cdef int32_t leader_epoch, base_sequence
    cdef int16_t producer_epoch
    cdef bint transactional, control, has_horizon
    cdef int64_t horizon
    cdef uint8_t *buf
    cdef Py_ssize_t length, capacity
    cdef int32_t count, last_delta
    cdef int64_t base_ts, max_ts

    def __init__(self, int compression=0, int timestamp_type=0, int64_t base_offset=0,
                 int32_t partition_leader_epoch=-1, int64_t producer_id=-1,
                 int16_t producer_epoch=-1, int32_t base_sequence=-1,
                 bint is_transactional=False, bint is_control=False,
                 delete_horizon_ms=None) -> None:
        if not 0 <= compression <= 4:
            raise ValueError(f"unknown compression codec {compression}")
        if timestamp_type not in (0, 1):
            raise ValueError(f"timestamp_type must be 0 or 1, not {timestamp_type}")
        self.compression = compression
        self.timestamp_type = timestamp_type
        self.base_offset = base_offset
        self.leader_epoch = partition_leader_epoch
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.transactional = is_transactional
        self.control = is_control
        self.has_horizon = delete_horizon_ms is not None
        self.horizon = delete_horizon_ms if self.has_horizon else -1
        self.length = 0
        self.count = 0
        self.last_delta = -1

    def __dealloc__(self):
        free(self.buf)

    def __len__(self) -> int:
        return self.count

    cdef int _reserve(self, Py_ssize_t extra) except -1:
        cdef Py_ssize_t cap = self.capacity
        cdef uint8_t *nbuf
        if self.length + extra <= cap:
            return 0
        while cap < self.length + extra:
            cap = cap * 2 if cap else 4096
        nbuf = <uint8_t *>realloc(self.buf, cap)
        if nbuf == NULL:
            raise MemoryError()
        self.buf = nbuf
        self.capacity = cap
        return 0

    cdef inline void _put(self, const void *data, Py_ssize_t n) noexcept:
        memcpy(self.buf + self.length, data, n)
        self.length += n

    cdef inline void _put_varint(self, int32_t v) noexcept:
        self.length += pylog_varint_encode(v, self.buf + self.length)

    def append(self, int64_t timestamp, key, value, headers=(), offset_delta=None) -> None:
        """Add a record; ``key``/``value`` are bytes-like or None, ``headers``
        (str|bytes, bytes-like|None) pairs."""
        cdef int64_t delta = self.last_delta + 1 if offset_delta is None else offset_delta
        cdef int64_t ts_delta, body
        cdef list hdrs = []
        cdef Py_buffer kv, vv
        cdef bint has_k = key is not None, has_v = value is not None
        if delta < 0 or delta > 0x7FFFFFFF or (self.count and delta <= self.last_delta):
            raise ValueError(f"offset delta {delta} must exceed the previous {self.last_delta}")
        for hk, hv in headers:
            if isinstance(hk, str):
                hk = (<str>hk).encode("utf-8")
            hdrs.append((bytes(hk), None if hv is None else bytes(hv)))
        if self.count == 0:
            self.base_ts = self.max_ts = timestamp
            if self.has_horizon:
                self.base_ts = self.horizon
        ts_delta = timestamp - self.base_ts
        kv.len = vv.len = 0
        if has_k:
            _get_buffer(key, &kv, PyBUF_SIMPLE)
        try:
            if has_v:
                _get_buffer(value, &vv, PyBUF_SIMPLE)
            try:
                body = (1 + pylog_varlong_size(ts_delta) + pylog_varint_size(<int32_t>delta)
                        + (pylog_varint_size(<int32_t>kv.len) + kv.len if has_k else 1)
                        + (pylog_varint_size(<int32_t>vv.len) + vv.len if has_v else 1)
                        + pylog_varint_size(len(hdrs)))
                for hk, hv in hdrs:
                    body += pylog_varint_size(len(hk)) + len(hk)
                    body += 1 if hv is None else pylog_varint_size(len(hv)) + len(hv)
                if body > 0x7FFFFFFF - 64:
                    raise ValueError(f"record of {body} bytes is too large")
                self._reserve(PYLOG_VARINT32_MAX + body)
                self._put_varint(<int32_t>body)
                self.buf[self.length] = 0  # attributes
                self.length += 1
                self.length += pylog_varlong_encode(ts_delta, self.buf + self.length)
                self._put_varint(<int32_t>delta)
                if has_k:
                    self._put_varint(<int32_t>kv.len)
                    self._put(kv.buf, kv.len)
                else:
                    self._put_varint(-1)
                if has_v:
                    self._put_varint(<int32_t>vv.len)
                    self._put(vv.buf, vv.len)
                else:
                    self._put_varint(-1)
                self._put_varint(<int32_t>len(hdrs))
                for hk, hv in hdrs:
                    self._put_varint(<int32_t>len(hk))
                    self._put(PyBytes_AS_STRING(hk), len(hk))
                    if hv is None:
                        self._put_varint(-1)
                    else:
                        self._put_varint(<int32_t>len(hv))
                        self._put(PyBytes_AS_STRING(hv), len(hv))
            finally:
                if has_v:
                    PyBuffer_Release(&vv)
        finally:
            if has_k:
                PyBuffer_Release(&kv)
        if timestamp > self.max_ts:
            self.max_ts = timestamp
        self.last_delta = <int32_t>delta
        self.count += 1

    def build(self) -> bytes:
        """The batch's bytes (the builder can keep appending afterwards)."""
        cdef object payload
        cdef const uint8_t *src
        cdef Py_ssize_t plen
        cdef Py_buffer pv
        cdef uint8_t *out
        cdef bytes result
        if self.count == 0:
            raise ValueError("cannot build a batch without records")
        if self.compression:
            payload = _compress(self.compression,
                                PyBytes_FromStringAndSize(<const char *>self.buf, self.length))
            src = <const uint8_t *>PyBytes_AS_STRING(payload)
            plen = len(payload)
        else:
            src = self.buf
            plen = self.length
        if plen > 0x7FFFFFFF - HEADER_SIZE:
            raise ValueError(f"batch of {plen} bytes is too large")
        result = PyBytes_FromStringAndSize(NULL, HEADER_SIZE + plen)
        out = <uint8_t *>PyBytes_AS_STRING(result)
        wr64(out, <uint64_t>self.base_offset)
        wr32(out + OFF_BATCH_LENGTH, <uint32_t>(HEADER_SIZE - LOG_OVERHEAD + plen))
        wr32(out + OFF_LEADER_EPOCH, <uint32_t>self.leader_epoch)
        out[OFF_MAGIC] = 2
        wr16(out + OFF_ATTRIBUTES, <uint16_t>(
            self.compression
            | (ATTR_TIMESTAMP_TYPE if self.timestamp_type else 0)
            | (ATTR_TRANSACTIONAL if self.transactional else 0)
            | (ATTR_CONTROL if self.control else 0)
            | (ATTR_DELETE_HORIZON if self.has_horizon else 0)))
        wr32(out + OFF_LAST_OFFSET_DELTA, <uint32_t>self.last_delta)
        wr64(out + OFF_BASE_TIMESTAMP, <uint64_t>self.base_ts)
        wr64(out + OFF_MAX_TIMESTAMP, <uint64_t>self.max_ts)
        wr64(out + OFF_PRODUCER_ID, <uint64_t>self.producer_id)
        wr16(out + OFF_PRODUCER_EPOCH, <uint16_t>self.producer_epoch)
        wr32(out + OFF_BASE_SEQUENCE, <uint32_t>self.base_sequence)
        wr32(out + OFF_RECORD_COUNT, <uint32_t>self.count)
        memcpy(out + HEADER_SIZE, src, plen)
        wr32(out + OFF_CRC, pylog_crc32c(0, out + OFF_ATTRIBUTES,
                                         <size_t>(HEADER_SIZE + plen - OFF_ATTRIBUTES)))
        return result


def build_batch(records, **kwargs) -> bytes:
    """One batch from ``(timestamp, key, value[, headers])`` tuples; keyword
    arguments as for :class:`BatchBuilder`."""
    builder = BatchBuilder(**kwargs)
    for rec in records:
        builder.append(*rec)
    return builder.build()
