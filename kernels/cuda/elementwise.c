/* CUDA node-level kernels of the elementwise family (launchers in elementwise.cu). Each
 * checks what the CPU kernel checks (kernels/cpu/elementwise.c, unary.c, activation.c,
 * logic.c, tensor.c's Cast) with the helpers both backends share (ops/ew_common.h,
 * amp_ew_*: broadcast shapes, pre-opset-7 broadcasting, the placed output's shape, the
 * merged axes of the broadcast walk), plans the broadcast on the host and passes the plan
 * by value. Attributes come from the shared prepares (ops/); the unary ops are the lines
 * of ops/unary.def, one kernel over the list. */
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/elementwise.h"
#include "ops/cast_engine.h" /* CastAttrs */
#include "ops/ew_common.h"

_Static_assert(AMP_CUDA_EW_RANK == AMP_CUDA_MAX_RANK, "elementwise.h's rank is AMP_MAX_RANK");
_Static_assert(AMP_CUDA_EW_MAX_VAR <= AMP_EW_MERGE_MAX_IN, "a launch's operands are planned in one merge");
/* elementwise.cu mirrors AmpCudaBcast's layout: int rank, dims[8], stride[3][8]. */
_Static_assert(sizeof(AmpCudaBcast) == 8 + 8 * 8 + 3 * 8 * 8 && offsetof(AmpCudaBcast, dims) == 8,
               "AmpCudaBcast's layout changed: update elementwise.cu");

#define DTM(dt) (1u << (dt))
#define FLOATS (DTM(AMP_DT_FLOAT) | DTM(AMP_DT_FLOAT16) | DTM(AMP_DT_BFLOAT16))
#define INTS (DTM(AMP_DT_INT32) | DTM(AMP_DT_INT64))

static bool dt_in(int dt, unsigned mask) {
    return dt > 0 && dt < 32 && ((mask >> dt) & 1u);
}

static void *stream_of(AmpKernelCtx *k) {
    return amp_cuda_ctx(k)->stream;
}

static AmpCode launched(AmpKernelCtx *k, int err) {
    return amp_cuda_check(k, err, k->node->op_type ? k->node->op_type : "elementwise");
}

/* ---- the broadcast plan ---------------------------------------------------------------- */

typedef struct Plan {
    int rank; /* >= 1 */
    int64_t dims[AMP_MAX_RANK];
    int64_t stride[AMP_CUDA_EW_MAX_VAR][AMP_MAX_RANK];
    bool flat; /* every operand has the output's shape: index i everywhere */
} Plan;

/* Plans nop operands (each broadcastable to the output shape rank/dims), up to
 * AMP_CUDA_EW_MAX_VAR of them, with the axes merged as on every backend
 * (amp_ew_merge_axes, ops/ew_common.h). */
static void plan(Plan *p, int rank, const int64_t *dims, int nop, const AmpBuf *const *in) {
    memset(p, 0, sizeof *p);
    p->rank = amp_ew_merge_axes(rank, dims, nop, in, p->dims, p->stride);
    p->flat = p->rank == 1;
    for (int j = 0; j < nop; j++)
        if (p->stride[j][0] != 1) p->flat = false;
}

/* The plan of up to three operands as the launchers take it: NULL when flat. */
static const AmpCudaBcast *to_bcast(const Plan *p, AmpCudaBcast *bc) {
    if (p->flat) return NULL;
    memset(bc, 0, sizeof *bc);
    bc->rank = p->rank;
    memcpy(bc->dims, p->dims, sizeof bc->dims);
    for (int j = 0; j < 3; j++) memcpy(bc->stride[j], p->stride[j], sizeof bc->stride[j]);
    return bc;
}

/* Output 0 of dtype out_dtype over the broadcast of a and b, and its plan; *out NULL
 * when the node does not list it or it is empty (nothing to launch). */
static AmpCode setup2(AmpKernelCtx *k, const AmpBuf *a, const AmpBuf *b, int out_dtype, AmpBuf **out, Plan *p) {
    const AmpBuf *ins[2] = {a, b};
    int rank;
    int64_t dims[AMP_MAX_RANK];
    AmpCode rc = amp_ew_bcast_shape(k, 2, ins, &rank, dims);
    if (rc || (rc = amp_ew_out(k, out_dtype, rank, dims, out)) || !*out) return rc;
    if (!(*out)->nelem) {
        *out = NULL;
        return AMP_OK;
    }
    plan(p, rank, dims, 2, ins);
    return AMP_OK;
}

