/* Weights of inference graphs stored in 16 bits (docs/design.md, "The colouring lists and
 * the rules beside them", rule 4): a float32 initializer that only 16-bit nodes of its own
 * graph read is rewritten in place as float16 (or bfloat16) raw_data under the same name,
 * so the file shrinks and no Cast is needed. A float32 Constant node read the same way is a
 * weight too: its value (the `value` tensor, or `value_float` / `value_floats`, which
 * become a 16-bit `value`) is rewritten in the same node under the same output name. One
 * with a value the target type cannot hold (|x| > 65504 for float16, or not finite) stays
 * float32, is reported, and is cast where it is used. Training graphs keep every weight in
 * float32: the optimizer owns the master copy. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes/amp_impl.h"
#include "ir/half.h"

/* Largest finite magnitudes: float16 65504; bfloat16 0x7F7F (0x1.FEp127). Anything
 * beyond would round to infinity or lose its meaning. */
static double max_magnitude(int dt) {
    return dt == AMP_DT_FLOAT16 ? 65504.0 : 3.3895313892515355e38;
}

bool amp_read_only_by_16(const AmpRun *r, const AmpGraph *g, const AmpValue *v) {
    bool any16 = false;
    for (size_t u = 0; u < v->n_uses; u++) {
        const AmpUse *x = &v->uses[u];
        if (amp_reads_16(r, g, x->node, x->slot)) any16 = true;
        else if (!amp_reads_shape_only(x->node, x->slot)) return false;
    }
    return any16;
}

static void report(const AmpRun *r, const char *fmt, ...) AMP_PRINTF(2, 3);
static void report(const AmpRun *r, const char *fmt, ...) {
    if (!r->opt->notify) return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    r->opt->notify(r->opt->notify_ctx, line);
}

/* Whether the n float32 values of b (ONNX's raw layout, any alignment) fit the target
 * type. When one does not (|x| past the type's largest, or not finite), the weight (`what`
 * names it: "weight 'W'", "constant 'c' (node 'n')") is counted and reported as kept in
 * float32. */
static bool fits(AmpRun *r, AmpBytes b, size_t n, const char *what, const char *name, const char *node,
                 const AmpValue *v) {
    uint32_t most;
    if (!v || !amp_range_most(r, v, &most)) most = amp_f32_bytes_max(b.data, n);
    float worst;
    memcpy(&worst, &most, sizeof worst);
    bool finite = most < 0x7f800000u;
    if (finite && worst <= max_magnitude(r->dt)) return true;
    r->n_weights_kept++;
    char who[320];
    if (node)
        snprintf(who, sizeof who, "%s '%s' (node '%s')", what, name, node);
    else
        snprintf(who, sizeof who, "%s '%s'", what, name);
    if (finite)
        report(r, "%s has values outside %s's range (max |x| = %g): kept in float32, cast where it is used", who,
               amp_dtype_name(r->dt), (double)worst);
    else
        report(r, "%s has values that are not finite: kept in float32, cast where it is used", who);
    return false;
}

/* 16-bit weights of at least this many bytes are not made in the pass: the saver converts
 * them straight into the output (AmpTensor.narrow_from), so a conversion allocates and
 * fills no second copy of the model's weights (the kernel zeroing those fresh pages was
 * most of a BERT-base conversion). Smaller ones are made at once: the saver copies them
 * into its buffer anyway, and readers such as --print find them at hand. */
enum { DEFER_MIN_BYTES = 4096 };

/* Makes t hold the n float32 values of src (memory the model holds) in the target type,
 * as raw data: made now when small, else deferred. */
static AmpCode adopt(AmpRun *r, AmpValue *v, AmpTensor *t, const uint8_t *src, size_t n) {
    uint16_t *dst = NULL;
    if (n * sizeof *dst < DEFER_MIN_BYTES) {
        dst = malloc(n ? n * sizeof *dst : 1);
        if (!dst || !amp_model_own(r->m, dst)) {
            free(dst);
            return amp_fail(r->st, AMP_ERR_INTERNAL, "amp: out of memory converting '%s'", v->name);
        }
        if (r->dt == AMP_DT_FLOAT16) amp_f32_bytes_to_f16(dst, src, n);
        else amp_f32_bytes_to_bf16(dst, src, n);
    }
    t->dtype = r->dt;
    t->has |= AMP_TENSOR_HAS_DTYPE | AMP_TENSOR_HAS_RAW;
    t->has &= ~(unsigned)AMP_TENSOR_HAS_LOCATION;
    t->raw.data = (const uint8_t *)dst;
    t->raw.len = n * sizeof *dst;
    t->narrow_from = dst ? NULL : src;
    t->n_float = 0;
    t->float_data = NULL;
    t->is_external = false;
    t->data_location = 0;
    t->n_external = 0;
    t->external = NULL;
    v->type.dtype = r->dt;
    r->n_weights16++;
    return AMP_OK;
}

