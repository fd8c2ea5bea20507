/* The graph interpreter's prepare (exec.c runs what it prepares): each node's backend
 * chosen (the device, or the CPU fallback), the plan fused as the fusion's plan step
 * answers (fuse.h), each kernel chosen once through its backend, its attributes parsed,
 * each value's last use found (uses inside subgraphs count at their owner node); binding
 * inputs, training mode, memory figures and freeing. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/exec_impl.h"
#include "runtime/fuse.h"
#include "passes/options.h"

#define nname amp_exec_node_name

static bool is_control_flow(AmpOpId op) {
    return op == AMP_OP_If || op == AMP_OP_Loop || op == AMP_OP_Scan;
}

/* Marks, for every value of e's graph read anywhere inside `sub`, a use at node index
 * `at` (at == n_nodes: by a graph that runs after this one). */
static void mark_outer_uses(AmpExec *e, const AmpGraph *sub, int at) {
    unsigned after = at == (int)e->n_nodes ? VAL_AFTER : 0;
    for (AmpNode *n = sub->first; n; n = n->next) {
        for (int i = 0; i < n->n_inputs; i++) {
            AmpValue *v = n->inputs[i];
            if (v && v->graph == e->g && e->last[v->id] < at) e->last[v->id] = at;
            if (v && v->graph == e->g) e->vflags[v->id] |= after;
        }
        for (size_t k = 0; k < n->n_attrs; k++) {
            if (n->attrs[k].g) mark_outer_uses(e, n->attrs[k].g, at);
            for (size_t j = 0; j < n->attrs[k].n_graphs; j++) mark_outer_uses(e, n->attrs[k].graphs[j], at);
        }
    }
    /* A body may return an enclosing value as its output. */
    for (size_t i = 0; i < sub->outputs.n; i++) {
        AmpValue *v = sub->outputs.items[i].value;
        if (v->graph == e->g && e->last[v->id] < at) e->last[v->id] = at;
        if (v->graph == e->g) e->vflags[v->id] |= after;
    }
}

/* The backend that runs n: be, else the fallback, else NULL (neither has a kernel). Each
 * is asked with the input dtypes the model gives (amp_backend_takes: every input's, a Sum
 * over every gradient or a multi-tensor optimizer has hundreds). */
static AmpBackend *node_backend(AmpBackend *be, AmpBackend *fallback, const AmpModel *m, const AmpNode *n) {
    if (amp_backend_takes(be, m, n)) return be;
    return fallback && fallback != be && amp_backend_takes(fallback, m, n) ? fallback : NULL;
}

/* Every node of g and of its bodies has a kernel (or is run here), else the first that
 * has none is named: so an unsupported model fails at prepare, not halfway through. */
static AmpCode check_kernels(const AmpModel *m, const AmpGraph *g, AmpBackend *be, AmpBackend *fallback,
                             AmpStatus *st) {
    for (AmpNode *n = g->first; n; n = n->next) {
        if (!is_control_flow(n->op) && !node_backend(be, fallback, m, n)) {
            char cpu_has[256] = "";
            if (!fallback && be != amp_backend_cpu() && amp_backend_takes(amp_backend_cpu(), m, n))
                snprintf(cpu_has, sizeof cpu_has, " (the CPU has one: without %s it runs there)",
                         AMP_OPT_SAY("no-fallback", NULL));
            return amp_fail(st, AMP_ERR_UNSUPPORTED, "node '%s' (%s%s%s): the %s backend has no kernel for it%s",
                            nname(n), n->domain && *n->domain ? n->domain : "", n->domain && *n->domain ? "." : "",
                            n->op_type ? n->op_type : "", be->name, cpu_has);
        }
        for (size_t k = 0; k < n->n_attrs; k++) {
            AmpCode rc = AMP_OK;
            if (n->attrs[k].g) rc = check_kernels(m, n->attrs[k].g, be, fallback, st);
            for (size_t j = 0; !rc && j < n->attrs[k].n_graphs; j++)
                rc = check_kernels(m, n->attrs[k].graphs[j], be, fallback, st);
            if (rc) return rc;
        }
    }
    /* A rank the runtime's tensors cannot hold is refused here, once, so no caller copies
     * more dims than AmpBuf / AmpTensorView have (a model's rank-64 input used to). */
    for (int io = 0; io < 2; io++) {
        const AmpValueInfoList *l = io ? &g->outputs : &g->inputs;
        for (size_t i = 0; i < l->n; i++) {
            const AmpType *t = &l->items[i].value->type;
            if (t->kind == AMP_TYPE_TENSOR && t->rank > AMP_MAX_RANK)
                return amp_fail(st, AMP_ERR_UNSUPPORTED, "graph %s '%s' has rank %d; the runtime takes up to %d",
                                io ? "output" : "input", l->items[i].value->name, t->rank, AMP_MAX_RANK);
        }
    }
    for (size_t i = 0; i < g->inputs.n; i++)
        if (g->inputs.items[i].value->type.kind == AMP_TYPE_OTHER)
            return amp_fail(st, AMP_ERR_UNSUPPORTED, "graph input '%s': sequence, map and optional values are not supported",
                            g->inputs.items[i].value->name);
    for (size_t i = 0; i < g->outputs.n; i++)
        if (g->outputs.items[i].value->type.kind == AMP_TYPE_OTHER)
            return amp_fail(st, AMP_ERR_UNSUPPORTED, "graph output '%s': sequence, map and optional values are not supported",
                            g->outputs.items[i].value->name);
    return AMP_OK;
}