/* ---- binary arithmetic ----------------------------------------------------------------- */

static AmpCode binary_launch(AmpKernelCtx *k, int op, const AmpBuf *a, const AmpBuf *b) {
    AmpBuf *out;
    Plan p;
    AmpCudaBcast bc;
    AmpCode rc = setup2(k, a, b, a->dtype, &out, &p);
    if (rc || !out) return rc;
    return launched(k, amp_cuda_ew_binary(op, a->dtype, out->data, a->data, b->data, to_bcast(&p, &bc), out->nelem,
                                          stream_of(k)));
}

static AmpCode arith(AmpKernelCtx *k, int op) {
    AmpCode rc = amp_ew_need(k, 2);
    if (rc) return rc;
    const AmpBuf *a = k->in[0];
    AmpBuf bv; /* B, with pre-opset-7 axis alignment applied */
    if ((rc = amp_ew_legacy_bcast(k, a, k->in[1], &bv)) || (rc = amp_ew_same_dtype(k, a, &bv))) return rc;
    if (!dt_in(a->dtype, FLOATS | (op == AMP_CUDA_BIN_POW ? 0 : INTS))) return amp_kernel_bad_dtype(k, a->dtype);
    return binary_launch(k, op, a, &bv);
}

AmpCode amp_cuda_add(AmpKernelCtx *k) {
    return arith(k, AMP_CUDA_BIN_ADD);
}
AmpCode amp_cuda_sub(AmpKernelCtx *k) {
    return arith(k, AMP_CUDA_BIN_SUB);
}
AmpCode amp_cuda_mul(AmpKernelCtx *k) {
    return arith(k, AMP_CUDA_BIN_MUL);
}
AmpCode amp_cuda_div(AmpKernelCtx *k) {
    return arith(k, AMP_CUDA_BIN_DIV);
}
AmpCode amp_cuda_pow(AmpKernelCtx *k) {
    return arith(k, AMP_CUDA_BIN_POW);
}

/* The slope as it broadcasts to X (amp_ew_prelu_slope, ops/ew_common.h). */
AmpCode amp_cuda_prelu(AmpKernelCtx *k) {
    AmpCode rc = amp_ew_need(k, 2);
    if (rc) return rc;
    const AmpBuf *x = k->in[0];
    AmpBuf slope;
    if ((rc = amp_ew_prelu_slope(k, x, &slope)) || (rc = amp_ew_same_dtype(k, x, &slope))) return rc;
    if (!dt_in(x->dtype, FLOATS)) return amp_kernel_bad_dtype(k, x->dtype);
    return binary_launch(k, AMP_CUDA_BIN_PRELU, x, &slope);
}

/* ---- variadic: Sum, Mean, Max, Min ------------------------------------------------------ */

size_t amp_cuda_ew_variadic_scratch(int dtype, int n_in, uint64_t nelem) {
    bool half = dtype == AMP_DT_FLOAT16 || dtype == AMP_DT_BFLOAT16;
    return half && n_in > AMP_CUDA_EW_MAX_VAR ? (size_t)nelem * sizeof(float) : 0;
}

/* Inputs [at, at + cnt) broadcast to rank/dims as one launch: from in[at] (at == 0) or
 * the accumulator acc, into the accumulator (last false) or out. */
static AmpCode variadic_chunk(AmpKernelCtx *k, int op, bool mean, int rank, const int64_t *dims, AmpBuf *out,
                              void *acc, int at, int cnt, bool last) {
    const AmpBuf *const *ins = k->in;
    Plan p;
    plan(&p, rank, dims, cnt, ins + at);
    AmpCudaEwMulti m;
    memset(&m, 0, sizeof m);
    m.n_in = cnt;
    m.rank = p.rank;
    m.n_total = k->n_in;
    memcpy(m.dims, p.dims, sizeof m.dims);
    for (int j = 0; j < cnt; j++) {
        memcpy(m.stride[j], p.stride[j], sizeof m.stride[j]);
        m.in[j] = ins[at + j]->data;
    }
    m.acc_in = at ? acc : NULL;
    m.acc_out = last ? NULL : acc;
    return launched(k, amp_cuda_ew_variadic(op, out->dtype, mean, out->data, &m, out->nelem, stream_of(k)));
}

