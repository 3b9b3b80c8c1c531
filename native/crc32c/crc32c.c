/* CRC32C: portable slicing-by-8, and on x86-64 two hardware tiers: SSE4.2
 * crc32 in three interleaved streams, and AVX-512 VPCLMULQDQ folding.
 *
 * Internally CRCs are "raw" (no pre/post inversion); the public functions
 * invert on entry and exit.  Raw CRCs are linear, which the 3-way path relies
 * on: raw(s, A||B) = shift(raw(s, A), |B|) ^ raw(0, B), where shift(c, n) is
 * c * x^(8n) mod P.
 *
 * The hardware paths are compiled with per-function target attributes so the
 * build needs no -msse4.2/-mavx512f; CPU detection picks one at first use.
 */
#include "crc32c.h"

#include <stdatomic.h>
#include <string.h>

#define POLY 0x82F63B78u /* Castagnoli, bit-reflected */

/* ---- one-time initialisation ------------------------------------------ */

static uint32_t sw_table[8][256];
/* Written once during init, read-only afterwards. */
static int hw_ok;     /* SSE4.2 + PCLMULQDQ */
static int avx512_ok; /* and AVX-512 VPCLMULQDQ */

/* 0: not started, 1: in progress, 2: done.  The release store of 2 publishes
 * the tables and flags to every thread that loads 2 with acquire. */
static atomic_int init_state;

static void build_sw_tables(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (POLY & (0u - (c & 1)));
        sw_table[0][i] = c;
    }
    /* table[k][i]: the CRC of byte i followed by k zero bytes. */
    for (int k = 1; k < 8; k++)
        for (int i = 0; i < 256; i++) {
            uint32_t c = sw_table[k - 1][i];
            sw_table[k][i] = (c >> 8) ^ sw_table[0][c & 0xff];
        }
}

static void hw_init(void); /* x86-64 only; a no-op elsewhere */

void pylog_crc32c_init(void)
{
    int expected = 0;
    if (atomic_load_explicit(&init_state, memory_order_acquire) == 2)
        return;
    if (atomic_compare_exchange_strong(&init_state, &expected, 1)) {
        build_sw_tables();
        hw_init();
        atomic_store_explicit(&init_state, 2, memory_order_release);
        return;
    }
    /* Another thread is initialising; it takes microseconds, so spin. */
    while (atomic_load_explicit(&init_state, memory_order_acquire) != 2) {
    }
}

static inline void ensure_init(void)
{
    if (atomic_load_explicit(&init_state, memory_order_acquire) != 2)
        pylog_crc32c_init();
}

/* ---- portable slicing-by-8 -------------------------------------------- */

