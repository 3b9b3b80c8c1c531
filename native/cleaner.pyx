"""Log compaction in C: the key -> latest offset map and the record filter.

After Kafka's ``SkimpyOffsetMap`` and ``MemoryRecords.filterTo``, as the log
cleaner (``pylog/log/cleaner.py``) uses them:

1. :class:`OffsetMap` is filled from the dirty part of a log
   (:meth:`OffsetMap.add_batches`): for every keyed record, the hash of its
   key -> its offset, the later offset winning.  A key is stored as 128 bits
   of hash (two seeds of MurmurHash64A; Kafka keeps 16 bytes of MD5), so
   memory is 24 bytes a key, bounded by ``log.cleaner.dedupe.buffer.size``.
   The table starts small and doubles as keys arrive: a log with few keys
   (``__consumer_offsets``) never touches the whole buffer.
2. :class:`RecordFilter` rewrites batches (:meth:`RecordFilter.run`): a record
   stays when its key's latest offset is its own or unknown; a tombstone
   (null value) also needs its batch's delete horizon not to have passed
   (KIP-534, below).  Keyless records go (Kafka's cleaner counts them
   invalid and drops them).  A batch that keeps every record is copied as it
   is; one that keeps none is dropped; one that keeps some is rebuilt with
   the records it keeps, byte for byte, under a new header: its base offset,
   base timestamp, producer fields and lastOffsetDelta stay (Kafka's
   ``overrideLastOffset``, so the next offset and the producer's sequence
   range do not move), the count, length, max timestamp (CreateTime) and
   CRC are new.  Records keep their offset and timestamp deltas, which stay
   valid against the unchanged base values.  A compressed batch is
   decompressed, filtered and compressed again with its own codec.
3. **Delete horizons** (KIP-534, Kafka's ``MemoryRecords.filterTo``): the
   first clean that keeps a tombstone in a batch without a horizon rebuilds
   that batch with one: attribute bit 6 set and the base timestamp replaced
   by the horizon (the clean's time plus ``delete.retention.ms``), every
   record's timestamp delta re-encoded against it so its timestamp does not
   change.  Tombstones of a batch whose horizon has passed are dropped by
   the next clean.  So a tombstone lives ``delete.retention.ms`` from the
   clean that first saw it, however quiet the log.
4. **Transactions** (Kafka's ``CleanedTransactionMetadata``), when the map
   and the filter are given a :class:`TxnRanges`: a scan of the log's batch
   headers from its start, which finds each transaction's batches and the
   COMMIT or ABORT marker that ends it.  A committed transaction's records
   count as plain ones (mapped, kept or removed by key); an aborted one's
   batches are dropped whole and never mapped; a transaction whose marker
   is not in the scanned part (the whole log, so: one still open) is
   undecided: the map stops before its first batch (an abort must not
   remove the value before its records, and the clean part must not pass
   records not mapped), and the filter removes them only when a later
   record has their key.  A COMMIT marker stays while any batch of
   its transaction keeps records; after that it is given a delete horizon
   as a tombstone's batch is, and dropped by the first clean after it.
   ABORT markers stay: the partition's list of aborted transactions (what
   a read_committed fetch is told to skip) outlives the records, and a
   consumer told of an aborted transaction needs its marker to stop
   skipping the producer.  Without a :class:`TxnRanges` every
   transaction is undecided and every marker stays.

Uncompressed batches are processed with the GIL released; a compressed one
takes it back for the codec call only.  No Python object is made per record.
"""

cimport cython
from cpython.buffer cimport PyBUF_READ, PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytearray cimport PyByteArray_FromStringAndSize
from cpython.memoryview cimport PyMemoryView_FromMemory
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc, qsort, realloc
from libc.string cimport memcpy, memmove

from batch_layout cimport *
from bigendian cimport rd16, rd32, rd64, wr16, wr32, wr64
from cvarint cimport (
    pylog_varint_decode,
    pylog_varint_encode,
    pylog_varlong_decode,
    pylog_varlong_encode,
    pylog_varlong_size,
)


cdef extern from "crc32c.h" nogil:
    uint32_t pylog_crc32c(uint32_t crc, const void *buf, size_t len)

from pylog.errors import CorruptBatchError
from pylog.records.compression import compress as _compress
from pylog.records.compression import decompress as _decompress

# run loops' outcomes
cdef enum:
    RUN_END = 0        # reached the end of the window (or the stop offset)
    RUN_COMPRESSED = 1  # the batch at pos is compressed: needs the GIL
    RUN_FULL = 2       # the map has no room for the batch at pos
    RUN_CORRUPT = 3    # the batch at pos does not parse
    RUN_LIMIT = 4      # the output reached its limit
    RUN_NOMEM = 5
    RUN_REBUILD = 6    # (_settle) the kept records need their batch's new header
    RUN_UNDECIDED = 7  # (the map) the batch at pos is of a transaction with no marker

# A slot is empty when its offset is EMPTY (offsets are >= 0).
cdef int64_t EMPTY = -1
cdef uint64_t SEED1 = 0x9E3779B97F4A7C15ULL
cdef uint64_t SEED2 = 0xC2B2AE3D27D4EB4FULL
# The table doubles while it is under this fill; at its largest it fills up
# to the load factor (log.cleaner.io.buffer.load.factor).
cdef double GROW_AT = 0.5


cdef struct slot:
    uint64_t h1
    uint64_t h2
    int64_t offset


cdef inline uint64_t _murmur64(const uint8_t *p, Py_ssize_t n, uint64_t seed) noexcept nogil:
    """MurmurHash64A (Austin Appleby, public domain), little-endian loads."""
    cdef uint64_t m = 0xC6A4A7935BD1E995ULL
    cdef uint64_t h = seed ^ (<uint64_t>n * m)
    cdef uint64_t k
    cdef Py_ssize_t i = 0
    while i + 8 <= n:
        memcpy(&k, p + i, 8)
        k *= m
        k ^= k >> 47
        k *= m
        h ^= k
        h *= m
        i += 8
    if i < n:
        k = 0
        memcpy(&k, p + i, n - i)
        h ^= k
        h *= m
    h ^= h >> 47
    h *= m
    h ^= h >> 47
    return h


