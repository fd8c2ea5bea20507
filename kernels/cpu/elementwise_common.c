/* Helpers of the elementwise family (declared in elementwise_impl.h): messages, the
 * broadcast plan (merged axes, row walk), pre-opset-7 broadcasting, typed element
 * access, and the two float drivers most kernels of the family run through. */
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/elementwise_impl.h"
#include "ir/half.h"
#include "ir/parallel.h"

void amp_ew_plan(AmpEwPlan *p, int rank, const int64_t *dims, int n_in, const AmpBuf *const *in) {
    memset(p, 0, sizeof *p);
    p->n_in = n_in;
    p->nelem = amp_shape_nelem(rank, dims);
    p->rank = amp_ew_merge_axes(rank, dims, n_in, in, p->dims, p->strides); /* ops/ew_common.h */
    p->n = p->dims[p->rank - 1];
    p->rows = p->nelem && p->n ? p->nelem / (uint64_t)p->n : 0;
    /* The innermost input stride is 1 (contiguous) or 0 (broadcast): inputs are dense
     * and size-1 output axes were dropped. */
    for (int j = 0; j < n_in; j++) p->step[j] = p->strides[j][p->rank - 1] != 0;
}

void amp_ew_start(const AmpEwPlan *p, AmpEwCursor *c) {
    memset(c, 0, sizeof *c);
    (void)p;
}

void amp_ew_next(const AmpEwPlan *p, AmpEwCursor *c) {
    c->out += (uint64_t)p->n;
    for (int d = p->rank - 2; d >= 0; d--) {
        for (int j = 0; j < p->n_in; j++) c->in[j] += p->strides[j][d];
        if (++c->idx[d] < p->dims[d]) return;
        for (int j = 0; j < p->n_in; j++) c->in[j] -= p->strides[j][d] * p->dims[d];
        c->idx[d] = 0;
    }
}


/* ---- typed element access ---------------------------------------------------------- */

double amp_ew_get_f64(const AmpBuf *b, uint64_t i) {
    switch (b->dtype) {
    case AMP_DT_FLOAT: return ((const float *)b->data)[i];
    case AMP_DT_DOUBLE: return ((const double *)b->data)[i];
    case AMP_DT_FLOAT16: return amp_f16_to_f32(((const uint16_t *)b->data)[i]);
    case AMP_DT_BFLOAT16: return amp_bf16_to_f32(((const uint16_t *)b->data)[i]);
    case AMP_DT_UINT64: return (double)((const uint64_t *)b->data)[i];
    default: return (double)amp_buf_get_i64(b, i);
    }
}

/* v truncated toward zero and clamped to [lo, hi]; NaN gives 0. */
static int64_t sat_i64(double v, double lo, double hi) {
    if (isnan(v)) return 0;
    if (v <= lo) return (int64_t)lo;
    if (v >= hi) return v >= 9223372036854775807.0 ? INT64_MAX : (int64_t)hi;
    return (int64_t)v;
}

void amp_ew_set_f64(AmpBuf *b, uint64_t i, double v) {
    switch (b->dtype) {
    case AMP_DT_FLOAT: ((float *)b->data)[i] = (float)v; break;
    case AMP_DT_DOUBLE: ((double *)b->data)[i] = v; break;
    case AMP_DT_FLOAT16: ((uint16_t *)b->data)[i] = amp_f32_to_f16((float)v); break;
    case AMP_DT_BFLOAT16: ((uint16_t *)b->data)[i] = amp_f32_to_bf16((float)v); break;
    case AMP_DT_INT8: ((int8_t *)b->data)[i] = (int8_t)sat_i64(v, INT8_MIN, INT8_MAX); break;
    case AMP_DT_INT16: ((int16_t *)b->data)[i] = (int16_t)sat_i64(v, INT16_MIN, INT16_MAX); break;
    case AMP_DT_INT32: ((int32_t *)b->data)[i] = (int32_t)sat_i64(v, INT32_MIN, INT32_MAX); break;
    case AMP_DT_INT64: ((int64_t *)b->data)[i] = sat_i64(v, -9223372036854775808.0, 9223372036854775807.0); break;
    case AMP_DT_UINT8: ((uint8_t *)b->data)[i] = (uint8_t)sat_i64(v, 0, UINT8_MAX); break;
    case AMP_DT_UINT16: ((uint16_t *)b->data)[i] = (uint16_t)sat_i64(v, 0, UINT16_MAX); break;
    case AMP_DT_UINT32: ((uint32_t *)b->data)[i] = (uint32_t)sat_i64(v, 0, UINT32_MAX); break;
    case AMP_DT_UINT64:
        ((uint64_t *)b->data)[i] = isnan(v) || v <= 0 ? 0 : v >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)v;
        break;
    case AMP_DT_BOOL: ((uint8_t *)b->data)[i] = v != 0; break;
    default: break;
    }
}

