/* Unit tests of the recurrent kernels (kernels/cpu/rnn.c): RNN, GRU and LSTM against a
 * naive per-sequence reference written here from the ONNX equations (double precision),
 * over random small shapes, both layouts, every direction, sequence_lens shorter than
 * the sequence, activations with alpha/beta, clip; 16-bit storage; and the error paths. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/half.h"
#include "tests/kernels/kernel_test_util.h"
#include "kernels/cpu/kernels.h"

enum { K_RNN, K_GRU, K_LSTM };

static AmpModel *model;

static void setup(void) {
    model = amp_model_new();
    cr_assert_not_null(model);
}

static void teardown(void) {
    amp_model_free(model);
}

TestSuite(rnn, .init = setup, .fini = teardown);

/* ---- running one kernel ----------------------------------------------------------- */

static AmpCode run(AmpNode *n, int n_in, const AmpBuf *const *in, int n_out, Outs *o, AmpStatus *st) {
    return kt_run(n, 14, n_in, in, n_out, o, st);
}

/* ---- buffers --------------------------------------------------------------------- */

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint32_t urand(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng >> 33);
}

static float frand(void) { /* [-1, 1) */
    return (float)(urand() & 0xffff) / 32768.0f - 1.0f;
}

static AmpBuf fbuf(int rank, const int64_t *dims, float scale) {
    AmpBuf b = {.dtype = AMP_DT_FLOAT, .rank = rank};
    for (int i = 0; i < rank; i++) b.dims[i] = dims[i];
    b.nelem = amp_shape_nelem(rank, dims);
    float *f = malloc((b.nelem ? b.nelem : 1) * sizeof *f);
    for (uint64_t i = 0; i < b.nelem; i++) f[i] = scale * frand();
    b.data = f;
    return b;
}

/* The same values in float16/bfloat16 storage; `f` is rounded in place to match. */
static AmpBuf to16(AmpBuf *f, int dtype) {
    AmpBuf b = *f;
    b.dtype = dtype;
    b.data = malloc((f->nelem ? f->nelem : 1) * 2);
    if (dtype == AMP_DT_FLOAT16) {
        amp_f32_to_f16_n(b.data, f->data, f->nelem);
        amp_f16_to_f32_n(f->data, b.data, f->nelem);
    } else {
        amp_f32_to_bf16_n(b.data, f->data, f->nelem);
        amp_bf16_to_f32_n(f->data, b.data, f->nelem);
    }
    return b;
}

/* ---- the reference --------------------------------------------------------------- */

typedef struct Act {
    const char *name;
    double alpha, beta;
} Act;

static double ref_act(const Act *a, double x, double clip) {
    if (clip > 0) x = x > clip ? clip : x < -clip ? -clip : x;
    const char *n = a->name;
    if (!strcmp(n, "Sigmoid")) return 1 / (1 + exp(-x));
    if (!strcmp(n, "Tanh")) return tanh(x);
    if (!strcmp(n, "Relu")) return x > 0 ? x : 0;
    if (!strcmp(n, "Affine")) return a->alpha * x + a->beta;
    if (!strcmp(n, "LeakyRelu")) return x >= 0 ? x : a->alpha * x;
    if (!strcmp(n, "ThresholdedRelu")) return x > a->alpha ? x : 0;
    if (!strcmp(n, "ScaledTanh")) return a->alpha * tanh(a->beta * x);
    if (!strcmp(n, "HardSigmoid")) return fmax(0, fmin(1, a->alpha * x + a->beta));
    if (!strcmp(n, "Elu")) return x >= 0 ? x : a->alpha * (exp(x) - 1);
    if (!strcmp(n, "Softsign")) return x / (1 + fabs(x));
    if (!strcmp(n, "Softplus")) return log(1 + exp(x));
    cr_assert_fail("unknown activation %s", n);
    return 0;
}

