/* The fused nodes' program parsing and run checks, every backend's (ops/fused_check.h). */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "ir/half.h"
#include "ops/fused_check.h"
#include "ops/kernel_out.h"

#define AMP_FUSED_ROUND_F16(x) amp_f16_to_f32(amp_f32_to_f16(x))
#define AMP_FUSED_ROUND_BF16(x) amp_bf16_to_f32(amp_f32_to_bf16(x))
#include "ops/fused_eval.h"
#include "ir/front.h"

static_assert((int)AMP_FDT_FLOAT == (int)AMP_DT_FLOAT && (int)AMP_FDT_INT32 == (int)AMP_DT_INT32 &&
                  (int)AMP_FDT_INT64 == (int)AMP_DT_INT64 && (int)AMP_FDT_BOOL == (int)AMP_DT_BOOL &&
                  (int)AMP_FDT_FLOAT16 == (int)AMP_DT_FLOAT16 && (int)AMP_FDT_BFLOAT16 == (int)AMP_DT_BFLOAT16,
              "fused_eval.h's dtype numbers are ir.h's");
static_assert(AMP_OP__COUNT <= 256, "AMP_FOP_UNARY's op fits its uint8_t operand b");

/* ---- the program: parsed and checked once ---------------------------------------- */

/* Whether AMP_FOP_UNARY may run op (an AmpOpId): a line of ops/unary.def whose FUSE
 * column is 1. */
static bool unary_fuses(int64_t op) {
    switch (op) {
#define AMP_UNARY(Id, FEXPR, DEXPR, PREPARE, TYPES, LUT, CUDA, FUSE) AMP_UNARY_FUSE_##FUSE(case AMP_OP_##Id:)
#include "ops/unary.def"
#undef AMP_UNARY
        return true;
    default: return false;
    }
}

/* The class each operand of op must have, given the result's class rc and the operands'
 * classes c[0..n): false when the combination is not a valid instruction. */
static bool operands_ok(int op, int rc, const int *c, int n) {
    switch (op) {
    case AMP_FOP_ADD: case AMP_FOP_SUB: case AMP_FOP_MUL: case AMP_FOP_MAX: case AMP_FOP_MIN:
        return n == 2 && c[0] == c[1] && c[0] == rc && rc != AMP_FCLASS_B;
    case AMP_FOP_DIV: case AMP_FOP_POW:
        return n == 2 && c[0] == AMP_FCLASS_F && c[1] == AMP_FCLASS_F && rc == AMP_FCLASS_F;
    case AMP_FOP_NEG: case AMP_FOP_ABS: case AMP_FOP_RELU:
        return n == 1 && c[0] == rc && rc != AMP_FCLASS_B;
    case AMP_FOP_UNARY: return n == 1 && c[0] == AMP_FCLASS_F && rc == AMP_FCLASS_F;
    case AMP_FOP_EQ: case AMP_FOP_LT: case AMP_FOP_GT: case AMP_FOP_LE: case AMP_FOP_GE:
        return n == 2 && c[0] == c[1] && c[0] != AMP_FCLASS_B && rc == AMP_FCLASS_B;
    case AMP_FOP_NOT: return n == 1 && c[0] == AMP_FCLASS_B && rc == AMP_FCLASS_B;
    case AMP_FOP_AND: case AMP_FOP_OR: case AMP_FOP_XOR:
        return n == 2 && c[0] == AMP_FCLASS_B && c[1] == AMP_FCLASS_B && rc == AMP_FCLASS_B;
    case AMP_FOP_WHERE: return n == 3 && c[0] == AMP_FCLASS_B && c[1] == rc && c[2] == rc;
    case AMP_FOP_CAST:
        return n == 1 && ((c[0] == AMP_FCLASS_F && rc == AMP_FCLASS_F) || (c[0] == AMP_FCLASS_B && rc != AMP_FCLASS_B));
    case AMP_FOP_ISNAN: case AMP_FOP_ISINF: return n == 1 && c[0] == AMP_FCLASS_F && rc == AMP_FCLASS_B;
    case AMP_FOP_IDENT: return n == 1 && c[0] == rc;
    default: return false;
    }
}

/* Operands each opcode reads. */
static int arity(int op) {
    switch (op) {
    case AMP_FOP_NEG: case AMP_FOP_ABS: case AMP_FOP_RELU: case AMP_FOP_NOT: case AMP_FOP_CAST: case AMP_FOP_ISNAN:
    case AMP_FOP_ISINF: case AMP_FOP_IDENT: case AMP_FOP_UNARY:
        return 1;
    case AMP_FOP_WHERE: return 3;
    default: return 2;
    }
}

static const AmpAttr *ints_attr(const AmpNode *n, const char *name) {
    const AmpAttr *a = amp_node_attr(n, name);
    return a && a->type == AMP_ATTR_INTS ? a : NULL;
}

static AmpCode bad(const AmpNode *n, AmpStatus *st, const char *what) {
    return amp_node_fail(n, st, AMP_ERR_INPUT, "fused program: %s", what);
}

