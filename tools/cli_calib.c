/* `ampc calibrate MODEL [--inputs DIR]... [--steps N] [--backend B] -o STATS`: runs the FP32
 * graph (on CUDA where present, else the CPU: --backend as `ampc run`) over sample inputs (each --inputs DIR in the conformance layout; random
 * inputs shaped by the model without one) and records, per float value of the main graph,
 * its largest |x|, the shares of its non-zero elements below float16's smallest normal and
 * below what rounds to zero, and NaN/inf seen; per MatMul/Gemm/Conv/Reduce* node its
 * reduction length. A training graph takes N steps, and its backward values (those
 * computed from the seed <loss>_grad) are judged at the loss scale the loss_scale pass
 * starts with. The file's format is passes/calib.h's (docs/calibration.md). */
#include "tools/cli_calib.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes/calib.h"
#include "tools/cli_options.h"
#include "runtime/observe.h"
#include "passes/options.h"
#include "tools/cli_say.h"
#include "tools/cli_values.h"

/* What one value has shown so far. */
typedef struct Acc {
    double max_abs;
    uint64_t count, nonzero, sub, zero, nonfinite;
    uint64_t seen_run; /* run number + 1 when a graph input was last counted */
    bool grad, used;
    bool seed; /* the backward seed: 1 by definition, and its readers stay fp32 */
} Acc;

typedef struct Calib {
    AmpGraph *g;
    Acc *acc;          /* per value id of g */
    int64_t *reduce;   /* per node id: the deepest reduction seen (0: none) */
    size_t n_node_ids;
    double scale;      /* applied to backward values */
    uint64_t run;
} Calib;

static void count(Calib *c, const AmpValue *v, const AmpBuf *b) {
    Acc *a = &c->acc[v->id];
    double s = a->grad ? c->scale : 1.0;
    const float *x = b->data;
    for (uint64_t i = 0; i < b->nelem; i++) {
        double ax = fabs((double)x[i]);
        if (!isfinite(ax)) {
            a->nonfinite++;
            continue;
        }
        if (ax > a->max_abs) a->max_abs = ax;
        if (ax == 0) continue;
        a->nonzero++;
        a->sub += ax * s < AMP_CALIB_F16_MIN_NORMAL;
        a->zero += ax * s < AMP_CALIB_F16_ZERO;
    }
    a->count += b->nelem;
    a->used = true;
}

static AmpCode record(Calib *c, AmpExec *e, const AmpValue *v, AmpStatus *st) {
    if (!v || v->graph != c->g || v->type.kind != AMP_TYPE_TENSOR || !amp_dtype_is_float(v->type.dtype) ||
        c->acc[v->id].seed)
        return AMP_OK;
    AmpBuf b;
    if (amp_exec_value_f32(e, v, &b, st)) { /* not held (an output left out): nothing to see */
        *st = (AmpStatus){0};
        return AMP_OK;
    }
    count(c, v, &b);
    amp_buf_free(&b);
    return AMP_OK;
}

/* The reduction length of n from its inputs' shapes in this run (0: not a reduction). */
static int64_t reduction(AmpExec *e, const AmpNode *n) {
    const AmpBuf *a = n->n_inputs > 0 && n->inputs[0] ? amp_exec_value(e, n->inputs[0]) : NULL;
    const AmpBuf *w = n->n_inputs > 1 && n->inputs[1] ? amp_exec_value(e, n->inputs[1]) : NULL;
    if (!a) return 0;
    switch (n->op) {
    case AMP_OP_MatMul: return a->rank ? a->dims[a->rank - 1] : 0;
    case AMP_OP_Gemm: {
        const AmpAttr *t = amp_node_attr(n, "transA");
        return a->rank == 2 ? a->dims[t && t->i ? 0 : 1] : 0;
    }
    case AMP_OP_Conv: {
        int64_t k = 1;
        for (int d = 1; w && d < w->rank; d++) k *= w->dims[d];
        return w ? k : 0;
    }
    default: break;
    }
    const char *t = n->op_type ? n->op_type : "";
    const AmpBuf *y = n->n_outputs && n->outputs[0] ? amp_exec_value(e, n->outputs[0]) : NULL;
    if (strncmp(t, "Reduce", 6) == 0 && (!n->domain || !*n->domain) && y && y->nelem)
        return (int64_t)(a->nelem / y->nelem);
    return 0;
}

static AmpCode hook(void *ctx, AmpExec *e, const AmpNode *n, AmpStatus *st) {
    Calib *c = ctx;
    AmpCode rc = AMP_OK;
    for (int k = 0; k < n->n_inputs && !rc; k++) { /* graph inputs, once per run */
        const AmpValue *v = n->inputs[k];
        if (!v || v->graph != c->g || v->producer || v->initializer || !(v->flags & AMP_VALUE_INPUT)) continue;
        if (c->acc[v->id].seen_run == c->run + 1) continue;
        c->acc[v->id].seen_run = c->run + 1;
        rc = record(c, e, v, st);
    }
    for (int k = 0; k < n->n_outputs && !rc; k++) rc = record(c, e, n->outputs[k], st);
    int64_t len = reduction(e, n);
    if (n->id < c->n_node_ids && len > c->reduce[n->id]) c->reduce[n->id] = len;
    return rc;
}

