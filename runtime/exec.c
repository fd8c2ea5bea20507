/* The graph interpreter's run: values in slots indexed by AmpValue.id, each intermediate
 * freed after its last use (uses inside subgraphs count at their owner node), outputs
 * placed before each kernel runs, the run itself. Choosing the kernels once per node at
 * prepare is exec_prepare.c's, the step plan (launch list, shapes, arena) exec_plan.c's,
 * the CPU fallback exec_fallback.c's, If / Loop / Scan and the caps on work exec_ctrl.c's. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/exec_impl.h"

#define nname amp_exec_node_name

void amp_exec_slot_clear(AmpExec *e, Slot *s) {
    if (s->kind == SLOT_EMPTY) return;
    e->live = e->live > s->live_bytes ? e->live - s->live_bytes : 0;
    if (s->kind == SLOT_OWNED || s->kind == SLOT_UPLOAD) e->be->free(e->be, s->buf.data);
    s->kind = SLOT_EMPTY;
    s->live_bytes = 0;
    s->buf.data = NULL;
}

/* Slot s now holds an intermediate of `bytes` (SLOT_OWNED or SLOT_ARENA). */
static void count_live(AmpExec *e, Slot *s, size_t bytes) {
    s->live_bytes = bytes;
    e->live += bytes;
    if (e->live > e->peak) e->peak = e->live;
}

/* ---- running --------------------------------------------------------------------- */

Slot *amp_exec_find_slot(AmpExec *e, const AmpValue *v) {
    for (; e; e = e->parent)
        if (v->graph == e->g) return v->id < e->n_values ? &e->slots[v->id] : NULL;
    return NULL;
}

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

static AmpBuf *place(AllocCtx *a, int index, int dtype, int rank, const int64_t *dims, uint64_t nelem, size_t bytes,
                     AmpStatus *st);

AmpBuf *amp_exec_alloc(void *ctx, int index, int dtype, int rank, const int64_t *dims, AmpStatus *st) {
    AllocCtx *a = ctx;
    AmpExec *e = a->e;
    if (index < 0 || index >= a->n->n_outputs) {
        amp_fail(st, AMP_ERR_INTERNAL, "node '%s' (%s): kernel wrote output %d of %d", nname(a->n), a->n->op_type,
                 index, a->n->n_outputs);
        return NULL;
    }
    if (rank < 0 || rank > AMP_MAX_RANK) {
        amp_fail(st, AMP_ERR_UNSUPPORTED, "node '%s' (%s): output rank %d is over %d", nname(a->n), a->n->op_type,
                 rank, AMP_MAX_RANK);
        return NULL;
    }
    AmpValue *v = a->n->outputs[index];
    bool mine = v && v->graph == e->g; /* always so: a node's outputs live in its graph */
    const AmpBuf *plan = mine && e->pknown[v->id] ? &e->pshape[v->id] : NULL;
    if (a->placed[index]) plan = &e->slots[v->id].buf; /* placed before the kernel ran */
    uint64_t nelem = 1;
    size_t bytes = 0;
    if (plan) {
        /* The step plan sized it: the kernel must agree (the shape was checked then). */
        if (dtype != plan->dtype || rank != plan->rank || (rank && memcmp(dims, plan->dims, (size_t)rank * sizeof *dims))) {
            AmpBuf want = {.dtype = dtype, .rank = rank};
            for (int i = 0; i < rank; i++) want.dims[i] = dims[i];
            char got[160], planned[160];
            amp_buf_describe(&want, got, sizeof got);
            amp_buf_describe(plan, planned, sizeof planned);
            amp_fail(st, AMP_ERR_INTERNAL, "node '%s' (%s): the kernel made output %d '%s' %s, its shape function %s",
                     nname(a->n), a->n->op_type, index, v->name, got, planned);
            return NULL;
        }
        if (a->placed[index]) return &e->slots[v->id].buf;
        nelem = plan->nelem;
        amp_tensor_expected_bytes(dtype, nelem, &bytes);
    } else {
        for (int i = 0; i < rank; i++) {
            if (dims[i] < 0 || (dims[i] && nelem > (UINT64_C(1) << 62) / (uint64_t)dims[i])) {
                amp_fail(st, AMP_ERR_INPUT, "node '%s' (%s): output %d has an invalid or huge shape", nname(a->n),
                         a->n->op_type, index);
                return NULL;
            }
            nelem *= (uint64_t)dims[i];
        }
        if (!amp_tensor_expected_bytes(dtype, nelem, &bytes)) {
            amp_fail(st, AMP_ERR_UNSUPPORTED, "node '%s' (%s): output of type %s is not supported", nname(a->n),
                     a->n->op_type, amp_dtype_name(dtype));
            return NULL;
        }
    }
    /* One place for every kernel: a shape from a hostile model must not become a
     * giant allocation (sanitizers abort on those; an OOM killer would not ask). */
    if (bytes > amp_exec_max_bytes(e)) {
        amp_fail(st, AMP_ERR_UNSUPPORTED, "node '%s' (%s): output %d would take %zu bytes, over the %llu-byte limit%s",
                 nname(a->n), a->n->op_type, index, bytes, (unsigned long long)amp_exec_max_bytes(e),
                 amp_exec_max_bytes_name(e));
        return NULL;
    }
    return place(a, index, dtype, rank, dims, nelem, bytes, st);
}

