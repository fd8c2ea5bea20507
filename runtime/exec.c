/* The graph interpreter's run: values in slots indexed by AmpValue.id, each intermediate
 * freed after its last use (uses inside subgraphs count at their owner node), the run
 * itself. Choosing the kernels once per node at prepare is exec_prepare.c's, the step plan
 * (launch list, shapes, arena) exec_plan.c's, placing outputs exec_alloc.c's, the CPU
 * fallback exec_fallback.c's, If / Loop / Scan exec_ctrl.c's, slots, buffers and the
 * clock exec_slot.c's. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/exec_impl.h"

#define nname amp_exec_node_name

/* ---- running --------------------------------------------------------------------- */

void amp_exec_set_hook(AmpExec *e, AmpExecHook fn, void *ctx) {
    e->hook = fn;
    e->hook_ctx = ctx;
}

AmpBackend *amp_exec_backend(const AmpExec *e) {
    return e->be;
}

const AmpBuf *amp_exec_value(const AmpExec *e, const AmpValue *v) {
    Slot *s = amp_exec_find_slot((AmpExec *)e, v);
    return s && s->kind != SLOT_EMPTY ? &s->buf : NULL;
}

/* The device copy of initializer id, uploaded on first use. */
static AmpCode upload_init(AmpExec *e, size_t id, AmpStatus *st) {
    if (e->dinit[id].data || !e->init[id].data) {
        if (!e->dinit[id].data) e->dinit[id] = e->init[id]; /* no bytes: nothing to upload */
        return AMP_OK;
    }
    void *dev;
    bool owned;
    AmpCode rc = amp_backend_upload(e->be, e->init[id].data, amp_buf_bytes(&e->init[id]), &dev, &owned, st);
    if (rc) return rc;
    e->dinit[id] = e->init[id];
    e->dinit[id].data = dev;
    e->dinit_owned[id] = owned;
    return AMP_OK;
}

AmpCode amp_exec_initializer(AmpExec *e, const AmpValue *v, const AmpBuf **out, AmpStatus *st) {
    *out = NULL;
    if (v->graph != e->g || v->id >= e->n_values || !(e->vflags[v->id] & VAL_INIT))
        return amp_fail(st, AMP_ERR_INTERNAL, "'%s' is not an initializer of graph '%s'", v->name,
                        e->g->name ? e->g->name : "");
    AmpCode rc = upload_init(e, v->id, st);
    if (!rc) *out = &e->dinit[v->id];
    return rc;
}

AmpCode amp_exec_reset(AmpExec *e, AmpStatus *st) {
    for (size_t i = 0; i < e->n_values; i++) {
        amp_exec_slot_clear(e, &e->slots[i]);
        if (!(e->vflags[i] & VAL_INIT)) continue;
        if (!e->bound[i]) {
            AmpCode rc = upload_init(e, i, st);
            if (rc) return rc;
        }
        e->slots[i].buf = e->bound[i] ? *e->bound[i] : e->dinit[i];
        e->slots[i].kind = SLOT_BORROWED;
    }
    e->live = e->peak = 0;
    return AMP_OK;
}

/* Fresh state for a run: intermediates of the last run are gone, initializers (or the
 * state buffers bound to them) are back, the given inputs are in place: host inputs
 * uploaded (or read in place), a body's device inputs borrowed. */
static AmpCode load_inputs(AmpExec *e, const AmpNamedBuf *inputs, size_t n_inputs, bool on_device,
                           AmpStatus *st) {
    AmpGraph *g = e->g;
    AmpCode rc = amp_exec_reset(e, st);
    if (rc) return rc;
    for (size_t i = 0; i < g->inputs.n; i++) e->host_in[g->inputs.items[i].value->id] = NULL;
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
        amp_exec_slot_clear(e, s);
        s->buf = given->buf;
        s->kind = SLOT_BORROWED;
        if (on_device) continue;
        e->host_in[v->id] = &given->buf; /* for the plan, during this run */
        void *dev;
        bool owned;
        if ((rc = amp_backend_upload(e->be, given->buf.data, amp_buf_bytes(&given->buf), &dev, &owned, st))) {
            memset(s, 0, sizeof *s);
            return rc;
        }
        s->buf.data = dev;
        s->kind = owned ? SLOT_UPLOAD : SLOT_BORROWED;
    }
    return AMP_OK;
}

