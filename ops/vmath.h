/* Vector math for the CPU's float rows (in ops/ because the CPU's fused-program
 * interpreter, ops/fused_eval.h, computes erf as the CPU's Erf kernel does): glibc's libmvec (its AVX-512 variants,
 * opened with dlopen on first use, like OpenBLAS and oneDNN), where the CPU has AVX-512
 * and the C library has them (glibc 2.35+ for erff); each call answers false where not,
 * and the caller computes with the scalar libm as before.
 *
 * Accuracy, measured against the correctly rounded value over 16.7 million float32
 * inputs spread across every exponent (glibc 2.36): erff within 4 ulp; exp (double)
 * within 4 ulp of double, far below a float32 result's rounding. */
#ifndef AMP_CPU_VMATH_H
#define AMP_CPU_VMATH_H

#include <stdbool.h>
#include <stdint.h>

/* y[i] = erf(x[i]), i < n (y may be x). */
bool amp_vmath_erf_f32(float *y, const float *x, uint64_t n);
/* erf(x) as amp_vmath_erf_f32 computes it where it can (each lane's result depends on its
 * input alone), else erff: the CPU's one erf, for the code that takes one value at a
 * time (the 16-bit tables, the fused programs' interpreter). */
float amp_vmath_erf1(float x);
/* y[i] = exp(x[i]) in double, i < n (y may be x). */
bool amp_vmath_exp_f64(double *y, const double *x, uint64_t n);

#endif
