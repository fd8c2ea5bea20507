/* Type inference for the neural-network ops: matrix products (MatMul, Gemm, Einsum),
 * convolutions and pools, normalisations, reductions and arg/top-k, losses, the
 * recurrent cells and ai.onnx Attention. */
#include <string.h>

#include "ir/infer_impl.h"

static int dt0(AmpInferCtx *c) {
    return amp_inf_dtype(c, 0);
}

/* ---- matrix products ------------------------------------------------------------------ */

/* numpy matmul of shapes a and b (1-D operands promoted and the added dim dropped);
 * transposes the last two dims of each first when asked. */
static AmpCode matmul_shape(const AmpNode *n, const AmpInfShape *a0, const AmpInfShape *b0, bool ta,
                            bool tb, AmpInfShape *out, AmpStatus *st) {
    out->rank = -1;
    if (a0->rank < 0 || b0->rank < 0) return AMP_OK;
    if (a0->rank == 0 || b0->rank == 0) return amp_inf_fail(n, st, "operands must not be scalars");
    AmpInfShape a, b;
    amp_inf_copy(&a, a0);
    amp_inf_copy(&b, b0);
    bool a1 = a.rank == 1, b1 = b.rank == 1;
    if (a1) { /* (K) -> (1, K) */
        a.rank = 2;
        a.d[1] = a.d[0];
        a.d[0] = amp_dim_of(1);
    } else if (ta) {
        AmpDim t = a.d[a.rank - 1];
        a.d[a.rank - 1] = a.d[a.rank - 2];
        a.d[a.rank - 2] = t;
    }
    if (b1) { /* (K) -> (K, 1) */
        b.rank = 2;
        b.d[1] = amp_dim_of(1);
    } else if (tb) {
        AmpDim t = b.d[b.rank - 1];
        b.d[b.rank - 1] = b.d[b.rank - 2];
        b.d[b.rank - 2] = t;
    }
    AmpDim k1 = a.d[a.rank - 1], k2 = b.d[b.rank - 2];
    if (amp_dim_known(k1) && amp_dim_known(k2) && k1.value != k2.value)
        return amp_inf_fail(n, st, "inner dimensions differ: %lld and %lld", (long long)k1.value,
                            (long long)k2.value);
    AmpInfShape ba, bb; /* batch dims */
    amp_inf_copy(&ba, &a);
    amp_inf_copy(&bb, &b);
    ba.rank -= 2;
    bb.rank -= 2;
    AmpCode rc = amp_inf_broadcast_into(n, &ba, &bb, st);
    if (rc) return rc;
    amp_inf_copy(out, &ba);
    if (!a1) out->d[out->rank++] = a.d[a.rank - 2];
    if (!b1) out->d[out->rank++] = b.d[b.rank - 1];
    return AMP_OK;
}

AmpCode amp_infer_matmul(AmpInferCtx *c) {
    const AmpNode *n = c->n;
    AmpStatus *st = c->st;
    AmpInfShape a, b, s;
    amp_inf_shape(c, 0, &a);
    amp_inf_shape(c, 1, &b);
    AmpCode rc = matmul_shape(n, &a, &b, false, false, &s, st);
    return rc ? rc : amp_inf_set(c, 0, dt0(c), &s);
}

/* com.microsoft FusedMatMul: MatMul with optional transposes of the last two dims;
 * the batch transposes (transBatchA/B) are left with an unknown shape. */
AmpCode amp_infer_ms_fused_matmul(AmpInferCtx *c) {
    const AmpNode *n = c->n;
    AmpStatus *st = c->st;
    AmpInfShape a, b, s;
    s.rank = -1;
    if (!amp_node_attr_int(n, "transBatchA", 0) && !amp_node_attr_int(n, "transBatchB", 0)) {
        amp_inf_shape(c, 0, &a);
        amp_inf_shape(c, 1, &b);
        AmpCode rc = matmul_shape(n, &a, &b, amp_node_attr_int(n, "transA", 0) != 0,
                                  amp_node_attr_int(n, "transB", 0) != 0, &s, st);
        if (rc) return rc;
    }
    return amp_inf_set(c, 0, dt0(c), &s);
}

