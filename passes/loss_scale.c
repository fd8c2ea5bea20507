/* The "loss_scale" pass (docs/design.md, "Loss scaling and the gradient check"): GradScaler's
 * semantics written as standard ONNX nodes in a training graph, so the result runs
 * anywhere. The backward seed is multiplied by the scale; every parameter gradient is
 * unscaled in float32 under its own name; amp_found_inf says whether any gradient holds
 * an inf or NaN; every update (weights, optimizer state) keeps its old value when it does;
 * and with dynamic scaling the scale and its growth tracker follow GradScaler's rule,
 * bound by update_binding. Inference graphs pass through unchanged. Every node added is
 * named "amp_loss_scale/..." so --report and --dump-dot show them as one group; they are
 * made with ir/builder.h (placed, named and typed as they are made, the first error kept). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/builder.h"
#include "passes/options.h"
#include "passes/pass.h"
#include "passes/training.h"

/* The names are training.h's; every node this pass adds is named PREFIX... (the file's
 * record of AMP_ORIGIN_LOSS_SCALE, ir/precision.c's group). */
#define PREFIX AMP_LOSS_SCALE_PREFIX "/"
/* What every refusal below offers: converting without loss scaling, as the caller spells it. */
#define UNSCALED AMP_OPT_SAY("loss-scale", "none")
#define SCALE AMP_LS_SCALE
#define TRACKER AMP_LS_TRACKER
#define FOUND_INF AMP_LS_FOUND_INF
#define SCALE_NEW AMP_LS_SCALE_NEW
#define TRACKER_NEW AMP_LS_TRACKER_NEW

/* GradScaler's defaults (torch.amp.GradScaler). */
#define DEFAULT_INIT 65536.0
#define DEFAULT_GROWTH 2.0
#define DEFAULT_BACKOFF 0.5
#define DEFAULT_INTERVAL 2000

typedef struct Ls {
    AmpModel *m;
    AmpGraph *g; /* the main graph: the scale's state lives there */
    /* The graph that holds the gradients, where they are unscaled and checked and the scale
     * is updated: the main graph (the loss and backward there, as ampc grad and
     * onnxruntime-training write them) or an algorithm (ONNX's own layout). */
    AmpGraph *h;
    AmpTrainingInfo *h_ti; /* h's training_info when h is an algorithm, else NULL */
    const AmpPassOptions *opt;
    AmpStatus *st;
    bool dynamic;
    double init, growth, backoff;
    int64_t interval;
    AmpValue *loss, *seed;
    AmpValue **grads; /* parameter gradients (malloc'd), in the main graph's value order */
    size_t n_grads;
    AmpValue *scale, *inv, *found, *tracker;
    AmpBuilder b;       /* the main graph's new nodes, named PREFIX... */
    AmpBuilder hb;      /* h's, when h is an algorithm (hbuilder: the one for h) */
    size_t n_nodes_alg; /* nodes added to algorithm graphs (each has a builder of its own) */
    size_t n_gated;
    size_t n_gated_main; /* gates placed in the main graph: they read amp_found_inf, made last */
    bool own_ti;         /* the scale's update is bound by a training_info the pass added */
} Ls;

static AmpCode oom(Ls *l) {
    return amp_fail(l->st, AMP_ERR_INTERNAL, "loss_scale: out of memory");
}

/* b's first error, in l->st; AMP_OK while none. */
static AmpCode built(Ls *l, const AmpBuilder *b) {
    if (amp_builder_ok(b)) return AMP_OK;
    if (l->st && !l->st->code) {
        amp_builder_status(b, l->st);
        amp_status_prefix(l->st, "loss_scale: ");
    }
    return b->st.code;
}

/* "a" followed by "b", in the model's arena (a few per gradient: no printf). */
static const char *cat(Ls *l, const char *a, const char *b) {
    size_t na = strlen(a), nb = strlen(b);
    char *s = amp_arena_alloc(&l->m->arena, na + nb + 1);
    if (!s) return NULL;
    memcpy(s, a, na);
    memcpy(s + na, b, nb + 1);
    return s;
}

static bool is_float(const AmpValue *v) {
    int d = v->type.dtype;
    return v->type.kind == AMP_TYPE_TENSOR && (d == AMP_DT_FLOAT || d == AMP_DT_FLOAT16 || d == AMP_DT_BFLOAT16);
}

/* A fresh value named from `base`, typed like `like` but with `dtype`: what an existing
 * node writes instead of a value the pass takes over (its name kept for the new nodes). */
static AmpValue *fresh(AmpBuilder *b, const char *base, const AmpValue *like, int dtype) {
    AmpValue *v = amp_build_value(b, base);
    if (v) {
        v->type = like->type;
        v->type.dtype = dtype;
    }
    return v;
}

/* The builder of h, the gradients' graph. */
static AmpBuilder *hbuilder(Ls *l) {
    return l->h == l->g ? &l->b : &l->hb;
}

/* A scalar Constant of h, placed at its top, its output named from `what`. */
static AmpValue *constant(Ls *l, const char *what, int dtype, double v) {
    AmpBuilder *b = hbuilder(l);
    amp_builder_place_after(b, NULL);
    return amp_build_scalar(b, what, dtype, v);
}

/* ---- finding the parts of the training graph ------------------------------------------ */

/* The parameters' gradients: for each float initializer or graph input X of the main graph
 * or an algorithm, the value X_grad a node of the training step makes (onnxruntime
 * training's naming, docs/design.md's training-graph contract). They must all be made in
 * one graph, h. */