/* A fresh executor of g, every array allocated, the graph outputs marked live to the end
 * of the plan as the model has it; NULL when out of memory. */
static AmpExec *new_exec(AmpModel *m, AmpGraph *g, const AmpExecOptions *opt, AmpExec *parent) {
    AmpExec *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    e->m = m;
    e->g = g;
    if (opt) e->opt = *opt;
    e->be = e->opt.backend ? e->opt.backend : amp_backend_cpu();
    e->opt.backend = e->be;
    e->own_rng = e->opt.seed ? e->opt.seed : 0x9e3779b97f4a7c15ull;
    e->rng = e->opt.rng ? e->opt.rng : &e->own_rng;
    e->parent = parent;
    e->n_nodes = g->n_nodes;
    e->n_values = g->n_values;
    size_t nn = e->n_nodes ? e->n_nodes : 1, nv = e->n_values ? e->n_values : 1;
    e->nodes = calloc(nn, sizeof *e->nodes);
    e->kernels = calloc(nn, sizeof *e->kernels);
    e->node_be = calloc(nn, sizeof *e->node_be);
    e->opsets = calloc(nn, sizeof *e->opsets);
    e->slots = calloc(nv, sizeof *e->slots);
    e->vflags = calloc(nv, sizeof *e->vflags);
    e->first = malloc(nv * sizeof *e->first);
    e->last = malloc(nv * sizeof *e->last);
    e->init = calloc(nv, sizeof *e->init);
    e->dinit = calloc(nv, sizeof *e->dinit);
    e->dinit_owned = calloc(nv, sizeof *e->dinit_owned);
    e->bound = calloc(nv, sizeof *e->bound);
    e->rec = calloc(nv, sizeof *e->rec);
    e->off = malloc(nv * sizeof *e->off);
    e->psize = calloc(nv, sizeof *e->psize);
    e->sig = calloc(g->inputs.n ? g->inputs.n : 1, sizeof *e->sig);
    e->pshape = calloc(nv, sizeof *e->pshape);
    e->pbytes = calloc(nv, sizeof *e->pbytes);
    e->pknown = calloc(nv, sizeof *e->pknown);
    e->host_in = calloc(nv, sizeof *e->host_in);
    e->gate = calloc(nn, sizeof *e->gate);
    e->packs = calloc(nn, sizeof *e->packs);
    e->geoms = calloc(nn, sizeof *e->geoms);
    e->n_geoms_cap = nn;
    if (!e->gate || !e->packs || !e->geoms || !e->nodes || !e->kernels || !e->node_be || !e->opsets || !e->slots ||
        !e->vflags || !e->first || !e->last || !e->init || !e->dinit || !e->dinit_owned || !e->bound || !e->rec ||
        !e->off || !e->psize || !e->sig || !e->pshape || !e->pbytes || !e->pknown || !e->host_in) {
        amp_exec_free(e);
        return NULL;
    }
    for (size_t i = 0; i < e->n_values; i++) e->first[i] = -1, e->last[i] = -1, e->off[i] = SIZE_MAX;
    int end = (int)e->n_nodes;
    for (size_t i = 0; i < g->outputs.n; i++) {
        AmpValue *v = g->outputs.items[i].value;
        if (v->graph == g) e->vflags[v->id] |= VAL_OUTPUT, e->last[v->id] = end;
    }
    return e;
}

