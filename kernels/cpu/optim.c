/* CPU kernels: the ai.onnx.preview.training optimizers Adam, Momentum (standard and
 * Nesterov) and Adagrad, as the ONNX spec's pseudo code (the per-element arithmetic in
 * ops/optim_math.h, shared with the CUDA kernels, as their attributes are), and
 * com.microsoft InPlaceAccumulatorV2.
 * Optimizer inputs are R (learning rate, scalar), T (update count, integer scalar), then
 * N tensors per group (X..., G..., state...); outputs are the new X... then the new
 * state, group by group. The optimizers honour the fused update gate (AmpKernelCtx.gate):
 * where it holds true every output is a copy of the input it replaces. */
#include <math.h>

#include "kernels/cpu/reduce_impl.h"
#include "ops/geom.h"
#include "ops/optim_math.h"

static bool same_shape(const AmpBuf *a, const AmpBuf *b) {
    if (a->rank != b->rank) return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i]) return false;
    return true;
}

/* The gated step (the gate holds true): each listed output a copy of the input it
 * replaces, bit for bit. */
static AmpCode opt_copy(AmpKernelCtx *k, const AmpBuf *const *in, AmpBuf *const *out) {
    for (int j = 0; j < 3; j++) {
        const AmpBuf *src = in[j == 0 ? 0 : 1 + j];
        size_t bytes = 0;
        if (!out[j] || !src || out[j]->data == src->data) continue;
        if (!amp_tensor_expected_bytes(src->dtype, src->nelem, &bytes))
            return amp_kernel_fail(k, AMP_ERR_INTERNAL, "no byte size for the copy of a gated update");
        if (bytes) memcpy(out[j]->data, src->data, bytes);
    }
    return AMP_OK;
}

/* One optimised tensor: in[0] X, in[1] G, in[2..] the state (Momentum V, Adagrad H,
 * Adam V then H); out: X_new then the new state as placed (NULL: not listed). skip: the
 * gate holds true. */
static AmpCode opt_tensor(AmpKernelCtx *k, const AmpOptAttrs *a, const AmpOptStep *step, bool skip,
                          const AmpBuf *const *in, AmpBuf *const *out) {
    int n_state = a->kind == AMP_OPT_ADAM ? 2 : 1, n_io = 2 + n_state;
    for (int j = 0; j < n_io; j++) /* present, shaped and the outputs checked: amp_optimizer_geom */
        if (!amp_red_is_float(in[j]->dtype)) return amp_kernel_bad_dtype(k, in[j]->dtype);
    AmpCode rc = AMP_OK;
    if (skip) return opt_copy(k, in, out);
    AmpFv v[4];
    AmpFo o[3];
    memset(v, 0, sizeof v), memset(o, 0, sizeof o);
    for (int j = 0; j < 1 + n_state && !rc; j++)
        if (out[j]) rc = amp_fo_open(k, out[j], &o[j]);
    for (int j = 0; j < n_io && !rc; j++) rc = amp_fv_open(k, in[j], &v[j]);
    if (!rc)
        for (uint64_t i = 0; i < in[0]->nelem; i++) {
            double xn, n1, n2;
            amp_opt_update(a, step, amp_fv_get(&v[0], i), amp_fv_get(&v[1], i), amp_fv_get(&v[2], i),
                           n_state > 1 ? amp_fv_get(&v[3], i) : 0.0, &xn, &n1, &n2);
            if (out[0]) amp_fo_set(&o[0], i, xn);
            if (out[1]) amp_fo_set(&o[1], i, n1);
            if (n_state > 1 && out[2]) amp_fo_set(&o[2], i, n2);
        }
    for (int j = 0; j < 3; j++) {
        if (!rc) amp_fo_commit(&o[j]);
        else amp_fo_discard(&o[j]);
    }
    for (int j = 0; j < 4; j++) amp_fv_close(&v[j]);
    return rc;
}

/* The fused update gate's value (false without one); -1 with k->st set when it is not
 * one bool. */
static int opt_gate(AmpKernelCtx *k) {
    const AmpBuf *g = k->gate;
    if (!g) return 0;
    if (g->dtype != AMP_DT_BOOL || g->nelem != 1 || !g->data) {
        amp_kernel_fail(k, AMP_ERR_INPUT, "the update gate must be one bool");
        return -1;
    }
    return ((const uint8_t *)g->data)[0] != 0;
}