static AmpCode find_grads(Ls *l) {
    AmpModel *m = l->m;
    size_t cap = 1;
    for (size_t k = 0; k < amp_n_step_graphs(m); k++) {
        AmpGraph *g = amp_step_graph(m, k);
        if (g) cap += g->n_values;
    }
    l->grads = malloc(cap * sizeof *l->grads);
    if (!l->grads) return oom(l);
    for (size_t k = 0; k < amp_n_step_graphs(m); k++) {
        AmpGraph *g = amp_step_graph(m, k);
        size_t n = g ? g->n_values : 0; /* values are added below the loop's reach: none are */
        for (size_t i = 0; i < n; i++) {
            AmpValue *p = g->values[i];
            if (!(p->flags & (AMP_VALUE_INPUT | AMP_VALUE_INITIALIZER)) || !is_float(p)) continue;
            const char *gname = cat(l, p->name, "_grad");
            if (!gname) return oom(l);
            AmpValue *gv = amp_step_lookup(m, gname);
            if (!gv || gv == l->seed || !gv->producer) continue;
            /* A gradient whose type is unknown would stay scaled: refuse rather than convert
             * half-way (exit 0 means every gradient is unscaled). */
            if (gv->type.kind != AMP_TYPE_TENSOR || gv->type.dtype == AMP_DT_UNDEFINED) {
                const AmpNode *pn = gv->producer;
                return amp_fail(l->st, AMP_ERR_UNSUPPORTED,
                                "loss_scale: gradient '%s' of '%s' has no known type (made by node '%s', %s%s%s, "
                                "which ampc cannot type), so it could not be unscaled: the conversion would leave "
                                "it %s too large; convert with %s to leave the graph unscaled",
                                gv->name, p->name, pn->name ? pn->name : "",
                                pn->domain && *pn->domain ? pn->domain : "", pn->domain && *pn->domain ? "." : "",
                                pn->op_type ? pn->op_type : "?", "the loss scale times", UNSCALED);
            }
            if (!is_float(gv)) continue;
            if (l->n_grads && gv->graph != l->grads[0]->graph)
                return amp_fail(l->st, AMP_ERR_UNSUPPORTED,
                                "loss_scale: gradients '%s' and '%s' are made in different graphs (%s and %s): "
                                "ampc unscales and checks the gradients in one graph; convert with %s",
                                l->grads[0]->name, gv->name,
                                l->grads[0]->graph == l->g ? "the main graph" : "a training algorithm",
                                gv->graph == l->g ? "the main graph" : "another training algorithm", UNSCALED);
            l->grads[l->n_grads++] = gv;
        }
    }
    return AMP_OK;
}

/* Whether a gradient, or anything computed from it, reaches an update: a graph output of
 * the main graph (gradients returned, or accumulated as onnxruntime training's artifacts
 * do), an optimizer, or a training algorithm (whose update_bindings apply). A walk over
 * uses with an explicit stack; nodes seen are marked by their model-wide id. */
static bool has_update_path(Ls *l) {
    /* Each node is entered once and pushes its outputs: that bounds the stack. */
    size_t top = 0, cap = l->n_grads + 1;
    for (AmpNode *n = l->h->first; n; n = n->next) cap += (size_t)n->n_outputs;
    bool *seen = calloc(l->m->next_node_id + 1, sizeof *seen);
    AmpValue **stack = malloc(cap * sizeof *stack);
    if (!seen || !stack) {
        free(seen), free(stack);
        return true; /* out of memory: assume the best, the check only explains failures */
    }
    for (size_t i = 0; i < l->n_grads; i++) stack[top++] = l->grads[i];
    bool found = false;
    while (top && !found) {
        AmpValue *v = stack[--top];
        if (v->graph == l->h && (v->flags & AMP_VALUE_OUTPUT)) found = true;
        for (size_t u = 0; u < v->n_uses && !found; u++) {
            AmpNode *n = v->uses[u].node;
            if (n->graph != l->h || amp_is_optimizer(n)) found = true;
            if (found || seen[n->id]) continue;
            seen[n->id] = true;
            for (int o = 0; o < n->n_outputs; o++)
                if (n->outputs[o]) stack[top++] = n->outputs[o];
        }
    }
    free(seen), free(stack);
    return found;
}

/* A com.microsoft gradient accumulator: InPlaceAccumulatorV2 (in the op table) or the
 * older InPlaceAccumulator (not); input 1 is the value it adds. */
static bool is_accumulator(const AmpNode *n) {
    return n->op == AMP_OP_Ms_InPlaceAccumulatorV2 ||
           (n->domain && strcmp(n->domain, "com.microsoft") == 0 && n->op_type &&
            strcmp(n->op_type, "InPlaceAccumulator") == 0);
}

/* Every value a gradient accumulator adds must be a gradient found above (and so be
 * unscaled): one that is not would go into the buffer still multiplied by the scale. */
static AmpCode check_accumulated(Ls *l) {
    for (size_t k = 0; k < amp_n_step_graphs(l->m); k++) {
        AmpGraph *g = amp_step_graph(l->m, k);
        for (AmpNode *n = g ? g->first : NULL; n; n = n->next) {
            if (!is_accumulator(n)) continue;
            if (n->graph != l->h)
                return amp_fail(l->st, AMP_ERR_UNSUPPORTED,
                                "loss_scale: accumulator '%s' is in %s, the gradients in %s: it could not be gated "
                                "on the gradient check; convert with %s", n->name ? n->name : "",
                                g == l->g ? "the main graph" : "a training algorithm",
                                l->h == l->g ? "the main graph" : "a training algorithm", UNSCALED);
            AmpValue *v = n->n_inputs >= 2 ? n->inputs[1] : NULL;
            bool found = !v;
            for (size_t i = 0; i < l->n_grads && !found; i++) found = l->grads[i] == v;
            if (!found)
                return amp_fail(l->st, AMP_ERR_INPUT,
                                "loss_scale: accumulator '%s' adds '%s', which is no parameter's gradient "
                                "'<param>_grad' (a float initializer or graph input with that gradient), so it could "
                                "not be unscaled: it would reach the buffer multiplied by the loss scale; convert "
                                "with %s", n->name ? n->name : "", v->name, UNSCALED);
        }
    }
    return AMP_OK;
}