/* Every input in order, AMP_CUDA_EW_MAX_VAR per launch: floats accumulate in fp32 and are
 * rounded once, as the CPU's fp32 view does (past one chunk, a 16-bit output keeps its
 * fp32 sums in the session's workspace; float32 and integers in the output itself);
 * nothing is read after out is written. */
static AmpCode variadic(AmpKernelCtx *k, int op, bool mean) {
    int n = k->n_in;
    AmpCode rc = amp_ew_variadic_inputs(k);
    if (rc) return rc;
    const AmpBuf *const *ins = k->in;
    int dt = ins[0]->dtype;
    if (!dt_in(dt, FLOATS | (op == AMP_CUDA_BIN_ADD ? 0 : INTS))) return amp_kernel_bad_dtype(k, dt);
    int rank;
    int64_t dims[AMP_MAX_RANK];
    AmpBuf *out;
    if ((rc = amp_ew_bcast_out(k, n, dt, &rank, dims, &out)) || !out) return rc;
    if (!out->nelem) return AMP_OK;
    size_t scratch = amp_cuda_ew_variadic_scratch(dt, n, out->nelem);
    AmpCudaCtx *c = amp_cuda_ctx(k);
    if (scratch > c->workspace_bytes)
        return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "%d inputs of %" PRIu64 " elements: the fp32 sums need %zu "
                               "bytes, the workspace has %zu", n, out->nelem, scratch, c->workspace_bytes);
    void *acc = scratch ? c->workspace : out->data;
    for (int j = AMP_CUDA_EW_MAX_VAR; j < n && acc == out->data; j++) /* a later chunk would read the sums */
        if (ins[j]->data == out->data)
            return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "input %d shares the output's memory", j);
    for (int at = 0; at < n && !rc; at += AMP_CUDA_EW_MAX_VAR) {
        int cnt = n - at < AMP_CUDA_EW_MAX_VAR ? n - at : AMP_CUDA_EW_MAX_VAR;
        rc = variadic_chunk(k, op, mean, rank, dims, out, acc, at, cnt, at + cnt == n);
    }
    return rc;
}

AmpCode amp_cuda_sum(AmpKernelCtx *k) {
    return variadic(k, AMP_CUDA_BIN_ADD, false);
}
AmpCode amp_cuda_mean(AmpKernelCtx *k) {
    return variadic(k, AMP_CUDA_BIN_ADD, true);
}
AmpCode amp_cuda_max(AmpKernelCtx *k) {
    return variadic(k, AMP_CUDA_BIN_MAX, false);
}
AmpCode amp_cuda_min(AmpKernelCtx *k) {
    return variadic(k, AMP_CUDA_BIN_MIN, false);
}

/* ---- comparisons, And, Or, Not ------------------------------------------------------------ */

static AmpCode compare(AmpKernelCtx *k, int op) {
    AmpCode rc = amp_ew_need(k, 2);
    if (rc) return rc;
    const AmpBuf *a = k->in[0];
    AmpBuf bv;
    if ((rc = amp_ew_legacy_bcast(k, a, k->in[1], &bv)) || (rc = amp_ew_same_dtype(k, a, &bv))) return rc;
    bool logic = op == AMP_CUDA_CMP_AND || op == AMP_CUDA_CMP_OR;
    if (!dt_in(a->dtype, logic ? DTM(AMP_DT_BOOL) : FLOATS | INTS | DTM(AMP_DT_BOOL)))
        return amp_kernel_bad_dtype(k, a->dtype);
    AmpBuf *out;
    Plan p;
    AmpCudaBcast bc;
    if ((rc = setup2(k, a, &bv, AMP_DT_BOOL, &out, &p)) || !out) return rc;
    return launched(k, amp_cuda_ew_compare(op, a->dtype, out->data, a->data, bv.data, to_bcast(&p, &bc), out->nelem,
                                           stream_of(k)));
}

