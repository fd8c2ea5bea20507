/* CPU kernels: the Reduce* ops, ArgMax/ArgMin, CumSum and TopK (the family also holds
 * Softmax/LogSoftmax in softmax.c and the losses in loss.c). Float data is accumulated in double and rounded once on store; integers in int64. */
#include <math.h>

#include "ir/parallel.h"
#include "kernels/cpu/reduce_impl.h"
#include "ops/geom.h"
#include "ops/reduce_attrs.h"

typedef enum RedKind {
    RED_SUM,
    RED_MEAN,
    RED_MAX,
    RED_MIN,
    RED_PROD,
    RED_SUMSQ,
    RED_L1,
    RED_L2,
    RED_LOGSUM,
    RED_LOGSUMEXP
} RedKind;

/* The smallest and largest values of an integer type up to int64 (the identities of
 * max and min over an empty set). */
static void int_range(int dtype, int64_t *lo, int64_t *hi) {
    switch (dtype) {
    case AMP_DT_INT8: *lo = INT8_MIN, *hi = INT8_MAX; break;
    case AMP_DT_INT16: *lo = INT16_MIN, *hi = INT16_MAX; break;
    case AMP_DT_INT32: *lo = INT32_MIN, *hi = INT32_MAX; break;
    case AMP_DT_UINT8: *lo = 0, *hi = UINT8_MAX; break;
    case AMP_DT_UINT16: *lo = 0, *hi = UINT16_MAX; break;
    case AMP_DT_UINT32: *lo = 0, *hi = UINT32_MAX; break;
    case AMP_DT_BOOL: *lo = 0, *hi = 1; break;
    default: *lo = INT64_MIN, *hi = INT64_MAX; break;
    }
}

/* Integer types whose int64 reading orders correctly (uint64 only wraps right for sums). */
static bool int_ordered(int dtype) {
    return amp_dtype_is_int(dtype) && dtype != AMP_DT_UINT64;
}

/* ---- Reduce* --------------------------------------------------------------------- */

/* The geometry (ops/reduce_attrs.h): the executor's, or, where the `axes` input's values
 * decide (ReduceSum since opset 13, the others since 18, axes the model does not fix), made
 * here from the values read. */
static AmpCode reduce_geom(AmpKernelCtx *k, AmpReduceGeom *own, const AmpReduceGeom **g) {
    const void *p;
    AmpCode rc = amp_kernel_geom(k, own, &p);
    if (rc || (*g = p)) return rc;
    int64_t axes[AMP_MAX_RANK];
    size_t n = 0;
    const AmpBuf *ax;
    if ((rc = amp_reduce_axes_input(k, k->attrs, k->in[0]->rank, &ax))) return rc;
    for (uint64_t i = 0; ax && i < ax->nelem; i++) axes[n++] = amp_buf_get_i64(ax, i);
    *g = own;
    return amp_reduce_geom_axes(k, ax ? axes : NULL, n, own);
}

/* Walks the input in storage order, tracking the offset of the output element each
 * input element reduces into (ostr: output strides, 0 along reduced axes). */
typedef struct RedIter {
    int rank;
    const int64_t *dims, *ostr;
    int64_t idx[AMP_MAX_RANK];
    int64_t off;
} RedIter;

static void iter_next(RedIter *it) {
    for (int d = it->rank - 1; d >= 0; d--) {
        it->off += it->ostr[d];
        if (++it->idx[d] < it->dims[d]) return;
        it->off -= it->ostr[d] * it->dims[d];
        it->idx[d] = 0;
    }
}

static void iter_init(RedIter *it, const AmpBuf *x, const int64_t *ostr) {
    memset(it, 0, sizeof *it);
    it->rank = x->rank;
    it->dims = x->dims;
    it->ostr = ostr;
}

/* x's storage order as three blocks: reduced axes (R1 elements), kept axes (K), reduced
 * axes (R2) (ostr 0 marks a reduced axis; axes of one element fit anywhere; any block may
 * be empty, 1); false for other orders (reduced, kept, reduced, kept...). */
static bool split_3(const AmpBuf *x, const int64_t *ostr, uint64_t *R1, uint64_t *K, uint64_t *R2) {
    uint64_t b[3] = {1, 1, 1};
    int phase = 0;
    for (int d = 0; d < x->rank; d++) {
        if (x->dims[d] == 1) continue;
        bool red = ostr[d] == 0;
        if (phase == 0 && !red) phase = 1;
        else if (phase == 1 && red) phase = 2;
        else if (phase == 2 && !red) return false;
        b[phase] *= (uint64_t)x->dims[d];
    }
    *R1 = b[0], *K = b[1], *R2 = b[2];
    return true;
}

