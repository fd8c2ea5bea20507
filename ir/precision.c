/* A node's precision read from its values' dtypes, cast directions and the node
 * groups (precision.h): the shared ground of the report (report.c) and the DOT
 * picture (dot.c). Nothing here changes the model. */
#include <assert.h>
#include <string.h>

#include "ir/precision.h"

/* Bits: 1 float32 seen, 2 float16 seen, 4 bfloat16 seen. */
static unsigned dtype_bits(const AmpValue *v) {
    if (!v || v->type.kind != AMP_TYPE_TENSOR) return 0;
    switch (v->type.dtype) {
    case AMP_DT_FLOAT: return 1;
    case AMP_DT_FLOAT16: return 2;
    case AMP_DT_BFLOAT16: return 4;
    default: return 0;
    }
}

static bool is_cast(const AmpNode *n) {
    /* By the op table's binding (every node has one; the names only for a node unbound). */
    if (n->op != AMP_OP_UNKNOWN) return n->op == AMP_OP_Cast || n->op == AMP_OP_CastLike;
    return n->op_type && amp_domain_is_default(n->domain) &&
           (strcmp(n->op_type, "Cast") == 0 || strcmp(n->op_type, "CastLike") == 0);
}

AmpPrecision amp_node_precision(const AmpNode *n) {
    if (is_cast(n)) return AMP_PREC_CAST;
    uint32_t mask = n->op == AMP_OP_UNKNOWN ? AMP_SLOTS_ALL : amp_op_info(n->op)->float_inputs;
    unsigned seen = 0;
    for (int i = 0; i < n->n_inputs; i++) {
        bool slot = i >= 32 ? mask == AMP_SLOTS_ALL : (mask & AMP_SLOT(i)) != 0;
        if (slot) seen |= dtype_bits(n->inputs[i]);
    }
    for (int i = 0; i < n->n_outputs; i++) seen |= dtype_bits(n->outputs[i]);
    if (seen & 2) return AMP_PREC_FP16;
    if (seen & 4) return AMP_PREC_BF16;
    if (seen & 1) return AMP_PREC_FP32;
    return AMP_PREC_NONE;
}

const char *amp_precision_name(AmpPrecision p) {
    switch (p) {
    case AMP_PREC_NONE: return "none";
    case AMP_PREC_FP32: return "fp32";
    case AMP_PREC_FP16: return "fp16";
    case AMP_PREC_BF16: return "bf16";
    case AMP_PREC_CAST: return "cast";
    default: return "?";
    }
}

const char *amp_dtype_short_name(int dt) {
    switch (dt) {
    case AMP_DT_FLOAT: return "fp32";
    case AMP_DT_FLOAT16: return "fp16";
    case AMP_DT_BFLOAT16: return "bf16";
    case AMP_DT_DOUBLE: return "fp64";
    case AMP_DT_UNDEFINED: return "?";
    default: return amp_dtype_name(dt);
    }
}

static int value_dtype(const AmpValue *v) {
    return v && v->type.kind == AMP_TYPE_TENSOR ? v->type.dtype : AMP_DT_UNDEFINED;
}

bool amp_cast_dtypes(const AmpNode *n, int *from, int *to) {
    if (!is_cast(n)) return false;
    int f = n->n_inputs > 0 ? value_dtype(n->inputs[0]) : AMP_DT_UNDEFINED;
    int t = n->n_outputs > 0 ? value_dtype(n->outputs[0]) : AMP_DT_UNDEFINED;
    if (t == AMP_DT_UNDEFINED) {
        if (strcmp(n->op_type, "Cast") == 0) {
            int64_t a = amp_node_attr_int(n, "to", AMP_DT_UNDEFINED);
            t = a > 0 && a < AMP_DT__COUNT ? (int)a : AMP_DT_UNDEFINED;
        } else if (n->n_inputs > 1) {
            t = value_dtype(n->inputs[1]);
        }
    }
    if (from) *from = f;
    if (to) *to = t;
    return true;
}

static bool is16(int dt) { return dt == AMP_DT_FLOAT16 || dt == AMP_DT_BFLOAT16; }

bool amp_cast_is_amp(const AmpNode *n) {
    int f, t;
    if (!amp_cast_dtypes(n, &f, &t)) return false;
    return (f == AMP_DT_FLOAT && is16(t)) || (is16(f) && t == AMP_DT_FLOAT);
}

/* ---- the counting rule (precision.h) ------------------------------------------------ */

AmpPrecision amp_count_node(const AmpNode *n, AmpFloatCounts *c, int *group) {
    *group = amp_node_group(n);
    if (*group >= 0) return AMP_PREC_NONE;
    AmpPrecision p = amp_node_precision(n);
    if (p == AMP_PREC_CAST) {
        if (amp_cast_is_amp(n)) c->casts++;
        else c->other_casts++;
    } else if (p != AMP_PREC_NONE) {
        c->float_nodes++;
        c->converted += amp_precision_is_16(p);
    }
    return p;
}

static void count_graph(const AmpGraph *g, AmpFloatCounts *c) {
    if (!g) return;
    int group;
    for (const AmpNode *n = g->first; n; n = n->next) {
        amp_count_node(n, c, &group);
        for (size_t i = 0; i < n->n_attrs; i++) {
            const AmpAttr *a = &n->attrs[i];
            count_graph(a->g, c);
            for (size_t k = 0; k < a->n_graphs; k++) count_graph(a->graphs[k], c);
        }
    }
}

void amp_count_model(const AmpModel *m, AmpFloatCounts *c) {
    memset(c, 0, sizeof *c);
    count_graph(m->graph, c);
    for (size_t i = 0; i < m->n_training; i++) {
        count_graph(m->training[i].initialization, c);
        count_graph(m->training[i].algorithm, c);
    }
}

/* ---- node groups --------------------------------------------------------------------- */

static const AmpNodeGroup GROUPS[] = {
    {AMP_ORIGIN_LOSS_SCALE, AMP_LOSS_SCALE_PREFIX, "loss scaling"},
};
enum { N_GROUPS = sizeof GROUPS / sizeof GROUPS[0] };
static_assert((int)N_GROUPS <= (int)AMP_MAX_NODE_GROUPS, "raise AMP_MAX_NODE_GROUPS");

size_t amp_node_group_count(void) { return N_GROUPS; }

const AmpNodeGroup *amp_node_group_at(size_t i) { return i < N_GROUPS ? &GROUPS[i] : NULL; }

int amp_node_group(const AmpNode *n) {
    if (n->origin == AMP_ORIGIN_MODEL) return -1;
    for (size_t i = 0; i < N_GROUPS; i++)
        if (GROUPS[i].origin == n->origin) return (int)i;
    return -1;
}

AmpOrigin amp_origin_of_name(const char *name) {
    if (!name) return AMP_ORIGIN_MODEL;
    for (size_t i = 0; i < N_GROUPS; i++)
        if (name[0] == GROUPS[i].prefix[0] && strncmp(name, GROUPS[i].prefix, strlen(GROUPS[i].prefix)) == 0)
            return GROUPS[i].origin;
    return AMP_ORIGIN_MODEL;
}
