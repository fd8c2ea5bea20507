/* AVX-512 rows for 16-bit elementwise ops (simd.h), compiled for AVX-512 by function
 * attribute and chosen at run time, so the binary still runs on any x86-64 (and the file
 * builds elsewhere, where it only says no). */
#include "kernels/cpu/simd.h"

#include "ir/half.h"
#include "ir/ir.h"

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>

/* No contraction of a * b + c into an FMA in these functions (clang contracts by default
 * within an expression; GCC does not in ISO C mode): one rounding per operation, as the
 * scalar code has it. */
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

#define AMP_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))

bool amp_simd_have(void) {
    return amp_half_have_avx512(); /* the same F/BW/VL check */
}

AMP_AVX512 static inline __m512 widen(__m256i h, int bf16) {
    return bf16 ? _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)) : _mm512_cvtph_ps(h);
}

/* fp32 -> 16 bits as ir/half.c rounds: bf16 by the integer nearest-even (NaN: quiet,
 * top of its payload), f16 by VCVTPS2PH nearest-even. */
AMP_AVX512 static inline __m256i narrow(__m512 f, int bf16) {
    if (!bf16) return _mm512_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512i u = _mm512_castps_si512(f);
    __m512i hi = _mm512_srli_epi32(u, 16);
    __m512i rounded = _mm512_srli_epi32(
        _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), _mm512_and_si512(hi, _mm512_set1_epi32(1))),
        16);
    __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                            _mm512_set1_epi32(0x7f800000));
    return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(nan, rounded, _mm512_or_si512(hi, _mm512_set1_epi32(0x40))));
}

/* x op y, the operands of Add and Mul swapped where the scalar rows (elementwise.c's
 * AMP_EW_ROW2, as GCC compiles it for x86-64) have them the other way round: with x
 * broadcast and y a row, the operation writes into y, so that when both are NaN the
 * result is y's NaN (x86 keeps the first operand's). Sub and Div are x op y always. */
static inline bool swapped(AmpSimdOp op, int sa, int sb) {
    return !sa && sb && (op == AMP_SIMD_ADD || op == AMP_SIMD_MUL);
}

/* x + y and x * y with x the instruction's first source, whose NaN the result is when
 * both are NaN: written out, since the compiler may swap the operands of the intrinsics
 * (it takes + and * as commutative, NaN or not). */
AMP_AVX512 static inline __m512 add_xy(__m512 x, __m512 y) {
    __m512 r;
    __asm__("vaddps %2, %1, %0" : "=v"(r) : "v"(x), "v"(y));
    return r;
}

AMP_AVX512 static inline __m512 mul_xy(__m512 x, __m512 y) {
    __m512 r;
    __asm__("vmulps %2, %1, %0" : "=v"(r) : "v"(x), "v"(y));
    return r;
}

AMP_AVX512 static inline __m512 apply(AmpSimdOp op, __m512 x, __m512 y) {
    switch (op) {
    case AMP_SIMD_ADD: return add_xy(x, y);
    case AMP_SIMD_SUB: return _mm512_sub_ps(x, y);
    case AMP_SIMD_MUL: return mul_xy(x, y);
    default: return _mm512_div_ps(x, y);
    }
}

/* One op and dtype, both constants where it is inlined. */
AMP_AVX512 static inline __attribute__((always_inline)) void row2(AmpSimdOp op, int bf16, uint16_t *o,
                                                                  const uint16_t *a, int sa, const uint16_t *b,
                                                                  int sb, int64_t n) {
    const __m512 a0 = _mm512_set1_ps(bf16 ? amp_bf16_to_f32(a[0]) : amp_f16_to_f32(a[0]));
    const __m512 b0 = _mm512_set1_ps(bf16 ? amp_bf16_to_f32(b[0]) : amp_f16_to_f32(b[0]));
    const bool sw = swapped(op, sa, sb);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 x = sa ? widen(_mm256_loadu_si256((const __m256i *)(const void *)(a + i)), bf16) : a0;
        __m512 y = sb ? widen(_mm256_loadu_si256((const __m256i *)(const void *)(b + i)), bf16) : b0;
        _mm256_storeu_si256((__m256i *)(void *)(o + i), narrow(sw ? apply(op, y, x) : apply(op, x, y), bf16));
    }
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1u);
        __m512 x = sa ? widen(_mm256_maskz_loadu_epi16(m, a + i), bf16) : a0;
        __m512 y = sb ? widen(_mm256_maskz_loadu_epi16(m, b + i), bf16) : b0;
        _mm256_mask_storeu_epi16(o + i, m, narrow(sw ? apply(op, y, x) : apply(op, x, y), bf16));
    }
}

