/* onnxruntime-training's artifact set as one standard ONNX training model (passes.h,
 * amp_ort_import). onnxruntime splits a training step over three files and its own
 * runtime: training_model.onnx computes the loss and adds each parameter's gradient into
 * an InPlaceAccumulatorV2 buffer (parameters and buffers are graph inputs its Module
 * feeds), optimizer_model.onnx holds one com.microsoft AdamWOptimizer over tensor
 * sequences, and the checkpoint holds the parameters' values. The import makes of them
 * what docs/design.md's training-graph contract describes:
 *
 * - every parameter named in the checkpoint becomes an initializer with its value (it is
 *   no longer a graph input);
 * - the accumulators go, with their buffers, their updated-flag outputs and
 *   lazy_reset_grad: each step applies its own gradients (no accumulation across steps);
 * - a training_info whose algorithm is the optimizer written out per parameter in
 *   standard ops: SGDOptimizerV2 as w - lr g, or AdamW,
 *   exactly as onnxruntime's CPU kernel computes it (adam_mode 0, PyTorch: decay, then the
 *   bias-corrected moments; adam_mode 1, Hugging Face: bias correction folded into the
 *   learning rate, decay after), with update_binding for each parameter, its two moments
 *   (`<param>.momentum0`, `<param>.momentum1`, from the checkpoint when it has them, else
 *   zeros) and the step (onnxruntime's optimizer counts it the same way);
 * - when the model is already loss-scaled (it has amp_found_inf), every binding is gated
 *   on it, as the loss_scale pass gates updates: a skipped step changes nothing (the
 *   loss-scale state's own training_info, if any, stays and runs first).
 *
 * The result converts and runs like any training model: `ampc` scales its loss, `ampc run`
 * trains it, checkpoints hold its state. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ort_checkpoint.h"
#include "passes/options.h"
#include "passes/pass.h"
#include "passes/training.h"

#define BUFFER_SUFFIX "_grad.accumulation.buffer"
#define PREFIX "ort_optimizer/"
#define DEFAULT_LR 0.001 /* onnxruntime's optimizer, when the checkpoint has none */
/* The two files as the caller gave them: `--optimizer`, or the session's ort_optimizer. */
#define OPTIMIZER AMP_OPT_SAY("optimizer", NULL)
#define CHECKPOINT AMP_OPT_SAY("checkpoint", NULL)

typedef struct Param {
    AmpValue *p;      /* the parameter (main graph) */
    AmpValue *grad;   /* what its accumulator added: the gradient */
    AmpNode *acc;     /* the accumulator */
    const AmpOrtParam *ck;
} Param;

typedef struct Imp {
    AmpModel *m;
    AmpGraph *g, *a; /* main graph, algorithm */
    AmpStatus *st;
    Param *params;
    size_t n;
    bool sgd; /* SGDOptimizerV2 (w -= lr g), else AdamWOptimizer with these attributes: */
    float alpha, beta, eps, wd;
    int64_t mode, correct_bias;
    AmpValue *lr, *step, *found;
    AmpValue *c_alpha, *c_1_alpha, *c_beta, *c_1_beta, *c_eps, *lr_wd, *ac, *bc, *lr_c;
    AmpStrPair *bind;
    size_t n_bind;
    size_t n_nodes;
} Imp;

static AmpCode oom(Imp *x) {
    return amp_fail(x->st, AMP_ERR_INTERNAL, "ort import: out of memory");
}

static bool ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

static const char *cat3(Imp *x, const char *a, const char *b, const char *c) {
    size_t na = strlen(a), nb = strlen(b), nc = strlen(c);
    char *s = amp_arena_alloc(&x->m->arena, na + nb + nc + 1);
    if (!s) return NULL;
    memcpy(s, a, na);
    memcpy(s + na, b, nb);
    memcpy(s + na + nb, c, nc + 1);
    return s;
}

static void scalar_type(AmpValue *v, int dtype) {
    v->type = (AmpType){.kind = AMP_TYPE_TENSOR, .dtype = dtype, .rank = 0};
}

/* A tensor of the model's arena: dtype, dims of `like` (NULL: a scalar), raw bytes copied
 * from `data` (NULL: zeros). */