/* Gemm (and com.microsoft FusedGemm): (M, K) x (K, N) -> (M, N), transA/transB. */
AmpCode amp_infer_gemm(AmpInferCtx *c) {
    const AmpNode *n = c->n;
    AmpStatus *st = c->st;
    AmpInfShape a, b, s;
    s.rank = -1;
    if (amp_inf_shape(c, 0, &a) && amp_inf_shape(c, 1, &b)) {
        if (a.rank != 2 || b.rank != 2)
            return amp_inf_fail(n, st, "A and B must be 2-D, not rank %d and %d", a.rank, b.rank);
        bool ta = amp_node_attr_int(n, "transA", 0) != 0, tb = amp_node_attr_int(n, "transB", 0) != 0;
        AmpDim k1 = a.d[ta ? 0 : 1], k2 = b.d[tb ? 1 : 0];
        if (amp_dim_known(k1) && amp_dim_known(k2) && k1.value != k2.value)
            return amp_inf_fail(n, st, "inner dimensions differ: %lld and %lld",
                                (long long)k1.value, (long long)k2.value);
        s.rank = 2;
        s.d[0] = a.d[ta ? 1 : 0];
        s.d[1] = b.d[tb ? 0 : 1];
    }
    return amp_inf_set(c, 0, dt0(c), &s);
}

/* Einsum: dims by letter from the inputs; "..." broadcasts; implicit output = the
 * letters used once, in alphabetical order, after the ellipsis dims. */
AmpCode amp_infer_einsum(AmpInferCtx *c) {
    const AmpNode *n = c->n;
    AmpStatus *st = c->st;
    const char *eq = amp_node_attr_string(n, "equation", NULL);
    AmpInfShape s, ell;
    s.rank = -1;
    ell.rank = 0;
    AmpDim letter[52];
    int count[52] = {0};
    bool seen_ell = false;
    for (int i = 0; i < 52; i++) letter[i] = amp_dim_unknown();
    if (!eq) return amp_inf_set(c, 0, dt0(c), NULL);
    const char *p = eq;
    for (int in = 0; in < n->n_inputs; in++) {
        AmpInfShape x;
        bool have = amp_inf_shape(c, in, &x);
        if (!have) return amp_inf_set(c, 0, dt0(c), NULL);
        /* Count the term's letters to place the ellipsis. */
        const char *end = p;
        int nlet = 0;
        while (*end && *end != ',' && *end != '-') {
            if ((*end >= 'a' && *end <= 'z') || (*end >= 'A' && *end <= 'Z')) nlet++;
            end++;
        }
        int dim = 0;
        bool term_ell = false; /* one ellipsis a term: it stands for the dims no letter takes */
        for (const char *ch = p; ch < end; ch++) {
            if (*ch == '.') {
                if (ch + 2 >= end || ch[1] != '.' || ch[2] != '.' || term_ell) return amp_inf_fail(n, st, "bad equation");
                term_ell = true;
                AmpInfShape e;
                e.rank = x.rank - nlet;
                if (e.rank < 0) return amp_inf_fail(n, st, "equation does not fit input %d", in);
                for (int k = 0; k < e.rank; k++) e.d[k] = x.d[dim + k];
                if (!seen_ell) {
                    ell = e;
                    seen_ell = true;
                }
                AmpCode rc = amp_inf_broadcast_into(n, &ell, &e, st);
                if (rc) return rc;
                dim += e.rank;
                ch += 2;
                continue;
            }
            int li = (*ch >= 'a' && *ch <= 'z') ? *ch - 'a' : (*ch >= 'A' && *ch <= 'Z') ? 26 + *ch - 'A' : -1;
            if (li < 0) continue; /* spaces */
            if (dim >= x.rank) return amp_inf_fail(n, st, "equation does not fit input %d", in);
            letter[li] = amp_dim_merge(letter[li], x.d[dim++]);
            count[li]++;
        }
        p = end;
        if (*p == ',') p++;
    }
    s.rank = 0;
    const char *arrow = strstr(eq, "->");
    if (arrow) {
        for (const char *ch = arrow + 2; *ch && s.rank < AMP_INF_MAX_RANK; ch++) {
            if (*ch == '.') {
                if (ch[1] != '.' || ch[2] != '.') return amp_inf_fail(n, st, "bad equation");
                for (int k = 0; k < ell.rank && s.rank < AMP_INF_MAX_RANK; k++) s.d[s.rank++] = ell.d[k];
                ch += 2;
                continue;
            }
            int li = (*ch >= 'a' && *ch <= 'z') ? *ch - 'a' : (*ch >= 'A' && *ch <= 'Z') ? 26 + *ch - 'A' : -1;
            if (li >= 0) s.d[s.rank++] = letter[li];
        }
    } else {
        for (int k = 0; k < ell.rank; k++) s.d[s.rank++] = ell.d[k];
        /* alphabetical: upper case sorts before lower case in ASCII */
        for (int li = 26; li < 52; li++)
            if (count[li] == 1 && s.rank < AMP_INF_MAX_RANK) s.d[s.rank++] = letter[li];
        for (int li = 0; li < 26; li++)
            if (count[li] == 1 && s.rank < AMP_INF_MAX_RANK) s.d[s.rank++] = letter[li];
    }
    return amp_inf_set(c, 0, dt0(c), &s);
}

