"""Fetch requests in, fetch responses out, in C: the consumer's side of the broker.

Every consumer polls with Fetch, most of them long-polling, so the broker
decodes a Fetch request and encodes its response far more often than it moves
records for it; through the generic codec (:mod:`pylog.protocol`) each exchange
builds and walks a message object per partition.  Here both are one pass in C:

* :func:`decode_fetch_request` reads a whole frame (header and body, versions
  4-12, header v1 or v2) into plain tuples; what a broker without replicas
  does not use (replica id, last fetched epochs, rack id, cluster id) is
  read, checked and dropped, and no tagged field is copied;
* :func:`encode_fetch_response` writes the framed response (size prefix,
  header v0 or v1, body) for the same versions from tuples, leaving each
  partition's records *region* (a :class:`~pylog.net.framing.FileRegion`, sent
  with sendfile) in the output as its own piece, exactly as
  ``frame_parts`` cuts the generic encoder's pieces.

The generic codec is this module's twin: the tests decode and encode the same
vectors (every version, nulls, tagged fields, unicode, truncations and
mutations) with both and compare values, bytes and which inputs fail.
Malformed input raises ``ProtocolError``, as the generic codec does; lengths
and counts are checked against the bytes left before anything is allocated.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.mem cimport PyMem_Free, PyMem_Realloc
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t
from libc.string cimport memcpy

from bigendian cimport rd32, rd64
from wire cimport (
    Cursor,
    PyUnicode_AsUTF8AndSize,
    check_partition_answer,
    checked_int,
    fail,
    length_size,
    need,
    put16,
    put32,
    put64,
    put_length,
    read_count,
    read_request_header,
    read_string,
    read_uvarint,
    skip_tags,
)

from pylog.errors import ProtocolError

cdef enum:
    _API_KEY = 1
    _MIN_VERSION = 4  # record batches and last_stable_offset
    _MAX_VERSION = 12  # v13+ name topics by id only
    FIRST_FLEXIBLE = 12  # compact lengths, tagged fields, header v2 / v1
    CLUSTER_ID_TAG = 0  # the request's one tagged field in v12

# The largest frame: its size prefix (an int32) and the prefix's 4 bytes.
cdef Py_ssize_t MAX_FRAME = 2147483651

API_KEY = _API_KEY
MIN_VERSION = _MIN_VERSION
MAX_VERSION = _MAX_VERSION


# -- reading ---------------------------------------------------------------------------

cdef int _skip_request_tags(Cursor *c) except -1:
    """The request's own tagged-field section.  Tag 0 is ClusterId (a
    nullable compact string): read, checked and dropped as the generic codec
    decodes it, which refuses one that does not fill its field exactly."""
    cdef int64_t count, tag, size
    cdef Py_ssize_t field_end
    count = read_uvarint(c)
    while count > 0:
        tag = read_uvarint(c)
        size = read_uvarint(c)
        if size > c.end - c.pos:
            fail(c, "tagged field longer than the bytes left")
        field_end = c.pos + size
        if tag == CLUSTER_ID_TAG:
            read_string(c, True, "ClusterId")
            if c.pos != field_end:
                fail(c, "tagged field ClusterId size mismatch")
        else:
            c.pos = field_end
        count -= 1
    return 0


cdef object _decode(object frame):
    cdef Py_buffer view
    cdef Cursor c
    cdef bint flexible
    cdef int64_t n_topics, n_parts
    cdef int32_t leader_epoch
    cdef int32_t max_wait_ms, min_bytes, max_bytes
    cdef int32_t session_id = 0, session_epoch = -1, replica_id = -1
    cdef int8_t isolation_level
    cdef Py_ssize_t head, part_size, offset_at
    cdef int version
    cdef const uint8_t *p
    cdef list topics, partitions, forgotten, gone
    cdef int64_t i
    PyObject_GetBuffer(frame, &view, PyBUF_SIMPLE)
    try:
        version, correlation_id, client_id = read_request_header(
            &c, view.buf, view.len, b"Fetch", _API_KEY, _MIN_VERSION, _MAX_VERSION,
            FIRST_FLEXIBLE)
        flexible = c.flexible

        # ReplicaId, MaxWaitMs, MinBytes, MaxBytes, IsolationLevel, and from
        # v7 SessionId, SessionEpoch.
        head = 25 if version >= 7 else 17
        need(&c, head, "truncated request fields")
        p = c.buf + c.pos
        replica_id = <int32_t>rd32(p)
        max_wait_ms = <int32_t>rd32(p + 4)
        min_bytes = <int32_t>rd32(p + 8)
        max_bytes = <int32_t>rd32(p + 12)
        isolation_level = <int8_t>p[16]
        if version >= 7:
            session_id = <int32_t>rd32(p + 17)
            session_epoch = <int32_t>rd32(p + 21)
        c.pos += head

        # A partition: Partition, [CurrentLeaderEpoch v9+], FetchOffset,
        # [LastFetchedEpoch v12+], [LogStartOffset v5+], PartitionMaxBytes.
        part_size = 16
        offset_at = 4
        if version >= 9:
            part_size += 4
            offset_at = 8
        if version >= 12:
            part_size += 4
        if version >= 5:
            part_size += 8

        topics = []
        # A topic is at least a name and a partition count (and its tags):
        # 1 + 1 + 1 bytes compact, 2 + 4 classic.
        n_topics = read_count(&c, 3 if flexible else 6, "Topics")
        while n_topics > 0:
            n_topics -= 1
            name = read_string(&c, False, "Topic")
            partitions = []
            n_parts = read_count(&c, part_size + flexible, "Partitions")
            while n_parts > 0:
                n_parts -= 1
                need(&c, part_size, "truncated FetchPartition")
                p = c.buf + c.pos
                c.pos += part_size
                if flexible:
                    skip_tags(&c)
                # CurrentLeaderEpoch: -1 (not known to the client) before v9.
                leader_epoch = <int32_t>rd32(p + 4) if version >= 9 else -1
                partitions.append((<int32_t>rd32(p), <int64_t>rd64(p + offset_at),
                                   <int32_t>rd32(p + part_size - 4), leader_epoch))
            if flexible:
                skip_tags(&c)
            topics.append((name, partitions))

        forgotten = []
        if version >= 7:
            # ForgottenTopicsData: what an incremental fetch session drops.
            n_topics = read_count(&c, 3 if flexible else 6, "ForgottenTopicsData")
            while n_topics > 0:
                n_topics -= 1
                name = read_string(&c, False, "Topic")
                n_parts = read_count(&c, 4, "Partitions")
                p = c.buf + c.pos
                c.pos += n_parts * 4  # within the frame: read_count checked it
                gone = [<int32_t>rd32(p + 4 * i) for i in range(n_parts)]
                if flexible:
                    skip_tags(&c)
                forgotten.append((name, gone))
        if version >= 11:
            read_string(&c, False, "RackId")
        if flexible:
            _skip_request_tags(&c)
        # Bytes after the last field are ignored, as Kafka's broker ignores them.
        return (version, correlation_id, client_id, max_wait_ms, min_bytes, max_bytes,
                isolation_level, session_id, session_epoch, topics, forgotten, replica_id)
    finally:
        PyBuffer_Release(&view)


def decode_fetch_request(frame):
    """A Fetch request frame (no size prefix), versions 4-12, as ``(version,
    correlation_id, client_id, max_wait_ms, min_bytes, max_bytes,
    isolation_level, session_id, session_epoch, topics, forgotten, replica_id)``;
    ``topics`` is ``[(name, [(partition, fetch_offset, partition_max_bytes,
    current_leader_epoch), ...]), ...]``, ``forgotten`` ``[(name, [partition,
    ...]), ...]`` (empty before v7).  ``session_id`` / ``session_epoch`` are
    0 / -1 before v7, ``current_leader_epoch`` -1 before v9.

    ``replica_id`` is the fetching broker's id (a follower), or -1 for a
    consumer.  LastFetchedEpoch, LogStartOffset,
    RackId, ClusterId and unknown tagged fields are read
    (strings checked) and dropped.  Bytes after the last field are ignored
    (the generic codec's ``allow_trailing``).  A malformed frame is a
    ProtocolError; another api key or version is a ValueError (the router
    checks both before calling).
    """
    try:
        return _decode(frame)
    except BufferError:
        # A non-contiguous view: its bytes, as the generic codec takes them.
        return _decode(memoryview(frame).tobytes())


# -- writing ---------------------------------------------------------------------------

cdef enum:
    # Records objects: a null, bytes copied inline, or a region left as its own piece.
    REC_NULL = 0
    REC_BYTES = 1
    REC_BUFFER = 2  # bytearray / memoryview
    REC_REGION = 3


cdef inline int _records_kind(object r) noexcept:
    if r is None:
        return REC_NULL
    if type(r) is bytes:
        return REC_BYTES
    if type(r) is bytearray or type(r) is memoryview:
        return REC_BUFFER
    return REC_REGION


cdef struct Split:
    Py_ssize_t bytes_before  # bytes of the byte piece that precedes the region
    Py_ssize_t region_len


cdef struct Plan:
    Split *splits
    Py_ssize_t n_splits
    Py_ssize_t cap


cdef int _add_split(Plan *plan, Py_ssize_t bytes_before, Py_ssize_t region_len) except -1:
    cdef Py_ssize_t cap
    cdef Split *grown
    if plan.n_splits == plan.cap:
        cap = plan.cap * 2 if plan.cap else 16
        grown = <Split *>PyMem_Realloc(plan.splits, cap * sizeof(Split))
        if grown == NULL:
            raise MemoryError()
        plan.splits = grown
        plan.cap = cap
    plan.splits[plan.n_splits].bytes_before = bytes_before
    plan.splits[plan.n_splits].region_len = region_len
    plan.n_splits += 1
    return 0


cdef int _overrun() except -1:
    # Only if the response changed between the two passes (a region's __len__
    # that mutates it): refuse rather than write out of bounds or a bad frame.
    raise RuntimeError("fetch response changed while it was being encoded")


cdef inline int _room(const uint8_t *w, const uint8_t *end, Py_ssize_t n) except -1:
    if end - w < n:
        _overrun()
    return 0


cdef Py_ssize_t _records_size(object records, int kind) except -1:
    """The length of inline records (bytes, bytearray, memoryview) in bytes."""
    cdef Py_buffer view
    cdef Py_ssize_t n
    if kind == REC_BYTES:
        return PyBytes_GET_SIZE(records)
    PyObject_GetBuffer(records, &view, PyBUF_SIMPLE)
    n = view.len
    PyBuffer_Release(&view)
    return n


cdef uint8_t *_put_records(uint8_t *w, const uint8_t *end, object records, int kind,
                           bint flexible) except NULL:
    """Inline records (bytes, bytearray, memoryview): length prefix and bytes."""
    cdef Py_buffer view
    cdef Py_ssize_t n
    if kind == REC_BYTES:
        n = PyBytes_GET_SIZE(records)
        _room(w, end, length_size(n, flexible, 4) + n)
        w = put_length(w, n, flexible, True)
        memcpy(w, PyBytes_AS_STRING(records), n)
        return w + n
    PyObject_GetBuffer(records, &view, PyBUF_SIMPLE)
    try:
        n = view.len
        _room(w, end, length_size(n, flexible, 4) + n)
        w = put_length(w, n, flexible, True)
        memcpy(w, view.buf, n)
        return w + n
    finally:
        PyBuffer_Release(&view)


def encode_fetch_response(int version, object correlation_id, object error_code,
                          object session_id, list topics, object throttle_time_ms=0):
    """The framed Fetch response (size prefix included) for versions 4-12.

    ``topics`` is ``[(name, [(partition_index, error_code, high_watermark,
    last_stable_offset, log_start_offset, aborted_transactions, records),
    ...]), ...]`` (tuples); ``aborted_transactions`` is None or a list of
    ``(producer_id, first_offset)`` tuples; ``records`` is None, bytes /
    bytearray / memoryview (copied), or a region: any other object with a
    ``len`` (a :class:`~pylog.net.framing.FileRegion`), whose length is
    written and which goes into the output as its own piece.
    ``throttle_time_ms`` is the client quota's (0 when none is violated);
    PreferredReadReplica is -1 and every tagged field is left at its default
    (empty sections).

    Returns the frame as one ``bytes`` object when there is no region, else
    the list ``frame_parts`` makes of the generic encoder's pieces:
    ``[bytes, region, bytes, region, ...]``, byte runs merged, with a last
    byte piece only when bytes follow the last region (always in v12: the
    tagged fields; in v4-11 not when the last partition's records are a
    region).
    """
    if not _MIN_VERSION <= version <= _MAX_VERSION:
        raise ValueError(f"Fetch v{version} has no native codec")
    cdef bint flexible = version >= FIRST_FLEXIBLE
    cdef int32_t cid = <int32_t>checked_int(correlation_id, 32)
    cdef int16_t top_error = <int16_t>checked_int(error_code, 16)
    cdef int32_t throttle = <int32_t>checked_int(throttle_time_ms, 32)
    cdef int32_t session = <int32_t>checked_int(session_id, 32)
    cdef Py_ssize_t run, total, n, k, size, split = 0
    cdef Py_ssize_t head, part_fixed, txn_size, after_aborted
    cdef const char *s
    cdef tuple topic, p, txn
    cdef list parts, aborted, regions = None, out = None
    cdef object records, piece
    cdef int kind
    cdef uint8_t *w
    cdef uint8_t *end
    cdef Plan plan
    plan.splits = NULL
    plan.n_splits = plan.cap = 0
    # Per partition: index, error code, high watermark, last stable offset,
    # [log start offset v5+]; an aborted transaction: producer id, first
    # offset, [tags v12]; after the aborted transactions: [preferred read
    # replica v11+].
    part_fixed = 4 + 2 + 8 + 8 + (8 if version >= 5 else 0)
    txn_size = 16 + flexible
    after_aborted = 4 if version >= 11 else 0
    # Size prefix, correlation id, [header tags], throttle time, [error code,
    # session id v7+], the topic count.
    head = 4 + 4 + flexible + 4 + (6 if version >= 7 else 0)
    head += length_size(len(topics), flexible, 4)

    try:
        # First pass: every value checked, the size of each byte piece.
        run = head  # bytes of the byte piece being planned
        total = 0  # bytes of the pieces before it
        for topic in topics:
            if len(topic) != 2:
                raise ValueError("a topic response is (name, partitions)")
            parts = <list?>topic[1]
            PyUnicode_AsUTF8AndSize(topic[0], &n)
            run += length_size(n, flexible, 2) + n + length_size(len(parts), flexible, 4)
            for p in parts:
                # Types and ranges before anything is written (the casts would
                # truncate a float).
                check_partition_answer(p, 7)
                run += part_fixed
                if p[5] is None:
                    run += length_size(-1, flexible, 4)
                else:
                    aborted = <list?>p[5]
                    for txn in aborted:
                        if len(txn) != 2:
                            raise ValueError("an aborted transaction is "
                                             "(producer_id, first_offset)")
                        checked_int(txn[0], 64)
                        checked_int(txn[1], 64)
                    k = len(aborted)
                    run += length_size(k, flexible, 4) + k * txn_size
                run += after_aborted
                records = p[6]
                kind = _records_kind(records)
                if kind == REC_NULL:
                    run += length_size(-1, flexible, 4)
                elif kind == REC_REGION:
                    n = len(records)
                    run += length_size(n, flexible, 4)
                    _add_split(&plan, run, n)
                    if regions is None:
                        regions = []
                    regions.append(records)
                    total += run + n
                    run = 0
                    if total > MAX_FRAME:
                        raise ProtocolError("fetch response larger than 2 GiB")
                else:
                    n = _records_size(records, kind)
                    run += length_size(n, flexible, 4) + n
                run += flexible  # partition tags
            run += flexible  # topic tags
        run += flexible  # response tags
        total += run
        if total > MAX_FRAME:
            raise ProtocolError("fetch response larger than 2 GiB")

        # Second pass: the bytes.  Every write is checked against its piece's
        # end, which cannot fail unless the input changed between the passes
        # (a region's __len__ that mutates it).
        if plan.n_splits:
            out = []
            size = plan.splits[0].bytes_before
        else:
            size = run
        piece = PyBytes_FromStringAndSize(NULL, size)
        w = <uint8_t *>PyBytes_AS_STRING(piece)
        end = w + size
        _room(w, end, head)
        w = put32(w, <int32_t>(total - 4))
        w = put32(w, cid)
        if flexible:
            w[0] = 0
            w += 1
        w = put32(w, throttle)
        if version >= 7:
            w = put16(w, top_error)
            w = put32(w, session)
        w = put_length(w, len(topics), flexible, True)
        for topic in topics:
            if len(topic) != 2:
                _overrun()
            parts = <list?>topic[1]
            s = PyUnicode_AsUTF8AndSize(topic[0], &n)
            _room(w, end, length_size(n, flexible, 2) + n
                  + length_size(len(parts), flexible, 4))
            w = put_length(w, n, flexible, False)
            memcpy(w, s, n)
            w += n
            w = put_length(w, len(parts), flexible, True)
            for p in parts:
                if len(p) != 7:
                    _overrun()
                _room(w, end, part_fixed)
                w = put32(w, <int32_t>p[0])
                w = put16(w, <int16_t>p[1])
                w = put64(w, <int64_t>p[2])
                w = put64(w, <int64_t>p[3])
                if version >= 5:
                    w = put64(w, <int64_t>p[4])
                if p[5] is None:
                    _room(w, end, length_size(-1, flexible, 4))
                    w = put_length(w, -1, flexible, True)
                else:
                    aborted = <list?>p[5]
                    k = len(aborted)
                    _room(w, end, length_size(k, flexible, 4) + k * txn_size)
                    w = put_length(w, k, flexible, True)
                    for txn in aborted:
                        if len(txn) != 2:
                            _overrun()
                        w = put64(w, <int64_t>txn[0])
                        w = put64(w, <int64_t>txn[1])
                        if flexible:
                            w[0] = 0
                            w += 1
                if version >= 11:
                    _room(w, end, 4)
                    w = put32(w, -1)  # preferred read replica
                records = p[6]
                kind = _records_kind(records)
                if kind == REC_NULL:
                    _room(w, end, length_size(-1, flexible, 4))
                    w = put_length(w, -1, flexible, True)
                elif kind == REC_REGION:
                    if split >= plan.n_splits or records is not regions[split]:
                        _overrun()
                    n = plan.splits[split].region_len
                    _room(w, end, length_size(n, flexible, 4))
                    w = put_length(w, n, flexible, True)
                    if w != end:
                        _overrun()
                    out.append(piece)
                    out.append(records)
                    split += 1
                    size = plan.splits[split].bytes_before if split < plan.n_splits else run
                    piece = PyBytes_FromStringAndSize(NULL, size)
                    w = <uint8_t *>PyBytes_AS_STRING(piece)
                    end = w + size
                else:
                    w = _put_records(w, end, records, kind, flexible)
                if flexible:
                    _room(w, end, 1)
                    w[0] = 0  # partition tags
                    w += 1
            if flexible:
                _room(w, end, 1)
                w[0] = 0  # topic tags
                w += 1
        if flexible:
            _room(w, end, 1)
            w[0] = 0  # response tags
            w += 1
        if w != end or split != plan.n_splits:
            _overrun()
        if out is None:
            return piece
        if size:
            out.append(piece)
        return out
    finally:
        PyMem_Free(plan.splits)