AmpCode amp_cuda_equal(AmpKernelCtx *k) {
    return compare(k, AMP_CUDA_CMP_EQ);
}
AmpCode amp_cuda_less(AmpKernelCtx *k) {
    return compare(k, AMP_CUDA_CMP_LT);
}
AmpCode amp_cuda_greater(AmpKernelCtx *k) {
    return compare(k, AMP_CUDA_CMP_GT);
}
AmpCode amp_cuda_less_equal(AmpKernelCtx *k) {
    return compare(k, AMP_CUDA_CMP_LE);
}
AmpCode amp_cuda_greater_equal(AmpKernelCtx *k) {
    return compare(k, AMP_CUDA_CMP_GE);
}
AmpCode amp_cuda_and(AmpKernelCtx *k) {
    return compare(k, AMP_CUDA_CMP_AND);
}
AmpCode amp_cuda_or(AmpKernelCtx *k) {
    return compare(k, AMP_CUDA_CMP_OR);
}

/* Bool output of x's shape: Not (bool x), IsNaN / IsInf (float family). */
static AmpCode test(AmpKernelCtx *k, int op, int mode) {
    AmpCode rc = amp_ew_need(k, 1);
    if (rc) return rc;
    const AmpBuf *x = k->in[0];
    if (!dt_in(x->dtype, op == AMP_CUDA_TEST_NOT ? DTM(AMP_DT_BOOL) : FLOATS)) return amp_kernel_bad_dtype(k, x->dtype);
    AmpBuf *out;
    if ((rc = amp_ew_out(k, AMP_DT_BOOL, x->rank, x->dims, &out)) || !out) return rc;
    return launched(k, amp_cuda_ew_test(op, x->dtype, out->data, x->data, x->nelem, mode, stream_of(k)));
}

AmpCode amp_cuda_not(AmpKernelCtx *k) {
    return test(k, AMP_CUDA_TEST_NOT, 0);
}
AmpCode amp_cuda_isnan(AmpKernelCtx *k) {
    return test(k, AMP_CUDA_TEST_ISNAN, 0);
}
AmpCode amp_cuda_isinf(AmpKernelCtx *k) {
    const AmpEwParams *a = k->attrs; /* amp_ew_prepare_isinf: mode 1 positive | 2 negative */
    return test(k, AMP_CUDA_TEST_ISINF, a ? a->mode : 3);
}

/* ---- unary math and activations ------------------------------------------------------------- */

/* Output 0 = f(x) of x's dtype and shape; ints says which integer dtypes the op takes. */
static AmpCode unary(AmpKernelCtx *k, int op, unsigned ints, const AmpCudaEwParams *p) {
    AmpCode rc = amp_ew_need(k, 1);
    if (rc) return rc;
    const AmpBuf *x = k->in[0];
    if (!dt_in(x->dtype, FLOATS | ints)) return amp_kernel_bad_dtype(k, x->dtype);
    AmpBuf *out;
    if ((rc = amp_ew_out(k, x->dtype, x->rank, x->dims, &out)) || !out) return rc;
    return launched(k, amp_cuda_ew_unary(op, x->dtype, out->data, x->data, x->nelem, p, stream_of(k)));
}

/* The CUDA lines of ops/unary.def by op id: the launcher's op, the integer types the op
 * takes (TYPES FI: int32, int64), whether it reads the attributes its prepare parsed. */
typedef struct UnaryOp {
    bool cuda;
    int code;
    unsigned ints;
    AmpKernelPrepareFn prepare;
} UnaryOp;

static const UnaryOp unary_ops[AMP_OP__COUNT] = {
#define AMP_UNARY(Id, FEXPR, DEXPR, PREPARE, TYPES, LUT, CUDA, FUSE)                                                   \
    AMP_UNARY_CUDA_##CUDA([AMP_OP_##Id] = {true, AMP_CUDA_UN_##Id, AMP_UNARY_INT_##TYPES ? INTS : 0, PREPARE},)
#include "ops/unary.def"
#undef AMP_UNARY
};

AmpCode amp_cuda_unary(AmpKernelCtx *k) {
    AmpOpId op = k->node->op;
    const UnaryOp *u = (unsigned)op < AMP_OP__COUNT ? &unary_ops[op] : NULL;
    if (!u || !u->cuda) return amp_kernel_fail(k, AMP_ERR_INTERNAL, "no CUDA line of ops/unary.def for the op");
    AmpCudaEwParams p;
    memset(&p, 0, sizeof p);
    if (u->prepare) { /* the AmpEwParams its prepare parsed (ops/ew_common.h) */
        if (!k->attrs) return amp_kernel_fail(k, AMP_ERR_INTERNAL, "attributes were not prepared");
        p.ew = *(const AmpEwParams *)k->attrs;
    }
    return unary(k, u->code, u->ints, &p);
}

