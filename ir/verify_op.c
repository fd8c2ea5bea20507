/* The verifier's checks of a node against its op's rules (verify.c walks the graphs and
 * calls them): arity and required inputs and outputs, the dtypes of float data slots,
 * Cast's 'to', and the inputs and bodies of If, Loop and Scan. */
#include <stdio.h>
#include <string.h>

#include "ir/ir.h"
#include "ir/verify_impl.h"

static void arity_text(int lo, int hi, char *buf, size_t len) {
    if (hi < 0) snprintf(buf, len, "at least %d", lo);
    else if (lo == hi) snprintf(buf, len, "exactly %d", lo);
    else snprintf(buf, len, "%d to %d", lo, hi);
}

AmpCode amp_verify_arity(Ctx *c, const AmpGraph *g, const AmpNode *n) {
    if (n->op == AMP_OP_UNKNOWN) return AMP_OK; /* unknown ops: any arity */
    const AmpOpInfo *info = amp_op_info(n->op);
    if (!info) return AMP_OK;
    char want[64];
    if (n->n_inputs < info->min_inputs ||
        (info->max_inputs >= 0 && n->n_inputs > info->max_inputs)) {
        arity_text(info->min_inputs, info->max_inputs, want, sizeof want);
        return vfail(c, AMP_ERR_INPUT, g, n, "has %d inputs, %s takes %s", n->n_inputs,
                     n->op_type, want);
    }
    if (n->n_outputs < info->min_outputs ||
        (info->max_outputs >= 0 && n->n_outputs > info->max_outputs)) {
        arity_text(info->min_outputs, info->max_outputs, want, sizeof want);
        return vfail(c, AMP_ERR_INPUT, g, n, "has %d outputs, %s gives %s", n->n_outputs,
                     n->op_type, want);
    }
    /* A left-out ("") input below min_inputs is one every opset of the op requires (the
     * table's minimum is the least over all opsets): an error, as onnx.checker says. Loop
     * (M and cond) and Scan-8 (sequence_lens) lead with optional inputs. */
    if (n->op != AMP_OP_Loop && n->op != AMP_OP_Scan)
        for (int i = 0; i < info->min_inputs && i < n->n_inputs; i++)
            if (!n->inputs[i])
                return vfail(c, AMP_ERR_INPUT, g, n, "input %d is left out (\"\"), but %s requires it", i,
                             n->op_type);
    for (int i = 0; i < info->min_outputs && i < n->n_outputs; i++)
        if (!n->outputs[i])
            return vfail(c, AMP_ERR_INPUT, g, n, "output %d is left out (\"\"), but %s requires it", i, n->op_type);
    return AMP_OK;
}

/* Float data slots of arithmetic ops (classes allow and deny: GEMMs, convolutions,
 * exp/log, reductions, norms, losses, optimizers) never take bool or string. Other
 * dtypes are left alone: integer MatMul or Add are legal, and type inference (infer.c)
 * does the real checking; clear/infer ops (Concat, Where, Identity...) accept any type. */
AmpCode amp_verify_slot_dtypes(Ctx *c, const AmpGraph *g, const AmpNode *n) {
    if (n->op == AMP_OP_UNKNOWN) return AMP_OK;
    const AmpOpInfo *info = amp_op_info(n->op);
    if (!info || (info->fp16_class != AMP_CLASS_ALLOW && info->fp16_class != AMP_CLASS_DENY))
        return AMP_OK;
    for (int i = 0; i < n->n_inputs && i < 32; i++) {
        const AmpValue *v = n->inputs[i];
        if (!v || !(info->float_inputs & AMP_SLOT(i)) || v->type.kind != AMP_TYPE_TENSOR)
            continue;
        if (v->type.dtype == AMP_DT_BOOL || v->type.dtype == AMP_DT_STRING)
            return vfail(c, AMP_ERR_INPUT, g, n, "input %d '%s' is %s, but %s takes numbers there",
                         i, v->name, amp_dtype_name(v->type.dtype), n->op_type);
    }
    return AMP_OK;
}

/* Binary elementwise ops before opset 7 broadcast only with `broadcast=1`: B to A's shape,
 * aligned at `axis` (default: B's dims are A's last ones). ampc's shape functions and
 * kernels broadcast as opset 7 on does, which is the same when B is aligned with A's last
 * dims and each of B's dims is 1 or A's. So a node aligned elsewhere is refused
 * (unsupported), one whose known dims do not broadcast so is an error, and without
 * `broadcast` the two inputs must have one shape where both are known. (Found by
 * fuzz_run: the kernel and the shape function disagreed, an internal error.) */