/* One node's configuration; the inputs are random. */
typedef struct Case {
    int kind, layout, dir; /* dir: 0 forward, 1 reverse, 2 bidirectional */
    int64_t T, N, I, H;
    bool bias, lens, h0, c0, peep;
    const int64_t *len_vals; /* (N) when lens; NULL: random in [0, T] */
    double clip;             /* 0: none */
    bool lbr, input_forget;
    int n_acts;              /* 0: defaults */
    Act acts[6];             /* as the node lists them (alpha/beta written in order) */
    int n_out;
    int dtype;               /* storage of every float input */
} Case;

static const int GATES[] = {1, 3, 4}, NACTS[] = {1, 2, 3};

/* y/yh/yc (double) in the node's output layouts. x...p are the fp32 inputs (NULL = none). */
static void ref_run(const Case *c, const float *x, const float *w, const float *r, const float *bb,
                    const int64_t *lens, const float *h0, const float *c0, const float *p, double *y, double *yh,
                    double *yc) {
    const int64_t T = c->T, N = c->N, I = c->I, H = c->H, G = GATES[c->kind], nd = c->dir == 2 ? 2 : 1;
    const int na = NACTS[c->kind];
    static const char *DEF[3][3] = {{"Tanh"}, {"Sigmoid", "Tanh"}, {"Sigmoid", "Tanh", "Tanh"}};
    memset(y, 0, (size_t)(T * nd * N * H) * sizeof *y);
    double *h = calloc((size_t)H, sizeof *h), *cs = calloc((size_t)H, sizeof *cs), *gt = calloc((size_t)(G * H), sizeof *gt);
    double *hn = calloc((size_t)H, sizeof *hn);
    for (int d = 0; d < nd; d++) {
        Act act[3];
        for (int j = 0; j < na; j++) {
            if (!c->n_acts) act[j] = (Act){DEF[c->kind][j], 0, 0};
            else act[j] = c->acts[c->n_acts == na ? j : d * na + j];
        }
        bool rev = c->dir == 1 || d == 1;
        const float *W = w + d * G * H * I, *R = r + d * G * H * H;
        const float *Wb = bb ? bb + d * 2 * G * H : NULL, *Rb = Wb ? Wb + G * H : NULL, *P = p ? p + d * 3 * H : NULL;
        for (int64_t b = 0; b < N; b++) {
            int64_t hoff = (c->layout ? b * nd + d : d * N + b) * H;
            for (int64_t j = 0; j < H; j++) h[j] = h0 ? h0[hoff + j] : 0, cs[j] = c0 ? c0[hoff + j] : 0;
            int64_t L = lens ? lens[b] : T;
            for (int64_t s = 0; s < L; s++) {
                int64_t t = rev ? L - 1 - s : s;
                const float *xt = x + (c->layout ? b * T + t : t * N + b) * I;
                /* gt[g*H+j] = X·W^T + Wb (+ H·R^T + Rb, except GRU's h gate) */
                for (int64_t gj = 0; gj < G * H; gj++) {
                    double v = Wb ? Wb[gj] : 0;
                    for (int64_t q = 0; q < I; q++) v += (double)xt[q] * W[gj * I + q];
                    if (!(c->kind == K_GRU && gj >= 2 * H)) {
                        if (Rb) v += Rb[gj];
                        for (int64_t q = 0; q < H; q++) v += h[q] * R[gj * H + q];
                    }
                    gt[gj] = v;
                }
                if (c->kind == K_RNN) {
                    for (int64_t j = 0; j < H; j++) hn[j] = ref_act(&act[0], gt[j], c->clip);
                } else if (c->kind == K_GRU) {
                    for (int64_t j = 0; j < H; j++) {
                        double z = ref_act(&act[0], gt[j], c->clip), rr = ref_act(&act[0], gt[H + j], c->clip);
                        double rec = 0, rbh = Rb ? Rb[2 * H + j] : 0;
                        if (c->lbr) {
                            for (int64_t q = 0; q < H; q++) rec += h[q] * R[(2 * H + j) * H + q];
                            rec = rr * (rec + rbh);
                        } else {
                            /* r_q applies to H_q: recompute r for every q */
                            for (int64_t q = 0; q < H; q++) {
                                double rq = ref_act(&act[0], gt[H + q], c->clip);
                                rec += rq * h[q] * R[(2 * H + j) * H + q];
                            }
                            rec += rbh;
                        }
                        double hh = ref_act(&act[1], gt[2 * H + j] + rec, c->clip);
                        hn[j] = (1 - z) * hh + z * h[j];
                    }
                } else {
                    for (int64_t j = 0; j < H; j++) {
                        double gi = gt[j], go = gt[H + j], gf = gt[2 * H + j], gc = gt[3 * H + j];
                        if (P) gi += P[j] * cs[j], gf += P[2 * H + j] * cs[j];
                        double i_ = ref_act(&act[0], gi, c->clip);
                        double f_ = c->input_forget ? 1 - i_ : ref_act(&act[0], gf, c->clip);
                        double cc = ref_act(&act[1], gc, c->clip);
                        cs[j] = f_ * cs[j] + i_ * cc;
                        if (P) go += P[H + j] * cs[j];
                        /* clip bounds the gates' inputs, not Ct's way into h (as onnxruntime) */
                        hn[j] = ref_act(&act[0], go, c->clip) * ref_act(&act[2], cs[j], 0);
                    }
                }
                memcpy(h, hn, (size_t)H * sizeof *h);
                int64_t yoff = (c->layout ? (b * T + t) * nd + d : (t * nd + d) * N + b) * H;
                for (int64_t j = 0; j < H; j++) y[yoff + j] = h[j];
            }
            for (int64_t j = 0; j < H; j++) {
                yh[hoff + j] = L ? h[j] : 0;
                if (yc) yc[hoff + j] = L ? cs[j] : 0;
            }
        }
    }
    free(h), free(cs), free(gt), free(hn);
}

