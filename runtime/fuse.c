/* The executor's plan-level fusion (docs/internals.md, "Fusion"): before a device executor
 * prepares its kernels, groups of nodes become one node of an internal op, so a step makes
 * fewer launches and fewer round trips through memory. The model is not changed: the fused
 * nodes live in the executor's plan only (made in the model's arena, linked into no graph)
 * and read and write the same values the nodes they replace did, bit for bit.
 *   - the update gates: Where(amp_found_inf, old, new) over every output of an optimizer
 *     node whose kernels honour AmpKernelCtx.gate (Adam, Momentum, Adagrad) fold into it;
 *   - the gradient check: the loss_scale pass's [Cast,] Mul(X, 1/scale) per gradient and
 *     IsNaN(Sum(ReduceSum(G * 0) ...)) become ai.ampc UnscaleCheck nodes (a multi-tensor
 *     kernel, up to UC_MAX gradients each, chained through their found flag);
 *   - chains of elementwise nodes of one static shape (optimizer arithmetic written as
 *     ONNX ops, the gates, the scale's update on scalars, casts) become ai.ampc
 *     FusedElementwise nodes (ir/fused_prog.h).
 * Only backends that ask for it (AmpBackend.fuse: CUDA, and the simulator, which runs the
 * CPU reference kernels of the fused ops and so proves them against the unfused CPU runs)
 * and only nodes that backend runs itself; AmpExecOptions.no_fuse turns it off (hooks that
 * read every value need it off). */
#include <stdlib.h>
#include <string.h>

#include "ir/fused_prog.h"
#include "ir/tensor.h"
#include "runtime/exec_impl.h"

enum { UC_MAX = 62 }; /* gradients per UnscaleCheck: 62 + 2 inputs, the executor's AMP_EXEC_MAX_IN */

typedef struct Fuse {
    AmpExec *e;
    AmpModel *m;
    size_t n;          /* plan nodes */
    int *pos;          /* per model node id: its index in the plan, -1 when not in it */
    size_t n_pos;
    bool *pinned;      /* per value id of e->g: read outside the plan's own nodes (a later
                          graph, a body, a graph output): must stay a real value */
    AmpNode **repl;    /* per plan index: the fused node put here, or NULL */
    bool *gone;        /* per plan index: absorbed into a fused node */
    const AmpValue **gate; /* per plan index: the gate folded into it */
    size_t fused;      /* fused nodes made */
} Fuse;

/* Types (the elementwise chains' section defines them). */
static bool known_type(const AmpType *t);
static bool same_shape(const AmpType *a, const AmpType *b);
static bool one_element(const AmpType *t);

/* ---- what reads what ------------------------------------------------------------------ */

static int pos_of(const Fuse *f, const AmpNode *n) {
    return n->id < f->n_pos ? f->pos[n->id] : -1;
}

/* Marks every value of e->g that graph `sub` (a body, a training algorithm ...) reads. */
static void pin_reads(Fuse *f, const AmpGraph *sub) {
    for (const AmpNode *n = sub->first; n; n = n->next) {
        for (int i = 0; i < n->n_inputs; i++)
            if (n->inputs[i] && n->inputs[i]->graph == f->e->g) f->pinned[n->inputs[i]->id] = true;
        for (size_t k = 0; k < n->n_attrs; k++) {
            if (n->attrs[k].g) pin_reads(f, n->attrs[k].g);
            for (size_t j = 0; j < n->attrs[k].n_graphs; j++) pin_reads(f, n->attrs[k].graphs[j]);
        }
    }
    for (size_t i = 0; i < sub->outputs.n; i++)
        if (sub->outputs.items[i].value->graph == f->e->g) f->pinned[sub->outputs.items[i].value->id] = true;
}

static void pin_all(Fuse *f) {
    AmpGraph *g = f->e->g;
    for (size_t i = 0; i < g->outputs.n; i++)
        if (g->outputs.items[i].value->graph == g) f->pinned[g->outputs.items[i].value->id] = true;
    for (size_t i = 0; i < f->n; i++) {
        const AmpNode *n = f->e->nodes[i];
        for (size_t k = 0; k < n->n_attrs; k++) {
            if (n->attrs[k].g) pin_reads(f, n->attrs[k].g);
            for (size_t j = 0; j < n->attrs[k].n_graphs; j++) pin_reads(f, n->attrs[k].graphs[j]);
        }
    }
    /* Graphs that run after this one, or beside it, may read its values. */
    for (size_t t = 0; t < f->m->n_training; t++) {
        if (f->m->training[t].algorithm && f->m->training[t].algorithm != g) pin_reads(f, f->m->training[t].algorithm);
        if (f->m->training[t].initialization && f->m->training[t].initialization != g)
            pin_reads(f, f->m->training[t].initialization);
    }
    if (g != f->m->graph) pin_reads(f, f->m->graph);
}

/* The plan index of v's producer in this plan, or -1 (an input, an initializer, an outer
 * value). */
static int producer_at(const Fuse *f, const AmpValue *v) {
    return v && v->graph == f->e->g && v->producer ? pos_of(f, v->producer) : -1;
}

/* v's only reader in the plan (none outside it), or -1. */
static int sole_reader(const Fuse *f, const AmpValue *v) {
    if (!v || v->graph != f->e->g || f->pinned[v->id] || v->n_uses != 1) return -1;
    return pos_of(f, v->uses[0].node);
}

