# Big-endian loads and stores (Kafka's byte order) for the .pyx modules: one
# copy, cimported.  gcc turns them into bswap / movbe.
from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t


cdef inline uint16_t rd16(const uint8_t *p) noexcept nogil:
    return (<uint16_t>p[0] << 8) | p[1]

cdef inline uint32_t rd32(const uint8_t *p) noexcept nogil:
    return (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | p[3]

cdef inline uint64_t rd64(const uint8_t *p) noexcept nogil:
    return (<uint64_t>rd32(p) << 32) | rd32(p + 4)

cdef inline void wr16(uint8_t *p, uint16_t v) noexcept nogil:
    p[0] = <uint8_t>(v >> 8)
    p[1] = <uint8_t>v

cdef inline void wr32(uint8_t *p, uint32_t v) noexcept nogil:
    p[0] = <uint8_t>(v >> 24)
    p[1] = <uint8_t>(v >> 16)
    p[2] = <uint8_t>(v >> 8)
    p[3] = <uint8_t>v

cdef inline void wr64(uint8_t *p, uint64_t v) noexcept nogil:
    wr32(p, <uint32_t>(v >> 32))
    wr32(p + 4, <uint32_t>v)
