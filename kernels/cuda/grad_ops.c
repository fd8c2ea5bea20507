/* CUDA node-level kernels of the training family, element-wise part (launchers in
 * grad_ops.cu): com.microsoft ReluGrad, SigmoidGrad, TanhGrad, GeluGrad, BiasGelu,
 * BiasGeluGrad_dX, DropoutGrad, InPlaceAccumulatorV2, and Dropout. Each checks what the
 * CPU kernel checks that the host can see (kernels/cpu/activation.c, dropout.c, optim.c)
 * with the helpers both share (ops/ew_common.h, ops/dropout_rng.h); the values of the
 * small inputs (ratio, training_mode, the accumulator's overwrite flag) stay on the
 * device and are read by the kernels, so nothing here waits on the stream. */
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/grad_ops.h"
#include "ops/dropout_rng.h"
#include "ops/ew_common.h"
#include "ops/geom.h"
#include "ops/optim_math.h" /* amp_accumulator_outs */

_Static_assert(AMP_CUDA_GRAD_RANK == AMP_MAX_RANK, "grad_ops.h's rank is AMP_MAX_RANK");

static void *stream_of(AmpKernelCtx *k) {
    return amp_cuda_ctx(k)->stream;
}

static AmpCode launched(AmpKernelCtx *k, int err) {
    return amp_cuda_check(k, err, k->node->op_type ? k->node->op_type : "training op");
}

static bool is_f32_family(int dt) {
    return dt == AMP_DT_FLOAT || dt == AMP_DT_FLOAT16 || dt == AMP_DT_BFLOAT16;
}

/* The same rank and dims, whatever the dtypes (amp_buf_same_shape also compares those). */
static bool same_dims(const AmpBuf *a, const AmpBuf *b) {
    return a->rank == b->rank && (!a->rank || !memcmp(a->dims, b->dims, (size_t)a->rank * sizeof a->dims[0]));
}

/* ---- the two-operand gradients ------------------------------------------------------- */

/* out (a's dtype, the broadcast shape) = op(a, b), as activation.c's binary(): same
 * dtype, float32/float16/bfloat16 here (double stays on the CPU). */
static AmpCode grad_binary(AmpKernelCtx *k, int op, int mode) {
    AmpCode rc = amp_ew_need(k, 2);
    if (rc) return rc;
    const AmpBuf *a = k->in[0], *b = k->in[1];
    if ((rc = amp_ew_same_dtype(k, a, b))) return rc;
    if (!is_f32_family(a->dtype)) return amp_kernel_bad_dtype(k, a->dtype);
    const AmpBuf *ins[2] = {a, b};
    int rank;
    int64_t dims[AMP_MAX_RANK];
    AmpBuf *out;
    if ((rc = amp_ew_bcast_shape(k, 2, ins, &rank, dims)) || (rc = amp_ew_out(k, a->dtype, rank, dims, &out)) ||
        !out || !out->nelem)
        return rc;
    AmpCudaGradShape sh, *shp = NULL;
    if (!same_dims(a, out) || !same_dims(b, out)) {
        memset(&sh, 0, sizeof sh);
        sh.rank = rank;
        memcpy(sh.dims, dims, (size_t)rank * sizeof dims[0]);
        for (int j = 0; j < 2; j++) amp_broadcast_strides(ins[j]->rank, ins[j]->dims, rank, dims, sh.stride[j]);
        shp = &sh;
    }
    return launched(k, amp_cuda_grad_binary(op, mode, a->dtype, out->data, a->data, b->data, shp, out->nelem,
                                            stream_of(k)));
}

static int gelu_mode(AmpKernelCtx *k) {
    const AmpEwParams *p = k->attrs;
    return p ? p->mode : 0;
}

AmpCode amp_cuda_relu_grad(AmpKernelCtx *k) {
    return grad_binary(k, AMP_CUDA_GR_RELU, 0);
}
AmpCode amp_cuda_sigmoid_grad(AmpKernelCtx *k) {
    return grad_binary(k, AMP_CUDA_GR_SIGMOID, 0);
}
AmpCode amp_cuda_tanh_grad(AmpKernelCtx *k) {
    return grad_binary(k, AMP_CUDA_GR_TANH, 0);
}
AmpCode amp_cuda_gelu_grad(AmpKernelCtx *k) {
    return grad_binary(k, AMP_CUDA_GR_GELU, gelu_mode(k));
}
AmpCode amp_cuda_bias_gelu(AmpKernelCtx *k) {
    return grad_binary(k, AMP_CUDA_GR_BIAS_GELU, gelu_mode(k));
}

