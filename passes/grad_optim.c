/* The optimizers `ampc grad` appends (grad_train.c): SGD, SGD with momentum and Adam(W),
 * with torch.optim's arithmetic in plain ONNX ops, as a new training_info whose
 * update_bindings give every parameter and every state tensor its new value. The state
 * (momentum buffers, Adam's two moments, Adam's int64 step count) are zero-filled
 * initializers of the main graph, as passes/ort_import.c makes them: session state that
 * checkpoints save and the loss_scale pass gates like the parameters. */
#include <stdio.h>
#include <string.h>

#include "ir/builder.h"
#include "passes/grad_parts.h"

enum { K_LR, K_MU, K_WD, K_DECAY, K_B1, K_1B1, K_B2, K_1B2, K_EPS, K_STEP_SIZE, K_BC2_SQRT, K_COUNT };

typedef struct Opt {
    AmpModel *m;
    AmpGraph *g; /* the main graph: parameters, gradients and state */
    AmpBuilder b; /* into the algorithm */
    double k[K_COUNT]; /* the constants' values (the step terms are computed) */
    AmpValue *c[AMP_DT_BFLOAT16 + 1][K_COUNT]; /* per dtype, made on first use */
    AmpStrPair *binds;
    size_t n_binds;
} Opt;

static const char *const k_name[K_COUNT] = {"lr", "momentum", "weight_decay", "decay", "beta1", "one_minus_beta1",
                                            "beta2", "one_minus_beta2", "eps", "step_size", "bias_correction2_sqrt"};

static double or_default(double v, double def) {
    return v > 0 ? v : def;
}

/* Constant k in dtype dt: a scalar, or (the step terms, float32) cast to dt. */
static AmpValue *konst(Opt *x, int k, int dt) {
    if (dt < 0 || dt > AMP_DT_BFLOAT16) {
        amp_builder_fail(&x->b, AMP_ERR_UNSUPPORTED, "grad: a parameter of dtype %s", amp_dtype_name(dt));
        return NULL;
    }
    if (!x->c[dt][k]) {
        if (k == K_STEP_SIZE || k == K_BC2_SQRT)
            x->c[dt][k] = amp_build_cast(&x->b, k_name[k], x->c[AMP_DT_FLOAT][k], dt);
        else
            x->c[dt][k] = amp_build_scalar(&x->b, k_name[k], dt, x->k[k]);
    }
    return x->c[dt][k];
}

/* key <- op(a, b) (op(a) when unary: b NULL), the node's output an algorithm output named
 * "<key>_new" (made unique); returns it. */
static AmpValue *bind(Opt *x, AmpValue *key, const char *op, AmpValue *a, AmpValue *b) {
    /* A NULL key or a: an earlier call failed (the builder has the error, and a b made NULL
     * by such a failure builds nothing either: every call after an error is a no-op). */
    if (!key || !a) return NULL;
    char name[1024];
    snprintf(name, sizeof name, "%s_new", key->name);
    const char *out = amp_graph_lookup(x->g, name) ? amp_graph_unique_name(x->g, name) : name;
    AmpValue *in[2] = {a, b};
    AmpValue *nv = out ? amp_build_end(&x->b, amp_build_start_named(&x->b, op, out, in, b ? 2 : 1, 1)) : NULL;
    if (!out) amp_builder_fail(&x->b, AMP_ERR_INTERNAL, "grad: out of memory");
    if (!nv) return NULL;
    if (!amp_graph_add_output(x->b.g, nv)) {
        amp_builder_fail(&x->b, AMP_ERR_INTERNAL, "grad: out of memory");
        return NULL;
    }
    x->binds[x->n_binds++] = (AmpStrPair){key->name, nv->name};
    return nv;
}

/* A new main-graph initializer "<base>" (made unique) of dtype and shape like, zeros
 * (like NULL: an int64 scalar). */
