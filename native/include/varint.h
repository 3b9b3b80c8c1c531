/* Kafka varints: unsigned LEB128 ("uvarint"), and zig-zag signed varint (int32)
 * / varlong (int64) as used by record batches v2 (protobuf's sint32/sint64).
 *
 * Decoders take [p, end) and return the number of bytes consumed, or
 *   PYLOG_VARINT_TRUNCATED (-1): the buffer ends inside the varint,
 *   PYLOG_VARINT_TOO_LONG  (-2): more than 5 (32-bit) / 10 (64-bit) bytes, or
 *                                the last byte carries bits beyond the width.
 * They never read at or past `end`.  Encoders write into a caller buffer of at
 * least PYLOG_VARINT32_MAX (5) / PYLOG_VARINT64_MAX (10) bytes and return the
 * number of bytes written.  Unsigned 32-bit is Kafka's UNSIGNED_VARINT (compact
 * lengths, tagged fields).
 */
#ifndef PYLOG_VARINT_H
#define PYLOG_VARINT_H

#include <stddef.h>
#include <stdint.h>

#define PYLOG_VARINT_TRUNCATED (-1)
#define PYLOG_VARINT_TOO_LONG (-2)
#define PYLOG_VARINT32_MAX 5
#define PYLOG_VARINT64_MAX 10

static inline uint32_t pylog_zigzag32(int32_t v) {
    return ((uint32_t)v << 1) ^ (uint32_t)(0 - ((uint32_t)v >> 31));
}
static inline int32_t pylog_unzigzag32(uint32_t u) {
    return (int32_t)((u >> 1) ^ (0u - (u & 1u)));
}
static inline uint64_t pylog_zigzag64(int64_t v) {
    return ((uint64_t)v << 1) ^ (uint64_t)(0 - ((uint64_t)v >> 63));
}
static inline int64_t pylog_unzigzag64(uint64_t u) {
    return (int64_t)((u >> 1) ^ (0ull - (u & 1ull)));
}

static inline int pylog_uvarint32_decode(const uint8_t *p, const uint8_t *end, uint32_t *out) {
    size_t avail = (p < end) ? (size_t)(end - p) : 0;
    uint32_t v = 0;
    /* Fast paths: most lengths and deltas fit in one or two bytes. */
    if (avail && p[0] < 0x80) {
        *out = p[0];
        return 1;
    }
    if (avail >= 2 && p[1] < 0x80) {
        *out = (uint32_t)(p[0] & 0x7F) | (uint32_t)p[1] << 7;
        return 2;
    }
    for (int i = 0; i < PYLOG_VARINT32_MAX; i++) {
        if ((size_t)i >= avail)
            return PYLOG_VARINT_TRUNCATED;
        uint8_t b = p[i];
        /* The 5th byte holds bits 28..31 only: no continuation, no high bits. */
        if (i == 4 && (b & 0xF0))
            return PYLOG_VARINT_TOO_LONG;
        v |= (uint32_t)(b & 0x7F) << (7 * i);
        if (!(b & 0x80)) {
            *out = v;
            return i + 1;
        }
    }
    return PYLOG_VARINT_TOO_LONG; /* not reached */
}

static inline int pylog_uvarint64_decode(const uint8_t *p, const uint8_t *end, uint64_t *out) {
    size_t avail = (p < end) ? (size_t)(end - p) : 0;
    uint64_t v = 0;
    if (avail && p[0] < 0x80) {
        *out = p[0];
        return 1;
    }
    if (avail >= 2 && p[1] < 0x80) {
        *out = (uint64_t)(p[0] & 0x7F) | (uint64_t)p[1] << 7;
        return 2;
    }
    for (int i = 0; i < PYLOG_VARINT64_MAX; i++) {
        if ((size_t)i >= avail)
            return PYLOG_VARINT_TRUNCATED;
        uint8_t b = p[i];
        /* The 10th byte holds bit 63 only. */
        if (i == 9 && (b & 0xFE))
            return PYLOG_VARINT_TOO_LONG;
        v |= (uint64_t)(b & 0x7F) << (7 * i);
        if (!(b & 0x80)) {
            *out = v;
            return i + 1;
        }
    }
    return PYLOG_VARINT_TOO_LONG; /* not reached */
}

static inline int pylog_varint_decode(const uint8_t *p, const uint8_t *end, int32_t *out) {
    uint32_t u;
    int n = pylog_uvarint32_decode(p, end, &u);
    if (n > 0)
        *out = pylog_unzigzag32(u);
    return n;
}

static inline int pylog_varlong_decode(const uint8_t *p, const uint8_t *end, int64_t *out) {
    uint64_t u;
    int n = pylog_uvarint64_decode(p, end, &u);
    if (n > 0)
        *out = pylog_unzigzag64(u);
    return n;
}

static inline int pylog_uvarint32_encode(uint32_t v, uint8_t *buf) {
    int n = 0;
    while (v >= 0x80) {
        buf[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    buf[n++] = (uint8_t)v;
    return n;
}

static inline int pylog_uvarint64_encode(uint64_t v, uint8_t *buf) {
    int n = 0;
    while (v >= 0x80) {
        buf[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    buf[n++] = (uint8_t)v;
    return n;
}

static inline int pylog_varint_encode(int32_t v, uint8_t *buf) {
    return pylog_uvarint32_encode(pylog_zigzag32(v), buf);
}

static inline int pylog_varlong_encode(int64_t v, uint8_t *buf) {
    return pylog_uvarint64_encode(pylog_zigzag64(v), buf);
}

static inline int pylog_uvarint32_size(uint32_t v) {
    int n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static inline int pylog_uvarint64_size(uint64_t v) {
    int n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static inline int pylog_varint_size(int32_t v) { return pylog_uvarint32_size(pylog_zigzag32(v)); }
static inline int pylog_varlong_size(int64_t v) { return pylog_uvarint64_size(pylog_zigzag64(v)); }

#endif /* PYLOG_VARINT_H */