/* The sums (of the elements: Sum, Mean, LogSum; of their squares: SumSquare, L2) of
 * float32 data laid out as [R1, K, R2] (split_3: the bias gradient's sum over the batch
 * is [R, K, 1], BatchNormalization's statistics over (N, H, W) [N, C, HW]): each
 * accumulator takes its elements in the general walk's order (storage order), so the
 * same result, without its per-element index bookkeeping; rows added into the
 * accumulators where R2 is 1 (vector code). False for other layouts and kinds. */
typedef struct SumJob {
    const float *f;
    double *acc;
    uint64_t R1, K, R2;
    bool sq;
} SumJob;

/* Accumulators [from, to), each over its elements in storage order. */
static void sum_slice(void *ctx, int64_t from, int64_t to) {
    const SumJob *jb = ctx;
    uint64_t K = jb->K, R2 = jb->R2, lo = (uint64_t)from, hi = (uint64_t)to;
    double *acc = jb->acc;
    for (uint64_t r = 0; r < jb->R1; r++) {
        if (R2 == 1) {
            const float *row = jb->f + r * K;
            if (jb->sq)
                for (uint64_t j = lo; j < hi; j++) acc[j] += (double)row[j] * (double)row[j];
            else
                for (uint64_t j = lo; j < hi; j++) acc[j] += (double)row[j];
            continue;
        }
        for (uint64_t j = lo; j < hi; j++) {
            const float *row = jb->f + (r * K + j) * R2;
            double s = acc[j];
            if (jb->sq)
                for (uint64_t i = 0; i < R2; i++) s += (double)row[i] * (double)row[i];
            else
                for (uint64_t i = 0; i < R2; i++) s += (double)row[i];
            acc[j] = s;
        }
    }
}

static bool sum_fast(RedKind kind, const AmpBuf *x, const int64_t *ostr, const float *f, double *acc) {
    bool sq = kind == RED_SUMSQ || kind == RED_L2;
    uint64_t R1, K, R2;
    bool sums = kind == RED_SUM || kind == RED_MEAN || kind == RED_LOGSUM || sq;
    if (!sums || !x->nelem || !split_3(x, ostr, &R1, &K, &R2)) return false;
    /* the accumulators sliced over the CPU's threads, at least ~32K elements each: every
     * accumulator's order is the one above, whichever thread runs it */
    SumJob j = {.f = f, .acc = acc, .R1 = R1, .K = K, .R2 = R2, .sq = sq};
    uint64_t per = R1 * R2, grain = per >= (1u << 15) ? 1 : (1u << 15) / per;
    amp_parallel_for((int64_t)K, (int64_t)grain, R2 == 1 ? 16 : 1, sum_slice, &j);
    return true;
}

