/* Dropout's counter-based mask (ops/dropout_rng.h), which the CPU kernel and the
 * CUDA kernel (kernels/cuda/grad_ops.cu) share: the header against plain references
 * (splitmix64 run sequentially, xorshift64*, the threshold against a double compare),
 * the mask's statistics over 1M elements, the rule saying when a call draws its key, and
 * the CPU Dropout kernel's masks: exactly the header's for the key it drew, the same for
 * the same seed, different from step to step. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/half.h"
#include "ir/ir.h"
#include "ops/dropout_rng.h"
#include "kernels/cpu/kernels.h"
#include "tests/kernels/kernel_test_util.h"

/* ---- the header against references ------------------------------------------------------- */

/* splitmix64 as Vigna publishes it: a state advanced by the golden gamma, then mixed. */
static uint64_t splitmix64_next(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

Test(dropout_rng, bits_are_splitmix64_seeded_with_the_key) {
    const uint64_t keys[3] = {0, 42, 0xdeadbeefcafef00dull};
    for (int k = 0; k < 3; k++) {
        uint64_t s = keys[k];
        for (uint64_t i = 0; i < 4096; i++) {
            uint64_t want = splitmix64_next(&s) >> 11;
            cr_assert_eq(amp_dropout_bits(keys[k], i), want, "key %d element %llu", k, (unsigned long long)i);
        }
    }
    /* far indices: the counter, not a sequence, decides */
    uint64_t big = (1ull << 40) + 7;
    uint64_t s = 42 + big * 0x9e3779b97f4a7c15ull;
    cr_assert_eq(amp_dropout_bits(42, big), splitmix64_next(&s) >> 11);
}

Test(dropout_rng, threshold_is_the_exact_double_compare) {
    cr_assert_eq(amp_dropout_threshold(0.0), 0);
    cr_assert_eq(amp_dropout_threshold(0.5), 1ull << 52);
    cr_assert_eq(amp_dropout_threshold(0.25), 1ull << 51);
    cr_assert_eq(amp_dropout_threshold(1.0), 1ull << 53, "ratio 1 keeps nothing");
    uint64_t s = 7;
    for (int t = 0; t < 100000; t++) {
        uint64_t u = splitmix64_next(&s) >> 11;
        /* float ratios (as models give them), some exactly at u's value */
        double other = (double)(splitmix64_next(&s) >> 11) * 0x1p-53;
        double r = (double)(float)(t % 7 == 0 ? (double)u * 0x1p-53 : other);
        bool want = (double)u * 0x1p-53 >= r;
        cr_assert_eq(u >= amp_dropout_threshold(r), want, "u %llu ratio %.17g", (unsigned long long)u, r);
    }
}

Test(dropout_rng, key_is_one_xorshift64_star_step) {
    uint64_t state = 12345, ref = 12345;
    ref ^= ref >> 12, ref ^= ref << 25, ref ^= ref >> 27;
    uint64_t key = amp_dropout_key(&state);
    cr_assert_eq(state, ref, "the state advanced by one step");
    cr_assert_eq(key, ref * 0x2545f4914f6cdd1dull);
    uint64_t zero = 0;
    amp_dropout_key(&zero);
    cr_assert_neq(zero, 0, "a zero state is replaced, not kept");
}

/* Over 1M elements: the keep rate within 5 sigma of 1 - ratio, neighbours independent
 * (pairs kept at (1 - ratio)^2), and two consecutive keys giving unrelated masks. */
Test(dropout_rng, mask_statistics_over_a_million_elements) {
    enum { N = 1 << 20 };
    const double ratio = 0.3, p = 1 - ratio;
    uint64_t state = 2026, k1 = amp_dropout_key(&state), k2 = amp_dropout_key(&state);
    uint64_t thr = amp_dropout_threshold(ratio);
    uint64_t kept = 0, pairs = 0, agree = 0;
    bool prev = false;
    for (uint64_t i = 0; i < N; i++) {
        bool a = amp_dropout_keep(k1, i, thr), b = amp_dropout_keep(k2, i, thr);
        kept += a;
        pairs += i && a && prev;
        agree += a == b;
        prev = a;
    }
    double sd = sqrt(N * p * (1 - p));
    cr_assert(fabs((double)kept - N * p) < 5 * sd, "kept %llu of %d (want %.0f +- %.0f)", (unsigned long long)kept, N,
              N * p, 5 * sd);
    double pp = p * p, sdp = sqrt(N * pp * (1 - pp));
    cr_assert(fabs((double)pairs - N * pp) < 5 * sdp, "neighbour pairs kept %llu (want %.0f)",
              (unsigned long long)pairs, N * pp);
    double pa = p * p + ratio * ratio, sda = sqrt(N * pa * (1 - pa));
    cr_assert(fabs((double)agree - N * pa) < 5 * sda, "two steps' masks agree on %llu (independent: %.0f)",
              (unsigned long long)agree, N * pa);
}

Test(dropout_rng, when_a_call_draws_its_key) {
    cr_assert(amp_dropout_draws(true, false, false, 10), "a training step");
    cr_assert(amp_dropout_draws(true, true, true, 10), "a training step, even with a seed");
    cr_assert(amp_dropout_draws(false, true, false, 10), "training_mode given, no seed: its value is not read");
    cr_assert_not(amp_dropout_draws(false, true, true, 10), "the seed's MT19937 path");
    cr_assert_not(amp_dropout_draws(false, false, false, 10), "inference");
    cr_assert_not(amp_dropout_draws(true, false, false, 0), "no elements");
}

/* ---- the CPU kernel ------------------------------------------------------------------------- */

#define MAX_OUT 2

typedef struct Harness {
    AmpModel *m;
    AmpNode *node;
    AmpBuf out[MAX_OUT];
    AmpStatus st;
    uint64_t rng;
    bool training;
} Harness;

static AmpBuf *harness_alloc(void *ctx, int index, int dtype, int rank, const int64_t *dims, AmpStatus *st) {
    (void)st;
    Harness *h = ctx;
    return kt_alloc_slot(h->out, MAX_OUT, index, dtype, rank, dims);
}

static Harness *harness(void) {
    Harness *h = calloc(1, sizeof *h);
    h->m = amp_model_new();
    h->node = amp_node_new(h->m->graph, "", "Dropout", "n0", 0, 0);
    h->rng = 12345;
    return h;
}

static void harness_free(Harness *h) {
    for (int i = 0; i < MAX_OUT; i++) free(h->out[i].data);
    amp_model_free(h->m);
    free(h);
}

static AmpCode run(Harness *h, int n_in, const AmpBuf *const *in) {
    return kt_call(h->node, 13, n_in, in, 2, harness_alloc, h, &h->rng, h->training, &h->st);
}

enum { N = 5000 };

/* A training step on N float16 ones: the mask is the header's under the key drawn from
 * the state it started with, and the state moved by that one draw. */
Test(dropout_rng, cpu_kernel_mask_is_the_headers) {
    Harness *h = harness();
    h->training = true;
    int64_t d[1] = {N};
    uint16_t *x = malloc(N * sizeof *x);
    for (int i = 0; i < N; i++) x[i] = amp_f32_to_f16(1.0f);
    AmpBuf X = mkbuf(AMP_DT_FLOAT16, 1, d, x);
    const AmpBuf *in[1] = {&X};
    uint64_t state = h->rng, key = amp_dropout_key(&state), thr = amp_dropout_threshold(0.5);
    cr_assert_eq(run(h, 1, in), AMP_OK, "%s", h->st.msg);
    cr_assert_eq(h->rng, state, "one key drawn per call");
    const uint16_t *y = h->out[0].data;
    const uint8_t *mask = h->out[1].data;
    for (uint64_t i = 0; i < N; i++) {
        bool keep = amp_dropout_keep(key, i, thr);
        cr_assert_eq(mask[i], keep, "element %llu", (unsigned long long)i);
        cr_assert_eq(amp_f16_to_f32(y[i]), keep ? 2.0f : 0.0f);
    }
    free(x);
    harness_free(h);
}

/* Mask of one call with training_mode = true and ratio r, from state `seed`. */
static void mask_of(uint64_t *seed, float r, uint8_t *mask) {
    Harness *h = harness();
    h->rng = *seed;
    int64_t d[1] = {N}, d0[1] = {1};
    float *x = malloc(N * sizeof *x);
    for (int i = 0; i < N; i++) x[i] = 1.0f;
    uint8_t t = 1;
    AmpBuf X = mkbuf(AMP_DT_FLOAT, 1, d, x), R = mkbuf(AMP_DT_FLOAT, 0, d0, &r), T = mkbuf(AMP_DT_BOOL, 0, d0, &t);
    const AmpBuf *in[3] = {&X, &R, &T};
    cr_assert_eq(run(h, 3, in), AMP_OK, "%s", h->st.msg);
    memcpy(mask, h->out[1].data, N);
    *seed = h->rng;
    free(x);
    harness_free(h);
}

Test(dropout_rng, same_seed_same_mask_next_step_another) {
    static uint8_t a[N], b[N], c[N];
    uint64_t s1 = 99, s2 = 99;
    mask_of(&s1, 0.4f, a);
    mask_of(&s2, 0.4f, b);
    cr_assert_eq(memcmp(a, b, N), 0, "the same seed gives the same mask");
    mask_of(&s1, 0.4f, c); /* the next call from the advanced state */
    cr_assert_neq(memcmp(a, c, N), 0, "the next step's mask differs");
    int kept = 0;
    for (int i = 0; i < N; i++) kept += a[i];
    cr_assert(kept > N * 0.55 && kept < N * 0.65, "kept %d of %d at ratio 0.4", kept, N);
}

/* Inference draws nothing; the model's seed (MT19937) draws nothing from the session. */
Test(dropout_rng, inference_and_seeded_calls_leave_the_state) {
    Harness *h = harness();
    int64_t d[1] = {4}, d0[1] = {1};
    float x[4] = {1, 2, 3, 4}, r = 0.5f;
    uint8_t t = 1;
    AmpBuf X = mkbuf(AMP_DT_FLOAT, 1, d, x), R = mkbuf(AMP_DT_FLOAT, 0, d0, &r), T = mkbuf(AMP_DT_BOOL, 0, d0, &t);
    const AmpBuf *one[1] = {&X}, *three[3] = {&X, &R, &T};
    cr_assert_eq(run(h, 1, one), AMP_OK, "%s", h->st.msg);
    cr_assert_eq(h->rng, 12345, "inference");
    attr_int(h->node, "seed", 3);
    cr_assert_eq(run(h, 3, three), AMP_OK, "%s", h->st.msg);
    cr_assert_eq(h->rng, 12345, "seeded training_mode");
    harness_free(h);
}