static void expect_close(const AmpBuf *got, const double *want, double atol, double rtol, const char *what) {
    float *f = malloc((got->nelem ? got->nelem : 1) * sizeof *f);
    if (got->dtype == AMP_DT_FLOAT) memcpy(f, got->data, got->nelem * sizeof *f);
    else if (got->dtype == AMP_DT_FLOAT16) amp_f16_to_f32_n(f, got->data, got->nelem);
    else amp_bf16_to_f32_n(f, got->data, got->nelem);
    for (uint64_t i = 0; i < got->nelem; i++) {
        double d = fabs(f[i] - want[i]);
        if (d > atol + rtol * fabs(want[i])) {
            float v = f[i];
            free(f);
            cr_assert_fail("%s[%llu] is %.7g, expected %.7g", what, (unsigned long long)i, v, want[i]);
        }
    }
    free(f);
}

/* Builds the node, runs the kernel and the reference, compares. */
static void check_case(const Case *c) {
    static const char *OPS[] = {"RNN", "GRU", "LSTM"}, *DIRS[] = {"forward", "reverse", "bidirectional"};
    const int64_t T = c->T, N = c->N, I = c->I, H = c->H, G = GATES[c->kind], nd = c->dir == 2 ? 2 : 1;
    int n_in = c->kind == K_LSTM ? 8 : 6, n_out = c->n_out ? c->n_out : (c->kind == K_LSTM ? 3 : 2);
    AmpNode *n = amp_node_new(model->graph, "", OPS[c->kind], "rnn", n_in, n_out);
    cr_assert_not_null(n);
    attr_int(n, "hidden_size", H);
    attr_str(n, "direction", DIRS[c->dir]);
    if (c->layout) attr_int(n, "layout", 1);
    if (c->clip > 0) attr_float(n, "clip", (float)c->clip);
    if (c->lbr) attr_int(n, "linear_before_reset", 1);
    if (c->input_forget) attr_int(n, "input_forget", 1);
    if (c->n_acts) {
        const char *names[6] = {0};
        float al[6] = {0}, be[6] = {0};
        int nal = 0, nbe = 0;
        for (int i = 0; i < c->n_acts; i++) {
            names[i] = c->acts[i].name;
            const char *s = names[i];
            if (!strcmp(s, "Affine") || !strcmp(s, "LeakyRelu") || !strcmp(s, "ThresholdedRelu") ||
                !strcmp(s, "ScaledTanh") || !strcmp(s, "HardSigmoid") || !strcmp(s, "Elu"))
                al[nal++] = (float)c->acts[i].alpha;
            if (!strcmp(s, "Affine") || !strcmp(s, "ScaledTanh") || !strcmp(s, "HardSigmoid"))
                be[nbe++] = (float)c->acts[i].beta;
        }
        attr_strs(n, "activations", c->n_acts, names);
        if (nal) attr_floats(n, "activation_alpha", nal, al);
        if (nbe) attr_floats(n, "activation_beta", nbe, be);
    }

    AmpBuf x = fbuf(3, c->layout ? I64(N, T, I) : I64(T, N, I), 1.0f);
    AmpBuf w = fbuf(3, I64(nd, G * H, I), 0.6f), r = fbuf(3, I64(nd, G * H, H), 0.6f);
    AmpBuf b = fbuf(2, I64(nd, 2 * G * H), 0.5f);
    const int64_t *hd = c->layout ? I64(N, nd, H) : I64(nd, N, H);
    AmpBuf h0 = fbuf(3, hd, 0.8f), c0 = fbuf(3, hd, 0.8f), p = fbuf(2, I64(nd, 3 * H), 0.5f);
    int32_t *lv = malloc((size_t)(N ? N : 1) * sizeof *lv);
    int64_t *lens = malloc((size_t)(N ? N : 1) * sizeof *lens);
    for (int64_t i = 0; i < N; i++) lens[i] = c->len_vals ? c->len_vals[i] : (int64_t)(urand() % (uint32_t)(T + 1)), lv[i] = (int32_t)lens[i];
    AmpBuf sl = {.dtype = AMP_DT_INT32, .rank = 1, .dims = {N}, .nelem = (uint64_t)N, .data = lv};

    AmpBuf *fl[] = {&x, &w, &r, &b, NULL, &h0, &c0, &p};
    AmpBuf st16[8];
    memset(st16, 0, sizeof st16);
    const AmpBuf *in[8] = {&x, &w, &r, c->bias ? &b : NULL, c->lens ? &sl : NULL, c->h0 ? &h0 : NULL,
                           c->c0 ? &c0 : NULL, c->peep ? &p : NULL};
    if (c->dtype && c->dtype != AMP_DT_FLOAT)
        for (int i = 0; i < 8; i++)
            if (fl[i] && in[i]) st16[i] = to16(fl[i], c->dtype), in[i] = &st16[i];

    Outs o;
    AmpStatus st;
    cr_assert_eq(run(n, n_in, in, n_out, &o, &st), AMP_OK, "%s", st.msg);
    double *y = malloc((size_t)(T * nd * N * H + 1) * sizeof *y), *yh = malloc((size_t)(nd * N * H + 1) * sizeof *yh);
    double *yc = malloc((size_t)(nd * N * H + 1) * sizeof *yc);
    ref_run(c, x.data, w.data, r.data, c->bias ? b.data : NULL, c->lens ? lens : NULL, c->h0 ? h0.data : NULL,
            c->c0 ? c0.data : NULL, c->peep ? p.data : NULL, y, yh, c->kind == K_LSTM ? yc : NULL);
    int dt = c->dtype ? c->dtype : AMP_DT_FLOAT;
    double atol = dt == AMP_DT_FLOAT ? 2e-5 : dt == AMP_DT_FLOAT16 ? 2e-3 : 2e-2;
    double rtol = dt == AMP_DT_FLOAT ? 1e-4 : dt == AMP_DT_FLOAT16 ? 4e-3 : 2e-2;
    for (int i = 0; i < n_out; i++) cr_assert_eq(o.b[i].dtype, dt);
    if (c->layout) {
        cr_assert(o.b[0].rank == 4 && o.b[0].dims[0] == N && o.b[0].dims[1] == T && o.b[0].dims[2] == nd &&
                  o.b[0].dims[3] == H);
        if (n_out > 1) cr_assert(o.b[1].dims[0] == N && o.b[1].dims[1] == nd && o.b[1].dims[2] == H);
    } else {
        cr_assert(o.b[0].rank == 4 && o.b[0].dims[0] == T && o.b[0].dims[1] == nd && o.b[0].dims[2] == N &&
                  o.b[0].dims[3] == H);
        if (n_out > 1) cr_assert(o.b[1].dims[0] == nd && o.b[1].dims[1] == N && o.b[1].dims[2] == H);
    }
    expect_close(&o.b[0], y, atol, rtol, "Y");
    if (n_out > 1) expect_close(&o.b[1], yh, atol, rtol, "Y_h");
    if (n_out > 2) expect_close(&o.b[2], yc, atol, rtol, "Y_c");
    outs_free(&o);
    free(y), free(yh), free(yc), free(lens), free(lv);
    for (int i = 0; i < 8; i++) free(st16[i].data);
    free(x.data), free(w.data), free(r.data), free(b.data), free(h0.data), free(c0.data), free(p.data);
}