/* Float data: accumulators in double, one per output element. */
static AmpCode reduce_float(AmpKernelCtx *k, RedKind kind, const AmpBuf *x, const int64_t *ostr, uint64_t n_red,
                            AmpBuf *y) {
    AmpFv v;
    AmpFo o;
    AmpCode rc = amp_fv_open(k, x, &v);
    if (rc) return rc;
    if ((rc = amp_fo_open(k, y, &o))) {
        amp_fv_close(&v);
        return rc;
    }
    uint64_t n_out = y->nelem ? y->nelem : 1;
    double *acc = malloc(n_out * sizeof *acc);
    double *mx = kind == RED_LOGSUMEXP ? malloc(n_out * sizeof *mx) : NULL;
    if (!acc || (kind == RED_LOGSUMEXP && !mx)) {
        free(acc), free(mx), amp_fv_close(&v), amp_fo_discard(&o);
        return amp_red_oom(k);
    }
    double init = kind == RED_PROD ? 1.0 : kind == RED_MAX ? -INFINITY : kind == RED_MIN ? INFINITY : 0.0;
    for (uint64_t j = 0; j < y->nelem; j++) acc[j] = init;
    RedIter it;
    if (mx) { /* log-sum-exp subtracts each output's max first, so exp never overflows */
        for (uint64_t j = 0; j < y->nelem; j++) mx[j] = -INFINITY;
        iter_init(&it, x, ostr);
        for (uint64_t i = 0; i < x->nelem; i++, iter_next(&it)) {
            double a = amp_fv_get(&v, i);
            double *m = &mx[it.off];
            if (!isnan(*m) && (isnan(a) || a > *m)) *m = a;
        }
    }
    if (!mx && v.f && sum_fast(kind, x, ostr, v.f, acc)) goto done;
    iter_init(&it, x, ostr);
    for (uint64_t i = 0; i < x->nelem; i++, iter_next(&it)) {
        double a = amp_fv_get(&v, i);
        double *s = &acc[it.off];
        switch (kind) {
        case RED_SUM:
        case RED_MEAN:
        case RED_LOGSUM: *s += a; break;
        case RED_SUMSQ:
        case RED_L2: *s += a * a; break;
        case RED_L1: *s += fabs(a); break;
        case RED_PROD: *s *= a; break;
        case RED_MAX: /* NaN propagates, as in numpy */
            if (!isnan(*s) && (isnan(a) || a > *s)) *s = a;
            break;
        case RED_MIN:
            if (!isnan(*s) && (isnan(a) || a < *s)) *s = a;
            break;
        case RED_LOGSUMEXP: *s += isinf(mx[it.off]) ? 0.0 : exp(a - mx[it.off]); break;
        }
    }
done:
    for (uint64_t j = 0; j < y->nelem; j++) {
        double r = acc[j];
        switch (kind) {
        case RED_MEAN: r = r / (double)n_red; break; /* NaN for an empty set */
        case RED_L2: r = sqrt(r); break;
        case RED_LOGSUM: r = log(r); break;
        case RED_LOGSUMEXP: r = isinf(mx[j]) || isnan(mx[j]) ? mx[j] : mx[j] + log(r); break;
        default: break;
        }
        amp_fo_set(&o, j, r);
    }
    amp_fo_commit(&o);
    amp_fv_close(&v);
    free(acc), free(mx);
    return AMP_OK;
}

/* Integer data: int64 accumulators with wrap-around (unsigned arithmetic, no UB). */
static AmpCode reduce_int(AmpKernelCtx *k, RedKind kind, const AmpBuf *x, const int64_t *ostr, uint64_t n_red,
                          AmpBuf *y) {
    uint64_t n_out = y->nelem ? y->nelem : 1;
    int64_t *acc = malloc(n_out * sizeof *acc);
    if (!acc) return amp_red_oom(k);
    int64_t lo, hi;
    int_range(x->dtype, &lo, &hi);
    int64_t init = kind == RED_PROD ? 1 : kind == RED_MAX ? lo : kind == RED_MIN ? hi : 0;
    for (uint64_t j = 0; j < y->nelem; j++) acc[j] = init;
    RedIter it;
    iter_init(&it, x, ostr);
    for (uint64_t i = 0; i < x->nelem; i++, iter_next(&it)) {
        int64_t a = amp_buf_get_i64(x, i);
        int64_t *s = &acc[it.off];
        switch (kind) {
        case RED_SUM:
        case RED_MEAN: *s = (int64_t)((uint64_t)*s + (uint64_t)a); break;
        case RED_SUMSQ: *s = (int64_t)((uint64_t)*s + (uint64_t)a * (uint64_t)a); break;
        case RED_L1: *s = (int64_t)((uint64_t)*s + (a < 0 ? 0 - (uint64_t)a : (uint64_t)a)); break;
        case RED_PROD: *s = (int64_t)((uint64_t)*s * (uint64_t)a); break;
        case RED_MAX:
            if (a > *s) *s = a;
            break;
        case RED_MIN:
            if (a < *s) *s = a;
            break;
        default: break;
        }
    }
    for (uint64_t j = 0; j < y->nelem; j++) {
        int64_t r = acc[j];
        if (kind == RED_MEAN) r = n_red ? r / (int64_t)n_red : 0; /* truncates, like a cast of the mean */
        amp_buf_set_i64(y, j, r);
    }
    free(acc);
    return AMP_OK;
}

