/* glibc's libmvec under the CPU kernels' float rows (vmath.h). */
#include "ops/vmath.h"

#include <math.h>

#include "ir/half.h"

#if defined(__GNUC__) && defined(__x86_64__) && defined(__linux__)
#include <dlfcn.h>
#include <immintrin.h>
#include <pthread.h>
#include <string.h>

#define AMP_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))

/* libmvec's names by the x86-64 vector ABI: 'e' = AVX-512, N16/N8 lanes, one vector argument. */
typedef __m512 (*VecF32)(__m512);
typedef __m512d (*VecF64)(__m512d);

static struct {
    pthread_once_t once;
    VecF32 erff;
    VecF64 exp;
} mv = {PTHREAD_ONCE_INIT, NULL, NULL};

static void mv_open(void) {
    if (!amp_half_have_avx512()) return; /* the 'e' variants need AVX-512 F */
    void *h = dlopen("libmvec.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) return;
    /* a function pointer from dlsym: through memcpy, as ISO C has no conversion for it */
    void *f = dlsym(h, "_ZGVeN16v_erff"), *d = dlsym(h, "_ZGVeN8v_exp");
    if (f) memcpy(&mv.erff, &f, sizeof f);
    if (d) memcpy(&mv.exp, &d, sizeof d);
}

AMP_AVX512 static void erf_rows(float *y, const float *x, uint64_t n) {
    uint64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, mv.erff(_mm512_loadu_ps(x + i)));
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(y + i, m, mv.erff(_mm512_maskz_loadu_ps(m, x + i)));
    }
}

AMP_AVX512 static void exp_rows(double *y, const double *x, uint64_t n) {
    uint64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm512_storeu_pd(y + i, mv.exp(_mm512_loadu_pd(x + i)));
    if (i < n) {
        __mmask8 m = (__mmask8)((1u << (n - i)) - 1);
        _mm512_mask_storeu_pd(y + i, m, mv.exp(_mm512_maskz_loadu_pd(m, x + i)));
    }
}

bool amp_vmath_erf_f32(float *y, const float *x, uint64_t n) {
    pthread_once(&mv.once, mv_open);
    if (!mv.erff) return false;
    erf_rows(y, x, n);
    return true;
}

float amp_vmath_erf1(float x) {
    float y;
    return amp_vmath_erf_f32(&y, &x, 1) ? y : erff(x);
}

bool amp_vmath_exp_f64(double *y, const double *x, uint64_t n) {
    pthread_once(&mv.once, mv_open);
    if (!mv.exp) return false;
    exp_rows(y, x, n);
    return true;
}

#else

bool amp_vmath_erf_f32(float *y, const float *x, uint64_t n) {
    (void)y, (void)x, (void)n;
    return false;
}

float amp_vmath_erf1(float x) {
    return erff(x);
}

bool amp_vmath_exp_f64(double *y, const double *x, uint64_t n) {
    (void)y, (void)x, (void)n;
    return false;
}

#endif