/* Backward values: everything computed from the seed <loss>_grad; without a seed (a graph
 * made otherwise), values named *_grad. */
static void mark_grads(Calib *c, const char *loss) {
    char seed[1024];
    snprintf(seed, sizeof seed, "%s_grad", loss ? loss : "");
    AmpValue *s = loss ? amp_graph_lookup(c->g, seed) : NULL;
    if (!s) {
        for (size_t i = 0; i < c->g->n_values; i++) {
            const char *nm = c->g->values[i]->name;
            size_t l = strlen(nm);
            c->acc[i].grad = l > 5 && strcmp(nm + l - 5, "_grad") == 0;
        }
        return;
    }
    c->acc[s->id].grad = c->acc[s->id].seed = true;
    for (AmpNode *n = c->g->first; n; n = n->next) { /* topological order */
        bool from = false;
        for (int k = 0; k < n->n_inputs && !from; k++)
            from = n->inputs[k] && n->inputs[k]->graph == c->g && c->acc[n->inputs[k]->id].grad;
        for (int k = 0; from && k < n->n_outputs; k++)
            if (n->outputs[k]) c->acc[n->outputs[k]->id].grad = true;
    }
}

static AmpCode build_stats(const Calib *c, AmpCalibStats *s, AmpStatus *st) {
    size_t n = 0, r = 0;
    for (size_t i = 0; i < c->g->n_values; i++) n += c->acc[i].used;
    for (AmpNode *x = c->g->first; x; x = x->next) r += x->id < c->n_node_ids && c->reduce[x->id] > 0;
    s->v = calloc(n + 1, sizeof *s->v);
    s->r = calloc(r + 1, sizeof *s->r);
    if (!s->v || !s->r) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    for (size_t i = 0; i < c->g->n_values; i++) {
        const Acc *a = &c->acc[i];
        if (!a->used) continue;
        AmpCalibValue *v = &s->v[s->n_v++];
        *v = (AmpCalibValue){.name = strdup(c->g->values[i]->name), .max_abs = a->max_abs, .nonfinite = a->nonfinite,
                             .count = a->count, .grad = a->grad,
                             .sub_share = a->nonzero ? (double)a->sub / (double)a->nonzero : 0,
                             .zero_share = a->nonzero ? (double)a->zero / (double)a->nonzero : 0};
        if (!v->name) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    }
    for (AmpNode *x = c->g->first; x; x = x->next) {
        if (x->id >= c->n_node_ids || c->reduce[x->id] <= 0) continue;
        /* A node without a name (ONNX allows it; many exporters write none) is named by
         * what it writes, so the line reads back ("reduce LENGTH NODE" needs a NODE). */
        char unnamed[512];
        const char *key = x->name && *x->name ? x->name : unnamed;
        if (key == unnamed)
            snprintf(unnamed, sizeof unnamed, "(unnamed %s writing %s)", x->op_type ? x->op_type : "node",
                     x->n_outputs && x->outputs[0] && x->outputs[0]->name ? x->outputs[0]->name : "nothing");
        s->r[s->n_r] = (AmpCalibReduce){.node = strdup(key), .length = c->reduce[x->id]};
        if (!s->r[s->n_r++].node) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    }
    return amp_calib_index(s, st);
}

static bool write_stats(void *ctx, FILE *f) {
    return amp_calib_write(ctx, f);
}

static void print_line(void *ctx, const char *line) {
    (void)ctx;
    printf("%s\n", line);
}

/* What the file says in brief: values beyond the default threshold, the deepest
 * reduction, NaN/inf seen; for training, the gradients that underflow. */
static void summarize(const AmpCalibStats *s, const AmpModel *m, bool training) {
    size_t over = 0, nonfinite = 0;
    const AmpCalibValue *top = NULL;
    for (size_t i = 0; i < s->n_v; i++) {
        const AmpCalibValue *v = &s->v[i];
        if (v->grad) continue;
        over += v->max_abs > AMP_CALIB_DEFAULT_MAX;
        nonfinite += v->nonfinite > 0;
        if (!top || v->max_abs > top->max_abs) top = v;
    }
    const AmpCalibReduce *deep = NULL;
    for (size_t i = 0; i < s->n_r; i++)
        if (!deep || s->r[i].length > deep->length) deep = &s->r[i];
    printf("calibrate: %llu %s%s, %zu values recorded; largest |x| %.3g ('%s'); %zu value%s beyond %g (kept fp32 by "
           "--calibration)", (unsigned long long)s->runs, training ? "training step" : "run", s->runs == 1 ? "" : "s", s->n_v,
           top ? top->max_abs : 0.0, top ? top->name : "", over, over == 1 ? "" : "s", AMP_CALIB_DEFAULT_MAX);
    if (nonfinite) printf("; %zu value%s had NaN/inf in FP32", nonfinite, nonfinite == 1 ? "" : "s");
    if (deep) printf("; deepest reduction %lld ('%s')", (long long)deep->length, deep->node);
    printf("\n");
    if (training && !amp_calib_underflow(s, m, 8, print_line, NULL))
        printf("calibrate: no gradient underflows at loss scale %g\n", s->loss_scale);
}