static AmpTensor *new_tensor(Imp *x, int dtype, const AmpTensor *like, const void *data, size_t bytes) {
    AmpTensor *t = amp_arena_calloc(&x->m->arena, 1, sizeof *t);
    uint8_t *raw = amp_arena_calloc(&x->m->arena, bytes ? bytes : 1, 1);
    if (!t || !raw) return NULL;
    if (data) memcpy(raw, data, bytes);
    t->dtype = dtype;
    t->has = AMP_TENSOR_HAS_DTYPE | AMP_TENSOR_HAS_RAW;
    t->nelem = like ? like->nelem : 1;
    if (like && like->ndims) {
        if (!(t->dims = amp_arena_memdup(&x->m->arena, like->dims, like->ndims * sizeof *t->dims))) return NULL;
        t->ndims = like->ndims;
    }
    t->raw = (AmpBytes){raw, bytes};
    return t;
}

/* v's type from tensor t. */
static bool type_from(Imp *x, AmpValue *v, const AmpTensor *t) {
    AmpDim *d = t->ndims ? amp_arena_alloc(&x->m->arena, t->ndims * sizeof *d) : NULL;
    if (t->ndims && !d) return false;
    for (size_t i = 0; i < t->ndims; i++) d[i] = (AmpDim){t->dims[i], NULL};
    v->type = (AmpType){.kind = AMP_TYPE_TENSOR, .dtype = t->dtype, .rank = (int)t->ndims, .dims = d};
    return true;
}

/* A new main-graph initializer named from `base` holding t. */
static AmpValue *state(Imp *x, const char *base, AmpTensor *t) {
    const char *name = t ? amp_graph_unique_name(x->g, base) : NULL;
    AmpValue *v = name ? amp_graph_value(x->g, name) : NULL;
    if (!v || !type_from(x, v, t) || amp_graph_add_initializer(x->g, v, t)) return NULL;
    return v;
}

/* ---- removing graph inputs and outputs ------------------------------------------------- */

static void drop_io(AmpValueInfoList *l, const AmpValue *v, unsigned flag, AmpValue *vv) {
    size_t k = 0;
    for (size_t i = 0; i < l->n; i++)
        if (l->items[i].value != v) l->items[k++] = l->items[i];
    l->n = k;
    vv->flags &= ~flag;
}

static void drop_input(Imp *x, AmpValue *v) {
    drop_io(&x->g->inputs, v, AMP_VALUE_INPUT, v);
}

static void drop_output(Imp *x, AmpValue *v) {
    drop_io(&x->g->outputs, v, AMP_VALUE_OUTPUT, v);
}

/* ---- finding the parts ----------------------------------------------------------------- */

static AmpCode find_params(Imp *x, const AmpOrtCheckpoint *ck) {
    size_t cap = 0;
    for (AmpNode *n = x->g->first; n; n = n->next) cap += n->op == AMP_OP_Ms_InPlaceAccumulatorV2;
    if (!cap)
        return amp_fail(x->st, AMP_ERR_INPUT,
                        "%s: the model has no com.microsoft InPlaceAccumulatorV2 node, so it is not an "
                        "onnxruntime-training training_model.onnx (the optimizer model applies to those)",
                        OPTIMIZER);
    x->params = amp_arena_calloc(&x->m->arena, cap, sizeof *x->params);
    if (!x->params) return oom(x);
    for (AmpNode *n = x->g->first; n; n = n->next) {
        if (n->op != AMP_OP_Ms_InPlaceAccumulatorV2) continue;
        AmpValue *buf = n->n_inputs >= 2 ? n->inputs[0] : NULL, *grad = n->n_inputs >= 2 ? n->inputs[1] : NULL;
        if (!buf || !grad || !(buf->flags & AMP_VALUE_INPUT) || !ends_with(buf->name, BUFFER_SUFFIX))
            return amp_fail(x->st, AMP_ERR_INPUT,
                            "%s: accumulator '%s' does not add into a graph input named "
                            "'<parameter>" BUFFER_SUFFIX "', as onnxruntime-training writes them", OPTIMIZER,
                            n->name ? n->name : "");
        const char *pname = amp_arena_strndup(&x->m->arena, buf->name, strlen(buf->name) - strlen(BUFFER_SUFFIX));
        if (!pname) return oom(x);
        AmpValue *p = amp_graph_lookup(x->g, pname);
        if (!p || p->graph != x->g || !(p->flags & AMP_VALUE_INPUT))
            return amp_fail(x->st, AMP_ERR_INPUT, "%s: accumulator '%s' is for parameter '%s', which is not "
                            "an input of the model", OPTIMIZER, n->name ? n->name : "", pname);
        const AmpOrtParam *cp = amp_ort_checkpoint_find(ck, pname);
        if (!cp)
            return amp_fail(x->st, AMP_ERR_INPUT, "%s: no value for parameter '%s'", CHECKPOINT, pname);
        if (!cp->requires_grad)
            return amp_fail(x->st, AMP_ERR_INPUT, "%s: parameter '%s' is frozen there, but the model "
                            "computes its gradient", CHECKPOINT, pname);
        x->params[x->n++] = (Param){.p = p, .grad = grad, .acc = n, .ck = cp};
    }
    return AMP_OK;
}

