/* The plan-level fusion (docs/internals.md, "Fusion"), a planning step of its own (fuse.h):
 * before a device executor prepares its kernels, it decides which groups of the plan's
 * nodes become one node of an internal op, so a step makes fewer launches and fewer round
 * trips through memory; the executor applies the answer and runs what it is given. The
 * model is not changed: the fused nodes live in the executor's plan only (made in the
 * model's arena, linked into no graph) and read and write the same values the nodes they
 * replace did, bit for bit.
 *   - the update gates: Where(amp_found_inf, old, new) over every output of an optimizer
 *     node whose kernels honour AmpKernelCtx.gate (Adam, Momentum, Adagrad) fold into it;
 *   - the gradient check: the loss_scale pass's [Cast,] Mul(X, 1/scale) per gradient and
 *     IsNaN(Sum(ReduceSum(G * 0) ...)) become ai.ampc UnscaleCheck nodes (a multi-tensor
 *     kernel, as many gradients each as a node's inputs allow, chained through their found
 *     flag);
 *   - chains of elementwise nodes of one static shape (optimizer arithmetic written as
 *     ONNX ops, the gates, the scale's update on scalars, casts) become ai.ampc
 *     FusedElementwise nodes (ir/fused_prog.h; fuse_chain.c);
 *   - a Conv and the Relu, or the residual Add (and its Relu), that alone read its output
 *     become an ai.ampc ConvEpilogue node (fuse_conv.c), and Sub(A, Mul(s, B)) an ai.ampc
 *     SubScaled node (fuse_update.c), for backends that ask for those alone
 *     (AmpBackend.fuse_cpu: the CPU, where they save passes over memory).
 * Only backends that ask for it (AmpBackend.fuse: CUDA, and the simulator, which runs the
 * CPU reference kernels of the fused ops and so proves them against the unfused CPU runs),
 * only nodes that backend runs itself, and only fused nodes its supports check takes.
 * Apart from those, a backend may ask for the CPU's kinds alone (AmpBackend.fuse_cpu):
 * `ampc grad`'s convolution weight gradients, a Conv between Transposes, become
 * com.microsoft ConvGrad nodes (fuse_wgrad.c), and chains of float32 arithmetic become
 * FusedElementwise nodes of one tensor set each (fuse_chain.c), and an Identity that alone
 * reads a value is written by that value's producer (fuse_copy.c);
 * AmpExecOptions.no_fuse keeps the executor from asking (hooks that read every value need
 * it off). */
#include <stdlib.h>
#include <string.h>

#include "ir/half.h"
#include "runtime/fuse_state.h"

/* ---- what the plan's own nodes may not absorb ---------------------------------------- */

/* Marks every value of f->g that graph `sub` (a body, a training algorithm ...) reads. */
static void pin_reads(Fuse *f, const AmpGraph *sub) {
    for (const AmpNode *n = sub->first; n; n = n->next) {
        for (int i = 0; i < n->n_inputs; i++)
            if (n->inputs[i] && n->inputs[i]->graph == f->g) f->pinned[n->inputs[i]->id] = true;
        for (size_t k = 0; k < n->n_attrs; k++) {
            if (n->attrs[k].g) pin_reads(f, n->attrs[k].g);
            for (size_t j = 0; j < n->attrs[k].n_graphs; j++) pin_reads(f, n->attrs[k].graphs[j]);
        }
    }
    for (size_t i = 0; i < sub->outputs.n; i++)
        if (sub->outputs.items[i].value->graph == f->g) f->pinned[sub->outputs.items[i].value->id] = true;
}

