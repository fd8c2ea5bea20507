/* The verifier: structural and type checks over a whole model (main graph, attribute
 * subgraphs, training graphs). It runs after load and after every pass in tests, stops at
 * the first problem, names the graph, node and value, and is linear in the model's size. */
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "ir/verify_impl.h"

/* Deeper nesting is refused rather than risking the C stack on a hostile model. */
enum { MAX_DEPTH = 256 };

/* Per-value state bits, in Frame.state (indexed by AmpValue.id). Graph inputs and
 * initializers are defined from the start (their flags say so: is_def). */
enum {
    VS_DEF = 1u << 0,      /* defined at the current point of the walk by a node */
    VS_PRODUCED = 1u << 1, /* listed as an output by a node linked into the graph */
    VS_LISTED_IN = 1u << 2 /* listed in graph.input (to find duplicates) */
};

/* One graph being walked. Subgraphs are walked while their owner node is visited, so
 * the enclosing frames' state says exactly which outer values exist at that point. */
typedef struct Frame {
    AmpGraph *g;
    unsigned char *state; /* n_values VS_* bits */
    uint32_t *refs;       /* n_values: input slots seen reading the value (vs. n_uses) */
    uint64_t *sig;        /* n_values: sum of use_sig over those slots (vs. the use list) */
    struct Frame *up;
    int depth;
} Frame;

/* ---- cycles: only on the error path, to tell a cycle from a misordered node ------- */

/* The node of g that contains n (n itself, or the owner of the subgraph n sits in). */
static AmpNode *lift_to(AmpNode *n, const AmpGraph *g) {
    while (n && n->graph != g) n = n->graph ? n->graph->owner : NULL;
    return n;
}

/* True when `target` is reachable from `from` along data flow within g (uses in
 * subgraphs count as uses by their owner). Breadth first with AmpNode.mark. */
static bool reaches(AmpGraph *g, AmpNode *from, AmpNode *target) {
    if (from == target) return true;
    for (AmpNode *n = g->first; n; n = n->next) n->mark = 0;
    AmpNode **queue = malloc((g->n_nodes + 1) * sizeof *queue);
    if (!queue) return false;
    size_t head = 0, tail = 0;
    bool found = false;
    queue[tail++] = from;
    from->mark = 1;
    while (head < tail && !found) {
        AmpNode *x = queue[head++];
        for (int o = 0; o < x->n_outputs && !found; o++) {
            AmpValue *v = x->outputs[o];
            if (!v) continue;
            for (size_t u = 0; u < v->n_uses; u++) {
                AmpNode *y = lift_to(v->uses[u].node, g);
                if (!y || y->mark) continue;
                if (y == target) {
                    found = true;
                    break;
                }
                y->mark = 1;
                if (tail <= g->n_nodes) queue[tail++] = y;
            }
        }
    }
    free(queue);
    return found;
}

/* ---- values ---------------------------------------------------------------------- */

/* A use (node, slot) as a number: a value's use list holds exactly the slots that read
 * it when the counts and the sums of these agree (a 64-bit multiset hash), and that is
 * checked without a visit to every use's node. */
static uint64_t use_sig(const AmpNode *n, int slot) {
    uint64_t h = ((uint64_t)(uintptr_t)n + (uint64_t)(uint32_t)slot * 0x9E3779B97F4A7C15ull) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
    h *= 0x94D049BB133111EBull;
    return h ^ (h >> 29);
}

static bool is_def(const Frame *f, const AmpValue *v) {
    return (f->state[v->id] & VS_DEF) || (v->flags & (AMP_VALUE_INPUT | AMP_VALUE_INITIALIZER));
}

/* The frame whose graph defines v, searching outwards from f; NULL if none encloses. */
static Frame *frame_of(Frame *f, const AmpValue *v) {
    while (f && f->g != v->graph) f = f->up;
    return f;
}