/* ---- convolutions and pools ------------------------------------------------------------ */

typedef struct ConvAttrs {
    int nsp; /* spatial dims */
    int64_t k[AMP_INF_MAX_RANK], s[AMP_INF_MAX_RANK], d[AMP_INF_MAX_RANK];
    int64_t pads[2 * AMP_INF_MAX_RANK];
    bool have_k;
    const char *auto_pad;
} ConvAttrs;

/* Reads kernel_shape/strides/dilations/pads for nsp spatial dims; kernel falls back to
 * the weight's dims 2.. when `w` is given. */
static AmpCode conv_attrs(const AmpNode *n, int nsp, const AmpInfShape *w, ConvAttrs *c, AmpStatus *st) {
    c->nsp = nsp;
    c->auto_pad = amp_node_attr_string(n, "auto_pad", "NOTSET");
    int kk = amp_inf_attr_ints(n, "kernel_shape", c->k, AMP_INF_MAX_RANK);
    c->have_k = kk == nsp;
    if (kk < 0 && w && w->rank == nsp + 2) {
        c->have_k = true;
        for (int i = 0; i < nsp; i++) {
            if (!amp_dim_known(w->d[i + 2])) c->have_k = false;
            c->k[i] = w->d[i + 2].value;
        }
    } else if (kk >= 0 && kk != nsp) {
        return amp_inf_fail(n, st, "kernel_shape has %d entries for %d spatial dims", kk, nsp);
    }
    if (amp_inf_attr_ints(n, "strides", c->s, AMP_INF_MAX_RANK) != nsp)
        for (int i = 0; i < nsp; i++) c->s[i] = 1;
    if (amp_inf_attr_ints(n, "dilations", c->d, AMP_INF_MAX_RANK) != nsp)
        for (int i = 0; i < nsp; i++) c->d[i] = 1;
    if (amp_inf_attr_ints(n, "pads", c->pads, 2 * AMP_INF_MAX_RANK) != 2 * nsp)
        for (int i = 0; i < 2 * nsp; i++) c->pads[i] = 0;
    for (int i = 0; i < nsp; i++)
        if (c->s[i] <= 0 || c->d[i] <= 0 || (c->have_k && c->k[i] <= 0) || c->s[i] > (1 << 30) ||
            c->d[i] > (1 << 30) || (c->have_k && c->k[i] > (1 << 30)))
            return amp_inf_fail(n, st, "strides, dilations and kernel_shape must be in [1, 2^30]");
    for (int i = 0; i < 2 * nsp; i++)
        if (!amp_inf_small(c->pads[i])) return amp_inf_fail(n, st, "pads out of range");
    return AMP_OK;
}