/* h: the graph of the gradients. The seed is scaled where it is made (the scale, a
 * main-graph state, is seen everywhere), which must be h or the main graph; gates are
 * placed where amp_found_inf (made in h) can be read. */
static AmpCode home(Ls *l) {
    AmpModel *m = l->m;
    l->h = l->grads[0]->graph;
    l->h_ti = NULL;
    for (size_t k = 0; k < m->n_training && l->h != l->g; k++)
        if (m->training[k].algorithm == l->h) l->h_ti = &m->training[k];
    if (l->seed->graph != l->g && l->seed->graph != l->h)
        return amp_fail(l->st, AMP_ERR_UNSUPPORTED,
                        "loss_scale: the backward seed '%s' is made in one training algorithm and the gradients "
                        "(first '%s') in another; convert with %s", l->seed->name,
                        l->grads[0]->name, UNSCALED);
    if (l->h == l->g) return AMP_OK;
    for (AmpNode *n = l->g->first; n; n = n->next)
        if (amp_is_optimizer(n) && n->origin != AMP_ORIGIN_LOSS_SCALE)
            return amp_fail(l->st, AMP_ERR_UNSUPPORTED,
                            "loss_scale: optimizer '%s' is in the main graph, the gradients in a training algorithm: "
                            "its update could not be gated on the gradient check; convert with %s",
                            n->name ? n->name : "", UNSCALED);
    for (size_t k = 0; k < m->n_training; k++)
        if (&m->training[k] != l->h_ti && m->training[k].n_update_bindings)
            return amp_fail(l->st, AMP_ERR_UNSUPPORTED,
                            "loss_scale: training_info[%zu] updates '%s', but the gradients are checked in another "
                            "training algorithm, whose amp_found_inf it cannot read; convert with %s",
                            k, m->training[k].update_bindings[0].key, UNSCALED);
    amp_builder_init(&l->hb, l->h, PREFIX);
    l->hb.origin = AMP_ORIGIN_LOSS_SCALE;
    return AMP_OK;
}

static AmpCode find_parts(Ls *l) {
    AmpCode rc = amp_find_loss(l->m, l->opt->loss, &l->loss, l->st);
    if (rc) {
        amp_status_prefix(l->st, "loss_scale: ");
        return rc;
    }
    if ((rc = amp_find_seed(l->m, l->loss, &l->seed, l->st))) return rc;
    if (!l->seed || !is_float(l->seed))
        return amp_fail(l->st, AMP_ERR_INPUT,
                        "loss_scale: training graph with loss '%s', but no float backward seed '%s_grad' (the "
                        "gradient of the loss) in the main graph or a training algorithm: name the loss with %s, "
                        "or convert with %s", l->loss->name, l->loss->name, AMP_OPT_SAY("loss", "NAME"), UNSCALED);
    if ((rc = find_grads(l))) return rc;
    if (!l->n_grads)
        return amp_fail(l->st, AMP_ERR_INPUT,
                        "loss_scale: training graph with loss '%s', but no parameter gradient: none of the float "
                        "initializers or graph inputs X has a computed 'X_grad' in the main graph or a training "
                        "algorithm (onnxruntime training's naming); convert with %s to skip loss "
                        "scaling", l->loss->name, UNSCALED);
    if ((rc = home(l))) return rc;
    if ((rc = check_accumulated(l))) return rc;
    if (!has_update_path(l))
        return amp_fail(l->st, AMP_ERR_INPUT,
                        "loss_scale: training graph with loss '%s' and %zu gradients (first '%s'), but no update "
                        "path: no gradient reaches an optimizer op, a training algorithm (update_binding) or a graph "
                        "output",
                        l->loss->name, l->n_grads, l->grads[0]->name);
    return AMP_OK;
}

/* ---- the rewrite ----------------------------------------------------------------------- */

/* The seed's readers read seed × scale instead (in float32: a 16-bit seed is widened,
 * scaled and narrowed back; a scale past float16's range then overflows, which the
 * check catches and the scale backs off from). */
static AmpCode scale_seed(Ls *l) {
    AmpBuilder *b = l->seed->graph == l->g ? &l->b : hbuilder(l);
    AmpValue *seed = l->seed;
    int dt = seed->type.dtype;
    AmpValue *scaled = fresh(b, cat(l, seed->name, "_scaled"), seed, dt);
    if (!scaled) return built(l, b);
    if (amp_value_replace_uses(seed, scaled, false)) return oom(l);
    amp_builder_place_after(b, seed->producer);
    AmpValue *x = seed;
    if (dt != AMP_DT_FLOAT) {
        AmpValue *w = amp_build_value(b, cat(l, seed->name, "_fp32"));
        x = amp_build_cast_to(b, "seed_to_fp32", x, w, AMP_DT_FLOAT);
    }
    AmpValue *prod = dt == AMP_DT_FLOAT ? scaled : amp_build_value(b, cat(l, seed->name, "_scaled_fp32"));
    AmpValue *in[2] = {x, l->scale};
    prod = amp_build_end(b, amp_build_start_to(b, "Mul", "seed", in, 2, prod));
    if (dt != AMP_DT_FLOAT) amp_build_cast_to(b, "seed_to_16", prod, scaled, dt);
    return built(l, b);
}

