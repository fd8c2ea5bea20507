/* OpenBLAS through dlopen (see blas.h): the soname the linker would have recorded first,
 * so Debian's alternatives pick the variant as they would for a linked binary, then the
 * file CMake found at configure time. */
#include "kernels/cpu/blas.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

#ifndef AMPC_BLAS_SONAME
#define AMPC_BLAS_SONAME "libopenblas.so.0"
#endif
#ifndef AMPC_BLAS_PATH
#define AMPC_BLAS_PATH AMPC_BLAS_SONAME
#endif

typedef void (*SgemmFn)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE, blasint, blasint, blasint,
                        float, const float *, blasint, const float *, blasint, float, float *, blasint);
typedef void (*DgemmFn)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE, blasint, blasint, blasint,
                        double, const double *, blasint, const double *, blasint, double, double *, blasint);

static pthread_once_t once = PTHREAD_ONCE_INIT;
static SgemmFn sgemm;
static DgemmFn dgemm;
static char why[512]; /* set when loading failed */

/* dlsym returns void *; ISO C has no conversion to a function pointer, POSIX guarantees
 * the bytes are one, so they are copied. */
static void *sym(void *lib, const char *name, void *fn_out, size_t fn_size) {
    void *p = dlsym(lib, name);
    if (p && fn_size == sizeof p) memcpy(fn_out, &p, sizeof p);
    return p;
}

static void load_once(void) {
    const char *tried[] = {AMPC_BLAS_SONAME, AMPC_BLAS_PATH};
    void *lib = NULL;
    for (size_t i = 0; i < 2 && !lib; i++) lib = dlopen(tried[i], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(why, sizeof why, "OpenBLAS could not be loaded (tried %s and %s: %s); install libopenblas0",
                 AMPC_BLAS_SONAME, AMPC_BLAS_PATH, dlerror());
        return;
    }
    if (!sym(lib, "cblas_sgemm", &sgemm, sizeof sgemm) || !sym(lib, "cblas_dgemm", &dgemm, sizeof dgemm)) {
        sgemm = NULL;
        dgemm = NULL;
        snprintf(why, sizeof why, "%s has no cblas_sgemm/cblas_dgemm", AMPC_BLAS_SONAME);
    }
    /* The CPU backend's thread knob (amp_threads_requested: a session's threads option,
     * --threads, else AMP_THREADS) sets OpenBLAS's threads too, when it is first opened
     * (without it OpenBLAS keeps its own default: OPENBLAS_NUM_THREADS, else one per CPU). */
    void (*set_threads)(int) = NULL;
    int t;
    if (sgemm && amp_threads_requested(&t) &&
        sym(lib, "openblas_set_num_threads", &set_threads, sizeof set_threads))
        set_threads(t);
    /* The library stays loaded for the life of the process, as a linked one would. */
}

AmpCode amp_blas_load(AmpStatus *st) {
    pthread_once(&once, load_once);
    if (sgemm) return AMP_OK;
    return amp_fail(st, AMP_ERR_UNSUPPORTED, "%s", why);
}

/* Reached only if a kernel runs without its session having called amp_blas_load: there is
 * no status to report through, and computing nothing would be a wrong answer. */
static void need(void) {
    pthread_once(&once, load_once);
    if (!sgemm) {
        fprintf(stderr, "ampc: %s\n", why);
        abort();
    }
}

void amp_sgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, blasint m, blasint n,
               blasint k, float alpha, const float *a, blasint lda, const float *b, blasint ldb, float beta,
               float *c, blasint ldc) {
    need();
    sgemm(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void amp_dgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, blasint m, blasint n,
               blasint k, double alpha, const double *a, blasint lda, const double *b, blasint ldb, double beta,
               double *c, blasint ldc) {
    need();
    dgemm(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