/* ---- float drivers ---------------------------------------------------------------- */

/* 16-bit data go through fp32 blocks of this many elements on the stack: no full-size
 * float copies, and nothing to allocate. */
#define BLK 1024

/* m elements of a float-family buffer from element off, as fp32: the data itself for
 * float32, else converted into tmp. */
static const float *f32_block(const AmpBuf *b, int64_t off, int64_t m, float *tmp) {
    if (b->dtype == AMP_DT_FLOAT) return (const float *)b->data + off;
    if (b->dtype == AMP_DT_FLOAT16) amp_f16_to_f32_n(tmp, (const uint16_t *)b->data + off, (size_t)m);
    else amp_bf16_to_f32_n(tmp, (const uint16_t *)b->data + off, (size_t)m);
    return tmp;
}

/* Rounds m fp32 values into a 16-bit buffer from element off (float32 was written in place). */
static void f32_store(AmpBuf *b, int64_t off, int64_t m, const float *src) {
    if (b->dtype == AMP_DT_FLOAT16) amp_f32_to_f16_n((uint16_t *)b->data + off, src, (size_t)m);
    else if (b->dtype == AMP_DT_BFLOAT16) amp_f32_to_bf16_n((uint16_t *)b->data + off, src, (size_t)m);
}

/* ---- slices of a walk on the CPU's threads ------------------------------------------ */

/* Output elements a slice takes at least (the team's start costs microseconds; an
 * elementwise pass moves a few bytes per element), and what slices within one row are a
 * multiple of: BLK, so every block and vector loop splits where it did on one thread. */
#define PAR_GRAIN (1 << 15)

/* A piece of a walk: elements [off, off + m) of the row whose start c gives. */
typedef void (*PieceFn)(void *ctx, const AmpEwCursor *c, int64_t off, int64_t m);

/* c at the start of row `row` of p's walk. */
static void ew_seek(const AmpEwPlan *p, AmpEwCursor *c, uint64_t row) {
    memset(c, 0, sizeof *c);
    c->out = row * (uint64_t)p->n;
    for (int d = p->rank - 2; d >= 0; d--) {
        c->idx[d] = (int64_t)(row % (uint64_t)p->dims[d]);
        row /= (uint64_t)p->dims[d];
        for (int j = 0; j < p->n_in; j++) c->in[j] += c->idx[d] * p->strides[j][d];
    }
}

typedef struct SimdJob {
    const AmpEwPlan *plan;
    AmpSimdOp op;
    int dtype;
    const void *x, *y;
    void *o;
} SimdJob;

/* Elements [off, off + m) of the row at cursor c (an PieceFn). */
static void simd_slice(void *ctx, const AmpEwCursor *c, int64_t off, int64_t m) {
    const SimdJob *j = ctx;
    const int sa = j->plan->step[0], sb = j->plan->step[1];
    if (j->dtype == AMP_DT_FLOAT)
        amp_simd_row2_f32(j->op, (float *)j->o + c->out + off, (const float *)j->x + c->in[0] + off * sa, sa,
                          (const float *)j->y + c->in[1] + off * sb, sb, m);
    else
        amp_simd_row2_half(j->op, j->dtype, (uint16_t *)j->o + c->out + off, (const uint16_t *)j->x + c->in[0] + off * sa,
                           sa, (const uint16_t *)j->y + c->in[1] + off * sb, sb, m);
}

/* The pieces of a walk: whole rows when there are several, else pieces of the one row. */
typedef struct WalkJob {
    const AmpEwPlan *plan;
    PieceFn piece;
    void *ctx;
} WalkJob;

static void walk_rows(void *arg, int64_t from, int64_t to) {
    const WalkJob *w = arg;
    AmpEwCursor c;
    ew_seek(w->plan, &c, (uint64_t)from);
    for (int64_t r = from; r < to; r++, amp_ew_next(w->plan, &c)) w->piece(w->ctx, &c, 0, w->plan->n);
}

static void walk_row(void *arg, int64_t from, int64_t to) {
    const WalkJob *w = arg;
    AmpEwCursor c;
    amp_ew_start(w->plan, &c);
    w->piece(w->ctx, &c, from, to - from);
}

/* Runs piece over every element of p's walk, sliced over the CPU's threads (ir/parallel.h):
 * whole rows where there are several, pieces of the row (multiples of BLK elements but the
 * last) where there is one. Each element is computed by the same code as on one thread. */
static void ew_parallel(const AmpEwPlan *p, PieceFn piece, void *ctx) {
    WalkJob w = {.plan = p, .piece = piece, .ctx = ctx};
    if (p->rows > 1) {
        int64_t grain = p->n >= PAR_GRAIN ? 1 : PAR_GRAIN / p->n;
        amp_parallel_for((int64_t)p->rows, grain, 1, walk_rows, &w);
    } else if (p->rows == 1) {
        amp_parallel_for(p->n, PAR_GRAIN, BLK, walk_row, &w);
    }
}