static inline uint32_t load_le32(const unsigned char *p)
{
    /* Byte assembly is endian-neutral; GCC turns it into one load on x86. */
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

static uint32_t sw_raw(uint32_t crc, const unsigned char *p, size_t len)
{
    const uint32_t(*t)[256] = (const uint32_t(*)[256])sw_table;
    while (len >= 8) {
        uint32_t lo = crc ^ load_le32(p);
        uint32_t hi = load_le32(p + 4);
        crc = t[7][lo & 0xff] ^ t[6][(lo >> 8) & 0xff] ^ t[5][(lo >> 16) & 0xff] ^
              t[4][lo >> 24] ^ t[3][hi & 0xff] ^ t[2][(hi >> 8) & 0xff] ^
              t[1][(hi >> 16) & 0xff] ^ t[0][hi >> 24];
        p += 8;
        len -= 8;
    }
    while (len--)
        crc = (crc >> 8) ^ t[0][(crc ^ *p++) & 0xff];
    return crc;
}

uint32_t pylog_crc32c_sw(uint32_t crc, const void *buf, size_t len)
{
    ensure_init();
    return ~sw_raw(~crc, (const unsigned char *)buf, len);
}

/* ---- x86-64 SSE4.2 + PCLMULQDQ ---------------------------------------- */

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <nmmintrin.h>
#include <wmmintrin.h>
#endif

/* -DPYLOG_CRC32C_NO_HW builds the portable-only variant, to test it on x86. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(PYLOG_CRC32C_NO_HW)
#define HAVE_HW 1
#define HW_TARGET __attribute__((target("sse4.2,pclmul")))

/* Buffers of at least this many bytes are split into three equal blocks
 * whose CRCs run in parallel: crc32 has a latency of 3 cycles but issues one
 * per cycle, so three independent chains keep the unit busy.  Below it, the
 * combine step costs more than it saves. */
#define THREEWAY_MIN 192
/* Largest block per stream.  Bigger blocks make the combine rarer; 8 KiB puts
 * it under 0.5% of the time. */
#define MAX_BLOCK 8192

/* shift_k[i] = x^(64*i - 33) mod P (bit-reflected): multiplying a raw CRC by
 * it with PCLMULQDQ and folding the 64-bit product with crc32 advances the
 * CRC over 8*i zero bytes.  (The reflected product carries one extra factor
 * x, and crc32 of a 64-bit word multiplies by x^32; 33 in all.) */
static uint32_t shift_k[2 * MAX_BLOCK / 8 + 1];

static void avx512_init(void);

static void hw_init(void)
{
    /* Bit loop for x^31, then 8 zero bytes (x^64) at a time via the table. */
    uint32_t v = 0x80000000u; /* x^0 */
    for (int i = 0; i < 31; i++)
        v = (v >> 1) ^ (POLY & (0u - (v & 1)));
    shift_k[0] = 0; /* unused: blocks are never empty */
    for (size_t i = 1; i < sizeof shift_k / sizeof shift_k[0]; i++) {
        shift_k[i] = v;
        for (int b = 0; b < 8; b++)
            v = (v >> 8) ^ sw_table[0][v & 0xff];
    }
    __builtin_cpu_init();
    hw_ok = __builtin_cpu_supports("sse4.2") && __builtin_cpu_supports("pclmul");
    avx512_init();
}

HW_TARGET static inline uint64_t load64(const unsigned char *p)
{
    uint64_t w;
    memcpy(&w, p, 8); /* unaligned-safe; compiles to one mov */
    return w;
}

HW_TARGET static uint32_t hw_1way(uint32_t crc, const unsigned char *p, size_t n)
{
    uint64_t c = crc;
    while (n >= 8) {
        c = _mm_crc32_u64(c, load64(p));
        p += 8;
        n -= 8;
    }
    crc = (uint32_t)c;
    if (n & 4) {
        uint32_t w;
        memcpy(&w, p, 4);
        crc = _mm_crc32_u32(crc, w);
        p += 4;
    }
    if (n & 2) {
        uint16_t w;
        memcpy(&w, p, 2);
        crc = _mm_crc32_u16(crc, w);
        p += 2;
    }
    if (n & 1)
        crc = _mm_crc32_u8(crc, *p);
    return crc;
}

/* c * x^(8 * 8i) mod P, i.e. c advanced over 8i zero bytes. */
HW_TARGET static inline __m128i shift_mul(uint64_t c, size_t i)
{
    return _mm_clmulepi64_si128(_mm_cvtsi64_si128((long long)c),
                                _mm_cvtsi32_si128((int)shift_k[i]), 0x00);
}

HW_TARGET static uint32_t hw_raw(uint32_t crc, const unsigned char *p, size_t n)
{
    if (n >= THREEWAY_MIN) {
        /* Align so the three streams (block sizes are multiples of 16) load
         * aligned words. */
        while ((uintptr_t)p & 7) {
            crc = _mm_crc32_u8(crc, *p++);
            n--;
        }
    }
    while (n >= THREEWAY_MIN) {
        size_t blk = n / 48 * 16; /* three blocks, each a multiple of 16 */
        if (blk > MAX_BLOCK)
            blk = MAX_BLOCK;
        const unsigned char *end = p + blk;
        uint64_t c0 = crc, c1 = 0, c2 = 0;
        /* Two words per stream per turn halves the loop overhead. */
        for (; p < end; p += 16) {
            c0 = _mm_crc32_u64(c0, load64(p));
            c1 = _mm_crc32_u64(c1, load64(p + blk));
            c2 = _mm_crc32_u64(c2, load64(p + 2 * blk));
            c0 = _mm_crc32_u64(c0, load64(p + 8));
            c1 = _mm_crc32_u64(c1, load64(p + blk + 8));
            c2 = _mm_crc32_u64(c2, load64(p + 2 * blk + 8));
        }
        /* crc = shift(c0, 2 blk) ^ shift(c1, blk) ^ c2; the two shifts share
         * one crc32 fold because folding is linear. */
        __m128i t = _mm_xor_si128(shift_mul(c0, 2 * blk / 8), shift_mul(c1, blk / 8));
        crc = (uint32_t)_mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(t)) ^ (uint32_t)c2;
        p += 2 * blk;
        n -= 3 * blk;
    }
    return hw_1way(crc, p, n);
}

uint32_t pylog_crc32c_sse42(uint32_t crc, const void *buf, size_t len)
{
    ensure_init(); /* shift_k must be built */
    return ~hw_raw(~crc, (const unsigned char *)buf, len);
}

/* AVX-512 tier: carry-less multiply folding, 256 bytes per turn in four zmm
 * accumulators.  The folding units are separate from the crc32 unit, so this
 * is not capped at one crc32 (8 bytes) per cycle; about twice as fast as the
 * 3-way path from 1 KiB up.  Folding keeps the accumulators congruent, modulo
 * P, to the data consumed so far; their 64 final bytes then go through crc32
 * as if they were the message. */
#define AVX512_TARGET __attribute__((target("sse4.2,pclmul,avx512f,avx512vl,vpclmulqdq")))
/* Below this the fixed cost (reduction, then a crc32 tail) loses to 3-way. */
#define AVX512_MIN 512
/* From this size on, first align to a cache line: once the data streams from
 * L2 or further, loads that straddle lines cost ~20%. */
#define AVX512_ALIGN_MIN 8192

/* Per 128-bit lane {lo qword, hi qword}: x^(8N+31) and x^(8N-33) mod P, for
 * folding N = 256 bytes (main loop) and N = 64 bytes (merging accumulators). */
