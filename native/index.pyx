# cython: language_level=3
"""Index search and batch-header walks for the log (``pylog._native.index``).

Everything here works on buffers (the memory-mapped ``.index``, ``.timeindex``
and ``.log`` files) and reads big-endian fields in C without the GIL, so a
fetch costs one call, not a Python loop per batch or per index entry.

Index entry formats (Kafka's, big-endian):

* offset index, 8 bytes: relative offset int32, file position int32
* time index, 12 bytes: timestamp int64, relative offset int32

Record batch v2 header fields used here (byte offsets in the batch):
baseOffset int64 @0, batchLength int32 @8 (batch size = batchLength + 12),
magic int8 @16, attributes int16 @21, lastOffsetDelta int32 @23,
baseTimestamp int64 @27, maxTimestamp int64 @35, records count int32 @57,
first record @61.

The search follows Kafka's ``AbstractIndex.indexSlotRangeFor``: look in the
warm tail (the last 8 KiB of entries, the part readers near the log end touch
and that stays in the page cache) first, and only binary-search the whole
index when the target lies before it, so lookups by tailing consumers never
fault in cold pages.
"""

from cpython.buffer cimport (PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_Release,
                             PyObject_GetBuffer)
from libc.errno cimport EINTR, errno
from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy, strerror
from posix.types cimport off_t
from posix.unistd cimport ftruncate, pwrite

from bigendian cimport rd32, rd64, wr32, wr64

cdef enum:
    OFFSET_ENTRY = 8
    TIME_ENTRY = 12
    WARM_BYTES = 8192
    HEADER_OVERHEAD = 12      # baseOffset + batchLength
    V2_HEADER = 61            # bytes before the first record
    MAGIC_END = 17            # bytes up to and including the magic

# index_batches status codes
cpdef enum:
    INDEX_OK = 0
    INDEX_BAD_OFFSET = 1      # offsets go backwards / have a gap / leave the segment range
    INDEX_TRUNCATED = 2       # a batch header or body runs past ``end``

# layout of the ``state`` vector of index_batches
cpdef enum:
    ST_BYTES_SINCE = 0
    ST_MAX_TS = 1
    ST_OFFSET_OF_MAX_TS = 2
    ST_NEXT_OFFSET = 3
    ST_OFFSET_ENTRIES = 4
    ST_TIME_ENTRIES = 5
    ST_TIME_LAST_TS = 6
    ST_TIME_LAST_OFFSET = 7
    STATE_SIZE = 8


cdef inline int64_t _okey(const uint8_t* b, Py_ssize_t slot) noexcept nogil:
    return <int32_t>rd32(b + slot * OFFSET_ENTRY)


cdef inline int64_t _tkey(const uint8_t* b, Py_ssize_t slot) noexcept nogil:
    return <int64_t>rd64(b + slot * TIME_ENTRY)


# Kafka's binarySearch: returns the largest slot whose key <= target in ``lo``
# (``found`` set when equal).  Callers check the first entry themselves.
cdef inline Py_ssize_t _lower(const uint8_t* b, Py_ssize_t lo, Py_ssize_t hi,
                              int64_t target, bint time) noexcept nogil:
    cdef Py_ssize_t mid
    cdef int64_t key
    while lo < hi:
        mid = (lo + hi + 1) >> 1
        key = _tkey(b, mid) if time else _okey(b, mid)
        if key > target:
            hi = mid - 1
        elif key < target:
            lo = mid
        else:
            return mid
    return lo


cdef Py_ssize_t _largest_lower_bound(const uint8_t* b, Py_ssize_t n, int64_t target,
                                     bint time) noexcept nogil:
    cdef Py_ssize_t warm = WARM_BYTES // (TIME_ENTRY if time else OFFSET_ENTRY)
    cdef Py_ssize_t first_hot
    if n <= 0:
        return -1
    first_hot = n - 1 - warm
    if first_hot < 0:
        first_hot = 0
    # The warm tail first: a target after the first hot entry is found there.
    if (_tkey(b, first_hot) if time else _okey(b, first_hot)) < target:
        return _lower(b, first_hot, n - 1, target, time)
    # Before the first entry: no lower bound.
    if (_tkey(b, 0) if time else _okey(b, 0)) > target:
        return -1
    return _lower(b, 0, first_hot, target, time)


