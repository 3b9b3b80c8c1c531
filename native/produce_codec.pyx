"""Produce requests in, produce responses out, in C: the broker's busiest API.

The generic codec (:mod:`pylog.protocol`) decodes any request into objects
through generated Python.  Under produce load each request arrives after
hundreds of kilobytes of copies (socket, CRC32C, page cache) have pushed that
Python out of the CPU caches, and decoding and encoding a produce exchange then
cost 100 us or more.  Here both are one pass in C over the bytes:

* :func:`decode_produce_request` reads a whole frame (header and body,
  versions 3-11, header v1 or v2) into plain tuples; every partition's record
  set is a ``memoryview`` slice of the frame, never a copy;
* :func:`encode_produce_response` writes the framed response (size prefix,
  header v0 or v1, body) for the same versions from tuples.

The generic codec is this module's twin: the tests decode and encode the same
vectors (every version, nulls, tagged fields, unicode, truncations and
mutations) with both and compare values, bytes and which inputs fail.
Malformed input raises ``ProtocolError``, as the generic codec does; lengths
and counts are checked against the bytes left before anything is allocated.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy

from bigendian cimport rd16, rd32, wr16, wr32, wr64
from cvarint cimport pylog_uvarint32_encode, pylog_uvarint32_size

from pylog.errors import ProtocolError

cdef extern from "Python.h":
    const char *PyUnicode_AsUTF8AndSize(object s, Py_ssize_t *size) except NULL

cdef enum:
    _API_KEY = 0
    _MIN_VERSION = 3  # record batches (magic 2): the only format pylog stores
    _MAX_VERSION = 11
    FIRST_FLEXIBLE = 9  # compact lengths, tagged fields, header v2 / v1

API_KEY = _API_KEY
MIN_VERSION = _MIN_VERSION
MAX_VERSION = _MAX_VERSION


# -- reading ---------------------------------------------------------------------------

cdef struct Cursor:
    const uint8_t *buf
    Py_ssize_t pos
    Py_ssize_t end
    int version
    bint flexible  # compact lengths (off for the header's client id)


cdef int _fail(Cursor *c, str what) except -1:
    raise ProtocolError(f"Produce v{c.version}: {what}")


cdef inline int _need(Cursor *c, Py_ssize_t size, str what) except -1:
    if c.end - c.pos < size:
        _fail(c, what)
    return 0


cdef inline int16_t _int16(Cursor *c) except? -1:
    _need(c, 2, "truncated int16")
    c.pos += 2
    return <int16_t>rd16(c.buf + c.pos - 2)


cdef inline int32_t _int32(Cursor *c) except? -1:
    _need(c, 4, "truncated int32")
    c.pos += 4
    return <int32_t>rd32(c.buf + c.pos - 4)


cdef inline int64_t _uvarint(Cursor *c) except -1:
    """An unsigned varint of at most 5 bytes (Kafka's 32-bit ones).  Not
    varint.h's decoder: like Kafka's reader and the generic codec, this one
    does not refuse the fifth byte's high bits, and the twins must agree."""
    cdef uint64_t value = 0
    cdef int shift = 0
    cdef uint8_t b
    while True:
        _need(c, 1, "truncated unsigned varint")
        b = c.buf[c.pos]
        c.pos += 1
        value |= <uint64_t>(b & 0x7F) << shift
        if not b & 0x80:
            return <int64_t>value
        shift += 7
        if shift >= 35:
            _fail(c, "unsigned varint longer than 5 bytes")


cdef inline int64_t _length(Cursor *c, bint wide) except -2:
    """A length or count, -1 for null: compact (uvarint - 1) in flexible
    versions, int16 (strings) or int32 (arrays, records) before."""
    cdef int64_t n
    if c.flexible:
        return _uvarint(c) - 1
    n = _int32(c) if wide else _int16(c)
    if n < -1:
        _fail(c, f"negative length {n}")
    return n


cdef object _string(Cursor *c, bint nullable, str field):
    cdef int64_t n = _length(c, False)
    if n < 0:
        if not nullable:
            _fail(c, f"null in non-nullable field {field}")
        return None
    if n > c.end - c.pos:
        _fail(c, f"{field} longer than the bytes left")
    try:
        s = PyUnicode_DecodeUTF8(<const char *>(c.buf + c.pos), n, NULL)
    except UnicodeDecodeError as exc:
        _fail(c, f"{field}: {exc}")
    c.pos += n
    return s


cdef int _skip_tags(Cursor *c) except -1:
    """A tagged-field section: Produce requests define no tags, so all are skipped."""
    cdef int64_t count = _uvarint(c)
    cdef int64_t size
    while count > 0:
        _uvarint(c)  # the tag
        size = _uvarint(c)
        if size > c.end - c.pos:
            _fail(c, "tagged field longer than the bytes left")
        c.pos += size
        count -= 1
    return 0


cdef int64_t _count(Cursor *c, Py_ssize_t min_size, str field) except -2:
    cdef int64_t n = _length(c, True)
    if n < 0:
        _fail(c, f"null in non-nullable field {field}")
    if n * min_size > c.end - c.pos:
        _fail(c, f"array {field} longer than the bytes left")
    return n


def decode_produce_request(frame):
    """A Produce request frame (no size prefix), versions 3-11, as
    ``(version, correlation_id, client_id, transactional_id, acks, timeout_ms,
    topics)``; ``topics`` is ``[(name, [(index, records), ...]), ...]`` with
    ``records`` a memoryview slice of ``frame`` (None when null).

    Bytes after the last field are ignored, as Kafka's broker ignores them
    (the generic codec's ``allow_trailing``).
    """
    cdef Py_buffer view
    cdef Cursor c
    cdef bint flexible
    cdef int64_t n_topics, n_parts, size
    cdef int32_t index, correlation_id, timeout_ms
    cdef int16_t acks
    cdef int version
    cdef Py_ssize_t start
    PyObject_GetBuffer(frame, &view, PyBUF_SIMPLE)
    try:
        c.buf = <const uint8_t *>view.buf
        c.pos = 0
        c.end = view.len
        c.version = 0
        c.flexible = False
        if c.end < 8:
            raise ProtocolError(f"request of {c.end} bytes is shorter than a request header")
        if _int16(&c) != _API_KEY:
            raise ValueError("not a Produce request")
        version = _int16(&c)
        if not _MIN_VERSION <= version <= _MAX_VERSION:
            raise ValueError(f"Produce v{version} has no native codec")
        c.version = version
        flexible = version >= FIRST_FLEXIBLE
        correlation_id = _int32(&c)
        # Request header v1 / v2: the client id is a classic nullable string
        # even in header v2; v2 adds a tagged-field section.
        client_id = _string(&c, True, "client_id")
        c.flexible = flexible
        if flexible:
            _skip_tags(&c)
        transactional_id = _string(&c, True, "TransactionalId")
        acks = _int16(&c)
        timeout_ms = _int32(&c)
        mv = None
        topics = []
        # A topic is at least a name and a partition count (and its tags):
        # 1 + 1 + 1 bytes compact, 2 + 4 classic; a partition 4 + 1 (+ 1), or 4 + 4.
        n_topics = _count(&c, 3 if flexible else 6, "TopicData")
        while n_topics > 0:
            n_topics -= 1
            name = _string(&c, False, "Name")
            partitions = []
            n_parts = _count(&c, 6 if flexible else 8, "PartitionData")
            while n_parts > 0:
                n_parts -= 1
                index = _int32(&c)
                size = _length(&c, True)
                if size < 0:
                    records = None
                else:
                    if size > c.end - c.pos:
                        _fail(&c, "Records longer than the bytes left")
                    if mv is None:
                        mv = memoryview(frame)
                        if mv.format != "B" or mv.ndim != 1:
                            mv = mv.cast("B")
                    start = c.pos
                    c.pos += size
                    records = mv[start:c.pos]
                if flexible:
                    _skip_tags(&c)
                partitions.append((index, records))
            if flexible:
                _skip_tags(&c)
            topics.append((name, partitions))
        if flexible:
            _skip_tags(&c)
        return (version, correlation_id, client_id, transactional_id, acks, timeout_ms, topics)
    finally:
        PyBuffer_Release(&view)


# -- writing ---------------------------------------------------------------------------

cdef inline uint8_t *_put16(uint8_t *p, int16_t v) noexcept:
    wr16(p, <uint16_t>v)
    return p + 2


cdef inline uint8_t *_put32(uint8_t *p, int32_t v) noexcept:
    wr32(p, <uint32_t>v)
    return p + 4


cdef inline uint8_t *_put64(uint8_t *p, int64_t v) noexcept:
    wr64(p, <uint64_t>v)
    return p + 8


cdef inline Py_ssize_t _length_size(Py_ssize_t n, bint flexible, int classic) except -1:
    """Bytes of a length or count prefix (n = -1: null); a length its prefix
    cannot hold is refused, as the generic codec refuses it."""
    if flexible:
        if n + 1 > 0xFFFFFFFF:
            raise ProtocolError(f"length {n} does not fit an unsigned varint")
        return pylog_uvarint32_size(<uint32_t>(n + 1))
    if n > (0x7FFF if classic == 2 else 0x7FFFFFFF):
        raise ProtocolError(f"length {n} does not fit an int{classic * 8}")
    return classic


cdef int64_t _int(object value, int bits) except? -1:
    """An integer field's value, checked as the generic codec's struct packing
    checks it: ints only (bool is one; a float is refused, not truncated),
    within the field's width."""
    if not isinstance(value, int):
        raise TypeError(f"an integer is required, not {type(value).__name__}")
    cdef int64_t v = value  # OverflowError past int64
    cdef int64_t half = (<int64_t>1) << (bits - 1) if bits < 64 else 0
    if bits < 64 and not -half <= v < half:
        raise OverflowError(f"{v} does not fit an int{bits}")
    return v


cdef inline uint8_t *_put_length(uint8_t *p, Py_ssize_t n, bint flexible, bint wide):
    if flexible:
        return p + pylog_uvarint32_encode(<uint32_t>(n + 1), p)
    return _put32(p, <int32_t>n) if wide else _put16(p, <int16_t>n)


cdef inline uint8_t *_put_string(uint8_t *p, const char *s, Py_ssize_t n, bint flexible):
    p = _put_length(p, n, flexible, False)
    if n > 0:
        memcpy(p, s, n)
    return p + (n if n > 0 else 0)


def encode_produce_response(int version, object correlation_id, list responses,
                            object throttle_time_ms=0):
    """The framed Produce response (size prefix included) for versions 3-11.

    ``responses`` is ``[(name, [(index, error_code, base_offset,
    log_append_time_ms, log_start_offset, error_message), ...]), ...]``.
    RecordErrors is always empty, and the v10+ tagged fields (CurrentLeader,
    NodeEndpoints) are left at their defaults: one node never redirects a
    producer elsewhere.
    """
    if not _MIN_VERSION <= version <= _MAX_VERSION:
        raise ValueError(f"Produce v{version} has no native codec")
    cdef bint flexible = version >= FIRST_FLEXIBLE
    cdef int32_t cid = <int32_t>_int(correlation_id, 32)
    cdef int32_t throttle = <int32_t>_int(throttle_time_ms, 32)
    cdef Py_ssize_t size = 4 + 4 + (1 if flexible else 0)  # size prefix, correlation id, tags
    cdef Py_ssize_t n
    cdef const char *s
    cdef tuple p
    cdef list parts
    # First pass: the size, and every string checked before anything is written.
    size += _length_size(len(responses), flexible, 4)
    for name, parts in responses:
        PyUnicode_AsUTF8AndSize(name, &n)
        size += _length_size(n, flexible, 2) + n
        size += _length_size(len(parts), flexible, 4)
        for p in parts:
            if len(p) != 6:
                raise ValueError("a partition response is 6 values")
            # Types and ranges before anything is written (the casts below
            # would truncate a float).
            _int(p[0], 32), _int(p[1], 16), _int(p[2], 64), _int(p[3], 64), _int(p[4], 64)
            size += 4 + 2 + 8 + 8  # index, error code, base offset, log append time
            if version >= 5:
                size += 8  # log start offset
            if version >= 8:
                size += 1 if flexible else 4  # RecordErrors: empty
                msg = p[5]
                if msg is None:
                    size += 1 if flexible else 2
                else:
                    PyUnicode_AsUTF8AndSize(msg, &n)
                    size += _length_size(n, flexible, 2) + n
            if flexible:
                size += 1  # tags
        if flexible:
            size += 1  # tags
    size += 4  # throttle time
    if flexible:
        size += 1  # tags
    out = PyBytes_FromStringAndSize(NULL, size)
    cdef uint8_t *start = <uint8_t *>PyBytes_AS_STRING(out)
    cdef uint8_t *w = start
    w = _put32(w, <int32_t>(size - 4))
    w = _put32(w, cid)
    if flexible:
        w[0] = 0
        w += 1
    w = _put_length(w, len(responses), flexible, True)
    for name, parts in responses:
        s = PyUnicode_AsUTF8AndSize(name, &n)
        w = _put_string(w, s, n, flexible)
        w = _put_length(w, len(parts), flexible, True)
        for p in parts:
            w = _put32(w, <int32_t>p[0])
            w = _put16(w, <int16_t>p[1])
            w = _put64(w, <int64_t>p[2])
            w = _put64(w, <int64_t>p[3])
            if version >= 5:
                w = _put64(w, <int64_t>p[4])
            if version >= 8:
                w = _put_length(w, 0, flexible, True)
                msg = p[5]
                if msg is None:
                    w = _put_length(w, -1, flexible, False)
                else:
                    s = PyUnicode_AsUTF8AndSize(msg, &n)
                    w = _put_string(w, s, n, flexible)
            if flexible:
                w[0] = 0
                w += 1
        if flexible:
            w[0] = 0
            w += 1
    w = _put32(w, throttle)
    if flexible:
        w[0] = 0
        w += 1
    if w - start != size:  # a bug here would send a corrupt frame: refuse instead
        raise AssertionError(f"produce response: wrote {w - start} of {size} bytes")
    return out
