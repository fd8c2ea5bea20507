/* The step plan (exec_impl.h): the launch list, the shapes of every intermediate before a
 * step runs (from the ops' shape functions, ir/shape.h), and the arena planned from their
 * sizes and live intervals (plan.c). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/exec_impl.h"
#include "ir/half.h"
#include "runtime/plan.h"
#include "ir/shape.h"

#define nname amp_exec_node_name

enum { ARENA_ALIGN = 64 };

/* The launch list (exec_impl.h): every node's input slots, found once through the chain
 * of enclosing executors, and the values that die after it. */
AmpCode amp_exec_build_launches(AmpExec *e, AmpStatus *st) {
    size_t n_in = 0, n_dead = 0;
    for (size_t i = 0; i < e->n_nodes; i++) {
        const AmpNode *n = e->nodes[i];
        if (n->n_outputs > AMP_EXEC_MAX_OUT)
            return amp_fail(st, AMP_ERR_UNSUPPORTED, "node '%s' (%s): %d outputs, more than the executor's %d",
                            nname(n), n->op_type, n->n_outputs, AMP_EXEC_MAX_OUT);
        n_in += (size_t)amp_exec_n_reads(e, i);
        n_dead += (size_t)amp_exec_n_reads(e, i) + (size_t)n->n_outputs;
    }
    free(e->in_slots), free(e->in_at), free(e->dead), free(e->dead_at);
    e->in_slots = calloc(n_in ? n_in : 1, sizeof *e->in_slots);
    e->in_at = calloc(e->n_nodes + 1, sizeof *e->in_at);
    e->dead = calloc(n_dead ? n_dead : 1, sizeof *e->dead);
    e->dead_at = calloc(e->n_nodes + 1, sizeof *e->dead_at);
    if (!e->in_slots || !e->in_at || !e->dead || !e->dead_at) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    size_t at = 0, d = 0;
    for (size_t i = 0; i < e->n_nodes; i++) {
        const AmpNode *n = e->nodes[i];
        e->in_at[i] = at;
        e->dead_at[i] = d;
        for (int k = 0; k < amp_exec_n_reads(e, i); k++) {
            const AmpValue *v = amp_exec_read(e, i, k);
            Slot *s = v ? amp_exec_find_slot(e, v) : NULL;
            if (v && !s)
                return amp_fail(st, AMP_ERR_INTERNAL, "node '%s' (%s): input '%s' is in no enclosing graph", nname(n),
                                n->op_type, v->name);
            e->in_slots[at++] = s;
        }
        /* What this node is the last to read (initializers stay), and what it makes that
         * nothing reads; each id once. */
        for (int pass = 0; pass < 2; pass++) {
            int cnt = pass ? n->n_outputs : amp_exec_n_reads(e, i);
            for (int k = 0; k < cnt; k++) {
                const AmpValue *v = pass ? n->outputs[k] : amp_exec_read(e, i, k);
                if (!v || v->graph != e->g || e->last[v->id] != (int)i) continue;
                if (!pass && (e->vflags[v->id] & VAL_INIT)) continue;
                bool seen = false;
                for (size_t j = e->dead_at[i]; j < d && !seen; j++) seen = e->dead[j] == v->id;
                if (!seen) e->dead[d++] = v->id;
            }
        }
    }
    e->in_at[e->n_nodes] = at;
    e->dead_at[e->n_nodes] = d;
    e->launches_ready = true;
    return AMP_OK;
}

/* ---- the arena --------------------------------------------------------------------- */

/* Gives the arena back; every value unplanned. */
void amp_exec_free_arena(AmpExec *e) {
    if (e->arena) e->be->free(e->be, e->arena);
    e->arena = NULL;
    e->arena_bytes = 0;
    e->planned = false;
    for (size_t i = 0; i < e->n_values; i++) e->off[i] = SIZE_MAX;
}

