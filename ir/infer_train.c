/* Type inference for training ops: the ai.onnx.preview.training optimizers and the
 * com.microsoft training and fused ops (attention, gradients, accumulators). */
#include <string.h>

#include "ir/infer_impl.h"

static AmpCode like_input(AmpInferCtx *c, int out, int in) {
    const AmpNode *n = c->n;
    if (out >= n->n_outputs || !amp_inf_has_input(n, in)) return AMP_OK;
    return amp_inf_set_type(c, out, amp_inf_type(c, in));
}

/* Adam:     (R, T, X[N], G[N], V[N], H[N]) -> (X_new[N], V_new[N], H_new[N])
 * Momentum: (R, T, X[N], G[N], V[N])       -> (X_new[N], V_new[N])
 * Adagrad:  (R, T, X[N], G[N], H[N])       -> (X_new[N], H_new[N])
 * Each output mirrors the tensor input it replaces. */
AmpCode amp_infer_optimizer(AmpInferCtx *c) {
    const AmpNode *n = c->n;
    AmpStatus *st = c->st;
    static const int from_group[3] = {0, 2, 3}; /* output group -> input group */
    int groups = n->op == AMP_OP_Adam ? 4 : 3;
    int tensors = n->n_inputs - 2;
    if (tensors <= 0 || tensors % groups)
        return amp_inf_fail(n, st, "expects 2 + %d*N inputs, has %d", groups, n->n_inputs);
    int N = tensors / groups;
    if (n->n_outputs > (groups - 1) * N)
        return amp_inf_fail(n, st, "has %d outputs, at most %d for %d tensors", n->n_outputs,
                            (groups - 1) * N, N);
    for (int j = 0; j < n->n_outputs; j++) {
        AmpCode rc = like_input(c, j, 2 + from_group[j / N] * N + j % N);
        if (rc) return rc;
    }
    return AMP_OK;
}

/* com.microsoft Attention: input (B, S, D), weights (D, 3H) or qkv_hidden_sizes ->
 * output (B, S, Hv); present and the rest get the dtype only, but for the runtime
 * (concrete mode) present is (2, B, N, P + S, Dq / N), with N num_heads and P past's
 * dim 3 (0 without past). Graph mode leaves it unshaped as it always did, so that a
 * converted model's declared outputs keep their types (conversions byte for byte). */
AmpCode amp_infer_ms_attention(AmpInferCtx *c) {
    const AmpNode *n = c->n;
    AmpInfShape x, w, past, y, pres;
    y.rank = pres.rank = -1;
    int dt = amp_inf_dtype(c, 0);
    if (amp_inf_shape(c, 0, &x) && x.rank == 3) {
        y = x;
        y.d[2] = amp_dim_unknown();
        int64_t qkv[3], heads = amp_node_attr_int(n, "num_heads", 0);
        AmpDim dq = amp_dim_unknown();
        if (amp_inf_attr_ints(n, "qkv_hidden_sizes", qkv, 3) == 3) {
            y.d[2] = amp_dim_of(qkv[2]);
            dq = amp_dim_of(qkv[0]);
        } else if (amp_inf_shape(c, 1, &w) && w.rank == 2 && amp_dim_known(w.d[1]) && w.d[1].value % 3 == 0) {
            y.d[2] = dq = amp_dim_of(w.d[1].value / 3);
        }
        AmpDim P = amp_dim_of(0);
        if (amp_inf_has_input(n, 4)) P = amp_inf_shape(c, 4, &past) && past.rank == 5 ? past.d[3] : amp_dim_unknown();
        pres.rank = c->graph_mode ? -1 : 5;
        pres.d[0] = amp_dim_of(2), pres.d[1] = x.d[0], pres.d[2] = amp_dim_of(heads > 0 ? heads : -1);
        pres.d[3] = amp_dim_add(P, x.d[1]);
        pres.d[4] = heads > 0 && amp_dim_known(dq) && dq.value % heads == 0 ? amp_dim_of(dq.value / heads)
                                                                            : amp_dim_unknown();
    }
    AmpCode rc = amp_inf_set(c, 0, dt, &y);
    if (!rc && n->n_outputs > 1) rc = amp_inf_set(c, 1, dt, &pres);
    for (int i = 2; !rc && i < n->n_outputs; i++) rc = amp_inf_set(c, i, dt, NULL);
    return rc;
}