/* Gives output `index` of the running node its place: in the arena where the plan holds
 * one big enough, else a buffer of its own (and the arena is planned again next run). */
static AmpBuf *place(AllocCtx *a, int index, int dtype, int rank, const int64_t *dims, uint64_t nelem, size_t bytes,
                     AmpStatus *st) {
    AmpExec *e = a->e;
    AmpValue *v = a->n->outputs[index];
    bool mine = v && v->graph == e->g;
    AmpBuf *b;
    void *data = NULL;
    SlotKind kind = SLOT_OWNED;
    if (mine) {
        Slot *s = &e->slots[v->id];
        amp_exec_slot_clear(e, s);
        size_t need = bytes ? bytes : 1; /* an empty tensor still gets a place: no re-planning */
        if (need > e->rec[v->id]) e->rec[v->id] = need;
        if (e->planned && e->off[v->id] != SIZE_MAX && bytes <= e->psize[v->id]) {
            data = (char *)e->arena + e->off[v->id];
            kind = SLOT_ARENA;
        } else if (!e->opt.no_plan) {
            e->fallback = true;
        }
        b = &s->buf;
    } else {
        b = &a->scratch[index];
        if (b->data) e->be->free(e->be, b->data);
        b->data = NULL;
    }
    if (!data && !(data = e->be->alloc(e->be, bytes))) {
        amp_fail(st, AMP_ERR_INTERNAL, "out of memory for a %zu-byte output", bytes);
        return NULL;
    }
    b->dtype = dtype;
    b->rank = rank;
    for (int i = 0; i < rank; i++) b->dims[i] = dims[i];
    b->nelem = nelem;
    b->data = data;
    if (mine) {
        e->slots[v->id].kind = kind;
        count_live(e, &e->slots[v->id], bytes);
    }
    return b;
}

AmpCode amp_exec_alloc_like(const AmpExec *e, const AmpBuf *like, AmpBuf *dst, AmpStatus *st) {
    *dst = *like;
    size_t bytes = amp_buf_bytes(like);
    if (!(dst->data = e->be->alloc(e->be, bytes)))
        return amp_fail(st, AMP_ERR_INTERNAL, "out of device memory for %zu bytes", bytes);
    return AMP_OK;
}

AmpCode amp_exec_copy_buf(const AmpExec *e, const AmpBuf *src, AmpBuf *dst, AmpStatus *st) {
    AmpCode rc = amp_exec_alloc_like(e, src, dst, st);
    size_t bytes = amp_buf_bytes(src);
    if (!rc && bytes) rc = e->be->copy(e->be, dst->data, src->data, bytes, st);
    if (rc) amp_exec_buf_free(e, dst);
    return rc;
}

void amp_exec_buf_free(const AmpExec *e, AmpBuf *b) {
    if (b->data) e->be->free(e->be, b->data);
    b->data = NULL;
}