cdef inline void _check(Py_ssize_t buflen, Py_ssize_t n, Py_ssize_t size) except *:
    if n < 0 or n * size > buflen:
        raise ValueError(f"{n} index entries of {size} bytes do not fit a {buflen}-byte buffer")


def offset_lookup(const uint8_t[::1] buf, Py_ssize_t n, int64_t target) -> int:
    """Largest slot of an offset index whose relative offset is <= ``target``; -1 if none."""
    if n == 0:
        return -1
    _check(buf.shape[0], n, OFFSET_ENTRY)
    cdef Py_ssize_t slot
    with nogil:
        slot = _largest_lower_bound(&buf[0], n, target, False)
    return slot


def time_lookup(const uint8_t[::1] buf, Py_ssize_t n, int64_t target) -> int:
    """Largest slot of a time index whose timestamp is <= ``target``; -1 if none.

    Kafka's ``TimeIndex.lookup``: the entry found bounds the search from below;
    the log is then scanned forward from its offset for the first batch whose
    max timestamp is >= the target.
    """
    if n == 0:
        return -1
    _check(buf.shape[0], n, TIME_ENTRY)
    cdef Py_ssize_t slot
    with nogil:
        slot = _largest_lower_bound(&buf[0], n, target, True)
    return slot


def time_upper(const uint8_t[::1] buf, Py_ssize_t n, int64_t target) -> int:
    """Smallest slot of a time index whose timestamp is >= ``target``; -1 if none
    (Kafka's ``smallestUpperBoundSlotFor``)."""
    if n == 0:
        return -1
    _check(buf.shape[0], n, TIME_ENTRY)
    cdef Py_ssize_t slot
    with nogil:
        slot = _largest_lower_bound(&buf[0], n, target, True)
        if slot == -1:
            slot = 0
        elif _tkey(&buf[0], slot) != target:
            slot = slot + 1 if slot + 1 < n else -1
    return slot


def offset_entry(const uint8_t[::1] buf, Py_ssize_t slot):
    """(relative offset, position) of an offset index slot."""
    if slot < 0 or (slot + 1) * OFFSET_ENTRY > buf.shape[0]:
        raise IndexError(slot)
    cdef const uint8_t* p = &buf[slot * OFFSET_ENTRY]
    return <int32_t>rd32(p), <int32_t>rd32(p + 4)


def time_entry(const uint8_t[::1] buf, Py_ssize_t slot):
    """(timestamp, relative offset) of a time index slot."""
    if slot < 0 or (slot + 1) * TIME_ENTRY > buf.shape[0]:
        raise IndexError(slot)
    cdef const uint8_t* p = &buf[slot * TIME_ENTRY]
    return <int64_t>rd64(p), <int32_t>rd32(p + 8)


cdef inline Py_ssize_t _bad_batch(const uint8_t* b, Py_ssize_t pos, Py_ssize_t end) nogil:
    """0 when a whole v2 batch starts at ``pos`` of ``b[:end]`` (its size at
    least a v2 header, magic 2, its bytes inside ``end``), else nonzero.

    ``end`` is a segment's exact size (a segment only ever holds whole
    batches), so a batch running past it is as broken as a too-small one."""
    if pos + MAGIC_END > end:
        return 1  # not even a header's fields up to the magic
    cdef int64_t size = <int64_t><int32_t>rd32(b + pos + 8) + HEADER_OVERHEAD
    if size < V2_HEADER or b[pos + 16] != 2 or pos + size > end:
        return 1
    return 0