/* ---- cases ----------------------------------------------------------------------- */

Test(rnn, lstm_bidirectional_short_sequences) {
    Case c = {.kind = K_LSTM, .dir = 2, .T = 5, .N = 4, .I = 3, .H = 4, .bias = true, .lens = true, .h0 = true,
              .c0 = true, .peep = true, .len_vals = I64(5, 2, 0, 3)};
    check_case(&c);
    c.layout = 1;
    check_case(&c);
}

Test(rnn, lstm_reverse_clip_input_forget_activations) {
    Case c = {.kind = K_LSTM, .dir = 1, .layout = 1, .T = 4, .N = 3, .I = 5, .H = 3, .bias = true, .lens = true,
              .peep = true, .len_vals = I64(4, 1, 3), .clip = 0.7, .input_forget = true, .n_acts = 3,
              .acts = {{"HardSigmoid", 0.3, 0.4}, {"ScaledTanh", 1.5, 0.8}, {"Softsign", 0, 0}}};
    check_case(&c);
}

Test(rnn, gru_bidirectional_linear_before_reset) {
    Case c = {.kind = K_GRU, .dir = 2, .layout = 1, .T = 6, .N = 3, .I = 2, .H = 5, .bias = true, .lens = true,
              .h0 = true, .len_vals = I64(6, 3, 1), .lbr = true};
    check_case(&c);
    c.lbr = false;
    check_case(&c);
    c.clip = 0.3;
    check_case(&c);
    c.lbr = true;
    check_case(&c);
}