/* A 16-bit G's readers, as the amp pass typed them, read it in its 16-bit type: now that
 * G is float32 they read a Cast of it back to that type ("G_to_16"), so their types hold
 * (a 16-bit Identity reading G gave a float32 output typed 16-bit; converting the model
 * again then inserted the cast, and the conversion was no fixpoint: fuzz_convert). A
 * reader that casts G to float32 reads G itself. */
static AmpCode readers_keep_16(Ls *l, AmpBuilder *b, AmpValue *gv, const AmpUse *uses, size_t n, int dt) {
    AmpValue *g16 = NULL;
    for (size_t i = 0; i < n; i++) {
        const AmpNode *r = uses[i].node;
        if (r->op == AMP_OP_Cast && amp_node_attr_int(r, "to", 0) == AMP_DT_FLOAT) continue;
        if (!g16 && !(g16 = amp_build_cast_to(b, cat(l, "to_16/", gv->name), gv,
                                              fresh(b, cat(l, gv->name, "_to_16"), gv, dt), dt)))
            return built(l, b);
        if (amp_node_set_input(uses[i].node, uses[i].slot, g16)) return oom(l);
    }
    return built(l, b);
}

/* Gradient G keeps its name, now float32 and unscaled: its producer writes
 * "G_scaled", then [Cast to float32,] Mul by 1/scale gives G. Returns the check's
 * scalar: ReduceSum(G × 0), 0 when every element is finite and NaN otherwise (inf × 0
 * and NaN × 0 are NaN, a finite x × 0 is ±0, and a sum of zeros is exactly 0). */
static AmpCode unscale(Ls *l, AmpValue *gv, AmpValue *zero, AmpValue **check) {
    AmpBuilder *b = hbuilder(l);
    AmpNode *p = gv->producer;
    int dt = gv->type.dtype;
    /* G's readers until now (their list changes as they are rewired). */
    size_t n_readers = dt != AMP_DT_FLOAT ? gv->n_uses : 0;
    AmpUse *readers = n_readers ? malloc(n_readers * sizeof *readers) : NULL;
    if (n_readers && !readers) return oom(l);
    if (n_readers) memcpy(readers, gv->uses, n_readers * sizeof *readers);
    AmpValue *scaled = fresh(b, cat(l, gv->name, "_scaled"), gv, dt);
    if (!scaled) return built(l, b);
    amp_node_set_output(p, gv->producer_slot, scaled);
    amp_builder_place_after(b, p);
    AmpValue *x = scaled;
    if (dt != AMP_DT_FLOAT) {
        AmpValue *w = amp_build_value(b, cat(l, gv->name, "_scaled_fp32"));
        x = amp_build_cast_to(b, cat(l, "to_fp32/", gv->name), x, w, AMP_DT_FLOAT);
    }
    gv->type.dtype = AMP_DT_FLOAT;
    AmpValue *in[2] = {x, l->inv};
    amp_build_end(b, amp_build_start_to(b, "Mul", cat(l, "unscale/", gv->name), in, 2, gv));
    AmpCode rc = n_readers ? readers_keep_16(l, b, gv, readers, n_readers, dt) : AMP_OK;
    free(readers);
    if (rc) return rc;
    AmpValue *z = amp_build_value(b, cat(l, gv->name, "_times0"));
    AmpValue *in2[2] = {gv, zero};
    z = amp_build_end(b, amp_build_start_to(b, "Mul", cat(l, "check/", gv->name), in2, 2, z));
    AmpValue *s = amp_build_value(b, cat(l, gv->name, "_check"));
    if (s) /* a scalar even where G's rank is unknown */
        s->type = (AmpType){.kind = AMP_TYPE_TENSOR, .dtype = AMP_DT_FLOAT, .rank = 0, .dims = NULL};
    AmpNode *sum = amp_build_start_to(b, "ReduceSum", cat(l, "check_sum/", gv->name), &z, 1, s);
    amp_build_attr_int(b, sum, "keepdims", 0);
    *check = amp_build_end(b, sum);
    return built(l, b);
}

/* found = IsNaN(Sum(checks)). */
static AmpCode found_inf(Ls *l) {
    AmpBuilder *b = hbuilder(l);
    AmpValue *zero = constant(l, "zero", AMP_DT_FLOAT, 0.0);
    AmpValue **checks = malloc(l->n_grads * sizeof *checks);
    if (!checks) return oom(l);
    AmpCode rc = built(l, b);
    for (size_t i = 0; i < l->n_grads && !rc; i++) rc = unscale(l, l->grads[i], zero, &checks[i]);
    b->before = NULL; /* the check goes at the end */
    AmpNode *sum = rc ? NULL : amp_build_start(b, "Sum", "check_total", checks, (int)l->n_grads, 1);
    AmpValue *total = amp_build_end(b, sum);
    free(checks);
    if (rc || !total) return built(l, b);
    AmpValue *found = amp_graph_value(l->h, FOUND_INF);
    l->found = amp_build_end(b, amp_build_start_to(b, "IsNaN", "found_inf", &total, 1, found));
    if (l->found && !amp_graph_add_output(l->h, l->found)) return oom(l);
    return built(l, b);
}

/* Whether a and b may be the same tensor type: no known element type, rank or dimension
 * of one contradicts the other's. */