/* com.microsoft MultiHeadAttention: query (B, S, D) -> (B, S, Dv), Dv from value
 * (B, L, Dv) or (B, N, L, Hv); packed QKV query (B, S, N, 3, H) -> (B, S, N*H). The
 * other outputs get the dtype only, but for the runtime (concrete mode), with 3-D query:
 * present_key (B, N, T, D / N), present_value (B, N, T, Hv) and qk (B, N, S, T),
 * T = P + L with L key's sequence length and P past_key's dim 2. Graph mode leaves them
 * unshaped as it always did (conversions byte for byte). */
AmpCode amp_infer_ms_mha(AmpInferCtx *c) {
    const AmpNode *n = c->n;
    AmpInfShape q, kk, v, pk, y, pres_k, pres_v, qk;
    y.rank = pres_k.rank = pres_v.rank = qk.rank = -1;
    int dt = amp_inf_dtype(c, 0);
    if (amp_inf_shape(c, 0, &q)) {
        if (q.rank == 5) {
            y.rank = 3;
            y.d[0] = q.d[0];
            y.d[1] = q.d[1];
            y.d[2] = amp_dim_mul(q.d[2], q.d[4]);
        } else if (q.rank == 3) {
            y = q;
            bool hv = amp_inf_shape(c, 2, &v);
            if (hv && v.rank == 3) y.d[2] = v.d[2];
            else if (hv && v.rank == 4) y.d[2] = amp_dim_mul(v.d[1], v.d[3]);
            else if (amp_inf_has_input(n, 1) || amp_inf_has_input(n, 2)) y.d[2] = amp_dim_unknown();
            int64_t heads = amp_node_attr_int(n, "num_heads", 0);
            bool hk = amp_inf_shape(c, 1, &kk);
            if (!c->graph_mode && heads > 0 && hk && hv && (kk.rank == 3 || kk.rank == 4) && kk.rank == v.rank) {
                AmpDim P = amp_dim_of(0), N = amp_dim_of(heads);
                if (amp_inf_has_input(n, 6))
                    P = amp_inf_shape(c, 6, &pk) && pk.rank == 4 ? pk.d[2] : amp_dim_unknown();
                AmpDim T = amp_dim_add(P, kk.d[kk.rank == 3 ? 1 : 2]);
                pres_k.rank = pres_v.rank = qk.rank = 4;
                pres_k.d[0] = q.d[0], pres_k.d[1] = N, pres_k.d[2] = T;
                pres_k.d[3] = amp_dim_known(q.d[2]) && q.d[2].value % heads == 0 ? amp_dim_of(q.d[2].value / heads)
                                                                               : amp_dim_unknown();
                pres_v = pres_k;
                pres_v.d[3] = v.rank == 4                                                  ? v.d[3]
                              : amp_dim_known(v.d[2]) && v.d[2].value % heads == 0 ? amp_dim_of(v.d[2].value / heads)
                                                                                   : amp_dim_unknown();
                qk.d[0] = q.d[0], qk.d[1] = N, qk.d[2] = q.d[1], qk.d[3] = T;
            }
        }
    }
    AmpCode rc = amp_inf_set(c, 0, dt, &y);
    if (!rc && n->n_outputs > 1) rc = amp_inf_set(c, 1, dt, &pres_k);
    if (!rc && n->n_outputs > 2) rc = amp_inf_set(c, 2, dt, &pres_v);
    if (!rc && n->n_outputs > 3) rc = amp_inf_set(c, 3, dt, &qk);
    for (int i = 4; !rc && i < n->n_outputs; i++) rc = amp_inf_set(c, i, dt, NULL);
    return rc;
}

/* d_logits takes log_prob's type (input 1). */
AmpCode amp_infer_ms_sce_loss_grad(AmpInferCtx *c) {
    return like_input(c, 0, 1);
}

/* (Y_grad, X, scale, mean, inv_std_dev) -> (X_grad like X, scale_grad and bias_grad
 * like scale). */
AmpCode amp_infer_ms_ln_grad(AmpInferCtx *c) {
    AmpCode rc = like_input(c, 0, 1);
    if (!rc) rc = like_input(c, 1, 2);
    if (!rc) rc = like_input(c, 2, 2);
    return rc;
}