def scan_batches(const uint8_t[::1] buf, Py_ssize_t start, Py_ssize_t end,
                 int64_t target_offset, int64_t max_bytes=0,
                 int64_t max_offset=0x7fffffffffffffff):
    """Walk batch headers of a log segment from ``start`` to ``end`` (the
    segment's size: it holds whole batches only).

    Finds the first batch whose last offset is >= ``target_offset`` and then
    takes whole batches after it while their total stays within ``max_bytes``
    and their base offset is below ``max_offset``.  The first batch is taken
    even when it alone exceeds ``max_bytes`` (Kafka's progress rule), unless
    its base offset is at or past ``max_offset``.

    Returns ``(position, base_offset, first_size, length)``; position -1 when no
    batch in range holds the target.  Only the 17-byte prefix up to the magic
    and the lastOffsetDelta are read: batches were validated when appended or
    recovered.  A header that cannot be a v2 batch (size below the v2 header,
    magic not 2, bytes past ``end``, a torn header at the end) met before the
    target is found returns ``(-2, its position, its size field, its magic)``
    (size and magic -1 where they lie past ``end``): Kafka's reader throws
    CorruptRecordException there, and skipping it would hide the batches behind
    it.  One met after the first batch only ends the slice, so the intact
    batches before it are served.
    """
    cdef Py_ssize_t buflen = buf.shape[0]
    if end > buflen:
        end = buflen
    if start < 0:
        raise ValueError("negative start position")
    cdef const uint8_t* b
    cdef Py_ssize_t pos = start, size = 0, first_pos = -1, first_size = 0
    cdef int64_t base = -1, first_base = -1, last, length = 0
    cdef bint corrupt = False
    if end <= start:
        return -1, -1, 0, 0
    b = &buf[0]
    with nogil:
        while pos < end:
            if _bad_batch(b, pos, end):
                corrupt = True
                break
            size = <int32_t>rd32(b + pos + 8) + HEADER_OVERHEAD
            base = <int64_t>rd64(b + pos)
            last = base + <int32_t>rd32(b + pos + 23)
            if last >= target_offset:
                first_pos = pos
                first_base = base
                first_size = size
                break
            pos += size
        if first_pos >= 0 and first_base < max_offset:
            length = first_size
            pos = first_pos + first_size
            while pos < end:
                if _bad_batch(b, pos, end):
                    break
                size = <int32_t>rd32(b + pos + 8) + HEADER_OVERHEAD
                if length + size > max_bytes:
                    break
                if <int64_t>rd64(b + pos) >= max_offset:
                    break
                length += size
                pos += size
    if corrupt:
        return (-2, pos, <int32_t>rd32(b + pos + 8) if pos + HEADER_OVERHEAD <= end else -1,
                b[pos + 16] if pos + MAGIC_END <= end else -1)
    return first_pos, first_base, first_size, length


def find_timestamp(const uint8_t[::1] buf, Py_ssize_t start, Py_ssize_t end, int64_t target_ts):
    """First batch from ``start`` whose max timestamp is >= ``target_ts``.

    Returns ``(position, base_offset, last_offset, offset, timestamp)`` where
    ``offset`` and ``timestamp`` are the first record's with timestamp >= target
    when the batch is uncompressed (read from the record headers), or -1 when
    the batch is compressed and the caller must decode it.  Position -1 when no
    batch qualifies; -2 (and the position as the base offset) at a header
    that cannot be a v2 batch, as :func:`scan_batches`.
    """
    cdef Py_ssize_t buflen = buf.shape[0]
    if end > buflen:
        end = buflen
    if end <= start:
        return -1, -1, -1, -1, -1
    cdef const uint8_t* b = &buf[0]
    cdef Py_ssize_t pos = start, size, rp, rend, rend_rec
    cdef int64_t base, last, max_ts, first_ts, ts_delta, off_delta, rec_len
    cdef int attrs, shift
    cdef uint64_t acc
    cdef uint8_t byte
    cdef int32_t count, i
    while pos < end:
        if _bad_batch(b, pos, end):
            return -2, pos, -1, -1, -1  # as scan_batches: Kafka's CorruptRecordException
        size = <int32_t>rd32(b + pos + 8) + HEADER_OVERHEAD
        max_ts = <int64_t>rd64(b + pos + 35)
        if max_ts >= target_ts:
            base = <int64_t>rd64(b + pos)
            last = base + <int32_t>rd32(b + pos + 23)
            attrs = (b[pos + 21] << 8) | b[pos + 22]
            if (attrs & 0x07) != 0:
                return pos, base, last, -1, -1
            if attrs & 0x08:  # LogAppendTime: every record carries the batch's time
                return pos, base, last, base, max_ts
            first_ts = <int64_t>rd64(b + pos + 27)
            count = <int32_t>rd32(b + pos + 57)
            rp = pos + V2_HEADER
            rend = pos + size
            for i in range(count):
                # length varint (zig-zag), attributes int8, timestampDelta varlong,
                # offsetDelta varint
                acc = 0; shift = 0
                while rp < rend:
                    byte = b[rp]; rp += 1
                    acc |= (<uint64_t>(byte & 0x7f)) << shift
                    shift += 7
                    if not (byte & 0x80) or shift > 63:
                        break
                rec_len = <int64_t>(acc >> 1) ^ -(<int64_t>(acc & 1))
                rend_rec = rp + rec_len  # the length counts the bytes after itself
                rp += 1  # attributes
                acc = 0; shift = 0
                while rp < rend:
                    byte = b[rp]; rp += 1
                    acc |= (<uint64_t>(byte & 0x7f)) << shift
                    shift += 7
                    if not (byte & 0x80) or shift > 63:
                        break
                ts_delta = <int64_t>(acc >> 1) ^ -(<int64_t>(acc & 1))
                acc = 0; shift = 0
                while rp < rend:
                    byte = b[rp]; rp += 1
                    acc |= (<uint64_t>(byte & 0x7f)) << shift
                    shift += 7
                    if not (byte & 0x80) or shift > 63:
                        break
                off_delta = <int64_t>(acc >> 1) ^ -(<int64_t>(acc & 1))
                if first_ts + ts_delta >= target_ts:
                    return pos, base, last, base + off_delta, first_ts + ts_delta
                rp = rend_rec
                if rp > rend:
                    break
            # max timestamp said yes but no record did (e.g. producer-set max):
            # Kafka falls back to the batch.
            return pos, base, last, base, max_ts
        pos += size
    return -1, -1, -1, -1, -1


