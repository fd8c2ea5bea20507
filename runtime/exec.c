/* The graph interpreter: kernels chosen at prepare, values in slots indexed by
 * AmpValue.id, each intermediate freed after its last use (uses inside subgraphs count
 * at their owner node), If and Loop run their bodies through child executors that read
 * enclosing values through the parent chain. */
#include "exec.h"

#include <stdlib.h>
#include <string.h>

typedef struct Slot {
    AmpBuf buf;
    bool set;
    bool owned; /* data malloc'd by the executor (else borrowed from an input or tensor) */
} Slot;

struct AmpExec {
    AmpModel *m;
    AmpGraph *g;
    AmpExecOptions opt;
    uint64_t rng;
    size_t n_nodes;
    AmpNode **nodes;
    AmpKernelFn *kernels;   /* per node; NULL for If / Loop (run here) */
    size_t n_values;
    Slot *slots;            /* per value id of g */
    int *last_use;          /* per value id: last node index reading it, -1 if none */
    bool *is_output;        /* per value id */
    AmpExec *parent;        /* the executor of the enclosing graph, for subgraphs */
    AmpExec *children;      /* prepared subgraph executors, a list */
    AmpExec *next_sibling;
};

void amp_buf_free(AmpBuf *b) {
    free(b->data);
    b->data = NULL;
}

AmpCode amp_buf_from_tensor(AmpModel *m, AmpTensor *t, AmpBuf *out, AmpStatus *st) {
    if (t->ndims > AMP_MAX_RANK)
        return amp_fail(st, AMP_ERR_UNSUPPORTED, "tensor '%s' has rank %zu; the executor takes up to %d",
                        t->name ? t->name : "", t->ndims, AMP_MAX_RANK);
    AmpBytes bytes;
    AmpCode rc = amp_tensor_bytes(m, t, &bytes, st);
    if (rc) return rc;
    memset(out, 0, sizeof *out);
    out->dtype = t->dtype;
    out->rank = (int)t->ndims;
    for (size_t i = 0; i < t->ndims; i++) out->dims[i] = t->dims[i];
    out->nelem = t->nelem;
    out->data = (void *)bytes.data;
    return AMP_OK;
}

static void slot_clear(Slot *s) {
    if (s->owned) free(s->buf.data);
    memset(s, 0, sizeof *s);
}

/* ---- prepare --------------------------------------------------------------------- */

static bool is_control_flow(AmpOpId op) {
    return op == AMP_OP_If || op == AMP_OP_Loop;
}

/* Marks, for every value of `g` read anywhere inside `sub`, a use at node index `at`. */
static void mark_outer_uses(AmpExec *e, const AmpGraph *sub, int at) {
    for (AmpNode *n = sub->first; n; n = n->next) {
        for (int i = 0; i < n->n_inputs; i++) {
            AmpValue *v = n->inputs[i];
            if (v && v->graph == e->g && e->last_use[v->id] < at) e->last_use[v->id] = at;
        }
        for (size_t k = 0; k < n->n_attrs; k++) {
            if (n->attrs[k].g) mark_outer_uses(e, n->attrs[k].g, at);
            for (size_t j = 0; j < n->attrs[k].n_graphs; j++) mark_outer_uses(e, n->attrs[k].graphs[j], at);
        }
    }
    /* A body may return an enclosing value as its output. */
    for (size_t i = 0; i < sub->outputs.n; i++) {
        AmpValue *v = sub->outputs.items[i].value;
        if (v->graph == e->g && e->last_use[v->id] < at) e->last_use[v->id] = at;
    }
}

/* Every node of g and of its bodies has a kernel (or is run here), else the first that
 * has none is named: so an unsupported model fails at prepare, not halfway through. */
