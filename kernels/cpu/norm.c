/* CPU kernels: LayerNormalization (and com.microsoft LayerNormalizationGrad),
 * BatchNormalization (inference, and training with batch statistics and running-stat
 * outputs), Instance/GroupNormalization (opset 18 per-group, 21 per-channel scale/bias)
 * LpNormalization and LRN. Statistics are two-pass in double, whatever the storage type. */
#include <math.h>

#include "ir/parallel.h"
#include "kernels/cpu/reduce_impl.h"
#include "kernels/cpu/simd.h"
#include "ops/geom.h"
#include "ops/norm_attrs.h" /* AmpNormAttrs (amp_norm_prepare) */

/* Mean and (population) variance of n elements v[base + j * stride]. */
static void moments(const AmpFv *v, uint64_t base, uint64_t n, uint64_t stride, double *mean, double *var) {
    double s = 0.0, q = 0.0;
    for (uint64_t j = 0; j < n; j++) s += amp_fv_get(v, base + j * stride);
    double m = s / (double)n;
    for (uint64_t j = 0; j < n; j++) {
        double d = amp_fv_get(v, base + j * stride) - m;
        q += d * d;
    }
    *mean = m;
    *var = q / (double)n;
}

/* Opens views of up to `n` float inputs (NULL entries stay empty); on failure closes
 * what it opened. */
static AmpCode open_all(AmpKernelCtx *k, const AmpBuf **bufs, AmpFv *views, int n) {
    for (int i = 0; i < n; i++) memset(&views[i], 0, sizeof views[i]);
    for (int i = 0; i < n; i++) {
        if (!bufs[i]) continue;
        AmpCode rc = amp_fv_open(k, bufs[i], &views[i]);
        if (rc) {
            for (int j = 0; j < i; j++) amp_fv_close(&views[j]);
            return rc;
        }
    }
    return AMP_OK;
}

static void close_all(AmpFv *views, int n) {
    for (int i = 0; i < n; i++) amp_fv_close(&views[i]);
}

/* ---- LayerNormalization ---------------------------------------------------------- */

/* Offsets into a parameter that broadcasts (numpy rules, towards X) over X of rank r
 * split at `axis`: element (row, col) reads row_off(row) + colmap[col]. */
typedef struct ParamMap {
    int64_t str[AMP_MAX_RANK]; /* the parameter's strides in X's index space, 0 where broadcast */
    int64_t *colmap;           /* (cols) */
    bool rows_vary;            /* some axis before `axis` has a non-zero stride */
} ParamMap;

static AmpCode param_map(AmpKernelCtx *k, const AmpBuf *p, const AmpBuf *x, int axis, uint64_t cols, const char *what,
                         ParamMap *m) {
    memset(m, 0, sizeof *m);
    int r = 0;
    int64_t bd[AMP_MAX_RANK];
    bool ok = p->rank <= x->rank && amp_broadcast_shape(x->rank, x->dims, p->rank, p->dims, &r, bd) && r == x->rank;
    for (int i = 0; ok && i < r; i++) ok = bd[i] == x->dims[i];
    if (!ok) return amp_kernel_fail(k, AMP_ERR_INPUT, "%s does not broadcast to X's shape", what);
    amp_broadcast_strides(p->rank, p->dims, x->rank, x->dims, m->str);
    for (int d = 0; d < axis; d++) m->rows_vary |= m->str[d] != 0;
    m->colmap = malloc((cols ? cols : 1) * sizeof *m->colmap);
    if (!m->colmap) return amp_red_oom(k);
    for (uint64_t c = 0; c < cols; c++) {
        uint64_t rem = c;
        int64_t off = 0;
        for (int d = x->rank - 1; d >= axis; d--) {
            uint64_t n = (uint64_t)x->dims[d];
            off += (int64_t)(rem % n) * m->str[d];
            rem /= n;
        }
        m->colmap[c] = off;
    }
    return AMP_OK;
}

static int64_t param_row(const ParamMap *m, const AmpBuf *x, int axis, uint64_t row) {
    if (!m->rows_vary) return 0;
    int64_t off = 0;
    for (int d = axis - 1; d >= 0; d--) {
        uint64_t n = (uint64_t)x->dims[d];
        off += (int64_t)(row % n) * m->str[d];
        row /= n;
    }
    return off;
}