/* (buffer, value, overwrite?) -> (updated_flag bool [1], buffer_out like buffer). */
AmpCode amp_infer_ms_accumulator(AmpInferCtx *c) {
    AmpInfShape one;
    one.rank = 1;
    one.d[0] = amp_dim_of(1);
    AmpCode rc = amp_inf_set(c, 0, AMP_DT_BOOL, &one);
    return rc ? rc : like_input(c, 1, 0);
}

/* ConcatTraining (inputs...) -> (Concat's result, per_input_length int64 [n]). */
AmpCode amp_infer_ms_concat_training(AmpInferCtx *c) {
    AmpCode rc = amp_infer_concat(c);
    if (rc || c->n->n_outputs < 2) return rc;
    AmpInfShape s;
    s.rank = 1;
    s.d[0] = amp_dim_of(c->n->n_inputs);
    return amp_inf_set(c, 1, AMP_DT_INT64, &s);
}

/* GatherGrad (shape, indices, dY) -> dX: dY's dtype, the shape input's values (the shape
 * of Gather's data: embedding tables). */
AmpCode amp_infer_ms_gather_grad(AmpInferCtx *c) {
    const AmpType *dy = amp_inf_in(c, 2);
    AmpInfShape s;
    amp_inf_shape_from_value(c, 0, &s);
    return amp_inf_set(c, 0, dy ? dy->dtype : AMP_DT_UNDEFINED, &s);
}

/* (lr, step, weights, gradients, m1, m2, update?) -> (updated_flag like step,
 * weights, m1, m2): sequences pass through as they are. onnxruntime's kernels write
 * updated_flag as int64 (its schema's T2, step's type), yet its artifact generator
 * declares the optimizer model's flag bool and onnxruntime runs that file: a flag the
 * model declares bool is taken as the bool [1] it says. */
AmpCode amp_infer_ms_adamw(AmpInferCtx *c) {
    const AmpNode *n = c->n;
    static const int from[4] = {1, 2, 4, 5};
    for (int i = 0; i < n->n_outputs && i < 4; i++) {
        const AmpValue *o = n->outputs[i];
        AmpCode rc;
        if (i == 0 && o && o->type.kind == AMP_TYPE_TENSOR && o->type.dtype == AMP_DT_BOOL) {
            AmpInfShape one = {.rank = 1};
            one.d[0] = amp_dim_of(1);
            rc = amp_inf_set(c, 0, AMP_DT_BOOL, &one);
        } else
            rc = like_input(c, i, from[i]);
        if (rc) return rc;
    }
    return AMP_OK;
}

/* (lr, weights, gradients, update_signal?) -> (update_completed bool, weights): the
 * sequence passes through as it is. */
AmpCode amp_infer_ms_sgd_v2(AmpInferCtx *c) {
    AmpInfShape one = {.rank = 1};
    one.d[0] = amp_dim_of(1);
    AmpCode rc = amp_inf_set(c, 0, AMP_DT_BOOL, &one);
    return rc || c->n->n_outputs < 2 ? rc : like_input(c, 1, 1);
}

/* (dY, X, W) -> (dX like X, dW like W, dB of W's type, shape [M]). */
/* ConvGrad without W (the CPU plan's fused weight gradient, runtime/fuse_wgrad.c): dW is
 * (dY's channels, X's / group, kernel_shape...) of X's type, or float32 where the fusion
 * says so. */
static AmpCode weight_grad_alone(AmpInferCtx *c) {
    AmpInfShape dy, x, w;
    int64_t k[AMP_INF_MAX_RANK];
    int ns = amp_inf_attr_ints(c->n, "kernel_shape", k, AMP_INF_MAX_RANK - 2);
    int64_t group = amp_node_attr_int(c->n, "group", 1);
    if (ns < 1 || group < 1 || !amp_inf_shape(c, 0, &dy) || !amp_inf_shape(c, 1, &x) || dy.rank != ns + 2 ||
        x.rank != ns + 2)
        return AMP_OK;
    w.rank = ns + 2;
    w.d[0] = dy.d[1];
    w.d[1] = amp_dim_known(x.d[1]) ? amp_dim_of(x.d[1].value / group) : amp_dim_unknown();
    for (int i = 0; i < ns; i++) w.d[2 + i] = amp_dim_of(k[i]);
    return amp_inf_set(c, 1, amp_node_attr_int(c->n, AMP_CONV_GRAD_DW_F32, 0) ? AMP_DT_FLOAT : amp_inf_dtype(c, 1), &w);
}