static AmpCode reduce_run(AmpKernelCtx *k, RedKind kind) {
    AmpReduceGeom own;
    const AmpReduceGeom *g;
    AmpCode rc = reduce_geom(k, &own, &g);
    if (rc) return rc;
    const AmpBuf *x = k->in[0];
    bool is_float = amp_red_is_float(x->dtype);
    bool int_ok = kind == RED_MAX || kind == RED_MIN ? int_ordered(x->dtype) || x->dtype == AMP_DT_BOOL
                  : kind == RED_L2 || kind == RED_LOGSUM || kind == RED_LOGSUMEXP
                      ? false
                      : int_ordered(x->dtype) ||
                            (x->dtype == AMP_DT_UINT64 && (kind == RED_SUM || kind == RED_PROD || kind == RED_SUMSQ));
    if (!is_float && !int_ok) return amp_kernel_bad_dtype(k, x->dtype);
    AmpBuf *y;
    if ((rc = amp_kernel_outputs(k, 1, &y)) || !y) return rc;
    return is_float ? reduce_float(k, kind, x, g->ostr, g->n_red, y) : reduce_int(k, kind, x, g->ostr, g->n_red, y);
}

AmpCode amp_cpu_reduce_sum(AmpKernelCtx *k) { return reduce_run(k, RED_SUM); }
AmpCode amp_cpu_reduce_mean(AmpKernelCtx *k) { return reduce_run(k, RED_MEAN); }
AmpCode amp_cpu_reduce_max(AmpKernelCtx *k) { return reduce_run(k, RED_MAX); }
AmpCode amp_cpu_reduce_min(AmpKernelCtx *k) { return reduce_run(k, RED_MIN); }
AmpCode amp_cpu_reduce_prod(AmpKernelCtx *k) { return reduce_run(k, RED_PROD); }
AmpCode amp_cpu_reduce_sumsq(AmpKernelCtx *k) { return reduce_run(k, RED_SUMSQ); }
AmpCode amp_cpu_reduce_l1(AmpKernelCtx *k) { return reduce_run(k, RED_L1); }
AmpCode amp_cpu_reduce_l2(AmpKernelCtx *k) { return reduce_run(k, RED_L2); }
AmpCode amp_cpu_reduce_logsum(AmpKernelCtx *k) { return reduce_run(k, RED_LOGSUM); }
AmpCode amp_cpu_reduce_logsumexp(AmpKernelCtx *k) { return reduce_run(k, RED_LOGSUMEXP); }

/* ---- ArgMax / ArgMin ------------------------------------------------------------- */

/* Whether a candidate replaces the best so far. NaN wins (numpy's rule), the first one
 * unless select_last_index. */
static bool arg_take_f(double a, double best, bool is_max, bool last) {
    if (isnan(best)) return last && isnan(a);
    if (isnan(a)) return true;
    return is_max ? (a > best || (last && a == best)) : (a < best || (last && a == best));
}

static AmpCode arg_run(AmpKernelCtx *k, bool is_max) {
    AmpArgGeom own;
    const AmpArgGeom *g; /* amp_arg_geom (ops/reduce_attrs.h) */
    AmpCode rc = amp_kernel_geom(k, &own, (const void **)&g);
    if (rc) return rc;
    const AmpArgAttrs *attr = k->attrs;
    const AmpBuf *x = k->in[0];
    bool is_float = amp_red_is_float(x->dtype);
    if (!is_float && !int_ordered(x->dtype) && x->dtype != AMP_DT_BOOL) return amp_kernel_bad_dtype(k, x->dtype);
    bool last = attr->last;
    AmpBuf *y;
    if ((rc = amp_kernel_outputs(k, 1, &y)) || !y) return rc;
    int64_t *out = y->data;
    uint64_t outer = g->outer, D = g->d, inner = g->inner;
    AmpFv v = {0};
    if (is_float && (rc = amp_fv_open(k, x, &v))) return rc;
    for (uint64_t o = 0; o < outer; o++)
        for (uint64_t i = 0; i < inner; i++) {
            uint64_t base = o * D * inner + i, bi = 0;
            if (is_float) {
                double best = amp_fv_get(&v, base);
                for (uint64_t j = 1; j < D; j++) {
                    double a = amp_fv_get(&v, base + j * inner);
                    if (arg_take_f(a, best, is_max, last)) best = a, bi = j;
                }
            } else {
                int64_t best = amp_buf_get_i64(x, base);
                for (uint64_t j = 1; j < D; j++) {
                    int64_t a = amp_buf_get_i64(x, base + j * inner);
                    if (is_max ? (a > best || (last && a == best)) : (a < best || (last && a == best))) best = a, bi = j;
                }
            }
            out[o * inner + i] = (int64_t)bi;
        }
    amp_fv_close(&v);
    return AMP_OK;
}

