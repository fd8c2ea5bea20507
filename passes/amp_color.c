/* Painting (TensorFlow grappler's AutoMixedPrecision order, docs/design.md, "The colouring
 * lists and the rules beside them"): paint allow; spread deny forward through infer nodes
 * and through clear nodes upstream of deny/infer nodes; clear/infer nodes both downstream
 * and upstream of allow become allow; allow spreads through clear nodes both ways. A node
 * that cannot take the 16-bit type is never entered. Every traversal is an explicit-stack
 * DFS with a visited set, so the whole painting is linear in nodes + edges. Edges join
 * nodes of one graph through float32 values read at float data slots; values crossing a
 * graph boundary keep their type. */
#include <stdlib.h>
#include <string.h>

#include "passes/amp_impl.h"
#include "passes/fuse_impl.h"
#include "passes/training.h"

bool amp_float_slot(const AmpNode *n, int slot) {
    if (n->op == AMP_OP_UNKNOWN || slot < 0) return false;
    uint32_t mask = amp_op_info(n->op)->float_inputs;
    return slot >= 32 ? mask == AMP_SLOTS_ALL : ((mask >> slot) & 1u) != 0;
}

bool amp_same_step(const AmpModel *m, const AmpGraph *in, const AmpGraph *g) {
    return in == g || (g == m->graph && amp_is_step_graph(m, in));
}

bool amp_reads_16(const AmpRun *r, const AmpGraph *g, const AmpNode *n, int slot) {
    uint32_t i = amp_idx(n);
    return i != AMP_NO_NODE && r->ni[i].paint == AMP_PAINT_ALLOW && amp_float_slot(n, slot) &&
           amp_same_step(r->m, n->graph, g);
}

bool amp_reads_shape_only(const AmpNode *n, int slot) {
    return slot == 0 && (n->op == AMP_OP_Shape || n->op == AMP_OP_Size);
}

/* ---- collecting nodes ------------------------------------------------------------ */

/* Grows *p (of *cap elements of `size`) to hold `need`, doubling. */
static bool grow(void **p, size_t *cap, size_t need, size_t size) {
    if (need <= *cap) return true;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * size);
    if (!q) return false;
    *p = q;
    *cap = c;
    return true;
}

AmpInelig amp_eligibility(const AmpRun *r, const AmpNode *n, AmpOpClass c) {
    if (n->op == AMP_OP_UNKNOWN || c == AMP_CLASS_NEVER) return AMP_INELIG_CLASS;
    if (amp_op_info(n->op)->float_inputs == AMP_SLOTS_NONE) return AMP_INELIG_NO_SLOTS;
    bool f32 = false, other = false;
    for (int i = 0; i < n->n_inputs; i++) {
        const AmpValue *v = n->inputs[i];
        if (!v || !amp_float_slot(n, i)) continue;
        if (v->type.kind != AMP_TYPE_TENSOR || v->type.dtype == AMP_DT_UNDEFINED) return AMP_INELIG_UNKNOWN;
        if (v->type.dtype == AMP_DT_FLOAT)
            f32 = true;
        else if (amp_dtype_is_float(v->type.dtype))
            return AMP_INELIG_TYPE;
        else
            other = true;
    }
    if (!f32 || other) return AMP_INELIG_NO_F32;
    /* The OPSETS column is in ai.onnx opsets for every op (a com.microsoft op runs its
     * function body of ai.onnx ops where onnxruntime has no kernel), looked up once. */
    int64_t base = r->opset_default >= 0 ? r->opset_default : amp_model_opset(r->m, "");
    if (r->min_opset[n->op] > base) return AMP_INELIG_OPSET;
    if (r->dt == AMP_DT_BFLOAT16 && base < 13) return AMP_INELIG_CAST_OPSET;
    return AMP_ELIGIBLE;
}

/* Decomposed LayerNorm and GELU (fuse_impl.h) that fuse_norm left so (the opset lacks
 * the op), and RMSNorm (no opset ampc runs has RMSNormalization), are coloured as that
 * op (an RMSNorm as LayerNormalization): every node of a group takes the op's class, so
 * the painting makes the group 16-bit or float32 as one (its values have readers only in
 * it); a norm's statistics and division then stay float32 (amp_color's step 5), as
 * LayerNormalization's stash_type keeps them: 16-bit in and out, float32 inside. Nodes [first, end) of r->ni, one graph. */