Test(rnn, gru_per_direction_activations) {
    Case c = {.kind = K_GRU, .dir = 2, .T = 3, .N = 2, .I = 4, .H = 3, .bias = true, .n_acts = 4,
              .acts = {{"Sigmoid", 0, 0}, {"Elu", 0.7, 0}, {"HardSigmoid", 0.25, 0.5}, {"Softplus", 0, 0}}};
    check_case(&c);
}

Test(rnn, rnn_alpha_beta_taken_in_order) {
    /* LeakyRelu takes alpha 0.2; Affine the next alpha (0.5) and the first beta (0.1) */
    Case c = {.kind = K_RNN, .dir = 2, .T = 4, .N = 2, .I = 3, .H = 4, .bias = true, .h0 = true, .n_acts = 2,
              .acts = {{"LeakyRelu", 0.2, 0}, {"Affine", 0.5, 0.1}}};
    check_case(&c);
    c.acts[0] = (Act){"ThresholdedRelu", 0.1, 0};
    c.acts[1] = (Act){"Relu", 0, 0};
    c.layout = 1;
    check_case(&c);
}

Test(rnn, one_activation_set_serves_both_directions) {
    Case c = {.kind = K_LSTM, .dir = 2, .T = 3, .N = 2, .I = 2, .H = 3, .n_acts = 3,
              .acts = {{"Sigmoid", 0, 0}, {"Tanh", 0, 0}, {"Relu", 0, 0}}};
    check_case(&c);
}

