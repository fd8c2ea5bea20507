/* CUDA node-level kernels of ai.onnx.preview.training Adam, Momentum and Adagrad: the
 * node's inputs checked as the CPU kernel checks them (kernels/cpu/optim.c; attributes
 * parsed by its prepare), its tensors gathered into launch tables (amp_cuda_opt_plan)
 * and each table updated by one launch of the multi-tensor kernel (optim.cu). Float32,
 * float16, bfloat16 and double tensors, each of its own type; R a float scalar, T an
 * int32 or int64 scalar, both read on the device, as is the fused update gate
 * (AmpKernelCtx.gate): nothing is copied to the host and nothing waits. */
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/optim.h"
#include "ops/geom.h"

/* The tensor types the kernel reads and writes. */
static bool opt_float(int dt) {
    return dt == AMP_DT_FLOAT || dt == AMP_DT_FLOAT16 || dt == AMP_DT_BFLOAT16 || dt == AMP_DT_DOUBLE;
}

/* R, T and groups of float tensors as the op lists them, no more outputs than the CPU
 * takes; every input present. */
bool amp_cuda_supports_optimizer(const AmpNode *n, int64_t opset, const int *in_dtypes) {
    (void)opset;
    int groups = n->op == AMP_OP_Adam ? 4 : 3, tensors = n->n_inputs - 2;
    if (tensors <= 0 || tensors % groups || n->n_outputs > (groups - 1) * (tensors / groups)) return false;
    if (!n->inputs[0] || !opt_float(in_dtypes[0])) return false;
    if (!n->inputs[1] || (in_dtypes[1] != AMP_DT_INT32 && in_dtypes[1] != AMP_DT_INT64)) return false;
    for (int i = 2; i < n->n_inputs; i++)
        if (!n->inputs[i] || !opt_float(in_dtypes[i])) return false;
    return true;
}

int amp_cuda_opt_plan(const AmpCudaOptTensor *ts, int n, int *next, AmpCudaOptTable *t) {
    memset(t, 0, sizeof *t);
    t->all_f32 = 1;
    int i = *next;
    for (; i < n && t->n < AMP_CUDA_OPT_MAX_TENSORS; i++) {
        const AmpCudaOptTensor *s = &ts[i];
        if (s->nelem <= 0) continue; /* nothing to update; its outputs are empty too */
        int j = t->n++;
        t->chunks += (s->nelem + AMP_CUDA_OPT_CHUNK - 1) / AMP_CUDA_OPT_CHUNK;
        t->chunk_end[j] = t->chunks;
        t->nelem[j] = s->nelem;
        for (int r = 0; r < AMP_CUDA_OPT_IN; r++) {
            t->in[r][j] = s->in[r];
            t->dt[r][j] = (uint8_t)s->dt[r];
            if (s->in[r] && s->dt[r] != AMP_DT_FLOAT) t->all_f32 = 0;
        }
        for (int r = 0; r < AMP_CUDA_OPT_OUT; r++) t->out[r][j] = s->out[r];
    }
    *next = i;
    return t->n;
}

/* One optimised tensor's inputs (X, G, state...) and placed outputs (NULL: not listed;
 * present, shaped and checked by amp_optimizer_geom), their dtypes checked as the CPU does,
 * into *ts. */
static AmpCode opt_tensor(AmpKernelCtx *k, int n_state, const AmpBuf *const *in, AmpBuf *const *out,
                          AmpCudaOptTensor *ts) {
    memset(ts, 0, sizeof *ts);
    for (int j = 0; j < 2 + n_state; j++) {
        if (!opt_float(in[j]->dtype)) return amp_kernel_bad_dtype(k, in[j]->dtype);
        ts->in[j] = in[j]->data;
        ts->dt[j] = in[j]->dtype;
    }
    for (int j = 0; j < 1 + n_state; j++)
        if (out[j]) ts->out[j] = out[j]->data;
    ts->nelem = (int64_t)in[0]->nelem;
    return AMP_OK;
}

/* R, T and the gate: where they lie and their types, into nd. */
static AmpCode opt_scalars(AmpKernelCtx *k, AmpCudaOptNode *nd) {
    const AmpBuf *R = k->in[0], *T = k->in[1], *gate = k->gate;
    if (!R || !opt_float(R->dtype) || R->nelem != 1)
        return amp_kernel_fail(k, AMP_ERR_INPUT, "R must be a float scalar");
    if (!T || !amp_dtype_is_int(T->dtype) || T->nelem != 1)
        return amp_kernel_fail(k, AMP_ERR_INPUT, "T must be an integer scalar");
    if (T->dtype != AMP_DT_INT32 && T->dtype != AMP_DT_INT64) /* the CPU takes it: fall back */
        return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "T of type %s: the CUDA kernel reads int32 or int64",
                               amp_dtype_name(T->dtype));
    if (gate && (gate->dtype != AMP_DT_BOOL || gate->nelem != 1))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "the update gate must be one bool");
    nd->r = R->data, nd->r_dtype = R->dtype;
    nd->t = T->data, nd->t_dtype = T->dtype;
    nd->gate = gate ? gate->data : NULL;
    return AMP_OK;
}

/* Every tensor of the node, in as few launches as the tables allow. */
static AmpCode opt_launch_all(AmpKernelCtx *k, const AmpCudaOptNode *nd, const AmpCudaOptTensor *ts, int N) {
    AmpCudaOptTable t;
    int next = 0;
    while (amp_cuda_opt_plan(ts, N, &next, &t) > 0) {
        AmpCode rc = amp_cuda_check(k, amp_cuda_opt_launch(nd, &t, amp_cuda_ctx(k)->stream), "optimizer kernel");
        if (rc) return rc;
    }
    return AMP_OK;
}

static AmpCode opt_run(AmpKernelCtx *k) {
    AmpOptGeom own;
    const AmpOptGeom *g; /* amp_optimizer_geom (ops/optim_math.h) */
    AmpCode rc = amp_kernel_geom(k, &own, (const void **)&g);
    if (rc) return rc;
    const AmpOptAttrs *a = k->attrs;
    int n_state = a->kind == AMP_OPT_ADAM ? 2 : 1, groups = g->groups, N = g->N;
    AmpCudaOptNode nd = {.a = *a, .n_state = n_state};
    rc = opt_scalars(k, &nd);
    if (rc) return rc;
    AmpBuf **outs = malloc((size_t)(k->n_out > 0 ? k->n_out : 1) * sizeof *outs);
    AmpCudaOptTensor *ts = malloc((size_t)N * sizeof *ts);
    if (!outs || !ts) rc = amp_kernel_fail(k, AMP_ERR_INTERNAL, "out of memory");
    if (!rc) rc = amp_kernel_outputs(k, k->n_out, outs);
    for (int i = 0; i < N && !rc; i++) {
        const AmpBuf *in[4] = {NULL, NULL, NULL, NULL};
        AmpBuf *out[3] = {NULL, NULL, NULL};
        amp_opt_tensor_io(k, groups, N, outs, i, in, out);
        rc = opt_tensor(k, n_state, in, out, &ts[i]);
    }
    if (!rc) rc = opt_launch_all(k, &nd, ts, N);
    free(outs), free(ts);
    return rc;
}

/* The op's kind is the prepared attributes' (amp_optimizer_prepare). */
AmpCode amp_cuda_adam(AmpKernelCtx *k) { return opt_run(k); }
AmpCode amp_cuda_momentum(AmpKernelCtx *k) { return opt_run(k); }
AmpCode amp_cuda_adagrad(AmpKernelCtx *k) { return opt_run(k); }
