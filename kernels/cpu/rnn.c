/* CPU kernels for the recurrent ops RNN, GRU and LSTM (ONNX semantics, layouts 0 and 1).
 * Each direction projects the whole input sequence with one GEMM (X·W^T), then walks the
 * time steps with one GEMM per step (H·R^T) and the gate arithmetic, all in fp32. */
#include "kernels/cpu/blas.h"
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/reduce_impl.h" /* amp_red_attrs, the prepare helpers */
#include "ops/geom.h"
#include "ops/rnn_geom.h"
#include "ops/scalar_math.h"

/* Scratch buffers past this many floats are refused (UNSUPPORTED) rather than tried, so a
 * hostile shape (an empty X of shape (2^40, 2^40, 0)) gives an error, not a giant malloc. */
#define RNN_MAX_ELEMS (INT64_C(1) << 31)

typedef enum RnnKind { RNN_PLAIN, RNN_GRU, RNN_LSTM } RnnKind;

/* ---- activations ----------------------------------------------------------------- */

typedef enum RnnActKind {
    ACT_SIGMOID,
    ACT_TANH,
    ACT_RELU,
    ACT_AFFINE,
    ACT_LEAKY_RELU,
    ACT_THRESHOLDED_RELU,
    ACT_SCALED_TANH,
    ACT_HARD_SIGMOID,
    ACT_ELU,
    ACT_SOFTSIGN,
    ACT_SOFTPLUS
} RnnActKind;

typedef struct RnnAct {
    RnnActKind kind;
    float alpha, beta;
} RnnAct;

/* The names ONNX lists, whether each takes alpha / beta from activation_alpha/_beta, and
 * the defaults of the ONNX ops of the same name (Affine 1, 0; ScaledTanh, which has no
 * defaults in ONNX, 1, 1). onnxruntime uses 0 for Affine/ThresholdedRelu/ScaledTanh. */
static const struct {
    const char *name;
    RnnActKind kind;
    bool takes_alpha, takes_beta;
    float alpha, beta;
} ACTS[] = {
    {"sigmoid", ACT_SIGMOID, false, false, 0, 0},
    {"tanh", ACT_TANH, false, false, 0, 0},
    {"relu", ACT_RELU, false, false, 0, 0},
    {"affine", ACT_AFFINE, true, true, 1.0f, 0.0f},
    {"leakyrelu", ACT_LEAKY_RELU, true, false, 0.01f, 0},
    {"thresholdedrelu", ACT_THRESHOLDED_RELU, true, false, 1.0f, 0},
    {"scaledtanh", ACT_SCALED_TANH, true, true, 1.0f, 1.0f},
    {"hardsigmoid", ACT_HARD_SIGMOID, true, true, 0.2f, 0.5f},
    {"elu", ACT_ELU, true, false, 1.0f, 0},
    {"softsign", ACT_SOFTSIGN, false, false, 0, 0},
    {"softplus", ACT_SOFTPLUS, false, false, 0, 0},
};

/* x[i] = act(clip(x[i])) for i < n; clip <= 0 means no clipping. */
static void act_n(const RnnAct *a, float clip, float *x, int64_t n) {
    if (clip > 0)
        for (int64_t i = 0; i < n; i++) x[i] = x[i] > clip ? clip : x[i] < -clip ? -clip : x[i];
    const float al = a->alpha, be = a->beta;
    switch (a->kind) {
    case ACT_SIGMOID:
        for (int64_t i = 0; i < n; i++) x[i] = amp_sigmoid_f(x[i]);
        break;
    case ACT_TANH:
        for (int64_t i = 0; i < n; i++) x[i] = tanhf(x[i]);
        break;
    case ACT_RELU:
        for (int64_t i = 0; i < n; i++) x[i] = x[i] > 0 ? x[i] : 0;
        break;
    case ACT_AFFINE:
        for (int64_t i = 0; i < n; i++) x[i] = al * x[i] + be;
        break;
    case ACT_LEAKY_RELU:
        for (int64_t i = 0; i < n; i++) x[i] = x[i] >= 0 ? x[i] : al * x[i];
        break;
    case ACT_THRESHOLDED_RELU:
        for (int64_t i = 0; i < n; i++) x[i] = x[i] > al ? x[i] : 0;
        break;
    case ACT_SCALED_TANH:
        for (int64_t i = 0; i < n; i++) x[i] = al * tanhf(be * x[i]);
        break;
    case ACT_HARD_SIGMOID:
        for (int64_t i = 0; i < n; i++) x[i] = fmaxf(0.0f, fminf(1.0f, al * x[i] + be));
        break;
    case ACT_ELU:
        for (int64_t i = 0; i < n; i++) x[i] = x[i] >= 0 ? x[i] : al * expm1f(x[i]);
        break;
    case ACT_SOFTSIGN:
        for (int64_t i = 0; i < n; i++) x[i] = x[i] / (1.0f + fabsf(x[i]));
        break;
    case ACT_SOFTPLUS:
        for (int64_t i = 0; i < n; i++) x[i] = amp_softplus_f(x[i]);
        break;
    }
}

