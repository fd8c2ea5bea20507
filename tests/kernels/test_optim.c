/* The CPU optimizers (kernels/cpu/optim.c) and the fused update gate (AmpKernelCtx.gate):
 * for Adam, Momentum (standard and Nesterov) and Adagrad over tensors of several dtypes,
 * a false gate gives the same bytes as no gate; a true one leaves every output a bit copy
 * of the input it replaces (a NaN gradient, -0, subnormals and NaN payloads in the
 * state included), whether the outputs are separate buffers or the inputs themselves;
 * a gate that is not one bool is refused. And the shared arithmetic (optim_math.h): its
 * powers agree with pow(). */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <string.h>

#include "ops/optim_math.h"
#include "tests/kernels/optim_test_util.h"

enum { F = AMP_DT_FLOAT, H = AMP_DT_FLOAT16, B = AMP_DT_BFLOAT16, D = AMP_DT_DOUBLE };

/* Five tensors: float32, 16-bit data with float32 state, bfloat16, double, a scalar. */
static const int64_t sizes[5] = {37, 12, 9, 5, -1};
static const int dts[5][4] = {{F, F, F, F}, {H, H, F, F}, {B, B, B, B}, {D, D, D, D}, {F, H, F, F}};

static OtCase *make(const char *op, const char *mode, int n_out) {
    return ot_new(op, mode, 5, sizes, dts, n_out, 0.05, 3, 0x1234567u);
}

static AmpBuf gate_buf(uint8_t *v) {
    AmpBuf g = {.dtype = AMP_DT_BOOL, .rank = 0, .nelem = 1, .data = v};
    return g;
}

/* Bit patterns the copy must keep: a NaN gradient, and -0, a subnormal and a NaN with a
 * payload in X and the state. */
static void plant_specials(OtCase *c) {
    float nan_payload, sub = 1e-40f, neg0 = -0.0f;
    uint32_t bits = 0x7fc01234u;
    memcpy(&nan_payload, &bits, sizeof bits);
    ((float *)c->in[2 + c->N].data)[3] = NAN;    /* G of tensor 0 */
    ((float *)c->in[2].data)[1] = neg0;          /* X of tensor 0 */
    ((float *)c->in[2].data)[2] = sub;
    ((float *)c->in[2 + 2 * c->N].data)[4] = nan_payload; /* state 1 of tensor 0 */
}

static const char *const ops[4][2] = {{"Adam", NULL}, {"Momentum", "standard"}, {"Momentum", "nesterov"},
                                      {"Adagrad", NULL}};

/* A false gate changes nothing; the update changes every output somewhere (so that a
 * kernel ignoring a true gate fails the next test). */
Test(optim, gate_false_is_the_ungated_update) {
    for (int k = 0; k < 4; k++) {
        OtCase *c = make(ops[k][0], ops[k][1], -1);
        plant_specials(c);
        AmpStatus st;
        cr_assert_eq(ot_run_cpu(c, NULL, &st), AMP_OK, "%s: %s", ops[k][0], st.msg);
        void *want[3 * OT_MAX];
        for (int o = 0; o < c->n_out; o++) {
            size_t n = ot_bytes(&c->out[o]);
            want[o] = malloc(n + 1);
            memcpy(want[o], c->out[o].data, n);
            if (o % c->N != 4) /* the scalar may not move much in 16 bits */
                cr_expect(memcmp(c->out[o].data, ot_src(c, o)->data, n) != 0, "%s: output %d is its input", ops[k][0],
                          o);
            memset(c->out[o].data, 0xa5, n);
        }
        uint8_t off = 0;
        AmpBuf g = gate_buf(&off);
        cr_assert_eq(ot_run_cpu(c, &g, &st), AMP_OK, "%s: %s", ops[k][0], st.msg);
        for (int o = 0; o < c->n_out; o++) {
            cr_expect_eq(memcmp(c->out[o].data, want[o], ot_bytes(&c->out[o])), 0, "%s %s: output %d differs",
                         ops[k][0], ops[k][1] ? ops[k][1] : "", o);
            free(want[o]);
        }
        ot_free(c);
    }
}