static bool types_agree(const AmpType *a, const AmpType *b) {
    if (a->kind != AMP_TYPE_TENSOR || b->kind != AMP_TYPE_TENSOR) return true;
    if (a->dtype != AMP_DT_UNDEFINED && b->dtype != AMP_DT_UNDEFINED && a->dtype != b->dtype) return false;
    if (a->rank < 0 || b->rank < 0) return true;
    if (a->rank != b->rank) return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i].value >= 0 && b->dims[i].value >= 0 && a->dims[i].value != b->dims[i].value) return false;
    return true;
}

/* v's type as its producer computes it, whatever the model declares (inference keeps a
 * declared shape that contradicts the computation: stale value_info is common); false
 * when that is not known. The producer's outputs get their types back. */
static bool computed_type(AmpValue *v, AmpType *out) {
    enum { MAX_OUTPUTS = 64 };
    AmpNode *p = v->producer;
    const AmpOpInfo *info = p ? amp_op_info(p->op) : NULL;
    if (!info || !info->infer || p->n_outputs > MAX_OUTPUTS) return false;
    for (size_t i = 0; i < p->n_attrs; i++)
        if (p->attrs[i].g || p->attrs[i].n_graphs) return false; /* its inference types its bodies */
    AmpType saved[MAX_OUTPUTS];
    for (int o = 0; o < p->n_outputs; o++) {
        AmpValue *w = p->outputs[o];
        if (!w) continue;
        saved[o] = w->type;
        w->type = (AmpType){AMP_TYPE_NONE, AMP_DT_UNDEFINED, -1, NULL};
    }
    AmpStatus tmp;
    amp_status_clear(&tmp);
    bool ok = amp_infer_node(p, &tmp) == AMP_OK && v->type.kind == AMP_TYPE_TENSOR;
    *out = v->type;
    for (int o = 0; o < p->n_outputs; o++)
        if (p->outputs[o]) p->outputs[o]->type = saved[o];
    return ok;
}

/* An update's new value must be of its old value's type and shape, as declared and as
 * computed: the gate selects one or the other (a model that says otherwise fails here,
 * rather than converting into one that nothing can run or convert again). */
static AmpCode check_update(Ls *l, const AmpValue *old, AmpValue *update) {
    AmpType c;
    if (types_agree(&old->type, &update->type) &&
        (!computed_type(update, &c) || types_agree(&old->type, &c)))
        return AMP_OK;
    return amp_fail(l->st, AMP_ERR_INPUT,
                    "loss_scale: '%s' replaces '%s' in a training update, but their types or shapes differ",
                    update->name, old->name);
}

/* out = Where(found, old, ungated), placed where b places; the node named from `what`.
 * out takes the type inference gives the gate (what converting the output again would
 * find: the gated value is often a graph output, whose type is saved). NULL on error. */
static AmpValue *gate_node(Ls *l, AmpBuilder *b, const char *what, AmpValue *old, AmpValue *ungated,
                           AmpValue *out) {
    AmpValue *in[3] = {l->found, old, ungated};
    out = amp_build_end(b, amp_build_start_to(b, "Where", cat(l, "gate/", what), in, 3, out));
    if (!out) return NULL;
    l->n_gated++;
    if (b->g == l->g) l->n_gated_main++;
    return out;
}

/* v (made by a node of b's graph) keeps its name but becomes Where(found, old, what it
 * was): with an inf or NaN among the gradients, the update keeps the old value. */
static AmpCode gate_in_place(Ls *l, AmpBuilder *b, AmpValue *v, AmpValue *old) {
    AmpCode rc = check_update(l, old, v);
    if (rc) return rc;
    AmpNode *p = v->producer;
    AmpValue *ungated = fresh(b, cat(l, v->name, "_ungated"), v, v->type.dtype);
    if (!ungated) return built(l, b);
    amp_node_set_output(p, v->producer_slot, ungated);
    amp_builder_place_after(b, p);
    gate_node(l, b, v->name, old, ungated, v);
    return built(l, b);
}

/* Outputs of the main graph's optimizers are the new weights and state: output group 0
 * replaces input group 0 (after R and T: the weights), group k >= 1 replaces input group
 * k + 1 (input group 1 is the gradients) — Adam, Momentum and Adagrad alike. */
static AmpCode gate_optimizers(Ls *l) {
    for (AmpNode *n = l->g->first; n; n = n->next) {
        if (!amp_is_optimizer(n) || n->origin == AMP_ORIGIN_LOSS_SCALE) continue;
        const char *d = n->domain ? n->domain : "";
        if (strcmp(d, AMP_TRAINING_DOMAIN) != 0)
            return amp_fail(l->st, AMP_ERR_UNSUPPORTED,
                            "loss_scale: node '%s' (%s:%s): cannot gate this optimizer's updates on amp_found_inf; "
                            "convert with %s", n->name ? n->name : "", d, n->op_type, UNSCALED);
        int outs = n->n_outputs, ins = n->n_inputs - 2;
        int per = 0; /* tensors per group: n outputs groups of `per`, n + 1 input groups */
        for (int k = 1; k <= outs && !per; k++)
            if (outs % k == 0 && ins == (outs / k + 1) * k) per = k;
        if (!per)
            return amp_fail(l->st, AMP_ERR_INPUT,
                            "loss_scale: node '%s' (%s): %d inputs and %d outputs do not pair each output with the "
                            "value it replaces", n->name ? n->name : "", n->op_type, n->n_inputs, outs);
        AmpNode *next = n->next;
        for (int o = 0; o < outs; o++) {
            AmpValue *v = n->outputs[o];
            int grp = o / per, idx = o % per;
            AmpValue *old = n->inputs[2 + (grp ? grp + 1 : 0) * per + idx];
            if (!v || !old) continue;
            AmpCode rc = gate_in_place(l, &l->b, v, old);
            if (rc) return rc;
        }
        n = next ? next->prev : l->g->last; /* skip the Where nodes just placed */
    }
    return AMP_OK;
}