/* Rows [from, to) of a LayerNormalization (amp_cpu_layernorm's views and maps). */
typedef struct LayerNormJob {
    const AmpBuf *x;
    const AmpFv *v; /* X, Scale, B */
    AmpFo *o;
    const ParamMap *ms, *mb; /* mb NULL without B */
    AmpBuf *mean, *inv, *y;
    int axis;
    uint64_t cols;
    double eps;
    bool ident;
} LayerNormJob;

static void layernorm_slice(void *ctx, int64_t from, int64_t to) {
    const LayerNormJob *j = ctx;
    const AmpFv *v = j->v;
    uint64_t cols = j->cols;
    for (uint64_t r = (uint64_t)from; r < (uint64_t)to; r++) {
        double m, var;
        moments(&v[0], r * cols, cols, 1, &m, &var);
        double is = 1.0 / sqrt(var + j->eps);
        if (j->mean) ((float *)j->mean->data)[r] = (float)m;
        if (j->inv) ((float *)j->inv->data)[r] = (float)is;
        if (!j->y) continue;
        int64_t so = param_row(j->ms, j->x, j->axis, r), bo = j->mb ? param_row(j->mb, j->x, j->axis, r) : 0;
        if (j->ident) {
            amp_simd_norm_row(j->o->f + r * cols, v[0].f + r * cols, v[1].f + so, j->mb ? v[2].f + bo : NULL, m, is,
                              cols);
            continue;
        }
        for (uint64_t c = 0; c < cols; c++) {
            uint64_t at = r * cols + c;
            double z = (amp_fv_get(&v[0], at) - m) * is * amp_fv_get(&v[1], (uint64_t)(so + j->ms->colmap[c]));
            if (j->mb) z += amp_fv_get(&v[2], (uint64_t)(bo + j->mb->colmap[c]));
            amp_fo_set(j->o, at, z);
        }
    }
}

/* Y = (X - mean) * inv_std * Scale + B over the axes from `axis` on; Mean and
 * InvStdDev (X's dims before `axis`, then 1s) in the stash type, float32. */
AmpCode amp_cpu_layernorm(AmpKernelCtx *k) {
    AmpLayerNormGeom own;
    const AmpLayerNormGeom *g; /* amp_layernorm_geom (ops/norm_attrs.h) */
    AmpCode rc = amp_kernel_geom(k, &own, (const void **)&g);
    if (rc) return rc;
    const AmpBuf *x = k->in[0], *sc = k->in[1], *bi = k->n_in > 2 ? k->in[2] : NULL;
    if (!amp_red_is_float(x->dtype)) return amp_kernel_bad_dtype(k, x->dtype);
    const AmpNormAttrs *na = k->attrs;
    int axis = g->axis;
    double eps = na->eps;
    uint64_t rows = g->rows, cols = g->cols;
    ParamMap ms = {0}, mb = {0};
    rc = param_map(k, sc, x, axis, cols, "Scale", &ms);
    if (!rc && bi) rc = param_map(k, bi, x, axis, cols, "B", &mb);
    /* Y, then Mean and InvStdDev where the node lists them */
    AmpBuf *out[3] = {NULL};
    if (!rc) rc = amp_kernel_outputs(k, 3, out);
    AmpBuf *y = out[0], *mean = out[1], *inv = out[2];
    /* No element, however many empty rows ([2^40, 0]): O(1). Mean and InvStdDev, where
     * listed, have one element per row, so their loop costs what their placement did. */
    if (!rc && !x->nelem && !mean && !inv) {
        free(ms.colmap), free(mb.colmap);
        return AMP_OK;
    }
    const AmpBuf *ins[3] = {x, sc, bi};
    AmpFv v[3];
    AmpFo o = {0};
    if (!rc && !(rc = open_all(k, ins, v, 3))) {
        if (y && (rc = amp_fo_open(k, y, &o))) close_all(v, 3);
    }
    if (rc) {
        free(ms.colmap), free(mb.colmap);
        return rc;
    }
    /* Rows in AVX-512 (simd.h: the same operations, order and bits) where every view is
     * float32 and Scale and B run along the columns as they are. */
    bool ident = v[0].f && v[1].f && (!bi || v[2].f) && o.f && amp_simd_have();
    for (uint64_t c = 0; ident && c < cols; c++) ident = ms.colmap[c] == (int64_t)c && (!bi || mb.colmap[c] == (int64_t)c);
    LayerNormJob j = {.x = x, .v = v, .o = &o, .ms = &ms, .mb = bi ? &mb : NULL, .mean = mean, .inv = inv, .y = y,
                      .axis = axis, .cols = cols, .eps = eps, .ident = ident};
    /* the rows are independent: slices of them on the CPU's threads, at least ~16K elements each */
    amp_parallel_for((int64_t)rows, cols >= (1 << 14) ? 1 : (int64_t)((1 << 14) / (cols ? cols : 1)), 1,
                     layernorm_slice, &j);
    amp_fo_commit(&o);
    close_all(v, 3);
    free(ms.colmap), free(mb.colmap);
    return AMP_OK;
}