static AmpCode read_optimizer(Imp *x, const AmpModel *opt) {
    const AmpNode *node = NULL;
    for (const AmpNode *n = opt->graph->first; n; n = n->next) {
        if ((n->op == AMP_OP_Ms_AdamWOptimizer || n->op == AMP_OP_Ms_SGDOptimizerV2) && !node) {
            node = n;
            continue;
        }
        return amp_fail(x->st, AMP_ERR_UNSUPPORTED,
                        "%s: node '%s' (%s%s%s): ampc imports an optimizer model of one com.microsoft "
                        "AdamWOptimizer or SGDOptimizerV2 node, as onnxruntime-training's generator writes them",
                        OPTIMIZER,
                        n->name ? n->name : "", n->domain && *n->domain ? n->domain : "",
                        n->domain && *n->domain ? ":" : "", n->op_type ? n->op_type : "?");
    }
    if (!node)
        return amp_fail(x->st, AMP_ERR_INPUT, "%s: the optimizer model has no AdamWOptimizer or "
                        "SGDOptimizerV2 node", OPTIMIZER);
    x->sgd = node->op == AMP_OP_Ms_SGDOptimizerV2;
    /* onnxruntime's optimizer feeds them by these names */
    static const char *const adamw[6] = {"learning_rate", "step", "params", "gradients", "first_order_moments",
                                         "second_order_moments"};
    static const char *const sgd[3] = {"learning_rate", "params", "gradients"};
    const char *const *want = x->sgd ? sgd : adamw;
    int n_want = x->sgd ? 3 : 6;
    for (int i = 0; i < n_want; i++)
        if (node->n_inputs <= i || !node->inputs[i] || strcmp(node->inputs[i]->name, want[i]) != 0 ||
            !(node->inputs[i]->flags & AMP_VALUE_INPUT))
            return amp_fail(x->st, AMP_ERR_INPUT, "%s: %s's input %d is not the graph input '%s' "
                            "(onnxruntime's optimizer feeds them by these names)",
                            OPTIMIZER, node->op_type, i, want[i]);
    if (node->n_inputs > n_want && node->inputs[n_want])
        return amp_fail(x->st, AMP_ERR_UNSUPPORTED, "%s: %s's update_signal input is not supported", OPTIMIZER,
                        node->op_type);
    if (x->sgd) return AMP_OK;
    /* The schema's defaults (onnxruntime's training_op_defs). */
    x->alpha = amp_node_attr_float(node, "alpha", 0.9f);
    x->beta = amp_node_attr_float(node, "beta", 0.999f);
    x->eps = amp_node_attr_float(node, "epsilon", 1e-8f);
    x->wd = amp_node_attr_float(node, "weight_decay", 0.0f);
    x->mode = amp_node_attr_int(node, "adam_mode", 0);
    x->correct_bias = amp_node_attr_int(node, "correct_bias", 1);
    if (x->mode != 0 && x->mode != 1)
        return amp_fail(x->st, AMP_ERR_INPUT, "%s: AdamWOptimizer adam_mode %lld (0 or 1)", OPTIMIZER,
                        (long long)x->mode);
    return AMP_OK;
}

/* ---- the algorithm ---------------------------------------------------------------------- */

/* out = op(in...) appended to the algorithm; out a new value named from `what` with v's
 * type (or a float32 scalar when like is NULL). */