static void group_rule(AmpRun *r, size_t first, size_t end) {
    for (size_t i = first; i < end; i++) {
        AmpNode *n = r->ni[i].node;
        AmpFuseGroup g;
        if ((n->op != AMP_OP_ReduceMean && n->op != AMP_OP_Erf && n->op != AMP_OP_Tanh && n->op != AMP_OP_Pow &&
             n->op != AMP_OP_Mul) ||
            !amp_fuse_match(r->m, n, &g))
            continue;
        bool norm = g.kind == AMP_FUSE_LAYERNORM || g.kind == AMP_FUSE_RMSNORM;
        AmpOpClass c = r->cls[norm ? AMP_OP_LayerNormalization : AMP_OP_Gelu];
        bool ok = c == AMP_CLASS_INFER || c == AMP_CLASS_ALLOW;
        for (int k = 0; ok && k < g.n; k++) {
            uint32_t j = amp_idx(g.nodes[k]);
            ok = j >= first && j < end && r->ni[j].node == g.nodes[k] && !r->ni[j].group &&
                 amp_eligibility(r, g.nodes[k], c) == AMP_ELIGIBLE;
        }
        for (int k = 0; ok && k < g.n; k++) {
            AmpNodeInfo *x = &r->ni[amp_idx(g.nodes[k])];
            x->cls = (unsigned char)c;
            x->inelig = AMP_ELIGIBLE;
            x->group = (unsigned char)g.kind;
            if (norm && k < g.n_stats) x->flags |= AMP_NF_STATS;
        }
    }
}

AmpWhy amp_own_rule(const AmpNode *n) {
    if (amp_is_optimizer(n)) return AMP_WHY_OPTIMIZER;
    /* The loss-scaling pass's own nodes (a model converted before): unscaling, the
     * gradient check and the scale update are float32 by definition. */
    return amp_node_group(n) >= 0 ? AMP_WHY_LOSS_SCALE : AMP_WHY_NONE;
}

/* Every node of g, then (in order) of the subgraphs of its nodes, as amp_model_walk
 * visits them; each node's class, eligibility and own rule (amp_own_rule) on the way (one
 * visit per node). */
static AmpCode collect_graph(AmpRun *r, AmpGraph *g) {
    if (!grow((void **)&r->graphs, &r->cap_graphs, r->n_graphs + 1, sizeof *r->graphs) ||
        !grow((void **)&r->ni, &r->cap, r->n + g->n_nodes, sizeof *r->ni))
        return amp_fail(r->st, AMP_ERR_INTERNAL, "amp: out of memory");
    size_t k_graph = r->n_graphs++;
    r->graphs[k_graph] = (AmpRunGraph){g, r->n, 0, 0};
    size_t n_constants = 0;
    size_t end = r->n + g->n_nodes;
    AmpNode **owners = NULL;
    size_t n_owners = 0, cap_owners = 0;
    AmpCode rc = AMP_OK;
    for (AmpNode *n = g->first; n && r->n < end; n = n->next) {
        if (r->n >= (size_t)INT32_MAX - 1) {
            rc = amp_fail(r->st, AMP_ERR_UNSUPPORTED, "amp: too many nodes");
            break;
        }
        AmpNodeInfo *x = &r->ni[r->n++];
        memset(x, 0, sizeof *x);
        x->node = n;
        x->from = x->down_from = AMP_NO_NODE;
        n->mark = (int)r->n;
        x->cls = (unsigned char)(n->op == AMP_OP_UNKNOWN ? AMP_CLASS_NEVER : r->cls[n->op]);
        x->inelig = (unsigned char)amp_eligibility(r, n, (AmpOpClass)x->cls);
        AmpWhy why = amp_own_rule(n); /* here, while the node is at hand */
        if (why != AMP_WHY_NONE) x->flags = AMP_NF_FORCED, x->why = (unsigned char)why;
        r->n_float += x->inelig == AMP_ELIGIBLE || x->inelig == AMP_INELIG_OPSET ||
                      x->inelig == AMP_INELIG_CAST_OPSET;
        n_constants += n->op == AMP_OP_Constant;
        for (size_t i = 0; i < n->n_attrs; i++)
            if (n->attrs[i].g || n->attrs[i].n_graphs) {
                if (!grow((void **)&owners, &cap_owners, n_owners + 1, sizeof *owners)) {
                    free(owners);
                    return amp_fail(r->st, AMP_ERR_INTERNAL, "amp: out of memory");
                }
                owners[n_owners++] = n;
                break;
            }
    }
    r->graphs[k_graph].n = r->n - r->graphs[k_graph].first;
    if (!rc) group_rule(r, r->graphs[k_graph].first, r->n);
    r->graphs[k_graph].n_constants = n_constants;
    for (size_t k = 0; !rc && k < n_owners; k++)
        for (size_t i = 0; !rc && i < owners[k]->n_attrs; i++) {
            AmpAttr *at = &owners[k]->attrs[i];
            if (at->g) rc = collect_graph(r, at->g);
            for (size_t j = 0; !rc && j < at->n_graphs; j++) rc = collect_graph(r, at->graphs[j]);
        }
    free(owners);
    return rc;
}

