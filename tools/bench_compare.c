/* `ampc bench MODEL --compare [--train] [--plot FILE]` (issue 21): MODEL opened twice on
 * the same backend, as it is (FP32) and rewritten by AMP_AUTO (the AMP_* variables say
 * how), fed the same inputs, their runs (or training steps) timed interleaved so that a
 * machine's drift touches both alike; then a table: median and min time, throughput, peak
 * memory, the GEMMs' achieved TFLOP/s, and AMP's speed-up; optionally a PNG of every
 * timed run. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ampc/ampc.h"
#include "runtime/observe.h"
#include "tools/plot.h"
#include "tools/run.h"

enum { FP32, AMP, N_SIDES };
static const char *const SIDE[N_SIDES] = {"FP32", "AMP"};

typedef struct Side {
    AmpSession *s;
    AmpTensorView *outs;
    size_t n_out;
    const char *loss; /* training: the one output asked for (ampc_bench_loss), or NULL: all */
    double *ms;  /* per timed run, in run order */
    double flops; /* of the GEMMs and convolutions of one run, from the shapes met */
    bool flops_known;
} Side;

/* ---- FLOPs from the shapes a run meets -------------------------------------------------- */

/* Dims of v in this run (the executor's buffer; else the model's static type). */
static int dims_of(AmpExec *e, const AmpValue *v, int64_t dims[AMP_TENSOR_MAX_RANK]) {
    const AmpBuf *b = v ? amp_exec_value(e, v) : NULL;
    if (b) {
        memcpy(dims, b->dims, sizeof b->dims[0] * (size_t)b->rank);
        return b->rank;
    }
    if (!v || v->type.kind != AMP_TYPE_TENSOR || v->type.rank < 0 || v->type.rank > AMP_TENSOR_MAX_RANK) return -1;
    for (int i = 0; i < v->type.rank; i++)
        if ((dims[i] = v->type.dims[i].value) < 0) return -1;
    return v->type.rank;
}

static double numel(const int64_t *d, int rank) {
    double n = 1;
    for (int i = 0; i < rank; i++) n *= (double)d[i];
    return n;
}

typedef struct FlopCount {
    double flops;
    bool unknown; /* a GEMM or convolution whose shapes could not be read */
} FlopCount;

/* The executor's hook: adds 2 multiply-adds' worth per MAC of each MatMul, Gemm, Conv (and
 * ConvEpilogue) and ConvTranspose (the count amp_node_flops gives from static shapes, here
 * from the run's). */
static AmpCode count_flops(void *ctx, AmpExec *e, const AmpNode *n, AmpStatus *st) {
    (void)st;
    FlopCount *fc = ctx;
    int64_t a[AMP_TENSOR_MAX_RANK], w[AMP_TENSOR_MAX_RANK], y[AMP_TENSOR_MAX_RANK];
    int ra, rw, ry;
    switch (n->op) {
    case AMP_OP_MatMul:
    case AMP_OP_Gemm: {
        ra = n->n_inputs > 0 ? dims_of(e, n->inputs[0], a) : -1;
        ry = n->n_outputs > 0 ? dims_of(e, n->outputs[0], y) : -1;
        if (ra < 1 || ry < 0) break;
        int k_axis = n->op == AMP_OP_Gemm && amp_node_attr_int(n, "transA", 0) ? 0 : ra - 1;
        fc->flops += 2 * numel(y, ry) * (double)a[k_axis];
        return AMP_OK;
    }
    case AMP_OP_Conv:
    case AMP_OP_Ampc_ConvEpilogue: /* a Conv with the Relu or Add the CPU's plan fused into it */
    case AMP_OP_ConvTranspose: {
        ra = n->n_inputs > 0 ? dims_of(e, n->inputs[0], a) : -1;
        rw = n->n_inputs > 1 ? dims_of(e, n->inputs[1], w) : -1;
        ry = n->n_outputs > 0 ? dims_of(e, n->outputs[0], y) : -1;
        if (rw < 3 || ry < 0 || ra < 0 || w[0] <= 0) break;
        double per = numel(w, rw) / (double)w[0]; /* C/group * kernel (M/group * kernel) */
        fc->flops += 2 * (n->op != AMP_OP_ConvTranspose ? numel(y, ry) : numel(a, ra)) * per;
        return AMP_OK;
    }
    default: return AMP_OK;
    }
    fc->unknown = true;
    return AMP_OK;
}