/* The instructions of `program` (5 ints each: opcode, dtype, operands a, b, c), checked:
 * operands name earlier registers of the classes the opcode reads. */
static AmpCode parse_instrs(const AmpNode *n, const AmpAttr *prog, AmpFusedProg *p, uint8_t *cls, AmpStatus *st) {
    if (prog->n_ints % 5 || prog->n_ints / 5 > AMP_FUSED_MAX_INSTR) return bad(n, st, "too long or malformed");
    p->n_instr = (int)(prog->n_ints / 5);
    for (int j = 0; j < p->n_instr; j++) {
        const int64_t *w = prog->ints + 5 * j;
        int reg = p->n_in + j, rc = w[1] > 0 && w[1] < 64 ? amp_fused_class((int)w[1]) : 0;
        int na = w[0] > 0 && w[0] < AMP_FOP__COUNT ? arity((int)w[0]) : 0, c[3] = {0, 0, 0};
        if (!rc || !na) return bad(n, st, "an unknown opcode or dtype");
        for (int k = 0; k < na; k++) {
            if (w[2 + k] < 0 || w[2 + k] >= reg) return bad(n, st, "an operand that is not an earlier register");
            c[k] = cls[w[2 + k]];
        }
        if (!operands_ok((int)w[0], rc, c, na)) return bad(n, st, "operands of the wrong kind for their opcode");
        bool un = w[0] == AMP_FOP_UNARY; /* b: the op */
        if (un && !unary_fuses(w[3])) return bad(n, st, "a unary op that does not fuse");
        p->ins[j] = (AmpFusedInstr){(uint8_t)w[0], (uint8_t)w[1], (uint8_t)w[2], (uint8_t)(na > 1 || un ? w[3] : 0),
                                    (uint8_t)(na > 2 ? w[4] : 0)};
        cls[reg] = (uint8_t)rc;
    }
    return AMP_OK;
}

AmpCode amp_fused_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    (void)opset;
    const AmpAttr *prog = ints_attr(n, "program"), *ind = ints_attr(n, "in_dtypes"), *outs = ints_attr(n, "outputs"),
                  *odt = ints_attr(n, "out_dtypes");
    AmpFusedProg p;
    memset(&p, 0, sizeof p);
    int64_t sets = amp_node_attr_int(n, "tensors", 1);
    if (sets < 1 || n->n_inputs % sets || n->n_outputs % sets) return bad(n, st, "tensors does not divide its inputs and outputs");
    p.tensors = (int)sets;
    p.n_in = n->n_inputs / p.tensors;
    p.n_out = n->n_outputs / p.tensors;
    p.shape_input = (int)amp_node_attr_int(n, "shape_input", -1);
    if (!prog || !ind || !outs || !odt) return bad(n, st, "needs program, in_dtypes, outputs and out_dtypes");
    if (p.n_in < 1 || p.n_in > AMP_FUSED_MAX_IN || p.n_out < 1 || p.n_out > AMP_FUSED_MAX_OUT ||
        ind->n_ints != (size_t)p.n_in || outs->n_ints != (size_t)p.n_out || odt->n_ints != (size_t)p.n_out)
        return bad(n, st, "input or output counts that do not match its attributes");
    if (p.shape_input < 0 || p.shape_input >= p.n_in) return bad(n, st, "shape_input is not an input");
    for (int i = 0; i < n->n_inputs; i++)
        if (!n->inputs[i]) return bad(n, st, "an input left out");
    uint8_t cls[AMP_FUSED_MAX_REG];
    for (int i = 0; i < p.n_in; i++) {
        int c = ind->ints[i] > 0 && ind->ints[i] < 64 ? amp_fused_class((int)ind->ints[i]) : 0;
        if (!c) return bad(n, st, "an input of a dtype it does not take");
        p.in_dtype[i] = (uint8_t)ind->ints[i];
        cls[i] = (uint8_t)c;
    }
    AmpCode rc = parse_instrs(n, prog, &p, cls, st);
    if (rc) return rc;
    for (int o = 0; o < p.n_out; o++) {
        int64_t r = outs->ints[o];
        if (r < 0 || r >= p.n_in + p.n_instr) return bad(n, st, "an output that is no register");
        int dt = r < p.n_in ? p.in_dtype[r] : p.ins[r - p.n_in].dtype;
        if (odt->ints[o] != dt) return bad(n, st, "an output dtype that is not its register's");
        p.out_reg[o] = (uint8_t)r;
        p.out_dtype[o] = (uint8_t)dt;
    }
    if (!(*attrs = malloc(sizeof p))) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    memcpy(*attrs, &p, sizeof p);
    return AMP_OK;
}

/* ---- a run's inputs and outputs, checked alike on every backend -------------------- */

/* Whether b's elements, repeated, make shape's: b is shape's trailing dims, leading 1s
 * aside (shape itself, a bias over the last axes). */