AmpCode amp_collect(AmpRun *r) {
    AmpModel *m = r->m;
    r->opset_default = amp_model_opset(m, "");
    AmpCode rc = collect_graph(r, m->graph);
    for (size_t i = 0; !rc && i < m->n_training; i++) {
        if (m->training[i].initialization) rc = collect_graph(r, m->training[i].initialization);
        if (!rc && m->training[i].algorithm) rc = collect_graph(r, m->training[i].algorithm);
    }
    return rc;
}

/* ---- neighbours ------------------------------------------------------------------
 * Neighbours of a node are its consumers (outputs) and producers (inputs) in the same
 * graph (a training algorithm and the main graph count as one: amp_same_step), through
 * float32 values read at float data slots. They are listed once, before the painting, in
 * compact arrays (each step below walks the whole graph again): the consumers in the order
 * of the outputs and their use lists, the producers in input order. */

typedef struct Adj {
    uint32_t *off_out, *off_in; /* r->n + 1 each: node i's lists are [off[i], off[i + 1]) */
    uint32_t *out, *in;
    size_t n_out, n_in, cap_out, cap_in;
} Adj;

static bool edge(uint32_t **e, size_t *n, size_t *cap, uint32_t j) {
    if (*n == *cap && !grow((void **)e, cap, *n + 1, sizeof **e)) return false;
    (*e)[(*n)++] = j;
    return true;
}

static bool build_adj(const AmpRun *r, Adj *a) {
    memset(a, 0, sizeof *a);
    a->off_out = malloc((r->n + 1) * sizeof *a->off_out);
    a->off_in = malloc((r->n + 1) * sizeof *a->off_in);
    if (!a->off_out || !a->off_in) return false;
    for (size_t i = 0; i < r->n; i++) {
        const AmpNode *n = r->ni[i].node;
        a->off_out[i] = (uint32_t)a->n_out;
        a->off_in[i] = (uint32_t)a->n_in;
        for (int o = 0; o < n->n_outputs; o++) {
            const AmpValue *v = n->outputs[o];
            if (!amp_is_f32(v)) continue;
            for (size_t u = 0; u < v->n_uses; u++) {
                const AmpNode *c = v->uses[u].node;
                uint32_t j = amp_idx(c);
                if (amp_same_step(r->m, c->graph, n->graph) && j != AMP_NO_NODE && j != i &&
                    amp_float_slot(c, v->uses[u].slot) && !edge(&a->out, &a->n_out, &a->cap_out, j))
                    return false;
            }
        }
        for (int k = 0; k < n->n_inputs; k++) {
            const AmpValue *v = n->inputs[k];
            if (!amp_is_f32(v) || !v->producer || !amp_same_step(r->m, n->graph, v->producer->graph) ||
                !amp_float_slot(n, k))
                continue;
            uint32_t j = amp_idx(v->producer);
            if (j != AMP_NO_NODE && j != i && !edge(&a->in, &a->n_in, &a->cap_in, j)) return false;
        }
        if (a->n_out > UINT32_MAX || a->n_in > UINT32_MAX) return false;
    }
    a->off_out[r->n] = (uint32_t)a->n_out;
    a->off_in[r->n] = (uint32_t)a->n_in;
    return true;
}

static void free_adj(Adj *a) {
    free(a->off_out), free(a->off_in), free(a->out), free(a->in);
}

/* The DFS stack. */
typedef struct Dfs {
    AmpRun *r;
    const Adj *adj;
    uint32_t *stack;
    size_t n, cap;
    bool oom;
} Dfs;

static void push(Dfs *d, uint32_t i) {
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 1024;
        uint32_t *s = realloc(d->stack, cap * sizeof *s);
        if (!s) {
            d->oom = true;
            return;
        }
        d->stack = s;
        d->cap = cap;
    }
    d->stack[d->n++] = i;
}

enum { DIR_OUT = 1, DIR_IN = 2 };

/* What a traversal does: enter(j) decides whether to step into j (from i) and marks it. */
typedef bool (*EnterFn)(AmpRun *r, uint32_t from, uint32_t j);