/* A true gate: every output equals the input it replaces, bit for bit. */
Test(optim, gate_true_copies_the_inputs) {
    for (int k = 0; k < 4; k++) {
        OtCase *c = make(ops[k][0], ops[k][1], -1);
        plant_specials(c);
        for (int o = 0; o < c->n_out; o++) memset(c->out[o].data, 0xa5, ot_bytes(&c->out[o]));
        uint8_t on = 1;
        AmpBuf g = gate_buf(&on);
        AmpStatus st;
        cr_assert_eq(ot_run_cpu(c, &g, &st), AMP_OK, "%s: %s", ops[k][0], st.msg);
        for (int o = 0; o < c->n_out; o++)
            cr_expect_eq(memcmp(c->out[o].data, ot_src(c, o)->data, ot_bytes(&c->out[o])), 0,
                         "%s %s: output %d is not its input", ops[k][0], ops[k][1] ? ops[k][1] : "", o);
        ot_free(c);
    }
}

/* In place (each output the buffer of its input) and with only the X outputs listed: a
 * true gate leaves everything as it was. */
Test(optim, gate_true_in_place_and_unlisted_outputs) {
    for (int k = 0; k < 4; k++) {
        OtCase *c = make(ops[k][0], ops[k][1], -1);
        plant_specials(c);
        void *keep[4 * OT_MAX + 2];
        for (int i = 2; i < c->n_in; i++) {
            keep[i] = malloc(ot_bytes(&c->in[i]) + 1);
            memcpy(keep[i], c->in[i].data, ot_bytes(&c->in[i]));
        }
        for (int o = 0; o < c->n_out; o++) {
            free(c->out[o].data);
            c->out[o].data = ot_src(c, o)->data;
        }
        uint8_t on = 1;
        AmpBuf g = gate_buf(&on);
        AmpStatus st;
        cr_assert_eq(ot_run_cpu(c, &g, &st), AMP_OK, "%s: %s", ops[k][0], st.msg);
        for (int i = 2; i < c->n_in; i++) {
            cr_expect_eq(memcmp(c->in[i].data, keep[i], ot_bytes(&c->in[i])), 0, "%s: input %d changed", ops[k][0], i);
            free(keep[i]);
        }
        for (int o = 0; o < c->n_out; o++) c->out[o].data = NULL; /* not ours to free */
        ot_free(c);
        /* only X_new listed */
        c = make(ops[k][0], ops[k][1], 5);
        for (int o = 0; o < c->n_out; o++) memset(c->out[o].data, 0xa5, ot_bytes(&c->out[o]));
        cr_assert_eq(ot_run_cpu(c, &g, &st), AMP_OK, "%s: %s", ops[k][0], st.msg);
        for (int o = 0; o < c->n_out; o++)
            cr_expect_eq(memcmp(c->out[o].data, ot_src(c, o)->data, ot_bytes(&c->out[o])), 0);
        ot_free(c);
    }
}

Test(optim, gate_must_be_one_bool) {
    OtCase *c = make("Adam", NULL, -1);
    AmpStatus st;
    float f = 1.0f;
    uint8_t two[2] = {0, 0};
    AmpBuf g = {.dtype = AMP_DT_FLOAT, .rank = 0, .nelem = 1, .data = &f};
    cr_expect_eq(ot_run_cpu(c, &g, &st), AMP_ERR_INPUT);
    cr_expect(strstr(st.msg, "gate"), "%s", st.msg);
    g = (AmpBuf){.dtype = AMP_DT_BOOL, .rank = 1, .nelem = 2, .data = two};
    g.dims[0] = 2;
    cr_expect_eq(ot_run_cpu(c, &g, &st), AMP_ERR_INPUT);
    ot_free(c);
}

/* The powers of the bias correction: repeated squaring, whose relative error grows at
 * most like t ulps (pow's is under one), so within 2 t DBL_EPSILON of pow(). */
Test(optim, powi_agrees_with_pow) {
    const double bases[3] = {0.9, 0.999, 0.85000002384185791};
    const int64_t ts[6] = {1, 2, 3, 17, 1000, 123456};
    for (int b = 0; b < 3; b++)
        for (int t = 0; t < 6; t++) {
            double want = pow(bases[b], (double)ts[t]), got = amp_opt_powi(bases[b], ts[t]);
            cr_expect(fabs(got - want) <= 2.0 * (double)ts[t] * DBL_EPSILON * want, "%.17g^%lld: %.17g, pow %.17g",
                      bases[b], (long long)ts[t], got, want);
        }
    cr_expect_eq(amp_opt_powi(0.5, 0), 1.0);
}