/* ---- the parsed node ------------------------------------------------------------- */

/* The attributes, parsed at prepare: first those the geometry reads (ops/rnn_geom.h:
 * directions, layout, hidden_size where given), then the computation's. */
typedef struct RnnAttrs {
    AmpRnnShapeAttrs shape;
    bool reverse;      /* the single direction runs backwards */
    float clip;        /* > 0: clip of the gate pre-activations; 0: none */
    bool lbr;          /* GRU linear_before_reset */
    bool input_forget; /* LSTM: f = 1 - i */
    RnnAct act[2][3]; /* [direction][f, g, h] */
} RnnAttrs;

typedef struct RnnSpec {
    RnnKind kind;
    int gates; /* gate blocks stacked in W and R: 1 (RNN), 3 (GRU: z r h), 4 (LSTM: i o f c) */
    int64_t seq, batch, input, hidden;
    int ndir;          /* 1 or 2 (bidirectional) */
    bool reverse;      /* the single direction runs backwards */
    int layout;        /* 0: X (seq, batch, input); 1: X (batch, seq, input) */
    float clip;        /* > 0: clip of the gate pre-activations; 0: none */
    bool lbr;          /* GRU linear_before_reset */
    bool input_forget; /* LSTM: f = 1 - i */
    RnnAct act[2][3];  /* [direction][f, g, h]: 1 (RNN: f), 2 (GRU: f g), 3 (LSTM: f g h) */
    /* fp32 views of the inputs; NULL when not given */
    const float *X;       // (seq, batch, input) or (batch, seq, input)
    const float *W;       // (ndir, gates * hidden, input)
    const float *R;       // (ndir, gates * hidden, hidden)
    const float *B;       // (ndir, 2 * gates * hidden): Wb then Rb
    const float *H0, *C0; // (ndir, batch, hidden) or (batch, ndir, hidden)
    const float *P;       // (ndir, 3 * hidden): peepholes i, o, f
    int64_t *lens;        // (batch): valid steps of each sequence, in [0, seq]
} RnnSpec;

static AmpCode oom(AmpKernelCtx *k) {
    return amp_kernel_fail(k, AMP_ERR_INTERNAL, "out of memory");
}

/* Case-insensitive equality of an attribute string (not NUL-terminated) and a name. */
static bool name_is(const AmpBytes *s, const char *name) {
    size_t n = strlen(name);
    if (s->len != n) return false;
    for (size_t i = 0; i < n; i++) {
        int c = s->data[i];
        if (c >= 'A' && c <= 'Z') c += 'a' - 'A';
        if (c != name[i]) return false;
    }
    return true;
}

static RnnKind kind_of(const AmpNode *n) {
    return n->op == AMP_OP_LSTM ? RNN_LSTM : n->op == AMP_OP_GRU ? RNN_GRU : RNN_PLAIN;
}

/* The activations attribute: nacts names per direction (a bidirectional node may give
 * just one set, used for both), alpha/beta taken in order by the functions that use them. */