/* com.microsoft gradient accumulators (onnxruntime-training's graphs: gradients add into
 * buffers the optimizer graph reads). onnxruntime writes InPlaceAccumulatorV2 with its
 * updated_flag output alone: the buffer, an input, is updated in place. So the value
 * added is gated, not the buffer: Where(amp_found_inf, 0, gradient). A step with an inf or
 * NaN gradient then adds nothing (or, on a step that resets the buffer, leaves it zero:
 * no good gradient since the reset), and no inf reaches a buffer. The same holds for
 * InPlaceAccumulator (old_sum + value) and for V2's optional buffer output. */
static AmpCode gate_accumulators(Ls *l) {
    AmpValue *zero_f32 = NULL;
    for (AmpNode *n = l->h->first; n; n = n->next) {
        if (!is_accumulator(n)) continue;
        AmpValue *v = n->n_inputs >= 2 ? n->inputs[1] : NULL;
        if (!v) continue;
        if (!is_float(v))
            return amp_fail(l->st, AMP_ERR_UNSUPPORTED,
                            "loss_scale: accumulator '%s' (%s) adds '%s', whose type is not known to be a float "
                            "tensor, so it cannot be gated on " FOUND_INF "; convert with %s",
                            n->name ? n->name : "", n->op_type, v->name, UNSCALED);
        AmpBuilder *b = hbuilder(l);
        if (!zero_f32 && !(zero_f32 = constant(l, "accumulator_zero", AMP_DT_FLOAT, 0.0))) return built(l, b);
        AmpValue *zero = zero_f32;
        int dt = v->type.dtype;
        b->before = n;
        if (dt != AMP_DT_FLOAT) { /* a 16-bit accumulation: its own zero */
            AmpValue *z = amp_build_value(b, cat(l, v->name, "_zero"));
            zero = amp_build_cast_to(b, cat(l, "accumulator_zero/", v->name), zero_f32, z, dt);
        }
        AmpValue *gated = zero ? fresh(b, cat(l, v->name, "_gated"), v, dt) : NULL;
        /* before n; it reads amp_found_inf, made later: the toposort fixes it */
        if (!(gated = gate_node(l, b, v->name, zero, v, gated))) return built(l, b);
        if (amp_node_set_input(n, 1, gated)) return oom(l);
    }
    return AMP_OK;
}

/* Each update_binding key <- value of an algorithm: value gated on amp_found_inf. The key
 * (the old value) is an initializer of the main graph or of the algorithm itself (an
 * optimizer buffer or step count kept there): either way the gate reads it in the
 * algorithm, which sees both. */
static AmpCode gate_bindings(Ls *l, AmpTrainingInfo *ti) {
    AmpGraph *a = ti->algorithm;
    if (!a) return AMP_OK;
    AmpBuilder ab; /* the algorithm's nodes */
    amp_builder_init(&ab, a, PREFIX);
    ab.origin = AMP_ORIGIN_LOSS_SCALE;
    AmpCode rc = AMP_OK;
    for (size_t k = 0; !rc && k < ti->n_update_bindings; k++) {
        AmpStrPair *b = &ti->update_bindings[k];
        AmpValue *old = amp_training_key(l->m, ti, b->key);
        AmpValue *v = amp_graph_lookup(a, b->value);
        if (!old || !v)
            return amp_fail(l->st, AMP_ERR_INPUT,
                            "loss_scale: update_binding '%s' <- '%s': %s", b->key, b->value,
                            !old ? "the key is no initializer of the main graph or of the algorithm"
                                 : "the value is no value of the algorithm");
        if (v->producer && v->producer->graph == a) {
            rc = gate_in_place(l, &ab, v, old);
            continue;
        }
        /* The bound value is no node's output here (an input, an outer value): gate a
         * copy, make it an output of the algorithm and bind that. */
        if ((rc = check_update(l, old, v))) break;
        AmpValue *gated = fresh(&ab, cat(l, v->name, "_gated"), v, v->type.dtype);
        ab.before = NULL;
        if (!(gated = gate_node(l, &ab, v->name, old, v, gated))) rc = built(l, &ab);
        else if (!amp_graph_add_output(a, gated)) rc = oom(l);
        else b->value = gated->name;
    }
    l->n_nodes_alg += ab.n_nodes;
    return rc;
}

/* GradScaler's update (torch._amp_update_scale_), in float32 like the scale itself:
 *   found_inf:  scale = scale * backoff;  tracker = 0
 *   else:       tracker + 1 == interval ? (scale = scale * growth if that is finite;
 *                                          tracker = 0)
 *                                       : tracker = tracker + 1 */
