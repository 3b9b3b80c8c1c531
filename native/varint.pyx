"""Kafka varints: zig-zag ``varint`` (int32), ``varlong`` (int64) and unsigned
``uvarint`` (uint32, the protocol's UNSIGNED_VARINT).

``decode_*(buf, pos=0)`` returns ``(value, new_pos)``.  A varint cut short by
the end of the buffer raises :class:`pylog.errors.VarintError` ("truncated"),
one longer than its width allows raises it too ("too long"); reads never go
past the buffer.  Values outside the type's range raise ``OverflowError``.
The C side lives in ``native/include/varint.h`` and is shared with the record
batch codec.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_FromStringAndSize
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t

from cvarint cimport *

from pylog.errors import VarintError



cdef object _fail(int code, Py_ssize_t pos, str what):
    if code == PYLOG_VARINT_TRUNCATED:
        raise VarintError(f"truncated {what} at byte {pos}")
    raise VarintError(f"{what} at byte {pos} is too long")


cdef inline Py_ssize_t _check_pos(Py_ssize_t pos, Py_ssize_t n) except -1:
    if pos < 0 or pos > n:
        raise IndexError(f"position {pos} out of range for a buffer of {n} bytes")
    return pos


def encode_varint(int32_t v) -> bytes:
    """Zig-zag varint of a signed 32-bit int."""
    cdef uint8_t buf[PYLOG_VARINT32_MAX]
    return PyBytes_FromStringAndSize(<char *>buf, pylog_varint_encode(v, buf))


def encode_varlong(int64_t v) -> bytes:
    """Zig-zag varint of a signed 64-bit int."""
    cdef uint8_t buf[PYLOG_VARINT64_MAX]
    return PyBytes_FromStringAndSize(<char *>buf, pylog_varlong_encode(v, buf))


def encode_uvarint(uint32_t v) -> bytes:
    """Unsigned varint of a 32-bit unsigned int."""
    cdef uint8_t buf[PYLOG_VARINT32_MAX]
    return PyBytes_FromStringAndSize(<char *>buf, pylog_uvarint32_encode(v, buf))


def size_of_varint(int32_t v) -> int:
    return pylog_varint_size(v)


def size_of_varlong(int64_t v) -> int:
    return pylog_varlong_size(v)


def size_of_uvarint(uint32_t v) -> int:
    return pylog_uvarint32_size(v)


def decode_varint(buf, Py_ssize_t pos=0) -> tuple[int, int]:
    """Decode a zig-zag int32 varint at ``buf[pos:]``: ``(value, new_pos)``."""
    cdef Py_buffer view
    cdef int32_t v = 0
    cdef int n
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        _check_pos(pos, view.len)
        n = pylog_varint_decode(<const uint8_t *>view.buf + pos,
                                <const uint8_t *>view.buf + view.len, &v)
    finally:
        PyBuffer_Release(&view)
    if n < 0:
        _fail(n, pos, "varint")
    return v, pos + n


def decode_varlong(buf, Py_ssize_t pos=0) -> tuple[int, int]:
    """Decode a zig-zag int64 varint at ``buf[pos:]``: ``(value, new_pos)``."""
    cdef Py_buffer view
    cdef int64_t v = 0
    cdef int n
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        _check_pos(pos, view.len)
        n = pylog_varlong_decode(<const uint8_t *>view.buf + pos,
                                 <const uint8_t *>view.buf + view.len, &v)
    finally:
        PyBuffer_Release(&view)
    if n < 0:
        _fail(n, pos, "varlong")
    return v, pos + n


def decode_uvarint(buf, Py_ssize_t pos=0) -> tuple[int, int]:
    """Decode an unsigned 32-bit varint at ``buf[pos:]``: ``(value, new_pos)``."""
    cdef Py_buffer view
    cdef uint32_t v = 0
    cdef int n
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        _check_pos(pos, view.len)
        n = pylog_uvarint32_decode(<const uint8_t *>view.buf + pos,
                                   <const uint8_t *>view.buf + view.len, &v)
    finally:
        PyBuffer_Release(&view)
    if n < 0:
        _fail(n, pos, "unsigned varint")
    return v, pos + n