/* ---- the runs ------------------------------------------------------------------------- */

static AmpCode step(const RunArgs *a, Side *x, const RunInputs *in, double *ms, AmpStatus *st) {
    double t0 = ampc_now_ms();
    const char *const *names = x->loss ? &x->loss : NULL;
    AmpCode rc = a->train ? amp_session_train_step(x->s, in->t, in->n, names, x->n_out, x->outs, st)
                          : amp_session_run(x->s, in->t, in->n, NULL, x->n_out, x->outs, st);
    if (ms) *ms = ampc_now_ms() - t0;
    for (size_t k = 0; k < x->n_out; k++) amp_tensor_view_free(&x->outs[k]);
    return rc;
}

static AmpCode open_side(const RunArgs *a, int side, Side *x, AmpStatus *st) {
    AmpSessionOptions so = ampc_session_options(a);
    so.amp_auto = side == AMP ? "1" : "0";
    AmpCode rc = amp_session_open(a->model, &so, &x->s, st);
    if (rc) return rc;
    AmpMode mode = a->train ? AMP_MODE_TRAIN : AMP_MODE_RUN;
    x->n_out = amp_session_output_count(x->s, mode);
    x->loss = a->train ? ampc_bench_loss(a, x->s) : NULL;
    if (x->loss) x->n_out = 1;
    x->outs = calloc(x->n_out + 1, sizeof *x->outs);
    x->ms = calloc((size_t)a->iters, sizeof *x->ms);
    if (!x->outs || !x->ms) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    if (side == AMP) {
        AmpSessionStats ss;
        amp_session_stats(x->s, &ss);
        if (!ss.amp_applied && ss.amp_precision_why && ss.amp_precision_why[0])
            return amp_fail(st, AMP_ERR_USAGE,
                            "--compare: precision auto keeps the model float32 here (%s); set AMP_PRECISION to "
                            "compare a 16-bit type anyway", ss.amp_precision_why);
        if (!ss.amp_applied)
            return amp_fail(st, AMP_ERR_USAGE, "--compare: AMP_AUTO's rewrite did not apply to the model");
    }
    return AMP_OK;
}

/* One untimed run with the FLOP-counting hook (the first warm-up run of each side). */
static AmpCode count_run(const RunArgs *a, Side *x, const RunInputs *in, AmpStatus *st) {
    FlopCount fc = {0};
    amp_session_set_hook(x->s, count_flops, &fc);
    AmpCode rc = step(a, x, in, NULL, st);
    amp_session_set_hook(x->s, NULL, NULL);
    x->flops = fc.flops, x->flops_known = !fc.unknown;
    return rc;
}

/* ---- the table ------------------------------------------------------------------------- */

static double median(const double *v, size_t n) {
    double *c = malloc(n * sizeof *c);
    if (!c) return NAN;
    memcpy(c, v, n * sizeof *c);
    qsort(c, n, sizeof *c, ampc_cmp_double);
    double m = ampc_median_sorted(c, n);
    free(c);
    return m;
}

static double least(const double *v, size_t n) {
    double m = v[0];
    for (size_t i = 1; i < n; i++) m = v[i] < m ? v[i] : m;
    return m;
}

