/* float16 / bfloat16 <-> float32 by bit manipulation (no hardware half type needed). */
#include "ir/half.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* float16 bits -> float32, exact, without branches (so loops over it vectorize): every
 * case computed, the right one selected by |h|:
 * - normal: rebias the exponent;
 * - subnormal or zero: h * 2^-24, as (2^-14 + h * 2^-24) - 2^-14 in float32 (both exact);
 * - inf stays inf; NaN stays NaN, quiet, with its payload. */
static float f32_of_f16(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t a = h & 0x7fffu, man = a & 0x3ffu;
    uint32_t normal = (a << 13) + 0x38000000u; /* (127 - 15) << 23 */
    uint32_t sub = f32_bits(bits_f32((a << 13) + 0x38800000u) - bits_f32(0x38800000u)); /* 2^-14 */
    uint32_t big = 0x7f800000u | (man << 13) | (man ? 0x400000u : 0u);
    uint32_t r = a < 0x400u ? sub : normal;
    r = a >= 0x7c00u ? big : r;
    return bits_f32(r | sign);
}

float amp_f16_to_f32(uint16_t h) {
    return f32_of_f16(h);
}

/* float32 bits -> float16 bits, round to nearest even, without branches so that loops
 * over it vectorize (checked against a branchy reference on all 2^32 inputs). Every case
 * is computed and the right one selected by |x|:
 * - normal results: rebias the exponent and round the 13 dropped bits (adding 0xfff plus
 *   the lowest kept bit rounds halfway cases to even; a carry may round up to inf);
 * - below 2^-14 (subnormal or zero results): |x| + 0.5f, whose float32 rounding is exactly
 *   the float16 subnormal rounding, then the bits of 0.5f taken off;
 * - 65536 and up: inf; NaN stays NaN, quiet, with the top of its payload. */
static uint16_t f16_of_bits(uint32_t x) {
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t a = x & 0x7fffffffu;
    uint32_t normal = (a + 0xc8000fffu + ((a >> 13) & 1u)) >> 13; /* 0xc8000000: (15 - 127) << 23 */
    uint32_t sub = f32_bits(bits_f32(a) + 0.5f) - 0x3f000000u;
    uint32_t big = a > 0x7f800000u ? 0x7e00u | ((a >> 13) & 0x3ffu) : 0x7c00u;
    uint32_t r = a < 0x38800000u ? sub : normal; /* 0x38800000: 2^-14 */
    r = a >= 0x47800000u ? big : r;              /* 0x47800000: 2^16 */
    return (uint16_t)(r | sign);
}

uint16_t amp_f32_to_f16(float f) {
    return f16_of_bits(f32_bits(f));
}

float amp_bf16_to_f32(uint16_t h) {
    return bits_f32((uint32_t)h << 16);
}

/* float32 bits -> bfloat16 bits, round to nearest even; NaN stays NaN, quiet. */
static uint16_t bf16_of_bits(uint32_t u) {
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? (u >> 16) | 0x40u : rounded);
}

uint16_t amp_f32_to_bf16(float f) {
    return bf16_of_bits(f32_bits(f));
}

void amp_f32_to_f16_n_scalar(uint16_t *dst, const float *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = f16_of_bits(f32_bits(src[i]));
}

void amp_f16_to_f32_n_scalar(float *dst, const uint16_t *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = f32_of_f16(src[i]);
}

void amp_f32_to_bf16_n_scalar(uint16_t *dst, const float *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = bf16_of_bits(f32_bits(src[i]));
}

void amp_bf16_to_f32_n_scalar(float *dst, const uint16_t *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = bits_f32((uint32_t)src[i] << 16);
}

/* The float32 bits at p, which may be unaligned (hosts are little-endian, as ONNX's raw
 * data is). */
static uint32_t load_bits(const uint8_t *p) {
    uint32_t u;
    memcpy(&u, p, sizeof u);
    return u;
}

/* The one loop of both bytes-to-16-bit conversions: `narrow` is a constant at each call,
 * so the compiler makes a vectorized copy of the loop for each. */
static uint32_t narrow_bytes(uint16_t *dst, const uint8_t *p, size_t n, uint16_t (*narrow)(uint32_t)) {
    uint32_t most = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t u = load_bits(p + 4 * i), a = u & 0x7fffffffu;
        most = a > most ? a : most;
        dst[i] = narrow(u);
    }
    return most;
}

#if defined(__GNUC__) && defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#define AMP_HALF_X86 1