/* The plan: each node of the graph, with the backend that runs it (none for If / Loop /
 * Scan, which the executor runs). */
static AmpCode choose_backends(AmpExec *e, AmpStatus *st) {
    size_t i = 0;
    for (AmpNode *n = e->g->first; n; n = n->next, i++) {
        e->nodes[i] = n;
        e->opsets[i] = amp_model_opset(e->m, n->domain);
        if (is_control_flow(n->op)) continue;
        AmpBackend *nb = node_backend(e->be, e->opt.fallback, e->m, n);
        if (!nb) /* check_kernels said otherwise: a body met later, say */
            return amp_fail(st, AMP_ERR_UNSUPPORTED, "node '%s' (%s): the %s backend has no kernel for it", nname(n),
                            n->op_type, e->be->name);
        e->node_be[i] = nb;
    }
    return AMP_OK;
}

/* The plan-level fusion (fuse.h) decides which nodes run as one; the plan takes its
 * answer as it is: absorbed nodes leave it, each fused node runs in its group's place (on
 * the device, with the opset its domain imports), reading its folded gate. */
static AmpCode fuse_plan(AmpExec *e, AmpStatus *st) {
    if (e->opt.no_fuse) return AMP_OK;
    AmpFuseRequest rq = {.m = e->m, .g = e->g, .nodes = e->nodes, .node_be = e->node_be, .n = e->n_nodes,
                         .be = e->be, .max_in = AMP_EXEC_MAX_IN, .max_out = AMP_EXEC_MAX_OUT};
    AmpFusePlan p;
    AmpCode rc = amp_fuse_plan(&rq, &p, st);
    if (!rc && p.fused) {
        size_t w = 0;
        for (size_t i = 0; i < p.n; i++) {
            if (p.gone[i]) continue;
            e->nodes[w] = p.repl[i] ? p.repl[i] : e->nodes[i];
            e->node_be[w] = e->node_be[i];
            e->opsets[w] = p.repl[i] ? amp_model_opset(e->m, e->nodes[w]->domain) : e->opsets[i];
            e->gate[w] = p.gate[i];
            w++;
        }
        e->n_fused = p.fused;
        e->n_absorbed = p.n - w + p.fused;
        e->n_nodes = w;
    }
    amp_fuse_plan_free(&p);
    return rc;
}

/* Each value's first and last use in the plan, and each node's kernel prepared. */
static AmpCode prepare_kernels(AmpExec *e, AmpStatus *st) {
    AmpGraph *g = e->g;
    for (size_t i = 0; i < e->n_nodes; i++) {
        AmpNode *n = e->nodes[i];
        for (int k = 0; k < amp_exec_n_reads(e, i); k++) {
            const AmpValue *v = amp_exec_read(e, i, k);
            if (v && v->graph == g && e->last[v->id] < (int)i) e->last[v->id] = (int)i;
        }
        for (int k = 0; k < n->n_outputs; k++)
            if (n->outputs[k] && n->outputs[k]->graph == g) e->first[n->outputs[k]->id] = (int)i;
        for (size_t k = 0; k < n->n_attrs; k++) {
            if (n->attrs[k].g) mark_outer_uses(e, n->attrs[k].g, (int)i);
            for (size_t j = 0; j < n->attrs[k].n_graphs; j++) mark_outer_uses(e, n->attrs[k].graphs[j], (int)i);
        }
        if (is_control_flow(n->op)) continue;
        AmpBackend *nb = e->node_be[i];
        e->n_fallback += nb != e->be;
        AmpCode rc = nb->prepare_node(nb, n, e->opsets[i], &e->kernels[i], st);
        if (rc) return rc;
    }
    /* A value nothing reads dies where it is made. */
    for (size_t k = 0; k < e->n_values; k++)
        if (e->first[k] >= 0 && e->last[k] < e->first[k]) e->last[k] = e->first[k];
    return AMP_OK;
}