/* BiasGeluGrad_dX (dY, X, B): dY like X, B 1-D over X's last axis (activation.c). */
AmpCode amp_cuda_bias_gelu_grad_dx(AmpKernelCtx *k) {
    AmpBiasGeluGradGeom own;
    const AmpBiasGeluGradGeom *g; /* amp_bias_gelu_grad_geom (ops/ew_common.h): the inputs' shapes, dX checked */
    AmpCode rc = amp_kernel_geom(k, &own, (const void **)&g);
    if (rc) return rc;
    const AmpBuf *dy = k->in[0], *x = k->in[1], *b = k->in[2];
    if (!is_f32_family(x->dtype)) return amp_kernel_bad_dtype(k, x->dtype);
    AmpBuf *dx;
    if ((rc = amp_kernel_outputs(k, 1, &dx)) || !dx || !g->n) return rc;
    return launched(k, amp_cuda_bias_gelu_grad(x->dtype, dx->data, dy->data, x->data, b->data, g->n, g->h,
                                               stream_of(k)));
}

/* ---- Dropout, DropoutGrad -------------------------------------------------------------- */

/* A one-element ratio input, as the CPU requires it. */
static AmpCode check_ratio(AmpKernelCtx *k, const AmpBuf *r) {
    if (r && (!amp_ew_is_float(r->dtype) || r->nelem != 1))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "ratio must be one float value (%s with %llu elements)",
                               amp_dtype_name(r->dtype), (unsigned long long)r->nelem);
    return AMP_OK;
}

static AmpCode check_mode(AmpKernelCtx *k, const AmpBuf *t) {
    if (t && (t->dtype != AMP_DT_BOOL || t->nelem != 1))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "training_mode must be one bool value");
    return AMP_OK;
}

bool amp_cuda_dropout_on_device(bool training_step, bool has_mode_input, bool has_seed) {
    return training_step || !(has_mode_input && has_seed);
}

/* Dropout: dropout.c's rules, the mask from the call's key (the same draw from k->rng as
 * the CPU's, by amp_dropout_draws), ratio and training_mode read by the kernel. */
AmpCode amp_cuda_dropout_node(AmpKernelCtx *k) {
    AmpDropoutGeom own;
    const AmpDropoutGeom *g; /* amp_dropout_geom (ops/dropout_rng.h): x present, y and the mask checked */
    AmpCode rc = amp_kernel_geom(k, &own, (const void **)&g);
    if (rc) return rc;
    const AmpDropoutAttrs *a = k->attrs;
    const AmpBuf *x = k->in[0];
    if (!is_f32_family(x->dtype)) return amp_kernel_bad_dtype(k, x->dtype);
    const AmpBuf *r = k->opset >= 12 ? amp_ew_in(k, 1) : NULL, *t = k->opset >= 12 ? amp_ew_in(k, 2) : NULL;
    if ((rc = check_ratio(k, r)) || (rc = check_mode(k, t))) return rc;
    if (!amp_cuda_dropout_on_device(k->training, t != NULL, a->has_seed))
        return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED,
                               "a seeded Dropout in the model's own training mode draws MT19937 (the CPU's)");
    double ratio = r ? 0.5 : a->ratio; /* r: read on the device */
    if (!r && k->training && ratio != 0 && !(ratio > 0 && ratio < 1))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "ratio %g is outside [0, 1)", ratio);
    AmpBuf *out[2];
    if ((rc = amp_kernel_outputs(k, 2, out))) return rc;
    AmpBuf *y = out[0], *mask = out[1];
    int mask_dt = g->mask_dtype;
    uint64_t local = AMP_DROPOUT_GOLDEN, key = 0;
    if (amp_dropout_draws(k->training, t != NULL, a->has_seed, x->nelem))
        key = amp_dropout_key(k->rng ? k->rng : &local);
    if (!x->nelem) return AMP_OK;
    AmpCudaDropout p = {.ratio = ratio,
                        .ratio_dev = r ? r->data : NULL,
                        .ratio_dtype = r ? r->dtype : AMP_DT_DOUBLE,
                        .mode_dev = t ? t->data : NULL,
                        .training_step = k->training,
                        .key = key,
                        .mask_dtype = mask_dt};
    return launched(k, amp_cuda_dropout(x->dtype, y ? y->data : NULL, mask ? mask->data : NULL, x->data, x->nelem, &p,
                                        stream_of(k)));
}