#define ROW2_FN(NAME, OP, BF)                                                                                    \
    AMP_AVX512 static void NAME(uint16_t *o, const uint16_t *a, int sa, const uint16_t *b, int sb, int64_t n) { \
        row2(OP, BF, o, a, sa, b, sb, n);                                                                        \
    }
ROW2_FN(add_bf16, AMP_SIMD_ADD, 1)
ROW2_FN(sub_bf16, AMP_SIMD_SUB, 1)
ROW2_FN(mul_bf16, AMP_SIMD_MUL, 1)
ROW2_FN(div_bf16, AMP_SIMD_DIV, 1)
ROW2_FN(add_f16, AMP_SIMD_ADD, 0)
ROW2_FN(sub_f16, AMP_SIMD_SUB, 0)
ROW2_FN(mul_f16, AMP_SIMD_MUL, 0)
ROW2_FN(div_f16, AMP_SIMD_DIV, 0)

typedef void (*Row2)(uint16_t *, const uint16_t *, int, const uint16_t *, int, int64_t);
static const Row2 ROWS[2][5] = {
    {NULL, add_f16, sub_f16, mul_f16, div_f16},
    {NULL, add_bf16, sub_bf16, mul_bf16, div_bf16},
};

bool amp_simd_row2_half(AmpSimdOp op, int dtype, uint16_t *o, const uint16_t *a, int sa, const uint16_t *b, int sb,
                        int64_t n) {
    if (op <= AMP_SIMD_NONE || op > AMP_SIMD_DIV || (dtype != AMP_DT_FLOAT16 && dtype != AMP_DT_BFLOAT16) ||
        !amp_simd_have())
        return false;
    if (n > 0) ROWS[dtype == AMP_DT_BFLOAT16][op](o, a, sa, b, sb, n);
    return true;
}

/* float32 rows: the same operation, the operands in the scalar rows' order. */
AMP_AVX512 static inline __attribute__((always_inline)) void row2_f32(AmpSimdOp op, float *o, const float *a, int sa,
                                                                      const float *b, int sb, int64_t n) {
    const __m512 a0 = _mm512_set1_ps(a[0]), b0 = _mm512_set1_ps(b[0]);
    const bool sw = swapped(op, sa, sb);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 x = sa ? _mm512_loadu_ps(a + i) : a0;
        __m512 y = sb ? _mm512_loadu_ps(b + i) : b0;
        _mm512_storeu_ps(o + i, sw ? apply(op, y, x) : apply(op, x, y));
    }
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1u);
        __m512 x = sa ? _mm512_maskz_loadu_ps(m, a + i) : a0;
        __m512 y = sb ? _mm512_maskz_loadu_ps(m, b + i) : b0;
        _mm512_mask_storeu_ps(o + i, m, sw ? apply(op, y, x) : apply(op, x, y));
    }
}

#define ROW2_F32(NAME, OP)                                                                                 \
    AMP_AVX512 static void NAME(float *o, const float *a, int sa, const float *b, int sb, int64_t n) { \
        row2_f32(OP, o, a, sa, b, sb, n);                                                                  \
    }
ROW2_F32(add_f32, AMP_SIMD_ADD)
ROW2_F32(sub_f32, AMP_SIMD_SUB)
ROW2_F32(mul_f32, AMP_SIMD_MUL)
ROW2_F32(div_f32, AMP_SIMD_DIV)

typedef void (*Row2F)(float *, const float *, int, const float *, int, int64_t);
static const Row2F ROWS_F32[5] = {NULL, add_f32, sub_f32, mul_f32, div_f32};

bool amp_simd_row2_f32(AmpSimdOp op, float *o, const float *a, int sa, const float *b, int sb, int64_t n) {
    if (op <= AMP_SIMD_NONE || op > AMP_SIMD_DIV || !amp_simd_have()) return false;
    if (n > 0) ROWS_F32[op](o, a, sa, b, sb, n);
    return true;
}