bool amp_fused_repeats(const AmpBuf *b, const AmpBuf *shape) {
    int skip = 0;
    while (skip < b->rank && b->dims[skip] == 1) skip++;
    int r = b->rank - skip;
    if (r > shape->rank) return false;
    for (int d = 0; d < r; d++)
        if (b->dims[skip + d] != shape->dims[shape->rank - r + d]) return false;
    return b->nelem > 0 || shape->nelem == 0;
}

/* Set t's inputs hold their dtypes and either the set's shape input's elements, its
 * trailing dims (repeated) or one element. */
static AmpCode check_inputs(AmpKernelCtx *k, const AmpFusedProg *p, int t, const AmpBuf *shape) {
    for (int i = 0; i < p->n_in; i++) {
        int at = t * p->n_in + i;
        const AmpBuf *b = at < k->n_in ? k->in[at] : NULL;
        if (!b) return amp_kernel_fail(k, AMP_ERR_INPUT, "input %d is missing", at);
        if (b->dtype != p->in_dtype[i])
            return amp_kernel_fail(k, AMP_ERR_INPUT, "input %d is %s, the program reads %s", at,
                                   amp_dtype_name(b->dtype), amp_dtype_name(p->in_dtype[i]));
        if (b->nelem != 1 && !amp_fused_repeats(b, shape))
            return amp_kernel_fail(k, AMP_ERR_INPUT,
                                   "input %d ('%s') is not shaped as input %d nor one element: the plan fused these "
                                   "nodes from the model's declared shapes, which this run contradicts (%s runs them "
                                   "apart)", at, k->node->inputs[at] ? k->node->inputs[at]->name : "",
                                   t * p->n_in + p->shape_input,
                                   /* the options table's spelling (passes/options.c), which ops/ cannot call */
                                   amp_front() == AMP_FRONT_CLI ? "--no-fuse" : "no_fuse");
    }
    return AMP_OK;
}

AmpCode amp_fused_check(AmpKernelCtx *k, const AmpFusedProg *p, AmpBuf **out) {
    if (k->n_in != p->tensors * p->n_in || k->n_out != p->tensors * p->n_out)
        return amp_kernel_fail(k, AMP_ERR_INPUT, "inputs or outputs that are not %d sets", p->tensors);
    AmpCode rc = amp_kernel_outputs(k, k->n_out, out);
    for (int t = 0; t < p->tensors && !rc; t++) {
        const AmpBuf *shape = k->in[t * p->n_in + p->shape_input];
        if (!shape) return amp_kernel_fail(k, AMP_ERR_INPUT, "input %d is missing", t * p->n_in + p->shape_input);
        rc = check_inputs(k, p, t, shape);
        for (int o = 0; o < p->n_out && !rc; o++) {
            AmpBuf *y = out[t * p->n_out + o];
            if (y) rc = amp_kernel_check_out(k, y, p->out_dtype[o], shape->rank, shape->dims);
        }
    }
    return rc;
}

/* (inv_scale float32 scalar, found_before bool scalar or left out, X[N] float32/16-bit) ->
 * (G[N] = float32(X) * inv_scale, found = found_before or any G not finite): what the
 * loss_scale pass writes per gradient as [Cast,] Mul(X, inv) and ReduceSum(G * 0) (0, or
 * NaN for an inf or NaN), summed over gradients and tested by IsNaN. */
AmpCode amp_unscale_check_io(AmpKernelCtx *k, AmpBuf **out) {
    int N = k->n_in - 2;
    const AmpBuf *inv = k->n_in > 0 ? k->in[0] : NULL, *before = k->n_in > 1 ? k->in[1] : NULL;
    if (N < 1 || k->n_out != N + 1 || !inv)
        return amp_kernel_fail(k, AMP_ERR_INPUT, "expects (inv_scale, found, X[N]) -> (G[N], found)");
    if (inv->dtype != AMP_DT_FLOAT || inv->nelem != 1)
        return amp_kernel_fail(k, AMP_ERR_INPUT, "inv_scale must be one float32");
    if (before && (before->dtype != AMP_DT_BOOL || before->nelem != 1))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "found must be one bool");
    AmpCode rc = amp_kernel_outputs(k, N + 1, out);
    for (int j = 0; j <= N && !rc; j++) {
        const AmpBuf *x = j < N ? k->in[2 + j] : NULL;
        if (!out[j]) return amp_kernel_fail(k, AMP_ERR_INTERNAL, "every output must be wanted");
        if (j == N) return amp_kernel_check_out(k, out[N], AMP_DT_BOOL, 0, NULL);
        if (!x) return amp_kernel_fail(k, AMP_ERR_INPUT, "gradient %d is missing", j);
        if (x->dtype != AMP_DT_FLOAT && x->dtype != AMP_DT_FLOAT16 && x->dtype != AMP_DT_BFLOAT16)
            return amp_kernel_bad_dtype(k, x->dtype);
        rc = amp_kernel_check_out(k, out[j], AMP_DT_FLOAT, x->rank, x->dims);
    }
    return rc;
}