/* One run (inference) or training step per input set. */
static AmpCode run_all(CalibArgs *ca, AmpSession *s, Calib *c, bool training, AmpStatus *st) {
    AmpMode mode = training ? AMP_MODE_TRAIN : AMP_MODE_RUN;
    long sets = ca->n_dirs ? ca->n_dirs : 1;
    long runs = training || !ca->n_dirs ? ca->run.steps * sets : sets;
    size_t n_out = amp_session_output_count(s, mode);
    AmpTensorView *outs = calloc(n_out + 1, sizeof *outs);
    if (!outs) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    AmpCode rc = AMP_OK;
    for (long k = 0; k < runs && !rc; k++, c->run++) {
        RunArgs ra = ca->run;
        ra.inputs = ca->n_dirs ? ca->dirs[k % sets] : NULL;
        ra.seed = (ca->run.seed ? ca->run.seed : 1) + (uint64_t)k; /* fresh random data each run */
        RunInputs in = {0};
        rc = ampc_run_inputs(&ra, s, mode, &in, st);
        if (!rc)
            rc = training ? amp_session_train_step(s, in.t, in.n, NULL, n_out, outs, st)
                          : amp_session_run(s, in.t, in.n, NULL, n_out, outs, st);
        for (size_t i = 0; !rc && i < n_out; i++) amp_tensor_view_free(&outs[i]);
        ampc_run_inputs_free(&in);
    }
    free(outs);
    return rc;
}

int ampc_cmd_calibrate(CalibArgs *ca) {
    if (!ca->out) return ampc_usage_error("calibrate: give -o STATS, the statistics file to write");
    AmpStatus st = {AMP_OK, ""};
    AmpSessionOptions so = {.backend = ca->run.backend, .amp_auto = "0", .seed = ca->run.seed, .no_fuse = true};
    AmpSession *s = NULL;
    AmpCode rc = amp_session_open(ca->run.model, &so, &s, &st);
    if (rc) {
        ampc_say("%s", st.msg);
        return rc;
    }
    int loss = amp_session_find_loss(s, ca->run.loss, &st);
    bool training = loss >= 0 || amp_session_has_training_info(s);
    AmpModel *m = amp_session_model(s);
    Calib c = {.g = m->graph, .scale = training ? (ca->loss_scale > 0 ? ca->loss_scale : 65536.0) : 1.0};
    for (AmpNode *x = c.g->first; x; x = x->next)
        if (x->id >= c.n_node_ids) c.n_node_ids = x->id + 1;
    c.acc = calloc(c.g->n_values + 1, sizeof *c.acc);
    c.reduce = calloc(c.n_node_ids + 1, sizeof *c.reduce);
    AmpCalibStats stats = {.loss_scale = c.scale};
    if (loss == -2) rc = st.code;
    else if (!c.acc || !c.reduce) rc = amp_fail(&st, AMP_ERR_INTERNAL, "out of memory");
    if (!rc && training) {
        AmpIoInfo info;
        amp_session_output_info(s, AMP_MODE_TRAIN, (size_t)(loss >= 0 ? loss : 0), &info);
        mark_grads(&c, loss >= 0 ? info.name : NULL);
    }
    if (!rc) {
        amp_session_set_hook(s, hook, &c);
        rc = run_all(ca, s, &c, training, &st);
        stats.runs = c.run;
    }
    if (!rc) rc = build_stats(&c, &stats, &st);
    if (!rc) rc = amp_output_write(ca->out, write_stats, &stats, &st);
    if (!rc) summarize(&stats, m, training);
    else ampc_say("%s", st.msg);
    for (size_t i = 0; i < stats.n_v; i++) free(stats.v[i].name);
    for (size_t i = 0; i < stats.n_r; i++) free(stats.r[i].node);
    free(stats.v), free(stats.r), free(stats.index);
    free(c.acc), free(c.reduce);
    amp_session_close(s);
    return rc;
}

int ampc_parse_calib_value(int val, const char *arg, CalibArgs *c) {
    switch (val) {
    case OPT_INPUTS:
        if (!arg[0]) return ampc_usage_error("--inputs: DIR is an empty path");
        if (c->n_dirs == AMPC_CALIB_MAX_DIRS) return ampc_usage_error("--inputs: at most %d folders", AMPC_CALIB_MAX_DIRS);
        c->dirs[c->n_dirs++] = arg;
        return 0;
    case OPT_OUTPUT: c->out = arg; return 0;
    case OPT_LOSS_SCALE_INIT: { /* checked as the convert command checks it (passes/options.c) */
        AmpOptions o = {0};
        int rc = ampc_flag_table("loss-scale-init", val, arg, &o);
        c->loss_scale = o.loss_scale_init;
        return rc;
    }
    case OPT_TOP: {
        uint64_t n = 0;
        int rc = ampc_flag_whole(val, arg, &n);
        if (!rc) c->top = (long)n;
        return rc;
    }
    default: return ampc_parse_run_value(val, arg, &c->run);
    }
}
