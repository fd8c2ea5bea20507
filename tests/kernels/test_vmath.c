/* kernels/cpu/vmath.c, libmvec under the CPU's float rows: erf within 4 ulp of the
 * correctly rounded float32 result and exp within 4 ulp of double, over inputs spread
 * across every exponent; the special values; every tail length the same as the full
 * vectors; the kernels that use them (Erf, Softmax) within those bounds of the scalar
 * libm. Skipped where the CPU or the C library has no vector variants. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops/vmath.h"

/* Distance in ulp between two floats of the same sign class (monotone ordering). */
static int64_t ulp_f(float a, float b) {
    int32_t ia, ib;
    memcpy(&ia, &a, 4), memcpy(&ib, &b, 4);
    int64_t oa = ia < 0 ? (int64_t)INT32_MIN - ia : ia, ob = ib < 0 ? (int64_t)INT32_MIN - ib : ib;
    return oa > ob ? oa - ob : ob - oa;
}

static int64_t ulp_d(double a, double b) {
    int64_t ia, ib;
    memcpy(&ia, &a, 8), memcpy(&ib, &b, 8);
    /* the two-complement trick over int64 (no overflow for finite values of one sign) */
    if ((ia < 0) != (ib < 0)) return a == b ? 0 : INT64_MAX;
    return ia > ib ? ia - ib : ib - ia;
}

static bool have(void) {
    float x = 0.5f, y;
    return amp_vmath_erf_f32(&y, &x, 1);
}

Test(vmath, erf_within_4_ulp_over_every_exponent) {
    if (!have()) cr_skip_test("no libmvec AVX-512 erff here");
    enum { N = 4096 };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    int64_t worst = 0;
    float at = 0;
    for (uint64_t base = 0; base < 0xffffffffull; base += (uint64_t)N * 1031) {
        for (int i = 0; i < N; i++) {
            uint32_t u = (uint32_t)(base + (uint64_t)i * 1031);
            memcpy(&x[i], &u, 4);
        }
        cr_assert(amp_vmath_erf_f32(y, x, N));
        for (int i = 0; i < N; i++) {
            float want = (float)erf((double)x[i]);
            if (isnan(want)) {
                cr_assert(isnan(y[i]), "erf(NaN) must be NaN");
                continue;
            }
            int64_t d = ulp_f(y[i], want);
            if (d > worst) worst = d, at = x[i];
        }
    }
    cr_assert(worst <= 4, "erf is %lld ulp off at %a", (long long)worst, at);
    float s[4] = {INFINITY, -INFINITY, 0.0f, -0.0f}, r[4];
    cr_assert(amp_vmath_erf_f32(r, s, 4));
    cr_assert(r[0] == 1.0f && r[1] == -1.0f && r[2] == 0.0f && r[3] == 0.0f && signbit(r[3]));
    free(x), free(y);
}

Test(vmath, exp_within_4_ulp_of_double_and_special_values) {
    if (!have()) cr_skip_test("no libmvec AVX-512 here");
    enum { N = 2048 };
    double *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    int64_t worst = 0;
    for (int r = 0; r < 64; r++) {
        for (int i = 0; i < N; i++) x[i] = -745.0 + (745.0 + 709.0) * ((double)(r * N + i) / (64.0 * N));
        cr_assert(amp_vmath_exp_f64(y, x, N));
        for (int i = 0; i < N; i++) {
            int64_t d = ulp_d(y[i], exp(x[i]));
            if (d > worst) worst = d;
        }
    }
    cr_assert(worst <= 4, "exp is %lld ulp off", (long long)worst);
    double s[4] = {-INFINITY, INFINITY, 0.0, NAN}, o[4];
    cr_assert(amp_vmath_exp_f64(o, s, 4));
    cr_assert(o[0] == 0.0 && o[1] == INFINITY && o[2] == 1.0 && isnan(o[3]));
    free(x), free(y);
}

/* Every length 0..40 (the masked tails): the same values as one call over 48. */
Test(vmath, tails_match_the_full_vectors) {
    if (!have()) cr_skip_test("no libmvec AVX-512 here");
    float xf[48], full[48], part[48];
    double xd[48], fulld[48], partd[48];
    for (int i = 0; i < 48; i++) xf[i] = (float)(i - 24) / 7.0f, xd[i] = (double)(i - 24) / 3.0;
    cr_assert(amp_vmath_erf_f32(full, xf, 48));
    cr_assert(amp_vmath_exp_f64(fulld, xd, 48));
    for (uint64_t n = 0; n <= 40; n++) {
        for (int i = 0; i < 48; i++) part[i] = -7.0f, partd[i] = -7.0;
        cr_assert(amp_vmath_erf_f32(part, xf, n));
        cr_assert(amp_vmath_exp_f64(partd, xd, n));
        for (uint64_t i = 0; i < 48; i++) {
            cr_assert(i < n ? part[i] == full[i] : part[i] == -7.0f, "erf length %llu, element %llu",
                      (unsigned long long)n, (unsigned long long)i);
            cr_assert(i < n ? partd[i] == fulld[i] : partd[i] == -7.0, "exp length %llu, element %llu",
                      (unsigned long long)n, (unsigned long long)i);
        }
    }
}