static size_t align_up(size_t n) {
    return (n + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
}

static int last_of(const AmpExec *e, size_t v) {
    return e->last[v] < e->first[v] ? e->first[v] : e->last[v];
}

/* The gradients of an ai.ampc AllReduceMean (passes/allreduce.c) and their means share
 * bytes: each mean Y[j] is planned over its gradient X[j], and the node's X, in input
 * order, end to end (each rounded up to the arena's alignment) in one block of the arena,
 * live from the first X made to the last Y read. The kernel (kernels/cpu/comm.c) then
 * reduces the block where it lies, in one collective, and writes the mean over it: no
 * copy in, none out, and one buffer per gradient instead of two. A pair qualifies when X
 * is an intermediate read by this node alone (the last to read it, no graph output, no
 * later graph's) and Y is made here with X's size. group[v] <- the node's plan index for
 * every value of such a pair (else -1); the number of values grouped. */
static size_t group_allreduce(const AmpExec *e, int *group) {
    size_t n = 0;
    for (size_t v = 0; v < e->n_values; v++) group[v] = -1;
    for (size_t i = 0; i < e->n_nodes; i++) {
        const AmpNode *nd = e->nodes[i];
        if (nd->op != AMP_OP_Ampc_AllReduceMean) continue;
        for (int j = 0; j < nd->n_inputs && j < nd->n_outputs; j++) {
            const AmpValue *x = nd->inputs[j], *y = nd->outputs[j];
            if (!x || !y || x->graph != e->g || y->graph != e->g || x == y) continue;
            size_t xi = x->id, yi = y->id;
            if (group[xi] >= 0 || group[yi] >= 0 || !e->rec[xi] || e->rec[xi] != e->rec[yi] || e->first[xi] < 0 ||
                e->first[yi] != (int)i || e->last[xi] != (int)i ||
                (e->vflags[xi] & (VAL_INIT | VAL_OUTPUT | VAL_AFTER)))
                continue;
            group[xi] = group[yi] = (int)i;
            n += 2;
        }
    }
    return n;
}

/* The planner's items: one per value the last run made, but one per AllReduceMean for its
 * grouped values (group[], group_allreduce): the block, sized by its means and live from
 * its first gradient made to its last mean read; ids[k] the value of item k (UINT32_MAX for
 * a block, item_of[node] the block's item). Returns the number of items. */
static size_t arena_items(const AmpExec *e, const int *group, AmpPlanItem *items, uint32_t *ids, int *item_of) {
    size_t n = 0;
    for (size_t i = 0; i < e->n_nodes; i++) item_of[i] = -1;
    for (size_t i = 0; i < e->n_values; i++) {
        if (!e->rec[i] || e->first[i] < 0) continue;
        int g = group[i];
        if (g < 0) {
            items[n] = (AmpPlanItem){e->rec[i], e->first[i], last_of(e, i), 0};
            ids[n++] = (uint32_t)i;
            continue;
        }
        if (item_of[g] < 0) { /* the block: its size and live interval follow */
            items[n] = (AmpPlanItem){0, INT32_MAX, -1, 0};
            ids[n] = UINT32_MAX;
            item_of[g] = (int)n++;
        }
        AmpPlanItem *b = &items[item_of[g]];
        if (e->first[i] == g) { /* a mean: its gradient (same bytes) sizes the block */
            b->size += align_up(e->rec[i]);
            if (last_of(e, i) > b->last) b->last = last_of(e, i);
        } else if (e->first[i] < b->first) {
            b->first = e->first[i];
        }
    }
    return n;
}

/* Each grouped gradient and its mean at the same offset, end to end in input order
 * within their node's block (placed at `items[item_of[node]].offset`). */
static void place_groups(AmpExec *e, const int *group, const AmpPlanItem *items, const int *item_of) {
    for (size_t i = 0; i < e->n_nodes; i++) {
        if (item_of[i] < 0) continue;
        const AmpNode *nd = e->nodes[i];
        size_t at = items[item_of[i]].offset;
        for (int j = 0; j < nd->n_inputs && j < nd->n_outputs; j++) {
            const AmpValue *x = nd->inputs[j], *y = nd->outputs[j];
            if (!x || !y || group[x->id] != (int)i || group[y->id] != (int)i) continue;
            e->off[x->id] = e->off[y->id] = at;
            e->psize[x->id] = e->psize[y->id] = e->rec[x->id];
            at += align_up(e->rec[x->id]);
        }
    }
}

/* Plans the arena from the sizes the last run recorded. Failure only means no arena. */
void amp_exec_build_arena(AmpExec *e) {
    amp_exec_free_arena(e);
    size_t n = 0;
    for (size_t i = 0; i < e->n_values; i++) n += e->rec[i] && e->first[i] >= 0;
    if (!n) return;
    AmpPlanItem *items = malloc(n * sizeof *items);
    uint32_t *ids = malloc(n * sizeof *ids);
    int *group = malloc(e->n_values * sizeof *group);
    int *item_of = malloc(e->n_nodes * sizeof *item_of); /* per AllReduceMean: its block's item */
    if (!items || !ids || !group || !item_of) goto done;
    bool grouped = group_allreduce(e, group) > 0;
    n = arena_items(e, group, items, ids, item_of);
    size_t bytes = 0;
    AmpStatus st = {0};
    if (amp_plan_offsets(items, n, ARENA_ALIGN, &bytes, &st)) goto done;
    if (!(e->arena = e->be->alloc(e->be, bytes))) goto done;
    e->arena_bytes = bytes;
    for (size_t k = 0; k < n; k++)
        if (ids[k] != UINT32_MAX) e->off[ids[k]] = items[k].offset, e->psize[ids[k]] = items[k].size;
    if (grouped) place_groups(e, group, items, item_of);
    e->planned = true;
done:
    free(items);
    free(ids);
    free(group);
    free(item_of);
}

/* Whether the graph inputs have the types and shapes of the last run (and records them). */
static bool same_signature(AmpExec *e) {
    bool same = e->have_sig;
    for (size_t i = 0; i < e->g->inputs.n; i++) {
        const Slot *s = &e->slots[e->g->inputs.items[i].value->id];
        AmpBuf now;
        memset(&now, 0, sizeof now);
        if (s->kind != SLOT_EMPTY) {
            now.dtype = s->buf.dtype;
            now.rank = s->buf.rank;
            for (int k = 0; k < now.rank && k < AMP_MAX_RANK; k++) now.dims[k] = s->buf.dims[k];
        }
        AmpBuf *was = &e->sig[i];
        bool eq = was->dtype == now.dtype && was->rank == now.rank;
        for (int k = 0; eq && k < now.rank && k < AMP_MAX_RANK; k++) eq = was->dims[k] == now.dims[k];
        if (!eq) same = false;
        *was = now;
    }
    e->have_sig = true;
    return same;
}

/* ---- the step plan's shapes ------------------------------------------------------------
 * Before a step runs with new input shapes, every intermediate's dtype and shape comes
 * from the op's shape function (ir/shape.h, the one the infer pass runs), node by node;
 * so the arena is planned before the first run, and a kernel is handed a place of the
 * size its output needs. What the shape functions cannot know before running (NonZero,
 * If, Loop, Scan, a Reshape whose target is computed in the step) is allocated when the
 * kernel asks, and placed in the arena from the next run on. A kernel asking for another
 * shape than the plan's is an internal error naming both: the shape functions and the
 * kernels must agree, and every test that runs a model checks it. */

static void shape_only(const AmpBuf *b, AmpBuf *out) {
    memset(out, 0, sizeof *out);
    out->dtype = b->dtype;
    out->rank = b->rank;
    for (int i = 0; i < b->rank && i < AMP_MAX_RANK; i++) out->dims[i] = b->dims[i];
    out->nelem = b->nelem;
}

/* Remembers that the plan read enclosing value v of shape b (once per value). */
static void note_outer(AmpExec *e, const AmpValue *v, const AmpBuf *b) {
    for (size_t i = 0; i < e->n_outer; i++)
        if (e->outer_read[i] == v) return;
    if (e->n_outer == e->cap_outer) {
        size_t cap = e->cap_outer ? 2 * e->cap_outer : 8;
        const AmpValue **r = realloc(e->outer_read, cap * sizeof *r);
        if (r) e->outer_read = r;
        AmpBuf *sh = r ? realloc(e->outer_shape, cap * sizeof *sh) : NULL;
        if (sh) e->outer_shape = sh;
        if (!r || !sh) {
            e->shapes_ready = false; /* cannot track it: plan again next run */
            return;
        }
        e->cap_outer = cap;
    }
    e->outer_read[e->n_outer] = v;
    shape_only(b, &e->outer_shape[e->n_outer++]);
}

/* The host bytes of value v when the plan may read them: an initializer of this graph or
 * an enclosing one (the model's bytes: they never change, unless state is bound to them),
 * or a small graph input of this graph given from the host in this run (a Reshape target,
 * Resize scales, Slice bounds fed as inputs): its bytes are remembered, and the plan is
 * made again when a later run gives other ones. Everything else is left to the
 * graph-following of the shape functions (Constants, Shape arithmetic). */
static const AmpBuf *host_value(AmpExec *e, const AmpValue *v) {
    AmpExec *o = e;
    while (o && v->graph != o->g) o = o->parent;
    if (!o || v->id >= o->n_values) return NULL;
    const AmpBuf *b = o == e ? e->host_in[v->id] : NULL; /* a given input, even over an initializer */
    if (!b && (o->vflags[v->id] & VAL_INIT)) return o->bound[v->id] ? NULL : &o->init[v->id];
    size_t bytes = b ? amp_buf_bytes(b) : 0;
    if (!b || bytes > sizeof e->vals_read->bytes || (bytes && !b->data)) return NULL;
    for (size_t i = 0; i < e->n_vals_read; i++)
        if (e->vals_read[i].id == v->id) return b;
    if (e->n_vals_read == e->cap_vals_read) {
        size_t cap = e->cap_vals_read ? 2 * e->cap_vals_read : 4;
        ValRead *r = realloc(e->vals_read, cap * sizeof *r);
        if (!r) return NULL;
        e->vals_read = r;
        e->cap_vals_read = cap;
    }
    ValRead *r = &e->vals_read[e->n_vals_read++];
    r->id = v->id;
    r->len = bytes;
    if (bytes) memcpy(r->bytes, b->data, bytes);
    return b;
}

/* The shape functions' view of the executor: at plan time the host values above only;
 * at run time (a node whose shapes the plan could not know) also small values computed
 * in this step, copied out of the device: the one place the interpreter waits on data. */
typedef struct EnvCtx {
    AmpExec *e;
    bool run_time;
    AmpBuf copy;              /* a value copied out (run time) */
    unsigned char bytes[512]; /* its elements */
} EnvCtx;

static const AmpBuf *env_value(EnvCtx *c, const AmpValue *v) {
    const AmpBuf *b = host_value(c->e, v);
    if (b || !c->run_time) return b;
    const Slot *s = amp_exec_find_slot(c->e, v);
    size_t bytes = s && s->kind != SLOT_EMPTY ? amp_buf_bytes(&s->buf) : SIZE_MAX;
    if (bytes > sizeof c->bytes || s->buf.dtype == AMP_DT_STRING) return NULL;
    AmpStatus st = {0};
    if (bytes && c->e->be->copy_out(c->e->be, c->bytes, s->buf.data, bytes, &st)) return NULL;
    c->copy = s->buf;
    c->copy.data = c->bytes;
    c->e->n_syncs++;
    return &c->copy;
}

static bool env_shape_of(void *user, const AmpValue *v, AmpBuf *out) {
    EnvCtx *c = user;
    AmpExec *e = c->e;
    if (c->run_time) { /* what this step made so far, as it is */
        const Slot *s = amp_exec_find_slot(e, v);
        if (s && s->kind != SLOT_EMPTY) {
            shape_only(&s->buf, out);
            return true;
        }
    }
    if (v->graph == e->g) {
        if (v->id >= e->n_values || !e->pknown[v->id]) return false;
        *out = e->pshape[v->id];
        return true;
    }
    const Slot *s = amp_exec_find_slot(e, v);
    if (!s || s->kind == SLOT_EMPTY) return false;
    shape_only(&s->buf, out);
    note_outer(e, v, &s->buf);
    return true;
}

static int env_ints_of(void *user, const AmpValue *v, int64_t *out, int max) {
    const AmpBuf *b = env_value(user, v);
    if (!b || amp_dtype_is_float(b->dtype) || b->dtype == AMP_DT_STRING || b->nelem > (uint64_t)max) return -1;
    size_t bits = amp_dtype_bits(b->dtype);
    if (bits != 8 && bits != 16 && bits != 32 && bits != 64) return -1;
    for (uint64_t i = 0; i < b->nelem; i++) out[i] = amp_buf_get_i64(b, i);
    return (int)b->nelem;
}

static int env_doubles_of(void *user, const AmpValue *v, double *out, int max) {
    const AmpBuf *b = env_value(user, v);
    if (!b || b->nelem > (uint64_t)max) return -1;
    if (!amp_dtype_is_float(b->dtype)) {
        int64_t tmp[64];
        int k = max > 64 ? 64 : max;
        if ((k = env_ints_of(user, v, tmp, k)) < 0) return -1;
        for (int i = 0; i < k; i++) out[i] = (double)tmp[i];
        return k;
    }
    for (uint64_t i = 0; i < b->nelem; i++) {
        const unsigned char *p = (const unsigned char *)b->data;
        uint16_t h;
        float f;
        switch (b->dtype) {
        case AMP_DT_FLOAT: memcpy(&f, p + 4 * i, 4), out[i] = f; break;
        case AMP_DT_DOUBLE: memcpy(&out[i], p + 8 * i, 8); break;
        case AMP_DT_FLOAT16: memcpy(&h, p + 2 * i, 2), out[i] = amp_f16_to_f32(h); break;
        case AMP_DT_BFLOAT16: memcpy(&h, p + 2 * i, 2), out[i] = amp_bf16_to_f32(h); break;
        default: return -1;
        }
    }
    return (int)b->nelem;
}

/* Whether the graph inputs whose bytes the plan read hold the same bytes now. */
static bool vals_same(const AmpExec *e) {
    for (size_t i = 0; i < e->n_vals_read; i++) {
        const ValRead *r = &e->vals_read[i];
        const AmpBuf *b = e->host_in[r->id];
        if (!b || amp_buf_bytes(b) != r->len || (r->len && memcmp(b->data, r->bytes, r->len))) return false;
    }
    return true;
}

/* Whether the enclosing values the plan read still have the shapes it read. */
static bool outer_same(AmpExec *e) {
    for (size_t i = 0; i < e->n_outer; i++) {
        const Slot *s = amp_exec_find_slot(e, e->outer_read[i]);
        if (!s || s->kind == SLOT_EMPTY || !amp_buf_same_shape(&s->buf, &e->outer_shape[i])) return false;
    }
    return true;
}

/* Whether the state bound to initializers has the shapes the plan read (an update or an
 * initialization binding may give state a new shape). */
static bool bound_same(AmpExec *e) {
    for (size_t i = 0; i < e->n_bound; i++) {
        uint32_t id = e->bound_ids[i];
        if (e->bound[id] && !(e->pknown[id] && amp_buf_same_shape(e->bound[id], &e->pshape[id]))) return false;
    }
    return true;
}

/* Fills pshape/pknown for the inputs now in place, and rec[] with the bytes of every
 * intermediate whose shape is known, for build_plan. A shape function's error leaves its
 * outputs unknown: the kernel then meets the bad input and names it. */
void amp_exec_plan_shapes(AmpExec *e) {
    memset(e->pknown, 0, e->n_values * sizeof *e->pknown);
    e->n_outer = 0;
    e->n_vals_read = 0;
    e->n_known = e->n_unknown = 0;
    e->shapes_ready = true;
    for (size_t i = 0; i < e->n_values; i++) {
        const Slot *s = &e->slots[i];
        if (s->kind == SLOT_EMPTY) continue; /* inputs and initializers are in place */
        shape_only(&s->buf, &e->pshape[i]);
        e->pknown[i] = true;
    }
    EnvCtx ec = {.e = e};
    AmpShapeEnv env = {.shape_of = env_shape_of, .ints_of = env_ints_of, .doubles_of = env_doubles_of, .user = &ec};
    AmpBuf out[AMP_EXEC_MAX_OUT];
    bool known[AMP_EXEC_MAX_OUT];
    for (size_t i = 0; i < e->n_nodes; i++) {
        const AmpNode *n = e->nodes[i];
        if (n->n_outputs > AMP_EXEC_MAX_OUT) continue;
        AmpStatus st = {0};
        if (amp_shape_node(n, e->opsets[i], &env, out, known, &st)) memset(known, 0, sizeof known);
        for (int k = 0; k < n->n_outputs; k++) {
            const AmpValue *v = n->outputs[k];
            if (!v || v->graph != e->g) continue;
            size_t bytes = 0;
            if (known[k] && out[k].rank <= AMP_MAX_RANK && amp_tensor_expected_bytes(out[k].dtype, out[k].nelem, &bytes) &&
                bytes <= amp_exec_max_bytes(e)) {
                e->pshape[v->id] = out[k];
                e->pbytes[v->id] = bytes;
                e->pknown[v->id] = true;
                e->rec[v->id] = bytes ? bytes : 1;
                e->n_known++;
            } else {
                e->n_unknown++;
            }
        }
    }
}

bool amp_exec_plan_current(AmpExec *e) {
    bool same = same_signature(e); /* always: it records this run's signature */
    return same && e->shapes_ready && outer_same(e) && bound_same(e) && vals_same(e);
}

AmpCode amp_exec_late_shapes(AmpExec *e, size_t i, AmpBuf *out, bool *known, AmpStatus *st) {
    EnvCtx ec = {.e = e, .run_time = true};
    AmpShapeEnv env = {.shape_of = env_shape_of, .ints_of = env_ints_of, .doubles_of = env_doubles_of, .user = &ec};
    return amp_shape_node(e->nodes[i], e->opsets[i], &env, out, known, st);
}