/* ---- Clip ---------------------------------------------------------------------------------- */

AmpCode amp_cuda_clip(AmpKernelCtx *k) {
    AmpCode rc = amp_ew_need(k, 1);
    if (rc) return rc;
    const AmpBuf *x = k->in[0], *lo = NULL, *hi = NULL;
    const AmpClipAttrs *a = k->attrs; /* amp_ew_prepare_clip: exact in float (read as floats) */
    AmpCudaEwParams p;
    memset(&p, 0, sizeof p);
    p.lo_f = a ? (float)a->lo : -INFINITY;
    p.hi_f = a ? (float)a->hi : INFINITY;
    /* bounds of opset 11+: one element of x's type, read on the device */
    if (k->opset >= 11 && ((rc = amp_ew_clip_bound(k, 1, x, &lo)) || (rc = amp_ew_clip_bound(k, 2, x, &hi))))
        return rc;
    p.lo = lo ? lo->data : NULL;
    p.hi = hi ? hi->data : NULL;
    return unary(k, AMP_CUDA_UN_CLIP, INTS, &p);
}

/* ---- Where, Expand --------------------------------------------------------------------------- */

/* Where(condition, X, Y): condition bool, X and Y one dtype of 1, 2, 4 or 8 bytes. */
AmpCode amp_cuda_where(AmpKernelCtx *k) {
    size_t bits;
    int rank;
    int64_t dims[AMP_MAX_RANK];
    AmpBuf *out;
    AmpCode rc = amp_ew_where_out(k, &bits, &rank, dims, &out); /* the checks: ops/ew_common.h */
    if (rc || !out || !out->nelem) return rc;
    const AmpBuf *cond = k->in[0], *x = k->in[1], *y = k->in[2];
    Plan p;
    AmpCudaBcast bc;
    plan(&p, rank, dims, 3, k->in);
    return launched(k, amp_cuda_ew_where((int)(bits / 8), out->data, cond->data, x->data, y->data, to_bcast(&p, &bc),
                                         out->nelem, stream_of(k)));
}

/* ---- Cast, CastLike ---------------------------------------------------------------------------- */

#define CASTABLE                                                                                             \
    (FLOATS | INTS | DTM(AMP_DT_DOUBLE) | DTM(AMP_DT_BOOL) | DTM(AMP_DT_INT8) | DTM(AMP_DT_INT16) |          \
     DTM(AMP_DT_UINT8) | DTM(AMP_DT_UINT16) | DTM(AMP_DT_UINT32) | DTM(AMP_DT_UINT64))

static AmpCode cast_to(AmpKernelCtx *k, const AmpBuf *x, int to) {
    if (!dt_in(x->dtype, CASTABLE)) return amp_kernel_bad_dtype(k, x->dtype);
    if (!dt_in(to, CASTABLE)) return amp_kernel_bad_dtype(k, to);
    AmpBuf *y;
    AmpCode rc = amp_ew_out(k, to, x->rank, x->dims, &y);
    if (rc || !y || !x->nelem) return rc;
    if (to == x->dtype) return amp_cuda_copy(k, y->data, x->data, amp_buf_bytes(x));
    return launched(k, amp_cuda_ew_cast(x->dtype, to, y->data, x->data, x->nelem, stream_of(k)));
}

AmpCode amp_cuda_cast(AmpKernelCtx *k) {
    AmpCode rc = amp_ew_need(k, 1);
    if (rc) return rc;
    const CastAttrs *a = k->attrs;
    if (!a) return amp_kernel_fail(k, AMP_ERR_INTERNAL, "attributes were not prepared");
    return cast_to(k, k->in[0], a->to);
}

AmpCode amp_cuda_cast_like(AmpKernelCtx *k) {
    AmpCode rc = amp_ew_need(k, 2);
    return rc ? rc : cast_to(k, k->in[0], k->in[1]->dtype);
}

/* ---- supports predicates ------------------------------------------------------------------------ */