static bool on_device(const Fuse *f, int i) {
    return i >= 0 && f->e->node_be[i] == f->e->be && !f->gone[i] && !f->repl[i] && !f->gate[i];
}

/* ---- making fused nodes --------------------------------------------------------------- */

static void *arena(Fuse *f, size_t bytes) {
    void *p = amp_arena_alloc(&f->m->arena, bytes ? bytes : 1);
    if (p) memset(p, 0, bytes ? bytes : 1);
    return p;
}

static AmpNode *new_node(Fuse *f, AmpOpId op, const char *op_type, const char *domain, const AmpNode *like,
                         int n_in, int n_out) {
    AmpNode *n = arena(f, sizeof *n);
    if (!n) return NULL;
    n->graph = f->e->g;
    n->op = op;
    n->op_type = op_type;
    n->domain = domain;
    n->name = like->name; /* messages name the node the fused one stands for */
    n->n_inputs = n_in;
    n->n_outputs = n_out;
    n->inputs = arena(f, (size_t)n_in * sizeof *n->inputs);
    n->outputs = arena(f, (size_t)n_out * sizeof *n->outputs);
    n->id = UINT32_MAX; /* in no graph */
    return n->inputs && n->outputs ? n : NULL;
}

static bool add_ints(Fuse *f, AmpAttr *a, const char *name, const int64_t *v, size_t count) {
    a->name = name;
    a->type = AMP_ATTR_INTS;
    a->has = AMP_ATTR_HAS_TYPE;
    a->n_ints = count;
    a->ints = arena(f, count * sizeof *v);
    if (!a->ints) return false;
    memcpy(a->ints, v, count * sizeof *v);
    return true;
}

/* Whether the backend takes n, asked as the executor asks for model nodes. */
static bool device_takes(Fuse *f, const AmpNode *n) {
    return amp_exec_backend_supports(f->e->be, f->m, n);
}

/* ---- gates folded into optimizers -------------------------------------------------------- */

/* The input that output o of optimizer n replaces (amp_infer_optimizer's rule), or -1. */
static int replaced_input(const AmpNode *n, int o) {
    static const int from_group[3] = {0, 2, 3};
    int groups = n->op == AMP_OP_Adam ? 4 : 3, tensors = n->n_inputs - 2;
    if (tensors <= 0 || tensors % groups) return -1;
    int N = tensors / groups;
    return o / N < groups - 1 ? 2 + from_group[o / N] * N + o % N : -1;
}

/* Optimizer i whose every output is read only by Where(found, replaced input, output) with
 * one found: it writes the gates' outputs itself, reading found (k->gate), placed where
 * the last gate was. */
static bool fold_gates(Fuse *f, int i) {
    AmpNode *n = f->e->nodes[i];
    if (!amp_kernel_takes_gate(n->op) || !on_device(f, i)) return false;
    const AmpValue *found = NULL;
    int last = i, where[16];
    if (n->n_outputs > 16) return false;
    for (int o = 0; o < n->n_outputs; o++) {
        where[o] = -1;
        if (!n->outputs[o]) continue;
        int r = sole_reader(f, n->outputs[o]), in = replaced_input(n, o);
        const AmpNode *w = r >= 0 ? f->e->nodes[r] : NULL;
        if (!w || w->op != AMP_OP_Where || !on_device(f, r) || in < 0 || w->n_inputs != 3 || w->inputs[2] != n->outputs[o] ||
            w->inputs[1] != n->inputs[in] || !w->inputs[0] || w->inputs[0]->type.dtype != AMP_DT_BOOL ||
            (found && w->inputs[0] != found) || w->outputs[0]->type.dtype != n->outputs[o]->type.dtype)
            return false;
        found = w->inputs[0];
        where[o] = r;
        last = r > last ? r : last;
    }
    int fp = producer_at(f, found);
    if (!found || fp >= last || found->type.rank > 1) return false;
    /* The gates' outputs are now made at `last`: nothing may read them before. */
    for (int o = 0; o < n->n_outputs; o++) {
        const AmpValue *v = where[o] >= 0 ? f->e->nodes[where[o]]->outputs[0] : NULL;
        for (size_t u = 0; v && u < v->n_uses; u++)
            if (v->uses[u].node->graph == f->e->g && pos_of(f, v->uses[u].node) <= last) return false;
    }
    AmpNode *c = new_node(f, n->op, n->op_type, n->domain, n, n->n_inputs, n->n_outputs);
    if (!c) return false;
    memcpy(c->inputs, n->inputs, (size_t)n->n_inputs * sizeof *c->inputs);
    for (int o = 0; o < n->n_outputs; o++) c->outputs[o] = where[o] >= 0 ? f->e->nodes[where[o]]->outputs[0] : NULL;
    c->attrs = n->attrs;
    c->n_attrs = n->n_attrs;
    c->name = n->name;
    f->gone[i] = true;
    for (int o = 0; o < n->n_outputs; o++)
        if (where[o] >= 0 && where[o] != last) f->gone[where[o]] = true;
    f->repl[last] = c;
    f->gate[last] = found;
    f->fused++;
    return true;
}

/* ---- the gradient check ----------------------------------------------------------------- */