AmpCode amp_verify_legacy_broadcast(Ctx *c, const AmpGraph *g, const AmpNode *n) {
    switch (n->op) {
    case AMP_OP_Add: case AMP_OP_Sub: case AMP_OP_Mul: case AMP_OP_Div: case AMP_OP_Pow:
    case AMP_OP_And: case AMP_OP_Or: case AMP_OP_Equal: case AMP_OP_Greater: case AMP_OP_Less: break;
    default: return AMP_OK;
    }
    int64_t v = amp_model_opset(g->model, n->domain ? n->domain : "");
    if (v <= 0 || v >= 7 || n->n_inputs != 2 || !n->inputs[0] || !n->inputs[1]) return AMP_OK;
    const AmpType *a = &n->inputs[0]->type, *b = &n->inputs[1]->type;
    if (a->kind != AMP_TYPE_TENSOR || b->kind != AMP_TYPE_TENSOR || a->rank < 0 || b->rank < 0 ||
        (a->rank && !a->dims) || (b->rank && !b->dims))
        return AMP_OK;
    bool bc = amp_node_attr_int(n, "broadcast", 0) != 0;
    if (bc) {
        int64_t axis = amp_node_attr_int(n, "axis", a->rank - b->rank);
        if (b->rank > a->rank || axis != a->rank - b->rank)
            return vfail(c, AMP_ERR_UNSUPPORTED, g, n, "%s-%lld with broadcast=1 aligns B at axis %lld, not with A's "
                         "last dims, which ampc does not support; upgrade the model to opset 7 or later "
                         "(onnx.version_converter)", n->op_type, (long long)v, (long long)axis);
    } else if (a->rank != b->rank)
        return vfail(c, AMP_ERR_INPUT, g, n, "%s-%lld without broadcast=1 takes inputs of one shape, but '%s' and '%s' "
                     "differ", n->op_type, (long long)v, n->inputs[0]->name, n->inputs[1]->name);
    for (int i = 0; i < b->rank; i++) {
        int64_t da = a->dims[a->rank - b->rank + i].value, db = b->dims[i].value;
        if (da < 0 || db < 0 || da == db || (bc && db == 1)) continue;
        return vfail(c, AMP_ERR_INPUT, g, n, "%s-%lld: '%s' %s the shape of '%s' (its dim %d is %lld, against %lld)",
                     n->op_type, (long long)v, n->inputs[1]->name, bc ? "does not broadcast to" : "does not have",
                     n->inputs[0]->name, i, (long long)db, (long long)da);
    }
    return AMP_OK;
}

/* Inputs an op's version does not have: the op table's arity is the widest over all
 * opsets (TopK took k as an attribute before 10), so a node of an older version with the
 * newer inputs passed it, and the kernel and the shape function then read different
 * versions of the op (fuzz_run found it with TopK-9). And where the newer inputs are axes
 * or k, they are int64. */
typedef struct InputsSince {
    AmpOpId op;
    int since;    /* the opset that added input 1 */
} InputsSince;

AmpCode amp_verify_version_inputs(Ctx *c, const AmpGraph *g, const AmpNode *n) {
    static const InputsSince rows[] = {
        {AMP_OP_TopK, 10}, {AMP_OP_Squeeze, 13}, {AMP_OP_Unsqueeze, 13}, {AMP_OP_ReduceSum, 13},
        {AMP_OP_ReduceMean, 18}, {AMP_OP_ReduceMax, 18}, {AMP_OP_ReduceMin, 18}, {AMP_OP_ReduceProd, 18},
        {AMP_OP_ReduceL1, 18}, {AMP_OP_ReduceL2, 18}, {AMP_OP_ReduceLogSum, 18}, {AMP_OP_ReduceLogSumExp, 18},
        {AMP_OP_ReduceSumSquare, 18},
    };
    const InputsSince *row = NULL;
    for (size_t i = 0; i < sizeof rows / sizeof *rows && !row; i++)
        if (rows[i].op == n->op) row = &rows[i];
    if (!row || n->n_inputs < 2 || !n->inputs[1]) return AMP_OK;
    int64_t v = amp_model_opset(g->model, n->domain ? n->domain : "");
    if (v > 0 && v < row->since)
        return vfail(c, AMP_ERR_INPUT, g, n, "%s-%lld takes one input (its second, '%s', came with opset %d)",
                     n->op_type, (long long)v, n->inputs[1]->name, row->since);
    const AmpType *t = &n->inputs[1]->type;
    if (t->kind == AMP_TYPE_TENSOR && t->dtype != AMP_DT_UNDEFINED && t->dtype != AMP_DT_INT64)
        return vfail(c, AMP_ERR_INPUT, g, n, "input 1 '%s' of %s is %s; it must be int64", n->inputs[1]->name,
                     n->op_type, amp_dtype_name(t->dtype));
    return AMP_OK;
}