static AmpCode parse_acts(const AmpNode *node, AmpStatus *st, RnnKind kind, int nacts, RnnAttrs *s) {
    static const RnnActKind DEFAULTS[3][3] = {
        {ACT_TANH}, {ACT_SIGMOID, ACT_TANH}, {ACT_SIGMOID, ACT_TANH, ACT_TANH}};
    const AmpAttr *names = amp_node_attr(node, "activations");
    const AmpAttr *alphas = amp_node_attr(node, "activation_alpha");
    const AmpAttr *betas = amp_node_attr(node, "activation_beta");
    size_t n = names && names->type == AMP_ATTR_STRINGS ? names->n_strings : 0;
    if (n && n != (size_t)nacts && n != (size_t)(nacts * s->shape.ndir))
        return amp_node_fail(node, st, AMP_ERR_INPUT, "activations lists %zu functions; expected %d per direction",
                                 n, nacts);
    size_t na = alphas && alphas->type == AMP_ATTR_FLOATS ? alphas->n_floats : 0;
    size_t nb = betas && betas->type == AMP_ATTR_FLOATS ? betas->n_floats : 0;
    size_t ia = 0, ib = 0;
    for (int d = 0; d < s->shape.ndir; d++)
        for (int j = 0; j < nacts; j++) {
            RnnAct *a = &s->act[d][j];
            if (!n) {
                *a = (RnnAct){DEFAULTS[kind][j], 0, 0};
                continue;
            }
            size_t idx = (size_t)(d * nacts + j);
            if (idx >= n) { /* one set for both directions */
                s->act[d][j] = s->act[0][j];
                continue;
            }
            const AmpBytes *nm = &names->strings[idx];
            size_t e = 0;
            while (e < sizeof ACTS / sizeof *ACTS && !name_is(nm, ACTS[e].name)) e++;
            if (e == sizeof ACTS / sizeof *ACTS)
                return amp_node_fail(node, st, AMP_ERR_UNSUPPORTED, "unknown activation '%.*s'",
                                         (int)(nm->len > 64 ? 64 : nm->len), nm->data ? (const char *)nm->data : "");
            a->kind = ACTS[e].kind;
            a->alpha = ACTS[e].takes_alpha && ia < na ? alphas->floats[ia++] : ACTS[e].alpha;
            a->beta = ACTS[e].takes_beta && ib < nb ? betas->floats[ib++] : ACTS[e].beta;
        }
    return AMP_OK;
}

/* RNN, GRU and LSTM (by the node's op). */
AmpCode amp_cpu_rnn_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    (void)opset;
    RnnKind kind = kind_of(n);
    RnnAttrs a;
    memset(&a, 0, sizeof a);
    const char *dir = amp_node_attr_string(n, "direction", "forward");
    if (!strcmp(dir, "forward")) a.shape.ndir = 1;
    else if (!strcmp(dir, "reverse")) a.shape.ndir = 1, a.reverse = true;
    else if (!strcmp(dir, "bidirectional")) a.shape.ndir = 2;
    else
        return amp_node_fail(n, st, AMP_ERR_INPUT, "direction '%s' is not forward, reverse or bidirectional", dir);
    int64_t layout = amp_node_attr_int(n, "layout", 0);
    if (layout != 0 && layout != 1)
        return amp_node_fail(n, st, AMP_ERR_INPUT, "layout %lld is not 0 or 1", (long long)layout);
    a.shape.layout = (int)layout;
    const AmpAttr *clip = amp_node_attr(n, "clip");
    if (clip && clip->type == AMP_ATTR_FLOAT) {
        if (!(clip->f > 0)) return amp_node_fail(n, st, AMP_ERR_INPUT, "clip %g is not positive", (double)clip->f);
        a.clip = clip->f;
    }
    a.lbr = amp_node_attr_int(n, "linear_before_reset", 0) != 0;
    a.input_forget = amp_node_attr_int(n, "input_forget", 0) != 0;
    const AmpAttr *hs = amp_node_attr(n, "hidden_size");
    if (hs && hs->type == AMP_ATTR_INT) {
        if (hs->i <= 0 || hs->i > INT_MAX / 4)
            return amp_node_fail(n, st, AMP_ERR_INPUT, "hidden_size %lld is out of range", (long long)hs->i);
        a.shape.has_hidden = true, a.shape.hidden = hs->i;
    }
    AmpCode rc = parse_acts(n, st, kind, kind == RNN_PLAIN ? 1 : kind == RNN_GRU ? 2 : 3, &a);
    return rc ? rc : amp_prep_out(&a, sizeof a, attrs, st);
}

/* Takes the prepared attributes and the geometry (amp_rnn_geom, which checked every
 * input's shape and the outputs) and checks the dtypes and this kernel's size limits; fills
 * s except the data views. */