def index_batches(const uint8_t[::1] buf, Py_ssize_t start, Py_ssize_t end,
                  int64_t file_position, int64_t segment_base, int64_t interval,
                  uint8_t[::1] offset_index, Py_ssize_t offset_capacity,
                  uint8_t[::1] time_index, Py_ssize_t time_capacity,
                  int64_t[::1] state, bint contiguous=True):
    """Index the batches in ``buf[start:end]``, which lie at ``file_position``
    of a segment with base offset ``segment_base``.

    The rule is Kafka's (LogSegment.append / recover): a batch gets an offset
    index entry (its base offset, its position) when more than ``interval``
    bytes were appended since the last indexed batch began, and the time index
    gets (max timestamp so far, offset of that max) at the same moment when the
    max grew.  Entries are written in place into the mapped index buffers
    while they have room (``*_capacity`` entries; a full index only makes
    lookups scan further, the segment rolls on the next append).

    Offsets are checked: each batch must start after the previous one ended
    (right after it when ``contiguous``) and stay within int32 of the segment
    base.  ``state`` (int64[STATE_SIZE]) carries the running values in and
    out.  Returns ``(valid_end, status)``: the position after the last good
    batch and INDEX_OK / INDEX_BAD_OFFSET / INDEX_TRUNCATED.
    """
    if state.shape[0] < STATE_SIZE:
        raise ValueError("state vector too short")
    cdef Py_ssize_t buflen = buf.shape[0]
    if end > buflen:
        end = buflen
    if offset_index is None:
        offset_capacity = 0
    elif offset_capacity * OFFSET_ENTRY > offset_index.shape[0]:
        raise ValueError("offset index capacity exceeds its buffer")
    if time_index is None:
        time_capacity = 0
    elif time_capacity * TIME_ENTRY > time_index.shape[0]:
        raise ValueError("time index capacity exceeds its buffer")
    if end <= start:
        return start, INDEX_OK
    cdef const uint8_t* b = &buf[0]
    cdef uint8_t* oi = &offset_index[0] if offset_capacity > 0 else NULL
    cdef uint8_t* ti = &time_index[0] if time_capacity > 0 else NULL
    cdef Py_ssize_t pos = start
    cdef int status
    with nogil:
        status = _index_run(b, &pos, end, start, file_position, segment_base, interval,
                            oi, offset_capacity, ti, time_capacity, &state[0], contiguous)
    return pos, status