static AmpCode opt_run(AmpKernelCtx *k) {
    AmpOptGeom own;
    const AmpOptGeom *g; /* amp_optimizer_geom (ops/optim_math.h) */
    if (amp_kernel_geom(k, &own, (const void **)&g)) return k->st->code;
    const AmpOptAttrs *a = k->attrs;
    int groups = g->groups, N = g->N;
    const AmpBuf *R = k->in[0], *T = k->in[1];
    if (!R || !amp_red_is_float(R->dtype) || R->nelem != 1)
        return amp_kernel_fail(k, AMP_ERR_INPUT, "R must be a float scalar");
    if (!T || !amp_dtype_is_int(T->dtype) || T->nelem != 1)
        return amp_kernel_fail(k, AMP_ERR_INPUT, "T must be an integer scalar");
    int skip = opt_gate(k);
    if (skip < 0) return k->st->code;
    /* the outputs, X_new... then each state group, as placed (at most 3 groups of N) */
    AmpBuf **outs = malloc((size_t)(k->n_out > 0 ? k->n_out : 1) * sizeof *outs);
    if (!outs) return amp_red_oom(k);
    AmpCode rc = amp_kernel_outputs(k, k->n_out, outs);
    AmpFv vr;
    if (rc || (rc = amp_fv_open(k, R, &vr))) {
        free(outs);
        return rc;
    }
    AmpOptStep step = amp_opt_step(a, amp_fv_get(&vr, 0), amp_buf_get_i64(T, 0));
    amp_fv_close(&vr);
    for (int i = 0; i < N && !rc; i++) {
        const AmpBuf *in[4] = {NULL, NULL, NULL, NULL};
        AmpBuf *out[3] = {NULL, NULL, NULL};
        amp_opt_tensor_io(k, groups, N, outs, i, in, out);
        rc = opt_tensor(k, a, &step, skip, in, out);
    }
    free(outs);
    return rc;
}

/* com.microsoft InPlaceAccumulatorV2 (buffer, value, overwrite?) -> (updated bool [1],
 * buffer_out): buffer_out = overwrite ? value : buffer + value, in the buffer's type (the
 * value may be 16-bit gradients summed into a float32 buffer). */
AmpCode amp_cpu_ms_accumulator(AmpKernelCtx *k) {
    const AmpBuf *buf = k->n_in > 0 ? k->in[0] : NULL;
    const AmpBuf *val = k->n_in > 1 ? k->in[1] : NULL;
    const AmpBuf *ow = k->n_in > 2 ? k->in[2] : NULL;
    if (!buf || !val) return amp_kernel_fail(k, AMP_ERR_INPUT, "buffer and value are required");
    if (!amp_red_is_float(buf->dtype)) return amp_kernel_bad_dtype(k, buf->dtype);
    if (!amp_red_is_float(val->dtype)) return amp_kernel_bad_dtype(k, val->dtype);
    if (!same_shape(buf, val)) return amp_kernel_fail(k, AMP_ERR_INPUT, "buffer and value must have the same shape");
    if (ow && (ow->nelem != 1 || !(amp_dtype_is_int(ow->dtype) || ow->dtype == AMP_DT_BOOL)))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "overwrite_flag must be one boolean");
    bool overwrite = ow && amp_buf_get_i64(ow, 0) != 0;
    AmpBuf *flag, *out;
    AmpCode rc = amp_accumulator_outs(k, buf, &flag, &out);
    if (rc) return rc;
    if (flag) ((uint8_t *)flag->data)[0] = 1;
    if (!out) return AMP_OK;
    AmpFv vb, vv;
    AmpFo o;
    if ((rc = amp_fv_open(k, buf, &vb))) return rc;
    if ((rc = amp_fv_open(k, val, &vv))) {
        amp_fv_close(&vb);
        return rc;
    }
    if (!(rc = amp_fo_open(k, out, &o))) {
        for (uint64_t i = 0; i < buf->nelem; i++)
            amp_fo_set(&o, i, overwrite ? amp_fv_get(&vv, i) : amp_fv_get(&vb, i) + amp_fv_get(&vv, i));
        amp_fo_commit(&o);
    }
    amp_fv_close(&vb), amp_fv_close(&vv);
    return rc;
}

/* The op's kind is the prepared attributes' (amp_optimizer_prepare). */
AmpCode amp_cpu_adam(AmpKernelCtx *k) { return opt_run(k); }
AmpCode amp_cpu_momentum(AmpKernelCtx *k) { return opt_run(k); }
AmpCode amp_cpu_adagrad(AmpKernelCtx *k) { return opt_run(k); }
