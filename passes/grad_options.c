/* `ampc grad`'s options' one table (grad_options.h): spellings, ranges and fields, so that the
 * command's flags and the C API's keywords (the Python package's) accept and refuse the same
 * values with the same message. */
#include "passes/grad_options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/front.h"
#include "passes/options.h"

struct AmpGradFlag {
    const char *name;    /* the command's flag without "--" */
    const char *keyword; /* the C API's and Python's name */
    const char *expect;  /* what a refused value's message says is expected; "nothing": no value */
    bool (*set)(AmpGradArgs *g, const AmpGradFlag *d, const char *v, AmpStatus *st);
    /* A real-valued row: its range (an open end excludes its bound) and field. */
    double lo, hi;
    bool lo_open, hi_open;
    size_t at; /* offsetof(AmpGradOptions, the double) */
};

static bool is(const char *s, const char *a) {
    return strcmp(s, a) == 0;
}

/* ---- setters ------------------------------------------------------------------------ */

static bool set_loss(AmpGradArgs *g, const AmpGradFlag *d, const char *v, AmpStatus *st) {
    (void)d, (void)st;
    if (is(v, "cross-entropy")) g->opt.loss = AMP_GRAD_LOSS_CROSS_ENTROPY, g->opt.loss_name = NULL;
    else if (is(v, "mse")) g->opt.loss = AMP_GRAD_LOSS_MSE, g->opt.loss_name = NULL;
    else if (!v[0]) return false;
    else g->opt.loss = AMP_GRAD_LOSS_OUTPUT, g->opt.loss_name = v;
    return true;
}

/* A name (an output's, an input's), at offset d->at of AmpGradOptions. */
static bool set_name(AmpGradArgs *g, const AmpGradFlag *d, const char *v, AmpStatus *st) {
    (void)st;
    if (!v[0]) return false;
    *(const char **)((char *)&g->opt + d->at) = v;
    return true;
}

static bool set_class_axis(AmpGradArgs *g, const AmpGradFlag *d, const char *v, AmpStatus *st) {
    (void)d, (void)st;
    if (!is(v, "1") && !is(v, "-1")) return false;
    g->opt.class_axis = is(v, "1") ? 1 : -1;
    return true;
}

static bool set_optimizer(AmpGradArgs *g, const AmpGradFlag *d, const char *v, AmpStatus *st) {
    (void)d, (void)st;
    if (is(v, "sgd")) g->opt.optimizer = AMP_GRAD_OPT_SGD;
    else if (is(v, "momentum")) g->opt.optimizer = AMP_GRAD_OPT_MOMENTUM;
    else if (is(v, "adam")) g->opt.optimizer = AMP_GRAD_OPT_ADAM;
    else return false;
    return true;
}

static bool set_real(AmpGradArgs *g, const AmpGradFlag *d, const char *v, AmpStatus *st) {
    (void)st;
    return amp_parse_real(v, d->lo, d->lo_open, d->hi, d->hi_open, (double *)((char *)&g->opt + d->at));
}

static bool set_freeze(AmpGradArgs *g, const AmpGradFlag *d, const char *v, AmpStatus *st) {
    (void)d;
    if (!v[0]) return false;
    const char **f = realloc(g->freeze, (g->n_freeze + 1) * sizeof *f);
    if (!f) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory"), false;
    g->freeze = f;
    g->freeze[g->n_freeze++] = v;
    g->opt.freeze = g->freeze;
    g->opt.n_freeze = g->n_freeze;
    return true;
}

static bool set_train_mode(AmpGradArgs *g, const AmpGradFlag *d, const char *v, AmpStatus *st) {
    (void)d, (void)v, (void)st;
    g->opt.train_mode = true;
    return true;
}

/* ---- the table ---------------------------------------------------------------------- */

#define AT(field) offsetof(AmpGradOptions, field)
#define REAL(lo, lo_open, hi, hi_open, field) set_real, lo, hi, lo_open, hi_open, AT(field)
#define BETWEEN_0_1 "a number between 0 and 1"
static const AmpGradFlag FLAGS[] = {
    {"loss", "loss", "cross-entropy, mse or an output's name", set_loss, 0, 0, false, false, 0},
    {"loss-output", "loss_output", "an output's name", set_name, 0, 0, false, false, AT(output)},
    {"labels", "labels", "an input's name", set_name, 0, 0, false, false, AT(labels)},
    {"class-axis", "class_axis", "1 or -1", set_class_axis, 0, 0, false, false, 0},
    {"optimizer", "optimizer", "sgd, momentum or adam", set_optimizer, 0, 0, false, false, 0},
    /* A learning rate past 1e6 is a typo, not a choice, whichever command takes it. */
    {"lr", "lr", "a learning rate above 0, up to 1e6", REAL(0, true, 1e6, false, lr)},
    {"momentum", "momentum", BETWEEN_0_1, REAL(0, true, 1, true, momentum)},
    {"beta1", "beta1", BETWEEN_0_1, REAL(0, true, 1, true, beta1)},
    {"beta2", "beta2", BETWEEN_0_1, REAL(0, true, 1, true, beta2)},
    {"eps", "eps", "a number above 0, up to 1e30", REAL(0, true, 1e30, false, eps)},
    {"weight-decay", "weight_decay", "a number from 0, up to 1e30", REAL(0, false, 1e30, false, weight_decay)},
    {"freeze", "freeze", "a glob of initializer names, e.g. 'encoder.*'", set_freeze, 0, 0, false, false, 0},
    {"train-mode", "train_mode", "nothing", set_train_mode, 0, 0, false, false, 0},
};
#undef AT
#undef REAL
#undef BETWEEN_0_1
enum { N_FLAGS = sizeof FLAGS / sizeof FLAGS[0] };