AmpCode amp_ew_binary_float(AmpKernelCtx *k, const AmpBuf *a, const AmpBuf *b, AmpEwRowF rf, AmpEwRowD rd,
                            const AmpEwParams *p) {
    return amp_ew_binary_float_op(k, a, b, rf, rd, p, AMP_SIMD_NONE);
}

AmpCode amp_ew_binary_float_op(AmpKernelCtx *k, const AmpBuf *a, const AmpBuf *b, AmpEwRowF rf, AmpEwRowD rd,
                               const AmpEwParams *p, AmpSimdOp op) {
    AmpCode rc = amp_ew_same_dtype(k, a, b);
    if (rc) return rc;
    if (!amp_is_f32_family(a->dtype) && !(a->dtype == AMP_DT_DOUBLE && rd)) return amp_kernel_bad_dtype(k, a->dtype);
    const AmpBuf *ins[2] = {a, b};
    int rank = 0;
    int64_t dims[AMP_MAX_RANK];
    if ((rc = amp_ew_bcast_shape(k, 2, ins, &rank, dims))) return rc;
    AmpBuf *out;
    if ((rc = amp_ew_out(k, a->dtype, rank, dims, &out)) || !out) return rc;
    if (!out->nelem) return AMP_OK; /* (empty inputs may have no data pointer) */
    AmpEwPlan plan;
    AmpEwCursor c;
    amp_ew_plan(&plan, rank, dims, 2, ins);
    if (a->dtype == AMP_DT_DOUBLE) {
        const double *x = a->data, *y = b->data;
        double *o = out->data;
        for (amp_ew_start(&plan, &c); c.out < plan.nelem; amp_ew_next(&plan, &c))
            rd(o + c.out, x + c.in[0], plan.step[0], y + c.in[1], plan.step[1], plan.n, p);
        return AMP_OK;
    }
    const int sa = plan.step[0], sb = plan.step[1];
    /* Rows in one AVX-512 pass where it runs (simd.h: the same bits), sliced over the
     * CPU's threads. Not for one element of each (both steps 0), whose scalar operation
     * is left as it was. */
    if (op != AMP_SIMD_NONE && (sa || sb) && amp_simd_have()) {
        SimdJob j = {.plan = &plan, .op = op, .dtype = a->dtype, .x = a->data, .y = b->data, .o = out->data};
        ew_parallel(&plan, simd_slice, &j);
        return AMP_OK;
    }
    float ta[BLK], tb[BLK], to[BLK];
    for (amp_ew_start(&plan, &c); c.out < plan.nelem; amp_ew_next(&plan, &c))
        for (int64_t s = 0; s < plan.n; s += BLK) {
            int64_t m = plan.n - s < BLK ? plan.n - s : BLK;
            /* a broadcast input (step 0) contributes its one element */
            const float *x = f32_block(a, c.in[0] + s * sa, sa ? m : 1, ta);
            const float *y = f32_block(b, c.in[1] + s * sb, sb ? m : 1, tb);
            float *o = out->dtype == AMP_DT_FLOAT ? (float *)out->data + c.out + s : to;
            rf(o, x, sa, y, sb, m, p);
            f32_store(out, (int64_t)c.out + s, m, o);
        }
    return AMP_OK;
}

/* A float map over elements [from, to) of x into out: float32 in place of the whole
 * tensor's one call, 16-bit through float32 blocks. */
typedef struct MapJob {
    AmpEwMapF f;
    const AmpEwParams *p;
    const AmpBuf *x;
    AmpBuf *out;
} MapJob;

static void map_slice(void *ctx, int64_t from, int64_t to) {
    const MapJob *j = ctx;
    if (j->x->dtype == AMP_DT_FLOAT) {
        j->f((float *)j->out->data + from, (const float *)j->x->data + from, (uint64_t)(to - from), j->p);
        return;
    }
    float tx[BLK], to_[BLK];
    for (int64_t s = from; s < to; s += BLK) {
        int64_t m = to - s < BLK ? to - s : BLK;
        j->f(to_, f32_block(j->x, s, m, tx), (uint64_t)m, j->p);
        f32_store(j->out, s, m, to_);
    }
}