/* Checks input `slot` of n (in frame f's graph) reading v. */
static AmpCode check_use(Ctx *c, Frame *f, AmpNode *n, int slot, AmpValue *v) {
    AmpGraph *g = f->g;
    Frame *df = frame_of(f, v);
    if (!df) {
        char gl[256];
        if (v->graph) amp_verify_graph_label(c->m, v->graph, gl, sizeof gl);
        return vfail(c, AMP_ERR_INPUT, g, n,
                     "input %d '%s' belongs to graph '%s', which does not enclose this one",
                     slot, v->name, v->graph ? gl : "(none)");
    }
    if (v->id >= df->g->n_values || df->g->values[v->id] != v)
        return vfail(c, AMP_ERR_INTERNAL, g, n, "input %d '%s' is not in its graph's value table",
                     slot, v->name);
    df->refs[v->id]++;
    df->sig[v->id] += use_sig(n, slot);
    if (v->flags & AMP_VALUE_UNDEFINED)
        return vfail(c, AMP_ERR_INPUT, g, n,
                     "input %d '%s' is undefined: no node, graph input or initializer of this "
                     "graph or an enclosing one defines it", slot, v->name);
    if (is_def(df, v)) return AMP_OK;
    AmpNode *p = v->producer;
    if (!p && !(v->flags & (AMP_VALUE_INPUT | AMP_VALUE_INITIALIZER)))
        return vfail(c, AMP_ERR_INPUT, g, n,
                     "input %d '%s' is undefined: no node produces it and it is neither a graph "
                     "input nor an initializer", slot, v->name);
    char pl[320] = "?";
    if (p) amp_verify_node_label(p, pl, sizeof pl);
    if (df != f)
        return vfail(c, AMP_ERR_INPUT, g, n,
                     "input %d '%s' of an enclosing graph is used before it is defined there "
                     "(its producer %s does not come before the node owning this subgraph)",
                     slot, v->name, pl);
    if (!p || p->graph != g)
        return vfail(c, AMP_ERR_INTERNAL, g, n, "input %d '%s' has a producer outside its graph",
                     slot, v->name);
    if (p == n)
        return vfail(c, AMP_ERR_INPUT, g, n,
                     "input %d '%s' is used before it is defined: it is this node's own output "
                     "(the graph has a cycle)", slot, v->name);
    if (reaches(g, n, p))
        return vfail(c, AMP_ERR_INPUT, g, n,
                     "input %d '%s' is used before it is defined: it comes from %s, which "
                     "depends on this node (the graph has a cycle)", slot, v->name, pl);
    return vfail(c, AMP_ERR_INPUT, g, n,
                 "input %d '%s' is used before it is defined: its producer %s comes later "
                 "(nodes are not in topological order)", slot, v->name, pl);
}

/* Graph outputs: present and defined by the end of the graph. */
static AmpCode check_graph_outputs(Ctx *c, Frame *f) {
    AmpGraph *g = f->g;
    for (size_t i = 0; i < g->outputs.n; i++) {
        AmpValue *v = g->outputs.items[i].value;
        if (!v) return vfail(c, AMP_ERR_INTERNAL, g, NULL, "graph output %zu has no value", i);
        Frame *df = frame_of(f, v);
        if (!df)
            return vfail(c, AMP_ERR_INPUT, g, NULL,
                         "graph output '%s' belongs to a graph that does not enclose this one",
                         v->name);
        if (v->id >= df->g->n_values || df->g->values[v->id] != v)
            return vfail(c, AMP_ERR_INTERNAL, g, NULL,
                         "graph output '%s' is not in its graph's value table", v->name);
        if (v->flags & AMP_VALUE_UNDEFINED || !is_def(df, v))
            return vfail(c, AMP_ERR_INPUT, g, NULL,
                         "graph output '%s' is undefined: no node produces it and it is neither "
                         "a graph input nor an initializer", v->name);
    }
    return AMP_OK;
}

/* ---- attributes ------------------------------------------------------------------ */

/* Which payload an attribute of each type carries; everything else must be empty so
 * that exactly one field is set, as onnx.checker requires. */