AmpCode amp_cpu_argmax(AmpKernelCtx *k) { return arg_run(k, true); }
AmpCode amp_cpu_argmin(AmpKernelCtx *k) { return arg_run(k, false); }

/* ---- CumSum ---------------------------------------------------------------------- */

typedef struct CumSumAttrs {
    bool excl, rev;
} CumSumAttrs;

AmpCode amp_cpu_cumsum_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    (void)opset;
    CumSumAttrs a = {.excl = amp_node_attr_int(n, "exclusive", 0) != 0,
                     .rev = amp_node_attr_int(n, "reverse", 0) != 0};
    return amp_prep_out(&a, sizeof a, attrs, st);
}

AmpCode amp_cpu_cumsum(AmpKernelCtx *k) {
    const CumSumAttrs *attr = amp_red_attrs(k);
    if (!attr) return k->st->code;
    AmpCumSumGeom own;
    const AmpCumSumGeom *g; /* amp_cumsum_geom (ops/reduce_attrs.h): x and the axis input, y checked */
    AmpCode rc = amp_kernel_geom(k, &own, (const void **)&g);
    if (rc) return rc;
    const AmpBuf *x = k->in[0], *ax = k->in[1];
    bool is_float = amp_red_is_float(x->dtype);
    if (!is_float && !amp_dtype_is_int(x->dtype)) return amp_kernel_bad_dtype(k, x->dtype);
    int64_t a = amp_buf_get_i64(ax, 0);
    int axis;
    if (!amp_norm_axis(a, x->rank, &axis))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "axis %lld is out of range for rank %d", (long long)a, x->rank);
    bool excl = attr->excl, rev = attr->rev;
    AmpBuf *y;
    if ((rc = amp_kernel_outputs(k, 1, &y)) || !y) return rc;
    if (!g->n) return AMP_OK; /* no element, however many empty rows ([2^40, 0]) */
    uint64_t outer, D, inner;
    amp_red_split(x, axis, &outer, &D, &inner);
    AmpFv v = {0};
    AmpFo o = {0};
    if (is_float) {
        rc = amp_fv_open(k, x, &v);
        if (!rc && (rc = amp_fo_open(k, y, &o))) amp_fv_close(&v);
        if (rc) return rc;
    }
    for (uint64_t p = 0; p < outer; p++)
        for (uint64_t i = 0; i < inner; i++) {
            double fs = 0.0;
            uint64_t is = 0; /* integer sum, wrapping */
            for (uint64_t jj = 0; jj < D; jj++) {
                uint64_t j = rev ? D - 1 - jj : jj;
                uint64_t at = (p * D + j) * inner + i;
                if (is_float) {
                    double e = amp_fv_get(&v, at);
                    if (!excl) fs += e;
                    amp_fo_set(&o, at, fs);
                    if (excl) fs += e;
                } else {
                    uint64_t e = (uint64_t)amp_buf_get_i64(x, at);
                    if (!excl) is += e;
                    amp_buf_set_i64(y, at, (int64_t)is);
                    if (excl) is += e;
                }
            }
        }
    if (is_float) {
        amp_fo_commit(&o);
        amp_fv_close(&v);
    }
    return AMP_OK;
}

/* ---- TopK ------------------------------------------------------------------------ */

typedef struct TkItem {
    double f;    /* float data */
    int64_t i;   /* integer data */
    int64_t idx; /* position along the axis */
} TkItem;

/* A total order on doubles with NaN above everything (so qsort stays consistent). */
static int f_order(double a, double b) {
    bool na = isnan(a), nb = isnan(b);
    if (na || nb) return na && nb ? 0 : na ? 1 : -1;
    return a < b ? -1 : a > b ? 1 : 0;
}

/* Equal values keep the lower index first (the ONNX rule), in both directions. */
static int by_idx(const TkItem *a, const TkItem *b) {
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}
static int cmp_f_desc(const void *pa, const void *pb) {
    const TkItem *a = pa, *b = pb;
    int c = f_order(b->f, a->f);
    return c ? c : by_idx(a, b);
}
static int cmp_f_asc(const void *pa, const void *pb) {
    const TkItem *a = pa, *b = pb;
    int c = f_order(a->f, b->f);
    return c ? c : by_idx(a, b);
}
static int cmp_i_desc(const void *pa, const void *pb) {
    const TkItem *a = pa, *b = pb;
    return a->i != b->i ? (a->i > b->i ? -1 : 1) : by_idx(a, b);
}
static int cmp_i_asc(const void *pa, const void *pb) {
    const TkItem *a = pa, *b = pb;
    return a->i != b->i ? (a->i < b->i ? -1 : 1) : by_idx(a, b);
}