/* com.microsoft LayerNormalizationGrad (Y_grad, X, scale, mean?, inv_std_dev?) ->
 * (X_grad, scale_grad, bias_grad), rows split at `axis` as in the forward op; scale has
 * one element per normalised column. Statistics are recomputed when not given. Per row,
 * with xh = (x - mean) * inv_std and g = dy * scale:
 *   dx = inv_std * (g - mean(g) - xh * mean(g * xh)); scale_grad += dy * xh; bias_grad += dy. */
AmpCode amp_cpu_ms_layernorm_grad(AmpKernelCtx *k) {
    AmpLayerNormGeom own;
    const AmpLayerNormGeom *g; /* amp_layernorm_grad_geom (ops/norm_attrs.h) */
    AmpCode rc = amp_kernel_geom(k, &own, (const void **)&g);
    if (rc) return rc;
    const AmpBuf *in[5];
    for (int i = 0; i < 5; i++) in[i] = i < k->n_in ? k->in[i] : NULL;
    for (int i = 0; i < 5; i++)
        if (in[i] && !amp_red_is_float(in[i]->dtype)) return amp_kernel_bad_dtype(k, in[i]->dtype);
    const AmpNormAttrs *na = k->attrs;
    uint64_t rows = g->rows, cols = g->cols;
    /* X_grad (like X), then scale_grad and bias_grad (like scale) where the node lists them */
    AmpBuf *out[3];
    if ((rc = amp_kernel_outputs(k, 3, out))) return rc;
    AmpBuf *dx = out[0], *pg[2] = {out[1], out[2]};
    AmpFv v[5];
    if ((rc = open_all(k, in, v, 5))) return rc;
    double *acc = calloc((cols ? cols : 1) * 2, sizeof *acc); /* (cols) scale_grad, then (cols) bias_grad */
    AmpFo o = {0};
    if (!acc) rc = amp_red_oom(k);
    else if (dx) rc = amp_fo_open(k, dx, &o);
    if (rc) {
        free(acc);
        close_all(v, 5);
        return rc;
    }
    double eps = na->eps;
    for (uint64_t r = 0; r < rows; r++) {
        double m, is;
        if (in[3] && in[4]) {
            m = amp_fv_get(&v[3], r), is = amp_fv_get(&v[4], r);
        } else {
            double var;
            moments(&v[1], r * cols, cols, 1, &m, &var);
            is = 1.0 / sqrt(var + eps);
        }
        double sg = 0.0, sgx = 0.0;
        for (uint64_t c = 0; c < cols; c++) {
            uint64_t at = r * cols + c;
            double dy = amp_fv_get(&v[0], at), xh = (amp_fv_get(&v[1], at) - m) * is, g = dy * amp_fv_get(&v[2], c);
            sg += g, sgx += g * xh;
            acc[c] += dy * xh, acc[cols + c] += dy;
        }
        sg /= (double)cols, sgx /= (double)cols;
        for (uint64_t c = 0; dx && c < cols; c++) {
            uint64_t at = r * cols + c;
            double xh = (amp_fv_get(&v[1], at) - m) * is, g = amp_fv_get(&v[0], at) * amp_fv_get(&v[2], c);
            amp_fo_set(&o, at, is * (g - sg - xh * sgx));
        }
    }
    amp_fo_commit(&o);
    for (int j = 0; j < 2 && !rc; j++) {
        if (!pg[j]) continue;
        AmpFo op;
        if ((rc = amp_fo_open(k, pg[j], &op))) break;
        for (uint64_t c = 0; c < cols; c++) amp_fo_set(&op, c, acc[j * cols + c]);
        amp_fo_commit(&op);
    }
    free(acc);
    close_all(v, 5);
    return rc;
}

/* ---- per-channel parameters: Batch/Instance/Group normalisation ---------------- */