/* Cast: 'to' names a data type, and a declared output type agrees with it. */
AmpCode amp_verify_cast(Ctx *c, const AmpGraph *g, const AmpNode *n) {
    if (n->op != AMP_OP_Cast) return AMP_OK; /* check_binding: op agrees with op_type */
    const AmpAttr *to = amp_node_attr(n, "to");
    if (!to) return vfail(c, AMP_ERR_INPUT, g, n, "Cast has no 'to' attribute");
    int64_t dt;
    if (to->type == AMP_ATTR_STRING && (to->has & AMP_ATTR_HAS_S)) {
        /* Cast-1 named the type: "FLOAT", "FLOAT16", ... (TensorProto's enum names). */
        char name[32];
        size_t len = to->s.len < sizeof name - 1 ? to->s.len : sizeof name - 1;
        for (size_t i = 0; i < len; i++) {
            char ch = (char)to->s.data[i];
            name[i] = ch >= 'A' && ch <= 'Z' ? (char)(ch - 'A' + 'a') : ch;
        }
        name[len] = '\0';
        dt = to->s.len < sizeof name ? amp_dtype_from_name(name) : -1;
        if (dt <= AMP_DT_UNDEFINED)
            return vfail(c, AMP_ERR_INPUT, g, n, "Cast 'to' = \"%s\" is not a valid data type",
                         name);
    } else if (to->type != AMP_ATTR_INT) {
        return vfail(c, AMP_ERR_INPUT, g, n, "attribute 'to' has type %s, but Cast expects INT",
                     amp_verify_attr_type_name(to->type));
    } else {
        dt = to->i;
        if (dt <= AMP_DT_UNDEFINED || dt >= AMP_DT__COUNT)
            return vfail(c, AMP_ERR_INPUT, g, n, "Cast 'to' = %lld is not a valid data type",
                         (long long)dt);
    }
    const AmpValue *y = n->n_outputs > 0 ? n->outputs[0] : NULL;
    if (y && y->type.kind == AMP_TYPE_TENSOR && y->type.dtype != AMP_DT_UNDEFINED &&
        y->type.dtype != dt)
        return vfail(c, AMP_ERR_INPUT, g, n, "output 0 '%s' is declared %s but Cast converts to %s",
                     y->name, amp_dtype_name(y->type.dtype), amp_dtype_name((int)dt));
    return AMP_OK;
}

/* Input i of n, where the model types it: dtype `dt` and (where its dims are all known)
 * one element. The executor reads If's condition and Loop's M and cond as one element:
 * an empty or float one was read past its end, or as zero iterations. */
static AmpCode check_scalar_input(Ctx *c, const AmpGraph *g, const AmpNode *n, int i, int dt, const char *what) {
    const AmpValue *v = i < n->n_inputs ? n->inputs[i] : NULL;
    if (!v || v->type.kind != AMP_TYPE_TENSOR) return AMP_OK;
    if (v->type.dtype != AMP_DT_UNDEFINED && v->type.dtype != dt)
        return vfail(c, AMP_ERR_INPUT, g, n, "%s '%s' is %s; %s takes %s", what, v->name, amp_dtype_name(v->type.dtype),
                     n->op_type, amp_dtype_name(dt));
    int64_t count = 1;
    for (int d = 0; d < v->type.rank && count >= 0; d++) count = v->type.dims[d].value < 0 ? -1 : count * v->type.dims[d].value;
    if (v->type.rank >= 0 && count >= 0 && count != 1)
        return vfail(c, AMP_ERR_INPUT, g, n, "%s '%s' holds %lld elements; %s takes one", what, v->name,
                     (long long)count, n->op_type);
    return AMP_OK;
}

static const AmpGraph *graph_attr(const AmpNode *n, const char *name) {
    const AmpAttr *a = amp_node_attr(n, name);
    return a && a->type == AMP_ATTR_GRAPH ? a->g : NULL;
}

/* If, Loop and Scan as onnx.checker has them: If's condition a bool element and both
 * branches, giving as many outputs as the node lists; Loop's M an int64 element and its
 * condition a bool one; a body for Loop and Scan. */
AmpCode amp_verify_control_flow(Ctx *c, const AmpGraph *g, const AmpNode *n) {
    AmpCode rc = AMP_OK;
    if (n->op == AMP_OP_If) {
        const AmpGraph *t = graph_attr(n, "then_branch"), *e = graph_attr(n, "else_branch");
        if (!t || !e) return vfail(c, AMP_ERR_INPUT, g, n, "If needs both then_branch and else_branch");
        if (t->outputs.n != e->outputs.n || t->outputs.n != (size_t)n->n_outputs)
            return vfail(c, AMP_ERR_INPUT, g, n, "If's branches give %zu and %zu outputs, the node lists %d",
                         t->outputs.n, e->outputs.n, n->n_outputs);
        rc = check_scalar_input(c, g, n, 0, AMP_DT_BOOL, "the condition");
    } else if (n->op == AMP_OP_Loop) {
        if (!graph_attr(n, "body")) return vfail(c, AMP_ERR_INPUT, g, n, "Loop has no body");
        rc = check_scalar_input(c, g, n, 0, AMP_DT_INT64, "the trip count M");
        if (!rc) rc = check_scalar_input(c, g, n, 1, AMP_DT_BOOL, "the condition");
    } else if (n->op == AMP_OP_Scan) {
        if (!graph_attr(n, "body")) return vfail(c, AMP_ERR_INPUT, g, n, "Scan has no body");
    }
    return rc;
}
