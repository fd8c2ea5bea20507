/* AVX-512 rows of the CPU kernels' 16-bit (float16, bfloat16) elementwise work: loads
 * widened to fp32, one fp32 operation, one rounding on the store, 16 lanes at a time;
 * the bits are those of the portable block path (convert, compute, round), which runs
 * wherever these are not available (no AVX-512 F/BW/VL, not x86-64, not GCC/clang). */
#ifndef AMP_CPU_SIMD_H
#define AMP_CPU_SIMD_H

#include <stdbool.h>
#include <stdint.h>

typedef enum AmpSimdOp { AMP_SIMD_NONE, AMP_SIMD_ADD, AMP_SIMD_SUB, AMP_SIMD_MUL, AMP_SIMD_DIV } AmpSimdOp;

/* Whether amp_simd_row2_half runs on this CPU. */
bool amp_simd_have(void);

/* o[i] = a[i * sa] op b[i * sb] for i < n (sa, sb in {0, 1}; o may alias a or b), dtype
 * AMP_DT_FLOAT16 or AMP_DT_BFLOAT16; false (nothing done) where amp_simd_have() is false
 * or op/dtype is not one it takes. */
bool amp_simd_row2_half(AmpSimdOp op, int dtype, uint16_t *o, const uint16_t *a, int sa, const uint16_t *b, int sb,
                        int64_t n);

/* The same for float32 rows. */
bool amp_simd_row2_f32(AmpSimdOp op, float *o, const float *a, int sa, const float *b, int sb, int64_t n);

/* One LayerNormalization row: o[j] = (float)((((double)x[j] - m) * is) * s[j] + b[j])
 * (no "+ b[j]" where b is NULL), each operation rounded in double, the accumulated value
 * the first operand of each (the NaN kept when two meet, as norm.c's loop compiles);
 * false (nothing done) where amp_simd_have() is false. */
bool amp_simd_norm_row(float *o, const float *x, const float *s, const float *b, double m, double is, uint64_t n);

/* o[j] = (float)(e[j] / s) for j < n (double division, then the rounding to float32 of
 * a cast); false (nothing done) where amp_simd_have() is false. */
bool amp_simd_div_f64_to_f32(float *o, const double *e, double s, uint64_t n);

#endif
