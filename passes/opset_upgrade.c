/* The opset upgrade (before "amp"): when the target 16-bit type needs a newer ai.onnx
 * opset than the model imports (Conv takes bfloat16 only from opset 22), the model's
 * opset is raised to the lowest one at which every allow-list op with float32 data
 * takes the type, and each node whose op changed form on the way is adapted
 * (opset_adapters.c). A node with no adapter keeps the whole model at its opset; the
 * message names it, and the amp pass's summary counts what stays fp32. */
#include <string.h>

#include "passes/amp_impl.h"
#include "passes/opset_impl.h"

typedef struct Up {
    AmpModel *m;
    const AmpOpClass *cls;
    const int *min_opset;
    int dt;
    int64_t from;
    int target;             /* the opset needed (0: none) */
    const char *why_op;     /* an op that needs `target` */
    size_t n_need;          /* allow-list nodes that need a newer opset */
    const char *beyond_op;  /* an op that needs more than AMP_OPSET_UPGRADE_MAX */
    int beyond_version;
    /* The check and the rewrite. */
    bool apply;
    const char *refused;    /* why not (from an adapter, or "no adapter") */
    const AmpNode *refused_node;
    char refused_text[200];
    size_t n_adapted;
    AmpCode err;
} Up;

static bool is_default_domain(const AmpNode *n) {
    return !n->domain || !*n->domain || strcmp(n->domain, "ai.onnx") == 0;
}

static bool has_f32_data(const AmpNode *n) {
    for (int i = 0; i < n->n_inputs; i++)
        if (n->inputs[i] && amp_float_slot(n, i) && amp_is_f32(n->inputs[i])) return true;
    return false;
}

/* The opset each allow-list node with float32 data needs for the 16-bit type. */
static AmpCode need(AmpGraph *g, void *ctx, AmpStatus *st) {
    (void)st;
    Up *u = ctx;
    for (AmpNode *n = g->first; n; n = n->next) {
        /* A node the amp pass keeps float32 by its own rule (the loss-scaling pass's, an
         * optimizer: a model converted before) needs no 16-bit type: converting again
         * must not raise the opset for it. */
        if (!is_default_domain(n) || n->op == AMP_OP_UNKNOWN || u->cls[n->op] != AMP_CLASS_ALLOW ||
            !has_f32_data(n) || amp_own_rule(n) != AMP_WHY_NONE)
            continue;
        int v = u->min_opset[n->op];
        if (u->dt == AMP_DT_BFLOAT16 && v < 13) v = 13; /* Cast takes bfloat16 from 13 on */
        if (v <= u->from) continue;
        u->n_need++;
        if (v > AMP_OPSET_UPGRADE_MAX) {
            if (!u->beyond_op) u->beyond_op = n->op_type, u->beyond_version = v;
        } else if (v > u->target) {
            u->target = v;
            u->why_op = n->op_type;
        }
    }
    return AMP_OK;
}

/* Checks (apply false) or adapts (apply true) every node of g for the steps in
 * (from, target]. */
/* A node with an attribute of no type (AttributeProto.type unset: IR versions before 2
 * allow it), into *(const AmpNode **)ctx. The raised opset's IR version requires types. */
static AmpCode untyped_attr(AmpGraph *g, void *ctx, AmpStatus *st) {
    (void)st;
    const AmpNode **found = ctx;
    for (const AmpNode *n = g->first; n && !*found; n = n->next)
        for (size_t i = 0; i < n->n_attrs && !*found; i++)
            if (n->attrs[i].type == AMP_ATTR_UNDEFINED && !(n->attrs[i].ref_attr_name && *n->attrs[i].ref_attr_name))
                *found = n;
    return AMP_OK;
}

static AmpCode adapt(AmpGraph *g, void *ctx, AmpStatus *st) {
    Up *u = ctx;
    size_t n_steps;
    const AmpOpsetStep *steps = amp_opset_steps(&n_steps);
    for (AmpNode *n = g->first, *next; n && !u->refused; n = next) {
        next = n->next; /* an adapter may replace n, or add nodes after it */
        if (!is_default_domain(n)) continue;
        const char *op = n->op_type;
        bool adapted = false;
        for (size_t k = 0; k < n_steps && !u->refused; k++) {
            const AmpOpsetStep *s = &steps[k];
            if (s->version <= u->from || s->version > u->target || strcmp(s->op, op) != 0) continue;
            if (!s->adapt) {
                snprintf(u->refused_text, sizeof u->refused_text, "%s changed at opset %d and has no adapter", op,
                         s->version);
                u->refused = u->refused_text;
                u->refused_node = n;
                break;
            }
            AmpCode err = AMP_OK;
            /* An adapter may replace n: the steps after this one see the new node, found
             * where n was (the node before `next`). */
            AmpNode *prev = n->prev;
            const char *why = s->adapt(n, u->apply, &err);
            if (err) return amp_fail(st, err, "opset_upgrade: %s", why ? why : "out of memory");
            if (why) {
                snprintf(u->refused_text, sizeof u->refused_text, "%s (opset %d) %s", op, s->version, why);
                u->refused = u->refused_text;
                u->refused_node = n;
                break;
            }
            if (u->apply) {
                adapted = true;
                AmpNode *c = prev ? prev->next : g->first;
                while (c && c != next && strcmp(c->op_type, op) != 0) c = c->next;
                if (!c || c == next) break; /* renamed (Upsample -> Resize): no later step */
                n = c;
            }
        }
        u->n_adapted += adapted;
    }
    return AMP_OK;
}

