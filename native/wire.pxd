# Kafka request reading and response writing for the native codecs
# (produce_codec, fetch_codec): one copy, cimported.  A Cursor walks a request
# frame; every read checks the bytes left first, so a malformed frame is a
# ProtocolError naming the API and version, never a read past the end and
# never an allocation sized by an unchecked length.
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t

from bigendian cimport rd16, rd32, wr16, wr32, wr64
from cvarint cimport pylog_uvarint32_encode, pylog_uvarint32_size


cdef extern from "Python.h":
    # The UTF-8 of a str without a copy (cached in the str), for writing names.
    const char *PyUnicode_AsUTF8AndSize(object s, Py_ssize_t *size) except NULL


cdef struct Cursor:
    const uint8_t *buf
    Py_ssize_t pos
    Py_ssize_t end
    const char *api  # for messages: "Produce", "Fetch"
    int version
    bint flexible  # compact lengths (off for the header's client id)


# -- reading ---------------------------------------------------------------------------

cdef inline int fail(Cursor *c, str what) except -1:
    from pylog.errors import ProtocolError  # the error path only
    raise ProtocolError(f"{c.api.decode()} v{c.version}: {what}")


cdef inline int need(Cursor *c, Py_ssize_t size, str what) except -1:
    if c.end - c.pos < size:
        fail(c, what)
    return 0


cdef inline int16_t read_int16(Cursor *c) except? -1:
    need(c, 2, "truncated int16")
    c.pos += 2
    return <int16_t>rd16(c.buf + c.pos - 2)


cdef inline int32_t read_int32(Cursor *c) except? -1:
    need(c, 4, "truncated int32")
    c.pos += 4
    return <int32_t>rd32(c.buf + c.pos - 4)


cdef inline int64_t read_uvarint(Cursor *c) except -1:
    """An unsigned varint of at most 5 bytes (Kafka's 32-bit ones).  Not
    varint.h's decoder: like Kafka's reader and the generic codec, this one
    does not refuse the fifth byte's high bits, and the twins must agree."""
    cdef uint64_t value = 0
    cdef int shift = 0
    cdef uint8_t b
    while True:
        need(c, 1, "truncated unsigned varint")
        b = c.buf[c.pos]
        c.pos += 1
        value |= <uint64_t>(b & 0x7F) << shift
        if not b & 0x80:
            return <int64_t>value
        shift += 7
        if shift >= 35:
            fail(c, "unsigned varint longer than 5 bytes")


cdef inline int64_t read_length(Cursor *c, bint wide) except -2:
    """A length or count, -1 for null: compact (uvarint - 1) in flexible
    versions, int16 (strings) or int32 (arrays, records) before."""
    cdef int64_t n
    if c.flexible:
        return read_uvarint(c) - 1
    n = read_int32(c) if wide else read_int16(c)
    if n < -1:
        fail(c, f"negative length {n}")
    return n


cdef inline object read_string(Cursor *c, bint nullable, str field):
    """A string field decoded (UTF-8 checked as the generic codec checks it);
    None for null.  Callers that drop the value still call this: an invalid
    string is a malformed request whether the broker uses it or not."""
    cdef int64_t n = read_length(c, False)
    if n < 0:
        if not nullable:
            fail(c, f"null in non-nullable field {field}")
        return None
    if n > c.end - c.pos:
        fail(c, f"{field} longer than the bytes left")
    try:
        s = PyUnicode_DecodeUTF8(<const char *>(c.buf + c.pos), n, NULL)
    except UnicodeDecodeError as exc:
        fail(c, f"{field}: {exc}")
    c.pos += n
    return s


cdef inline int skip_tags(Cursor *c) except -1:
    """A tagged-field section with no tag the codec uses: all are skipped
    (the usual empty section is one zero byte)."""
    cdef int64_t count, size
    if c.pos < c.end and c.buf[c.pos] == 0:
        c.pos += 1
        return 0
    count = read_uvarint(c)
    while count > 0:
        read_uvarint(c)  # the tag
        size = read_uvarint(c)
        if size > c.end - c.pos:
            fail(c, "tagged field longer than the bytes left")
        c.pos += size
        count -= 1
    return 0