/* TopK attributes: axis as written; k, the attribute form of K (before opset 10). */
typedef struct TopKAttrs {
    int64_t axis, k;
    bool largest;
} TopKAttrs;

AmpCode amp_cpu_topk_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    TopKAttrs a = {.axis = amp_node_attr_int(n, "axis", -1),
                   .k = opset < 10 ? amp_node_attr_int(n, "k", -1) : -1,
                   .largest = amp_node_attr_int(n, "largest", 1) != 0};
    return amp_prep_out(&a, sizeof a, attrs, st);
}

AmpCode amp_cpu_topk(AmpKernelCtx *k) {
    const TopKAttrs *attr = amp_red_attrs(k);
    if (!attr) return k->st->code;
    const AmpBuf *x = k->n_in > 0 ? k->in[0] : NULL;
    if (!x) return amp_kernel_fail(k, AMP_ERR_INPUT, "the data input is missing");
    bool is_float = amp_red_is_float(x->dtype);
    if (!is_float && !int_ordered(x->dtype)) return amp_kernel_bad_dtype(k, x->dtype);
    int64_t K;
    const AmpBuf *kb = k->n_in > 1 ? k->in[1] : NULL;
    if (k->opset >= 10 || kb) {
        if (!kb || !amp_dtype_is_int(kb->dtype) || kb->nelem != 1 || kb->rank > 1)
            return amp_kernel_fail(k, AMP_ERR_INPUT, "K must be a 1-element integer tensor");
        K = amp_buf_get_i64(kb, 0);
    } else {
        K = attr->k;
    }
    int axis;
    if (!amp_norm_axis(attr->axis, x->rank, &axis))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "axis %lld is out of range for rank %d", (long long)attr->axis,
                            x->rank);
    if (K < 0 || K > x->dims[axis])
        return amp_kernel_fail(k, AMP_ERR_INPUT, "K = %lld is outside [0, %lld]", (long long)K, (long long)x->dims[axis]);
    bool largest = attr->largest;
    /* values and indices, each written at (p * K + j) * inner + i where listed */
    AmpBuf *vals, *idxs;
    AmpCode rc = amp_topk_out(k, x, axis, K, &vals, &idxs);
    if (rc) return rc;
    /* Nothing to write where the node lists no output or x (and so each output, K being
     * at most the axis) has no element, however many empty rows the shape has. */
    if ((!vals && !idxs) || !x->nelem) return AMP_OK;
    uint64_t outer, D, inner;
    amp_red_split(x, axis, &outer, &D, &inner);
    TkItem *items = malloc((D ? D : 1) * sizeof *items);
    if (!items) return amp_red_oom(k);
    AmpFv v = {0};
    AmpFo o = {0};
    if (is_float) {
        rc = amp_fv_open(k, x, &v);
        if (!rc && vals && (rc = amp_fo_open(k, vals, &o))) amp_fv_close(&v);
        if (rc) {
            free(items);
            return rc;
        }
    }
    int (*cmp)(const void *, const void *) =
        is_float ? (largest ? cmp_f_desc : cmp_f_asc) : (largest ? cmp_i_desc : cmp_i_asc);
    uint64_t uk = (uint64_t)K;
    for (uint64_t p = 0; p < outer; p++)
        for (uint64_t i = 0; i < inner; i++) {
            for (uint64_t j = 0; j < D; j++) {
                uint64_t at = (p * D + j) * inner + i;
                items[j].idx = (int64_t)j;
                if (is_float) items[j].f = amp_fv_get(&v, at);
                else items[j].i = amp_buf_get_i64(x, at);
            }
            if (uk) qsort(items, D, sizeof *items, cmp);
            for (uint64_t j = 0; j < uk; j++) {
                uint64_t at = (p * uk + j) * inner + i;
                if (vals && is_float) amp_fo_set(&o, at, items[j].f);
                else if (vals) amp_buf_set_i64(vals, at, items[j].i);
                if (idxs) ((int64_t *)idxs->data)[at] = items[j].idx;
            }
        }
    if (is_float) {
        if (vals) amp_fo_commit(&o);
        amp_fv_close(&v);
    }
    free(items);
    return AMP_OK;
}