def index_append(buf, int64_t file_position, int64_t segment_base, int64_t interval,
                 offset_index, time_index, state, out, bint contiguous=True):
    """The append path's :func:`index_batches`: all of ``buf``, nothing committed.

    Indexes the batches of ``buf`` (about to be written at ``file_position``)
    starting from the running values in ``state`` and leaves the updated
    values in ``out`` (both int64[STATE_SIZE] buffers); ``state`` itself is
    not changed, so a failed write needs no rollback: the caller adopts
    ``out`` only once the bytes are in the file.  Index entries are written
    into the mapped ``offset_index`` / ``time_index`` buffers (None: no index)
    past their committed entries; capacities are the buffers' whole entries.

    Plain buffer requests instead of typed memoryviews keep the call cheap
    (it runs once per produce request).  Returns INDEX_OK only when ``buf``
    is whole batches continuing ``state``; otherwise INDEX_BAD_OFFSET or
    INDEX_TRUNCATED (call :func:`index_batches` for the position).
    """
    return _index_append(buf, file_position, segment_base, interval, offset_index,
                         time_index, state, out, contiguous)


cdef int _index_append(object buf, int64_t file_position, int64_t segment_base,
                       int64_t interval, object offset_index, object time_index,
                       object state, object out, bint contiguous) except -1:
    # The body of index_append, a C call for index_write (a Python-level call
    # costs ~5% of a 16 KiB append).
    cdef Py_buffer vb, vo, vt, vs, vout
    cdef bint has_b = False, has_o = False, has_t = False, has_s = False, has_out = False
    cdef Py_ssize_t pos = 0, ocap = 0, tcap = 0
    cdef uint8_t* oi = NULL
    cdef uint8_t* ti = NULL
    cdef int64_t* st
    cdef int status = INDEX_OK
    cdef int i
    try:
        PyObject_GetBuffer(buf, &vb, PyBUF_SIMPLE)
        has_b = True
        PyObject_GetBuffer(state, &vs, PyBUF_SIMPLE)
        has_s = True
        PyObject_GetBuffer(out, &vout, PyBUF_WRITABLE)
        has_out = True
        if vs.len < STATE_SIZE * 8 or vout.len < STATE_SIZE * 8:
            raise ValueError("state vector too short")
        if offset_index is not None:
            PyObject_GetBuffer(offset_index, &vo, PyBUF_WRITABLE)
            has_o = True
            ocap = vo.len // OFFSET_ENTRY
            oi = <uint8_t*>vo.buf
        if time_index is not None:
            PyObject_GetBuffer(time_index, &vt, PyBUF_WRITABLE)
            has_t = True
            tcap = vt.len // TIME_ENTRY
            ti = <uint8_t*>vt.buf
        st = <int64_t*>vout.buf
        for i in range(STATE_SIZE):
            st[i] = (<const int64_t*>vs.buf)[i]
        if vb.len > 0:
            with nogil:
                status = _index_run(<const uint8_t*>vb.buf, &pos, vb.len, 0, file_position,
                                    segment_base, interval, oi if ocap > 0 else NULL, ocap,
                                    ti if tcap > 0 else NULL, tcap, st, contiguous)
    finally:
        if has_t:
            PyBuffer_Release(&vt)
        if has_o:
            PyBuffer_Release(&vo)
        if has_out:
            PyBuffer_Release(&vout)
        if has_s:
            PyBuffer_Release(&vs)
        if has_b:
            PyBuffer_Release(&vb)
    return status


