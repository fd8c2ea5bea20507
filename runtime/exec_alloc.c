/* Where a running node's outputs go (exec_impl.h): placed before its kernel runs, in the
 * arena where the step plan holds them, else each in a buffer of its own; and the
 * allocator a kernel asks for an output the plan could not size, which checks the shape
 * asked for against the plan's and the executor's cap on one tensor. */
#include <stdint.h>
#include <string.h>

#include "runtime/exec_impl.h"

#define nname amp_exec_node_name

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
        const AmpBuf *into = e->into ? e->into[v->id] : NULL;
        if (into && into->data && into->dtype == dtype && into->rank == rank &&
            (!rank || !memcmp(into->dims, dims, (size_t)rank * sizeof *dims))) {
            data = into->data; /* amp_exec_write_into: the state buffer this value replaces */
            kind = SLOT_BORROWED;
            bytes = 0; /* state, not an intermediate */
        } else if (e->planned && e->off[v->id] != SIZE_MAX && bytes <= e->psize[v->id]) {
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
        amp_exec_count_live(e, &e->slots[v->id], bytes);
    }
    return b;
}

/* The ops whose kernels may write their output over an input of the output's shape:
 * each output element is computed from the same element of that input (one output; a
 * fused chain's kernels read every input of an element, or of a block, before writing it). */
static bool elementwise_in_place(const AmpNode *n) {
    return n->n_outputs == 1 && (n->op == AMP_OP_Add || n->op == AMP_OP_Sub || n->op == AMP_OP_Mul ||
                                 n->op == AMP_OP_Div || n->op == AMP_OP_Where || n->op == AMP_OP_Ampc_SubScaled ||
                                 n->op == AMP_OP_Ampc_FusedElementwise);
}

static bool has_body(const AmpNode *n) {
    return n->op == AMP_OP_If || n->op == AMP_OP_Loop || n->op == AMP_OP_Scan;
}

bool amp_exec_write_into(AmpExec *e, const AmpValue *v, const AmpValue *old, const AmpBuf *buf) {
    if (!v || v->graph != e->g || v->id >= e->n_values) return false;
    size_t p = e->n_nodes;
    for (size_t i = 0; i < e->n_nodes && p == e->n_nodes; i++)
        for (int k = 0; k < e->nodes[i]->n_outputs; k++)
            if (e->nodes[i]->outputs[k] == v) p = i;
    if (p == e->n_nodes || e->nodes[p]->n_outputs != 1 || has_body(e->nodes[p])) return false;
    for (int k = 0; k < e->nodes[p]->n_inputs; k++)
        if (e->nodes[p]->inputs[k] == old && !elementwise_in_place(e->nodes[p])) return false;
    /* nothing after the producer reads the old value (nor anything with a body, which might) */
    for (size_t i = p + 1; i < e->n_nodes; i++) {
        if (has_body(e->nodes[i])) return false;
        for (int k = 0; k < e->nodes[i]->n_inputs; k++)
            if (e->nodes[i]->inputs[k] == old) return false;
    }
    if (!e->into && !(e->into = calloc(e->n_values ? e->n_values : 1, sizeof *e->into))) return false;
    e->into[v->id] = buf;
    return true;
}

/* Places the outputs of node i whose shapes are known before its kernel runs: from the
 * plan, or, for a node the plan could not size (its shapes follow values made in this
 * step: a Reshape target computed from data, say), from its shape function now, reading
 * those values back. The kernel finds them in ctx->out; an output left without data there
 * (a data-dependent shape: NonZero; or one the node does not list) it asks ctx->alloc for. */
AmpCode amp_exec_place_outputs(AmpExec *e, size_t i, AllocCtx *a, AmpBuf *outs, AmpStatus *st) {
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
