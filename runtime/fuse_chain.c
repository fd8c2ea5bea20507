/* The plan-level fusion's elementwise chains (fuse.h; docs/internals.md, "Fusion"): nodes
 * of the ops ir/fused_prog.h lists (and the unary ops ops/unary.def marks FUSE), of one
 * static shape, grow chains along their inputs; a chain of two nodes or more becomes a
 * program, and chains of one program gather into one ai.ampc FusedElementwise node, where
 * the device runs it (for the CPU, Fuse.cpu: programs of float32 arithmetic alone, one
 * chain a node, so that an update stays in place). And the types every part of the fusion
 * reads. */
#include <stdlib.h>
#include <string.h>

#include "ir/fused_prog.h"
#include "runtime/fuse_state.h"

/* ---- the ops a program takes ---------------------------------------------------------- */

static bool is_float_dt(int dt) {
    return dt == AMP_DT_FLOAT || dt == AMP_DT_FLOAT16 || dt == AMP_DT_BFLOAT16;
}

static bool is_int_dt(int dt) {
    return dt == AMP_DT_INT32 || dt == AMP_DT_INT64;
}

static bool fused_dt_ok(int dt) {
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
 * kernels check them (ops/fused_check.c), or 0. */
static int opcode_of(const AmpNode *n) {
    static const struct { AmpOpId op; int code, arity; char kind; } map[] = {
        /* kind: 'a' float or int, 'f' float, 'c' compare (float or int -> bool), 'b' bool */
        {AMP_OP_Add, AMP_FOP_ADD, 2, 'a'}, {AMP_OP_Sub, AMP_FOP_SUB, 2, 'a'}, {AMP_OP_Mul, AMP_FOP_MUL, 2, 'a'},
        {AMP_OP_Div, AMP_FOP_DIV, 2, 'f'}, {AMP_OP_Pow, AMP_FOP_POW, 2, 'f'}, {AMP_OP_Max, AMP_FOP_MAX, 2, 'a'},
        {AMP_OP_Min, AMP_FOP_MIN, 2, 'a'}, {AMP_OP_Neg, AMP_FOP_NEG, 1, 'a'}, {AMP_OP_Abs, AMP_FOP_ABS, 1, 'a'},
        {AMP_OP_Relu, AMP_FOP_RELU, 1, 'a'},
        {AMP_OP_Equal, AMP_FOP_EQ, 2, 'c'}, {AMP_OP_Less, AMP_FOP_LT, 2, 'c'}, {AMP_OP_Greater, AMP_FOP_GT, 2, 'c'},
        {AMP_OP_LessOrEqual, AMP_FOP_LE, 2, 'c'}, {AMP_OP_GreaterOrEqual, AMP_FOP_GE, 2, 'c'},
        {AMP_OP_Not, AMP_FOP_NOT, 1, 'b'}, {AMP_OP_And, AMP_FOP_AND, 2, 'b'}, {AMP_OP_Or, AMP_FOP_OR, 2, 'b'},
        {AMP_OP_Where, AMP_FOP_WHERE, 3, 'w'}, {AMP_OP_Cast, AMP_FOP_CAST, 1, 't'},
        {AMP_OP_IsNaN, AMP_FOP_ISNAN, 1, 'n'}, {AMP_OP_IsInf, AMP_FOP_ISINF, 1, 'n'},
        {AMP_OP_Identity, AMP_FOP_IDENT, 1, 'i'},
    /* the float unary ops whose line in ops/unary.def has FUSE 1 (the op in operand b) */
#define AMP_UNARY(Id, FEXPR, DEXPR, PREPARE, TYPES, LUT, CUDA, FUSE)                                                   \
    AMP_UNARY_FUSE_##FUSE({AMP_OP_##Id, AMP_FOP_UNARY, 1, 'f'},)
#include "ops/unary.def"
#undef AMP_UNARY
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
        case 'w': ok = a == AMP_DT_BOOL && dt_in(n, 1) == dt_in(n, 2) && o == dt_in(n, 1) && fused_dt_ok(o); break;
        case 't':
            ok = amp_node_attr_int(n, "to", -1) == o &&
                 ((fl && is_float_dt(o)) || (a == AMP_DT_BOOL && (is_float_dt(o) || is_int_dt(o))));
            break;
        case 'n': ok = fl && o == AMP_DT_BOOL; break;
        default: ok = o == a && fused_dt_ok(a); break;
        }
        return ok ? map[k].code : 0;
    }
    return 0;
}

/* ---- types (every part of the fusion reads them) -------------------------------------- */

/* A tensor type of known dtype and rank whose every dim is a number or a name (a batch
 * dimension "N": the same name is the same size in one run, which the kernels check). */