/* Gives node i to the fallback backend after its device kernel refused the shapes it met;
 * the run goes on (st cleared) unless the fallback cannot prepare the node either. */
static AmpCode move_to_fallback(AmpExec *e, size_t i, AmpStatus *st) {
    AmpBackend *fb = e->opt.fallback;
    AmpNode *n = e->nodes[i];
    if (!amp_backend_takes(fb, e->m, n)) return st->code;
    AmpStatus keep = *st;
    AmpBackendKernel kern = {0};
    *st = (AmpStatus){0};
    if (fb->prepare_node(fb, n, e->opsets[i], &kern, st)) {
        if (fb->release_node) fb->release_node(fb, &kern);
        *st = keep;
        return st->code;
    }
    if (e->be->release_node) e->be->release_node(e->be, &e->kernels[i]);
    e->kernels[i] = kern;
    e->node_be[i] = fb;
    e->n_fallback++;
    return AMP_OK;
}

/* AmpKernelCtx.const_in of node i: its inputs (the first 32) that read this graph's
 * initializers in the model's own bytes (not given at this run; state that shares them
 * until it is set: setting state makes it a copy of its own, bound anew, which empties
 * the packs). */
static uint32_t const_inputs(const AmpExec *e, size_t i) {
    const AmpNode *n = e->nodes[i];
    Slot *const *in = e->in_slots + e->in_at[i];
    uint32_t mask = 0;
    for (int k = 0; k < n->n_inputs && k < 32; k++) {
        if (!in[k] || in[k] < e->slots || in[k] >= e->slots + e->n_values) continue; /* an enclosing graph's */
        size_t id = (size_t)(in[k] - e->slots);
        if ((e->vflags[id] & VAL_INIT) && in[k]->buf.data && in[k]->buf.data == e->dinit[id].data)
            mask |= UINT32_C(1) << k;
    }
    return mask;
}

/* Node i's kernel on the backend that runs it, its outputs placed (ac, outs). A device
 * kernel that meets a case it does not take (a geometry cuDNN cannot run, known only from
 * the shapes) hands the node to the fallback for good. */
static AmpCode run_kernel(AmpExec *e, size_t i, AllocCtx *ac, const AmpBuf **inbuf, AmpBuf *outs, AmpStatus *st) {
    AmpNode *n = e->nodes[i];
    Slot **in = e->in_slots + e->in_at[i];
    AmpKernelCtx k = {
        .node = n,
        .opset = e->opsets[i],
        .n_in = n->n_inputs,
        .in = inbuf,
        .gate = e->gate[i] ? &in[n->n_inputs]->buf : NULL,
        .n_out = n->n_outputs,
        .out = outs,
        .alloc = amp_exec_alloc,
        .alloc_ctx = ac,
        .const_in = const_inputs(e, i),
        .pack = &e->packs[i],
        .rng = e->rng,
        .training = e->opt.training,
        .comm = e->opt.comm,
        .st = st,
    };
    AmpCode rc = amp_exec_node_geom(e, i, &k, st);
    if (rc) return rc;
    if (e->node_be[i] != e->be) return amp_exec_run_fallback(e, i, &k, ac, st);
    rc = e->be->run_node(e->be, &e->kernels[i], &k);
    if (rc == AMP_ERR_UNSUPPORTED && e->opt.fallback && e->opt.fallback != e->be &&
        (rc = move_to_fallback(e, i, st)) == AMP_OK)
        rc = amp_exec_run_fallback(e, i, &k, ac, st);
    return rc;
}