static AmpCode check_attr_payload(Ctx *c, const AmpGraph *g, const AmpNode *n, const AmpAttr *a) {
    int t = a->type;
    bool has_f = a->has & AMP_ATTR_HAS_F, has_i = a->has & AMP_ATTR_HAS_I,
         has_s = a->has & AMP_ATTR_HAS_S;
    bool ok = true;
    switch (t) {
    case AMP_ATTR_FLOAT: ok = has_f; break;
    case AMP_ATTR_INT: ok = has_i; break;
    case AMP_ATTR_STRING: ok = has_s; break;
    case AMP_ATTR_TENSOR: ok = a->t != NULL; break;
    case AMP_ATTR_GRAPH: ok = a->g != NULL; break;
    case AMP_ATTR_FLOATS: ok = !a->n_floats || a->floats; break;
    case AMP_ATTR_INTS: ok = !a->n_ints || a->ints; break;
    case AMP_ATTR_STRINGS: ok = !a->n_strings || a->strings; break;
    case AMP_ATTR_TENSORS:
        ok = !a->n_tensors || a->tensors;
        for (size_t k = 0; ok && k < a->n_tensors; k++) ok = a->tensors[k] != NULL;
        break;
    case AMP_ATTR_GRAPHS:
        ok = !a->n_graphs || a->graphs;
        for (size_t k = 0; ok && k < a->n_graphs; k++) ok = a->graphs[k] != NULL;
        break;
    default: break; /* sparse tensors and type protos stay packed in `rest` */
    }
    if (!ok)
        return vfail(c, AMP_ERR_INPUT, g, n, "attribute '%s' has type %s but no %s value",
                     a->name, amp_verify_attr_type_name(t), amp_verify_attr_type_name(t));
    const char *other = NULL;
    if (has_f && t != AMP_ATTR_FLOAT) other = "f";
    else if (has_i && t != AMP_ATTR_INT) other = "i";
    else if (has_s && t != AMP_ATTR_STRING) other = "s";
    else if (a->t && t != AMP_ATTR_TENSOR) other = "t";
    else if (a->g && t != AMP_ATTR_GRAPH) other = "g";
    else if (a->n_floats && t != AMP_ATTR_FLOATS) other = "floats";
    else if (a->n_ints && t != AMP_ATTR_INTS) other = "ints";
    else if (a->n_strings && t != AMP_ATTR_STRINGS) other = "strings";
    else if (a->n_tensors && t != AMP_ATTR_TENSORS) other = "tensors";
    else if (a->n_graphs && t != AMP_ATTR_GRAPHS) other = "graphs";
    if (other)
        return vfail(c, AMP_ERR_INPUT, g, n, "attribute '%s' has type %s but also a '%s' value",
                     a->name, amp_verify_attr_type_name(t), other);
    return AMP_OK;
}

/* Attribute a of n against the op table's rule for the op's version: its type, and that
 * the version has it (ReduceSum-13's `axes` is an input; read as an attribute it was
 * ignored and the node reduced over every axis, where onnxruntime refuses the model). */
static AmpCode check_attr_rule(Ctx *c, const AmpGraph *g, const AmpNode *n, const AmpAttr *a) {
    int64_t v = amp_domain_is_default(n->domain) ? c->default_opset : amp_model_opset(c->m, n->domain);
    int since = 0, until = 0;
    int want = amp_op_attr_type(n->op, a->name, v, &since, &until);
    if (want >= 0 && want != a->type)
        return vfail(c, AMP_ERR_INPUT, g, n, "attribute '%s' has type %s, but %s expects %s", a->name,
                     amp_verify_attr_type_name(a->type), n->op_type, amp_verify_attr_type_name(want));
    if (want == AMP_OP_ATTR_UNKNOWN)
        return vfail(c, AMP_ERR_INPUT, g, n, "%s has no attribute '%s' (in no opset)", n->op_type, a->name);
    if (want != AMP_OP_ATTR_OTHER) return AMP_OK;
    if (!until)
        return vfail(c, AMP_ERR_INPUT, g, n, "%s-%lld has no attribute '%s' (it came with opset %d)", n->op_type,
                     (long long)v, a->name, since);
    return vfail(c, AMP_ERR_INPUT, g, n, "%s-%lld has no attribute '%s' (opsets %d to %d had it)", n->op_type,
                 (long long)v, a->name, since ? since : 1, until - 1);
}