static AmpValue *op(Imp *x, const char *opname, const char *what, const AmpValue *like, int n_in, AmpValue *a,
                    AmpValue *b) {
    const char *name = cat3(x, PREFIX, what, "");
    AmpValue *out = name ? amp_graph_new_value(x->a, name) : NULL;
    AmpNode *n = out ? amp_node_new(x->a, "", opname, name, n_in, 1) : NULL;
    if (!n || amp_node_set_input(n, 0, a) || (n_in > 1 && amp_node_set_input(n, 1, b))) return NULL;
    if (like) out->type = like->type;
    else scalar_type(out, AMP_DT_FLOAT);
    amp_node_set_output(n, 0, out);
    amp_node_append(x->a, n);
    x->n_nodes++;
    return out;
}

static AmpValue *constant(Imp *x, const char *what, float v) {
    const char *name = cat3(x, PREFIX, what, "");
    AmpValue *out = name ? amp_graph_new_value(x->a, name) : NULL;
    AmpNode *n = out ? amp_node_new(x->a, "", "Constant", name, 0, 1) : NULL;
    AmpAttr *at = n ? amp_node_add_attr(n, "value", AMP_ATTR_TENSOR) : NULL;
    if (!at || !(at->t = new_tensor(x, AMP_DT_FLOAT, NULL, &v, sizeof v))) return NULL;
    scalar_type(out, AMP_DT_FLOAT);
    amp_node_set_output(n, 0, out);
    amp_node_append(x->a, n);
    x->n_nodes++;
    return out;
}

static AmpCode bind(Imp *x, AmpValue *key, AmpValue *value);

/* The step's and the learning rate's terms, once. */
static AmpCode common(Imp *x) {
    int64_t one_i = 1;
    const char *n1 = cat3(x, PREFIX, "one_i64", "");
    AmpValue *one = n1 ? amp_graph_new_value(x->a, n1) : NULL;
    AmpNode *c = one ? amp_node_new(x->a, "", "Constant", n1, 0, 1) : NULL;
    AmpAttr *at = c ? amp_node_add_attr(c, "value", AMP_ATTR_TENSOR) : NULL;
    if (!at || !(at->t = new_tensor(x, AMP_DT_INT64, NULL, &one_i, sizeof one_i))) return oom(x);
    scalar_type(one, AMP_DT_INT64);
    amp_node_set_output(c, 0, one);
    amp_node_append(x->a, c);
    /* onnxruntime's optimizer runs with step + 1 and keeps it when the update is made. */
    AmpValue *step1 = op(x, "Add", "step_new", x->step, 2, x->step, one);
    const char *cn = cat3(x, PREFIX, "step_float", "");
    AmpValue *stepf = cn ? amp_graph_new_value(x->a, cn) : NULL;
    AmpNode *cast = stepf && step1 ? amp_node_new_cast(x->a, cn, step1, stepf, AMP_DT_FLOAT) : NULL;
    if (!cast) return oom(x);
    scalar_type(stepf, AMP_DT_FLOAT);
    amp_node_append(x->a, cast);
    if (x->sgd) return bind(x, x->step, step1);
    x->c_alpha = constant(x, "alpha", x->alpha);
    x->c_1_alpha = constant(x, "one_minus_alpha", 1.0f - x->alpha);
    x->c_beta = constant(x, "beta", x->beta);
    x->c_1_beta = constant(x, "one_minus_beta", 1.0f - x->beta);
    x->c_eps = constant(x, "epsilon", x->eps);
    AmpValue *c1 = constant(x, "one", 1.0f), *cwd = constant(x, "weight_decay", x->wd);
    if (!x->c_alpha || !x->c_1_alpha || !x->c_beta || !x->c_1_beta || !x->c_eps || !c1 || !cwd) return oom(x);
    if (x->correct_bias) { /* 1 - alpha^step, 1 - beta^step */
        AmpValue *pa = op(x, "Pow", "alpha_pow", NULL, 2, x->c_alpha, stepf);
        AmpValue *pb = op(x, "Pow", "beta_pow", NULL, 2, x->c_beta, stepf);
        x->ac = pa ? op(x, "Sub", "alpha_correction", NULL, 2, c1, pa) : NULL;
        x->bc = pb ? op(x, "Sub", "beta_correction", NULL, 2, c1, pb) : NULL;
    } else
        x->ac = c1, x->bc = c1;
    x->lr_wd = op(x, "Mul", "lr_times_weight_decay", NULL, 2, x->lr, cwd);
    if (!x->ac || !x->bc || !x->lr_wd) return oom(x);
    if (x->mode == 1) { /* lr * sqrt(bc) / ac */
        AmpValue *s = op(x, "Sqrt", "sqrt_beta_correction", NULL, 1, x->bc, NULL);
        AmpValue *r = s ? op(x, "Div", "bias_correction", NULL, 2, s, x->ac) : NULL;
        x->lr_c = r ? op(x, "Mul", "lr_corrected", NULL, 2, x->lr, r) : NULL;
        if (!x->lr_c) return oom(x);
    }
    return bind(x, x->step, step1);
}