/* Copies a C-vector view into an output of that length (checked). */
static AmpCode store_vec(AmpKernelCtx *k, AmpBuf *b, uint64_t c, const double *vals) {
    AmpFo o;
    AmpCode rc = amp_fo_open(k, b, &o);
    if (rc) return rc;
    for (uint64_t i = 0; i < c; i++) amp_fo_set(&o, i, vals[i]);
    amp_fo_commit(&o);
    return AMP_OK;
}

/* (X, scale, B, mean, var): Y = scale * (X - mean) / sqrt(var + eps) + B per channel. In
 * training mode mean/var are the batch's (population variance) and the outputs are
 * running_mean = mean * momentum + batch_mean * (1 - momentum), likewise running_var,
 * then (before opset 14) saved_mean and saved_var, the batch statistics. */
/* Channels [from, to) of a BatchNormalization (amp_cpu_batchnorm's views; st holds per
 * channel the batch mean, variance, and the running values, C each). */
typedef struct BatchNormJob {
    const AmpFv *v; /* X, scale, B, input_mean, input_var */
    AmpFo *o;       /* Y, or NULL */
    double *st;
    uint64_t N, C, S, Nx;
    double eps, mom;
    bool train;
} BatchNormJob;

static void batchnorm_slice(void *ctx, int64_t from, int64_t to) {
    const BatchNormJob *j = ctx;
    const AmpFv *v = j->v;
    uint64_t N = j->N, C = j->C, S = j->S, Nx = j->Nx;
    double *bm = j->st, *bv = j->st + C, *rm = j->st + 2 * C, *rv = j->st + 3 * C, mom = j->mom;
    for (uint64_t c = (uint64_t)from; c < (uint64_t)to; c++) {
        if (j->train) {
            double s = 0.0, q = 0.0;
            for (uint64_t n = 0; n < Nx; n++)
                for (uint64_t i = 0; i < S; i++) s += amp_fv_get(&v[0], (n * C + c) * S + i);
            double m = s / (double)(N * S);
            for (uint64_t n = 0; n < Nx; n++)
                for (uint64_t i = 0; i < S; i++) {
                    double d = amp_fv_get(&v[0], (n * C + c) * S + i) - m;
                    q += d * d;
                }
            bm[c] = m, bv[c] = q / (double)(N * S);
            rm[c] = amp_fv_get(&v[3], c) * mom + m * (1.0 - mom);
            rv[c] = amp_fv_get(&v[4], c) * mom + bv[c] * (1.0 - mom);
        } else {
            bm[c] = rm[c] = amp_fv_get(&v[3], c);
            bv[c] = rv[c] = amp_fv_get(&v[4], c);
        }
        double a = amp_fv_get(&v[1], c) / sqrt(bv[c] + j->eps), b = amp_fv_get(&v[2], c) - bm[c] * a;
        for (uint64_t n = 0; j->o && n < Nx; n++)
            for (uint64_t i = 0; i < S; i++) {
                uint64_t at = (n * C + c) * S + i;
                amp_fo_set(j->o, at, amp_fv_get(&v[0], at) * a + b);
            }
    }
}

AmpCode amp_cpu_batchnorm(AmpKernelCtx *k) {
    AmpBatchNormGeom own;
    const AmpBatchNormGeom *g; /* amp_batchnorm_geom (ops/norm_attrs.h): X (N, C, S), the parameters 1-D of C */
    AmpCode rc = amp_kernel_geom(k, &own, (const void **)&g);
    if (rc) return rc;
    const AmpBuf *in[5];
    for (int i = 0; i < 5; i++) in[i] = k->in[i];
    for (int i = 0; i < 5; i++)
        if (!amp_red_is_float(in[i]->dtype)) return amp_kernel_bad_dtype(k, in[i]->dtype);
    uint64_t N = g->n, C = g->c, S = g->s;
    const AmpNormAttrs *na = k->attrs;
    double eps = na->eps, mom = na->momentum;
    /* Batch statistics: from opset 14 as training_mode says (an eval-mode node in a
     * training graph, `ampc grad` without --train-mode, keeps its running statistics);
     * before, in a training step or where the node lists the running-stat outputs. */
    bool train = amp_batchnorm_trains(na, k->training);
    const AmpBuf *x = in[0];
    AmpBuf *out[5];
    if ((rc = amp_kernel_outputs(k, 5, out))) return rc;
    AmpBuf *y = out[0];
    /* The batches the loops visit: none when X holds no element ([2^40, C, 0] is O(C)) */
    uint64_t Nx = x->nelem ? N : 0;
    AmpFv v[5];
    if ((rc = open_all(k, in, v, 5))) return rc;
    /* per channel: stats[0..C) mean, [C..2C) var, then the running values */
    double *st = malloc((C ? C : 1) * 4 * sizeof *st);
    AmpFo o = {0};
    if (!st) rc = amp_red_oom(k);
    else if (y) rc = amp_fo_open(k, y, &o);
    if (rc) {
        free(st);
        close_all(v, 5);
        return rc;
    }
    double *bm = st, *bv = st + C, *rm = st + 2 * C, *rv = st + 3 * C;
    BatchNormJob j = {.v = v, .o = y ? &o : NULL, .st = st, .N = N, .C = C, .S = S, .Nx = Nx, .eps = eps,
                      .mom = mom, .train = train};
    /* the channels are independent: slices of them on the CPU's threads, ~32K elements each */
    uint64_t per = Nx * S;
    amp_parallel_for((int64_t)C, per >= (1u << 15) ? 1 : (int64_t)((1u << 15) / (per ? per : 1)), 1, batchnorm_slice,
                     &j);
    amp_fo_commit(&o);
    /* outputs 1..4: running mean, running var, saved mean, saved var */
    const double *outs[4] = {rm, rv, bm, bv};
    for (int i = 1; !rc && i < 5; i++)
        if (out[i]) rc = store_vec(k, out[i], C, outs[i - 1]);
    free(st);
    close_all(v, 5);
    return rc;
}