/* com.microsoft DropoutGrad (dY, mask, ratio?, training_mode?) -> dX (dropout.c). */
AmpCode amp_cuda_dropout_grad_node(AmpKernelCtx *k) {
    AmpDropoutGradGeom own;
    const AmpDropoutGradGeom *g; /* amp_dropout_grad_geom (ops/dropout_rng.h): the mask's shape, dX checked */
    AmpCode rc = amp_kernel_geom(k, &own, (const void **)&g);
    if (rc) return rc;
    const AmpBuf *dy = k->in[0], *mask = k->in[1], *r = amp_ew_in(k, 2), *t = amp_ew_in(k, 3);
    if (!is_f32_family(dy->dtype)) return amp_kernel_bad_dtype(k, dy->dtype);
    if ((rc = check_ratio(k, r)) || (rc = check_mode(k, t))) return rc;
    AmpBuf *dx;
    if ((rc = amp_kernel_outputs(k, 1, &dx)) || !dx || !g->n) return rc;
    return launched(k, amp_cuda_dropout_grad(dy->dtype, dx->data, dy->data, mask->data, g->n, r ? r->data : NULL,
                                             r ? r->dtype : AMP_DT_FLOAT, t ? t->data : NULL, stream_of(k)));
}

/* ---- InPlaceAccumulatorV2 ---------------------------------------------------------------- */

/* (buffer, value, overwrite?) -> (updated, buffer_out) as optim.c's; the flag is read by
 * the kernel on the device (no copy to the host). */
AmpCode amp_cuda_accumulator(AmpKernelCtx *k) {
    const AmpBuf *buf = amp_ew_in(k, 0), *val = amp_ew_in(k, 1), *ow = amp_ew_in(k, 2);
    if (!buf || !val) return amp_kernel_fail(k, AMP_ERR_INPUT, "buffer and value are required");
    if (!is_f32_family(buf->dtype)) return amp_kernel_bad_dtype(k, buf->dtype);
    if (!is_f32_family(val->dtype)) return amp_kernel_bad_dtype(k, val->dtype);
    if (!same_dims(buf, val))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "buffer and value must have the same shape");
    if (ow && (ow->nelem != 1 || !(ow->dtype == AMP_DT_BOOL || ow->dtype == AMP_DT_INT32 || ow->dtype == AMP_DT_INT64)))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "overwrite_flag must be one boolean");
    AmpBuf *flag, *out;
    AmpCode rc = amp_accumulator_outs(k, buf, &flag, &out);
    if (rc) return rc;
    return launched(k, amp_cuda_accumulate(buf->dtype, val->dtype, out ? out->data : NULL, buf->data, val->data,
                                           buf->nelem, ow ? ow->data : NULL, ow ? ow->dtype : AMP_DT_BOOL,
                                           flag ? flag->data : NULL, stream_of(k)));
}

/* ---- supports predicates ------------------------------------------------------------------ */

static int dt_at(const AmpNode *n, const int *in_dtypes, int i) {
    return i < n->n_inputs && n->inputs[i] ? in_dtypes[i] : AMP_DT_UNDEFINED;
}

static bool float_or_double(int dt) {
    return is_f32_family(dt) || dt == AMP_DT_DOUBLE;
}

bool amp_cuda_supports_dropout(const AmpNode *n, int64_t opset, const int *in_dtypes) {
    int r = dt_at(n, in_dtypes, 1), t = dt_at(n, in_dtypes, 2);
    if (opset < 12) r = t = AMP_DT_UNDEFINED; /* not inputs before opset 12 */
    return is_f32_family(dt_at(n, in_dtypes, 0)) && (!r || float_or_double(r)) && (!t || t == AMP_DT_BOOL);
}

bool amp_cuda_supports_dropout_grad(const AmpNode *n, int64_t opset, const int *in_dtypes) {
    (void)opset;
    int r = dt_at(n, in_dtypes, 2), t = dt_at(n, in_dtypes, 3);
    return is_f32_family(dt_at(n, in_dtypes, 0)) && dt_at(n, in_dtypes, 1) == AMP_DT_BOOL &&
           (!r || float_or_double(r)) && (!t || t == AMP_DT_BOOL);
}

bool amp_cuda_supports_accumulator(const AmpNode *n, int64_t opset, const int *in_dtypes) {
    (void)opset;
    int f = dt_at(n, in_dtypes, 2);
    return is_f32_family(dt_at(n, in_dtypes, 0)) && is_f32_family(dt_at(n, in_dtypes, 1)) &&
           (!f || f == AMP_DT_BOOL || f == AMP_DT_INT32 || f == AMP_DT_INT64);
}