/* update_binding key <- value, through an algorithm output; gated on amp_found_inf when
 * the model is loss-scaled. */
static AmpCode bind(Imp *x, AmpValue *key, AmpValue *value) {
    if (x->found) {
        const char *name = cat3(x, PREFIX "gate/", key->name, "");
        AmpValue *out = name ? amp_graph_new_value(x->a, name) : NULL;
        AmpNode *w = out ? amp_node_new(x->a, "", "Where", name, 3, 1) : NULL;
        if (!w || amp_node_set_input(w, 0, x->found) || amp_node_set_input(w, 1, key) ||
            amp_node_set_input(w, 2, value))
            return oom(x);
        out->type = key->type;
        amp_node_set_output(w, 0, out);
        amp_node_append(x->a, w);
        x->n_nodes++;
        value = out;
    }
    if (!amp_graph_add_output(x->a, value)) return oom(x);
    x->bind[x->n_bind++] = (AmpStrPair){key->name, value->name};
    return AMP_OK;
}

/* One parameter's AdamW update, as onnxruntime's CPU kernel orders the arithmetic. */
static AmpCode adamw(Imp *x, const Param *pa, AmpValue *m1, AmpValue *m2) {
    AmpValue *w = pa->p, *g = pa->grad;
    const char *n = w->name;
#define OP(opn, what, a, b) op(x, opn, cat3(x, n, "/", what), w, (b) ? 2 : 1, a, b)
    AmpValue *ma = OP("Mul", "m1_decayed", m1, x->c_alpha);
    AmpValue *ga = OP("Mul", "m1_grad", g, x->c_1_alpha);
    AmpValue *m1n = ma && ga ? OP("Add", "momentum0_new", ma, ga) : NULL;
    AmpValue *vb = OP("Mul", "m2_decayed", m2, x->c_beta);
    AmpValue *gb = OP("Mul", "m2_grad", g, x->c_1_beta);
    AmpValue *gg = gb ? OP("Mul", "m2_grad_sq", gb, g) : NULL;
    AmpValue *m2n = vb && gg ? OP("Add", "momentum1_new", vb, gg) : NULL;
    if (!m1n || !m2n) return oom(x);
    AmpValue *wn;
    if (x->mode == 0) { /* decay; denom = sqrt(v / bc) + eps; w -= (lr m) / (ac denom) */
        AmpValue *d = OP("Mul", "decay", w, x->lr_wd);
        AmpValue *w1 = d ? OP("Sub", "decayed", w, d) : NULL;
        AmpValue *vc = OP("Div", "v_corrected", m2n, x->bc);
        AmpValue *sq = vc ? OP("Sqrt", "v_sqrt", vc, NULL) : NULL;
        AmpValue *den = sq ? OP("Add", "denom", sq, x->c_eps) : NULL;
        AmpValue *num = OP("Mul", "lr_m", m1n, x->lr);
        AmpValue *den2 = den ? OP("Mul", "denom_corrected", den, x->ac) : NULL;
        AmpValue *u = num && den2 ? OP("Div", "update", num, den2) : NULL;
        wn = w1 && u ? OP("Sub", "new", w1, u) : NULL;
    } else { /* denom = sqrt(v) + eps; w -= lr_c m / denom; then decay */
        AmpValue *sq = OP("Sqrt", "v_sqrt", m2n, NULL);
        AmpValue *den = sq ? OP("Add", "denom", sq, x->c_eps) : NULL;
        AmpValue *num = OP("Mul", "lr_m", m1n, x->lr_c);
        AmpValue *u = num && den ? OP("Div", "update", num, den) : NULL;
        AmpValue *w1 = u ? OP("Sub", "updated", w, u) : NULL;
        AmpValue *d = w1 ? OP("Mul", "decay", w1, x->lr_wd) : NULL;
        wn = d ? OP("Sub", "new", w1, d) : NULL;
    }
#undef OP
    if (!wn) return oom(x);
    AmpCode rc = bind(x, w, wn);
    if (!rc) rc = bind(x, m1, m1n);
    if (!rc) rc = bind(x, m2, m2n);
    return rc;
}