cdef inline int _get_buffer(object obj, Py_buffer *view) except -1:
    return PyObject_GetBuffer(obj, view, PyBUF_SIMPLE)


# One parsed record: where it is, and what the cleaner needs of it.
cdef struct record_view:
    const uint8_t *start   # the length varint
    const uint8_t *end     # past the record
    const uint8_t *attrs   # the attributes byte, after the length
    const uint8_t *after_ts  # the offset delta, after the timestamp delta
    int64_t ts_delta
    int32_t offset_delta
    const uint8_t *key
    int32_t key_length     # -1: no key
    int32_t value_length   # -1: null value (tombstone)


cdef inline int _next_record(const uint8_t **pp, const uint8_t *end,
                             record_view *r) noexcept nogil:
    """Parse the record at pp[0] (header fields and key; the value's length);
    0, or -1 when it does not fit."""
    cdef const uint8_t *p = pp[0]
    cdef int32_t length
    cdef int n = pylog_varint_decode(p, end, &length)
    if n < 0 or length <= 0 or length > end - p - n:
        return -1
    r.start = p
    p += n
    r.end = p + length
    r.attrs = p
    p += 1
    n = pylog_varlong_decode(p, r.end, &r.ts_delta)
    if n < 0:
        return -1
    p += n
    r.after_ts = p
    n = pylog_varint_decode(p, r.end, &r.offset_delta)
    if n < 0:
        return -1
    p += n
    n = pylog_varint_decode(p, r.end, &r.key_length)
    if n < 0 or r.key_length < -1 or r.key_length > r.end - p - n:
        return -1
    p += n
    r.key = p
    if r.key_length > 0:
        p += r.key_length
    n = pylog_varint_decode(p, r.end, &r.value_length)
    if n < 0 or r.value_length < -1 or r.value_length > r.end - p - n:
        return -1
    pp[0] = r.end
    return 0


cdef inline int _batch_at(const uint8_t *buf, Py_ssize_t buflen, Py_ssize_t pos) noexcept nogil:
    """Size of the whole v2 batch at ``pos``, or -1 when none fits there."""
    cdef int64_t blen
    if buflen - pos < HEADER_SIZE:
        return -1
    blen = <int32_t>rd32(buf + pos + OFF_BATCH_LENGTH)
    if blen < HEADER_SIZE - LOG_OVERHEAD or blen + LOG_OVERHEAD > buflen - pos:
        return -1
    if buf[pos + OFF_MAGIC] != 2:
        return -1
    return <int>(blen + LOG_OVERHEAD)


# -- transactions: which batches a clean may drop ------------------------------

# What a batch's transaction came to (_txn_of)
cdef enum:
    TXN_NONE = 0       # not in a transaction
    TXN_UNDECIDED = 1  # no marker in the scanned part (or no scan)
    TXN_COMMITTED = 2
    TXN_ABORTED = 3

# Control record types (Kafka's ControlRecordType): the key's second int16
cdef enum:
    CONTROL_ABORT = 0
    CONTROL_COMMIT = 1


# One ended transaction of one producer in the scanned part of a log.
cdef struct txn_range:
    int64_t pid
    int64_t first     # offset of its first batch
    int64_t last      # offset of its marker
    uint8_t commit
    uint8_t retained  # (RecordFilter) a batch of it kept records in this clean


cdef int _control_type(const uint8_t *b, int size) noexcept nogil:
    """The type of the control record of an uncompressed control batch, -1
    when it has none that reads (a compressed one is not read)."""
    cdef const uint8_t *p = b + HEADER_SIZE
    cdef record_view r
    if rd16(b + OFF_ATTRIBUTES) & ATTR_COMPRESSION_MASK or <int32_t>rd32(b + OFF_RECORD_COUNT) < 1:
        return -1
    if _next_record(&p, b + size, &r) or r.key_length < 4:
        return -1
    return <int16_t>rd16(r.key + 2)


cdef int _range_cmp(const void *a, const void *b) noexcept nogil:
    cdef const txn_range *x = <const txn_range *>a
    cdef const txn_range *y = <const txn_range *>b
    if x.pid != y.pid:
        return -1 if x.pid < y.pid else 1
    return -1 if x.first < y.first else (1 if x.first > y.first else 0)


cdef txn_range *_find_range(txn_range *ranges, Py_ssize_t n, int64_t pid,
                            int64_t offset) noexcept nogil:
    """The range of ``pid`` holding ``offset`` (first <= offset <= last) in
    ranges sorted by (pid, first), or NULL."""
    cdef Py_ssize_t lo = 0, hi = n, mid
    while lo < hi:  # the first range past (pid, offset)
        mid = (lo + hi) >> 1
        if ranges[mid].pid < pid or (ranges[mid].pid == pid and ranges[mid].first <= offset):
            lo = mid + 1
        else:
            hi = mid
    if lo == 0:
        return NULL
    lo -= 1
    if ranges[lo].pid == pid and ranges[lo].last >= offset:
        return &ranges[lo]
    return NULL


cdef inline int _txn_of(txn_range *ranges, Py_ssize_t n, const uint8_t *b,
                        txn_range **found) noexcept nogil:
    """What the transaction of batch ``b`` came to; its range in ``found``."""
    found[0] = NULL
    if not (rd16(b + OFF_ATTRIBUTES) & ATTR_TRANSACTIONAL):
        return TXN_NONE
    found[0] = _find_range(ranges, n, <int64_t>rd64(b + OFF_PRODUCER_ID), <int64_t>rd64(b))
    if found[0] == NULL:
        return TXN_UNDECIDED
    return TXN_COMMITTED if found[0].commit else TXN_ABORTED