Test(rnn, fewer_outputs) {
    Case c = {.kind = K_LSTM, .dir = 0, .T = 3, .N = 2, .I = 2, .H = 3, .bias = true, .n_out = 1};
    check_case(&c);
    c.n_out = 2;
    check_case(&c);
}

Test(rnn, random_shapes) {
    for (int it = 0; it < 60; it++) {
        Case c = {.kind = (int)(urand() % 3), .layout = (int)(urand() % 2), .dir = (int)(urand() % 3),
                  .T = 1 + urand() % 5, .N = 1 + urand() % 4, .I = 1 + urand() % 6, .H = 1 + urand() % 6};
        c.bias = urand() % 2, c.lens = urand() % 2, c.h0 = urand() % 2, c.c0 = urand() % 2, c.peep = urand() % 2;
        c.lbr = urand() % 2, c.input_forget = urand() % 4 == 0;
        if (urand() % 3 == 0) c.clip = 0.2 + (urand() % 4) * 0.2;
        check_case(&c);
    }
}

Test(rnn, float16_and_bfloat16_storage) {
    Case c = {.kind = K_LSTM, .dir = 2, .layout = 1, .T = 4, .N = 3, .I = 3, .H = 4, .bias = true, .lens = true,
              .h0 = true, .c0 = true, .peep = true, .len_vals = I64(4, 2, 3), .dtype = AMP_DT_FLOAT16};
    check_case(&c);
    c.dtype = AMP_DT_BFLOAT16;
    check_case(&c);
    Case g = {.kind = K_GRU, .dir = 1, .T = 5, .N = 2, .I = 4, .H = 3, .bias = true, .dtype = AMP_DT_FLOAT16};
    check_case(&g);
    Case r = {.kind = K_RNN, .dir = 0, .T = 5, .N = 2, .I = 4, .H = 3, .bias = true, .dtype = AMP_DT_BFLOAT16};
    check_case(&r);
}

Test(rnn, empty_sequence) {
    /* seq_length 0: Y is empty and Y_h is zero (every sequence has length 0) */
    Case c = {.kind = K_GRU, .dir = 2, .T = 0, .N = 2, .I = 3, .H = 2, .h0 = true};
    check_case(&c);
}

/* ---- errors ---------------------------------------------------------------------- */

typedef struct Bad {
    AmpBuf x, w, r, b, sl, h0;
    int32_t lens[2];
} Bad;

/* A valid forward LSTM (T 3, N 2, I 2, H 3) to break one piece of. */
static void bad_init(Bad *s) {
    s->x = fbuf(3, I64(3, 2, 2), 1), s->w = fbuf(3, I64(1, 12, 2), 1), s->r = fbuf(3, I64(1, 12, 3), 1);
    s->b = fbuf(2, I64(1, 24), 1), s->h0 = fbuf(3, I64(1, 2, 3), 1);
    s->lens[0] = 3, s->lens[1] = 2;
    s->sl = (AmpBuf){.dtype = AMP_DT_INT32, .rank = 1, .dims = {2}, .nelem = 2, .data = s->lens};
}

static void bad_free(Bad *s) {
    free(s->x.data), free(s->w.data), free(s->r.data), free(s->b.data), free(s->h0.data);
}

static AmpCode bad_run(AmpNode *n, Bad *s, AmpStatus *st) {
    const AmpBuf *in[6] = {&s->x, &s->w, &s->r, &s->b, &s->sl, &s->h0};
    Outs o;
    AmpCode rc = run(n, 6, in, 3, &o, st);
    outs_free(&o);
    return rc;
}

static AmpNode *lstm_node(void) {
    AmpNode *n = amp_node_new(model->graph, "", "LSTM", "bad", 8, 3);
    cr_assert_not_null(n);
    return n;
}

Test(rnn, valid_baseline_runs) {
    Bad s;
    bad_init(&s);
    AmpStatus st;
    cr_assert_eq(bad_run(lstm_node(), &s, &st), AMP_OK, "%s", st.msg);
    bad_free(&s);
}