/* Output length of one spatial dim of a convolution or pool. */
static AmpDim conv_out(const ConvAttrs *c, int i, AmpDim in, bool ceil_mode) {
    if (!amp_dim_known(in) || !amp_inf_small(in.value)) return amp_dim_unknown();
    int64_t x = in.value, s = c->s[i];
    if (strcmp(c->auto_pad, "SAME_UPPER") == 0 || strcmp(c->auto_pad, "SAME_LOWER") == 0)
        return amp_dim_of((x + s - 1) / s);
    if (!c->have_k) return amp_dim_unknown();
    int64_t dk = (c->k[i] - 1) * c->d[i] + 1;
    int64_t pb = 0, pe = 0;
    if (strcmp(c->auto_pad, "VALID") != 0) {
        pb = c->pads[i];
        pe = c->pads[i + c->nsp];
    }
    int64_t span = x + pb + pe - dk;
    if (span < 0) return amp_dim_unknown();
    int64_t o = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
    /* With ceil_mode a last window that would start in the end padding is dropped. */
    if (ceil_mode && (o - 1) * s >= x + pb) o--;
    return amp_dim_of(o);
}

AmpCode amp_infer_conv(AmpInferCtx *c) {
    const AmpNode *n = c->n;
    AmpStatus *st = c->st;
    AmpInfShape x, w, s;
    s.rank = -1;
    bool hw = amp_inf_shape(c, 1, &w);
    if (amp_inf_shape(c, 0, &x) && x.rank >= 2) {
        ConvAttrs ca;
        AmpCode rc = conv_attrs(n, x.rank - 2, hw ? &w : NULL, &ca, st);
        if (rc) return rc;
        s.rank = x.rank;
        s.d[0] = x.d[0];
        s.d[1] = hw && w.rank >= 1 ? w.d[0] : amp_dim_unknown();
        for (int i = 0; i < ca.nsp; i++) s.d[i + 2] = conv_out(&ca, i, x.d[i + 2], false);
    }
    return amp_inf_set(c, 0, dt0(c), &s);
}

AmpCode amp_infer_conv_transpose(AmpInferCtx *c) {
    const AmpNode *n = c->n;
    AmpStatus *st = c->st;
    AmpInfShape x, w, s;
    s.rank = -1;
    bool hw = amp_inf_shape(c, 1, &w);
    if (amp_inf_shape(c, 0, &x) && x.rank >= 2) {
        ConvAttrs ca;
        AmpCode rc = conv_attrs(n, x.rank - 2, hw ? &w : NULL, &ca, st);
        if (rc) return rc;
        int64_t group = amp_node_attr_int(n, "group", 1);
        int64_t op[AMP_INF_MAX_RANK], oshape[AMP_INF_MAX_RANK];
        if (amp_inf_attr_ints(n, "output_padding", op, AMP_INF_MAX_RANK) != ca.nsp)
            for (int i = 0; i < ca.nsp; i++) op[i] = 0;
        int ko = amp_inf_attr_ints(n, "output_shape", oshape, AMP_INF_MAX_RANK);
        s.rank = x.rank;
        s.d[0] = x.d[0];
        s.d[1] = hw && w.rank >= 2 ? amp_dim_mul(w.d[1], amp_dim_of(group)) : amp_dim_unknown();
        bool same = strncmp(ca.auto_pad, "SAME", 4) == 0;
        for (int i = 0; i < ca.nsp; i++) {
            AmpDim in = x.d[i + 2];
            if (ko == ca.nsp) {
                s.d[i + 2] = amp_dim_of(oshape[i]);
            } else if (ko == ca.nsp + 2) { /* some exporters give N and C too */
                s.d[i + 2] = amp_dim_of(oshape[i + 2]);
            } else if (!amp_dim_known(in) || !amp_inf_small(in.value) || !amp_inf_small(op[i]) ||
                       (!same && !ca.have_k)) {
                s.d[i + 2] = amp_dim_unknown();
            } else if (same) {
                s.d[i + 2] = amp_dim_mul(in, amp_dim_of(ca.s[i]));
            } else {
                int64_t pb = 0, pe = 0;
                if (strcmp(ca.auto_pad, "VALID") != 0) {
                    pb = ca.pads[i];
                    pe = ca.pads[i + ca.nsp];
                }
                /* in < 2^40 and s <= 2^30 can still overflow int64: check in double */
                double dv = (double)ca.s[i] * (double)(in.value - 1) + (double)op[i] +
                            (double)((ca.k[i] - 1) * ca.d[i] + 1) - (double)pb - (double)pe;
                s.d[i + 2] = dv >= 0 && dv < 9.0e15 ? amp_dim_of((int64_t)dv) : amp_dim_unknown();
            }
        }
    }
    return amp_inf_set(c, 0, dt0(c), &s);
}