static void pin_all(Fuse *f) {
    AmpGraph *g = f->g;
    for (size_t i = 0; i < g->outputs.n; i++)
        if (g->outputs.items[i].value->graph == g) f->pinned[g->outputs.items[i].value->id] = true;
    for (size_t i = 0; i < f->n; i++) {
        const AmpNode *n = f->nodes[i];
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

/* ---- gates folded into optimizers -------------------------------------------------------- */

/* The input that output o of optimizer n replaces (amp_infer_optimizer's rule), or -1. */
static int replaced_input(const AmpNode *n, int o) {
    static const int from_group[3] = {0, 2, 3};
    int groups = n->op == AMP_OP_Adam ? 4 : 3, tensors = n->n_inputs - 2;
    if (tensors <= 0 || tensors % groups) return -1;
    int N = tensors / groups;
    return o / N < groups - 1 ? 2 + from_group[o / N] * N + o % N : -1;
}

/* The gates of optimizer i: every output o read only by Where(found, replaced input, o),
 * at plan index where[o] (-1 for an output left out), with one found made before the last
 * of them (*last), and nothing reading the gates' outputs before it; NULL when not so. */
static const AmpValue *find_gates(const Fuse *f, int i, int *where, int *last) {
    const AmpNode *n = f->nodes[i];
    const AmpValue *found = NULL;
    *last = i;
    for (int o = 0; o < n->n_outputs; o++) {
        where[o] = -1;
        if (!n->outputs[o]) continue;
        int r = sole_reader(f, n->outputs[o]), in = replaced_input(n, o);
        const AmpNode *w = r >= 0 ? f->nodes[r] : NULL;
        if (!w || w->op != AMP_OP_Where || !on_device(f, r) || in < 0 || w->n_inputs != 3 ||
            w->inputs[2] != n->outputs[o] || w->inputs[1] != n->inputs[in] || !w->inputs[0] ||
            w->inputs[0]->type.dtype != AMP_DT_BOOL || (found && w->inputs[0] != found) ||
            w->outputs[0]->type.dtype != n->outputs[o]->type.dtype)
            return NULL;
        found = w->inputs[0];
        where[o] = r;
        *last = r > *last ? r : *last;
    }
    int fp = producer_at(f, found);
    if (!found || fp >= *last || found->type.rank > 1) return NULL;
    /* The gates' outputs are now made at `last`: nothing may read them before. */
    for (int o = 0; o < n->n_outputs; o++) {
        const AmpValue *v = where[o] >= 0 ? f->nodes[where[o]]->outputs[0] : NULL;
        for (size_t u = 0; v && u < v->n_uses; u++)
            if (v->uses[u].node->graph == f->g && pos_of(f, v->uses[u].node) <= *last) return NULL;
    }
    return found;
}

/* Optimizer i whose every output is read only by Where(found, replaced input, output) with
 * one found: it writes the gates' outputs itself, reading found (k->gate), placed where
 * the last gate was. */
static bool fold_gates(Fuse *f, int i) {
    AmpNode *n = f->nodes[i];
    if (!amp_kernel_takes_gate(n->op) || !on_device(f, i)) return false;
    int last, where[16];
    if (n->n_outputs > 16) return false;
    const AmpValue *found = find_gates(f, i, where, &last);
    if (!found) return false;
    AmpNode *c = amp_fuse_new_node(f, n->op, n->op_type, n->domain, n, n->n_inputs, n->n_outputs);
    if (!c) return false;
    memcpy(c->inputs, n->inputs, (size_t)n->n_inputs * sizeof *c->inputs);
    for (int o = 0; o < n->n_outputs; o++) c->outputs[o] = where[o] >= 0 ? f->nodes[where[o]]->outputs[0] : NULL;
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
    AmpBuf b;
    return amp_fuse_const_buf(f, v, &b) && b.dtype == AMP_DT_FLOAT && b.nelem == 1 &&
           ((const float *)b.data)[0] == 0.0f;
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
    const AmpNode *r = rs >= 0 ? f->nodes[rs] : NULL;
    if (!r || r->op != AMP_OP_ReduceSum || r->n_inputs != 1 || r->n_attrs != 1 ||
        amp_node_attr_int(r, "keepdims", 1) != 0 || sole_reader(f, r->inputs[0]) != rs)
        return false;
    int zm = producer_at(f, r->inputs[0]);
    const AmpNode *z = zm >= 0 ? f->nodes[zm] : NULL;
    if (!z || z->op != AMP_OP_Mul || z->n_inputs != 2 || z->n_attrs || !is_zero_scalar(f, z->inputs[1])) return false;
    AmpValue *g = z->inputs[0];
    int um = producer_at(f, g);
    const AmpNode *u = um >= 0 ? f->nodes[um] : NULL;
    /* inv one float32 element; X and G of one known shape (the fused node gives G X's) */
    const AmpValue *iv = u ? u->inputs[1] : NULL;
    if (!u || u->op != AMP_OP_Mul || u->n_inputs != 2 || u->n_attrs || g->type.dtype != AMP_DT_FLOAT ||
        !amp_fuse_known_type(&iv->type) || iv->type.dtype != AMP_DT_FLOAT || !amp_fuse_one_element(&iv->type) ||
        !amp_fuse_known_type(&g->type) || !amp_fuse_known_type(&u->inputs[0]->type) ||
        !amp_fuse_same_shape(&g->type, &u->inputs[0]->type) || (*inv && iv != *inv))
        return false;
    *inv = u->inputs[1];
    p->n_nodes = 0;
    p->nodes[p->n_nodes++] = rs, p->nodes[p->n_nodes++] = zm, p->nodes[p->n_nodes++] = um;
    p->x = u->inputs[0];
    p->g = g;
    p->carrier = r->outputs[0];
    int cm = producer_at(f, p->x);
    const AmpNode *cast = cm >= 0 ? f->nodes[cm] : NULL;
    if (cast && cast->op == AMP_OP_Cast && sole_reader(f, p->x) == um && on_device(f, cm) && cast->inputs[0] &&
        (cast->inputs[0]->type.dtype == AMP_DT_FLOAT16 || cast->inputs[0]->type.dtype == AMP_DT_BFLOAT16) &&
        amp_fuse_known_type(&cast->inputs[0]->type) && amp_fuse_same_shape(&cast->inputs[0]->type, &g->type)) {
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
    AmpNode *c = amp_fuse_new_node(f, AMP_OP_Ampc_UnscaleCheck, "UnscaleCheck", "ai.ampc", like, count + 2, count + 1);
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
            int p = rd->graph == f->g ? pos_of(f, rd) : -1;
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
    const AmpNode *isnan = f->nodes[i];
    if (isnan->op != AMP_OP_IsNaN || !on_device(f, i)) return false;
    int si = producer_at(f, isnan->inputs[0]);
    const AmpNode *sum = si >= 0 ? f->nodes[si] : NULL;
    if (!sum || sum->op != AMP_OP_Sum || sole_reader(f, isnan->inputs[0]) != i || !on_device(f, si)) return false;
    /* gradients per UnscaleCheck: its other inputs are inv and the flag before it */
    int per = f->max_in - 2, N = sum->n_inputs, n_abs = 0;
    if (per < 1) return false;
    int n_chunks = (N + per - 1) / per;
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
        int j0 = c * per, cnt = N - j0 < per ? N - j0 : per, place = absorbed[n_abs - n_chunks + c];
        AmpValue *found = c == n_chunks - 1 ? isnan->outputs[0] : parts[j0].carrier;
        ok = uc_fits(f, parts + j0, cnt, inv, place) &&
             (made[c] = uc_node(f, sum, inv, before, parts + j0, cnt, found)) && amp_fuse_device_takes(f, made[c]);
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

/* ---- the plan step ------------------------------------------------------------------- */

AmpCode amp_fuse_plan(const AmpFuseRequest *rq, AmpFusePlan *out, AmpStatus *st) {
    memset(out, 0, sizeof *out);
    out->n = rq->n;
    if (!(rq->be->fuse || rq->be->fuse_cpu) || !rq->n) return AMP_OK;
    Fuse f = {.m = rq->m, .g = rq->g, .nodes = rq->nodes, .node_be = rq->node_be, .be = rq->be, .n = rq->n,
              .max_in = rq->max_in, .max_out = rq->max_out, .n_pos = rq->m->next_node_id,
              .cpu = !rq->be->fuse};
    /* The CPU's chains only where its kernel runs them in vector rows (kernels/cpu/fused.c:
     * AVX-512, ir/half.h's check); per element they would be slower than apart. */
    bool chains = rq->be->fuse || amp_half_have_avx512();
    f.pos = malloc((f.n_pos ? f.n_pos : 1) * sizeof *f.pos);
    f.pinned = calloc(f.g->n_values ? f.g->n_values : 1, sizeof *f.pinned);
    f.repl = calloc(f.n, sizeof *f.repl);
    f.gone = calloc(f.n, sizeof *f.gone);
    f.gate = calloc(f.n, sizeof *f.gate);
    AmpCode rc = f.pos && f.pinned && f.repl && f.gone && f.gate ? AMP_OK : AMP_ERR_INTERNAL;
    if (!rc) {
        for (size_t i = 0; i < f.n_pos; i++) f.pos[i] = -1;
        for (size_t i = 0; i < f.n; i++)
            if (f.nodes[i]->id < f.n_pos) f.pos[f.nodes[i]->id] = (int)i;
        pin_all(&f);
        if (rq->be->fuse_cpu) amp_fuse_conv_grads(&f);
        if (rq->be->fuse_cpu) amp_fuse_conv_epilogues(&f); /* before the chains take the Relus */
        for (size_t i = 0; rq->be->fuse_cpu && i < f.n; i++) amp_fuse_scaled_sub(&f, (int)i);
        for (size_t i = 0; rq->be->fuse && i < f.n; i++) fold_gates(&f, (int)i);
        for (size_t i = 0; rq->be->fuse && i < f.n; i++) fold_check(&f, (int)i);
        if (chains) rc = amp_fuse_chains(&f);
        if (!rc && rq->be->fuse_cpu) amp_fuse_copies(&f); /* last: what the other kinds absorb is theirs */
    }
    out->repl = f.repl, out->gone = f.gone, out->gate = f.gate;
    out->fused = rc ? 0 : f.fused;
    free(f.pos), free(f.pinned);
    return rc ? amp_fail(st, AMP_ERR_INTERNAL, "out of memory") : AMP_OK;
}

void amp_fuse_plan_free(AmpFusePlan *p) {
    free(p->repl), free(p->gone), free((void *)p->gate);
    memset(p, 0, sizeof *p);
}