static AmpCode run_node_in(AmpExec *e, size_t i, AmpBuf *scratch, const AmpBuf **inbuf, AmpStatus *st) {
    AmpNode *n = e->nodes[i];
    Slot **in = e->in_slots + e->in_at[i];
    for (int k = 0; k < n->n_inputs; k++) {
        inbuf[k] = NULL;
        if (!in[k]) continue;
        if (in[k]->kind == SLOT_EMPTY)
            return amp_fail(st, AMP_ERR_INTERNAL, "node '%s' (%s): input '%s' has no value at run time", nname(n),
                            n->op_type, n->inputs[k]->name);
        inbuf[k] = &in[k]->buf;
    }
    if (e->gate[i] && (!in[n->n_inputs] || in[n->n_inputs]->kind == SLOT_EMPTY))
        return amp_fail(st, AMP_ERR_INTERNAL, "node '%s' (%s): its gate '%s' has no value at run time", nname(n),
                        n->op_type, e->gate[i]->name);
    AmpCode rc;
    if (n->op == AMP_OP_If) {
        rc = amp_exec_run_if(e, n, inbuf, amp_exec_run_body, st);
    } else if (n->op == AMP_OP_Loop) {
        rc = amp_exec_run_loop(e, n, inbuf, amp_exec_run_body, st);
    } else if (n->op == AMP_OP_Scan) {
        rc = amp_exec_run_scan(e, n, inbuf, amp_exec_run_body, st);
    } else {
        bool placed[AMP_EXEC_MAX_OUT];
        AmpBuf outs[AMP_EXEC_MAX_OUT];
        AllocCtx ac = {e, n, scratch, placed};
        if ((rc = amp_exec_place_outputs(e, i, &ac, outs, st))) return rc;
        rc = run_kernel(e, i, &ac, inbuf, outs, st);
    }
    for (int k = 0; k < n->n_outputs; k++)
        if (scratch[k].data) e->be->free(e->be, scratch[k].data), scratch[k].data = NULL;
    if (rc) {
        /* The status holds the first, most precise failure (the allocator's cap, say) even
         * where a kernel answers a failed allocation with a generic code. */
        if (st && st->code) rc = st->code;
        if (st && !strstr(st->msg, "node '")) amp_status_prefix(st, "node '%s' (%s): ", nname(n), n->op_type);
        return rc;
    }
    if (e->hook && (rc = e->hook(e->hook_ctx, e, n, st))) return st && st->code ? st->code : rc;
    for (size_t j = e->dead_at[i]; j < e->dead_at[i + 1]; j++) amp_exec_slot_clear(e, &e->slots[e->dead[j]]);
    return AMP_OK;
}

/* Node i with its inputs' array on the stack, or allocated for a node with more inputs
 * (a variadic Sum over every gradient of a large model). */
static AmpCode run_node(AmpExec *e, size_t i, AmpBuf *scratch, AmpStatus *st) {
    const AmpBuf *stack_in[AMP_EXEC_MAX_IN], **inbuf = stack_in;
    int n_in = e->nodes[i]->n_inputs;
    if (n_in > AMP_EXEC_MAX_IN && !(inbuf = malloc((size_t)n_in * sizeof *inbuf)))
        return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    AmpCode rc = run_node_in(e, i, scratch, inbuf, st);
    if (inbuf != stack_in) free(inbuf);
    return rc;
}

/* Hands graph output slot s over as *out: copied out to malloc'd host memory (to_host),
 * or as a device buffer, an owned intermediate passed on as it is when nothing else
 * needs it (take). Nothing is left allocated on failure. */
static AmpCode give_output(AmpExec *e, Slot *s, bool take, bool to_host, AmpBuf *out, AmpStatus *st) {
    if (!to_host && take && s->kind == SLOT_OWNED) {
        *out = s->buf;
        e->live = e->live > s->live_bytes ? e->live - s->live_bytes : 0;
        memset(s, 0, sizeof *s);
        return AMP_OK;
    }
    if (!to_host) return amp_exec_copy_buf(e, &s->buf, out, st);
    size_t bytes = amp_buf_bytes(&s->buf);
    *out = s->buf;
    if (!(out->data = malloc(bytes ? bytes : 1))) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    AmpCode rc = bytes ? e->be->copy_out(e->be, out->data, s->buf.data, bytes, st) : AMP_OK;
    if (rc) amp_buf_free(out);
    return rc;
}