void amp_exec_take_output(AmpExec *e, AmpNode *n, int k, AmpBuf *b) {
    AmpValue *v = k < n->n_outputs ? n->outputs[k] : NULL;
    if (!v) {
        amp_exec_buf_free(e, b);
        return;
    }
    Slot *s = amp_exec_find_slot(e, v);
    amp_exec_slot_clear(e, s);
    s->buf = *b;
    s->kind = SLOT_OWNED;
    count_live(e, s, amp_buf_bytes(b));
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

/* Places the outputs of node i whose shapes are known before its kernel runs: from the
 * plan, or, for a node the plan could not size (its shapes follow values made in this
 * step: a Reshape target computed from data, say), from its shape function now, reading
 * those values back. The kernel finds them in ctx->out; an output left without data there
 * (a data-dependent shape: NonZero; or one the node does not list) it asks ctx->alloc for. */
static AmpCode place_outputs(AmpExec *e, size_t i, AllocCtx *a, AmpBuf *outs, AmpStatus *st) {
    AmpNode *n = e->nodes[i];
    AmpBuf late[AMP_EXEC_MAX_OUT];
    bool known[AMP_EXEC_MAX_OUT], have_late = false;
    for (int k = 0; k < n->n_outputs; k++) {
        outs[k].data = NULL;
        a->placed[k] = false;
        AmpValue *v = n->outputs[k];
        if (!v || v->graph != e->g) continue;
        const AmpBuf *shape = NULL;
        if (e->pknown[v->id]) { /* the plan's: bytes known and under the cap */
            AmpBuf *b = place(a, k, e->pshape[v->id].dtype, e->pshape[v->id].rank, e->pshape[v->id].dims,
                              e->pshape[v->id].nelem, e->pbytes[v->id], st);
            if (!b) return st && st->code ? st->code : AMP_ERR_INTERNAL;
            outs[k] = *b;
            a->placed[k] = true;
            continue;
        } else if (!amp_op_shape_from_data(n->op)) {
            if (!have_late) {
                /* The inputs are all there now: a shape function's error here is the
                 * node's (inputs that do not broadcast, a target that does not fit). */
                AmpCode rc = amp_exec_late_shapes(e, i, late, known, st);
                if (rc) return rc;
                have_late = true;
                e->n_late++;
            }
            if (known[k]) shape = &late[k];
        }
        size_t bytes = 0;
        if (!shape || !amp_tensor_expected_bytes(shape->dtype, shape->nelem, &bytes))
            continue; /* the kernel asks, and the allocator names what is wrong (strings) */
        if (bytes > amp_exec_max_bytes(e)) /* as exec_alloc: a converted kernel never asks */
            return amp_fail(st, AMP_ERR_UNSUPPORTED,
                            "node '%s' (%s): output %d would take %zu bytes, over the %llu-byte limit%s", nname(n),
                            n->op_type, k, bytes, (unsigned long long)amp_exec_max_bytes(e),
                            amp_exec_max_bytes_name(e));
        AmpBuf *b = place(a, k, shape->dtype, shape->rank, shape->dims, shape->nelem, bytes, st);
        if (!b) return st && st->code ? st->code : AMP_ERR_INTERNAL;
        outs[k] = *b;
        a->placed[k] = true;
    }
    return AMP_OK;
}

/* Gives node i to the fallback backend after its device kernel refused the shapes it met;
 * the run goes on (st cleared) unless the fallback cannot prepare the node either. */
static AmpCode move_to_fallback(AmpExec *e, size_t i, AmpStatus *st) {
    AmpBackend *fb = e->opt.fallback;
    AmpNode *n = e->nodes[i];
    if (!amp_exec_backend_supports(fb, e->m, n)) return st->code;
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
        rc = amp_exec_run_if(e, n, inbuf, st);
    } else if (n->op == AMP_OP_Loop) {
        rc = amp_exec_run_loop(e, n, inbuf, st);
    } else if (n->op == AMP_OP_Scan) {
        rc = amp_exec_run_scan(e, n, inbuf, st);
    } else {
        bool placed[AMP_EXEC_MAX_OUT];
        AmpBuf outs[AMP_EXEC_MAX_OUT];
        AllocCtx ac = {e, n, scratch, placed};
        if ((rc = place_outputs(e, i, &ac, outs, st))) return rc;
        AmpKernelCtx k = {
            .node = n,
            .opset = e->opsets[i],
            .n_in = n->n_inputs,
            .in = inbuf,
            .gate = e->gate[i] ? &in[n->n_inputs]->buf : NULL,
            .n_out = n->n_outputs,
            .out = outs,
            .alloc = amp_exec_alloc,
            .alloc_ctx = &ac,
            .const_in = const_inputs(e, i),
            .pack = &e->packs[i],
            .rng = e->rng,
            .training = e->opt.training,
            .st = st,
        };
        if (e->node_be[i] == e->be) {
            rc = e->be->run_node(e->be, &e->kernels[i], &k);
            /* A device kernel that meets a case it does not take (a geometry cuDNN cannot
             * run, known only from the shapes) hands the node to the fallback for good. */
            if (rc == AMP_ERR_UNSUPPORTED && e->opt.fallback && e->opt.fallback != e->be &&
                (rc = move_to_fallback(e, i, st)) == AMP_OK)
                rc = amp_exec_run_fallback(e, i, &k, &ac, st);
        } else {
            rc = amp_exec_run_fallback(e, i, &k, &ac, st);
        }
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
