/* What the optimizer tests share (tests/kernels/test_optim.c on the CPU, tests/cuda/
 * test_cuda_optim.c against the GPU): one Adam, Momentum or Adagrad node over N tensors
 * of given sizes and per-tensor dtypes, deterministic random data in host buffers, its
 * outputs placed as the executor places them, and a call of the CPU kernel with or
 * without the fused update gate. Static functions: included once per test executable. */
#ifndef AMP_TEST_OPTIM_UTIL_H
#define AMP_TEST_OPTIM_UTIL_H

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/half.h"
#include "ir/ir.h"
#include "kernels/cpu/kernels.h"

#define OT_MAX 160 /* tensors per node */

/* One node and its buffers: in[0] R, in[1] T, then groups of N (X, G, state...); out:
 * groups of N (X_new, state...), data NULL where the output is not listed. */
typedef struct OtCase {
    AmpModel *m;
    AmpNode *n;
    int N, groups, n_in, n_out;
    AmpBuf in[2 + 4 * OT_MAX];
    AmpBuf out[3 * OT_MAX];
    const AmpBuf *inp[2 + 4 * OT_MAX];
    void *attrs; /* the CPU prepare's */
} OtCase;

static inline size_t ot_bytes(const AmpBuf *b) {
    size_t bytes = 0;
    cr_assert(amp_tensor_expected_bytes(b->dtype, b->nelem, &bytes));
    return bytes;
}

/* A buffer of dtype with n elements (rank 1), or a scalar (n < 0), data allocated. */
static inline AmpBuf ot_buf(int dtype, int64_t n) {
    AmpBuf b = {.dtype = dtype, .rank = n < 0 ? 0 : 1};
    b.dims[0] = n < 0 ? 1 : n;
    b.nelem = n < 0 ? 1 : (uint64_t)n;
    b.data = calloc(1, ot_bytes(&b) + 8);
    cr_assert_not_null(b.data);
    return b;
}

static inline void ot_put(AmpBuf *b, uint64_t i, double v) {
    switch (b->dtype) {
    case AMP_DT_FLOAT: ((float *)b->data)[i] = (float)v; break;
    case AMP_DT_DOUBLE: ((double *)b->data)[i] = v; break;
    case AMP_DT_FLOAT16: ((uint16_t *)b->data)[i] = amp_f32_to_f16((float)v); break;
    case AMP_DT_BFLOAT16: ((uint16_t *)b->data)[i] = amp_f32_to_bf16((float)v); break;
    default: cr_assert_fail("no float values for %s", amp_dtype_name(b->dtype));
    }
}

static inline double ot_get(const AmpBuf *b, uint64_t i) {
    switch (b->dtype) {
    case AMP_DT_FLOAT: return ((const float *)b->data)[i];
    case AMP_DT_DOUBLE: return ((const double *)b->data)[i];
    case AMP_DT_FLOAT16: return amp_f16_to_f32(((const uint16_t *)b->data)[i]);
    case AMP_DT_BFLOAT16: return amp_bf16_to_f32(((const uint16_t *)b->data)[i]);
    default: return NAN;
    }
}

/* xorshift64*: uniform in [0, 1), the same on every machine. */
static inline double ot_rand(uint64_t *s) {
    *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
    return (double)((*s * 0x2545f4914f6cdd1dull) >> 11) * 0x1p-53;
}

/* The op's attributes (mode: Momentum's "standard" or "nesterov"). */
static inline void ot_attrs(AmpNode *n, const char *op, const char *mode) {
    if (!strcmp(op, "Adam")) {
        amp_node_add_attr(n, "alpha", AMP_ATTR_FLOAT)->f = 0.85f;
        amp_node_add_attr(n, "beta", AMP_ATTR_FLOAT)->f = 0.995f;
        amp_node_add_attr(n, "epsilon", AMP_ATTR_FLOAT)->f = 1e-4f;
        amp_node_add_attr(n, "norm_coefficient", AMP_ATTR_FLOAT)->f = 0.01f;
        amp_node_add_attr(n, "norm_coefficient_post", AMP_ATTR_FLOAT)->f = 0.002f;
    } else if (!strcmp(op, "Momentum")) {
        amp_node_add_attr(n, "alpha", AMP_ATTR_FLOAT)->f = 0.9f;
        amp_node_add_attr(n, "beta", AMP_ATTR_FLOAT)->f = 0.7f;
        amp_node_add_attr(n, "norm_coefficient", AMP_ATTR_FLOAT)->f = 0.001f;
        AmpAttr *a = amp_node_add_attr(n, "mode", AMP_ATTR_STRING);
        a->s.data = (const uint8_t *)amp_arena_strdup(&n->graph->model->arena, mode ? mode : "standard");
        a->s.len = strlen(mode ? mode : "standard");
    } else {
        amp_node_add_attr(n, "decay_factor", AMP_ATTR_FLOAT)->f = 0.1f;
        amp_node_add_attr(n, "epsilon", AMP_ATTR_FLOAT)->f = 1e-5f;
        amp_node_add_attr(n, "norm_coefficient", AMP_ATTR_FLOAT)->f = 0.003f;
    }
}