/* One parameter's SGD update: w - lr g (onnxruntime's SGDOptimizerV2). */
static AmpCode sgd(Imp *x, const Param *pa) {
    AmpValue *w = pa->p;
    const char *n = w->name;
    AmpValue *u = op(x, "Mul", cat3(x, n, "/", "update"), w, 2, x->lr, pa->grad);
    AmpValue *wn = u ? op(x, "Sub", cat3(x, n, "/", "new"), w, 2, w, u) : NULL;
    return wn ? bind(x, w, wn) : oom(x);
}

/* ---- the import ------------------------------------------------------------------------- */

static AmpCode rewrite(Imp *x, const AmpOrtCheckpoint *ck, double lr_override) {
    AmpGraph *g = x->g;
    /* Frozen parameters the model reads become initializers too. */
    for (size_t i = 0; i < ck->n_params; i++) {
        const AmpOrtParam *cp = &ck->params[i];
        AmpValue *p = amp_graph_lookup(g, cp->value->name);
        if (!p || p->graph != g || !(p->flags & AMP_VALUE_INPUT))
            return amp_fail(x->st, AMP_ERR_INPUT, "%s: parameter '%s' is not an input of the model (another "
                            "model's checkpoint?)", CHECKPOINT, cp->value->name);
        if (p->type.kind == AMP_TYPE_TENSOR && p->type.dtype && p->type.dtype != cp->value->dtype)
            return amp_fail(x->st, AMP_ERR_INPUT, "%s: parameter '%s' is %s there, %s in the model", CHECKPOINT,
                            p->name, amp_dtype_name(cp->value->dtype), amp_dtype_name(p->type.dtype));
        if (p->type.rank >= 0 && p->type.dims) {
            bool ok = (size_t)p->type.rank == cp->value->ndims;
            for (int d = 0; ok && d < p->type.rank; d++)
                ok = p->type.dims[d].value < 0 || p->type.dims[d].value == cp->value->dims[d];
            if (!ok)
                return amp_fail(x->st, AMP_ERR_INPUT, "%s: parameter '%s' has another shape there than in "
                                "the model", CHECKPOINT, p->name);
        }
        drop_input(x, p);
        if (amp_graph_add_initializer(g, p, cp->value)) return oom(x);
        if (!type_from(x, p, cp->value)) return oom(x);
    }
    /* The accumulators, their buffers, flags and reset input go. */
    AmpValue *reset = NULL;
    for (size_t i = 0; i < x->n; i++) {
        AmpNode *acc = x->params[i].acc;
        AmpValue *buf = acc->inputs[0];
        if (acc->n_inputs > 2 && acc->inputs[2]) reset = acc->inputs[2];
        for (int o = 0; o < acc->n_outputs; o++) {
            AmpValue *v = acc->outputs[o];
            if (!v) continue;
            if (v->n_uses)
                return amp_fail(x->st, AMP_ERR_UNSUPPORTED, "%s: '%s', an output of accumulator '%s', is read "
                                "by other nodes", OPTIMIZER, v->name, acc->name ? acc->name : "");
            if (v->flags & AMP_VALUE_OUTPUT) drop_output(x, v);
        }
        amp_node_delete(acc);
        if (!buf->n_uses) drop_input(x, buf);
    }
    if (reset && !reset->n_uses && (reset->flags & AMP_VALUE_INPUT)) drop_input(x, reset);

    /* The optimizer's state: learning rate, step, two moments per parameter. */
    float lr = (float)(lr_override > 0 ? lr_override : ck->has_optimizer ? ck->learning_rate : DEFAULT_LR);
    int64_t step = ck->has_optimizer ? ck->step : 0;
    x->lr = state(x, "learning_rate", new_tensor(x, AMP_DT_FLOAT, NULL, &lr, sizeof lr));
    x->step = state(x, "step", new_tensor(x, AMP_DT_INT64, NULL, &step, sizeof step));
    if (!x->lr || !x->step) return oom(x);
    AmpTrainingInfo *ti = amp_arena_grow(&x->m->arena, x->m->training, x->m->n_training, x->m->n_training + 1, sizeof *ti);
    if (!ti) return oom(x);
    x->m->training = ti;
    ti = &ti[x->m->n_training++];
    memset(ti, 0, sizeof *ti);
    if (!(ti->algorithm = x->a = amp_graph_new(x->m, g))) return oom(x);
    x->a->name = "ort_adamw";
    if (!(x->bind = amp_arena_calloc(&x->m->arena, 3 * x->n + 1, sizeof *x->bind))) return oom(x);
    AmpValue *found = amp_graph_lookup(g, AMP_LS_FOUND_INF);
    x->found = found && found->graph == g && (found->flags & AMP_VALUE_OUTPUT) ? found : NULL;
    AmpCode rc = common(x);
    for (size_t i = 0; !rc && x->sgd && i < x->n; i++) rc = sgd(x, &x->params[i]);
    for (size_t i = 0; !rc && !x->sgd && i < x->n; i++) {
        const Param *pa = &x->params[i];
        AmpValue *mo[2];
        for (int k = 0; k < 2 && !rc; k++) {
            const AmpTensor *have = pa->ck->moment[k], *w = pa->ck->value;
            if (have && (have->dtype != AMP_DT_FLOAT || have->nelem != w->nelem))
                return amp_fail(x->st, AMP_ERR_INPUT, "%s: momentum%d of '%s' does not match the parameter", CHECKPOINT,
                                k, pa->p->name);
            size_t bytes = (size_t)w->nelem * sizeof(float);
            AmpTensor *t = new_tensor(x, AMP_DT_FLOAT, w, have ? have->raw.data : NULL, bytes);
            mo[k] = state(x, cat3(x, pa->p->name, k ? ".momentum1" : ".momentum0", ""), t);
            if (!mo[k]) rc = oom(x);
        }
        if (!rc) rc = adamw(x, pa, mo[0], mo[1]);
    }
    if (rc) return rc;
    ti->update_bindings = x->bind;
    ti->n_update_bindings = x->n_bind;
    if (x->m->ir_version < 7) x->m->ir_version = 7; /* training_info: IR version 7 */
    return AMP_OK;
}