static AmpCode check_attrs(Ctx *c, const AmpGraph *g, const AmpNode *n) {
    if (n->n_attrs && !n->attrs)
        return vfail(c, AMP_ERR_INTERNAL, g, n, "attribute array missing");
    /* IR versions before 2 had no AttributeProto.type; such models are taken on trust. */
    bool typed = !(c->m->has & AMP_MODEL_HAS_IR_VERSION) || c->m->ir_version >= 2;
    for (size_t i = 0; i < n->n_attrs; i++) {
        const AmpAttr *a = &n->attrs[i];
        if (!a->name || !*a->name)
            return vfail(c, AMP_ERR_INPUT, g, n, "attribute %zu has no name", i);
        if (a->type < 0 || a->type >= AMP_VERIFY_N_ATTR_TYPES || (a->type == AMP_ATTR_UNDEFINED && typed))
            return vfail(c, AMP_ERR_INPUT, g, n, "attribute '%s' has invalid type %d", a->name,
                         a->type);
        /* A reference to a function's attribute carries no value of its own. */
        if (a->ref_attr_name && *a->ref_attr_name) continue;
        if (a->type == AMP_ATTR_UNDEFINED) continue;
        AmpCode rc = check_attr_payload(c, g, n, a);
        if (rc) return rc;
        if (n->op != AMP_OP_UNKNOWN && (rc = check_attr_rule(c, g, n, a))) return rc;
    }
    if (n->n_attrs > 1) {
        const char *small[16];
        const char **names = n->n_attrs <= 16 ? small : malloc(n->n_attrs * sizeof *names);
        if (!names) return amp_fail(c->st, AMP_ERR_INTERNAL, "verifier: out of memory");
        for (size_t i = 0; i < n->n_attrs; i++) names[i] = n->attrs[i].name;
        bool oom;
        const char *dup = amp_verify_find_duplicate(names, n->n_attrs, &oom);
        if (names != small) free(names);
        if (oom) return amp_fail(c->st, AMP_ERR_INTERNAL, "verifier: out of memory");
        if (dup) return vfail(c, AMP_ERR_INPUT, g, n, "duplicate attribute '%s'", dup);
    }
    return AMP_OK;
}

/* ---- nodes ----------------------------------------------------------------------- */

/* One producer per name: n's outputs belong to g, are no graph input or initializer,
 * and name n (at that slot) as their producer. */
static AmpCode check_outputs(Ctx *c, Frame *f, AmpNode *n) {
    AmpGraph *g = f->g;
    for (int i = 0; i < n->n_outputs; i++) {
        AmpValue *v = n->outputs[i];
        if (!v) continue;
        if (v->graph != g || v->id >= g->n_values || g->values[v->id] != v)
            return vfail(c, AMP_ERR_INPUT, g, n, "output %d '%s' belongs to another graph's scope",
                         i, v->name);
        if (v->flags & AMP_VALUE_INPUT)
            return vfail(c, AMP_ERR_INPUT, g, n, "output %d '%s' has the name of a graph input", i,
                         v->name);
        if (v->flags & AMP_VALUE_INITIALIZER)
            return vfail(c, AMP_ERR_INPUT, g, n, "output %d '%s' has the name of an initializer",
                         i, v->name);
        if (v->flags & AMP_VALUE_UNDEFINED)
            return vfail(c, AMP_ERR_INTERNAL, g, n, "output %d '%s' is flagged undefined", i,
                         v->name);
        if (v->producer != n) {
            if (!v->producer)
                return vfail(c, AMP_ERR_INTERNAL, g, n, "output %d '%s' has no producer link", i,
                             v->name);
            char pl[320];
            amp_verify_node_label(v->producer, pl, sizeof pl);
            return vfail(c, AMP_ERR_INPUT, g, n, "output %d '%s' is also produced by %s", i,
                         v->name, pl);
        }
        if (v->producer_slot != i)
            return vfail(c, AMP_ERR_INPUT, g, n, "output '%s' is listed twice (slots %d and %d)",
                         v->name, v->producer_slot, i);
        /* SSA across scopes (as onnx.checker has it): a subgraph's node may not redefine
         * a name the enclosing graphs have defined by this point. Training graphs are
         * separate graphs that merely see the main one, so they are exempt. */
        if (g->parent && g->owner) {
            AmpValue *w = amp_graph_lookup(g->parent, v->name);
            Frame *wf = w ? frame_of(f->up, w) : NULL;
            if (wf && w->id < wf->g->n_values && wf->g->values[w->id] == w && is_def(wf, w))
                return vfail(c, AMP_ERR_INPUT, g, n,
                             "output %d '%s' redefines a value of an enclosing graph", i, v->name);
        }
        f->state[v->id] |= VS_DEF | VS_PRODUCED;
    }
    return AMP_OK;
}

static AmpCode verify_graph(Ctx *c, Frame *up, AmpGraph *g);