bool amp_fuse_known_type(const AmpType *t) {
    if (t->kind != AMP_TYPE_TENSOR || t->rank < 0 || t->rank > AMP_MAX_RANK || !fused_dt_ok(t->dtype)) return false;
    for (int d = 0; d < t->rank; d++)
        if (t->dims[d].value < 0 && !t->dims[d].param) return false;
    return true;
}

bool amp_fuse_same_shape(const AmpType *a, const AmpType *b) {
    if (a->rank != b->rank) return false;
    for (int d = 0; d < a->rank; d++) {
        const AmpDim *x = &a->dims[d], *y = &b->dims[d];
        if (x->value >= 0 ? x->value != y->value : !y->param || y->value >= 0 || strcmp(x->param, y->param) != 0)
            return false;
    }
    return true;
}

static bool same_dim(const AmpDim *x, const AmpDim *y) {
    return x->value >= 0 ? x->value == y->value
                         : y->value < 0 && y->param && x->param && strcmp(x->param, y->param) == 0;
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
bool amp_fuse_one_element(const AmpType *t) {
    for (int d = 0; d < t->rank; d++)
        if (t->dims[d].value != 1) return false;
    return true;
}

/* ---- chains ----------------------------------------------------------------------------- */

/* Node i may join a chain: it runs on the device, has an opcode, a static output shape,
 * and reads values of that shape, single elements, or its trailing dims (a bias; no
 * higher rank: the output keeps the chain's shape). A
 * shape may name its dims (a batch "N"): the kernels check, every run, that each input
 * not broadcast has the shape input's very shape, so declared names that lie fail loudly. */
static bool chainable(const Fuse *f, int i) {
    const AmpNode *n = f->nodes[i];
    if (!on_device(f, i) || !opcode_of(n) || !amp_fuse_known_type(&n->outputs[0]->type)) return false;
    const AmpType *s = &n->outputs[0]->type;
    for (int k = 0; k < n->n_inputs; k++) {
        const AmpType *t = &n->inputs[k]->type;
        if (!amp_fuse_known_type(t)) return false;
        if (!(amp_fuse_same_shape(t, s) || (amp_fuse_one_element(t) && t->rank <= s->rank) ||
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
            const AmpValue *v = f->nodes[c->members[m]]->outputs[0];
            for (size_t u = 0; u < v->n_uses; u++) {
                const AmpNode *rd = v->uses[u].node;
                int p = rd->graph == f->g ? pos_of(f, rd) : -1;
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
    const AmpNode *n = f->nodes[i];
    int ids[3], n_ids = 0;
    for (int k = 0; k < n->n_inputs; k++) {
        int p = producer_at(f, n->inputs[k]);
        int c = p >= 0 ? cs->of[p] : -1;
        if (c < 0 || !amp_fuse_same_shape(cs->c[c].shape, &n->outputs[0]->type)) continue;
        bool seen = false;
        for (int q = 0; q < n_ids; q++) seen |= ids[q] == c;
        if (!seen) ids[n_ids++] = c;
    }
    if (n_ids && may_join(f, cs, ids, n_ids, i)) {
        Chain *into = &cs->c[ids[0]];
        for (int q = 1; q < n_ids; q++) {
            Chain *from = &cs->c[ids[q]];
            for (int m = 0; m < from->n; m++)
                into->members[into->n++] = from->members[m], cs->of[from->members[m]] = ids[0];
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
        int p = rd->graph == f->g ? pos_of(f, rd) : -1;
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
        if (f->nodes[c->members[m]]->outputs[0] == v) return -2 - m; /* resolved by the caller */
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
        const AmpNode *n = f->nodes[c->members[m]];
        for (int k = 0; k < n->n_inputs; k++)
            if (reg_of(f, c, p, n->inputs[k]) == -1) return false;
    }
    p->shape_input = -1;
    p->n_instr = c->n;
    for (int k = 0; k < p->n_in && p->shape_input < 0; k++)
        if (amp_fuse_same_shape(&p->in[k]->type, c->shape)) p->shape_input = k;
    if (p->shape_input < 0) return false;
    for (int m = 0; m < c->n; m++) {
        const AmpNode *n = f->nodes[c->members[m]];
        int64_t *w = p->code + 5 * m;
        w[0] = opcode_of(n);
        w[1] = n->outputs[0]->type.dtype;
        for (int k = 0; k < n->n_inputs; k++) {
            int r = reg_of(f, c, p, n->inputs[k]);
            w[2 + k] = r <= -2 ? p->n_in + (-2 - r) : r;
        }
        if (w[0] == AMP_FOP_UNARY) w[3] = n->op; /* which one (ir/fused_prog.h) */
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
            int p = rd->graph == f->g ? pos_of(f, rd) : -1;
            if (p >= 0 && p <= pos && cs->of[p] != b->chain) return false;
        }
    }
    return true;
}

/* The FusedElementwise node running the programs of group[0..n) (one program, each over
 * its own tensors: n sets). */
static AmpNode *prog_node(Fuse *f, Built *const *group, int n) {
    const Prog *p = &group[0]->p;
    const AmpNode *like = f->nodes[group[n - 1]->last];
    AmpNode *node = amp_fuse_new_node(f, AMP_OP_Ampc_FusedElementwise, "FusedElementwise", "ai.ampc", like, n * p->n_in,
                             n * p->n_out);
    AmpAttr *a = node ? amp_fuse_arena(f, 6 * sizeof *a) : NULL;
    if (!a) return NULL;
    for (int t = 0; t < n; t++) {
        memcpy(node->inputs + t * p->n_in, group[t]->p.in, (size_t)p->n_in * sizeof *node->inputs);
        memcpy(node->outputs + t * p->n_out, group[t]->p.out, (size_t)p->n_out * sizeof *node->outputs);
    }
    node->attrs = a;
    node->n_attrs = 6;
    bool ok = amp_fuse_add_ints(f, &a[0], "program", p->code, 5 * (size_t)p->n_instr) &&
              amp_fuse_add_ints(f, &a[1], "in_dtypes", p->in_dt, (size_t)p->n_in) &&
              amp_fuse_add_ints(f, &a[2], "outputs", p->outs, (size_t)p->n_out) &&
              amp_fuse_add_ints(f, &a[3], "out_dtypes", p->out_dt, (size_t)p->n_out);
    a[4] = (AmpAttr){.name = "shape_input", .type = AMP_ATTR_INT, .has = AMP_ATTR_HAS_TYPE | AMP_ATTR_HAS_I,
                     .i = p->shape_input};
    a[5] = (AmpAttr){.name = "tensors", .type = AMP_ATTR_INT, .has = AMP_ATTR_HAS_TYPE | AMP_ATTR_HAS_I, .i = n};
    return ok ? node : NULL;
}

/* Chains of one program gather into one node, as many as the executor's inputs and
 * outputs allow, where each one's outputs are still read after the group runs (at the
 * last of their places). */
static int gather(const Fuse *f, const Chains *cs, Built *b, size_t n_b, size_t i, Built **group, int *pos) {
    int max = f->cpu ? 1 : f->max_in / b[i].p.n_in, n = 1;
    if (f->max_out / b[i].p.n_out < max) max = f->max_out / b[i].p.n_out;
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

/* The plan's chains: every node that may join one joins the chains that make its inputs,
 * or starts one. */
static bool find_chains(const Fuse *f, Chains *cs) {
    cs->of = malloc((f->n ? f->n : 1) * sizeof *cs->of);
    if (!cs->of) return false;
    for (size_t i = 0; i < f->n; i++) cs->of[i] = -1;
    for (size_t i = 0; i < f->n; i++)
        if (chainable(f, (int)i) && !chain_node(f, cs, (int)i)) return false;
    return true;
}

/* Each group of chains of one program (b[0..n_b), gathered in group) becomes a
 * FusedElementwise node where the device runs it, in the group's place. */
static bool fuse_groups(Fuse *f, const Chains *cs, Built *b, size_t n_b, Built **group) {
    for (size_t i = 0; i < n_b; i++) {
        if (b[i].used) continue;
        int pos, n = gather(f, cs, b, n_b, i, group, &pos);
        AmpNode *node = prog_node(f, group, n);
        if (!node) return false;
        if (!amp_fuse_device_takes(f, node)) continue;
        for (int g = 0; g < n; g++) {
            const Chain *c = &cs->c[group[g]->chain];
            group[g]->used = true;
            for (int m = 0; m < c->n; m++) f->gone[c->members[m]] = true;
        }
        f->gone[pos] = false;
        f->repl[pos] = node;
        f->fused++;
    }
    return true;
}

AmpCode amp_fuse_chains(Fuse *f) {
    Chains cs = {0};
    Built *b = NULL, **group = malloc((f->max_out > 0 ? (size_t)f->max_out : 1) * sizeof *group);
    size_t n_b = 0;
    bool ok = group && find_chains(f, &cs) && (b = calloc(cs.n ? cs.n : 1, sizeof *b)) != NULL;
    for (size_t k = 0; ok && k < cs.n; k++) {
        const Chain *c = &cs.c[k];
        if (c->dead || c->n < 2 || !build_prog(f, &cs, (int)k, &b[n_b].p)) continue;
        if (f->cpu && !amp_fused_prog_f32_arith(b[n_b].p.code, b[n_b].p.n_instr, b[n_b].p.in_dt, b[n_b].p.n_in))
            continue;
        b[n_b].chain = (int)k;
        b[n_b++].last = c->members[c->n - 1];
    }
    ok = ok && fuse_groups(f, &cs, b, n_b, group);
    free(group), free(b), free(cs.c), free(cs.of);
    return ok ? AMP_OK : AMP_ERR_INTERNAL;
}