static AmpCode initializers(AmpRun *r, AmpGraph *g) {
    for (size_t i = 0; i < g->n_initializers; i++) {
        AmpTensor *t = g->initializers[i];
        AmpValue *v = t->name ? amp_graph_lookup(g, t->name) : NULL;
        if (!v || v->graph != g || v->initializer != t || !amp_is_f32(v) || t->dtype != AMP_DT_FLOAT)
            continue;
        /* Graph inputs with a default can be fed; outputs keep their type. */
        if ((v->flags & (AMP_VALUE_INPUT | AMP_VALUE_OUTPUT)) || !amp_read_only_by_16(r, g, v)) continue;
        AmpBytes b;
        AmpCode rc = amp_tensor_bytes(r->m, t, &b, r->st);
        if (rc) return rc;
        size_t n = (size_t)t->nelem;
        if (b.len < n * sizeof(float)) continue; /* the loader checked; be safe */
        if (fits(r, b, n, "weight", v->name, NULL, v) && (rc = adopt(r, v, t, b.data, n))) return rc;
    }
    return AMP_OK;
}

/* The one value attribute of Constant node n (ONNX allows exactly one), or NULL. */
static AmpAttr *constant_value(AmpNode *n) {
    static const char *const names[] = {"value",      "value_float",  "value_floats",  "value_int",
                                        "value_ints", "value_string", "value_strings", "sparse_value"};
    AmpAttr *found = NULL;
    for (size_t i = 0; i < n->n_attrs; i++)
        for (size_t k = 0; n->attrs[i].name && k < sizeof names / sizeof names[0]; k++)
            if (strcmp(n->attrs[i].name, names[k]) == 0) {
                if (found) return NULL; /* two: malformed; the executor says so */
                found = &n->attrs[i];
            }
    return found;
}

/* A float32 Constant node that only 16-bit nodes of g read: its value is stored in 16 bits
 * in the node itself (same node, same output name), as an initializer would be. */
static AmpCode constant_node(AmpRun *r, AmpGraph *g, AmpNode *n) {
    AmpValue *v = n->n_outputs == 1 ? n->outputs[0] : NULL;
    if (!amp_is_f32(v) || (v->flags & (AMP_VALUE_INPUT | AMP_VALUE_OUTPUT)) || !amp_read_only_by_16(r, g, v))
        return AMP_OK;
    /* Constant takes bfloat16 from opset 13 (float16 from opset 1). */
    if (r->dt == AMP_DT_BFLOAT16 && amp_model_opset(r->m, "") < 13) return AMP_OK;
    AmpAttr *a = constant_value(n);
    if (!a || a->ref_attr_name) return AMP_OK; /* a function's attribute reference: not ours */
    AmpModel *m = r->m;
    AmpBytes b;
    size_t cnt;
    AmpTensor *t;
    if (a->type == AMP_ATTR_TENSOR && a->t && a->t->dtype == AMP_DT_FLOAT && strcmp(a->name, "value") == 0) {
        t = a->t;
        AmpCode rc = amp_tensor_bytes(m, t, &b, r->st);
        if (rc) return rc;
        cnt = (size_t)t->nelem;
        if (b.len < cnt * sizeof(float)) return AMP_OK; /* the loader checked; be safe */
        return fits(r, b, cnt, "constant", v->name, n->name ? n->name : "", NULL) ? adopt(r, v, t, b.data, cnt) : AMP_OK;
    }
    bool one = a->type == AMP_ATTR_FLOAT && strcmp(a->name, "value_float") == 0;
    bool list = a->type == AMP_ATTR_FLOATS && strcmp(a->name, "value_floats") == 0;
    if (!one && !list) return AMP_OK;
    cnt = one ? 1 : a->n_floats;
    b.data = one ? (const uint8_t *)&a->f : (const uint8_t *)a->floats;
    b.len = cnt * sizeof(float);
    if (!fits(r, b, cnt, "constant", v->name, n->name ? n->name : "", NULL)) return AMP_OK;
    /* value_float (a scalar) and value_floats (1-D) have no 16-bit form: they become a
     * `value` tensor of the same shape (a deferred one reads `floats`, which stays in the
     * arena). */
    t = amp_arena_calloc(&m->arena, 1, sizeof *t);
    int64_t *dims = amp_arena_calloc(&m->arena, 1, sizeof *dims);
    const char *name = amp_arena_strdup(&m->arena, "value");
    if (!t || !dims || !name)
        return amp_fail(r->st, AMP_ERR_INTERNAL, "amp: out of memory converting constant '%s'", v->name);
    t->ndims = one ? 0 : 1;
    dims[0] = (int64_t)cnt;
    t->dims = dims;
    t->nelem = cnt;
    AmpCode rc = adopt(r, v, t, b.data, cnt);
    if (rc) return rc;
    a->name = name;
    a->type = AMP_ATTR_TENSOR;
    a->has = AMP_ATTR_HAS_TYPE;
    a->f = 0;
    a->n_floats = 0;
    a->floats = NULL;
    a->t = t;
    return AMP_OK;
}

AmpCode amp_weights(AmpRun *r, const AmpRunGraph *rg) {
    if (r->training) return AMP_OK;
    AmpGraph *g = rg->g;
    AmpCode rc = initializers(r, g);
    /* The graph's nodes as amp_collect found them (the rewrite has not begun), looked at
     * only when some are Constants. */
    for (size_t i = rg->first; rg->n_constants && i < rg->first + rg->n && !rc; i++) {
        AmpNode *n = r->ni[i].node;
        if (n->op == AMP_OP_Constant) rc = constant_node(r, g, n);
    }
    return rc;
}