/* The subgraphs of n, walked now: their outer-scope uses see the state before n. */
static AmpCode verify_subgraphs(Ctx *c, Frame *f, AmpNode *n) {
    for (size_t i = 0; i < n->n_attrs; i++) {
        const AmpAttr *a = &n->attrs[i];
        size_t k_end = a->g ? 1 : 0;
        if (a->type == AMP_ATTR_GRAPHS) k_end = a->n_graphs;
        for (size_t k = 0; k < k_end; k++) {
            AmpGraph *sg = a->type == AMP_ATTR_GRAPHS ? a->graphs[k] : a->g;
            if (!sg) continue;
            if (sg->parent != f->g || sg->owner != n)
                return vfail(c, AMP_ERR_INTERNAL, f->g, n,
                             "subgraph in attribute '%s' has a wrong %s link", a->name,
                             sg->parent != f->g ? "parent" : "owner");
            AmpCode rc = verify_graph(c, f, sg);
            if (rc) return rc;
        }
    }
    return AMP_OK;
}

/* `op` names the op table's row for (domain, op_type): the passes and the checks below go
 * by it, and code that edits op_type must call amp_graph_bind_ops. The loader and
 * amp_node_new point op_type at the table's own string, so the check is mostly a pointer
 * compare; an op unknown to the table is looked up (rare). */
static AmpCode check_binding(Ctx *c, const AmpGraph *g, const AmpNode *n) {
    const AmpOpInfo *info = amp_op_info(n->op);
    bool bound = n->op == AMP_OP_UNKNOWN
                     ? amp_op_lookup(n->domain, n->op_type) == AMP_OP_UNKNOWN
                     : (n->op_type == info->name || strcmp(n->op_type, info->name) == 0) &&
                           (amp_domain_is_default(n->domain) ? !*info->domain
                                                             : strcmp(n->domain, info->domain) == 0);
    if (bound) return AMP_OK;
    return vfail(c, AMP_ERR_INTERNAL, g, n,
                 "its op id (%s) does not match its op_type: amp_graph_bind_ops was not called "
                 "after an edit", n->op == AMP_OP_UNKNOWN ? "unknown" : info->name);
}

static AmpCode verify_node(Ctx *c, Frame *f, AmpNode *n) {
    AmpGraph *g = f->g;
    if (!n->op_type || !*n->op_type) return vfail(c, AMP_ERR_INPUT, g, n, "node has no op_type");
    AmpCode brc = check_binding(c, g, n);
    if (brc) return brc;
    if (n->n_inputs < 0 || n->n_outputs < 0 || (n->n_inputs && !n->inputs) ||
        (n->n_outputs && !n->outputs))
        return vfail(c, AMP_ERR_INTERNAL, g, n, "input/output arrays are inconsistent");
    /* The node's domain has a version in opset_import (onnx.checker: "No opset import for
     * domain"): without one, which op the node is has no answer. A model of IR version
     * 1 or 2 may import nothing, and its ai.onnx ops are opset 1's. */
    if (amp_domain_is_default(n->domain) ? !c->default_imported : amp_model_opset(c->m, n->domain) <= 0)
        return vfail(c, AMP_ERR_INPUT, g, n, "its domain '%s' is not imported: opset_import names no version of it",
                     amp_domain_is_default(n->domain) ? "ai.onnx" : n->domain);
    AmpCode rc = check_attrs(c, g, n);
    if (!rc) rc = amp_verify_arity(c, g, n);
    for (int i = 0; !rc && i < n->n_inputs; i++) {
        AmpValue *v = n->inputs[i];
        if (!v) continue;
        /* The common case inline: a defined value of this graph (check_use does the same). */
        if (v->graph == g && v->id < g->n_values && g->values[v->id] == v &&
            !(v->flags & AMP_VALUE_UNDEFINED) && is_def(f, v)) {
            f->refs[v->id]++;
            f->sig[v->id] += use_sig(n, i);
            continue;
        }
        rc = check_use(c, f, n, i, v);
    }
    if (!rc) rc = verify_subgraphs(c, f, n);
    if (!rc) rc = amp_verify_slot_dtypes(c, g, n);
    if (!rc) rc = amp_verify_cast(c, g, n);
    if (!rc) rc = amp_verify_legacy_broadcast(c, g, n);
    if (!rc) rc = amp_verify_version_inputs(c, g, n);
    if (!rc) rc = amp_verify_control_flow(c, g, n);
    if (!rc) rc = check_outputs(c, f, n);
    return rc;
}

/* ---- graphs ---------------------------------------------------------------------- */