/* MaxPool (and its int64 Indices output) and AveragePool. */
AmpCode amp_infer_pool(AmpInferCtx *c) {
    const AmpNode *n = c->n;
    AmpStatus *st = c->st;
    AmpInfShape x, s;
    s.rank = -1;
    if (amp_inf_shape(c, 0, &x) && x.rank >= 2) {
        ConvAttrs ca;
        AmpCode rc = conv_attrs(n, x.rank - 2, NULL, &ca, st);
        if (rc) return rc;
        bool ceil_mode = amp_node_attr_int(n, "ceil_mode", 0) != 0;
        s = x;
        for (int i = 0; i < ca.nsp; i++) s.d[i + 2] = conv_out(&ca, i, x.d[i + 2], ceil_mode);
    }
    AmpCode rc = amp_inf_set(c, 0, dt0(c), &s);
    if (rc || n->n_outputs < 2) return rc;
    return amp_inf_set(c, 1, AMP_DT_INT64, &s);
}

AmpCode amp_infer_global_pool(AmpInferCtx *c) {
    AmpInfShape s;
    if (amp_inf_shape(c, 0, &s))
        for (int i = 2; i < s.rank; i++) s.d[i] = amp_dim_of(1);
    return amp_inf_set(c, 0, dt0(c), &s);
}

/* ---- normalisations -------------------------------------------------------------------- */

/* Y like X; outputs 1.. (running or saved mean/var) are [C] of the statistics' type. */
AmpCode amp_infer_batchnorm(AmpInferCtx *c) {
    const AmpNode *n = c->n;
    AmpCode rc = amp_infer_same(c);
    if (rc) return rc;
    /* One type per constraint: scale and bias (T1), mean and var (T2, the running
     * outputs' type), and before opset 15 all five are X's (T). The kernel reads the
     * statistics in var's type, the outputs are typed by mean's: fuzz_run found a model
     * where they differed. */
    static const int pairs[][2] = {{1, 2}, {3, 4}, {0, 1}, {0, 3}};
    int n_pairs = c->opset > 0 && c->opset < 15 ? 4 : 2;
    for (int k = 0; k < n_pairs; k++) {
        int i = pairs[k][0], j = pairs[k][1];
        int di = amp_inf_dtype(c, i), dj = amp_inf_dtype(c, j);
        if (di != AMP_DT_UNDEFINED && dj != AMP_DT_UNDEFINED && di != dj)
            return amp_inf_fail(n, c->st, "input %d '%s' is %s but input %d '%s' is %s: %s%s takes one type for both",
                                j, n->inputs[j]->name, amp_dtype_name(dj), i, n->inputs[i]->name, amp_dtype_name(di),
                                n->op_type, k >= 2 ? " before opset 15" : "");
    }
    AmpInfShape x, ch;
    ch.rank = 1;
    ch.d[0] = amp_inf_shape(c, 0, &x) && x.rank >= 2 ? x.d[1] : amp_dim_unknown();
    int dt = amp_inf_dtype(c, 3);
    if (dt == AMP_DT_UNDEFINED) dt = dt0(c);
    for (int i = 1; i < n->n_outputs; i++)
        if ((rc = amp_inf_set(c, i, dt, &ch))) return rc;
    return AMP_OK;
}

/* Y like X; Mean and InvStdDev have X's dims up to `axis` then 1s, type stash_type. */
AmpCode amp_infer_layernorm(AmpInferCtx *c) {
    const AmpNode *n = c->n;
    AmpStatus *st = c->st;
    AmpCode rc = amp_infer_same(c);
    if (rc || n->n_outputs < 2) return rc;
    AmpInfShape s;
    if (amp_inf_shape(c, 0, &s)) {
        int ax = amp_inf_axis(amp_node_attr_int(n, "axis", -1), s.rank);
        if (ax < 0) return amp_inf_fail(n, st, "axis out of range for rank %d", s.rank);
        for (int i = ax; i < s.rank; i++) s.d[i] = amp_dim_of(1);
    }
    int64_t stash = amp_node_attr_int(n, "stash_type", AMP_DT_FLOAT);
    int dt = stash > 0 && stash < AMP_DT__COUNT ? (int)stash : AMP_DT_UNDEFINED;
    for (int i = 1; i < n->n_outputs && i < 3; i++)
        if ((rc = amp_inf_set(c, i, dt, &s))) return rc;
    return AMP_OK;
}