static void print_table(const RunArgs *a, Side *x, int64_t batch) {
    size_t n = (size_t)a->iters;
    const char *what = a->train ? "training step" : "inference run";
    AmpSessionStats st[N_SIDES];
    for (int k = 0; k < N_SIDES; k++) amp_session_stats_sized(x[k].s, &st[k], sizeof st[k]);
    printf("bench %s --compare: %ld %s%s of each timed after %ld warm-up, interleaved; backend %s\n", a->model,
           a->iters, what, a->iters == 1 ? "" : "s", a->warmup, st[FP32].backend);
    printf("%-5s %12s %12s %12s %14s %16s %13s\n", "", "median ms", "min ms", a->train ? "steps/s" : "runs/s",
           "samples/s", "peak memory", "GEMM TFLOP/s");
    double med[N_SIDES], peak[N_SIDES];
    for (int k = 0; k < N_SIDES; k++) {
        med[k] = median(x[k].ms, n);
        size_t bytes = st[k].device_bytes ? st[k].device_bytes : st[k].peak_bytes;
        peak[k] = (double)bytes;
        char tf[32] = "n/a";
        if (x[k].flops_known && x[k].flops > 0) snprintf(tf, sizeof tf, "%.4g", x[k].flops / (med[k] * 1e-3) / 1e12);
        char mem[32];
        if (peak[k] < (1 << 20)) snprintf(mem, sizeof mem, "%.1f KiB", peak[k] / 1024);
        else snprintf(mem, sizeof mem, "%.1f MiB", peak[k] / (1 << 20));
        printf("%-5s %12.4f %12.4f %12.2f %14.2f %16s %13s\n", SIDE[k], med[k], least(x[k].ms, n), 1e3 / med[k],
               1e3 * (double)batch / med[k], mem, tf);
    }
    for (int k = 0; k < N_SIDES; k++)
        if (x[k].flops_known) printf("%s: %.6g MFLOP per %s in MatMul, Gemm, Conv and ConvTranspose\n", SIDE[k],
                                     x[k].flops / 1e6, a->train ? "step" : "run");
    printf("AMP speed-up over FP32: %.2fx (medians); peak memory AMP/FP32: %.2fx (%s)\n", med[FP32] / med[AMP],
           peak[FP32] > 0 ? peak[AMP] / peak[FP32] : NAN,
           st[FP32].device_bytes ? "device memory the sessions hold" : "intermediates + state");
    if (st[AMP].fallback_nodes || st[FP32].fallback_nodes)
        printf("fallback: FP32 %zu node%s, AMP %zu node%s ran on the CPU (%s)\n", st[FP32].fallback_nodes,
               st[FP32].fallback_nodes == 1 ? "" : "s", st[AMP].fallback_nodes,
               st[AMP].fallback_nodes == 1 ? "" : "s", st[AMP].fallback_ops);
}

/* The batch: the first dim of the first input (1 for a scalar or no input). */
static int64_t batch_of(const RunInputs *in) {
    return in->n && in->t[0].rank > 0 && in->t[0].dims[0] > 0 ? in->t[0].dims[0] : 1;
}

int ampc_cmd_bench_compare(const RunArgs *a) {
    AmpStatus st = {AMP_OK, ""};
    Side x[N_SIDES] = {{0}};
    RunInputs in = {0};
    AmpCode rc = open_side(a, FP32, &x[FP32], &st);
    if (!rc) rc = open_side(a, AMP, &x[AMP], &st);
    if (!rc) rc = ampc_run_inputs(a, x[FP32].s, a->train ? AMP_MODE_TRAIN : AMP_MODE_RUN, &in, &st);
    for (int k = 0; !rc && k < N_SIDES; k++) rc = count_run(a, &x[k], &in, &st);
    for (long i = 1; !rc && i < a->warmup; i++)
        for (int k = 0; !rc && k < N_SIDES; k++) rc = step(a, &x[k], &in, NULL, &st);
    /* Interleaved, each side first every other time. */
    for (long i = 0; !rc && i < a->iters; i++)
        for (int j = 0; !rc && j < N_SIDES; j++) {
            int k = (int)(i + j) % N_SIDES;
            rc = step(a, &x[k], &in, &x[k].ms[i], &st);
        }
    int code = AMP_OK;
    if (rc) {
        code = ampc_run_fail(&st, rc, a->model);
    } else {
        print_table(a, x, batch_of(&in));
        if (a->plot) {
            PlotSeries s[N_SIDES] = {{"FP32", x[FP32].ms, (size_t)a->iters, {31, 119, 180}},
                                     {"AMP", x[AMP].ms, (size_t)a->iters, {255, 127, 14}}};
            if (!ampc_plot_png(a->plot, s, N_SIDES, "MS")) {
                st = (AmpStatus){AMP_OK, ""};
                code = ampc_run_fail(&st, amp_fail(&st, AMP_ERR_INTERNAL, "--plot %s: %s", a->plot, strerror(errno)),
                                     NULL);
            } else {
                printf("plot: %s (time per %s, each timed run in order)\n", a->plot, a->train ? "step" : "run");
            }
        }
        if (!code) code = ampc_stdout_done();
    }
    for (int k = 0; k < N_SIDES; k++) {
        free(x[k].outs), free(x[k].ms);
        amp_session_close(x[k].s);
    }
    ampc_run_inputs_free(&in);
    return code;
}