/* Hands every graph output over (give_output); on failure none stays allocated. */
static AmpCode give_outputs(AmpExec *e, AmpBuf *outputs, bool to_host, AmpStatus *st) {
    AmpGraph *g = e->g;
    size_t done = 0;
    AmpCode rc = AMP_OK;
    for (size_t i = 0; i < g->outputs.n && !rc; i++) {
        AmpValue *v = g->outputs.items[i].value;
        Slot *s = amp_exec_find_slot(e, v);
        if (!s || s->kind == SLOT_EMPTY) {
            rc = amp_fail(st, AMP_ERR_INTERNAL, "graph output '%s' was not computed", v->name);
            break;
        }
        bool repeated = false;
        for (size_t k = i + 1; k < g->outputs.n; k++) repeated |= g->outputs.items[k].value == v;
        bool take = v->graph == g && !repeated && !(e->vflags[v->id] & VAL_AFTER);
        if (!(rc = give_output(e, s, take, to_host, &outputs[i], st))) done = i + 1;
    }
    for (size_t k = 0; rc && k < done; k++) {
        if (to_host) amp_buf_free(&outputs[k]);
        else amp_exec_buf_free(e, &outputs[k]);
    }
    return rc;
}

static AmpCode run(AmpExec *e, const AmpNamedBuf *inputs, size_t n_inputs, AmpBuf *outputs, bool on_device,
                   AmpStatus *st) {
    AmpCode rc = e->launches_ready ? AMP_OK : amp_exec_build_launches(e, st);
    if (!rc) rc = load_inputs(e, inputs, n_inputs, on_device, st);
    if (rc) return rc;
    /* New input shapes (or state, or enclosing values, of new shapes): this step's shapes
     * and arena are planned before it runs. Else the arena is planned again only when the
     * last run allocated what the plan did not hold (values of unknown shape). */
    if (!amp_exec_plan_current(e)) {
        memset(e->rec, 0, e->n_values * sizeof *e->rec);
        amp_exec_plan_shapes(e);
        e->replan = true;
    }
    if (e->replan && !e->opt.no_plan) amp_exec_build_arena(e);
    e->replan = false;
    memset(e->rec, 0, e->n_values * sizeof *e->rec);
    e->fallback = false;
    e->n_late = e->n_syncs = 0;

    AmpBuf scratch[AMP_EXEC_MAX_OUT];
    memset(scratch, 0, sizeof scratch);
    bool mark = !on_device && e->be->mark; /* a graph the caller runs, not a body */
    if (mark) e->be->mark(e->be, false);
    for (size_t i = 0; i < e->n_nodes && !rc; i++) {
        /* The clock costs about 20 ns: read it every 32 nodes (and every iteration). */
        if (!(i & 31) && (rc = amp_exec_check_deadline(e, st))) break;
        rc = run_node(e, i, scratch, st);
    }
    if (mark) e->be->mark(e->be, true);
    if (!rc && outputs) rc = give_outputs(e, outputs, !on_device, st);
    if (rc) return rc;
    /* Plan again for the next run when something did not fit, or when nothing could be
     * planned before this one (every size is known now). */
    if (!e->opt.no_plan && (!e->planned || e->fallback)) e->replan = true;
    return AMP_OK;
}

AmpCode amp_exec_run(AmpExec *e, const AmpNamedBuf *inputs, size_t n_inputs, AmpBuf *outputs, AmpStatus *st) {
    return run(e, inputs, n_inputs, outputs, false, st);
}

AmpCode amp_exec_run_body(AmpExec *e, const AmpNamedBuf *inputs, size_t n_inputs, AmpBuf *outputs,
                          AmpStatus *st) {
    return run(e, inputs, n_inputs, outputs, true, st);
}