/* ---- reductions -------------------------------------------------------------------------- */

/* Shared by Reduce*, ArgMax/ArgMin: `axes` (k >= 0 entries; -2 none given; -1 given
 * but unknown) reduced away or kept as 1s. */
static AmpCode reduce_shape(const AmpNode *n, const AmpInfShape *in, const int64_t *axes, int k,
                            bool keepdims, bool noop_empty, AmpInfShape *s, AmpStatus *st) {
    s->rank = -1;
    if (in->rank < 0) return AMP_OK;
    if (k == -1) { /* axes unknown: with keepdims the rank is still known */
        if (keepdims) amp_shape_unknown_dims(s, in->rank);
        return AMP_OK;
    }
    if (k <= 0 && noop_empty) {
        *s = *in;
        return AMP_OK;
    }
    bool red[AMP_INF_MAX_RANK];
    for (int i = 0; i < in->rank; i++) red[i] = k <= 0;
    for (int i = 0; i < k; i++) {
        int a = amp_inf_axis(axes[i], in->rank);
        if (a < 0) return amp_inf_fail(n, st, "axis %lld out of range for rank %d", (long long)axes[i], in->rank);
        red[a] = true;
    }
    s->rank = 0;
    for (int i = 0; i < in->rank; i++) {
        if (!red[i]) s->d[s->rank++] = in->d[i];
        else if (keepdims) s->d[s->rank++] = amp_dim_of(1);
    }
    return AMP_OK;
}

/* axes: an attribute until ReduceSum-13 / the other Reduce*-18, then an input. */
AmpCode amp_infer_reduce(AmpInferCtx *c) {
    const AmpNode *n = c->n;
    int64_t opset = c->opset;
    AmpStatus *st = c->st;
    AmpInfShape in, s;
    int64_t axes[AMP_INF_MAX_RANK];
    int64_t since = n->op == AMP_OP_ReduceSum ? 13 : 18;
    int k;
    if (amp_inf_from_input(n, opset, since, 1))
        k = amp_inf_has_input(n, 1) ? amp_inf_const_ints(c, n->inputs[1], axes, AMP_INF_MAX_RANK) : -2;
    else
        k = amp_node_attr(n, "axes") ? amp_inf_attr_ints(n, "axes", axes, AMP_INF_MAX_RANK) : -2;
    amp_inf_shape(c, 0, &in);
    AmpCode rc = reduce_shape(n, &in, axes, k, amp_node_attr_int(n, "keepdims", 1) != 0,
                              amp_node_attr_int(n, "noop_with_empty_axes", 0) != 0, &s, st);
    return rc ? rc : amp_inf_set(c, 0, dt0(c), &s);
}

AmpCode amp_infer_argminmax(AmpInferCtx *c) {
    const AmpNode *n = c->n;
    AmpStatus *st = c->st;
    AmpInfShape in, s;
    int64_t axis = amp_node_attr_int(n, "axis", 0);
    amp_inf_shape(c, 0, &in);
    AmpCode rc = reduce_shape(n, &in, &axis, 1, amp_node_attr_int(n, "keepdims", 1) != 0, false, &s, st);
    return rc ? rc : amp_inf_set(c, 0, AMP_DT_INT64, &s);
}

/* TopK: values like X with dim `axis` = K; indices int64 of the same shape. K is an
 * attribute before opset 10, an input since. */