AmpCode amp_infer_ms_conv_grad(AmpInferCtx *c) {
    const AmpNode *n = c->n;
    AmpCode rc = like_input(c, 0, 1);
    if (!rc) rc = like_input(c, 1, 2);
    if (!rc && !amp_inf_has_input(n, 2) && n->n_outputs > 1) rc = weight_grad_alone(c);
    if (rc || n->n_outputs < 3) return rc;
    AmpInfShape w, b;
    b.rank = 1;
    b.d[0] = amp_inf_shape(c, 2, &w) && w.rank >= 1 ? w.d[0] : amp_dim_unknown();
    return amp_inf_set(c, 2, amp_inf_dtype(c, 2), &b);
}

/* ---- the executor's fused nodes (runtime/fuse.c; kernels/cpu/fused.c) ---------------- */

/* ai.ampc FusedElementwise (ir/fused.h): each output of tensor set t has the shape of
 * set t's input `shape_input` and its own dtype from `out_dtypes`. */
AmpCode amp_infer_fused_elementwise(AmpInferCtx *c) {
    const AmpNode *n = c->n;
    int64_t from = amp_node_attr_int(n, "shape_input", -1), sets = amp_node_attr_int(n, "tensors", 1);
    const AmpAttr *dts = amp_node_attr(n, "out_dtypes");
    if (sets < 1 || n->n_inputs % sets || n->n_outputs % sets || !dts || dts->type != AMP_ATTR_INTS ||
        dts->n_ints != (size_t)(n->n_outputs / sets) || from < 0 || from >= n->n_inputs / sets)
        return amp_inf_fail(n, c->st, "needs shape_input (an input), out_dtypes (one per output) and tensors "
                                      "dividing its inputs and outputs");
    int n_in = (int)(n->n_inputs / sets), n_out = (int)(n->n_outputs / sets);
    for (int t = 0; t < sets; t++) {
        AmpInfShape s;
        if (!amp_inf_shape(c, t * n_in + (int)from, &s)) continue;
        for (int o = 0; o < n_out; o++) {
            AmpCode rc = amp_inf_set(c, t * n_out + o, (int)dts->ints[o], &s);
            if (rc) return rc;
        }
    }
    return AMP_OK;
}

/* ai.ampc UnscaleCheck: (inv_scale, found_before?, X[N]) -> (G[N] float32 shaped as X,
 * found bool scalar). */
AmpCode amp_infer_unscale_check(AmpInferCtx *c) {
    const AmpNode *n = c->n;
    int N = n->n_inputs - 2;
    if (N < 1 || n->n_outputs != N + 1)
        return amp_inf_fail(n, c->st, "expects (inv_scale, found, X[N]) -> (G[N], found), has %d inputs and %d outputs",
                            n->n_inputs, n->n_outputs);
    for (int j = 0; j < N; j++) {
        AmpInfShape s;
        if (!amp_inf_shape(c, 2 + j, &s)) continue;
        AmpCode rc = amp_inf_set(c, j, AMP_DT_FLOAT, &s);
        if (rc) return rc;
    }
    AmpInfShape scalar = {.rank = 0};
    return amp_inf_set(c, N, AMP_DT_BOOL, &scalar);
}

/* ai.ampc AllReduceMean: X[N] -> Y[N], each Y[j] typed and shaped as X[j]. */
AmpCode amp_infer_allreduce_mean(AmpInferCtx *c) {
    const AmpNode *n = c->n;
    if (n->n_outputs != n->n_inputs)
        return amp_inf_fail(n, c->st, "expects as many outputs as inputs, has %d inputs and %d outputs", n->n_inputs,
                            n->n_outputs);
    for (int j = 0; j < n->n_inputs; j++) {
        AmpInfShape s;
        if (!amp_inf_shape(c, j, &s)) continue;
        AmpCode rc = amp_inf_set(c, j, amp_inf_dtype(c, j), &s);
        if (rc) return rc;
    }
    return AMP_OK;
}