/* One value of g (the table's entry i): the table's consistency, its initializer tensor. */
static AmpCode check_value(Ctx *c, const AmpGraph *g, size_t i, const AmpValue *v) {
    if (!v || v->id != i || v->graph != g)
        return vfail(c, AMP_ERR_INTERNAL, g, NULL, "value table entry %zu is inconsistent", i);
    if (!(v->flags & AMP_VALUE_INITIALIZER)) return AMP_OK;
    const AmpTensor *t = v->initializer;
    if (!t)
        return vfail(c, AMP_ERR_INTERNAL, g, NULL, "initializer '%s' has no tensor", v->name);
    if (t->dtype == AMP_DT_UNDEFINED)
        return vfail(c, AMP_ERR_INPUT, g, NULL, "initializer '%s' has no data type", v->name);
    if (v->type.kind == AMP_TYPE_TENSOR && v->type.dtype != AMP_DT_UNDEFINED && v->type.dtype != t->dtype)
        return vfail(c, AMP_ERR_INPUT, g, NULL, "initializer '%s' holds %s data but the value is declared %s",
                     v->name, amp_dtype_name(t->dtype), amp_dtype_name(v->type.dtype));
    /* ... and its shape: an initializer of a graph input's name is the input's default,
     * so its data has the shape the input declares (onnxruntime: "Shape of initializer X
     * does not match"); read under the declared shape, a [4] default became a [2,3]. */
    if (amp_verify_shape_holds(&v->type, t)) return AMP_OK;
    char declared[128], held[128];
    amp_verify_dims_text(v->type.dims, v->type.rank, NULL, declared, sizeof declared);
    amp_verify_dims_text(NULL, (int)t->ndims, t->dims, held, sizeof held);
    return vfail(c, AMP_ERR_INPUT, g, NULL, "initializer '%s' holds data of shape %s but %s '%s' is declared %s",
                 v->name, held, (v->flags & AMP_VALUE_INPUT) ? "the graph input" : "the value", v->name, declared);
}

/* Graph inputs: each listed once, a value of g flagged as an input. */
static AmpCode check_inputs(Ctx *c, Frame *f) {
    AmpGraph *g = f->g;
    for (size_t i = 0; i < g->inputs.n; i++) {
        AmpValue *v = g->inputs.items[i].value;
        if (!v || v->graph != g || !(v->flags & AMP_VALUE_INPUT) || v->id >= g->n_values || g->values[v->id] != v)
            return vfail(c, AMP_ERR_INTERNAL, g, NULL, "graph input %zu is inconsistent", i);
        if (f->state[v->id] & VS_LISTED_IN)
            return vfail(c, AMP_ERR_INPUT, g, NULL, "graph input '%s' is listed twice", v->name);
        f->state[v->id] |= VS_LISTED_IN;
    }
    return AMP_OK;
}

/* After the walk, each value (check_value, and:) every producer link points at a linked
 * node, and every use list matches the input slots that read the value (passes rely on
 * both). Uses from
 * subgraphs and training graphs were counted while those were walked inside this one. */
static AmpCode check_links(Ctx *c, Frame *f) {
    AmpGraph *g = f->g;
    for (size_t i = 0; i < g->n_values; i++) {
        AmpValue *v = g->values[i];
        AmpCode rc = check_value(c, g, i, v);
        if (rc) return rc;
        if (v->producer && !(f->state[i] & VS_PRODUCED))
            return vfail(c, AMP_ERR_INTERNAL, g, NULL,
                         "value '%s' names a producer that is not linked into the graph", v->name);
        if (v->n_uses != f->refs[i])
            return vfail(c, AMP_ERR_INTERNAL, g, NULL,
                         "value '%s' has %zu uses recorded but %lu input slots read it", v->name,
                         v->n_uses, (unsigned long)f->refs[i]);
        uint64_t sig = 0;
        for (size_t u = 0; u < v->n_uses; u++) sig += use_sig(v->uses[u].node, v->uses[u].slot);
        if (sig != f->sig[i])
            return vfail(c, AMP_ERR_INTERNAL, g, NULL, "value '%s' has a use that its node does not make",
                         v->name);
    }
    return AMP_OK;
}

static AmpCode verify_training(Ctx *c, Frame *main_frame);