/* Whether this CPU has AVX2 (which the OS enables) and F16C, CPUID leaf 1's ECX bit 29:
 * x86-64 builds are for the baseline ISA. */
static bool have_avx2_f16c(void) {
    static atomic_int known; /* 0: not asked yet (in a VM, CPUID traps: asked once); 1 no, 2 yes */
    int k = atomic_load_explicit(&known, memory_order_relaxed);
    if (!k) {
        unsigned a, b, c, d;
        k = __builtin_cpu_supports("avx2") && __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) ? 2 : 1;
        atomic_store_explicit(&known, k, memory_order_relaxed);
    }
    return k == 2;
}

static uint32_t lanes_max(__m256i v) __attribute__((target("avx2")));
static uint32_t lanes_max(__m256i v) {
    uint32_t m[8], most = 0;
    _mm256_storeu_si256((__m256i *)m, v);
    for (int k = 0; k < 8; k++) most = m[k] > most ? m[k] : most;
    return most;
}

/* narrow_bytes for float16 by F16C, 8 elements an instruction: its rounding is IEEE's
 * nearest even on subnormals too, and a NaN becomes the quiet NaN with the top of its
 * payload, so the bits are f16_of_bits' (tests/ir/test_half.c). */
static uint32_t narrow_f16c(uint16_t *dst, const uint8_t *p, size_t n) __attribute__((target("avx2,f16c")));
static uint32_t narrow_f16c(uint16_t *dst, const uint8_t *p, size_t n) {
    const __m256i abs = _mm256_set1_epi32(0x7fffffff);
    __m256i most = _mm256_setzero_si256();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i u = _mm256_loadu_si256((const __m256i *)(const void *)(p + 4 * i));
        most = _mm256_max_epu32(most, _mm256_and_si256(u, abs));
        __m128i h = _mm256_cvtps_ph(_mm256_castsi256_ps(u), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm_storeu_si128((__m128i *)(void *)(dst + i), h);
    }
    uint32_t a = lanes_max(most), b = narrow_bytes(dst + i, p + 4 * i, n - i, f16_of_bits);
    return a > b ? a : b;
}

static uint32_t max_avx2(const uint8_t *p, size_t n) __attribute__((target("avx2")));
static uint32_t max_avx2(const uint8_t *p, size_t n) {
    const __m256i abs = _mm256_set1_epi32(0x7fffffff);
    __m256i most = _mm256_setzero_si256();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i u = _mm256_loadu_si256((const __m256i *)(const void *)(p + 4 * i));
        most = _mm256_max_epu32(most, _mm256_and_si256(u, abs));
    }
    uint32_t a = lanes_max(most);
    for (; i < n; i++) {
        uint32_t u = load_bits(p + 4 * i) & 0x7fffffffu;
        a = u > a ? u : a;
    }
    return a;
}

/* Whether this CPU (and OS) has AVX-512 F, BW and VL: the n-element conversions then run
 * 16 elements an instruction group, the tail under a mask. */
static bool have_avx512(void) {
    static atomic_int known; /* 0: not asked yet; 1 no, 2 yes */
    int k = atomic_load_explicit(&known, memory_order_relaxed);
    if (!k) {
        k = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                    __builtin_cpu_supports("avx512vl")
                ? 2
                : 1;
        atomic_store_explicit(&known, k, memory_order_relaxed);
    }
    return k == 2;
}

#define AMP_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))

/* The mask of the first m < 16 lanes. */
static inline __mmask16 tail_mask(size_t m) {
    return (__mmask16)((1u << m) - 1u);
}

/* bf16 -> f32: the 16 bits moved to the top of 32 (amp_bf16_to_f32). */
AMP_AVX512 static void bf16_to_f32_avx512(float *dst, const uint16_t *src, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i h = _mm256_loadu_si256((const __m256i *)(const void *)(src + i));
        _mm512_storeu_si512((void *)(dst + i), _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
    if (i < n) {
        __mmask16 m = tail_mask(n - i);
        __m256i h = _mm256_maskz_loadu_epi16(m, src + i);
        _mm512_mask_storeu_epi32(dst + i, m, _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
}

/* f32 -> bf16 as bf16_of_bits, lane by lane: (u + 0x7fff + lowest kept bit) >> 16, a NaN
 * (|u| > inf's bits) its top half with the quiet bit set. (Not VCVTNEPS2BF16: it flushes
 * subnormal inputs to zero.) */
AMP_AVX512 static inline __m512i bf16_lanes(__m512i u) {
    const __m512i one = _mm512_set1_epi32(1), bias = _mm512_set1_epi32(0x7fff);
    const __m512i abs = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
    __m512i hi = _mm512_srli_epi32(u, 16);
    __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, bias), _mm512_and_si512(hi, one)), 16);
    __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, abs), inf);
    return _mm512_mask_blend_epi32(nan, rounded, _mm512_or_si512(hi, _mm512_set1_epi32(0x40)));
}