/* Initializers: host views of the model's tensors, uploaded when first needed. */
static AmpCode load_initializers(AmpExec *e, AmpStatus *st) {
    for (size_t k = 0; k < e->g->n_values; k++) {
        AmpValue *v = e->g->values[k];
        if (!v->initializer || v->graph != e->g) continue;
        AmpCode rc = amp_buf_from_tensor(e->m, v->initializer, &e->init[v->id], st);
        if (rc) return rc;
        e->vflags[v->id] |= VAL_INIT;
    }
    return AMP_OK;
}

/* The plan: each node with the backend that runs it, then fused, then each value's first
 * and last use and each kernel prepared. */
static AmpCode prepare(AmpModel *m, AmpGraph *g, const AmpExecOptions *opt, AmpExec *parent, AmpExec **out,
                       AmpStatus *st) {
    AmpExec *e = new_exec(m, g, opt, parent);
    if (!e) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    AmpCode rc = choose_backends(e, st);
    if (!rc) rc = fuse_plan(e, st);
    if (!rc) rc = prepare_kernels(e, st);
    if (!rc) rc = load_initializers(e, st);
    if (rc) {
        amp_exec_free(e);
        return rc;
    }
    *out = e;
    return AMP_OK;
}

AmpCode amp_exec_prepare(AmpModel *m, AmpGraph *g, const AmpExecOptions *opt, AmpExec **out, AmpStatus *st) {
    *out = NULL;
    AmpBackend *be = opt && opt->backend ? opt->backend : amp_backend_cpu();
    AmpCode rc = check_kernels(m, g, be, opt ? opt->fallback : NULL, st);
    return rc ? rc : prepare(m, g, opt, NULL, out, st);
}

static AmpCode prepare_scoped(AmpExec *prev, AmpGraph *g, const AmpExecOptions *opt, AmpExec **out,
                              AmpStatus *st) {
    *out = NULL;
    if (g->parent != prev->g)
        return amp_fail(st, AMP_ERR_INTERNAL, "graph '%s' does not run inside graph '%s'", g->name ? g->name : "",
                        prev->g->name ? prev->g->name : "");
    AmpExecOptions o = opt ? *opt : prev->opt;
    if (!o.backend) o.backend = prev->be;
    if (!o.rng) o.rng = prev->rng;
    AmpCode rc = check_kernels(prev->m, g, o.backend, o.fallback, st);
    return rc ? rc : prepare(prev->m, g, &o, prev, out, st);
}

AmpCode amp_exec_prepare_in(AmpExec *outer, AmpGraph *g, const AmpExecOptions *opt, AmpExec **out,
                            AmpStatus *st) {
    return prepare_scoped(outer, g, opt, out, st);
}

AmpCode amp_exec_prepare_after(AmpExec *prev, AmpGraph *g, const AmpExecOptions *opt, AmpExec **out,
                               AmpStatus *st) {
    AmpCode rc = prepare_scoped(prev, g, opt, out, st);
    if (rc) return rc;
    mark_outer_uses(prev, g, (int)prev->n_nodes);
    prev->replan = prev->planned; /* lifetimes grew: the old plan may overlap */
    prev->launches_ready = false; /* and what dies after each node changed */
    return AMP_OK;
}

AmpCode amp_exec_get_child(AmpExec *e, AmpGraph *body, AmpExec **out, AmpStatus *st) {
    for (AmpExec *c = e->children; c; c = c->next_sibling)
        if (c->g == body) {
            *out = c;
            return AMP_OK;
        }
    AmpExecOptions o = e->opt;
    o.rng = e->rng;
    AmpCode rc = prepare(e->m, body, &o, e, out, st);
    if (rc) return rc;
    (*out)->next_sibling = e->children;
    e->children = *out;
    return AMP_OK;
}