/* InstanceNormalization (groups = C) and GroupNormalization: statistics per (n, group)
 * over (C / groups) * S contiguous elements; scale and bias per channel or per group
 * (amp_groupnorm_geom, ops/norm_attrs.h, decides which). */
static AmpCode group_norm(AmpKernelCtx *k) {
    AmpGroupNormGeom own;
    const AmpGroupNormGeom *gm; /* amp_groupnorm_geom (ops/norm_attrs.h) */
    AmpCode rc = amp_kernel_geom(k, &own, (const void **)&gm);
    if (rc) return rc;
    const AmpBuf *in[3] = {k->in[0], k->in[1], k->in[2]};
    for (int i = 0; i < 3; i++)
        if (!amp_red_is_float(in[i]->dtype)) return amp_kernel_bad_dtype(k, in[i]->dtype);
    uint64_t N = gm->n, C = gm->c, S = gm->s, groups = gm->groups;
    bool per_group = gm->per_group;
    const AmpNormAttrs *na = k->attrs;
    double eps = na->eps;
    const AmpBuf *x = in[0];
    AmpBuf *y;
    if ((rc = amp_kernel_outputs(k, 1, &y)) || !y) return rc;
    if (!x->nelem) return AMP_OK; /* no element, however many empty (n, group) rows */
    AmpFv v[3];
    AmpFo o;
    if ((rc = open_all(k, in, v, 3))) return rc;
    if ((rc = amp_fo_open(k, y, &o))) {
        close_all(v, 3);
        return rc;
    }
    uint64_t cpg = C / groups, len = cpg * S;
    for (uint64_t n = 0; n < N; n++)
        for (uint64_t g = 0; g < groups; g++) {
            uint64_t base = (n * groups + g) * len;
            double m, var;
            moments(&v[0], base, len, 1, &m, &var);
            double is = 1.0 / sqrt(var + eps);
            for (uint64_t cc = 0; cc < cpg; cc++) {
                uint64_t p = per_group ? g : g * cpg + cc;
                double a = amp_fv_get(&v[1], p) * is, b = amp_fv_get(&v[2], p);
                for (uint64_t j = 0; j < S; j++) {
                    uint64_t at = base + cc * S + j;
                    amp_fo_set(&o, at, (amp_fv_get(&v[0], at) - m) * a + b);
                }
            }
        }
    amp_fo_commit(&o);
    close_all(v, 3);
    return AMP_OK;
}

AmpCode amp_cpu_instancenorm(AmpKernelCtx *k) { return group_norm(k); }

/* num_groups is required (prepare checked); its parameters per group or per channel as
 * amp_groupnorm_geom says. */
AmpCode amp_cpu_groupnorm(AmpKernelCtx *k) { return group_norm(k); }

/* ---- LpNormalization ------------------------------------------------------------- */

/* Output 0, shaped and typed as x, and views of both: v of x, o of the output. *y is
 * NULL (and nothing opened) where the node does not list it or x has no element (there
 * is nothing to write, however many empty rows the shape has: [2^40, 0] is O(1)). */