AmpCode amp_infer_topk(AmpInferCtx *c) {
    const AmpNode *n = c->n;
    int64_t opset = c->opset;
    AmpStatus *st = c->st;
    AmpInfShape s;
    if (amp_inf_shape(c, 0, &s)) {
        int ax = amp_inf_axis(amp_node_attr_int(n, "axis", -1), s.rank);
        if (ax < 0) return amp_inf_fail(n, st, "axis out of range for rank %d", s.rank);
        int64_t k = -1;
        if (amp_inf_from_input(n, opset, 10, 1)) {
            if (!amp_inf_has_input(n, 1) || amp_inf_const_ints(c, n->inputs[1], &k, 1) != 1) k = -1;
        } else {
            k = amp_node_attr_int(n, "k", -1);
        }
        s.d[ax] = k >= 0 ? amp_dim_of(k) : amp_dim_unknown();
    }
    AmpCode rc = amp_inf_set(c, 0, dt0(c), &s);
    return rc ? rc : amp_inf_set(c, 1, AMP_DT_INT64, &s);
}

/* ---- losses ------------------------------------------------------------------------------ */

static bool reduction_none(const AmpNode *n) {
    return strcmp(amp_node_attr_string(n, "reduction", "mean"), "none") == 0;
}

/* SoftmaxCrossEntropyLoss: loss scalar (or the labels' shape with reduction none);
 * log_prob like the scores. */
AmpCode amp_infer_sce_loss(AmpInferCtx *c) {
    const AmpNode *n = c->n;
    AmpInfShape s;
    s.rank = 0;
    if (reduction_none(n)) amp_inf_shape(c, 1, &s);
    AmpCode rc = amp_inf_set(c, 0, dt0(c), &s);
    if (rc || n->n_outputs < 2) return rc;
    amp_inf_shape(c, 0, &s);
    return amp_inf_set(c, 1, dt0(c), &s);
}

AmpCode amp_infer_nll_loss(AmpInferCtx *c) {
    const AmpNode *n = c->n;
    AmpInfShape s;
    s.rank = 0;
    if (reduction_none(n)) amp_inf_shape(c, 1, &s);
    return amp_inf_set(c, 0, dt0(c), &s);
}

/* ---- recurrent cells and attention ------------------------------------------------------ */

/* LSTM/GRU/RNN. layout 0: X (seq, batch, in), Y (seq, dirs, batch, hidden),
 * Y_h/Y_c (dirs, batch, hidden); layout 1 (opset 14): batch first. */
AmpCode amp_infer_rnn(AmpInferCtx *c) {
    const AmpNode *n = c->n;
    AmpInfShape x, r, y, h;
    y.rank = h.rank = -1;
    int dt = dt0(c);
    const char *dir = amp_node_attr_string(n, "direction", "forward");
    AmpDim dirs = amp_dim_of(strcmp(dir, "bidirectional") == 0 ? 2 : 1);
    AmpDim hidden = amp_dim_unknown();
    int64_t hs = amp_node_attr_int(n, "hidden_size", -1);
    if (hs > 0) hidden = amp_dim_of(hs);
    else if (amp_inf_shape(c, 2, &r) && r.rank == 3) hidden = r.d[2]; /* R: (dirs, G*h, h) */
    if (amp_inf_shape(c, 0, &x) && x.rank == 3) {
        bool bf = amp_node_attr_int(n, "layout", 0) != 0;
        AmpDim seq = x.d[bf ? 1 : 0], batch = x.d[bf ? 0 : 1];
        y.rank = 4;
        h.rank = 3;
        if (bf) {
            y.d[0] = batch, y.d[1] = seq, y.d[2] = dirs, y.d[3] = hidden;
            h.d[0] = batch, h.d[1] = dirs, h.d[2] = hidden;
        } else {
            y.d[0] = seq, y.d[1] = dirs, y.d[2] = batch, y.d[3] = hidden;
            h.d[0] = dirs, h.d[1] = batch, h.d[2] = hidden;
        }
    }
    AmpCode rc = amp_inf_set(c, 0, dt, &y);
    for (int i = 1; !rc && i < n->n_outputs; i++) rc = amp_inf_set(c, i, dt, &h);
    return rc;
}

/* The head size of a 3-D (B, L, heads * size) input: dim 2 over heads, when known. */
static AmpDim head_size(AmpDim hidden, int64_t heads) {
    return heads > 0 && amp_dim_known(hidden) && hidden.value % heads == 0 ? amp_dim_of(hidden.value / heads)
                                                                           : amp_dim_unknown();
}