static AmpCode parse(AmpKernelCtx *k, RnnKind kind, RnnSpec *s) {
    memset(s, 0, sizeof *s);
    const RnnAttrs *at = amp_red_attrs(k);
    if (!at) return k->st->code;
    AmpRnnGeom own;
    const AmpRnnGeom *g;
    AmpCode rc = amp_kernel_geom(k, &own, (const void **)&g);
    if (rc) return rc;
    for (int i = 0; i < k->n_in; i++) /* every input but sequence_lens is float */
        if (i != 4 && k->in[i] && !amp_is_f32_family(k->in[i]->dtype)) return amp_kernel_bad_dtype(k, k->in[i]->dtype);
    s->kind = kind;
    s->gates = g->gates;
    s->seq = g->seq, s->batch = g->batch, s->input = g->input, s->hidden = g->hidden;
    s->ndir = at->shape.ndir, s->reverse = at->reverse, s->layout = at->shape.layout, s->clip = at->clip;
    s->lbr = at->lbr, s->input_forget = at->input_forget;
    memcpy(s->act, at->act, sizeof s->act);
    int64_t gh = s->gates * s->hidden, h = s->hidden;
    const AmpBuf *x = k->in[0];
    if (s->input > INT_MAX || s->batch > INT_MAX || s->seq > INT_MAX || s->seq * s->batch > INT_MAX ||
        (s->seq * s->batch != 0 && gh > RNN_MAX_ELEMS / (s->seq * s->batch)) ||
        (s->seq * s->batch != 0 && h * s->ndir > RNN_MAX_ELEMS / (s->seq * s->batch)) ||
        (s->batch != 0 && gh * s->ndir > RNN_MAX_ELEMS / s->batch))
        return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "X of shape (%lld, %lld, %lld) is too large for this kernel",
                        (long long)x->dims[0], (long long)x->dims[1], (long long)x->dims[2]);
    return AMP_OK;
}

/* ---- the recurrence -------------------------------------------------------------- */

/* C (m, n; row stride ldc) = A (m, kk; stride lda) · B^T, B (n, kk; stride ldb). */
static void gemm_nt(int64_t m, int64_t n, int64_t kk, const float *A, int64_t lda, const float *B, int64_t ldb,
                    float *C, int64_t ldc) {
    if (!m || !n) return;
    if (!kk) {
        for (int64_t i = 0; i < m; i++) memset(C + i * ldc, 0, (size_t)n * sizeof *C);
        return;
    }
    amp_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)n, (int)kk, 1.0f, A, (int)lda, B, (int)ldb,
                0.0f, C, (int)ldc);
}

/* Row of X (and of the projected gates) holding step t of sequence b. */
static int64_t x_row(const RnnSpec *s, int64_t t, int64_t b) {
    return s->layout ? b * s->seq + t : t * s->batch + b;
}

/* Offset of Y's hidden vector (t, d, b): Y (seq, ndir, batch, H) or (batch, seq, ndir, H). */
static int64_t y_off(const RnnSpec *s, int64_t t, int d, int64_t b) {
    int64_t i = s->layout ? (b * s->seq + t) * s->ndir + d : (t * s->ndir + d) * s->batch + b;
    return i * s->hidden;
}

/* Offset of state (d, b) in Y_h, Y_c, initial_h, initial_c: (ndir, batch, H) or (batch, ndir, H). */
static int64_t h_off(const RnnSpec *s, int d, int64_t b) {
    return (s->layout ? b * s->ndir + d : d * s->batch + b) * s->hidden;
}

/* Scratch shared by the directions. */
typedef struct RnnWork {
    float *xg;    // (seq * batch, G*H): X·W^T plus biases, rows in X's order
    float *hg;    // (batch, G*H): H·R^T of the current step, then the gate values
    float *h, *c; // (batch, H): hidden and cell state
    float *rh;    // (batch, H): GRU r ⊙ H
    float *bias;  // (G*H): biases folded into xg
} RnnWork;

/* Outputs as fp32 arrays (NULL when the node has fewer outputs). */
typedef struct RnnOut {
    float *y;       // (seq, ndir, batch, H) or (batch, seq, ndir, H)
    float *yh, *yc; // (ndir, batch, H) or (batch, ndir, H)
} RnnOut;