static AmpCode open_like(AmpKernelCtx *k, const AmpBuf *x, AmpBuf **y, AmpFv *v, AmpFo *o) {
    AmpCode rc;
    if ((rc = amp_kernel_outputs(k, 1, y)) || !*y) return rc;
    if (!x->nelem) {
        *y = NULL;
        return AMP_OK;
    }
    rc = amp_fv_open(k, x, v);
    if (rc) return rc;
    if ((rc = amp_fo_open(k, *y, o))) amp_fv_close(v);
    return rc;
}

/* y = x / ||x||_p along `axis` (p = 1 or 2); a zero norm gives 0, not NaN. */
AmpCode amp_cpu_lpnorm(AmpKernelCtx *k) {
    AmpAxisGeom own;
    const AmpAxisGeom *g; /* amp_axis_norm_geom (ops/norm_attrs.h): X split at the axis */
    AmpCode rc = amp_kernel_geom(k, &own, (const void **)&g);
    if (rc) return rc;
    const AmpBuf *x = k->in[0];
    if (!amp_red_is_float(x->dtype)) return amp_kernel_bad_dtype(k, x->dtype);
    const AmpNormAttrs *na = k->attrs;
    int64_t p = na->p; /* 1 or 2: prepare checked */
    AmpBuf *y;
    AmpFv v;
    AmpFo o;
    rc = open_like(k, x, &y, &v, &o);
    if (rc || !y) return rc;
    uint64_t outer = g->outer, D = g->d, inner = g->inner;
    for (uint64_t q = 0; q < outer; q++)
        for (uint64_t i = 0; i < inner; i++) {
            uint64_t base = q * D * inner + i;
            double nrm = 0.0;
            for (uint64_t j = 0; j < D; j++) {
                double e = amp_fv_get(&v, base + j * inner);
                nrm += p == 1 ? fabs(e) : e * e;
            }
            if (p == 2) nrm = sqrt(nrm);
            for (uint64_t j = 0; j < D; j++) {
                uint64_t at = base + j * inner;
                amp_fo_set(&o, at, nrm > 0.0 ? amp_fv_get(&v, at) / nrm : 0.0);
            }
        }
    amp_fo_commit(&o);
    amp_fv_close(&v);
    return AMP_OK;
}

/* ---- LRN ------------------------------------------------------------------------ */

/* Local response normalization across channels (axis 1 of (N, C, D1, ...)):
 * y = x / (bias + alpha / size * s)^beta, s the sum of x^2 over channels
 * c - floor((size - 1) / 2) .. c + ceil((size - 1) / 2), clipped to [0, C). */
AmpCode amp_cpu_lrn(AmpKernelCtx *k) {
    AmpAxisGeom own;
    const AmpAxisGeom *g; /* amp_axis_norm_geom (ops/norm_attrs.h): X split at the channels */
    AmpCode rc = amp_kernel_geom(k, &own, (const void **)&g);
    if (rc) return rc;
    const AmpBuf *x = k->in[0];
    if (!amp_red_is_float(x->dtype)) return amp_kernel_bad_dtype(k, x->dtype);
    const AmpNormAttrs *na = k->attrs;
    int64_t size = na->size; /* > 0: prepare checked */
    double alpha = na->alpha, beta = na->beta, bias = na->bias;
    AmpBuf *y;
    AmpFv v;
    AmpFo o;
    rc = open_like(k, x, &y, &v, &o);
    if (rc || !y) return rc;
    uint64_t outer = g->outer, C = g->d, inner = g->inner;
    int64_t before = (size - 1) / 2, after = size - 1 - before; /* floor and ceil of (size - 1) / 2 */
    for (uint64_t q = 0; q < outer; q++)
        for (uint64_t i = 0; i < inner; i++) {
            uint64_t base = q * C * inner + i;
            for (int64_t c = 0; c < (int64_t)C; c++) {
                int64_t lo = c - before < 0 ? 0 : c - before, hi = c + after > (int64_t)C - 1 ? (int64_t)C - 1 : c + after;
                double sq = 0.0;
                for (int64_t j = lo; j <= hi; j++) {
                    double e = amp_fv_get(&v, base + (uint64_t)j * inner);
                    sq += e * e;
                }
                uint64_t at = base + (uint64_t)c * inner;
                amp_fo_set(&o, at, amp_fv_get(&v, at) / pow(bias + alpha / (double)size * sq, beta));
            }
        }
    amp_fo_commit(&o);
    amp_fv_close(&v);
    return AMP_OK;
}