/* A node of op over N tensors: tensor i has sizes[i] elements (< 0: a scalar) and its
 * inputs (X, G, state...) the dtypes dts[i][0..]; n_out outputs listed (-1: all);
 * R = r (float32), T = t (int64); data drawn from seed (second moments and Adagrad's H
 * non-negative). */
static inline OtCase *ot_new(const char *op, const char *mode, int N, const int64_t *sizes, const int (*dts)[4],
                             int n_out, double r, int64_t t, uint64_t seed) {
    cr_assert(N > 0 && N <= OT_MAX);
    OtCase *c = calloc(1, sizeof *c);
    cr_assert_not_null(c);
    c->N = N;
    c->groups = !strcmp(op, "Adam") ? 4 : 3;
    c->n_in = 2 + c->groups * N;
    c->n_out = n_out < 0 ? (c->groups - 1) * N : n_out;
    c->m = amp_model_new();
    c->n = amp_node_new(c->m->graph, "ai.onnx.preview.training", op, "opt", c->n_in, c->n_out);
    cr_assert_not_null(c->n);
    ot_attrs(c->n, op, mode);
    c->in[0] = ot_buf(AMP_DT_FLOAT, -1);
    ot_put(&c->in[0], 0, r);
    c->in[1] = ot_buf(AMP_DT_INT64, -1);
    ((int64_t *)c->in[1].data)[0] = t;
    uint64_t s = seed | 1;
    for (int g = 0; g < c->groups; g++)
        for (int i = 0; i < N; i++) {
            AmpBuf *b = &c->in[2 + g * N + i];
            *b = ot_buf(dts[i][g], sizes[i]);
            bool nonneg = g == 3 || (g == 2 && c->groups == 3 && !strcmp(op, "Adagrad"));
            for (uint64_t e = 0; e < b->nelem; e++) {
                double u = ot_rand(&s);
                ot_put(b, e, nonneg ? u : g == 1 ? 2 * u - 1 : 4 * u - 2);
            }
        }
    for (int i = 0; i < c->n_in; i++) c->inp[i] = &c->in[i];
    for (int o = 0; o < c->n_out; o++) {
        char name[32];
        snprintf(name, sizeof name, "y%d", o);
        amp_node_set_output(c->n, o, amp_graph_value(c->m->graph, name));
        /* output group g, tensor i replaces input group g == 0 ? 0 : g + 1 */
        int g = o / N, i = o % N;
        const AmpBuf *src = &c->in[2 + (g ? g + 1 : 0) * N + i];
        c->out[o] = ot_buf(src->dtype, src->rank ? (int64_t)src->nelem : -1);
    }
    AmpStatus st = {0};
    AmpKernelPrepareFn prep = amp_cpu_kernel_prepare(c->n->op);
    cr_assert_not_null(prep);
    cr_assert_eq(prep(c->n, 1, &c->attrs, &st), AMP_OK, "%s", st.msg);
    return c;
}

/* The input output o replaces. */
static inline const AmpBuf *ot_src(const OtCase *c, int o) {
    int g = o / c->N, i = o % c->N;
    return &c->in[2 + (g ? g + 1 : 0) * c->N + i];
}

/* Runs the CPU kernel on c's buffers with gate (NULL: none). */
static inline AmpCode ot_run_cpu(OtCase *c, const AmpBuf *gate, AmpStatus *st) {
    amp_status_clear(st);
    AmpKernelCtx k = {.node = c->n,
                      .opset = 1,
                      .n_in = c->n_in,
                      .in = c->inp,
                      .n_out = c->n_out,
                      .out = c->out,
                      .attrs = c->attrs,
                      .gate = gate,
                      .st = st};
    return amp_cpu_kernel(c->n->op)(&k);
}

static inline void ot_free(OtCase *c) {
    for (int i = 0; i < c->n_in; i++) free(c->in[i].data);
    for (int o = 0; o < c->n_out; o++) free(c->out[o].data);
    free(c->attrs);
    amp_model_free(c->m);
    free(c);
}

#endif