static AmpValue *zeros(Opt *x, const char *base, const AmpValue *like) {
    AmpTensor *t = amp_arena_calloc(&x->m->arena, 1, sizeof *t);
    const AmpTensor *lt = like ? like->initializer : NULL;
    int dt = like ? like->type.dtype : AMP_DT_INT64;
    size_t bytes = 0;
    if (!t || (like && !lt) || !amp_tensor_expected_bytes(dt, lt ? lt->nelem : 1, &bytes)) goto fail;
    uint8_t *raw = amp_arena_calloc(&x->m->arena, bytes ? bytes : 1, 1);
    if (!raw) goto fail;
    *t = (AmpTensor){.dtype = dt, .has = AMP_TENSOR_HAS_DTYPE | AMP_TENSOR_HAS_RAW, .nelem = lt ? lt->nelem : 1,
                     .raw = {raw, bytes}};
    if (lt && lt->ndims) {
        if (!(t->dims = amp_arena_memdup(&x->m->arena, lt->dims, lt->ndims * sizeof *t->dims))) goto fail;
        t->ndims = lt->ndims;
    }
    const char *name = amp_graph_unique_name(x->g, base);
    AmpValue *v = name ? amp_graph_value(x->g, name) : NULL;
    if (!v || amp_graph_add_initializer(x->g, v, t)) goto fail;
    if (like) v->type = like->type;
    else v->type = (AmpType){.kind = AMP_TYPE_TENSOR, .dtype = AMP_DT_INT64, .rank = 0};
    return v;
fail:
    amp_builder_fail(&x->b, AMP_ERR_INTERNAL, "grad: out of memory (optimizer state for '%s')", base);
    return NULL;
}

/* Adam's step count (state, bound to step + 1) and the terms of torch's bias correction:
 * step_size = lr / (1 - beta1^t), sqrt(1 - beta2^t), in float32. */
static void adam_step(Opt *x) {
    AmpBuilder *b = &x->b;
    AmpValue *step = zeros(x, "step", NULL);
    AmpValue *one = amp_build_scalar(b, "one_i64", AMP_DT_INT64, 1);
    AmpValue *t = amp_build_cast(b, "t", bind(x, step, "Add", step, one), AMP_DT_FLOAT);
    AmpValue *c1 = amp_build_scalar(b, "one", AMP_DT_FLOAT, 1);
    AmpValue *bc1 = amp_build2(b, "Sub", "bias_correction1", c1, amp_build2(b, "Pow", "beta1_t",
                                                                            konst(x, K_B1, AMP_DT_FLOAT), t));
    x->c[AMP_DT_FLOAT][K_STEP_SIZE] = amp_build2(b, "Div", k_name[K_STEP_SIZE], konst(x, K_LR, AMP_DT_FLOAT), bc1);
    AmpValue *bc2 = amp_build2(b, "Sub", "bias_correction2", c1, amp_build2(b, "Pow", "beta2_t",
                                                                            konst(x, K_B2, AMP_DT_FLOAT), t));
    x->c[AMP_DT_FLOAT][K_BC2_SQRT] = amp_build1(b, "Sqrt", k_name[K_BC2_SQRT], bc2);
}

/* torch.optim.Adam / AdamW (foreach=False) for one parameter:
 *   p' = p * (1 - lr wd)                      (AdamW's decoupled decay, when wd > 0)
 *   m' = beta1 m + (1 - beta1) g;  v' = beta2 v + (1 - beta2) g g
 *   p_new = p' - step_size * m' / (sqrt(v') / sqrt(1 - beta2^t) + eps) */
static void adam(Opt *x, AmpValue *p, AmpValue *g) {
    AmpBuilder *b = &x->b;
    int dt = p->type.dtype;
    char base[1024];
    snprintf(base, sizeof base, "%s.exp_avg", p->name);
    AmpValue *m = zeros(x, base, p);
    snprintf(base, sizeof base, "%s.exp_avg_sq", p->name);
    AmpValue *v = zeros(x, base, p);
    AmpValue *p1 = x->k[K_WD] > 0 ? amp_build2(b, "Mul", "decayed", p, konst(x, K_DECAY, dt)) : p;
    AmpValue *m1 = bind(x, m, "Add", amp_build2(b, "Mul", "m_old", konst(x, K_B1, dt), m),
                        amp_build2(b, "Mul", "m_grad", konst(x, K_1B1, dt), g));
    AmpValue *gg = amp_build2(b, "Mul", "v_grad", amp_build2(b, "Mul", "v_grad1", konst(x, K_1B2, dt), g), g);
    AmpValue *v1 = bind(x, v, "Add", amp_build2(b, "Mul", "v_old", konst(x, K_B2, dt), v), gg);
    AmpValue *den = amp_build2(b, "Div", "v_corrected", amp_build1(b, "Sqrt", "v_sqrt", v1), konst(x, K_BC2_SQRT, dt));
    den = amp_build2(b, "Add", "denom", den, konst(x, K_EPS, dt));
    AmpValue *upd = amp_build2(b, "Mul", "update", konst(x, K_STEP_SIZE, dt), amp_build2(b, "Div", "ratio", m1, den));
    bind(x, p, "Sub", p1, upd);
}

