/* ai.ampc AllReduceMean on CUDA (allreduce.h): the gradients of a data-parallel step made
 * the mean over the ranks on the device, through the backend instance's NCCL communicator
 * (nccl_comm.h), split as the CPU kernel splits them (amp_allreduce_runs, ops/ew_common.h):
 *  - runs of float32 gradients the arena holds end to end with their means over them are
 *    summed where they lie (ncclAllReduce in place, one per run) and divided in place;
 *  - the rest are packed into one float32 device buffer (16-bit ones widened), summed in
 *    one more ncclAllReduce, and each output written as its slice / ranks in its type.
 * Every collective is queued on the session's stream; the kernel then waits for the node's
 * work, polled against the communicator's timeout (never a hang), before it returns. With
 * no communicator (the kernel run alone) each output is its input. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "backend/comm.h"
#include "kernels/cuda/allreduce.h"
#include "kernels/cuda/convert.h"
#include "kernels/cuda/nccl_comm.h"
#include "ops/ew_common.h" /* amp_allreduce_geom, amp_allreduce_runs */
#include "ops/geom.h"

bool amp_cuda_supports_allreduce(const AmpNode *n, int64_t opset, const int *in_dtypes) {
    (void)opset;
    for (int i = 0; i < n->n_inputs; i++)
        if (!n->inputs[i] || !amp_cuda_is_float(in_dtypes[i])) return false;
    return n->n_inputs > 0;
}

/* The packed buffer, when it outgrows the workspace: kept in the node's pack, grown as
 * needed (the first steps allocate it, as the library plans are made on first use). */
typedef struct Scratch {
    float *d;
    size_t cap;
} Scratch;

static void scratch_free(void *p) {
    Scratch *s = p;
    if (s && s->d) cudaFree(s->d);
    free(s);
}

/* n floats of device scratch: the workspace (its users are on the same stream, so they
 * run before or after this node, never during) when it is large enough, else the pack's. */
static float *scratch(AmpKernelCtx *k, size_t n) {
    AmpCudaCtx *c = amp_cuda_ctx(k);
    if (n * sizeof(float) <= c->workspace_bytes) return c->workspace;
    if (!k->pack) return NULL;
    Scratch *s = k->pack->data;
    if (!s) {
        if (!(s = calloc(1, sizeof *s))) return NULL;
        k->pack->data = s;
        k->pack->free_fn = scratch_free;
    }
    if (s->cap < n) {
        if (s->d) cudaFree(s->d); /* waits for the device: the old buffer's readers are done */
        s->d = NULL;
        s->cap = 0;
        if (cudaMalloc((void **)&s->d, n * sizeof(float)) != cudaSuccess) {
            (void)cudaGetLastError();
            s->d = NULL;
            return NULL;
        }
        s->cap = n;
    }
    return s->d;
}

static double seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* buf[0..n) summed over the ranks (queued), with the counts the run prints. */
static AmpCode sum(AmpKernelCtx *k, AmpNccl *nc, float *buf, size_t n, bool in_place) {
    AmpComm *c = k->comm;
    AmpCode rc = amp_nccl_sum(nc, buf, n, amp_cuda_ctx(k)->stream, k->st);
    if (!rc) {
        c->grad_bytes += n * sizeof *buf;
        c->grad_calls++;
        if (in_place) c->grad_bytes_in_place += n * sizeof *buf;
        c->grad_transport = "nccl";
    }
    return rc;
}

/* A run in place (amp_allreduce_runs): summed and divided where it lies. */
static AmpCode reduce_run(AmpKernelCtx *k, float *f, size_t n, void *nc) {
    AmpComm *c = k->comm;
    AmpCode rc = c ? sum(k, nc, f, n, true) : AMP_OK;
    if (!rc && c)
        rc = amp_cuda_check(k, amp_cuda_mean_launch(f, AMP_DT_FLOAT, f, n, (float)c->size, amp_cuda_ctx(k)->stream),
                            "the mean");
    return rc;
}

/* Gradient x widened into f[0..x->nelem) (float32: a device copy). */
static AmpCode widen(AmpKernelCtx *k, float *f, const AmpBuf *x) {
    void *s = amp_cuda_ctx(k)->stream;
    if (x->dtype == AMP_DT_FLOAT) return amp_cuda_copy(k, f, x->data, x->nelem * sizeof *f);
    int err = x->dtype == AMP_DT_FLOAT16 ? amp_cuda_f16_to_f32(f, x->data, x->nelem, s)
                                         : amp_cuda_bf16_to_f32(f, x->data, x->nelem, s);
    return amp_cuda_check(k, err, "widening a gradient to float32");
}

AmpCode amp_cuda_allreduce_mean(AmpKernelCtx *k) {
    AmpAllReduceGeom own_g;
    const AmpAllReduceGeom *g; /* amp_allreduce_geom: the inputs, their dtypes, Y checked */
    AmpCode rc = amp_kernel_geom(k, &own_g, (const void **)&g);
    if (rc) return rc;
    AmpComm *c = k->comm;
    AmpNccl *nc = amp_cuda_ctx(k)->nccl;
    if (c && !nc) /* (the instance does not take the node then: cuda_supports) */
        return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "no NCCL communicator: the host reduces the gradients");
    void *stream = amp_cuda_ctx(k)->stream;
    int N = k->n_in;
    AmpBuf **out;
    bool *packed;
    rc = amp_allreduce_begin(k, &out, &packed);
    float ranks = c ? (float)c->size : 1.0f;
    double t0 = seconds();
    size_t total = 0; /* the packed elements */
    if (!rc) rc = amp_allreduce_runs(k, out, packed, &total, reduce_run, nc);
    /* The rest: one buffer, one collective. */
    float *f = rc || !total ? NULL : scratch(k, total);
    if (!rc && total && !f) rc = amp_kernel_fail(k, AMP_ERR_INTERNAL, "out of device memory for the packed gradients");
    size_t at = 0;
    for (int j = 0; j < N && !rc && total; j++)
        if (packed[j]) rc = widen(k, f + at, k->in[j]), at += k->in[j]->nelem;
    if (!rc && c && total) rc = sum(k, nc, f, total, false);
    at = 0;
    for (int j = 0; j < N && !rc && total; j++) {
        const AmpBuf *x = k->in[j];
        if (!packed[j]) continue;
        rc = amp_cuda_check(k, amp_cuda_mean_launch(out[j]->data, x->dtype, f + at, x->nelem, ranks, stream), "the mean");
        at += x->nelem;
    }
    if (!rc && nc) {
        char what[160];
        snprintf(what, sizeof what, "the gradients' all-reduce (node '%s')", k->node->name ? k->node->name : "");
        rc = amp_nccl_wait(nc, stream, what, k->st);
        if (!rc) c->grad_seconds += seconds() - t0;
    }
    free(out);
    free(packed);
    return rc;
}