static bool is_zero_scalar(Fuse *f, const AmpValue *v) {
    AmpTensor *t = NULL;
    if (v->initializer && !(v->flags & AMP_VALUE_INPUT)) t = v->initializer;
    else if (v->producer && v->producer->op == AMP_OP_Constant) {
        const AmpAttr *a = amp_node_attr(v->producer, "value");
        t = a && a->type == AMP_ATTR_TENSOR ? a->t : NULL;
    }
    AmpBuf b;
    AmpStatus st = {0};
    if (!t || amp_buf_from_tensor(f->m, t, &b, &st)) return false;
    return b.dtype == AMP_DT_FLOAT && b.nelem == 1 && ((const float *)b.data)[0] == 0.0f;
}

/* One gradient's part of the check: C = ReduceSum(Mul(G, 0), keepdims 0) with
 * G = Mul(X, inv) (X float32, or Cast to float32 of a 16-bit X' read by nothing else).
 * Fills the plan indices of the nodes it absorbs and the gradient's input and output. */
typedef struct UcPart {
    int nodes[4], n_nodes;
    AmpValue *x, *g, *carrier; /* input, unscaled output, the check's value (reused) */
} UcPart;

static bool uc_part(Fuse *f, const AmpValue *c, const AmpValue **inv, UcPart *p) {
    int rs = producer_at(f, c);
    const AmpNode *r = rs >= 0 ? f->e->nodes[rs] : NULL;
    if (!r || r->op != AMP_OP_ReduceSum || r->n_inputs != 1 || r->n_attrs != 1 || amp_node_attr_int(r, "keepdims", 1) != 0 ||
        sole_reader(f, r->inputs[0]) != rs)
        return false;
    int zm = producer_at(f, r->inputs[0]);
    const AmpNode *z = zm >= 0 ? f->e->nodes[zm] : NULL;
    if (!z || z->op != AMP_OP_Mul || z->n_inputs != 2 || z->n_attrs || !is_zero_scalar(f, z->inputs[1])) return false;
    AmpValue *g = z->inputs[0];
    int um = producer_at(f, g);
    const AmpNode *u = um >= 0 ? f->e->nodes[um] : NULL;
    /* inv one float32 element; X and G of one known shape (the fused node gives G X's) */
    const AmpValue *iv = u ? u->inputs[1] : NULL;
    if (!u || u->op != AMP_OP_Mul || u->n_inputs != 2 || u->n_attrs || g->type.dtype != AMP_DT_FLOAT ||
        !known_type(&iv->type) || iv->type.dtype != AMP_DT_FLOAT || !one_element(&iv->type) ||
        !known_type(&g->type) || !known_type(&u->inputs[0]->type) || !same_shape(&g->type, &u->inputs[0]->type) ||
        (*inv && iv != *inv))
        return false;
    *inv = u->inputs[1];
    p->n_nodes = 0;
    p->nodes[p->n_nodes++] = rs, p->nodes[p->n_nodes++] = zm, p->nodes[p->n_nodes++] = um;
    p->x = u->inputs[0];
    p->g = g;
    p->carrier = r->outputs[0];
    int cm = producer_at(f, p->x);
    const AmpNode *cast = cm >= 0 ? f->e->nodes[cm] : NULL;
    if (cast && cast->op == AMP_OP_Cast && sole_reader(f, p->x) == um && on_device(f, cm) && cast->inputs[0] &&
        (cast->inputs[0]->type.dtype == AMP_DT_FLOAT16 || cast->inputs[0]->type.dtype == AMP_DT_BFLOAT16) &&
        known_type(&cast->inputs[0]->type) && same_shape(&cast->inputs[0]->type, &g->type)) {
        p->x = cast->inputs[0];
        p->nodes[p->n_nodes++] = cm;
    } else if (p->x->type.dtype != AMP_DT_FLOAT) {
        return false;
    }
    for (int k = 0; k < p->n_nodes; k++)
        if (!on_device(f, p->nodes[k])) return false;
    return true;
}

/* Fills a chunk's UnscaleCheck node: (inv, found before or none, X..) -> (G.., found). */
static AmpNode *uc_node(Fuse *f, const AmpNode *like, const AmpValue *inv, AmpValue *before, const UcPart *parts,
                        int count, AmpValue *found) {
    AmpNode *c = new_node(f, AMP_OP_Ampc_UnscaleCheck, "UnscaleCheck", "ai.ampc", like, count + 2, count + 1);
    if (!c) return NULL;
    c->inputs[0] = (AmpValue *)inv;
    c->inputs[1] = before;
    for (int j = 0; j < count; j++) c->inputs[2 + j] = parts[j].x, c->outputs[j] = parts[j].g;
    c->outputs[count] = found;
    return c;
}