/* torch.optim.SGD (dampening 0, not Nesterov) for one parameter:
 *   g' = g + wd p;  buf' = mu buf + g' (momentum only);  p_new = p - lr buf' */
static void sgd(Opt *x, AmpValue *p, AmpValue *g, bool momentum) {
    AmpBuilder *b = &x->b;
    int dt = p->type.dtype;
    if (x->k[K_WD] > 0)
        g = amp_build2(b, "Add", "grad_decayed", g, amp_build2(b, "Mul", "decay", konst(x, K_WD, dt), p));
    AmpValue *buf = NULL;
    if (momentum) {
        char base[1024];
        snprintf(base, sizeof base, "%s.momentum_buffer", p->name);
        buf = zeros(x, base, p);
        g = bind(x, buf, "Add", amp_build2(b, "Mul", "buf_old", konst(x, K_MU, dt), buf), g);
    }
    bind(x, p, "Sub", p, amp_build2(b, "Mul", "step", konst(x, K_LR, dt), g));
}

AmpCode amp_grad_add_optimizer(AmpModel *m, const AmpGradOptions *o, const AmpGradParam *ps, size_t n,
                               const AmpGradState *state, size_t n_state, AmpGradSummary *sum, AmpStatus *st) {
    static const char *const names[] = {"sgd", "momentum", "adam"};
    int kind = o->optimizer == AMP_GRAD_OPT_MOMENTUM ? 1 : o->optimizer == AMP_GRAD_OPT_ADAM ? 2 : 0;
    size_t per = kind == 2 ? 3 : kind == 1 ? 2 : 1; /* bindings per parameter */
    AmpTrainingInfo *ti = amp_arena_calloc(&m->arena, m->n_training + 1, sizeof *ti);
    Opt x = {.m = m, .g = m->graph, .binds = amp_arena_calloc(&m->arena, n * per + n_state + 1, sizeof(AmpStrPair))};
    AmpGraph *alg = amp_graph_new(m, m->graph);
    if (!ti || !x.binds || !alg) return amp_fail(st, AMP_ERR_INTERNAL, "grad: out of memory");
    if (m->n_training) memcpy(ti, m->training, m->n_training * sizeof *ti);
    char name[32], prefix[32];
    snprintf(name, sizeof name, "ampc_grad_%s", names[kind]);
    snprintf(prefix, sizeof prefix, "%s/", names[kind]);
    const char *pre = amp_arena_memdup(&m->arena, prefix, strlen(prefix) + 1);
    if (!(alg->name = amp_arena_memdup(&m->arena, name, strlen(name) + 1)) || !pre)
        return amp_fail(st, AMP_ERR_INTERNAL, "grad: out of memory");
    amp_builder_init(&x.b, alg, pre);
    double lr = or_default(o->lr, kind == 2 ? 1e-3 : 0.01), wd = o->weight_decay > 0 ? o->weight_decay : 0;
    double k[K_COUNT] = {[K_LR] = lr, [K_MU] = or_default(o->momentum, 0.9), [K_WD] = wd, [K_DECAY] = 1 - lr * wd,
                         [K_B1] = or_default(o->beta1, 0.9), [K_B2] = or_default(o->beta2, 0.999),
                         [K_EPS] = or_default(o->eps, 1e-8)};
    k[K_1B1] = 1 - k[K_B1], k[K_1B2] = 1 - k[K_B2];
    memcpy(x.k, k, sizeof k);
    if (kind == 2) adam_step(&x);
    for (size_t i = 0; i < n && amp_builder_ok(&x.b); i++) {
        if (kind == 2) adam(&x, ps[i].param, ps[i].grad);
        else sgd(&x, ps[i].param, ps[i].grad, kind == 1);
    }
    for (size_t i = 0; i < n_state && amp_builder_ok(&x.b); i++) /* --train-mode: as the forward left them */
        bind(&x, state[i].init, "Identity", state[i].next, NULL);
    AmpCode rc = amp_builder_status(&x.b, st);
    if (rc) return rc;
    ti[m->n_training] = (AmpTrainingInfo){.algorithm = alg, .n_update_bindings = x.n_binds,
                                          .update_bindings = x.binds};
    m->training = ti;
    m->n_training++;
    sum->n_nodes += x.b.n_nodes;
    sum->n_state = x.n_binds - n - n_state;
    return AMP_OK;
}
