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
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t
from libc.string cimport memcpy

from wire cimport (
    Cursor,
    PyUnicode_AsUTF8AndSize,
    check_partition_answer,
    checked_int,
    fail,
    length_size,
    put16,
    put32,
    put64,
    put_length,
    read_count,
    read_int16,
    read_int32,
    read_length,
    read_request_header,
    read_string,
    skip_tags,
)

cdef enum:
    _API_KEY = 0
    _MIN_VERSION = 3  # record batches (magic 2): the only format pylog stores
    _MAX_VERSION = 11
    FIRST_FLEXIBLE = 9  # compact lengths, tagged fields, header v2 / v1

API_KEY = _API_KEY
MIN_VERSION = _MIN_VERSION
MAX_VERSION = _MAX_VERSION


# -- reading ---------------------------------------------------------------------------

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
    cdef int32_t index, timeout_ms
    cdef int16_t acks
    cdef Py_ssize_t start
    cdef int version
    PyObject_GetBuffer(frame, &view, PyBUF_SIMPLE)
    try:
        version, correlation_id, client_id = read_request_header(
            &c, view.buf, view.len, b"Produce", _API_KEY, _MIN_VERSION, _MAX_VERSION,
            FIRST_FLEXIBLE)
        flexible = c.flexible
        transactional_id = read_string(&c, True, "TransactionalId")
        acks = read_int16(&c)
        timeout_ms = read_int32(&c)
        mv = None
        topics = []
        # A topic is at least a name and a partition count (and its tags):
        # 1 + 1 + 1 bytes compact, 2 + 4 classic; a partition 4 + 1 (+ 1), or 4 + 4.
        n_topics = read_count(&c, 3 if flexible else 6, "TopicData")
        while n_topics > 0:
            n_topics -= 1
            name = read_string(&c, False, "Name")
            partitions = []
            n_parts = read_count(&c, 6 if flexible else 8, "PartitionData")
            while n_parts > 0:
                n_parts -= 1
                index = read_int32(&c)
                size = read_length(&c, True)
                if size < 0:
                    records = None
                else:
                    if size > c.end - c.pos:
                        fail(&c, "Records longer than the bytes left")
                    if mv is None:
                        mv = memoryview(frame)
                        if mv.format != "B" or mv.ndim != 1:
                            mv = mv.cast("B")
                    start = c.pos
                    c.pos += size
                    records = mv[start:c.pos]
                if flexible:
                    skip_tags(&c)
                partitions.append((index, records))
            if flexible:
                skip_tags(&c)
            topics.append((name, partitions))
        if flexible:
            skip_tags(&c)
        return (version, correlation_id, client_id, transactional_id, acks, timeout_ms, topics)
    finally:
        PyBuffer_Release(&view)


# -- writing ---------------------------------------------------------------------------

cdef inline uint8_t *_put_string(uint8_t *p, const char *s, Py_ssize_t n, bint flexible):
    p = put_length(p, n, flexible, False)
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
    cdef int32_t cid = <int32_t>checked_int(correlation_id, 32)
    cdef int32_t throttle = <int32_t>checked_int(throttle_time_ms, 32)
    cdef Py_ssize_t size = 4 + 4 + (1 if flexible else 0)  # size prefix, correlation id, tags
    cdef Py_ssize_t n
    cdef const char *s
    cdef tuple p
    cdef list parts
    # First pass: the size, and every string checked before anything is written.
    size += length_size(len(responses), flexible, 4)
    for name, parts in responses:
        PyUnicode_AsUTF8AndSize(name, &n)
        size += length_size(n, flexible, 2) + n
        size += length_size(len(parts), flexible, 4)
        for p in parts:
            # Types and ranges before anything is written (the casts would
            # truncate a float).
            check_partition_answer(p, 6)
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
                    size += length_size(n, flexible, 2) + n
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
    w = put32(w, <int32_t>(size - 4))
    w = put32(w, cid)
    if flexible:
        w[0] = 0
        w += 1
    w = put_length(w, len(responses), flexible, True)
    for name, parts in responses:
        s = PyUnicode_AsUTF8AndSize(name, &n)
        w = _put_string(w, s, n, flexible)
        w = put_length(w, len(parts), flexible, True)
        for p in parts:
            w = put32(w, <int32_t>p[0])
            w = put16(w, <int16_t>p[1])
            w = put64(w, <int64_t>p[2])
            w = put64(w, <int64_t>p[3])
            if version >= 5:
                w = put64(w, <int64_t>p[4])
            if version >= 8:
                w = put_length(w, 0, flexible, True)
                msg = p[5]
                if msg is None:
                    w = put_length(w, -1, flexible, False)
                else:
                    s = PyUnicode_AsUTF8AndSize(msg, &n)
                    w = _put_string(w, s, n, flexible)
            if flexible:
                w[0] = 0
                w += 1
        if flexible:
            w[0] = 0
            w += 1
    w = put32(w, throttle)
    if flexible:
        w[0] = 0
        w += 1
    if w - start != size:  # a bug here would send a corrupt frame: refuse instead
        raise AssertionError(f"produce response: wrote {w - start} of {size} bytes")
    return out