/* One RNN or LSTM step of sequence b, from its gate row g (X·W^T + biases + H·R^T,
 * pre-activation; LSTM gates i o f c) and the direction's peepholes p (i o f, or NULL).
 * Updates h[b] (and c[b]). */
static void cell(const RnnSpec *s, int d, const RnnWork *wk, const float *p, float *g, int64_t b) {
    const int64_t H = s->hidden;
    const RnnAct *act = s->act[d];
    float *h = wk->h + b * H;
    if (s->kind == RNN_PLAIN) {
        act_n(&act[0], s->clip, g, H);
        memcpy(h, g, (size_t)H * sizeof *h);
        return;
    }
    float *c = wk->c + b * H;
    float *gi = g, *go = g + H, *gf = g + 2 * H, *gc = g + 3 * H;
    if (p)
        for (int64_t j = 0; j < H; j++) gi[j] += p[j] * c[j], gf[j] += p[2 * H + j] * c[j];
    act_n(&act[0], s->clip, gi, H);
    if (s->input_forget)
        for (int64_t j = 0; j < H; j++) gf[j] = 1.0f - gi[j];
    else
        act_n(&act[0], s->clip, gf, H);
    act_n(&act[1], s->clip, gc, H);
    for (int64_t j = 0; j < H; j++) c[j] = gf[j] * c[j] + gi[j] * gc[j];
    if (p) /* the output gate looks at the new cell state */
        for (int64_t j = 0; j < H; j++) go[j] += p[H + j] * c[j];
    act_n(&act[0], s->clip, go, H);
    /* h(Ct) on a copy (in gi, no longer needed). clip bounds the gate pre-activations
     * only, not Ct on its way into h, as onnxruntime does. */
    memcpy(gi, c, (size_t)H * sizeof *gi);
    act_n(&act[2], 0, gi, H);
    for (int64_t j = 0; j < H; j++) h[j] = go[j] * gi[j];
}

/* Time index that step `step` of sequence b reads in direction rev, or -1 past its end. */
static int64_t step_t(const RnnSpec *s, bool rev, int64_t step, int64_t b) {
    if (step >= s->lens[b]) return -1;
    return rev ? s->lens[b] - 1 - step : step;
}

/* One GRU step over the whole batch (gates z r h, ONNX order):
 *   z = f(Xz + H·Rz^T + bz), r = f(Xr + H·Rr^T + br)
 *   linear_before_reset 0: h~ = g(Xh + (r ⊙ H)·Rh^T + Wbh + Rbh)
 *   linear_before_reset 1: h~ = g(Xh + Wbh + r ⊙ (H·Rh^T + Rbh))
 *   H = (1 - z) ⊙ h~ + z ⊙ H
 * xg already holds X·W^T plus every bias but Rbh under linear_before_reset (rbh). */
static void gru_step(const RnnSpec *s, int d, const RnnWork *wk, const float *R, const float *rbh, bool rev,
                     int64_t step) {
    const int64_t H = s->hidden, GH = 3 * H, N = s->batch;
    const RnnAct *act = s->act[d];
    gemm_nt(N, s->lbr ? GH : 2 * H, H, wk->h, H, R, H, wk->hg, GH);
    for (int64_t b = 0; b < N; b++) {
        int64_t t = step_t(s, rev, step, b);
        float *rh = wk->rh + b * H;
        if (t < 0) {
            memset(rh, 0, (size_t)H * sizeof *rh); /* keeps the second GEMM's input defined */
            continue;
        }
        float *g = wk->hg + b * GH, *r = g + H;
        const float *xg = wk->xg + x_row(s, t, b) * GH;
        for (int64_t j = 0; j < 2 * H; j++) g[j] += xg[j];
        act_n(&act[0], s->clip, g, 2 * H); /* z and r */
        if (s->lbr)
            for (int64_t j = 0; j < H; j++) g[2 * H + j] = xg[2 * H + j] + r[j] * (g[2 * H + j] + (rbh ? rbh[j] : 0));
        else
            for (int64_t j = 0; j < H; j++) rh[j] = r[j] * wk->h[b * H + j];
    }
    if (!s->lbr) gemm_nt(N, H, H, wk->rh, H, R + 2 * H * H, H, wk->hg + 2 * H, GH);
    for (int64_t b = 0; b < N; b++) {
        int64_t t = step_t(s, rev, step, b);
        if (t < 0) continue;
        float *g = wk->hg + b * GH, *z = g, *hh = g + 2 * H, *h = wk->h + b * H;
        if (!s->lbr) {
            const float *xg = wk->xg + x_row(s, t, b) * GH;
            for (int64_t j = 0; j < H; j++) hh[j] += xg[2 * H + j];
        }
        act_n(&act[1], s->clip, hh, H);
        for (int64_t j = 0; j < H; j++) h[j] = (1.0f - z[j]) * hh[j] + z[j] * h[j];
    }
}