cdef inline int64_t read_count(Cursor *c, Py_ssize_t min_size, str field) except -2:
    """An array's element count, checked against the bytes left (each element
    takes at least ``min_size`` bytes, the generic codec's bound)."""
    cdef int64_t n = read_length(c, True)
    if n < 0:
        fail(c, f"null in non-nullable field {field}")
    if n * min_size > c.end - c.pos:
        fail(c, f"array {field} longer than the bytes left")
    return n


cdef inline object read_request_header(Cursor *c, const void *buf, Py_ssize_t size,
                                       const char *api, int api_key, int min_version,
                                       int max_version, int first_flexible):
    """Start ``c`` on the frame ``buf[:size]`` and read its request header
    (v1, or v2 from ``first_flexible``); the frame must be ``api_key`` (named
    ``api`` in messages) at a version the codec serves.  Returns
    ``(version, correlation_id, client_id)``; the cursor is left at the body,
    in the version's length encoding.  Another key or version is the
    caller's mistake (the router checks both first): ValueError, not the
    ProtocolError of a malformed frame."""
    c.buf = <const uint8_t *>buf
    c.pos = 0
    c.end = size
    c.api = api
    c.version = 0
    c.flexible = False
    if c.end < 8:
        from pylog.errors import ProtocolError
        raise ProtocolError(f"request of {c.end} bytes is shorter than a request header")
    if read_int16(c) != api_key:
        raise ValueError(f"not a {c.api.decode()} request")
    cdef int version = read_int16(c)
    if not min_version <= version <= max_version:
        raise ValueError(f"{c.api.decode()} v{version} has no native codec")
    c.version = version
    correlation_id = read_int32(c)
    # The client id is a classic nullable string even in header v2; v2 adds
    # a tagged-field section.
    client_id = read_string(c, True, "client_id")
    c.flexible = version >= first_flexible
    if c.flexible:
        skip_tags(c)
    return version, correlation_id, client_id


# -- writing ---------------------------------------------------------------------------

cdef inline uint8_t *put16(uint8_t *p, int16_t v) noexcept:
    wr16(p, <uint16_t>v)
    return p + 2


cdef inline uint8_t *put32(uint8_t *p, int32_t v) noexcept:
    wr32(p, <uint32_t>v)
    return p + 4


cdef inline uint8_t *put64(uint8_t *p, int64_t v) noexcept:
    wr64(p, <uint64_t>v)
    return p + 8


cdef inline Py_ssize_t length_size(Py_ssize_t n, bint flexible, int classic) except -1:
    """Bytes of a length or count prefix (n = -1: null); a length its prefix
    cannot hold is refused, as the generic codec refuses it."""
    if flexible:
        if n + 1 > 0xFFFFFFFF:
            from pylog.errors import ProtocolError
            raise ProtocolError(f"length {n} does not fit an unsigned varint")
        return pylog_uvarint32_size(<uint32_t>(n + 1))
    if n > (0x7FFF if classic == 2 else 0x7FFFFFFF):
        from pylog.errors import ProtocolError
        raise ProtocolError(f"length {n} does not fit an int{classic * 8}")
    return classic


cdef inline int64_t checked_int(object value, int bits) except? -1:
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


cdef inline int check_partition_answer(tuple p, Py_ssize_t arity) except -1:
    """A partition's answer tuple of ``arity`` values checked before anything
    is written: Produce's and Fetch's both open with (index int32, error code
    int16, then three int64 offsets or times)."""
    if len(p) != arity:
        raise ValueError(f"a partition response is {arity} values")
    checked_int(p[0], 32)
    checked_int(p[1], 16)
    checked_int(p[2], 64)
    checked_int(p[3], 64)
    checked_int(p[4], 64)
    return 0


cdef inline uint8_t *put_length(uint8_t *p, Py_ssize_t n, bint flexible, bint wide) noexcept:
    if flexible:
        return p + pylog_uvarint32_encode(<uint32_t>(n + 1), p)
    return put32(p, <int32_t>n) if wide else put16(p, <int16_t>n)