/* Empties what the kernels kept of constant inputs (AmpKernelCtx.pack). */
static void clear_packs(AmpExec *e) {
    for (size_t i = 0; e->packs && i < e->n_nodes; i++) amp_kernel_pack_clear(&e->packs[i]);
}

AmpCode amp_exec_bind(AmpExec *e, const AmpValue *v, const AmpBuf *buf, AmpStatus *st) {
    if (v->graph != e->g || v->id >= e->n_values || !(e->vflags[v->id] & VAL_INIT))
        return amp_fail(st, AMP_ERR_INTERNAL, "bind: '%s' is not an initializer of graph '%s'", v->name,
                        e->g->name ? e->g->name : "");
    if (buf && !e->bound[v->id]) {
        uint32_t *ids = realloc(e->bound_ids, (e->n_bound + 1) * sizeof *ids);
        if (!ids) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
        e->bound_ids = ids;
        e->bound_ids[e->n_bound++] = v->id;
    }
    e->bound[v->id] = buf;
    e->shapes_ready = false;
    clear_packs(e); /* what kernels kept may be of the bytes this replaces */
    return AMP_OK;
}

static void set_training(AmpExec *e, bool training) {
    e->opt.training = training;
    for (AmpExec *c = e->children; c; c = c->next_sibling) set_training(c, training);
}

void amp_exec_set_training(AmpExec *e, bool training) {
    set_training(e, training);
}

void amp_exec_free(AmpExec *e) {
    if (!e) return;
    AmpExec *c = e->children;
    while (c) {
        AmpExec *next = c->next_sibling;
        amp_exec_free(c);
        c = next;
    }
    for (size_t i = 0; e->slots && i < e->n_values; i++) amp_exec_slot_clear(e, &e->slots[i]);
    clear_packs(e);
    amp_exec_geom_free(e);
    for (size_t i = 0; e->kernels && e->node_be && i < e->n_nodes; i++) {
        AmpBackend *nb = e->node_be[i];
        if (nb && nb->release_node) nb->release_node(nb, &e->kernels[i]);
    }
    for (size_t i = 0; e->dinit && e->dinit_owned && i < e->n_values; i++)
        if (e->dinit_owned[i]) e->be->free(e->be, e->dinit[i].data);
    if (e->off) amp_exec_free_arena(e);
    free(e->nodes), free(e->kernels), free(e->node_be), free(e->opsets), free(e->slots), free(e->vflags), free(e->first);
    free(e->last), free(e->init), free(e->dinit), free(e->dinit_owned), free(e->bound), free(e->rec), free(e->off);
    free(e->psize), free(e->sig), free(e->in_slots), free(e->in_at), free(e->dead), free(e->dead_at);
    free(e->pshape), free(e->pbytes), free(e->pknown), free(e->outer_read), free(e->outer_shape), free(e->bound_ids);
    free(e->host_in), free(e->vals_read), free(e->gate), free(e->packs), free(e->into);
    free(e);
}

void amp_exec_memory(const AmpExec *e, AmpExecMemory *out) {
    memset(out, 0, sizeof *out);
    out->arena_bytes = e->arena_bytes;
    out->peak_bytes = e->peak;
    out->planned = e->planned;
    out->values_sized = e->n_known;
    out->values_dynamic = e->n_unknown;
    out->late_nodes = e->n_late;
    out->syncs = e->n_syncs;
    out->fallback_nodes = e->n_fallback;
    out->fused_nodes = e->n_fused;
    out->absorbed_nodes = e->n_absorbed;
    out->geometries = e->n_geoms;
    for (const AmpExec *c = e->children; c; c = c->next_sibling) {
        AmpExecMemory cm;
        amp_exec_memory(c, &cm);
        out->arena_bytes += cm.arena_bytes;
        out->peak_bytes += cm.peak_bytes;
        out->values_sized += cm.values_sized;
        out->values_dynamic += cm.values_dynamic;
        out->late_nodes += cm.late_nodes;
        out->syncs += cm.syncs;
        out->fallback_nodes += cm.fallback_nodes;
        out->fused_nodes += cm.fused_nodes;
        out->absorbed_nodes += cm.absorbed_nodes;
        out->geometries += cm.geometries;
    }
}