AMP_AVX512 static void f32_to_bf16_avx512(uint16_t *dst, const float *src, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i r = bf16_lanes(_mm512_loadu_si512((const void *)(src + i)));
        _mm256_storeu_si256((__m256i *)(void *)(dst + i), _mm512_cvtepi32_epi16(r));
    }
    if (i < n) {
        __mmask16 m = tail_mask(n - i);
        __m512i r = bf16_lanes(_mm512_maskz_loadu_epi32(m, src + i));
        _mm512_mask_cvtepi32_storeu_epi16(dst + i, m, r);
    }
}

/* f16 -> f32 by VCVTPH2PS: exact, subnormals included, a NaN kept with its payload and
 * made quiet, as f32_of_f16. */
AMP_AVX512 static void f16_to_f32_avx512(float *dst, const uint16_t *src, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(src + i))));
    if (i < n) {
        __mmask16 m = tail_mask(n - i);
        _mm512_mask_storeu_ps(dst + i, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, src + i)));
    }
}

/* f32 -> f16 by VCVTPS2PH with nearest-even rounding: f16_of_bits' bits (as narrow_f16c).
 * (The rounding is a macro: clang wants a constant expression there.) */
#define HALF_RND (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
AMP_AVX512 static void f32_to_f16_avx512(uint16_t *dst, const float *src, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(void *)(dst + i), _mm512_cvtps_ph(_mm512_loadu_ps(src + i), HALF_RND));
    if (i < n) {
        __mmask16 m = tail_mask(n - i);
        __m256i h = _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, src + i), HALF_RND);
        _mm256_mask_storeu_epi16(dst + i, m, h);
    }
}
#endif

uint32_t amp_f32_bytes_to_f16(uint16_t *dst, const void *src, size_t n) {
    if (!n) return 0; /* src may be NULL: an empty tensor has no bytes */
#ifdef AMP_HALF_X86
    if (have_avx2_f16c()) return narrow_f16c(dst, src, n);
#endif
    return narrow_bytes(dst, src, n, f16_of_bits);
}

uint32_t amp_f32_bytes_to_bf16(uint16_t *dst, const void *src, size_t n) {
    if (!n) return 0;
    return narrow_bytes(dst, src, n, bf16_of_bits);
}

uint32_t amp_f32_bytes_max(const void *src, size_t n) {
    if (!n) return 0;
#ifdef AMP_HALF_X86
    if (have_avx2_f16c()) return max_avx2(src, n);
#endif
    const uint8_t *p = src;
    uint32_t most = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t a = load_bits(p + 4 * i) & 0x7fffffffu;
        most = a > most ? a : most;
    }
    return most;
}

bool amp_half_have_avx512(void) {
#ifdef AMP_HALF_X86
    return have_avx512();
#else
    return false;
#endif
}

/* The n-element conversions: AVX-512 where the CPU has it (same bits, tested against
 * the scalar loops on every 16-bit pattern), else the scalar loops. */
void amp_f32_to_f16_n(uint16_t *dst, const float *src, size_t n) {
#ifdef AMP_HALF_X86
    if (have_avx512()) {
        f32_to_f16_avx512(dst, src, n);
        return;
    }
#endif
    amp_f32_to_f16_n_scalar(dst, src, n);
}

void amp_f16_to_f32_n(float *dst, const uint16_t *src, size_t n) {
#ifdef AMP_HALF_X86
    if (have_avx512()) {
        f16_to_f32_avx512(dst, src, n);
        return;
    }
#endif
    amp_f16_to_f32_n_scalar(dst, src, n);
}

void amp_f32_to_bf16_n(uint16_t *dst, const float *src, size_t n) {
#ifdef AMP_HALF_X86
    if (have_avx512()) {
        f32_to_bf16_avx512(dst, src, n);
        return;
    }
#endif
    amp_f32_to_bf16_n_scalar(dst, src, n);
}

void amp_bf16_to_f32_n(float *dst, const uint16_t *src, size_t n) {
#ifdef AMP_HALF_X86
    if (have_avx512()) {
        bf16_to_f32_avx512(dst, src, n);
        return;
    }
#endif
    amp_bf16_to_f32_n_scalar(dst, src, n);
}
