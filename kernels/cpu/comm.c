/* ai.ampc AllReduceMean (passes/allreduce.c): the gradients of a data-parallel step made
 * the mean over the job's ranks, through the session's communicator (backend/comm.h), in
 * as few collectives as the gradients' places allow:
 *  - float32 gradients that the arena holds end to end with their means over them (the
 *    executor plans them so, runtime/exec_plan.c) are summed where they lie, one
 *    collective for each such run of at least AMP_ALLREDUCE_RUN_MIN bytes (ops/ew_common.h,
 *    the split every backend's kernel shares), and divided in place;
 *  - the rest go into one float32 buffer (16-bit gradients widened: summed in float32),
 *    kept in the node's pack between steps, summed in one more collective, and each
 *    output is its slice divided by the number of ranks, in the input's type.
 * Without a communicator (a session of one process running a model the pass wrote) each
 * output is its input. */
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

/* buf[0..n) summed over the ranks, with the counts the run prints. */
static AmpCode sum(AmpKernelCtx *k, float *buf, size_t n, bool in_place) {
    AmpComm *c = k->comm;
    double t0 = seconds();
    AmpCode rc = c->allreduce_sum_f32(c, buf, n, k->st);
    if (!rc) {
        c->grad_seconds += seconds() - t0;
        c->grad_bytes += n * sizeof *buf;
        c->grad_calls++;
        if (in_place) c->grad_bytes_in_place += n * sizeof *buf;
    }
    return rc;
}

/* A run in place (amp_allreduce_runs): summed and divided where it lies. */
static AmpCode reduce_run(AmpKernelCtx *k, float *f, size_t n, void *arg) {
    (void)arg;
    AmpComm *c = k->comm;
    AmpCode rc = c ? sum(k, f, n, true) : AMP_OK;
    for (size_t i = 0; i < n && !rc && c; i++) f[i] /= (float)c->size;
    return rc;
}

AmpCode amp_cpu_allreduce_mean(AmpKernelCtx *k) {
    AmpAllReduceGeom own_g;
    const AmpAllReduceGeom *g; /* amp_allreduce_geom (ops/ew_common.h): the inputs, their dtypes, Y checked */
    AmpCode rc = amp_kernel_geom(k, &own_g, (const void **)&g);
    if (rc) return rc;
    AmpComm *c = k->comm;
    int N = k->n_in;
    AmpBuf **out;
    bool *packed;
    rc = amp_allreduce_begin(k, &out, &packed); /* ops/ew_common.h: the outputs */
    float ranks = c ? (float)c->size : 1.0f;
    size_t total = 0; /* the packed elements */
    if (!rc) rc = amp_allreduce_runs(k, out, packed, &total, reduce_run, NULL);
    /* The rest: one buffer, one collective. */
    float *own = NULL, *f = rc || !total ? NULL : scratch(k, total, &own);
    if (!rc && total && !f) rc = amp_kernel_fail(k, AMP_ERR_INTERNAL, "out of memory");
    size_t at = 0;
    for (int j = 0; j < N && !rc && total; j++) {
        const AmpBuf *x = k->in[j];
        if (!packed[j]) continue;
        if (x->dtype == AMP_DT_FLOAT) memcpy(f + at, x->data, x->nelem * sizeof *f);
        else if (x->dtype == AMP_DT_FLOAT16) amp_f16_to_f32_n(f + at, x->data, x->nelem);
        else amp_bf16_to_f32_n(f + at, x->data, x->nelem);
        at += x->nelem;
    }
    if (!rc && c && total) rc = sum(k, f, total, false);
    at = 0;
    for (int j = 0; j < N && !rc && total; j++) {
        const AmpBuf *x = k->in[j];
        if (!packed[j]) continue;
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
    free(packed);
    return rc;
}
