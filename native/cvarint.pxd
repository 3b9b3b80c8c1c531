# Declarations of native/include/varint.h for cimport by the .pyx modules.
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t


cdef extern from "varint.h" nogil:
    enum:
        PYLOG_VARINT_TRUNCATED
        PYLOG_VARINT_TOO_LONG
        PYLOG_VARINT32_MAX
        PYLOG_VARINT64_MAX

    int pylog_uvarint32_decode(const uint8_t *p, const uint8_t *end, uint32_t *out)
    int pylog_uvarint64_decode(const uint8_t *p, const uint8_t *end, uint64_t *out)
    int32_t pylog_unzigzag32(uint32_t u)
    int64_t pylog_unzigzag64(uint64_t u)
    int pylog_varint_decode(const uint8_t *p, const uint8_t *end, int32_t *out)
    int pylog_varlong_decode(const uint8_t *p, const uint8_t *end, int64_t *out)
    int pylog_uvarint32_encode(uint32_t v, uint8_t *buf)
    int pylog_uvarint64_encode(uint64_t v, uint8_t *buf)
    int pylog_varint_encode(int32_t v, uint8_t *buf)
    int pylog_varlong_encode(int64_t v, uint8_t *buf)
    int pylog_uvarint32_size(uint32_t v)
    int pylog_uvarint64_size(uint64_t v)
    int pylog_varint_size(int32_t v)
    int pylog_varlong_size(int64_t v)