AmpCode amp_ew_unary_float(AmpKernelCtx *k, AmpEwMapF f, AmpEwMapD d, const AmpEwParams *p) {
    AmpCode rc = amp_ew_need(k, 1);
    if (rc) return rc;
    const AmpBuf *x = k->in[0];
    if (!amp_is_f32_family(x->dtype) && !(x->dtype == AMP_DT_DOUBLE && d)) return amp_kernel_bad_dtype(k, x->dtype);
    AmpBuf *out;
    if ((rc = amp_ew_out(k, x->dtype, x->rank, x->dims, &out)) || !out) return rc;
    if (x->dtype == AMP_DT_DOUBLE) {
        if (x->nelem) d(out->data, x->data, x->nelem, p);
        return AMP_OK;
    }
    MapJob j = {.f = f, .p = p, .x = x, .out = out};
    amp_parallel_for((int64_t)x->nelem, PAR_GRAIN, BLK, map_slice, &j);
    return AMP_OK;
}

/* ---- 16-bit lookup tables for costly maps ------------------------------------------ */

/* A float16 or bfloat16 map y = f(x) reads one of 65536 values, so a table of the
 * 65536 results, made once per (map, dtype, parameters) by the same conversions and the
 * same map function over every pattern, gives every element the bits the block path
 * would (the map is per element). Tables are kept for the process (128 KiB each). */
#define LUT_SLOTS 64
typedef struct Lut {
    AmpEwMapF f;
    int dtype;
    bool has_p;
    AmpEwParams p;
    uint16_t *table;
} Lut;
static Lut luts[LUT_SLOTS];
static atomic_int n_luts; /* slots [0, n_luts) are complete */
static pthread_mutex_t lut_lock = PTHREAD_MUTEX_INITIALIZER;

static bool lut_is(const Lut *l, AmpEwMapF f, int dtype, const AmpEwParams *p) {
    return l->f == f && l->dtype == dtype && l->has_p == (p != NULL) && (!p || !memcmp(&l->p, p, sizeof *p));
}

/* The table of f over dtype's patterns, or NULL (out of slots or memory). */
static const uint16_t *lut_get(AmpEwMapF f, int dtype, const AmpEwParams *p) {
    int n = atomic_load_explicit(&n_luts, memory_order_acquire);
    for (int i = 0; i < n; i++)
        if (lut_is(&luts[i], f, dtype, p)) return luts[i].table;
    pthread_mutex_lock(&lut_lock);
    n = atomic_load_explicit(&n_luts, memory_order_relaxed);
    const uint16_t *found = NULL;
    for (int i = 0; i < n && !found; i++)
        if (lut_is(&luts[i], f, dtype, p)) found = luts[i].table;
    if (!found && n < LUT_SLOTS) {
        uint16_t *t = malloc(65536 * sizeof *t);
        uint16_t *h = malloc(BLK * sizeof *h);
        if (t && h) {
            AmpBuf in = {.dtype = dtype, .data = h};
            AmpBuf out = {.dtype = dtype, .data = t};
            float tx[BLK], to[BLK];
            for (uint32_t s = 0; s < 65536; s += BLK) {
                for (uint32_t j = 0; j < BLK; j++) h[j] = (uint16_t)(s + j);
                f(to, f32_block(&in, 0, BLK, tx), BLK, p);
                f32_store(&out, (int64_t)s, BLK, to);
            }
            luts[n] = (Lut){.f = f, .dtype = dtype, .has_p = p != NULL, .p = p ? *p : (AmpEwParams){0}, .table = t};
            atomic_store_explicit(&n_luts, n + 1, memory_order_release);
            found = t;
        } else {
            free(t);
        }
        free(h);
    }
    pthread_mutex_unlock(&lut_lock);
    return found;
}

/* Tables pay for their 65536 evaluations from this many elements in one call. */
#define LUT_MIN 65536

typedef struct LutJob {
    const uint16_t *t, *x;
    uint16_t *y;
} LutJob;

static void lut_slice(void *ctx, int64_t from, int64_t to) {
    const LutJob *j = ctx;
    for (int64_t i = from; i < to; i++) j->y[i] = j->t[j->x[i]];
}

AmpCode amp_ew_unary_float_lut(AmpKernelCtx *k, AmpEwMapF f, AmpEwMapD d, const AmpEwParams *p) {
    const AmpBuf *x = k->n_in > 0 ? k->in[0] : NULL;
    if (!x || (x->dtype != AMP_DT_FLOAT16 && x->dtype != AMP_DT_BFLOAT16) || x->nelem < LUT_MIN)
        return amp_ew_unary_float(k, f, d, p);
    const uint16_t *t = lut_get(f, x->dtype, p);
    if (!t) return amp_ew_unary_float(k, f, d, p);
    AmpBuf *out;
    AmpCode rc = amp_ew_out(k, x->dtype, x->rank, x->dims, &out);
    if (rc || !out) return rc;
    LutJob j = {.t = t, .x = x->data, .y = out->data};
    amp_parallel_for((int64_t)x->nelem, PAR_GRAIN, 1, lut_slice, &j);
    return AMP_OK;
}