/* ai.onnx Attention (opset 23). Q (B, Hq, S, D) with V (B, Hkv, L, Dv) gives
 * Y (B, Hq, S, Dv); 3-D Q (B, S, Hq*D) with V (B, L, Hkv*Dv) gives (B, S, Hq*Dv).
 * present_key is of Q's type and present_value of V's (the spec's T1 and T2). Their
 * shapes, (B, Hkv, P + L, D) and (B, Hkv, P + L, Dv) with P past_key's dim 2 (0 without
 * a cache), and qk_matmul_output's, (B, Hq, S, P + L), are given in concrete mode only,
 * where the runtime places them: graph mode leaves them unshaped as it always did, so
 * that a converted model's declared outputs keep the types they had (conversions stay
 * the same byte for byte). Q, K and V of mixed ranks leave them unknown (the kernel
 * refuses those). */
AmpCode amp_infer_attention(AmpInferCtx *c) {
    const AmpNode *n = c->n;
    AmpInfShape q, kk, v, pk, y, pres_k, pres_v, qk;
    y.rank = pres_k.rank = pres_v.rank = qk.rank = -1;
    bool hq = amp_inf_shape(c, 0, &q), hk = amp_inf_shape(c, 1, &kk), hv = amp_inf_shape(c, 2, &v);
    if (hq && hv) {
        if (q.rank == 4 && v.rank == 4) {
            y = q;
            y.d[3] = v.d[3];
        } else if (q.rank == 3 && v.rank == 3) {
            int64_t hq = amp_node_attr_int(n, "q_num_heads", 0), hkv = amp_node_attr_int(n, "kv_num_heads", 0);
            y = q;
            y.d[2] = amp_dim_unknown();
            if (hq > 0 && hkv > 0 && amp_dim_known(v.d[2]) && v.d[2].value % hkv == 0)
                y.d[2] = amp_dim_mul(amp_dim_of(hq), amp_dim_of(v.d[2].value / hkv));
        }
    }
    if (!c->graph_mode && hq && hk && hv && q.rank == kk.rank && q.rank == v.rank && (q.rank == 3 || q.rank == 4)) {
        /* Past length: 0, past_key's dim 2, or unknown. */
        AmpDim P = amp_dim_of(0);
        if (amp_inf_has_input(n, 4)) P = amp_inf_shape(c, 4, &pk) && pk.rank == 4 ? pk.d[2] : amp_dim_unknown();
        bool is3 = q.rank == 3;
        int64_t nq = amp_node_attr_int(n, "q_num_heads", 0), nkv = amp_node_attr_int(n, "kv_num_heads", 0);
        AmpDim T = amp_dim_add(P, kk.d[is3 ? 1 : 2]), Hkv = is3 ? amp_dim_of(nkv > 0 ? nkv : -1) : kk.d[1];
        pres_k.rank = pres_v.rank = qk.rank = 4;
        pres_k.d[0] = kk.d[0], pres_k.d[1] = Hkv, pres_k.d[2] = T;
        pres_k.d[3] = is3 ? head_size(kk.d[2], nkv) : kk.d[3];
        pres_v = pres_k;
        pres_v.d[0] = v.d[0];
        pres_v.d[3] = is3 ? head_size(v.d[2], nkv) : v.d[3];
        qk.d[0] = q.d[0], qk.d[1] = is3 ? amp_dim_of(nq > 0 ? nq : -1) : q.d[1];
        qk.d[2] = q.d[is3 ? 1 : 2], qk.d[3] = T;
    }
    int dt = dt0(c), dv = amp_inf_dtype(c, 2);
    AmpCode rc = amp_inf_set(c, 0, dt, &y);
    if (!rc && n->n_outputs > 1) rc = amp_inf_set(c, 1, dt, &pres_k);
    if (!rc && n->n_outputs > 2) rc = amp_inf_set(c, 2, dv != AMP_DT_UNDEFINED ? dv : dt, &pres_v);
    if (!rc && n->n_outputs > 3) rc = amp_inf_set(c, 3, dt, &qk);
    return rc;
}