/* Depth first from root (already marked by the caller) over `dirs`. */
static void dfs(Dfs *d, uint32_t root, int dirs, EnterFn enter) {
    const Adj *a = d->adj;
    push(d, root);
    while (d->n && !d->oom) {
        uint32_t i = d->stack[--d->n];
        if (dirs & DIR_OUT)
            for (uint32_t e = a->off_out[i]; e < a->off_out[i + 1]; e++)
                if (enter(d->r, i, a->out[e])) push(d, a->out[e]);
        if (dirs & DIR_IN)
            for (uint32_t e = a->off_in[i]; e < a->off_in[i + 1]; e++)
                if (enter(d->r, i, a->in[e])) push(d, a->in[e]);
    }
}

/* ---- the steps ---------------------------------------------------------------------- */

static bool forced(const AmpNodeInfo *x) {
    return (x->flags & AMP_NF_FORCED) != 0;
}

static bool deny_root(const AmpNodeInfo *x) {
    return forced(x) || x->cls == AMP_CLASS_DENY;
}

/* Step 2a: deny/infer nodes and the clear nodes upstream of them. */
static bool enter_upstream(AmpRun *r, uint32_t from, uint32_t j) {
    (void)from;
    AmpNodeInfo *x = &r->ni[j];
    if ((x->flags & AMP_NF_UPSTREAM) || x->cls != AMP_CLASS_CLEAR) return false;
    x->flags |= AMP_NF_UPSTREAM;
    return true;
}

/* Step 2b: deny spreads forward through that set. */
static bool enter_deny(AmpRun *r, uint32_t from, uint32_t j) {
    AmpNodeInfo *x = &r->ni[j];
    if (x->paint == AMP_PAINT_DENY || !(x->flags & AMP_NF_UPSTREAM)) return false;
    x->paint = AMP_PAINT_DENY;
    x->why = AMP_WHY_DENY_FWD;
    x->from = from;
    return true;
}

/* Can x turn 16-bit by spreading (not an allow-list op, not denied, eligible)? */
static bool spreadable(const AmpNodeInfo *x, bool infer_too) {
    return x->paint == AMP_PAINT_NONE && !forced(x) && x->inelig == AMP_ELIGIBLE &&
           (x->cls == AMP_CLASS_CLEAR || (infer_too && x->cls == AMP_CLASS_INFER));
}

/* Step 3a: clear/infer nodes downstream of allow. */
static bool enter_down_allow(AmpRun *r, uint32_t from, uint32_t j) {
    AmpNodeInfo *x = &r->ni[j];
    if ((x->flags & AMP_NF_DOWN_ALLOW) || !spreadable(x, true)) return false;
    x->flags |= AMP_NF_DOWN_ALLOW;
    x->down_from = from;
    return true;
}

/* Step 3b: going upstream from allow, those that are also downstream of allow. */
static bool enter_up_allow(AmpRun *r, uint32_t from, uint32_t j) {
    AmpNodeInfo *x = &r->ni[j];
    if ((x->flags & AMP_NF_UP_ALLOW) || !(x->flags & AMP_NF_DOWN_ALLOW)) return false;
    x->flags |= AMP_NF_UP_ALLOW;
    if (x->paint != AMP_PAINT_ALLOW) {
        x->paint = AMP_PAINT_ALLOW;
        x->why = AMP_WHY_BETWEEN;
        x->from = from;
    }
    return true;
}

/* Step 4: allow spreads through clear nodes, both ways. */
static bool enter_clear(AmpRun *r, uint32_t from, uint32_t j) {
    AmpNodeInfo *x = &r->ni[j];
    if ((x->flags & AMP_NF_CLEAR_SEEN) || !spreadable(x, false)) return false;
    x->flags |= AMP_NF_CLEAR_SEEN;
    x->paint = AMP_PAINT_ALLOW;
    x->why = AMP_WHY_CLEAR_PROP;
    x->from = from;
    return true;
}

/* A Gather from a float32 weight table (an initializer or a Constant: embeddings) in an
 * inference graph is allow: the table is then stored in 16 bits (amp_weights) and read a
 * row at a time, instead of staying float32 with its rows cast after the lookup. Training
 * graphs keep Gather to the lists: their tables are float32 master weights, which a
 * 16-bit Gather would cast whole at every step. */