@cython.final
cdef class TxnRanges:
    """The ended transactions of a log, from a scan of its batch headers in
    offset order (:meth:`scan`, then :meth:`done`): for each, the producer,
    the offset of its first batch and of its marker, and whether it
    committed.  A producer's transaction opens at its first transactional
    batch and ends at its next marker; a marker with no batch before it
    (its records gone in an earlier clean, or none written here) makes no
    range.  The producers with a transaction still open are kept in a small
    open-addressing table."""

    cdef txn_range *ranges
    cdef Py_ssize_t n
    cdef Py_ssize_t cap
    # producer id -> first offset of its open transaction; pid -1 is a free slot
    cdef int64_t *open_pid
    cdef int64_t *open_first
    cdef Py_ssize_t open_slots
    cdef Py_ssize_t open_used
    cdef readonly bint sorted
    # The offset after the last batch scanned (-1: none), and how many of
    # the batches scanned were transactional (records or markers).
    cdef readonly int64_t next_offset
    cdef readonly int64_t transactional

    def __cinit__(self):
        self.ranges = NULL
        self.n = self.cap = 0
        self.open_slots = 16
        self.open_used = 0
        self.next_offset = -1
        self.open_pid = <int64_t *>malloc(16 * sizeof(int64_t))
        self.open_first = <int64_t *>malloc(16 * sizeof(int64_t))
        cdef int i
        if self.open_pid == NULL or self.open_first == NULL:
            raise MemoryError()
        for i in range(16):
            self.open_pid[i] = -1

    def __dealloc__(self):
        free(self.ranges)
        free(self.open_pid)
        free(self.open_first)

    def __len__(self) -> int:
        return self.n

    @property
    def open(self) -> int:
        """Producers whose transaction has no marker in the scanned part."""
        return self.open_used

    cdef Py_ssize_t _slot(self, int64_t pid) noexcept nogil:
        """The slot of ``pid``, or the free one where it would go."""
        cdef Py_ssize_t mask = self.open_slots - 1
        cdef Py_ssize_t i = <Py_ssize_t>((<uint64_t>pid * 0x9E3779B97F4A7C15ULL) >> 32) & mask
        while self.open_pid[i] != -1 and self.open_pid[i] != pid:
            i = (i + 1) & mask
        return i

    cdef int _open_grow(self) noexcept nogil:
        cdef Py_ssize_t old_n = self.open_slots, i, j
        cdef int64_t *old_pid = self.open_pid
        cdef int64_t *old_first = self.open_first
        cdef int64_t *pids = <int64_t *>malloc(2 * old_n * sizeof(int64_t))
        cdef int64_t *firsts = <int64_t *>malloc(2 * old_n * sizeof(int64_t))
        if pids == NULL or firsts == NULL:
            free(pids)
            free(firsts)
            return -1
        for i in range(2 * old_n):
            pids[i] = -1
        self.open_pid, self.open_first, self.open_slots = pids, firsts, 2 * old_n
        for i in range(old_n):
            if old_pid[i] != -1:
                j = self._slot(old_pid[i])
                pids[j], firsts[j] = old_pid[i], old_first[i]
        free(old_pid)
        free(old_first)
        return 0

    cdef void _close(self, Py_ssize_t i) noexcept nogil:
        """Free slot ``i``, moving later entries of its probe run back (no
        tombstones: lookups stop at the first free slot)."""
        cdef Py_ssize_t mask = self.open_slots - 1, j = i, home
        self.open_used -= 1
        while True:
            self.open_pid[i] = -1
            while True:
                j = (j + 1) & mask
                if self.open_pid[j] == -1:
                    return
                home = <Py_ssize_t>((<uint64_t>self.open_pid[j] * 0x9E3779B97F4A7C15ULL)
                                    >> 32) & mask
                # Stays unless its home lies cyclically in (i, j].
                if (i <= j and (home <= i or home > j)) or (i > j and home <= i and home > j):
                    break
            self.open_pid[i], self.open_first[i] = self.open_pid[j], self.open_first[j]
            i = j

    cdef int _batch(self, const uint8_t *b, int size) noexcept nogil:
        cdef int64_t pid = <int64_t>rd64(b + OFF_PRODUCER_ID)
        cdef Py_ssize_t i = self._slot(pid), cap
        cdef int kind
        cdef txn_range *grown
        if not (rd16(b + OFF_ATTRIBUTES) & ATTR_CONTROL):
            if self.open_pid[i] == -1:  # a transaction opens
                if (self.open_used + 1) * 2 > self.open_slots:
                    if self._open_grow():
                        return RUN_NOMEM
                    i = self._slot(pid)
                self.open_pid[i], self.open_first[i] = pid, <int64_t>rd64(b)
                self.open_used += 1
            return RUN_END
        kind = _control_type(b, size)
        if self.open_pid[i] == -1 or (kind != CONTROL_ABORT and kind != CONTROL_COMMIT):
            return RUN_END
        if self.n == self.cap:
            cap = max(64, self.cap * 2)
            grown = <txn_range *>realloc(self.ranges, cap * sizeof(txn_range))
            if grown == NULL:
                return RUN_NOMEM
            self.ranges, self.cap = grown, cap
        self.ranges[self.n] = txn_range(pid, self.open_first[i], <int64_t>rd64(b),
                                        kind == CONTROL_COMMIT, 0)
        self.n += 1
        self._close(i)
        return RUN_END

    cdef int _scan(self, const uint8_t *buf, Py_ssize_t buflen, Py_ssize_t *pos,
                   Py_ssize_t end, int64_t stop_offset) noexcept nogil:
        cdef int size, rc
        cdef const uint8_t *b
        while pos[0] < end:
            size = _batch_at(buf, buflen, pos[0])
            if size < 0:
                return RUN_CORRUPT
            b = buf + pos[0]
            if <int64_t>rd64(b) >= stop_offset:
                return RUN_END
            if rd16(b + OFF_ATTRIBUTES) & ATTR_TRANSACTIONAL:
                self.transactional += 1
                rc = self._batch(b, size)
                if rc != RUN_END:
                    return rc
            self.next_offset = <int64_t>rd64(b) + <int32_t>rd32(b + OFF_LAST_OFFSET_DELTA) + 1
            pos[0] += size
        return RUN_END

    def scan(self, buf, Py_ssize_t start, Py_ssize_t end,
             int64_t stop_offset=0x7FFFFFFFFFFFFFFF) -> int:
        """Read the headers of the batches starting in ``buf[start:end)``
        and based below ``stop_offset``, after those of every earlier call
        (offset order); returns the position reached."""
        cdef Py_buffer view
        cdef Py_ssize_t pos = start
        cdef int rc
        if self.sorted:
            raise ValueError("scan after done()")
        _get_buffer(buf, &view)
        try:
            if start < 0 or end > view.len:
                raise ValueError(f"window [{start}, {end}) outside a buffer of {view.len}")
            with nogil:
                rc = self._scan(<const uint8_t *>view.buf, view.len, &pos, end, stop_offset)
        finally:
            PyBuffer_Release(&view)
        _check_rc(rc, pos)
        return pos

    def done(self) -> None:
        """End the scan: the ranges are sorted for lookups."""
        if not self.sorted:
            qsort(self.ranges, self.n, sizeof(txn_range), _range_cmp)
            self.sorted = True

    def lookup(self, int64_t producer_id, int64_t offset) -> str:
        """'committed', 'aborted' or 'undecided': the transaction of
        ``producer_id`` that holds ``offset`` (for tests and tools)."""
        cdef txn_range *r
        if not self.sorted:
            raise ValueError("lookup before done()")
        r = _find_range(self.ranges, self.n, producer_id, offset)
        return "undecided" if r == NULL else ("committed" if r.commit else "aborted")