static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Whether chunk parts[0..cnt) may run at plan index `place`: its inputs are made before,
 * and nothing but the absorbed check reads one of its G earlier (the loss_scale pass gates
 * every update on found, made last, so G's readers come after it). */
static bool uc_fits(const Fuse *f, const UcPart *parts, int cnt, const AmpValue *inv, int place) {
    if (producer_at(f, inv) >= place) return false;
    for (int j = 0; j < cnt; j++) {
        if (producer_at(f, parts[j].x) >= place) return false;
        const AmpValue *g = parts[j].g;
        for (size_t u = 0; u < g->n_uses; u++) {
            const AmpNode *rd = g->uses[u].node;
            int p = rd->graph == f->e->g ? pos_of(f, rd) : -1;
            if (p >= 0 && p <= place && p != parts[j].nodes[1]) return false;
        }
    }
    return true;
}

/* found = IsNaN(Sum(C_1, ..., C_N)) at plan index i, each C_j a gradient's check: the
 * chunks take the last of the absorbed nodes' places, in order, the last chunk the
 * IsNaN's; chunk c > 0 reads chunk c - 1's flag (carried by a value the fusion made dead,
 * a gradient's check scalar, now holding a bool). */
static bool fold_check(Fuse *f, int i) {
    const AmpNode *isnan = f->e->nodes[i];
    if (isnan->op != AMP_OP_IsNaN || !on_device(f, i)) return false;
    int si = producer_at(f, isnan->inputs[0]);
    const AmpNode *sum = si >= 0 ? f->e->nodes[si] : NULL;
    if (!sum || sum->op != AMP_OP_Sum || sole_reader(f, isnan->inputs[0]) != i || !on_device(f, si)) return false;
    int N = sum->n_inputs, n_chunks = (N + UC_MAX - 1) / UC_MAX, n_abs = 0;
    UcPart *parts = calloc((size_t)N, sizeof *parts);
    int *absorbed = calloc((size_t)N * 4 + 2, sizeof *absorbed);
    AmpNode **made = calloc((size_t)n_chunks, sizeof *made);
    const AmpValue *inv = NULL;
    bool ok = parts && absorbed && made && N > 0;
    for (int j = 0; ok && j < N; j++)
        ok = sum->inputs[j] && sole_reader(f, sum->inputs[j]) == si && uc_part(f, sum->inputs[j], &inv, &parts[j]);
    for (int j = 0; ok && j < N; j++)
        for (int k = 0; k < parts[j].n_nodes; k++) absorbed[n_abs++] = parts[j].nodes[k];
    if (ok) absorbed[n_abs++] = si, absorbed[n_abs++] = i;
    if (ok) qsort(absorbed, (size_t)n_abs, sizeof *absorbed, cmp_int);
    AmpValue *before = NULL;
    for (int c = 0; ok && c < n_chunks; c++) {
        int j0 = c * UC_MAX, cnt = N - j0 < UC_MAX ? N - j0 : UC_MAX, place = absorbed[n_abs - n_chunks + c];
        AmpValue *found = c == n_chunks - 1 ? isnan->outputs[0] : parts[j0].carrier;
        ok = uc_fits(f, parts + j0, cnt, inv, place) && (made[c] = uc_node(f, sum, inv, before, parts + j0, cnt, found)) &&
             device_takes(f, made[c]);
        before = found;
    }
    if (ok) {
        for (int k = 0; k < n_abs; k++) f->gone[absorbed[k]] = true;
        for (int c = 0; c < n_chunks; c++) {
            int place = absorbed[n_abs - n_chunks + c];
            f->gone[place] = false, f->repl[place] = made[c], f->fused++;
        }
    }
    free(parts), free(absorbed), free(made);
    return ok;
}

/* ---- elementwise chains ---------------------------------------------------------------- */

static bool is_float_dt(int dt) {
    return dt == AMP_DT_FLOAT || dt == AMP_DT_FLOAT16 || dt == AMP_DT_BFLOAT16;
}

static bool is_int_dt(int dt) {
    return dt == AMP_DT_INT32 || dt == AMP_DT_INT64;
}

static bool amp_fused_dt_ok(int dt) {
    return is_float_dt(dt) || is_int_dt(dt) || dt == AMP_DT_BOOL;
}

static int dt_in(const AmpNode *n, int i) {
    return n->inputs[i]->type.kind == AMP_TYPE_TENSOR ? n->inputs[i]->type.dtype : AMP_DT_UNDEFINED;
}

/* Attributes a fusable node may carry: Cast's `to` (and `saturate`, which only float8
 * reads), IsInf's detections left at 1; anything else (a legacy broadcast axis ...) keeps
 * the node out. */
static bool attrs_ok(const AmpNode *n) {
    for (size_t k = 0; k < n->n_attrs; k++) {
        const char *a = n->attrs[k].name;
        if (n->op == AMP_OP_Cast && (strcmp(a, "to") == 0 || strcmp(a, "saturate") == 0)) continue;
        if (n->op == AMP_OP_IsInf && (strcmp(a, "detect_positive") == 0 || strcmp(a, "detect_negative") == 0) &&
            n->attrs[k].type == AMP_ATTR_INT && n->attrs[k].i == 1)
            continue;
        return false;
    }
    return true;
}

/* The opcode node n becomes, with the dtypes its kernel reads checked as the fused
 * kernels check them (kernels/cpu/fused.c), or 0. */
static int opcode_of(const AmpNode *n) {
    static const struct { AmpOpId op; int code, arity; char kind; } map[] = {
        /* kind: 'a' float or int, 'f' float, 'c' compare (float or int -> bool), 'b' bool */
        {AMP_OP_Add, AMP_FOP_ADD, 2, 'a'}, {AMP_OP_Sub, AMP_FOP_SUB, 2, 'a'}, {AMP_OP_Mul, AMP_FOP_MUL, 2, 'a'},
        {AMP_OP_Div, AMP_FOP_DIV, 2, 'f'}, {AMP_OP_Pow, AMP_FOP_POW, 2, 'f'}, {AMP_OP_Max, AMP_FOP_MAX, 2, 'a'},
        {AMP_OP_Min, AMP_FOP_MIN, 2, 'a'}, {AMP_OP_Neg, AMP_FOP_NEG, 1, 'a'}, {AMP_OP_Abs, AMP_FOP_ABS, 1, 'a'},
        {AMP_OP_Relu, AMP_FOP_RELU, 1, 'a'}, {AMP_OP_Sqrt, AMP_FOP_SQRT, 1, 'f'},
        {AMP_OP_Reciprocal, AMP_FOP_RECIP, 1, 'f'}, {AMP_OP_Exp, AMP_FOP_EXP, 1, 'f'}, {AMP_OP_Log, AMP_FOP_LOG, 1, 'f'},
        {AMP_OP_Equal, AMP_FOP_EQ, 2, 'c'}, {AMP_OP_Less, AMP_FOP_LT, 2, 'c'}, {AMP_OP_Greater, AMP_FOP_GT, 2, 'c'},
        {AMP_OP_LessOrEqual, AMP_FOP_LE, 2, 'c'}, {AMP_OP_GreaterOrEqual, AMP_FOP_GE, 2, 'c'},
        {AMP_OP_Not, AMP_FOP_NOT, 1, 'b'}, {AMP_OP_And, AMP_FOP_AND, 2, 'b'}, {AMP_OP_Or, AMP_FOP_OR, 2, 'b'},
{AMP_OP_Where, AMP_FOP_WHERE, 3, 'w'}, {AMP_OP_Cast, AMP_FOP_CAST, 1, 't'},
        {AMP_OP_IsNaN, AMP_FOP_ISNAN, 1, 'n'}, {AMP_OP_IsInf, AMP_FOP_ISINF, 1, 'n'},
        {AMP_OP_Identity, AMP_FOP_IDENT, 1, 'i'}, {AMP_OP_Tanh, AMP_FOP_TANH, 1, 'f'},
        {AMP_OP_Erf, AMP_FOP_ERF, 1, 'f'},
    };
    if (n->n_outputs != 1 || !n->outputs[0] || !attrs_ok(n)) return 0;
    for (size_t k = 0; k < sizeof map / sizeof map[0]; k++) {
        if (map[k].op != n->op) continue;
        if (n->n_inputs != map[k].arity) return 0;
        for (int i = 0; i < n->n_inputs; i++)
            if (!n->inputs[i]) return 0;
        int a = dt_in(n, 0), b = n->n_inputs > 1 ? dt_in(n, 1) : a, o = n->outputs[0]->type.dtype;
        bool same = a == b, fl = is_float_dt(a), in = is_int_dt(a);
        bool ok;
        switch (map[k].kind) {
        case 'a': ok = same && (fl || in) && o == a; break;
        case 'f': ok = same && fl && o == a; break;
        case 'c': ok = same && (fl || in) && o == AMP_DT_BOOL; break;
        case 'b': ok = same && a == AMP_DT_BOOL && o == AMP_DT_BOOL; break;
        case 'w': ok = a == AMP_DT_BOOL && dt_in(n, 1) == dt_in(n, 2) && o == dt_in(n, 1) && amp_fused_dt_ok(o); break;
        case 't':
            ok = amp_node_attr_int(n, "to", -1) == o &&
                 ((fl && is_float_dt(o)) || (a == AMP_DT_BOOL && (is_float_dt(o) || is_int_dt(o))));
            break;
        case 'n': ok = fl && o == AMP_DT_BOOL; break;
        default: ok = o == a && amp_fused_dt_ok(a); break;
        }
        return ok ? map[k].code : 0;
    }
    return 0;
}

/* A tensor type of known dtype and rank whose every dim is a number or a name (a batch
 * dimension "N": the same name is the same size in one run, which the kernels check). */
static bool known_type(const AmpType *t) {
    if (t->kind != AMP_TYPE_TENSOR || t->rank < 0 || t->rank > AMP_MAX_RANK || !amp_fused_dt_ok(t->dtype)) return false;
    for (int d = 0; d < t->rank; d++)
        if (t->dims[d].value < 0 && !t->dims[d].param) return false;
    return true;
}

static bool same_shape(const AmpType *a, const AmpType *b) {
    if (a->rank != b->rank) return false;
    for (int d = 0; d < a->rank; d++) {
        const AmpDim *x = &a->dims[d], *y = &b->dims[d];
        if (x->value >= 0 ? x->value != y->value : !y->param || y->value >= 0 || strcmp(x->param, y->param) != 0)
            return false;
    }
    return true;
}

static bool same_dim(const AmpDim *x, const AmpDim *y) {
    return x->value >= 0 ? x->value == y->value : y->value < 0 && y->param && x->param && strcmp(x->param, y->param) == 0;
}

/* Whether t, leading 1s aside, is s's trailing dims (a bias [C] against [N, T, C]): its
 * elements repeat along s's leading dims, so element e of s reads element e % |t|. */
static bool suffix_of(const AmpType *t, const AmpType *s) {
    int skip = 0;
    while (skip < t->rank && t->dims[skip].value == 1) skip++;
    int r = t->rank - skip;
    if (r > s->rank) return false;
    for (int d = 0; d < r; d++)
        if (!same_dim(&t->dims[skip + d], &s->dims[s->rank - r + d])) return false;
    return true;
}

/* Whether t holds one element whatever the run (every dim a number). */
static bool one_element(const AmpType *t) {
    for (int d = 0; d < t->rank; d++)
        if (t->dims[d].value != 1) return false;
    return true;
}

/* Node i may join a chain: it runs on the device, has an opcode, a static output shape,
 * and reads values of that shape, single elements, or its trailing dims (a bias; no
 * higher rank: the output keeps the chain's shape). A
 * shape may name its dims (a batch "N"): the kernels check, every run, that each input
 * not broadcast has the shape input's very shape, so declared names that lie fail loudly. */
static bool chainable(const Fuse *f, int i) {
    const AmpNode *n = f->e->nodes[i];
    if (!on_device(f, i) || !opcode_of(n) || !known_type(&n->outputs[0]->type)) return false;
    const AmpType *s = &n->outputs[0]->type;
    for (int k = 0; k < n->n_inputs; k++) {
        const AmpType *t = &n->inputs[k]->type;
        if (!known_type(t) || !(same_shape(t, s) || (one_element(t) && t->rank <= s->rank) ||
                                (t->rank <= s->rank && suffix_of(t, s))))
            return false;
    }
    return true;
}

typedef struct Chain {
    int members[AMP_FUSED_MAX_INSTR], n; /* plan indices, increasing */
    const AmpType *shape;
    bool dead; /* merged into another */
} Chain;

typedef struct Chains {
    Chain *c;
    size_t n, cap;
    int *of; /* per plan index: its chain, or -1 */
} Chains;

static bool in_chain(const Chains *cs, int chain, int i, int joining) {
    return i == joining || (i >= 0 && cs->of[i] == chain);
}

/* Whether the chains in `ids` plus node i form one legal chain placed at i: nothing
 * outside reads one of their values at or before i, and the program fits. */
static bool may_join(const Fuse *f, const Chains *cs, const int *ids, int n_ids, int i) {
    int members = 1;
    for (int k = 0; k < n_ids; k++) {
        const Chain *c = &cs->c[ids[k]];
        members += c->n;
        for (int m = 0; m < c->n; m++) {
            const AmpValue *v = f->e->nodes[c->members[m]]->outputs[0];
            for (size_t u = 0; u < v->n_uses; u++) {
                const AmpNode *rd = v->uses[u].node;
                int p = rd->graph == f->e->g ? pos_of(f, rd) : -1;
                bool inside = p == i;
                for (int q = 0; q < n_ids && !inside; q++) inside = in_chain(cs, ids[q], p, i);
                if (p >= 0 && !inside && p <= i) return false;
            }
        }
    }
    return members <= AMP_FUSED_MAX_INSTR;
}

/* Node i joins the chains that make its inputs (merged) when legal, else starts one. */
static bool chain_node(const Fuse *f, Chains *cs, int i) {
    const AmpNode *n = f->e->nodes[i];
    int ids[3], n_ids = 0;
    for (int k = 0; k < n->n_inputs; k++) {
        int p = producer_at(f, n->inputs[k]);
        int c = p >= 0 ? cs->of[p] : -1;
        if (c < 0 || !same_shape(cs->c[c].shape, &n->outputs[0]->type)) continue;
        bool seen = false;
        for (int q = 0; q < n_ids; q++) seen |= ids[q] == c;
        if (!seen) ids[n_ids++] = c;
    }
    if (n_ids && may_join(f, cs, ids, n_ids, i)) {
        Chain *into = &cs->c[ids[0]];
        for (int q = 1; q < n_ids; q++) {
            Chain *from = &cs->c[ids[q]];
            for (int m = 0; m < from->n; m++) into->members[into->n++] = from->members[m], cs->of[from->members[m]] = ids[0];
            from->dead = true, from->n = 0;
        }
        into->members[into->n++] = i;
        cs->of[i] = ids[0];
        /* members stay in plan order: a merge interleaves them */
        for (int a = 1; a < into->n; a++)
            for (int b = a; b > 0 && into->members[b - 1] > into->members[b]; b--) {
                int t = into->members[b];
                into->members[b] = into->members[b - 1], into->members[b - 1] = t;
            }
        return true;
    }
    if (cs->n == cs->cap) {
        size_t cap = cs->cap ? cs->cap * 2 : 16;
        Chain *c = realloc(cs->c, cap * sizeof *c);
        if (!c) return false;
        cs->c = c, cs->cap = cap;
    }
    Chain *c = &cs->c[cs->n];
    memset(c, 0, sizeof *c);
    c->members[c->n++] = i;
    c->shape = &n->outputs[0]->type;
    cs->of[i] = (int)cs->n++;
    return true;
}

/* Whether chain member value v must be written out: something outside the chain reads it
 * (later in the plan, or another graph), or it is a graph output. */
static bool chain_output(const Fuse *f, const Chains *cs, int chain, const AmpValue *v) {
    if (f->pinned[v->id]) return true;
    for (size_t u = 0; u < v->n_uses; u++) {
        const AmpNode *rd = v->uses[u].node;
        int p = rd->graph == f->e->g ? pos_of(f, rd) : -1;
        if (p < 0 || cs->of[p] != chain) return true;
    }
    return false;
}

typedef struct Prog {
    const AmpValue *in[AMP_FUSED_MAX_IN];
    int n_in, n_out, n_instr;
    int64_t code[5 * AMP_FUSED_MAX_INSTR], in_dt[AMP_FUSED_MAX_IN], outs[AMP_FUSED_MAX_OUT], out_dt[AMP_FUSED_MAX_OUT];
    AmpValue *out[AMP_FUSED_MAX_OUT];
    int shape_input;
} Prog;

/* The register holding v: an instruction's result when a member made it, else an input
 * (added on first use); -1 when the inputs are full. */
static int reg_of(const Fuse *f, const Chain *c, Prog *p, const AmpValue *v) {
    for (int m = 0; m < c->n; m++)
        if (f->e->nodes[c->members[m]]->outputs[0] == v) return -2 - m; /* resolved by the caller */
    for (int k = 0; k < p->n_in; k++)
        if (p->in[k] == v) return k;
    if (p->n_in == AMP_FUSED_MAX_IN) return -1;
    p->in[p->n_in] = v;
    p->in_dt[p->n_in] = v->type.dtype;
    return p->n_in++;
}

/* Chain c as a program; false when it does not fit (too many inputs or outputs, no input
 * of the chain's full shape). Inputs first, so instruction registers are known after. */
static bool build_prog(const Fuse *f, const Chains *cs, int chain, Prog *p) {
    const Chain *c = &cs->c[chain];
    memset(p, 0, sizeof *p);
    for (int m = 0; m < c->n; m++) {
        const AmpNode *n = f->e->nodes[c->members[m]];
        for (int k = 0; k < n->n_inputs; k++)
            if (reg_of(f, c, p, n->inputs[k]) == -1) return false;
    }
    p->shape_input = -1;
    p->n_instr = c->n;
    for (int k = 0; k < p->n_in && p->shape_input < 0; k++)
        if (same_shape(&p->in[k]->type, c->shape)) p->shape_input = k;
    if (p->shape_input < 0) return false;
    for (int m = 0; m < c->n; m++) {
        const AmpNode *n = f->e->nodes[c->members[m]];
        int64_t *w = p->code + 5 * m;
        w[0] = opcode_of(n);
        w[1] = n->outputs[0]->type.dtype;
        for (int k = 0; k < n->n_inputs; k++) {
            int r = reg_of(f, c, p, n->inputs[k]);
            w[2 + k] = r <= -2 ? p->n_in + (-2 - r) : r;
        }
        if (chain_output(f, cs, chain, n->outputs[0])) {
            if (p->n_out == AMP_FUSED_MAX_OUT) return false;
            p->outs[p->n_out] = p->n_in + m;
            p->out_dt[p->n_out] = n->outputs[0]->type.dtype;
            p->out[p->n_out++] = n->outputs[0];
        }
    }
    return p->n_out > 0;
}

/* A chain's program and where its fused node would run. */
typedef struct Built {
    int chain, last; /* its chain; the plan index of its last node */
    Prog p;
    bool used;
} Built;

static bool same_prog(const Built *a, const Built *b, const Chains *cs) {
    const Prog *x = &a->p, *y = &b->p;
    int n = x->n_instr;
    return n == y->n_instr && x->n_in == y->n_in && x->n_out == y->n_out && x->shape_input == y->shape_input &&
           !memcmp(x->code, y->code, 5 * (size_t)n * sizeof *x->code) &&
           !memcmp(x->in_dt, y->in_dt, (size_t)x->n_in * sizeof *x->in_dt) &&
           !memcmp(x->outs, y->outs, (size_t)x->n_out * sizeof *x->outs);
}

/* Whether chain b's outputs are read by nothing outside it at or before plan index pos. */
static bool read_after(const Fuse *f, const Chains *cs, const Built *b, int pos) {
    for (int o = 0; o < b->p.n_out; o++) {
        const AmpValue *v = b->p.out[o];
        for (size_t u = 0; u < v->n_uses; u++) {
            const AmpNode *rd = v->uses[u].node;
            int p = rd->graph == f->e->g ? pos_of(f, rd) : -1;
            if (p >= 0 && p <= pos && cs->of[p] != b->chain) return false;
        }
    }
    return true;
}

/* The FusedElementwise node running the programs of group[0..n) (one program, each over
 * its own tensors: n sets). */
static AmpNode *prog_node(Fuse *f, Built *const *group, int n) {
    const Prog *p = &group[0]->p;
    const AmpNode *like = f->e->nodes[group[n - 1]->last];
    AmpNode *node = new_node(f, AMP_OP_Ampc_FusedElementwise, "FusedElementwise", "ai.ampc", like, n * p->n_in,
                             n * p->n_out);
    AmpAttr *a = node ? arena(f, 6 * sizeof *a) : NULL;
    if (!a) return NULL;
    for (int t = 0; t < n; t++) {
        memcpy(node->inputs + t * p->n_in, group[t]->p.in, (size_t)p->n_in * sizeof *node->inputs);
        memcpy(node->outputs + t * p->n_out, group[t]->p.out, (size_t)p->n_out * sizeof *node->outputs);
    }
    node->attrs = a;
    node->n_attrs = 6;
    bool ok = add_ints(f, &a[0], "program", p->code, 5 * (size_t)p->n_instr) &&
              add_ints(f, &a[1], "in_dtypes", p->in_dt, (size_t)p->n_in) &&
              add_ints(f, &a[2], "outputs", p->outs, (size_t)p->n_out) &&
              add_ints(f, &a[3], "out_dtypes", p->out_dt, (size_t)p->n_out);
    a[4] = (AmpAttr){.name = "shape_input", .type = AMP_ATTR_INT, .has = AMP_ATTR_HAS_TYPE | AMP_ATTR_HAS_I,
                     .i = p->shape_input};
    a[5] = (AmpAttr){.name = "tensors", .type = AMP_ATTR_INT, .has = AMP_ATTR_HAS_TYPE | AMP_ATTR_HAS_I, .i = n};
    return ok ? node : NULL;
}

/* Chains of one program gather into one node, as many as the executor's inputs and
 * outputs allow, where each one's outputs are still read after the group runs (at the
 * last of their places). */
static int gather(const Fuse *f, const Chains *cs, Built *b, size_t n_b, size_t i, Built **group, int *pos) {
    int max = AMP_EXEC_MAX_IN / b[i].p.n_in, n = 1;
    if (AMP_EXEC_MAX_OUT / b[i].p.n_out < max) max = AMP_EXEC_MAX_OUT / b[i].p.n_out;
    group[0] = &b[i];
    *pos = b[i].last;
    for (size_t j = i + 1; j < n_b && n < max; j++) {
        if (b[j].used || !same_prog(&b[i], &b[j], cs)) continue;
        int at = b[j].last > *pos ? b[j].last : *pos;
        bool ok = read_after(f, cs, &b[j], at);
        for (int k = 0; k < n && ok; k++) ok = read_after(f, cs, group[k], at);
        if (!ok) continue;
        group[n++] = &b[j];
        *pos = at;
    }
    return n;
}

/* Every chain of two nodes or more becomes (with the chains of the same program) a
 * FusedElementwise node. */
static AmpCode fuse_chains(Fuse *f) {
    Chains cs = {0};
    cs.of = malloc((f->n ? f->n : 1) * sizeof *cs.of);
    if (!cs.of) return AMP_ERR_INTERNAL;
    for (size_t i = 0; i < f->n; i++) cs.of[i] = -1;
    bool ok = true;
    for (size_t i = 0; i < f->n && ok; i++)
        if (chainable(f, (int)i)) ok = chain_node(f, &cs, (int)i);
    Built *b = ok ? calloc(cs.n ? cs.n : 1, sizeof *b) : NULL;
    size_t n_b = 0;
    for (size_t k = 0; b && k < cs.n; k++) {
        const Chain *c = &cs.c[k];
        if (c->dead || c->n < 2 || !build_prog(f, &cs, (int)k, &b[n_b].p)) continue;
        b[n_b].chain = (int)k;
        b[n_b++].last = c->members[c->n - 1];
    }
    Built *group[AMP_EXEC_MAX_OUT];
    for (size_t i = 0; b && i < n_b; i++) {
        if (b[i].used) continue;
        int pos, n = gather(f, &cs, b, n_b, i, group, &pos);
        AmpNode *node = prog_node(f, group, n);
        if (!node) {
            ok = false;
            break;
        }
        if (!device_takes(f, node)) continue;
        for (int g = 0; g < n; g++) {
            const Chain *c = &cs.c[group[g]->chain];
            group[g]->used = true;
            for (int m = 0; m < c->n; m++) f->gone[c->members[m]] = true;
        }
        f->gone[pos] = false;
        f->repl[pos] = node;
        f->fused++;
    }
    ok = ok && b;
    free(b), free(cs.c), free(cs.of);
    return ok ? AMP_OK : AMP_ERR_INTERNAL;
}

/* ---- the pass ------------------------------------------------------------------------- */

/* Rewrites e->nodes (and the per-node arrays beside it) with the fused nodes; e->gate
 * gets the gates folded in. Runs before the kernels are prepared. */
AmpCode amp_exec_fuse(AmpExec *e, AmpStatus *st) {
    if (e->opt.no_fuse || !e->be->fuse || !e->n_nodes) return AMP_OK;
    Fuse f = {.e = e, .m = e->m, .n = e->n_nodes, .n_pos = e->m->next_node_id};
    f.pos = malloc((f.n_pos ? f.n_pos : 1) * sizeof *f.pos);
    f.pinned = calloc(e->n_values ? e->n_values : 1, sizeof *f.pinned);
    f.repl = calloc(f.n, sizeof *f.repl);
    f.gone = calloc(f.n, sizeof *f.gone);
    f.gate = calloc(f.n, sizeof *f.gate);
    AmpCode rc = f.pos && f.pinned && f.repl && f.gone && f.gate ? AMP_OK : AMP_ERR_INTERNAL;
    if (!rc) {
        for (size_t i = 0; i < f.n_pos; i++) f.pos[i] = -1;
        for (size_t i = 0; i < f.n; i++)
            if (e->nodes[i]->id < f.n_pos) f.pos[e->nodes[i]->id] = (int)i;
        pin_all(&f);
        for (size_t i = 0; i < f.n; i++) fold_gates(&f, (int)i);
        for (size_t i = 0; i < f.n; i++) fold_check(&f, (int)i);
        rc = fuse_chains(&f);
    }
    if (!rc && f.fused) {
        size_t w = 0;
        for (size_t i = 0; i < f.n; i++) {
            if (f.gone[i]) continue;
            e->nodes[w] = f.repl[i] ? f.repl[i] : e->nodes[i];
            e->node_be[w] = e->node_be[i];
            e->opsets[w] = f.repl[i] ? amp_model_opset(e->m, e->nodes[w]->domain) : e->opsets[i];
            e->gate[w] = f.gate[i];
            w++;
        }
        e->n_fused = f.fused;
        e->n_absorbed = f.n - w + f.fused;
        e->n_nodes = w;
    }
    free(f.pos), free(f.pinned), free(f.repl), free(f.gone), free(f.gate);
    return rc ? amp_fail(st, AMP_ERR_INTERNAL, "out of memory") : AMP_OK;
}