static AmpCode verify_graph(Ctx *c, Frame *up, AmpGraph *g) {
    Frame f = {g, NULL, NULL, NULL, up, up ? up->depth + 1 : 0};
    if (f.depth > MAX_DEPTH)
        return vfail(c, AMP_ERR_UNSUPPORTED, g, NULL, "subgraphs nest deeper than %d", MAX_DEPTH);
    size_t nv = g->n_values ? g->n_values : 1;
    f.state = amp_table_zalloc(nv * sizeof *f.state);
    f.refs = amp_table_zalloc(nv * sizeof *f.refs);
    f.sig = amp_table_zalloc(nv * sizeof *f.sig);
    AmpCode rc = AMP_OK;
    if (!f.state || !f.refs || !f.sig) {
        rc = amp_fail(c->st, AMP_ERR_INTERNAL, "verifier: out of memory");
        goto done;
    }
    if ((rc = check_inputs(c, &f))) goto done;

    size_t count = 0;
    AmpNode *prev = NULL;
    for (AmpNode *n = g->first; n; prev = n, n = n->next) {
        /* A corrupt list (a loop, a node of another graph) must not hang the verifier. */
        if (++count > g->n_nodes || n->graph != g || n->prev != prev) {
            rc = vfail(c, AMP_ERR_INTERNAL, g, n, "node list of the graph is corrupt");
            goto done;
        }
        if ((rc = verify_node(c, &f, n))) goto done;
    }
    if (count != g->n_nodes || g->last != prev) {
        rc = vfail(c, AMP_ERR_INTERNAL, g, NULL, "node list of the graph is corrupt");
        goto done;
    }
    c->n_nodes += count;
    if ((rc = check_graph_outputs(c, &f))) goto done;
    /* Training graphs see the whole main graph; walk them inside its frame. */
    if (g == c->m->graph && !up && (rc = verify_training(c, &f))) goto done;
    rc = check_links(c, &f);
done:
    amp_big_free(f.state, nv * sizeof *f.state);
    amp_big_free(f.refs, nv * sizeof *f.refs);
    amp_big_free(f.sig, nv * sizeof *f.sig);
    return rc;
}

/* ---- training info: its graphs here, its names and bindings in verify_train.c ---- */

static AmpCode verify_training(Ctx *c, Frame *main_frame) {
    AmpModel *m = c->m;
    for (size_t i = 0; i < m->n_training; i++) {
        AmpTrainingInfo *ti = &m->training[i];
        AmpGraph *gs[2] = {ti->initialization, ti->algorithm};
        for (int k = 0; k < 2; k++) {
            AmpGraph *tg = gs[k];
            if (!tg) continue;
            if (tg->parent && tg->parent != m->graph)
                return vfail(c, AMP_ERR_INTERNAL, tg, NULL, "training graph has a wrong parent link");
            AmpCode rc = verify_graph(c, tg->parent ? main_frame : NULL, tg);
            if (rc) return rc;
        }
        AmpCode rc = amp_verify_training_bindings(c, i);
        if (rc) return rc;
    }
    return amp_verify_keys_across(c);
}

AmpCode amp_verify_model_counted(AmpModel *m, size_t *n_nodes, AmpStatus *st) {
    if (!m || !m->graph) return amp_fail(st, AMP_ERR_INTERNAL, "verifier: model has no graph");
    int64_t v = amp_model_opset(m, "");
    Ctx c = {m, st, 0, v, !m->n_opsets || v > 0};
    /* Operator set versions start at 1 (onnx.checker); a version of 0 or less, or none
     * (read as 0, as onnx.checker does), would pick no op's definition, and every
     * opset-dependent rule would read it as "unknown" (fuzz_run: Dropout's mask type). */
    for (size_t i = 0; i < m->n_opsets; i++) {
        const char *dom = m->opsets[i].domain ? m->opsets[i].domain : "";
        if (!m->opsets[i].has_version)
            return amp_fail(st, AMP_ERR_INPUT, "opset_import of domain '%s' has no version; versions start at 1", dom);
        if (m->opsets[i].version <= 0)
            return amp_fail(st, AMP_ERR_INPUT, "opset_import of domain '%s' has version %lld; versions start at 1", dom,
                            (long long)m->opsets[i].version);
    }
    AmpCode rc = verify_graph(&c, NULL, m->graph);
    if (n_nodes) *n_nodes = rc ? 0 : c.n_nodes;
    return rc;
}

AmpCode amp_verify_model(AmpModel *m, AmpStatus *st) {
    return amp_verify_model_counted(m, NULL, st);
}