AMP_AVX512 static inline __m512d add_pd_xy(__m512d x, __m512d y) {
    __m512d r;
    __asm__("vaddpd %2, %1, %0" : "=v"(r) : "v"(x), "v"(y));
    return r;
}

AMP_AVX512 static inline __m512d mul_pd_xy(__m512d x, __m512d y) {
    __m512d r;
    __asm__("vmulpd %2, %1, %0" : "=v"(r) : "v"(x), "v"(y));
    return r;
}

AMP_AVX512 static inline __m256 norm8(__m256 x, __m256 s, const float *b, __m256 bv, __m512d m, __m512d is) {
    __m512d z = mul_pd_xy(mul_pd_xy(_mm512_sub_pd(_mm512_cvtps_pd(x), m), is), _mm512_cvtps_pd(s));
    if (b) z = add_pd_xy(z, _mm512_cvtps_pd(bv));
    return _mm512_cvtpd_ps(z);
}

AMP_AVX512 static void norm_row(float *o, const float *x, const float *s, const float *b, double m, double is,
                                uint64_t n) {
    const __m512d vm = _mm512_set1_pd(m), vis = _mm512_set1_pd(is);
    uint64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        __m256 bv = b ? _mm256_loadu_ps(b + j) : _mm256_setzero_ps();
        _mm256_storeu_ps(o + j, norm8(_mm256_loadu_ps(x + j), _mm256_loadu_ps(s + j), b, bv, vm, vis));
    }
    if (j < n) {
        __mmask8 k = (__mmask8)((1u << (n - j)) - 1u);
        __m256 bv = b ? _mm256_maskz_loadu_ps(k, b + j) : _mm256_setzero_ps();
        __m256 r = norm8(_mm256_maskz_loadu_ps(k, x + j), _mm256_maskz_loadu_ps(k, s + j), b, bv, vm, vis);
        _mm256_mask_storeu_ps(o + j, k, r);
    }
}

bool amp_simd_norm_row(float *o, const float *x, const float *s, const float *b, double m, double is, uint64_t n) {
    if (!amp_simd_have()) return false;
    norm_row(o, x, s, b, m, is, n);
    return true;
}

AMP_AVX512 static void div_f64_to_f32(float *o, const double *e, double s, uint64_t n) {
    const __m512d d = _mm512_set1_pd(s);
    uint64_t j = 0;
    for (; j + 8 <= n; j += 8) _mm256_storeu_ps(o + j, _mm512_cvtpd_ps(_mm512_div_pd(_mm512_loadu_pd(e + j), d)));
    if (j < n) {
        __mmask8 m = (__mmask8)((1u << (n - j)) - 1u);
        _mm256_mask_storeu_ps(o + j, m, _mm512_cvtpd_ps(_mm512_div_pd(_mm512_maskz_loadu_pd(m, e + j), d)));
    }
}

bool amp_simd_div_f64_to_f32(float *o, const double *e, double s, uint64_t n) {
    if (!amp_simd_have()) return false;
    div_f64_to_f32(o, e, s, n);
    return true;
}

#else

bool amp_simd_norm_row(float *o, const float *x, const float *s, const float *b, double m, double is, uint64_t n) {
    (void)o, (void)x, (void)s, (void)b, (void)m, (void)is, (void)n;
    return false;
}

bool amp_simd_row2_f32(AmpSimdOp op, float *o, const float *a, int sa, const float *b, int sb, int64_t n) {
    (void)op, (void)o, (void)a, (void)sa, (void)b, (void)sb, (void)n;
    return false;
}

bool amp_simd_div_f64_to_f32(float *o, const double *e, double s, uint64_t n) {
    (void)o, (void)e, (void)s, (void)n;
    return false;
}

bool amp_simd_have(void) {
    return false;
}

bool amp_simd_row2_half(AmpSimdOp op, int dtype, uint16_t *o, const uint16_t *a, int sa, const uint16_t *b, int sb,
                        int64_t n) {
    (void)op, (void)dtype, (void)o, (void)a, (void)sa, (void)b, (void)sb, (void)n;
    return false;
}

#endif