static AmpCode dynamic_update(Ls *l, AmpValue **scale_new, AmpValue **tracker_new) {
    AmpGraph *g = l->h;
    AmpBuilder *b = hbuilder(l);
    AmpValue *one = constant(l, "one_i64", AMP_DT_INT64, 1);
    AmpValue *zero = constant(l, "zero_i64", AMP_DT_INT64, 0);
    AmpValue *interval = constant(l, "growth_interval", AMP_DT_INT64, (double)l->interval);
    AmpValue *growth = constant(l, "growth_factor", AMP_DT_FLOAT, l->growth);
    AmpValue *backoff = constant(l, "backoff_factor", AMP_DT_FLOAT, l->backoff);
    AmpValue *inf = constant(l, "inf", AMP_DT_FLOAT, INFINITY);
    if (!inf) return built(l, b); /* after a failure every later call gives NULL */
    struct Step {
        const char *op, *out;
        AmpValue *in[3];
    };
    AmpValue *v[9];
    /* Each step reads values made by the steps before it (v[k]). */
    struct Step steps[] = {
        {"Add", "tracker_plus1", {l->tracker, one}},
        {"Equal", "grow", {NULL, interval}},        /* v[0] == interval */
        {"Mul", "grown", {l->scale, growth}},
        {"Less", "grown_finite", {NULL, inf}},      /* v[2] < inf */
        {"Where", "scale_grown", {NULL, NULL, l->scale}},
        {"Where", "scale_clean", {NULL, NULL, l->scale}},
        {"Where", "tracker_clean", {NULL, zero, NULL}},
        {"Mul", "scale_backoff", {l->scale, backoff}},
    };
    enum { N_STEPS = sizeof steps / sizeof steps[0] };
    b->before = NULL; /* appended */
    for (int k = 0; k < N_STEPS; k++) {
        struct Step *s = &steps[k];
        int n_in = strcmp(s->op, "Where") == 0 ? 3 : 2;
        switch (k) {
        case 1: s->in[0] = v[0]; break;
        case 3: s->in[0] = v[2]; break;
        case 4: s->in[0] = v[3], s->in[1] = v[2]; break; /* finite ? grown : scale */
        case 5: s->in[0] = v[1], s->in[1] = v[4]; break; /* grow ? scale_grown : scale */
        case 6: s->in[0] = v[1], s->in[2] = v[0]; break; /* grow ? 0 : tracker + 1 */
        default: break;
        }
        if (!(v[k] = amp_build_end(b, amp_build_start(b, s->op, s->out, s->in, n_in, 1)))) return built(l, b);
    }
    AmpValue *sn = amp_graph_value(g, SCALE_NEW), *tn = amp_graph_value(g, TRACKER_NEW);
    AmpValue *in1[3] = {l->found, v[7], v[5]}; /* found ? scale * backoff : scale_clean */
    AmpValue *in2[3] = {l->found, zero, v[6]}; /* found ? 0 : tracker_clean */
    *scale_new = amp_build_end(b, amp_build_start_to(b, "Where", "scale_new", in1, 3, sn));
    *tracker_new = amp_build_end(b, amp_build_start_to(b, "Where", "tracker_new", in2, 3, tn));
    if (!*tracker_new) return built(l, b);
    if (!amp_graph_add_output(g, *scale_new) || !amp_graph_add_output(g, *tracker_new)) return oom(l);
    return AMP_OK;
}

/* Binds amp_loss_scale <- the new scale and amp_growth_tracker <- the new tracker: through
 * Identity nodes in the gradients' algorithm, else the last algorithm (update_binding
 * values are algorithm outputs), or in a training_info of its own when the model has none
 * (then a training step is the main graph plus this algorithm, as ONNX defines it). */
static AmpCode bind_state(Ls *l, AmpValue *scale_new, AmpValue *tracker_new) {
    AmpModel *m = l->m;
    AmpTrainingInfo *ti = l->h_ti;
    for (size_t i = m->n_training; i-- > 0 && !ti;)
        if (m->training[i].algorithm) ti = &m->training[i];
    if (!ti) {
        AmpTrainingInfo *t = amp_arena_grow(&m->arena, m->training, m->n_training, m->n_training + 1, sizeof *t);
        if (!t) return oom(l);
        m->training = t;
        ti = &t[m->n_training++];
        memset(ti, 0, sizeof *ti);
        if (!(ti->algorithm = amp_graph_new(m, m->graph))) return oom(l);
        ti->algorithm->name = "amp_loss_scale_update";
        l->own_ti = true;
    }
    AmpBuilder ab; /* the Identity nodes, in the algorithm */
    amp_builder_init(&ab, ti->algorithm, PREFIX);
    ab.origin = AMP_ORIGIN_LOSS_SCALE;
    AmpStrPair *b = amp_arena_grow(&m->arena, ti->update_bindings, ti->n_update_bindings, ti->n_update_bindings + 2,
                                   sizeof *b);
    if (!b) return oom(l);
    ti->update_bindings = b;
    AmpValue *src[2] = {scale_new, tracker_new};
    const char *key[2] = {SCALE, TRACKER};
    /* Both names are chosen before either value exists: a new algorithm graph holding a
     * value makes every later new name a question for all the model's graphs (ir.c builds
     * a model-wide name set for it), which a graph of a million values would pay for. */
    const char *name[2];
    for (int k = 0; k < 2; k++) {
        const char *base = cat(l, key[k], "_updated");
        if (!base || !(name[k] = amp_graph_unique_name(ab.g, base))) return oom(l);
    }
    for (int k = 0; k < 2; k++) {
        AmpValue *out = amp_graph_value(ab.g, name[k]);
        out = amp_build_end(&ab, amp_build_start_to(&ab, "Identity", cat(l, "bind/", key[k]), &src[k], 1, out));
        if (!out) return built(l, &ab);
        if (!amp_graph_add_output(ab.g, out)) return oom(l);
        b[ti->n_update_bindings++] = (AmpStrPair){key[k], out->name};
    }
    l->n_nodes_alg += ab.n_nodes;
    return AMP_OK;
}