Test(rnn, bad_shapes_are_input_errors) {
    Bad s;
    AmpStatus st;
    AmpNode *n = lstm_node();
    /* W with the wrong gate count */
    bad_init(&s);
    s.w.dims[1] = 9;
    cr_assert_eq(bad_run(n, &s, &st), AMP_ERR_INPUT);
    cr_assert(strstr(st.msg, "W") && strstr(st.msg, "bad"), "%s", st.msg);
    bad_free(&s);
    /* X of rank 2 */
    bad_init(&s);
    s.x.rank = 2;
    cr_assert_eq(bad_run(n, &s, &st), AMP_ERR_INPUT);
    bad_free(&s);
    /* R's hidden size differs from W's */
    bad_init(&s);
    s.r.dims[2] = 2, s.r.nelem = 24;
    cr_assert_eq(bad_run(n, &s, &st), AMP_ERR_INPUT);
    bad_free(&s);
    /* B too short */
    bad_init(&s);
    s.b.dims[1] = 12, s.b.nelem = 12;
    cr_assert_eq(bad_run(n, &s, &st), AMP_ERR_INPUT);
    bad_free(&s);
    /* initial_h with the wrong batch */
    bad_init(&s);
    s.h0.dims[1] = 1, s.h0.nelem = 3;
    cr_assert_eq(bad_run(n, &s, &st), AMP_ERR_INPUT);
    bad_free(&s);
    /* sequence_lens past seq_length, negative, wrong length, float */
    bad_init(&s);
    s.lens[1] = 4;
    cr_assert_eq(bad_run(n, &s, &st), AMP_ERR_INPUT);
    s.lens[1] = -1;
    cr_assert_eq(bad_run(n, &s, &st), AMP_ERR_INPUT);
    s.lens[1] = 1, s.sl.dims[0] = 1, s.sl.nelem = 1;
    cr_assert_eq(bad_run(n, &s, &st), AMP_ERR_INPUT);
    s.sl.dims[0] = 2, s.sl.nelem = 2, s.sl.dtype = AMP_DT_FLOAT;
    cr_assert_eq(bad_run(n, &s, &st), AMP_ERR_INPUT);
    bad_free(&s);
}

Test(rnn, bad_attributes_are_input_errors) {
    Bad s;
    AmpStatus st;
    bad_init(&s);
    AmpNode *n = lstm_node();
    attr_str(n, "direction", "sideways");
    cr_assert_eq(bad_run(n, &s, &st), AMP_ERR_INPUT);
    n = lstm_node();
    attr_int(n, "hidden_size", 4); /* W and R say 3 */
    cr_assert_eq(bad_run(n, &s, &st), AMP_ERR_INPUT);
    n = lstm_node();
    attr_int(n, "layout", 2);
    cr_assert_eq(bad_run(n, &s, &st), AMP_ERR_INPUT);
    n = lstm_node();
    attr_strs(n, "activations", 2, (const char *const[]){"Sigmoid", "Tanh"}); /* LSTM needs 3 */
    cr_assert_eq(bad_run(n, &s, &st), AMP_ERR_INPUT);
    n = lstm_node();
    attr_float(n, "clip", -1.0f);
    cr_assert_eq(bad_run(n, &s, &st), AMP_ERR_INPUT);
    bad_free(&s);
}

Test(rnn, unsupported_dtype_and_activation) {
    Bad s;
    AmpStatus st;
    bad_init(&s);
    AmpNode *n = lstm_node();
    attr_strs(n, "activations", 3, (const char *const[]){"Sigmoid", "Gelu", "Tanh"});
    cr_assert_eq(bad_run(n, &s, &st), AMP_ERR_UNSUPPORTED);
    cr_assert(strstr(st.msg, "Gelu"), "%s", st.msg);
    /* double X: the kernel computes in fp32 only */
    double xd[12] = {0};
    AmpBuf x = s.x;
    s.x.dtype = AMP_DT_DOUBLE, s.x.data = xd;
    cr_assert_eq(bad_run(lstm_node(), &s, &st), AMP_ERR_UNSUPPORTED);
    s.x = x;
    bad_free(&s);
}