static bool table_lookup(const AmpRun *r, const AmpNodeInfo *x) {
    const AmpNode *n = x->node;
    /* Gather in the clear or allow list (the user's edits and --level may have moved it). */
    if (r->training || n->op != AMP_OP_Gather || forced(x) || x->inelig != AMP_ELIGIBLE || n->n_inputs < 1 ||
        (x->cls != AMP_CLASS_CLEAR && x->cls != AMP_CLASS_ALLOW))
        return false;
    const AmpValue *t = n->inputs[0];
    return t && t->graph == n->graph &&
           ((t->initializer && !t->producer) || (t->producer && t->producer->op == AMP_OP_Constant));
}

AmpCode amp_color(AmpRun *r) {
    Adj adj;
    Dfs d = {r, &adj, NULL, 0, 0, false};
    size_t n = r->n;
    if (!build_adj(r, &adj)) d.oom = true;
    /* 1. Allow-list ops that can take the 16-bit type. Forced nodes are deny already. */
    for (size_t i = 0; i < n; i++) {
        AmpNodeInfo *x = &r->ni[i];
        if (table_lookup(r, x)) {
            x->paint = AMP_PAINT_ALLOW;
            x->why = AMP_WHY_TABLE;
            continue;
        }
        if (forced(x) || x->cls != AMP_CLASS_ALLOW || x->inelig != AMP_ELIGIBLE) continue;
        x->paint = AMP_PAINT_ALLOW;
        x->why = AMP_WHY_LIST;
    }
    /* 2. Deny forward through infer nodes and clear nodes upstream of deny/infer. Roots
     * are painted first, so a spread never overwrites the rule that made a root deny. */
    for (size_t i = 0; i < n && !d.oom; i++) {
        AmpNodeInfo *x = &r->ni[i];
        if (!deny_root(x) && x->cls != AMP_CLASS_INFER) continue;
        x->flags |= AMP_NF_UPSTREAM;
        dfs(&d, (uint32_t)i, DIR_IN, enter_upstream);
    }
    for (size_t i = 0; i < n; i++) {
        AmpNodeInfo *x = &r->ni[i];
        if (!deny_root(x)) continue;
        x->paint = AMP_PAINT_DENY;
        if (!forced(x)) x->why = AMP_WHY_LIST;
    }
    for (size_t i = 0; i < n && !d.oom; i++)
        if (deny_root(&r->ni[i])) dfs(&d, (uint32_t)i, DIR_OUT, enter_deny);
    /* 3. Clear/infer nodes both downstream and upstream of allow. */
    for (size_t i = 0; i < n && !d.oom; i++) {
        AmpNodeInfo *x = &r->ni[i];
        if (x->paint != AMP_PAINT_ALLOW || (x->why != AMP_WHY_LIST && x->why != AMP_WHY_TABLE) ||
            (x->flags & AMP_NF_DOWN_ALLOW))
            continue;
        x->flags |= AMP_NF_DOWN_ALLOW;
        dfs(&d, (uint32_t)i, DIR_OUT, enter_down_allow);
    }
    for (size_t i = 0; i < n && !d.oom; i++) {
        AmpNodeInfo *x = &r->ni[i];
        if (x->paint != AMP_PAINT_ALLOW || (x->why != AMP_WHY_LIST && x->why != AMP_WHY_TABLE) ||
            (x->flags & AMP_NF_UP_ALLOW))
            continue;
        x->flags |= AMP_NF_UP_ALLOW;
        dfs(&d, (uint32_t)i, DIR_IN, enter_up_allow);
    }
    /* 4. Allow through clear nodes, both ways. */
    for (size_t i = 0; i < n && !d.oom; i++) {
        AmpNodeInfo *x = &r->ni[i];
        if (x->paint != AMP_PAINT_ALLOW || (x->flags & AMP_NF_CLEAR_SEEN)) continue;
        x->flags |= AMP_NF_CLEAR_SEEN;
        dfs(&d, (uint32_t)i, DIR_IN | DIR_OUT, enter_clear);
    }
    /* 5. A decomposed LayerNorm painted 16-bit keeps its statistics in float32. */
    for (size_t i = 0; i < n; i++) {
        AmpNodeInfo *x = &r->ni[i];
        if ((x->flags & AMP_NF_STATS) && x->paint == AMP_PAINT_ALLOW) x->paint = AMP_PAINT_DENY, x->why = AMP_WHY_STATS;
    }
    free(d.stack);
    free_adj(&adj);
    /* Out of memory mid-way: an error, never a graph left fp32 as if converted. */
    if (d.oom) return amp_fail(r->st, AMP_ERR_INTERNAL, "pass 'amp': out of memory while painting %zu nodes", n);
    for (size_t i = 0; i < n; i++) r->n_16 += r->ni[i].paint == AMP_PAINT_ALLOW;
    return AMP_OK;
}