@cython.final
cdef class OffsetMap:
    """Key -> latest offset, in at most ``memory`` bytes (24 a key).

    ``capacity``: the keys it can hold at its largest (``load_factor`` of
    its slots); :meth:`add_batches` stops at the first batch that could
    overflow it.  ``latest_offset``: the last offset of the last batch
    mapped (-1 when none), so the log is mapped up to ``latest_offset + 1``.
    """

    cdef slot *slots
    cdef Py_ssize_t nslots
    cdef Py_ssize_t max_slots
    cdef Py_ssize_t used
    cdef Py_ssize_t _capacity
    cdef readonly int64_t latest_offset
    # The transactions of the add_batches call in progress (NULL: none known)
    cdef txn_range *txns
    cdef Py_ssize_t ntxns
    cdef bint txn_aware
    # add_batches stopped at a batch of an undecided transaction (see _mapped)
    cdef readonly bint undecided

    def __cinit__(self, Py_ssize_t memory, double load_factor=0.9,
                  Py_ssize_t initial_slots=4096):
        cdef Py_ssize_t n = 16
        if memory < <Py_ssize_t>(16 * sizeof(slot)):
            raise ValueError(f"an offset map needs at least {16 * sizeof(slot)} bytes, "
                             f"got {memory}")
        if not 0.0 < load_factor <= 1.0:
            raise ValueError(f"load factor {load_factor} is not in (0, 1]")
        while n * 2 * <Py_ssize_t>sizeof(slot) <= memory:
            n *= 2
        self.max_slots = n
        # At least one slot stays empty: a lookup stops at an empty slot.
        self._capacity = min(max(<Py_ssize_t>(n * load_factor), 1), n - 1)
        self.nslots = min(max(initial_slots, 16), n)
        self.slots = NULL
        self._alloc(self.nslots)
        self.used = 0
        self.latest_offset = -1

    def __dealloc__(self):
        free(self.slots)

    cdef int _alloc(self, Py_ssize_t n) except -1:
        cdef slot *s = <slot *>malloc(n * sizeof(slot))
        cdef Py_ssize_t i
        if s == NULL:
            raise MemoryError()
        for i in range(n):
            s[i].offset = EMPTY
        free(self.slots)
        self.slots = s
        return 0

    @property
    def size(self) -> int:
        """Keys held."""
        return self.used

    @property
    def capacity(self) -> int:
        return self._capacity

    @property
    def memory(self) -> int:
        """Bytes the table takes now."""
        return self.nslots * sizeof(slot)

    @property
    def utilization(self) -> float:
        """Keys held over capacity (Kafka's buffer utilization)."""
        return self.used / self._capacity

    def clear(self) -> None:
        cdef Py_ssize_t i
        for i in range(self.nslots):
            self.slots[i].offset = EMPTY
        self.used = 0
        self.latest_offset = -1

    cdef int _grow(self) noexcept nogil:
        """Double the table; -1 when memory runs out."""
        cdef Py_ssize_t n = self.nslots * 2, i, j, mask = n - 1
        cdef slot *s = <slot *>malloc(n * sizeof(slot))
        cdef slot *old = self.slots
        if s == NULL:
            return -1
        for i in range(n):
            s[i].offset = EMPTY
        for i in range(self.nslots):
            if old[i].offset != EMPTY:
                j = <Py_ssize_t>(old[i].h1 & <uint64_t>mask)
                while s[j].offset != EMPTY:
                    j = (j + 1) & mask
                s[j] = old[i]
        free(old)
        self.slots = s
        self.nslots = n
        return 0

    cdef inline int _put(self, const uint8_t *key, Py_ssize_t n, int64_t offset) noexcept nogil:
        """0, or -1 when memory runs out.  The caller checked the capacity."""
        cdef uint64_t h1 = _murmur64(key, n, SEED1), h2 = _murmur64(key, n, SEED2)
        cdef Py_ssize_t mask, i
        if self.used + 1 > self.nslots * GROW_AT and self.nslots < self.max_slots:
            if self._grow():
                return -1
        mask = self.nslots - 1
        i = <Py_ssize_t>(h1 & <uint64_t>mask)
        while self.slots[i].offset != EMPTY:
            if self.slots[i].h1 == h1 and self.slots[i].h2 == h2:
                if offset > self.slots[i].offset:
                    self.slots[i].offset = offset
                return 0
            i = (i + 1) & mask
        self.slots[i].h1 = h1
        self.slots[i].h2 = h2
        self.slots[i].offset = offset
        self.used += 1
        return 0

    cdef inline int64_t _get(self, const uint8_t *key, Py_ssize_t n) noexcept nogil:
        cdef uint64_t h1 = _murmur64(key, n, SEED1), h2 = _murmur64(key, n, SEED2)
        cdef Py_ssize_t mask = self.nslots - 1
        cdef Py_ssize_t i = <Py_ssize_t>(h1 & <uint64_t>mask)
        while self.slots[i].offset != EMPTY:
            if self.slots[i].h1 == h1 and self.slots[i].h2 == h2:
                return self.slots[i].offset
            i = (i + 1) & mask
        return EMPTY

    def put(self, key: bytes, int64_t offset) -> None:
        """One key (tests and tools; the cleaner uses :meth:`add_batches`)."""
        if offset < 0:
            raise ValueError("offsets are >= 0")
        if self.used >= self._capacity:
            raise OverflowError("offset map is full")
        if self._put(<const uint8_t *>(<bytes>key), len(key), offset):
            raise MemoryError()

    def get(self, key: bytes) -> int:
        """The latest offset of ``key``, or -1."""
        return self._get(<const uint8_t *>(<bytes>key), len(key))

    cdef int _map_records(self, const uint8_t *p, const uint8_t *end, int32_t count,
                          int64_t base_offset) noexcept nogil:
        cdef record_view r
        cdef int32_t k
        for k in range(count):
            if _next_record(&p, end, &r):
                return RUN_CORRUPT
            if r.key_length >= 0:
                if self._put(r.key, r.key_length, base_offset + r.offset_delta):
                    return RUN_NOMEM
        return RUN_END

    cdef inline int _mapped(self, const uint8_t *b) noexcept nogil:
        """Whether the keys of batch ``b`` go in the map (1): a plain batch or
        one of a committed transaction; never a marker, an aborted or (without
        a scan) undecided transaction's batch (0).  With a scan, an undecided
        one stops the map there (-1): what lies past it may not be called
        clean until its transaction has ended."""
        cdef txn_range *found
        cdef int kind
        if rd16(b + OFF_ATTRIBUTES) & ATTR_CONTROL:
            return 0
        kind = _txn_of(self.txns, self.ntxns, b, &found)
        if kind == TXN_UNDECIDED and self.txn_aware:
            return -1
        return kind == TXN_NONE or kind == TXN_COMMITTED

    cdef int _map_run(self, const uint8_t *buf, Py_ssize_t buflen, Py_ssize_t *pos,
                      Py_ssize_t end, int64_t stop_offset) noexcept nogil:
        """Map uncompressed batches from pos[0] until one that needs the GIL,
        the end, a batch at or past ``stop_offset`` or a full map."""
        cdef int size, rc, mapped
        cdef const uint8_t *b
        cdef int64_t base
        cdef int32_t count
        while pos[0] < end:
            size = _batch_at(buf, buflen, pos[0])
            if size < 0:
                return RUN_CORRUPT
            b = buf + pos[0]
            base = <int64_t>rd64(b)
            if base >= stop_offset:
                return RUN_END
            mapped = self._mapped(b)
            if mapped < 0:
                return RUN_UNDECIDED
            if mapped:
                count = <int32_t>rd32(b + OFF_RECORD_COUNT)
                if count < 0:
                    return RUN_CORRUPT
                if self.used + count > self._capacity:
                    return RUN_FULL
                if rd16(b + OFF_ATTRIBUTES) & ATTR_COMPRESSION_MASK:
                    return RUN_COMPRESSED
                rc = self._map_records(b + HEADER_SIZE, b + size, count, base)
                if rc != RUN_END:
                    return rc
            self.latest_offset = base + <int32_t>rd32(b + OFF_LAST_OFFSET_DELTA)
            pos[0] += size
        return RUN_END

    def add_batches(self, buf, Py_ssize_t start, Py_ssize_t end,
                    int64_t stop_offset=0x7FFFFFFFFFFFFFFF, TxnRanges txns=None) -> tuple:
        """Map the keys of the batches starting in ``buf[start:end)`` (whole
        batches: the last may run past ``end``) whose base offset is below
        ``stop_offset``; with ``txns`` (scanned, done), those of committed
        transactions too.  Returns (position reached, full): ``full`` when
        the batch at that position would not fit in the map, or (then
        :attr:`undecided` is set) is of a transaction ``txns`` found no
        marker for: the map ends before it."""
        cdef Py_buffer view
        cdef Py_ssize_t pos = start
        cdef int rc = RUN_END
        cdef const uint8_t *b
        cdef int32_t count
        if txns is not None and not txns.sorted:
            raise ValueError("transactions not done()")
        if txns is not None:
            self.txns, self.ntxns = txns.ranges, txns.n
        self.txn_aware = txns is not None
        _get_buffer(buf, &view)
        try:
            if start < 0 or end > view.len:
                raise ValueError(f"window [{start}, {end}) outside a buffer of {view.len}")
            while True:
                with nogil:
                    rc = self._map_run(<const uint8_t *>view.buf, view.len, &pos, end,
                                       stop_offset)
                if rc != RUN_COMPRESSED:
                    break
                b = <const uint8_t *>view.buf + pos
                count = <int32_t>rd32(b + OFF_RECORD_COUNT)
                inflated = _inflate(b, _batch_at(<const uint8_t *>view.buf, view.len, pos), pos)
                rc = self._map_records(<const uint8_t *>(<bytes>inflated),
                                       <const uint8_t *>(<bytes>inflated) + len(inflated),
                                       count, <int64_t>rd64(b))
                if rc != RUN_END:
                    break
                self.latest_offset = <int64_t>rd64(b) + <int32_t>rd32(b + OFF_LAST_OFFSET_DELTA)
                pos += _batch_at(<const uint8_t *>view.buf, view.len, pos)
        finally:
            PyBuffer_Release(&view)
            self.txns, self.ntxns = NULL, 0
        _check_rc(rc, pos)
        self.undecided = rc == RUN_UNDECIDED
        return pos, rc == RUN_FULL or rc == RUN_UNDECIDED