static uint32_t fold256[2], fold64[2];

static uint32_t xpow(unsigned m) /* x^m mod P, bit-reflected */
{
    uint32_t v = 0x80000000u;
    while (m--)
        v = (v >> 1) ^ (POLY & (0u - (v & 1)));
    return v;
}

static void avx512_init(void)
{
    fold256[0] = xpow(8 * 256 + 31);
    fold256[1] = xpow(8 * 256 - 33);
    fold64[0] = xpow(8 * 64 + 31);
    fold64[1] = xpow(8 * 64 - 33);
    avx512_ok = hw_ok && __builtin_cpu_supports("avx512f") &&
                __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("vpclmulqdq");
}

AVX512_TARGET static inline __m512i fold_const(const uint32_t k[2])
{
    return _mm512_broadcast_i32x4(_mm_set_epi64x((long long)k[1], (long long)k[0]));
}

/* x advanced by the fold distance of k, xor data. */
AVX512_TARGET static inline __m512i fold(__m512i x, __m512i k, __m512i data)
{
    __m512i lo = _mm512_clmulepi64_epi128(x, k, 0x00);
    __m512i hi = _mm512_clmulepi64_epi128(x, k, 0x11);
    return _mm512_ternarylogic_epi64(lo, hi, data, 0x96); /* three-way xor */
}

AVX512_TARGET static uint32_t avx512_raw(uint32_t crc, const unsigned char *p, size_t n)
{
    if (n >= AVX512_ALIGN_MIN) {
        size_t head = (size_t)(-(uintptr_t)p & 63);
        crc = hw_1way(crc, p, head);
        p += head;
        n -= head;
    }
    if (n >= AVX512_MIN) {
        __m512i k = fold_const(fold256);
        /* A CRC state equals zero state with the state xored into the first
         * four message bytes. */
        __m512i x0 = _mm512_xor_si512(_mm512_loadu_si512(p),
                                      _mm512_maskz_set1_epi32(1, (int)crc));
        __m512i x1 = _mm512_loadu_si512(p + 64);
        __m512i x2 = _mm512_loadu_si512(p + 128);
        __m512i x3 = _mm512_loadu_si512(p + 192);
        for (p += 256, n -= 256; n >= 256; p += 256, n -= 256) {
            x0 = fold(x0, k, _mm512_loadu_si512(p));
            x1 = fold(x1, k, _mm512_loadu_si512(p + 64));
            x2 = fold(x2, k, _mm512_loadu_si512(p + 128));
            x3 = fold(x3, k, _mm512_loadu_si512(p + 192));
        }
        k = fold_const(fold64);
        x3 = fold(fold(fold(x0, k, x1), k, x2), k, x3);
        uint64_t w[8];
        _mm512_storeu_si512(w, x3);
        uint64_t c = 0;
        for (int i = 0; i < 8; i++)
            c = _mm_crc32_u64(c, w[i]);
        crc = (uint32_t)c;
    }
    return hw_raw(crc, p, n);
}

uint32_t pylog_crc32c_avx512(uint32_t crc, const void *buf, size_t len)
{
    ensure_init();
    return ~avx512_raw(~crc, (const unsigned char *)buf, len);
}

static uint32_t best_hw_raw(uint32_t crc, const unsigned char *p, size_t n)
{
    return avx512_ok ? avx512_raw(crc, p, n) : hw_raw(crc, p, n);
}

#else /* no hardware path on this target */
#define HAVE_HW 0

static void hw_init(void)
{
    hw_ok = avx512_ok = 0;
}

/* Never dispatched to; kept so the API links everywhere. */
uint32_t pylog_crc32c_sse42(uint32_t crc, const void *buf, size_t len)
{
    return pylog_crc32c_sw(crc, buf, len);
}

uint32_t pylog_crc32c_avx512(uint32_t crc, const void *buf, size_t len)
{
    return pylog_crc32c_sw(crc, buf, len);
}
#endif

uint32_t pylog_crc32c_hw(uint32_t crc, const void *buf, size_t len)
{
#if HAVE_HW
    ensure_init();
    return ~best_hw_raw(~crc, (const unsigned char *)buf, len);
#else
    return pylog_crc32c_sw(crc, buf, len);
#endif
}

/* ---- dispatch --------------------------------------------------------- */

uint32_t pylog_crc32c(uint32_t crc, const void *buf, size_t len)
{
    ensure_init();
#if HAVE_HW
    if (hw_ok)
        return ~best_hw_raw(~crc, (const unsigned char *)buf, len);
#endif
    return ~sw_raw(~crc, (const unsigned char *)buf, len);
}

int pylog_crc32c_hw_available(void)
{
    ensure_init();
    return hw_ok;
}

int pylog_crc32c_avx512_available(void)
{
    ensure_init();
    return avx512_ok;
}

const char *pylog_crc32c_impl_name(void)
{
    ensure_init();
    return avx512_ok ? "avx512-vpclmul" : hw_ok ? "sse4.2-3way" : "sw-slice8";
}
