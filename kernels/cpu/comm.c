/* ai.ampc AllReduceMean (passes/allreduce.c): the gradients of a data-parallel step made
 * the mean over the job's ranks, through the session's communicator (backend/comm.h). The
 * inputs go into one float32 buffer (16-bit gradients widened: summed in float32), one
 * all-reduce sums it across the ranks, and each output is its slice divided by the number
 * of ranks, in the input's type (without a communicator: the input itself). The buffer is kept in the node's pack between steps. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/comm.h"
#include "ir/half.h"
#include "kernels/cpu/kernels.h"
#include "ops/ew_common.h"
#include "ops/geom.h"
#include "ops/kernel_out.h"

typedef struct Scratch {
    float *f;
    size_t cap;
} Scratch;

static void scratch_free(void *p) {
    Scratch *s = p;
    if (s) free(s->f);
    free(s);
}

/* n floats of scratch: the pack's (grown as needed) or, without a pack, malloc'd (*own). */
static float *scratch(AmpKernelCtx *k, size_t n, float **own) {
    *own = NULL;
    if (!k->pack) return *own = malloc((n ? n : 1) * sizeof(float));
    Scratch *s = k->pack->data;
    if (!s) {
        if (!(s = calloc(1, sizeof *s))) return NULL;
        k->pack->data = s;
        k->pack->free_fn = scratch_free;
    }
    if (s->cap < n) {
        float *f = realloc(s->f, n * sizeof *f);
        if (!f) return NULL;
        s->f = f;
        s->cap = n;
    }
    return s->f ? s->f : (s->f = malloc(sizeof(float)));
}

static double seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

AmpCode amp_cpu_allreduce_mean(AmpKernelCtx *k) {
    AmpAllReduceGeom own_g;
    const AmpAllReduceGeom *g; /* amp_allreduce_geom (ops/ew_common.h): the inputs, their dtypes, Y checked */
    AmpCode rc = amp_kernel_geom(k, &own_g, (const void **)&g);
    if (rc) return rc;
    AmpComm *c = k->comm;
    int N = k->n_in;
    AmpBuf **out = malloc((size_t)N * sizeof *out);
    if (!out) return amp_kernel_fail(k, AMP_ERR_INTERNAL, "out of memory");
    rc = amp_kernel_outputs(k, N, out);
    for (int j = 0; j < N && !rc; j++)
        if (!out[j]) rc = amp_kernel_fail(k, AMP_ERR_INTERNAL, "gradient %d is not wanted", j);
    size_t total = (size_t)g->total;
    float *own = NULL, *f = rc ? NULL : scratch(k, total, &own);
    if (!rc && !f) rc = amp_kernel_fail(k, AMP_ERR_INTERNAL, "out of memory");
    size_t at = 0;
    for (int j = 0; j < N && !rc; j++) {
        const AmpBuf *x = k->in[j];
        if (x->dtype == AMP_DT_FLOAT) memcpy(f + at, x->data, x->nelem * sizeof *f);
        else if (x->dtype == AMP_DT_FLOAT16) amp_f16_to_f32_n(f + at, x->data, x->nelem);
        else amp_bf16_to_f32_n(f + at, x->data, x->nelem);
        at += x->nelem;
    }
    double t0 = seconds();
    /* No communicator (a session of one process running a model the pass wrote): one rank. */
    if (!rc && c) rc = c->allreduce_sum_f32(c, f, total, k->st);
    if (!rc && c) {
        c->grad_seconds += seconds() - t0;
        c->grad_bytes += total * sizeof *f;
        c->grad_calls++;
    }
    float ranks = c ? (float)c->size : 1.0f;
    at = 0;
    for (int j = 0; j < N && !rc; j++) {
        const AmpBuf *x = k->in[j];
        float *s = f + at;
        if (x->dtype == AMP_DT_FLOAT) { /* the mean written out in the one pass */
            float *y = out[j]->data;
            for (size_t e = 0; e < x->nelem; e++) y[e] = s[e] / ranks;
        } else {
            for (size_t e = 0; e < x->nelem; e++) s[e] /= ranks;
            if (x->dtype == AMP_DT_FLOAT16) amp_f32_to_f16_n(out[j]->data, s, x->nelem);
            else amp_f32_to_bf16_n(out[j]->data, s, x->nelem);
        }
        at += x->nelem;
    }
    free(own);
    free(out);
    return rc;
}
