/* CRC32C (Castagnoli, reflected polynomial 0x82F63B78), as used by Kafka
 * record batches.
 *
 * Every function takes and returns the CRC as the user sees it (pre- and
 * post-inverted), so calls chain:
 *     pylog_crc32c(pylog_crc32c(0, a, n), b, m) == CRC of a||b
 *     pylog_crc32c(0, "123456789", 9) == 0xE3069283
 *
 * Several extensions compile crc32c.c into themselves; the symbols do not
 * clash because CPython loads extension modules with RTLD_LOCAL.
 */
#ifndef PYLOG_CRC32C_H
#define PYLOG_CRC32C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Best implementation for this CPU.  Safe to call without pylog_crc32c_init()
 * and from several threads at once (initialisation is lazy and idempotent). */
uint32_t pylog_crc32c(uint32_t crc, const void *buf, size_t len);

/* Portable slicing-by-8 fallback. */
uint32_t pylog_crc32c_sw(uint32_t crc, const void *buf, size_t len);

/* Best hardware path (AVX-512 folding where the CPU has it, else SSE4.2
 * 3-way); only call when pylog_crc32c_hw_available() is true. */
uint32_t pylog_crc32c_hw(uint32_t crc, const void *buf, size_t len);

int pylog_crc32c_hw_available(void); /* SSE4.2 + PCLMULQDQ */

/* The two hardware tiers by name, for tests and benchmarks.  Only call
 * _sse42 when pylog_crc32c_hw_available(), and _avx512 when
 * pylog_crc32c_avx512_available(). */
uint32_t pylog_crc32c_sse42(uint32_t crc, const void *buf, size_t len);
uint32_t pylog_crc32c_avx512(uint32_t crc, const void *buf, size_t len);
int pylog_crc32c_avx512_available(void);

/* "avx512-vpclmul", "sse4.2-3way" or "sw-slice8". */
const char *pylog_crc32c_impl_name(void);

/* Builds the tables and detects the CPU; optional, every entry point does it
 * on first use. */
void pylog_crc32c_init(void);

#ifdef __cplusplus
}
#endif

#endif /* PYLOG_CRC32C_H */