def index_write(buf, int fd, Py_ssize_t file_position, int64_t segment_base,
                int64_t interval, offset_index, time_index, state, scratch,
                bint contiguous=True):
    """:func:`index_append`, then ``pwrite`` of ``buf`` to ``fd`` at
    ``file_position``, then the commit: one call for the posix append path.

    The running values are computed in ``scratch`` and copied into ``state``
    only after every byte is written, so on any failure ``state`` is
    untouched.  Returns the index status (nothing is written unless
    INDEX_OK).  A failed write cuts the file back to ``file_position``
    (as the Python path does) and raises ``OSError``; short writes are
    continued, EINTR retried.  The GIL is released for the write.
    """
    cdef int status = _index_append(buf, file_position, segment_base, interval,
                                    offset_index, time_index, state, scratch, contiguous)
    if status != INDEX_OK:
        return status
    cdef Py_buffer vb, vs, vsc
    cdef Py_ssize_t done = 0
    cdef ssize_t n
    cdef int err = 0
    PyObject_GetBuffer(buf, &vb, PyBUF_SIMPLE)
    try:
        with nogil:
            while done < vb.len:
                n = pwrite(fd, <const uint8_t*>vb.buf + done, vb.len - done,
                           <off_t>(file_position + done))
                if n > 0:
                    done += n
                elif n < 0 and errno == EINTR:
                    continue
                else:
                    err = errno if n < 0 else 0
                    ftruncate(fd, <off_t>file_position)
                    break
        if done < vb.len:
            if err:
                raise OSError(err, strerror(err).decode())
            raise OSError(f"write of {vb.len} bytes at offset {file_position} wrote 0 "
                          f"after {done}")
    finally:
        PyBuffer_Release(&vb)
    # Commit: the bytes are in the file.
    PyObject_GetBuffer(state, &vs, PyBUF_WRITABLE)
    try:
        PyObject_GetBuffer(scratch, &vsc, PyBUF_SIMPLE)
        memcpy(vs.buf, vsc.buf, STATE_SIZE * 8)
        PyBuffer_Release(&vsc)
    finally:
        PyBuffer_Release(&vs)
    return status


cdef int _index_run(const uint8_t* b, Py_ssize_t* ppos, Py_ssize_t end, Py_ssize_t start,
                    int64_t file_position, int64_t segment_base, int64_t interval,
                    uint8_t* oi, Py_ssize_t offset_capacity,
                    uint8_t* ti, Py_ssize_t time_capacity,
                    int64_t* st, bint contiguous) noexcept nogil:
    """The indexing loop of :func:`index_batches` over raw pointers; ``*ppos``
    moves to the end of the last good batch; returns the status."""
    cdef Py_ssize_t pos = ppos[0], size
    cdef int64_t base, last, max_ts, rel
    cdef int status = INDEX_OK
    while pos < end:
        if pos + V2_HEADER > end:
            status = INDEX_TRUNCATED
            break
        size = <int32_t>rd32(b + pos + 8) + HEADER_OVERHEAD
        if size < V2_HEADER or pos + size > end:
            status = INDEX_TRUNCATED
            break
        base = <int64_t>rd64(b + pos)
        last = base + <int32_t>rd32(b + pos + 23)
        if (base < st[ST_NEXT_OFFSET] or (contiguous and base != st[ST_NEXT_OFFSET])
                or last < base or last - segment_base > 0x7fffffff):
            status = INDEX_BAD_OFFSET
            break
        max_ts = <int64_t>rd64(b + pos + 35)
        if max_ts > st[ST_MAX_TS]:
            st[ST_MAX_TS] = max_ts
            st[ST_OFFSET_OF_MAX_TS] = last
        if st[ST_BYTES_SINCE] > interval:
            rel = base - segment_base
            if st[ST_OFFSET_ENTRIES] < offset_capacity:
                wr32(oi + st[ST_OFFSET_ENTRIES] * OFFSET_ENTRY, <uint32_t>rel)
                wr32(oi + st[ST_OFFSET_ENTRIES] * OFFSET_ENTRY + 4,
                       <uint32_t>(file_position + pos - start))
                st[ST_OFFSET_ENTRIES] += 1
            # The last time slot is kept for the entry written when the
            # segment becomes inactive (Kafka's TimeIndex.isFull).
            if (st[ST_MAX_TS] > st[ST_TIME_LAST_TS]
                    and st[ST_TIME_ENTRIES] < time_capacity - 1):
                wr64(ti + st[ST_TIME_ENTRIES] * TIME_ENTRY, <uint64_t>st[ST_MAX_TS])
                wr32(ti + st[ST_TIME_ENTRIES] * TIME_ENTRY + 8,
                       <uint32_t>(st[ST_OFFSET_OF_MAX_TS] - segment_base))
                st[ST_TIME_ENTRIES] += 1
                st[ST_TIME_LAST_TS] = st[ST_MAX_TS]
                st[ST_TIME_LAST_OFFSET] = st[ST_OFFSET_OF_MAX_TS]
            st[ST_BYTES_SINCE] = 0
        st[ST_BYTES_SINCE] += size
        st[ST_NEXT_OFFSET] = last + 1
        pos += size
    ppos[0] = pos
    return status