static AmpCode rewrite(Ls *l) {
    AmpBuilder *b = &l->b;
    bool init = !l->opt->loss_scale_state_inputs; /* else the caller feeds the state */
    l->scale = amp_build_state(b, SCALE, AMP_DT_FLOAT, l->init, init);
    if (l->dynamic) l->tracker = amp_build_state(b, TRACKER, AMP_DT_INT64, 0, init);
    AmpCode rc = built(l, b);
    /* 1/scale once, in float32 (exact for GradScaler's powers of two), at the top of the
     * gradients' graph. */
    b = hbuilder(l);
    amp_builder_place_after(b, NULL);
    l->inv = amp_build1(b, "Reciprocal", "inv_scale", l->scale);
    if (!rc) rc = built(l, b);
    if (!rc) rc = scale_seed(l);
    if (!rc) rc = found_inf(l);
    if (!rc) rc = gate_optimizers(l);
    if (!rc) rc = gate_accumulators(l);
    for (size_t i = 0; !rc && i < l->m->n_training; i++) rc = gate_bindings(l, &l->m->training[i]);
    if (!rc && l->dynamic) {
        AmpValue *scale_new = NULL, *tracker_new = NULL;
        rc = dynamic_update(l, &scale_new, &tracker_new);
        if (!rc && !l->opt->loss_scale_state_inputs) rc = bind_state(l, scale_new, tracker_new);
    }
    /* Every node went in after its inputs' producers (the scale's reciprocal and the
     * constants at the top, the unscaling right after each gradient, the check and the
     * update at the end), except a main-graph gate: placed where the value it replaces was
     * made, it reads amp_found_inf, made at the end. Only then does the main graph need
     * the stable sort (a linear pass over a graph that is in order, but a pass over every
     * node and input all the same). Algorithm graphs read amp_found_inf from outside. */
    if (!rc && l->n_gated_main) rc = amp_graph_toposort(l->g, l->st);
    for (size_t i = 0; !rc && i < l->m->n_training; i++)
        if (l->m->training[i].algorithm) rc = amp_graph_toposort(l->m->training[i].algorithm, l->st);
    return rc;
}

static void summary(const Ls *l) {
    if (!l->opt->notify) return;
    char line[1024];
    snprintf(line, sizeof line,
             "loss_scale: %s scale %g, loss '%s', %zu gradients unscaled, %zu updates gated on " FOUND_INF
             ", %zu nodes added%s",
             l->dynamic ? "dynamic" : "static", l->init, l->loss->name, l->n_grads, l->n_gated,
             l->b.n_nodes + (l->h != l->g ? l->hb.n_nodes : 0) + l->n_nodes_alg,
             l->own_ti ? "; the scale's update is bound by a training_info of its own, which runtimes that run "
                         "no training_info (onnxruntime, onnxruntime-training's Module) skip: there the scale "
                         "restarts at its initial value every step (--loss-scale-state inputs lets the caller "
                         "carry it)"
                       : "");
    l->opt->notify(l->opt->notify_ctx, line);
}

AmpCode amp_pass_loss_scale(AmpModel *m, const AmpPassOptions *opt, AmpStatus *st) {
    static const AmpPassOptions defaults = {0};
    if (!opt) opt = &defaults;
    AmpLossScaleMode mode = amp_loss_scale_mode(opt);
    if (mode == AMP_LOSS_SCALE_NONE || !amp_is_training_graph(m, opt->loss)) return AMP_OK;
    /* Converted before: the check is there already. */
    if (amp_step_lookup(m, FOUND_INF)) return AMP_OK;
    Ls l = {.m = m, .g = m->graph, .h = m->graph, .opt = opt, .st = st, .dynamic = mode == AMP_LOSS_SCALE_DYNAMIC};
    amp_builder_init(&l.b, m->graph, PREFIX);
    l.b.origin = AMP_ORIGIN_LOSS_SCALE;
    l.init = opt->loss_scale > 0 ? opt->loss_scale : DEFAULT_INIT;
    l.growth = opt->growth_factor > 0 ? opt->growth_factor : DEFAULT_GROWTH;
    l.backoff = opt->backoff_factor > 0 ? opt->backoff_factor : DEFAULT_BACKOFF;
    l.interval = opt->growth_interval > 0 ? opt->growth_interval : DEFAULT_INTERVAL;
    if (!(l.init <= FLT_MAX) || !(l.growth > 1) || !(l.backoff > 0 && l.backoff < 1))
        return amp_fail(st, AMP_ERR_USAGE,
                        "loss_scale: scale %g, growth factor %g, backoff factor %g: expected 0 < scale <= FLT_MAX, "
                        "growth > 1, 0 < backoff < 1", l.init, l.growth, l.backoff);
    int64_t opset = amp_model_opset(m, "");
    if (opset < 9)
        return amp_fail(st, AMP_ERR_UNSUPPORTED,
                        "loss_scale: the model imports ai.onnx opset %lld; the gradient check needs opset 9 or later "
                        "(IsNaN, Where): convert with %s", (long long)opset, UNSCALED);
    static const char *const taken[] = {SCALE, TRACKER, SCALE_NEW, TRACKER_NEW};
    for (size_t i = 0; i < sizeof taken / sizeof taken[0]; i++)
        if (amp_step_lookup(m, taken[i]))
            return amp_fail(st, AMP_ERR_INPUT,
                            "loss_scale: the model already has a value named '%s' but no '" FOUND_INF
                            "': it cannot be loss-scaled under ampc's names", taken[i]);
    AmpCode rc = find_parts(&l);
    if (!rc) rc = rewrite(&l);
    if (!rc) summary(&l);
    free(l.grads);
    return rc;
}