/* Runs direction d over every sequence and writes its part of the outputs. */
static void run_dir(const RnnSpec *s, int d, const RnnWork *wk, const RnnOut *out) {
    const int64_t H = s->hidden, GH = s->gates * H, IN = s->input, N = s->batch, T = s->seq;
    const float *W = s->W + d * GH * IN, *R = s->R + d * GH * H;
    const float *wb = s->B ? s->B + d * 2 * GH : NULL, *rb = wb ? wb + GH : NULL;
    const float *p = s->P ? s->P + d * 3 * H : NULL;
    const bool rev = s->ndir == 2 ? d == 1 : s->reverse;
    /* GRU's recurrent h-gate bias Rbh stays out of xg under linear_before_reset: the
     * reset gate scales it together with H·Rh^T. */
    const float *rbh = s->kind == RNN_GRU && s->lbr && rb ? rb + 2 * H : NULL;

    gemm_nt(T * N, GH, IN, s->X, IN, W, IN, wk->xg, GH);
    if (wb) {
        for (int64_t j = 0; j < GH; j++) wk->bias[j] = wb[j] + (rbh && j >= 2 * H ? 0.0f : rb[j]);
        for (int64_t i = 0; i < T * N; i++)
            for (int64_t j = 0; j < GH; j++) wk->xg[i * GH + j] += wk->bias[j];
    }
    for (int64_t b = 0; b < N; b++) {
        float *h = wk->h + b * H, *c = wk->c + b * H;
        if (s->H0) memcpy(h, s->H0 + h_off(s, d, b), (size_t)H * sizeof *h);
        else memset(h, 0, (size_t)H * sizeof *h);
        if (s->kind == RNN_LSTM) {
            if (s->C0) memcpy(c, s->C0 + h_off(s, d, b), (size_t)H * sizeof *c);
            else memset(c, 0, (size_t)H * sizeof *c);
        }
    }
    int64_t steps = 0;
    for (int64_t b = 0; b < N; b++) steps = s->lens[b] > steps ? s->lens[b] : steps;

    for (int64_t step = 0; step < steps; step++) {
        /* Every row takes part in the GEMMs; rows past their length keep their state. */
        if (s->kind == RNN_GRU) {
            gru_step(s, d, wk, R, rbh, rev, step);
        } else {
            gemm_nt(N, GH, H, wk->h, H, R, H, wk->hg, GH);
            for (int64_t b = 0; b < N; b++) {
                int64_t t = step_t(s, rev, step, b);
                if (t < 0) continue;
                float *g = wk->hg + b * GH;
                const float *xg = wk->xg + x_row(s, t, b) * GH;
                for (int64_t j = 0; j < GH; j++) g[j] += xg[j];
                cell(s, d, wk, p, g, b);
            }
        }
        if (out->y)
            for (int64_t b = 0; b < N; b++) {
                int64_t t = step_t(s, rev, step, b);
                if (t >= 0) memcpy(out->y + y_off(s, t, d, b), wk->h + b * H, (size_t)H * sizeof(float));
            }
    }
    /* Final states; a sequence of length 0 reports zeros (as onnxruntime does). */
    for (int64_t b = 0; b < N; b++) {
        bool empty = s->lens[b] == 0;
        if (out->yh) {
            float *dst = out->yh + h_off(s, d, b);
            if (empty) memset(dst, 0, (size_t)H * sizeof *dst);
            else memcpy(dst, wk->h + b * H, (size_t)H * sizeof *dst);
        }
        if (out->yc) {
            float *dst = out->yc + h_off(s, d, b);
            if (empty) memset(dst, 0, (size_t)H * sizeof *dst);
            else memcpy(dst, wk->c + b * H, (size_t)H * sizeof *dst);
        }
    }
}

