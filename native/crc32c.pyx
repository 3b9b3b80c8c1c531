"""CRC32C (Castagnoli) checksums over any contiguous bytes-like object.

``crc32c(data, value)`` continues from ``value``, so
``crc32c(b, crc32c(a)) == crc32c(a + b)``.  The hardware path (SSE4.2, three
interleaved streams, or AVX-512 carry-less folding) is picked at import from
what the CPU has; ``IMPLEMENTATION`` names it.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.exc cimport PyErr_Clear
from cpython.long cimport PyLong_AsUnsignedLong
from cpython.number cimport PyNumber_Index
from libc.stdint cimport uint32_t


cdef extern from "crc32c.h" nogil:
    uint32_t pylog_crc32c(uint32_t crc, const void *buf, size_t len)
    uint32_t pylog_crc32c_sw(uint32_t crc, const void *buf, size_t len)
    uint32_t pylog_crc32c_hw(uint32_t crc, const void *buf, size_t len)
    uint32_t pylog_crc32c_sse42(uint32_t crc, const void *buf, size_t len)
    uint32_t pylog_crc32c_avx512(uint32_t crc, const void *buf, size_t len)
    int pylog_crc32c_hw_available()
    int pylog_crc32c_avx512_available()
    const char *pylog_crc32c_impl_name()
    void pylog_crc32c_init()

# The same call without Cython's automatic error check, so the success path
# pays for no exception machinery; failures go to _buffer_error().
cdef extern from "Python.h":
    int _get_buffer "PyObject_GetBuffer" (object obj, Py_buffer *view, int flags)

ctypedef uint32_t (*crc_fn)(uint32_t, const void *, size_t) noexcept nogil

# Below this size releasing and re-taking the GIL costs more than the CRC.
cdef enum:
    GIL_RELEASE_MIN = 65536

pylog_crc32c_init()
cdef bint _hw = pylog_crc32c_hw_available()
cdef bint _avx512 = pylog_crc32c_avx512_available()
HARDWARE: bool = bool(_hw)
AVX512: bool = bool(_avx512)
IMPLEMENTATION: str = pylog_crc32c_impl_name().decode("ascii")


cdef object _buffer_error(object data):
    # Cold path: redo the request through the checked wrapper to get the
    # exception, and name what is wrong when the object has a buffer at all.
    cdef Py_buffer view
    PyErr_Clear()
    try:
        PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    except TypeError:
        raise
    except Exception as exc:  # non-contiguous views, odd exporters
        raise BufferError(
            f"crc32c needs a C-contiguous bytes-like object, got "
            f"{type(data).__name__}: {exc}") from exc
    PyBuffer_Release(&view)
    raise BufferError("could not get a buffer from " + type(data).__name__)


cdef inline uint32_t _start_value(object value) except? 0xFFFFFFFF:
    # Typed uint32_t arguments would let Cython truncate floats silently;
    # take integers only (operator.index), and only 0..2**32-1.
    if type(value) is not int:
        value = PyNumber_Index(value)
    cdef unsigned long v = PyLong_AsUnsignedLong(value)  # OverflowError if < 0
    if v > 0xFFFFFFFF:
        raise OverflowError(f"CRC32C start value {value} does not fit in 32 bits")
    return <uint32_t>v


cdef inline uint32_t _compute(crc_fn fn, uint32_t value, const void *buf,
                              Py_ssize_t n) noexcept:
    if n >= GIL_RELEASE_MIN:
        with nogil:
            return fn(value, buf, <size_t>n)
    return fn(value, buf, <size_t>n)


cdef inline object _run(crc_fn fn, object data, object start):
    cdef uint32_t value = _start_value(start)
    cdef Py_buffer view
    if type(data) is bytes:
        # Immutable, and kept alive by our reference: read it in place and
        # skip the buffer request/release (a quarter of a small call).
        return _compute(fn, value, PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))
    if _get_buffer(data, &view, PyBUF_SIMPLE) != 0:
        return _buffer_error(data)
    value = _compute(fn, value, view.buf, view.len)
    PyBuffer_Release(&view)
    return value


def crc32c(data, value=0) -> int:
    """CRC32C of ``data`` continuing from ``value`` (0 to start)."""
    return _run(pylog_crc32c, data, value)


def crc32c_sw(data, value=0) -> int:
    """CRC32C with the portable slicing-by-8 implementation."""
    return _run(pylog_crc32c_sw, data, value)


def crc32c_hw(data, value=0) -> int:
    """CRC32C with the best hardware path; RuntimeError without one."""
    if not _hw:
        raise RuntimeError("this CPU has no SSE4.2 + PCLMULQDQ CRC32C support")
    return _run(pylog_crc32c_hw, data, value)


def crc32c_sse42(data, value=0) -> int:
    """CRC32C with the SSE4.2 3-way path (for tests); RuntimeError without it."""
    if not _hw:
        raise RuntimeError("this CPU has no SSE4.2 + PCLMULQDQ CRC32C support")
    return _run(pylog_crc32c_sse42, data, value)


def crc32c_avx512(data, value=0) -> int:
    """CRC32C with the AVX-512 folding path (for tests); RuntimeError without it."""
    if not _avx512:
        raise RuntimeError("this CPU has no AVX-512 VPCLMULQDQ CRC32C support")
    return _run(pylog_crc32c_avx512, data, value)