/* The IR version a model of opset v needs at least (onnx's helper.VERSION_TABLE). */
static int64_t ir_for_opset(int v) {
    return v >= 21 ? 10 : v >= 19 ? 9 : v >= 15 ? 8 : v >= 13 ? 7 : v >= 11 ? 6 : v >= 10 ? 5 : 3;
}

static void say(const AmpPassOptions *opt, const char *line) {
    if (opt->notify) opt->notify(opt->notify_ctx, line);
}

AmpCode amp_pass_opset_upgrade(AmpModel *m, const AmpPassOptions *opt, AmpStatus *st) {
    static const AmpPassOptions defaults = {0};
    if (!opt) opt = &defaults;
    if (opt->opset_upgrade == AMP_OPSET_UPGRADE_NEVER) return AMP_OK;
    int dt = opt->precision ? opt->precision : AMP_DT_FLOAT16;
    AmpOpClass cls[AMP_OP__COUNT];
    int min_opset[AMP_OP__COUNT];
    AmpCode rc = amp_op_classes(dt, opt->list_edits, opt->n_list_edits, opt->level, cls, st);
    if (rc) return rc;
    amp_op_min_opsets_16(dt, min_opset);
    AmpOpset *os = NULL;
    for (size_t i = 0; i < m->n_opsets; i++)
        if (!m->opsets[i].domain || !*m->opsets[i].domain || strcmp(m->opsets[i].domain, "ai.onnx") == 0)
            os = &m->opsets[i];
    if (!os) return AMP_OK;
    if (!m->types_inferred && (rc = amp_infer_model(m, st))) return rc;
    Up u = {.m = m, .cls = cls, .min_opset = min_opset, .dt = dt, .from = os->version};
    if ((rc = amp_model_walk(m, need, &u, st))) return rc;
    const char *dts = amp_dtype_name(dt);
    char line[512];
    if (u.beyond_op) {
        snprintf(line, sizeof line, "opset_upgrade: %s takes %s only from opset %d, past %d (the newest this upgrade "
                 "reaches): those nodes stay fp32", u.beyond_op, dts, u.beyond_version, AMP_OPSET_UPGRADE_MAX);
        say(opt, line);
    }
    if (opt->opset_upgrade_to > u.from && opt->opset_upgrade_to > u.target) {
        u.target = opt->opset_upgrade_to > AMP_OPSET_UPGRADE_MAX ? AMP_OPSET_UPGRADE_MAX : opt->opset_upgrade_to;
        u.why_op = "every op";
    }
    if (!u.target || u.target <= u.from) return AMP_OK;
    const AmpNode *untyped = NULL;
    if ((!(m->has & AMP_MODEL_HAS_IR_VERSION) || m->ir_version < 2) &&
        (rc = amp_model_walk(m, untyped_attr, (void *)&untyped, st)))
        return rc;
    if (u.from < AMP_OPSET_UPGRADE_MIN_FROM) {
        u.refused = "opsets before 7 broadcast differently";
    } else if (untyped) {
        u.refused = "an attribute has no type (IR version before 2), which the new opset's IR version requires";
        u.refused_node = untyped;
    } else if (m->n_functions) {
        u.refused = "the model's local functions import their own opsets";
    } else if ((rc = amp_model_walk(m, adapt, &u, st))) {
        return rc;
    }
    if (u.refused) {
        snprintf(line, sizeof line, "opset_upgrade: ai.onnx opset stays %lld (%s needs %d for %s): %s%s%s%s",
                 (long long)u.from, u.why_op, u.target, dts, u.refused, u.refused_node ? " (node '" : "",
                 u.refused_node ? (u.refused_node->name ? u.refused_node->name : "") : "",
                 u.refused_node ? "')" : "");
        say(opt, line);
        return AMP_OK;
    }
    u.apply = true;
    if ((rc = amp_model_walk(m, adapt, &u, st))) return rc;
    os->version = u.target;
    os->has_version = true;
    int64_t ir = ir_for_opset(u.target);
    if (!(m->has & AMP_MODEL_HAS_IR_VERSION) || m->ir_version < ir) {
        m->ir_version = ir;
        m->has |= AMP_MODEL_HAS_IR_VERSION;
    }
    m->types_inferred = false; /* new nodes and values: the amp pass infers again */
    snprintf(line, sizeof line, "opset_upgrade: ai.onnx opset %lld -> %d so that %s takes %s; %zu %s adapted",
             (long long)u.from, u.target, u.why_op, dts, u.n_adapted, u.n_adapted == 1 ? "node" : "nodes");
    say(opt, line);
    return AMP_OK;
}