const AmpGradFlag *amp_grad_flag_at(size_t i) {
    return i < N_FLAGS ? &FLAGS[i] : NULL;
}

const AmpGradFlag *amp_grad_flag_find(const char *name) {
    for (size_t i = 0; name && i < N_FLAGS; i++)
        if (is(FLAGS[i].name, name) || is(FLAGS[i].keyword, name)) return &FLAGS[i];
    return NULL;
}

const char *amp_grad_flag_name(const AmpGradFlag *d) {
    return d->name;
}

const char *amp_grad_flag_keyword(const AmpGradFlag *d) {
    return d->keyword;
}

bool amp_grad_flag_takes_value(const AmpGradFlag *d) {
    return !is(d->expect, "nothing");
}

AmpCode amp_grad_arg_set(AmpGradArgs *g, const AmpGradFlag *d, const char *label, const char *v, AmpStatus *st) {
    AmpStatus own = {AMP_OK, ""}; /* the setter's own message, if it made one */
    if (d->set(g, d, v ? v : "", &own)) return AMP_OK;
    if (own.code != AMP_OK) return amp_fail(st, own.code, "%s", own.msg);
    return amp_option_refuse(st, label, v ? v : "", d->expect);
}

AmpCode amp_grad_real(const char *flag, const char *label, const char *v, double *out, AmpStatus *st) {
    const AmpGradFlag *d = amp_grad_flag_find(flag);
    if (!d || d->set != set_real) return amp_fail(st, AMP_ERR_INTERNAL, "%s: no real-valued grad option", label);
    if (amp_parse_real(v, d->lo, d->lo_open, d->hi, d->hi_open, out)) return AMP_OK;
    return amp_option_refuse(st, label, v, d->expect);
}

/* Row `flag` as the caller's front names it, with a value (NULL: alone): --optimizer adam,
 * optimizer="adam". */
static const char *say(const char *flag, const char *value, char *buf, size_t n) {
    if (amp_front() == AMP_FRONT_CLI) snprintf(buf, n, "--%s%s%s", flag, value ? " " : "", value ? value : "");
    else snprintf(buf, n, "%s%s%s%s", amp_grad_flag_find(flag)->keyword, value ? "=\"" : "", value ? value : "",
                  value ? "\"" : "");
    return buf;
}
#define SAY(flag, value) say((flag), (value), (char[64]){0}, 64)

AmpCode amp_grad_args_check(const AmpGradArgs *g, AmpStatus *st) {
    const AmpGradOptions *o = &g->opt;
    if (o->momentum > 0 && o->optimizer != AMP_GRAD_OPT_MOMENTUM)
        return amp_fail(st, AMP_ERR_USAGE, "%s is for %s", SAY("momentum", NULL), SAY("optimizer", "momentum"));
    if ((o->beta1 > 0 || o->beta2 > 0 || o->eps > 0) && o->optimizer != AMP_GRAD_OPT_ADAM)
        return amp_fail(st, AMP_ERR_USAGE, "%s, %s and %s are for %s", SAY("beta1", NULL), SAY("beta2", NULL),
                        SAY("eps", NULL), SAY("optimizer", "adam"));
    return AMP_OK;
}

void amp_grad_args_free(AmpGradArgs *g) {
    free(g->freeze);
    memset(g, 0, sizeof *g);
}

const char *amp_grad_summary_text(const AmpGradSummary *sum, const AmpGradOptions *o, char *buf, size_t n) {
    static const char *const opt_names[] = {"SGD", "momentum", "Adam"};
    size_t k = 0;
#define ADD(...) (k += (size_t)snprintf(buf + k, k < n ? n - k : 0, __VA_ARGS__))
    ADD("loss '%s', %zu parameters with gradients and %s%s updates", sum->loss, sum->n_params,
        opt_names[o->optimizer < 3 ? o->optimizer : 0], o->weight_decay > 0 ? " (weight decay)" : "");
    if (sum->n_state) ADD(", %zu optimizer state tensors", sum->n_state);
    if (sum->n_frozen) ADD(", %zu frozen", sum->n_frozen);
    if (sum->n_unused) ADD(", %zu the loss does not depend on (not bound)", sum->n_unused);
    if (sum->n_running) ADD(", %zu running statistics bound (--train-mode)", sum->n_running);
    if (sum->opset_to != sum->opset_from)
        ADD(", ai.onnx opset %lld -> %lld", (long long)sum->opset_from, (long long)sum->opset_to);
    ADD("; %zu nodes added", sum->n_nodes);
#undef ADD
    return buf;
}