/* ---- the kernels ------------------------------------------------------------------ */

static float *alloc_f(int64_t n) {
    return malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
}

static AmpCode run_rnn(AmpKernelCtx *k, RnnKind kind) {
    RnnSpec s;
    AmpCode rc = parse(k, kind, &s);
    if (rc) return rc;
    const int64_t H = s.hidden, GH = s.gates * H, N = s.batch, T = s.seq;
    static const float EMPTY[1] = {0}; /* view of an input with no elements (never read) */

    float *tmp[8] = {0};        /* converted copies of the 16-bit inputs */
    const float *view[8] = {0}; /* fp32 views: X W R B - initial_h initial_c P */
    float *otmp[3] = {0};       /* fp32 scratch of 16-bit outputs */
    AmpBuf *ob[3] = {0};
    float *of[3] = {0};
    RnnWork wk = {0};

    for (int i = 0; i < k->n_in; i++) {
        if (i == 4 || !k->in[i]) continue;
        if (!k->in[i]->nelem) view[i] = EMPTY;
        else if (!(view[i] = amp_buf_f32_in(k->in[i], &tmp[i]))) {
            rc = oom(k);
            goto done;
        }
    }
    s.X = view[0], s.W = view[1], s.R = view[2], s.B = view[3], s.H0 = view[5], s.C0 = view[6], s.P = view[7];
    if (!(s.lens = malloc((size_t)(N > 0 ? N : 1) * sizeof *s.lens))) {
        rc = oom(k);
        goto done;
    }
    for (int64_t b = 0; b < N; b++) {
        s.lens[b] = k->n_in > 4 && k->in[4] ? amp_buf_get_i64(k->in[4], (uint64_t)b) : T;
        if (s.lens[b] < 0 || s.lens[b] > T) {
            rc = amp_kernel_fail(k, AMP_ERR_INPUT, "sequence_lens[%lld] = %lld is outside [0, %lld]", (long long)b,
                          (long long)s.lens[b], (long long)T);
            goto done;
        }
    }

    /* Outputs Y, Y_h, Y_c, in X's type, where listed (the geometry checked n_out <= 3 and them). */
    if ((rc = amp_kernel_outputs(k, k->n_out, ob))) goto done;
    for (int i = 0; i < k->n_out; i++) {
        if (!ob[i]) continue;
        if (ob[i]->nelem && !(of[i] = amp_buf_f32_out(ob[i], &otmp[i]))) {
            rc = oom(k);
            goto done;
        }
    }
    RnnOut out = {.y = of[0], .yh = of[1], .yc = kind == RNN_LSTM ? of[2] : NULL};
    if (out.y) memset(out.y, 0, (size_t)ob[0]->nelem * sizeof *out.y); /* steps past a sequence's end */

    wk.xg = alloc_f(T * N * GH);
    wk.hg = alloc_f(N * GH);
    wk.h = alloc_f(N * H);
    wk.c = alloc_f(N * H);
    wk.rh = alloc_f(N * H);
    wk.bias = alloc_f(GH);
    if (!wk.xg || !wk.hg || !wk.h || !wk.c || !wk.rh || !wk.bias) {
        rc = oom(k);
        goto done;
    }
    for (int d = 0; d < s.ndir; d++) run_dir(&s, d, &wk, &out);
    for (int i = 0; i < 3; i++) {
        if (ob[i] && of[i]) amp_buf_f32_commit(ob[i], otmp[i]);
        otmp[i] = NULL;
    }

done:
    for (int i = 0; i < 8; i++) free(tmp[i]);
    for (int i = 0; i < 3; i++) free(otmp[i]);
    free(s.lens);
    free(wk.xg), free(wk.hg), free(wk.h), free(wk.c), free(wk.rh), free(wk.bias);
    return rc;
}

AmpCode amp_cpu_rnn(AmpKernelCtx *k) {
    return run_rnn(k, RNN_PLAIN);
}

AmpCode amp_cpu_gru(AmpKernelCtx *k) {
    return run_rnn(k, RNN_GRU);
}

AmpCode amp_cpu_lstm(AmpKernelCtx *k) {
    return run_rnn(k, RNN_LSTM);
}