static AmpCode check_kernels(const AmpGraph *g, AmpStatus *st) {
    for (AmpNode *n = g->first; n; n = n->next) {
        if (n->op == AMP_OP_Scan || (!is_control_flow(n->op) && !amp_cpu_kernel(n->op)))
            return amp_fail(st, AMP_ERR_UNSUPPORTED, "node '%s' (%s%s%s): the CPU backend has no kernel for it",
                            n->name ? n->name : "", n->domain && *n->domain ? n->domain : "",
                            n->domain && *n->domain ? "." : "", n->op_type ? n->op_type : "");
        for (size_t k = 0; k < n->n_attrs; k++) {
            AmpCode rc = AMP_OK;
            if (n->attrs[k].g) rc = check_kernels(n->attrs[k].g, st);
            for (size_t j = 0; !rc && j < n->attrs[k].n_graphs; j++) rc = check_kernels(n->attrs[k].graphs[j], st);
            if (rc) return rc;
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

static AmpCode prepare(AmpModel *m, AmpGraph *g, const AmpExecOptions *opt, AmpExec *parent, AmpExec **out,
                       AmpStatus *st) {
    AmpExec *e = calloc(1, sizeof *e);
    if (!e) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    e->m = m;
    e->g = g;
    if (opt) e->opt = *opt;
    e->rng = e->opt.seed ? e->opt.seed : 0x9e3779b97f4a7c15ull;
    e->parent = parent;
    e->n_nodes = g->n_nodes;
    e->n_values = g->n_values;
    e->nodes = calloc(e->n_nodes ? e->n_nodes : 1, sizeof *e->nodes);
    e->kernels = calloc(e->n_nodes ? e->n_nodes : 1, sizeof *e->kernels);
    e->slots = calloc(e->n_values ? e->n_values : 1, sizeof *e->slots);
    e->last_use = malloc((e->n_values ? e->n_values : 1) * sizeof *e->last_use);
    e->is_output = calloc(e->n_values ? e->n_values : 1, sizeof *e->is_output);
    if (!e->nodes || !e->kernels || !e->slots || !e->last_use || !e->is_output) {
        amp_exec_free(e);
        return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    }
    for (size_t i = 0; i < e->n_values; i++) e->last_use[i] = -1;
    for (size_t i = 0; i < g->outputs.n; i++)
        if (g->outputs.items[i].value->graph == g) e->is_output[g->outputs.items[i].value->id] = true;

    size_t i = 0;
    for (AmpNode *n = g->first; n; n = n->next, i++) {
        e->nodes[i] = n;
        for (int k = 0; k < n->n_inputs; k++)
            if (n->inputs[k] && n->inputs[k]->graph == g) e->last_use[n->inputs[k]->id] = (int)i;
        for (size_t k = 0; k < n->n_attrs; k++) {
            if (n->attrs[k].g) mark_outer_uses(e, n->attrs[k].g, (int)i);
            for (size_t j = 0; j < n->attrs[k].n_graphs; j++) mark_outer_uses(e, n->attrs[k].graphs[j], (int)i);
        }
        if (is_control_flow(n->op)) continue;
        e->kernels[i] = amp_cpu_kernel(n->op);
        if (!e->kernels[i]) {
            AmpCode rc = amp_fail(st, AMP_ERR_UNSUPPORTED, "node '%s' (%s%s%s): the CPU backend has no kernel for it",
                                  n->name ? n->name : "", n->domain && *n->domain ? n->domain : "",
                                  n->domain && *n->domain ? "." : "", n->op_type ? n->op_type : "");
            amp_exec_free(e);
            return rc;
        }
    }
    /* Initializers are borrowed views of the model's tensors. */
    for (size_t k = 0; k < g->n_values; k++) {
        AmpValue *v = g->values[k];
        if (!v->initializer) continue;
        AmpCode rc = amp_buf_from_tensor(m, v->initializer, &e->slots[v->id].buf, st);
        if (rc) {
            amp_exec_free(e);
            return rc;
        }
        e->slots[v->id].set = true;
    }
    *out = e;
    return AMP_OK;
}

AmpCode amp_exec_prepare(AmpModel *m, AmpGraph *g, const AmpExecOptions *opt, AmpExec **out, AmpStatus *st) {
    *out = NULL;
    AmpCode rc = check_kernels(g, st);
    return rc ? rc : prepare(m, g, opt, NULL, out, st);
}

void amp_exec_free(AmpExec *e) {
    if (!e) return;
    AmpExec *c = e->children;
    while (c) {
        AmpExec *next = c->next_sibling;
        amp_exec_free(c);
        c = next;
    }
    for (size_t i = 0; e->slots && i < e->n_values; i++) slot_clear(&e->slots[i]);
    free(e->nodes), free(e->kernels), free(e->slots), free(e->last_use), free(e->is_output);
    free(e);
}

/* ---- running --------------------------------------------------------------------- */

static Slot *find_slot(AmpExec *e, const AmpValue *v) {
    for (; e; e = e->parent)
        if (v->graph == e->g) return v->id < e->n_values ? &e->slots[v->id] : NULL;
    return NULL;
}

typedef struct AllocCtx {
    AmpExec *e;
    AmpNode *n;
    AmpBuf *scratch; /* outputs the node lists as "" (n_outputs entries) */
} AllocCtx;

static AmpBuf *exec_alloc(void *ctx, int index, int dtype, int rank, const int64_t *dims, AmpStatus *st) {
    AllocCtx *a = ctx;
    if (index < 0 || index >= a->n->n_outputs) {
        amp_fail(st, AMP_ERR_INTERNAL, "node '%s' (%s): kernel wrote output %d of %d", a->n->name ? a->n->name : "",
                 a->n->op_type, index, a->n->n_outputs);
        return NULL;
    }
    if (rank < 0 || rank > AMP_MAX_RANK) {
        amp_fail(st, AMP_ERR_UNSUPPORTED, "node '%s' (%s): output rank %d is over %d", a->n->name ? a->n->name : "",
                 a->n->op_type, rank, AMP_MAX_RANK);
        return NULL;
    }
    uint64_t nelem = 1;
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 0 || (dims[i] && nelem > (UINT64_C(1) << 62) / (uint64_t)dims[i])) {
            amp_fail(st, AMP_ERR_INPUT, "node '%s' (%s): output %d has an invalid or huge shape",
                     a->n->name ? a->n->name : "", a->n->op_type, index);
            return NULL;
        }
        nelem *= (uint64_t)dims[i];
    }
    size_t bytes;
    if (!amp_tensor_expected_bytes(dtype, nelem, &bytes)) {
        amp_fail(st, AMP_ERR_UNSUPPORTED, "node '%s' (%s): output of type %s is not supported",
                 a->n->name ? a->n->name : "", a->n->op_type, amp_dtype_name(dtype));
        return NULL;
    }
    void *data = malloc(bytes ? bytes : 1);
    if (!data) {
        amp_fail(st, AMP_ERR_INTERNAL, "out of memory for a %zu-byte output", bytes);
        return NULL;
    }
    AmpValue *v = a->n->outputs[index];
    AmpBuf *b;
    if (v) {
        Slot *s = find_slot(a->e, v);
        slot_clear(s);
        s->set = s->owned = true;
        b = &s->buf;
    } else {
        b = &a->scratch[index];
        free(b->data);
    }
    memset(b, 0, sizeof *b);
    b->dtype = dtype;
    b->rank = rank;
    for (int i = 0; i < rank; i++) b->dims[i] = dims[i];
    b->nelem = nelem;
    b->data = data;
    return b;
}

static AmpCode copy_buf(const AmpBuf *src, AmpBuf *dst, AmpStatus *st) {
    *dst = *src;
    size_t bytes = amp_buf_bytes(src);
    dst->data = malloc(bytes ? bytes : 1);
    if (!dst->data) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    if (bytes) memcpy(dst->data, src->data, bytes);
    return AMP_OK;
}

static AmpCode get_child(AmpExec *e, AmpGraph *body, AmpExec **out, AmpStatus *st) {
    for (AmpExec *c = e->children; c; c = c->next_sibling)
        if (c->g == body) {
            *out = c;
            return AMP_OK;
        }
    AmpCode rc = prepare(e->m, body, &e->opt, e, out, st);
    if (rc) return rc;
    (*out)->next_sibling = e->children;
    e->children = *out;
    return AMP_OK;
}

/* Stores a body's output buffer (malloc'd by the child run) as output k of node n. */
static void take_output(AmpExec *e, AmpNode *n, int k, AmpBuf *b) {
    AmpValue *v = k < n->n_outputs ? n->outputs[k] : NULL;
    if (!v) {
        amp_buf_free(b);
        return;
    }
    Slot *s = find_slot(e, v);
    slot_clear(s);
    s->buf = *b;
    s->set = s->owned = true;
}

static AmpCode run_if(AmpExec *e, AmpNode *n, const AmpBuf *const *in, AmpStatus *st) {
    if (!in[0] || in[0]->nelem != 1)
        return amp_fail(st, AMP_ERR_INPUT, "node '%s' (If): the condition must hold one element",
                        n->name ? n->name : "");
    bool cond = amp_buf_get_i64(in[0], 0) != 0;
    const AmpAttr *br = amp_node_attr(n, cond ? "then_branch" : "else_branch");
    if (!br || !br->g)
        return amp_fail(st, AMP_ERR_INPUT, "node '%s' (If): no %s", n->name ? n->name : "",
                        cond ? "then_branch" : "else_branch");
    AmpExec *c;
    AmpCode rc = get_child(e, br->g, &c, st);
    if (rc) return rc;
    size_t no = br->g->outputs.n;
    AmpBuf *outs = calloc(no ? no : 1, sizeof *outs);
    if (!outs) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    rc = amp_exec_run(c, NULL, 0, outs, st);
    for (size_t k = 0; k < no; k++) {
        if (!rc) take_output(e, n, (int)k, &outs[k]);
        else amp_buf_free(&outs[k]);
    }
    free(outs);
    return rc;
}

/* Stacks the per-iteration buffers of one scan output along a new axis 0. */
static AmpCode stack(AmpBuf *parts, size_t n_parts, AmpBuf *out, AmpStatus *st) {
    memset(out, 0, sizeof *out);
    if (!n_parts) {
        out->dtype = AMP_DT_FLOAT;
        out->rank = 1;
        out->data = malloc(1);
        return out->data ? AMP_OK : amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    }
    const AmpBuf *p0 = &parts[0];
    if (p0->rank + 1 > AMP_MAX_RANK) return amp_fail(st, AMP_ERR_UNSUPPORTED, "Loop scan output rank too large");
    size_t each = amp_buf_bytes(p0);
    for (size_t i = 1; i < n_parts; i++)
        if (parts[i].nelem != p0->nelem || parts[i].dtype != p0->dtype)
            return amp_fail(st, AMP_ERR_INPUT, "Loop: scan output changes shape between iterations");
    out->dtype = p0->dtype;
    out->rank = p0->rank + 1;
    out->dims[0] = (int64_t)n_parts;
    for (int i = 0; i < p0->rank; i++) out->dims[i + 1] = p0->dims[i];
    out->nelem = p0->nelem * n_parts;
    out->data = malloc(each * n_parts > 0 ? each * n_parts : 1);
    if (!out->data) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    for (size_t i = 0; i < n_parts; i++)
        if (each) memcpy((char *)out->data + i * each, parts[i].data, each);
    return AMP_OK;
}

static AmpCode run_loop(AmpExec *e, AmpNode *n, const AmpBuf *const *in, AmpStatus *st) {
    const AmpAttr *ba = amp_node_attr(n, "body");
    if (!ba || !ba->g) return amp_fail(st, AMP_ERR_INPUT, "node '%s' (Loop): no body", n->name ? n->name : "");
    AmpGraph *body = ba->g;
    int n_carried = n->n_inputs - 2;
    if (n_carried < 0 || body->inputs.n != (size_t)n_carried + 2 || body->outputs.n < (size_t)n_carried + 1)
        return amp_fail(st, AMP_ERR_INPUT, "node '%s' (Loop): body inputs/outputs do not match the node",
                        n->name ? n->name : "");
    int n_scan = (int)body->outputs.n - 1 - n_carried;
    int64_t max_trip = in[0] ? amp_buf_get_i64(in[0], 0) : INT64_MAX;
    bool cond = in[1] ? amp_buf_get_i64(in[1], 0) != 0 : true;
    AmpExec *c;
    AmpCode rc = get_child(e, body, &c, st);
    if (rc) return rc;

    size_t nb = body->outputs.n;
    AmpNamedBuf *bin = calloc((size_t)n_carried + 2, sizeof *bin);
    AmpBuf *carried = calloc((size_t)n_carried + 1, sizeof *carried); /* owned copies */
    AmpBuf *bout = calloc(nb, sizeof *bout);
    AmpBuf **scans = calloc((size_t)n_scan + 1, sizeof *scans);
    size_t cap = 0, iters = 0;
    int64_t iter_val = 0;
    uint8_t cond_val = 1;
    if (!bin || !carried || !bout || !scans) {
        rc = amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
        goto done;
    }
    for (int k = 0; k < n_carried && !rc; k++) rc = copy_buf(in[k + 2], &carried[k], st);
    for (int64_t it = 0; !rc && it < max_trip && cond; it++) {
        iter_val = it;
        cond_val = cond;
        bin[0].name = body->inputs.items[0].value->name;
        bin[0].buf = (AmpBuf){.dtype = AMP_DT_INT64, .rank = 0, .nelem = 1, .data = &iter_val};
        bin[1].name = body->inputs.items[1].value->name;
        bin[1].buf = (AmpBuf){.dtype = AMP_DT_BOOL, .rank = 0, .nelem = 1, .data = &cond_val};
        for (int k = 0; k < n_carried; k++) {
            bin[k + 2].name = body->inputs.items[k + 2].value->name;
            bin[k + 2].buf = carried[k];
        }
        if ((rc = amp_exec_run(c, bin, (size_t)n_carried + 2, bout, st))) break;
        cond = amp_buf_get_i64(&bout[0], 0) != 0;
        amp_buf_free(&bout[0]);
        for (int k = 0; k < n_carried; k++) {
            amp_buf_free(&carried[k]);
            carried[k] = bout[k + 1];
        }
        if (iters == cap) {
            cap = cap ? cap * 2 : 8;
            for (int s = 0; s < n_scan; s++) {
                AmpBuf *p = realloc(scans[s], cap * sizeof *p);
                if (!p) {
                    rc = amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
                    break;
                }
                scans[s] = p;
            }
            if (rc) {
                for (int s = 0; s < n_scan; s++) amp_buf_free(&bout[1 + n_carried + s]);
                break;
            }
        }
        for (int s = 0; s < n_scan; s++) scans[s][iters] = bout[1 + n_carried + s];
        iters++;
    }
    for (int k = 0; k < n_carried; k++) {
        if (!rc) take_output(e, n, k, &carried[k]);
        else amp_buf_free(&carried[k]);
    }
    for (int s = 0; s < n_scan; s++) {
        if (!rc) {
            AmpBuf stacked;
            rc = stack(scans[s], iters, &stacked, st);
            if (!rc) take_output(e, n, n_carried + s, &stacked);
        }
        for (size_t i = 0; i < iters; i++) amp_buf_free(&scans[s][i]);
        free(scans[s]);
    }
done:
    free(bin), free(carried), free(bout), free(scans);
    return rc;
}

AmpCode amp_exec_run(AmpExec *e, const AmpNamedBuf *inputs, size_t n_inputs, AmpBuf *outputs, AmpStatus *st) {
    AmpGraph *g = e->g;
    AmpCode rc = AMP_OK;
    /* Fresh state: intermediates from an earlier run are gone, initializers are back. */
    for (size_t i = 0; i < e->n_values; i++) {
        AmpValue *v = g->values[i];
        if (v->initializer) {
            if (e->slots[i].owned) slot_clear(&e->slots[i]);
            if (!e->slots[i].set && (rc = amp_buf_from_tensor(e->m, v->initializer, &e->slots[i].buf, st)))
                return rc;
            e->slots[i].set = true;
        } else {
            slot_clear(&e->slots[i]);
        }
    }
    for (size_t i = 0; i < g->inputs.n; i++) {
        AmpValue *v = g->inputs.items[i].value;
        const AmpNamedBuf *given = NULL;
        for (size_t k = 0; k < n_inputs && !given; k++)
            if (strcmp(inputs[k].name, v->name) == 0) given = &inputs[k];
        if (!given) {
            if (v->initializer) continue;
            return amp_fail(st, AMP_ERR_USAGE, "graph '%s': input '%s' was not given", g->name ? g->name : "",
                            v->name);
        }
        Slot *s = &e->slots[v->id];
        slot_clear(s);
        s->buf = given->buf;
        s->set = true;
    }

    const AmpBuf *inbuf[64];
    AmpBuf scratch[16];
    memset(scratch, 0, sizeof scratch);
    for (size_t i = 0; i < e->n_nodes && !rc; i++) {
        AmpNode *n = e->nodes[i];
        if (n->n_inputs > 64 || n->n_outputs > 16)
            return amp_fail(st, AMP_ERR_UNSUPPORTED, "node '%s' (%s): too many inputs or outputs for the executor",
                            n->name ? n->name : "", n->op_type);
        for (int k = 0; k < n->n_inputs; k++) {
            inbuf[k] = NULL;
            if (!n->inputs[k]) continue;
            Slot *s = find_slot(e, n->inputs[k]);
            if (!s || !s->set)
                return amp_fail(st, AMP_ERR_INTERNAL, "node '%s' (%s): input '%s' has no value at run time",
                                n->name ? n->name : "", n->op_type, n->inputs[k]->name);
            inbuf[k] = &s->buf;
        }
        if (n->op == AMP_OP_If) {
            rc = run_if(e, n, inbuf, st);
        } else if (n->op == AMP_OP_Loop) {
            rc = run_loop(e, n, inbuf, st);
        } else {
            AllocCtx ac = {e, n, scratch};
            AmpKernelCtx k = {
                .node = n,
                .opset = amp_model_opset(e->m, n->domain),
                .n_in = n->n_inputs,
                .in = inbuf,
                .n_out = n->n_outputs,
                .alloc = exec_alloc,
                .alloc_ctx = &ac,
                .rng = &e->rng,
                .training = e->opt.training,
                .st = st,
            };
            rc = e->kernels[i](&k);
        }
        for (int k = 0; k < n->n_outputs; k++) amp_buf_free(&scratch[k]);
        if (rc) {
            if (st && !strstr(st->msg, "node '"))
                amp_status_prefix(st, "node '%s' (%s): ", n->name ? n->name : "", n->op_type);
            break;
        }
        /* Free what this node was the last to read. */
        for (int k = 0; k < n->n_inputs; k++) {
            AmpValue *v = n->inputs[k];
            if (v && v->graph == g && e->last_use[v->id] == (int)i && !e->is_output[v->id] && !v->initializer)
                slot_clear(&e->slots[v->id]);
        }
    }
    if (rc) return rc;
    for (size_t i = 0; i < g->outputs.n; i++) {
        AmpValue *v = g->outputs.items[i].value;
        Slot *s = find_slot(e, v);
        if (!s || !s->set) {
            rc = amp_fail(st, AMP_ERR_INTERNAL, "graph output '%s' was not computed", v->name);
            for (size_t k = 0; k < i; k++) amp_buf_free(&outputs[k]);
            return rc;
        }
        /* Hand over owned buffers once; copy borrowed ones and repeats. */
        if (s->owned && v->graph == g) {
            outputs[i] = s->buf;
            s->owned = false;
            s->set = false;
            memset(&s->buf, 0, sizeof s->buf);
            /* A repeated output reads the slot again: keep a copy available. */
            for (size_t k = i + 1; k < g->outputs.n; k++)
                if (g->outputs.items[k].value == v) {
                    s->buf = outputs[i];
                    s->set = true;
                    break;
                }
        } else if ((rc = copy_buf(&s->buf, &outputs[i], st))) {
            for (size_t k = 0; k < i; k++) amp_buf_free(&outputs[k]);
            return rc;
        }
    }
    return AMP_OK;
}