AmpCode amp_ort_import(AmpModel *m, const AmpModel *optimizer, const char *checkpoint, double learning_rate,
                       char *summary, size_t summary_len, AmpStatus *st) {
    if (!checkpoint) return amp_fail(st, AMP_ERR_USAGE, "%s needs %s: the parameters' values", OPTIMIZER, CHECKPOINT);
    Imp x = {.m = m, .g = m->graph, .st = st};
    AmpOrtCheckpoint ck;
    AmpCode rc = amp_ort_checkpoint_read(m, checkpoint, &ck, st);
    if (!rc) rc = read_optimizer(&x, optimizer);
    if (!rc) rc = find_params(&x, &ck);
    if (!rc) rc = rewrite(&x, &ck, learning_rate);
    if (!rc) rc = amp_graph_toposort(x.a, st);
    if (rc) return rc;
    if (summary && summary_len) {
        float lr;
        memcpy(&lr, x.lr->initializer->raw.data, sizeof lr);
        char what[32];
        if (x.sgd) snprintf(what, sizeof what, "SGD (");
        else snprintf(what, sizeof what, "AdamW (mode %lld, ", (long long)x.mode);
        snprintf(summary, summary_len,
                 "ort import: %zu parameters from the checkpoint (%zu trained), %slr %g, step %lld%s) "
                 "as %zu standard ops, %zu accumulators removed%s",
                 ck.n_params, x.n, what, (double)lr,
                 (long long)(ck.has_optimizer ? ck.step : 0), ck.has_optimizer ? ", moments from the checkpoint" : "",
                 x.n_nodes, x.n, x.found ? ", updates gated on amp_found_inf" : "");
    }
    return AMP_OK;
}

AmpCode amp_ort_import_files(AmpModel *m, const char *optimizer_path, const char *checkpoint, double learning_rate,
                             char *summary, size_t summary_len, AmpStatus *st) {
    AmpModel *opt = NULL;
    AmpCode rc = amp_model_load_file(optimizer_path, NULL, &opt, st);
    if (rc) {
        amp_status_prefix(st, "%s %s: ", OPTIMIZER, optimizer_path);
        return rc;
    }
    rc = amp_ort_import(m, opt, checkpoint, learning_rate, summary, summary_len, st);
    amp_model_free(opt);
    return rc;
}