cdef bytes _inflate(const uint8_t *b, int size, Py_ssize_t pos):
    payload = PyMemoryView_FromMemory(<char *>b + HEADER_SIZE, size - HEADER_SIZE, PyBUF_READ)
    try:
        out = _decompress(rd16(b + OFF_ATTRIBUTES) & ATTR_COMPRESSION_MASK, payload)
    except Exception as exc:
        raise CorruptBatchError(f"batch at byte {pos}: {exc}", position=pos,
                                check="decompress") from None
    finally:
        payload.release()
    return out if type(out) is bytes else bytes(out)


cdef int _check_rc(int rc, Py_ssize_t pos) except -1:
    if rc == RUN_CORRUPT:
        raise CorruptBatchError(f"batch at byte {pos} does not parse", position=pos,
                                check="records")
    if rc == RUN_NOMEM:
        raise MemoryError()
    return 0


@cython.final
cdef class RecordFilter:
    """Rewrites batches against an :class:`OffsetMap` into a growing output
    buffer (:meth:`take` hands it over).  Counters add up over its life."""

    cdef uint8_t *out
    cdef Py_ssize_t out_len
    cdef Py_ssize_t out_cap
    cdef readonly int64_t records_read
    cdef readonly int64_t records_kept
    cdef readonly int64_t batches_read
    cdef readonly int64_t batches_kept
    cdef readonly int64_t bytes_read
    cdef readonly int64_t bytes_written
    # The largest batch max timestamp written (-1: none), for the segment's roll rule.
    cdef readonly int64_t max_timestamp
    # Batches given a delete horizon (they kept tombstones and had none).
    cdef readonly int64_t horizons_set
    # Aborted transactions' batches dropped, COMMIT markers dropped.
    cdef readonly int64_t aborted_batches_removed
    cdef readonly int64_t markers_removed
    # The clean's time, and the horizon it stamps: set by run().
    cdef int64_t now_ms
    cdef int64_t horizon_ms
    # The transactions of the run in progress (see TxnRanges; NULL: none known)
    cdef bint txn_aware
    cdef txn_range *txns
    cdef Py_ssize_t ntxns

    def __cinit__(self):
        self.out = NULL
        self.out_len = self.out_cap = 0
        self.max_timestamp = -1

    def __dealloc__(self):
        free(self.out)

    @property
    def pending(self) -> int:
        """Bytes written and not taken yet."""
        return self.out_len

    def take(self) -> bytearray:
        """The batches written since the last call."""
        out = PyByteArray_FromStringAndSize(<char *>self.out, self.out_len)
        self.bytes_written += self.out_len
        self.out_len = 0
        return out

    cdef int _reserve(self, Py_ssize_t n) noexcept nogil:
        cdef Py_ssize_t cap
        cdef uint8_t *p
        if self.out_len + n <= self.out_cap:
            return 0
        cap = max(self.out_cap * 2, self.out_len + n, 1 << 16)
        p = <uint8_t *>realloc(self.out, cap)
        if p == NULL:
            return -1
        self.out = p
        self.out_cap = cap
        return 0

    cdef int _keep(self, OffsetMap m, const record_view *r, int64_t base,
                   bint tombstones) noexcept nogil:
        cdef int64_t found
        if r.key_length < 0:
            return 0
        found = m._get(r.key, r.key_length)
        if found != EMPTY and found > base + r.offset_delta:
            return 0
        return tombstones or r.value_length >= 0

    cdef inline bint _retains_tombstones(self, const uint8_t *b) noexcept nogil:
        """Whether the batch's tombstones stay: it has no delete horizon yet,
        or its horizon has not passed."""
        return (not (rd16(b + OFF_ATTRIBUTES) & ATTR_DELETE_HORIZON)
                or self.now_ms < <int64_t>rd64(b + OFF_BASE_TIMESTAMP))

    cdef int _filter_records(self, OffsetMap m, const uint8_t *b, const uint8_t *p,
                             const uint8_t *end, int32_t count, bint tombstones,
                             int32_t *kept, int64_t *max_ts, int32_t *nulls) noexcept nogil:
        """Append the kept records of one batch to the output (room reserved
        by the caller: at most ``end - p`` bytes); ``nulls``: the tombstones
        among them."""
        cdef record_view r
        cdef int32_t k
        cdef int64_t base = <int64_t>rd64(b), base_ts = <int64_t>rd64(b + OFF_BASE_TIMESTAMP)
        cdef int64_t ts
        for k in range(count):
            if _next_record(&p, end, &r):
                return RUN_CORRUPT
            if self._keep(m, &r, base, tombstones):
                memcpy(self.out + self.out_len, r.start, r.end - r.start)
                self.out_len += r.end - r.start
                kept[0] += 1
                nulls[0] += r.value_length < 0
                ts = <int64_t>(<uint64_t>base_ts + <uint64_t>r.ts_delta)
                if ts > max_ts[0]:
                    max_ts[0] = ts
        if p != end:
            return RUN_CORRUPT
        return RUN_END

    cdef int _rebase(self, Py_ssize_t start, int32_t kept, int64_t shift) noexcept nogil:
        """Re-encode the records at ``out[start:]`` with their timestamp
        deltas less ``shift`` (the batch's base timestamp moves up by it to
        the delete horizon; each record's timestamp stays).  A record grows
        by 10 bytes at most: 9 of timestamp varlong, 1 of length varint."""
        cdef record_view r
        cdef const uint8_t *src
        cdef const uint8_t *src_end
        cdef uint8_t *dst
        cdef int64_t delta
        cdef Py_ssize_t n = self.out_len - start, rest
        if self._reserve(n + <Py_ssize_t>kept * 10):
            return RUN_NOMEM
        src = self.out + start
        src_end = src + n
        dst = self.out + self.out_len  # rebuilt past the end, then moved down
        while src < src_end:
            if _next_record(&src, src_end, &r):
                return RUN_CORRUPT
            delta = <int64_t>(<uint64_t>r.ts_delta - <uint64_t>shift)  # wraps, as in Java
            rest = r.end - r.after_ts
            dst += pylog_varint_encode(<int32_t>(1 + pylog_varlong_size(delta) + rest), dst)
            dst[0] = r.attrs[0]
            dst += 1
            dst += pylog_varlong_encode(delta, dst)
            memcpy(dst, r.after_ts, rest)
            dst += rest
        n = dst - (self.out + self.out_len)
        memmove(self.out + start, self.out + self.out_len, n)
        self.out_len = start + n
        return RUN_END

    cdef int _stamp_horizon(self, const uint8_t *b, Py_ssize_t records_at,
                            int32_t kept) noexcept nogil:
        """Rebase the kept records of batch ``b`` (at ``records_at``) on the
        delete horizon; the header follows in _finish_header."""
        cdef int64_t base_ts = <int64_t>rd64(b + OFF_BASE_TIMESTAMP)
        self.horizons_set += 1
        return self._rebase(records_at, kept,
                            <int64_t>(<uint64_t>self.horizon_ms - <uint64_t>base_ts))

    cdef int _settle(self, const uint8_t *b, int size, Py_ssize_t at, Py_ssize_t records_at,
                     int32_t count, int32_t kept, int32_t nulls, bint *stamp) noexcept nogil:
        """After the filter wrote batch ``b``'s kept records at ``records_at``
        (its header to come at ``at``): copy the batch whole when it kept every
        record and needs no horizon, drop it when it kept none (RUN_END for
        both), else RUN_REBUILD, the records rebased on a delete horizon first
        when they hold the batch's first kept tombstones (``stamp``)."""
        cdef int rc
        stamp[0] = nulls > 0 and not (rd16(b + OFF_ATTRIBUTES) & ATTR_DELETE_HORIZON)
        if kept == 0 or (kept == count and not stamp[0]):
            self.out_len = at
            if kept:
                self._copied(b, size)
            return RUN_END
        if stamp[0]:
            rc = self._stamp_horizon(b, records_at, kept)
            if rc != RUN_END:
                self.out_len = at
                return rc
        return RUN_REBUILD

    cdef void _finish_header(self, const uint8_t *b, Py_ssize_t at, int32_t kept,
                             int64_t max_ts, bint stamp) noexcept nogil:
        """The header of a rebuilt batch at ``at``, its records after it;
        with ``stamp``, the delete horizon goes in (see _stamp_horizon)."""
        cdef uint8_t *h = self.out + at
        cdef Py_ssize_t length = self.out_len - at
        cdef int64_t ts
        memcpy(h, b, HEADER_SIZE)
        if stamp:
            wr16(h + OFF_ATTRIBUTES, rd16(b + OFF_ATTRIBUTES) | ATTR_DELETE_HORIZON)
            wr64(h + OFF_BASE_TIMESTAMP, <uint64_t>self.horizon_ms)
        wr32(h + OFF_BATCH_LENGTH, <uint32_t>(length - LOG_OVERHEAD))
        wr32(h + OFF_RECORD_COUNT, <uint32_t>kept)
        if not (rd16(b + OFF_ATTRIBUTES) & ATTR_TIMESTAMP_TYPE):
            wr64(h + OFF_MAX_TIMESTAMP, <uint64_t>max_ts)
        wr32(h + OFF_CRC, pylog_crc32c(0, h + OFF_ATTRIBUTES, length - OFF_ATTRIBUTES))
        self.batches_kept += 1
        ts = <int64_t>rd64(h + OFF_MAX_TIMESTAMP)
        if ts > self.max_timestamp:
            self.max_timestamp = ts

    cdef void _copied(self, const uint8_t *b, int size) noexcept nogil:
        cdef int64_t ts = <int64_t>rd64(b + OFF_MAX_TIMESTAMP)
        memcpy(self.out + self.out_len, b, size)
        self.out_len += size
        self.batches_kept += 1
        if ts > self.max_timestamp:
            self.max_timestamp = ts

    cdef int _marker(self, const uint8_t *b, int size, txn_range *txn) noexcept nogil:
        """A control batch (room for it reserved): copied, except a COMMIT
        marker none of whose transaction's batches kept records (``txn``
        NULL: none read in this clean), which is dropped once its delete
        horizon has passed, and given one when it has none."""
        cdef const uint8_t *p = b + HEADER_SIZE
        cdef record_view r
        cdef int64_t ts, max_ts = -1, base_ts = <int64_t>rd64(b + OFF_BASE_TIMESTAMP)
        cdef int32_t count = <int32_t>rd32(b + OFF_RECORD_COUNT), k
        cdef Py_ssize_t at = self.out_len
        cdef int rc
        if (not self.txn_aware or (txn != NULL and txn.retained)
                or _control_type(b, size) != CONTROL_COMMIT):
            self._copied(b, size)
            return RUN_END
        if rd16(b + OFF_ATTRIBUTES) & ATTR_DELETE_HORIZON:
            if self.now_ms >= base_ts:
                self.markers_removed += 1
            else:
                self._copied(b, size)
            return RUN_END
        # The first clean to find it removable: rebuilt on a delete horizon.
        memcpy(self.out + at, b, size)
        self.out_len = at + size
        for k in range(count):
            if _next_record(&p, b + size, &r):
                self.out_len = at
                return RUN_CORRUPT
            ts = <int64_t>(<uint64_t>base_ts + <uint64_t>r.ts_delta)
            if ts > max_ts:
                max_ts = ts
        rc = self._stamp_horizon(b, at + HEADER_SIZE, count)
        if rc != RUN_END:
            self.out_len = at
            return rc
        self._finish_header(b, at, count, max_ts, True)
        return RUN_END

    cdef int _run(self, OffsetMap m, const uint8_t *buf, Py_ssize_t buflen, Py_ssize_t *pos,
                  Py_ssize_t end, Py_ssize_t out_limit) noexcept nogil:
        cdef int size, rc, kind
        cdef const uint8_t *b
        cdef int32_t count, kept, nulls
        cdef int64_t max_ts
        cdef Py_ssize_t at
        cdef bint stamp
        cdef txn_range *txn
        while pos[0] < end:
            if self.out_len >= out_limit:
                return RUN_LIMIT
            size = _batch_at(buf, buflen, pos[0])
            if size < 0:
                return RUN_CORRUPT
            b = buf + pos[0]
            count = <int32_t>rd32(b + OFF_RECORD_COUNT)
            if count < 0:
                return RUN_CORRUPT
            if self._reserve(size):
                return RUN_NOMEM
            kind = _txn_of(self.txns, self.ntxns, b, &txn)
            if rd16(b + OFF_ATTRIBUTES) & ATTR_CONTROL:
                rc = self._marker(b, size, txn)
                if rc != RUN_END:
                    return rc
            elif kind == TXN_ABORTED:
                self.aborted_batches_removed += 1
                self.records_read += count
            elif rd16(b + OFF_ATTRIBUTES) & ATTR_COMPRESSION_MASK:
                return RUN_COMPRESSED
            else:
                at = self.out_len
                self.out_len += HEADER_SIZE
                kept = nulls = 0
                max_ts = -1
                rc = self._filter_records(m, b, b + HEADER_SIZE, b + size, count,
                                          self._retains_tombstones(b), &kept, &max_ts, &nulls)
                if rc != RUN_END:
                    self.out_len = at
                    return rc
                rc = self._settle(b, size, at, at + HEADER_SIZE, count, kept, nulls, &stamp)
                if rc == RUN_REBUILD:
                    self._finish_header(b, at, kept, max_ts, stamp)
                elif rc != RUN_END:
                    return rc
                if kept and txn != NULL:
                    txn.retained = 1
                self.records_read += count
                self.records_kept += kept
            self.batches_read += 1
            self.bytes_read += size
            pos[0] += size
        return RUN_END

    cdef int _compressed(self, OffsetMap m, const uint8_t *b, int size,
                         Py_ssize_t pos) except -1:
        """One compressed batch: decompress, filter, compress the kept records
        again with the batch's codec (the GIL is held)."""
        cdef int32_t count = <int32_t>rd32(b + OFF_RECORD_COUNT), kept = 0, nulls = 0
        cdef int64_t max_ts = -1
        cdef Py_ssize_t at = self.out_len, start
        cdef int rc
        cdef bint stamp
        cdef txn_range *txn
        inflated = _inflate(b, size, pos)
        if self._reserve(HEADER_SIZE + len(inflated)):
            raise MemoryError()
        self.out_len = start = at + HEADER_SIZE
        rc = self._filter_records(m, b, <const uint8_t *>(<bytes>inflated),
                                  <const uint8_t *>(<bytes>inflated) + len(inflated), count,
                                  self._retains_tombstones(b), &kept, &max_ts, &nulls)
        if rc != RUN_END:
            self.out_len = at
            _check_rc(rc, pos)
        rc = self._settle(b, size, at, start, count, kept, nulls, &stamp)
        _check_rc(rc, pos)
        if rc == RUN_REBUILD:
            records = PyMemoryView_FromMemory(<char *>self.out + start, self.out_len - start,
                                              PyBUF_READ)
            try:
                packed = _compress(rd16(b + OFF_ATTRIBUTES) & ATTR_COMPRESSION_MASK, records)
            finally:
                records.release()
            self.out_len = start
            if self._reserve(len(packed)):
                raise MemoryError()
            memcpy(self.out + start, <const uint8_t *>(<bytes>packed), len(packed))
            self.out_len = start + len(packed)
            self._finish_header(b, at, kept, max_ts, stamp)
        if kept and _txn_of(self.txns, self.ntxns, b, &txn) == TXN_COMMITTED:
            txn.retained = 1
        self.records_read += count
        self.records_kept += kept
        self.batches_read += 1
        self.bytes_read += size
        return 0

    def run(self, OffsetMap offsets, buf, Py_ssize_t start, Py_ssize_t end,
            int64_t now_ms, int64_t horizon_ms, Py_ssize_t out_limit=1 << 62,
            TxnRanges txns=None) -> int:
        """Filter the batches starting in ``buf[start:end)`` (the last may run
        past ``end``) into the output; stops early once :attr:`pending`
        reaches ``out_limit``.  Returns the position reached.  ``now_ms``: the
        clean's time, against which batches' delete horizons are read;
        ``horizon_ms``: the horizon given to batches that keep tombstones and
        have none (``now_ms`` plus ``delete.retention.ms``); ``txns``: the
        log's transactions, scanned from its start past ``buf`` (one object
        for the whole clean, fed the log in offset order: it notes which
        transactions kept records for their markers)."""
        cdef Py_buffer view
        cdef Py_ssize_t pos = start
        cdef int rc = RUN_END, size
        if horizon_ms < now_ms:
            raise ValueError(f"delete horizon {horizon_ms} before the clean's time {now_ms}")
        if txns is not None and not txns.sorted:
            raise ValueError("transactions not done()")
        self.now_ms, self.horizon_ms = now_ms, horizon_ms
        self.txn_aware = txns is not None
        if txns is not None:
            self.txns, self.ntxns = txns.ranges, txns.n
        _get_buffer(buf, &view)
        try:
            if start < 0 or end > view.len:
                raise ValueError(f"window [{start}, {end}) outside a buffer of {view.len}")
            while True:
                with nogil:
                    rc = self._run(offsets, <const uint8_t *>view.buf, view.len, &pos, end,
                                   out_limit)
                if rc != RUN_COMPRESSED:
                    break
                size = _batch_at(<const uint8_t *>view.buf, view.len, pos)
                self._compressed(offsets, <const uint8_t *>view.buf + pos, size, pos)
                pos += size
        finally:
            PyBuffer_Release(&view)
            self.txns, self.ntxns = NULL, 0
        _check_rc(rc, pos)
        return pos