/* Inputs 0..n_inputs-1 all present, between lo and hi of them, one dtype within mask. */
static bool same_dtype_in(const AmpNode *n, const int *in_dtypes, int lo, int hi, unsigned mask) {
    if (n->n_inputs < lo || n->n_inputs > hi) return false;
    for (int i = 0; i < n->n_inputs; i++)
        if (!n->inputs[i] || in_dtypes[i] != in_dtypes[0]) return false;
    return dt_in(in_dtypes[0], mask);
}

/* Add, Sub, Mul: float family, int32, int64. */
bool amp_cuda_supports_arith(const AmpNode *n, int64_t opset, const int *in_dtypes) {
    (void)opset;
    return same_dtype_in(n, in_dtypes, 2, 2, FLOATS | INTS);
}

/* Div, Pow, PRelu: the float family (integer Div refuses x / 0 on the CPU, which the
 * device cannot report without a sync; integer and mixed-type Pow stay there too). */
bool amp_cuda_supports_float2(const AmpNode *n, int64_t opset, const int *in_dtypes) {
    (void)opset;
    return same_dtype_in(n, in_dtypes, 2, 2, FLOATS);
}

bool amp_cuda_supports_sum(const AmpNode *n, int64_t opset, const int *in_dtypes) {
    (void)opset;
    return same_dtype_in(n, in_dtypes, 1, INT_MAX, FLOATS);
}

bool amp_cuda_supports_maxmin(const AmpNode *n, int64_t opset, const int *in_dtypes) {
    (void)opset;
    return same_dtype_in(n, in_dtypes, 1, INT_MAX, FLOATS | INTS);
}

bool amp_cuda_supports_compare(const AmpNode *n, int64_t opset, const int *in_dtypes) {
    (void)opset;
    return same_dtype_in(n, in_dtypes, 2, 2, FLOATS | INTS | DTM(AMP_DT_BOOL));
}

/* And, Or, Not. */
bool amp_cuda_supports_bool(const AmpNode *n, int64_t opset, const int *in_dtypes) {
    (void)opset;
    return same_dtype_in(n, in_dtypes, 1, 2, DTM(AMP_DT_BOOL));
}

/* Neg, Abs, Sign, Relu. */
bool amp_cuda_supports_float_or_int(const AmpNode *n, int64_t opset, const int *in_dtypes) {
    (void)opset;
    return same_dtype_in(n, in_dtypes, 1, 1, FLOATS | INTS);
}

/* Clip: x of the float family, int32 or int64; present bounds of x's dtype. */
bool amp_cuda_supports_clip(const AmpNode *n, int64_t opset, const int *in_dtypes) {
    (void)opset;
    if (n->n_inputs < 1 || n->n_inputs > 3 || !n->inputs[0] || !dt_in(in_dtypes[0], FLOATS | INTS)) return false;
    for (int i = 1; i < n->n_inputs; i++)
        if (n->inputs[i] && in_dtypes[i] != in_dtypes[0]) return false;
    return true;
}

static bool movable(int dt) {
    size_t bits = dt > AMP_DT_UNDEFINED ? amp_dtype_bits(dt) : 0;
    return dt != AMP_DT_STRING && (bits == 8 || bits == 16 || bits == 32 || bits == 64);
}

bool amp_cuda_supports_where(const AmpNode *n, int64_t opset, const int *in_dtypes) {
    (void)opset;
    return n->n_inputs == 3 && n->inputs[0] && n->inputs[1] && n->inputs[2] && in_dtypes[0] == AMP_DT_BOOL &&
           in_dtypes[1] == in_dtypes[2] && movable(in_dtypes[1]);
}


/* Cast: the 13 numeric dtypes both ways, 'to' as an integer (Cast-6+). */
bool amp_cuda_supports_cast(const AmpNode *n, int64_t opset, const int *in_dtypes) {
    (void)opset;
    const AmpAttr *to = amp_node_attr(n, "to");
    return n->n_inputs == 1 && n->inputs[0] && dt_in(in_dtypes[0], CASTABLE) && to && to->type == AMP_ATTR_INT &&
           to->i > 0 && to->i < 32 && dt_in((int)to->i, CASTABLE);
}

bool amp_cuda_supports_cast_like(const AmpNode *n, int64_t opset, const int *in_dtypes) {
    (void)opset;
    return n->n_inputs == 2 && n->inputs[0] && n->inputs[1] && dt_in(in_dtypes[0], CASTABLE) &&
           dt_in(in_dtypes[1], CASTABLE);
}
