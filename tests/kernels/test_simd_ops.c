/* The fast paths of the 16-bit CPU kernels against the paths they replace, bit for bit:
 * - Add, Sub, Mul, Div on float16 / bfloat16 (AVX-512 rows, kernels/cpu/simd.c) against
 *   the scalar rule (widen, one fp32 operation, round once), same-shape and broadcast, at
 *   lengths 0, 1, 15, 16, 17 and 1000, over NaN, inf, subnormal and rounding-tie inputs;
 * - the unary maps that read a table of all 65536 results (Erf, Exp, Tanh, Sigmoid,
 *   Gelu...) against the same op on the same data in pieces too small for the table;
 * - Softmax / LogSoftmax of contiguous rows (the row path) against the same data
 *   transposed and normalised along axis 0 (the general path), float32 and 16-bit. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/half.h"
#include "ir/ir.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/simd.h"
#include "tests/kernels/kernel_test_util.h"

static const int64_t lengths[] = {0, 1, 15, 16, 17, 1000};
static const int dtypes[] = {AMP_DT_FLOAT16, AMP_DT_BFLOAT16};

static float widen(int dt, uint16_t h) {
    return dt == AMP_DT_FLOAT16 ? amp_f16_to_f32(h) : amp_bf16_to_f32(h);
}

static uint16_t narrow(int dt, float f) {
    return dt == AMP_DT_FLOAT16 ? amp_f32_to_f16(f) : amp_f32_to_bf16(f);
}

static uint32_t rng = 2463534242u;
static uint16_t rnd16(void) {
    rng ^= rng << 13;
    rng ^= rng >> 17;
    rng ^= rng << 5;
    return (uint16_t)rng;
}

/* n 16-bit values: specials of the type first (zeros, smallest subnormals, inf, NaNs,
 * values whose sums and products tie), then random patterns. */
static uint16_t *values16(int dt, int64_t n) {
    static const uint16_t f16s[] = {0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x7c00, 0xfc00, 0x7e00,
                                    0x7d01, 0xfe01, 0x3c00, 0x3c01, 0x1000, 0x7bff, 0xfbff, 0x6800};
    static const uint16_t bf16s[] = {0x0000, 0x8000, 0x0001, 0x8001, 0x007f, 0x7f80, 0xff80, 0x7fc0,
                                     0x7f81, 0xffc1, 0x3f80, 0x3f81, 0x4380, 0x7f7f, 0xff7f, 0x3b80};
    const uint16_t *s = dt == AMP_DT_FLOAT16 ? f16s : bf16s;
    uint16_t *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    cr_assert(v);
    for (int64_t i = 0; i < n; i++) v[i] = i < 16 ? s[(i * 7) % 16] : rnd16();
    return v;
}

static AmpNode *node(AmpModel *m, const char *op, int n_in) {
    return amp_node_new(m->graph, "", op, "n", n_in, 1);
}

/* ---- binary ------------------------------------------------------------------------ */

static float apply(int op, float x, float y) {
    switch (op) {
    case 0: return x + y;
    case 1: return x - y;
    case 2: return x * y;
    default: return x / y;
    }
}

static float quiet(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    u |= 0x400000u;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* What the scalar rows give (elementwise.c's AMP_EW_ROW2 as GCC compiles it for x86-64):
 * x op y, and with a NaN operand x86's NaN: the first operand's, quieted, if it is a NaN,
 * else the second's. The first operand is x, except for Add and Mul with A broadcast
 * along the row (the operation then writes into y). */
static float reference(int op, float x, float y, bool a_broadcast) {
    bool swap = a_broadcast && (op == 0 || op == 2);
    float p = swap ? y : x, q = swap ? x : y;
    if (isnan(p)) return quiet(p);
    if (isnan(q)) return quiet(q);
    return apply(op, x, y);
}

Test(simd_ops, binary_16bit_matches_scalar) {
    static const char *ops[] = {"Add", "Sub", "Mul", "Div"};
    cr_log_info("AVX-512 rows: %s", amp_simd_have() ? "yes" : "no (block path against scalar)");
    for (int oi = 0; oi < 4; oi++)
        for (size_t di = 0; di < 2; di++)
            for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++)
                for (int bc = 0; bc < 3; bc++) { /* 0: same shape; 1: B is [1]; 2: A is [1] */
                    int dt = dtypes[di];
                    int64_t n = lengths[li], na = bc == 2 ? 1 : n, nb = bc == 1 ? 1 : n;
                    if (bc && !n) continue;
                    AmpModel *m = amp_model_new();
                    AmpNode *nd = node(m, ops[oi], 2);
                    uint16_t *a = values16(dt, na), *b = values16(dt, nb);
                    if (nb > 1) /* pair the specials with every other special */
                        for (int64_t i = 0; i < 16 && i < nb; i++) b[i] = a[(i * 5 + 3) % (na < 16 ? na : 16)];
                    int64_t da[1] = {na}, db[1] = {nb};
                    AmpBuf A = mkbuf(dt, 1, da, a), B = mkbuf(dt, 1, db, b);
                    const AmpBuf *in[2] = {&A, &B};
                    Outs o;
                    AmpStatus st = {0};
                    cr_assert_eq(kt_run(nd, 14, 2, in, 1, &o, &st), AMP_OK, "%s", st.msg);
                    cr_assert_eq(o.b[0].nelem, (uint64_t)n);
                    const uint16_t *y = o.b[0].data;
                    for (int64_t i = 0; i < n; i++) {
                        uint16_t want = narrow(dt, reference(oi, widen(dt, a[na > 1 ? i : 0]), widen(dt, b[nb > 1 ? i : 0]),
                                                                   bc == 2 && n > 1));
                        cr_assert_eq(y[i], want, "%s %s n=%lld bcast=%d [%lld]: %04x op %04x = %04x, want %04x",
                                     ops[oi], amp_dtype_name(dt), (long long)n, bc, (long long)i,
                                     a[na > 1 ? i : 0], b[nb > 1 ? i : 0], y[i], want);
                    }
                    outs_free(&o);
                    free(a), free(b);
                    amp_model_free(m);
                }
}

Test(simd_ops, binary_f32_matches_scalar) {
    static const char *ops[] = {"Add", "Sub", "Mul", "Div"};
    static const uint32_t sp[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff812345u, 0x7f800000u, 0xff800000u,
                                  0x00000000u, 0x80000000u, 0x00000001u, 0x807fffffu, 0x3f800000u, 0x33800000u};
    for (int oi = 0; oi < 4; oi++)
        for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++)
            for (int bc = 0; bc < 3; bc++) {
                int64_t n = lengths[li], na = bc == 2 ? 1 : n, nb = bc == 1 ? 1 : n;
                if (bc && !n) continue;
                float *a = malloc((size_t)(na ? na : 1) * 4), *b = malloc((size_t)(nb ? nb : 1) * 4);
                cr_assert(a && b);
                for (int64_t i = 0; i < na; i++) {
                    uint32_t u = i < 24 || i % 3 == 0 ? sp[(i * 7) % 12] : ((uint32_t)rnd16() << 16 | rnd16());
                    memcpy(&a[i], &u, 4);
                }
                for (int64_t i = 0; i < nb; i++) {
                    uint32_t u = i < 24 || i % 3 == 1 ? sp[(i * 5 + 1) % 12] : ((uint32_t)rnd16() << 16 | rnd16());
                    memcpy(&b[i], &u, 4);
                }
                AmpModel *m = amp_model_new();
                AmpNode *nd = node(m, ops[oi], 2);
                int64_t da[1] = {na}, db[1] = {nb};
                AmpBuf A = mkbuf(AMP_DT_FLOAT, 1, da, a), B = mkbuf(AMP_DT_FLOAT, 1, db, b);
                const AmpBuf *in[2] = {&A, &B};
                Outs o;
                AmpStatus st = {0};
                cr_assert_eq(kt_run(nd, 14, 2, in, 1, &o, &st), AMP_OK, "%s", st.msg);
                const float *y = o.b[0].data;
                for (int64_t i = 0; i < n; i++) {
                    float want = reference(oi, a[na > 1 ? i : 0], b[nb > 1 ? i : 0], bc == 2 && n > 1);
                    cr_assert(!memcmp(&y[i], &want, 4), "%s float n=%lld bcast=%d [%lld]: %a, want %a", ops[oi],
                              (long long)n, bc, (long long)i, (double)y[i], (double)want);
                }
                outs_free(&o);
                free(a), free(b);
                amp_model_free(m);
            }
}

/* The AVX-512 rows on their own, aliasing the output with an input (in-place runs). */
Test(simd_ops, binary_rows_in_place) {
    if (!amp_simd_have()) return;
    for (size_t di = 0; di < 2; di++) {
        int dt = dtypes[di];
        uint16_t *a = values16(dt, 1000), *b = values16(dt, 1000), *c = malloc(1000 * sizeof *c);
        cr_assert(c);
        memcpy(c, a, 1000 * sizeof *c);
        cr_assert(amp_simd_row2_half(AMP_SIMD_MUL, dt, c, c, 1, b, 1, 1000));
        for (int i = 0; i < 1000; i++) cr_assert_eq(c[i], narrow(dt, widen(dt, a[i]) * widen(dt, b[i])), "[%d]", i);
        free(a), free(b), free(c);
    }
}

/* ---- unary maps through tables ----------------------------------------------------- */

typedef struct UnaryCase {
    const char *op;
    int64_t opset;
    const char *gelu; /* Gelu's approximate attribute, or NULL */
} UnaryCase;

static uint16_t *run_unary(const UnaryCase *u, int dt, const uint16_t *x, int64_t n) {
    AmpModel *m = amp_model_new();
    AmpNode *nd = node(m, u->op, 1);
    if (u->gelu) attr_str(nd, "approximate", u->gelu);
    int64_t d[1] = {n};
    AmpBuf X = mkbuf(dt, 1, d, x);
    const AmpBuf *in[1] = {&X};
    Outs o;
    AmpStatus st = {0};
    cr_assert_eq(kt_run(nd, u->opset, 1, in, 1, &o, &st), AMP_OK, "%s: %s", u->op, st.msg);
    uint16_t *y = malloc((size_t)(n ? n : 1) * sizeof *y);
    cr_assert(y);
    if (n) memcpy(y, o.b[0].data, (size_t)n * sizeof *y);
    outs_free(&o);
    amp_model_free(m);
    return y;
}

Test(simd_ops, unary_tables_match_block_path) {
    static const UnaryCase cases[] = {
        {"Erf", 13, NULL},     {"Exp", 13, NULL},  {"Log", 13, NULL},          {"Tanh", 13, NULL},
        {"Sigmoid", 13, NULL}, {"Sin", 7, NULL},   {"Softplus", 1, NULL},      {"Elu", 6, NULL},
        {"Gelu", 20, "none"},  {"Gelu", 20, "tanh"}, {"Selu", 6, NULL},        {"Atanh", 9, NULL},
    };
    int64_t n = 65536 + 17; /* every pattern (and then some): the table path */
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++)
        for (size_t di = 0; di < 2; di++) {
            int dt = dtypes[di];
            uint16_t *x = malloc((size_t)n * sizeof *x);
            cr_assert(x);
            for (int64_t i = 0; i < n; i++) x[i] = (uint16_t)(i * 40503u);
            uint16_t *whole = run_unary(&cases[ci], dt, x, n);
            /* the same elements in pieces of lengths 1000, 17, 16, 15, 1, 0 (block path) */
            int64_t at = 0;
            for (size_t k = 0; at < n; k++) {
                int64_t len = lengths[sizeof lengths / sizeof lengths[0] - 1 - k % 6];
                if (len > n - at) len = n - at;
                uint16_t *part = run_unary(&cases[ci], dt, x + at, len);
                for (int64_t i = 0; i < len; i++)
                    cr_assert_eq(whole[at + i], part[i], "%s %s of %04x: table %04x, block path %04x", cases[ci].op,
                                 amp_dtype_name(dt), x[at + i], whole[at + i], part[i]);
                free(part);
                at += len;
            }
            free(whole), free(x);
        }
}

/* ---- Softmax rows ------------------------------------------------------------------ */

static void *run_softmax(const char *op, int dt, int64_t d0, int64_t d1, int64_t axis, const void *x) {
    AmpModel *m = amp_model_new();
    AmpNode *nd = node(m, op, 1);
    attr_int(nd, "axis", axis);
    int64_t d[2] = {d0, d1};
    AmpBuf X = mkbuf(dt, 2, d, x);
    const AmpBuf *in[1] = {&X};
    Outs o;
    AmpStatus st = {0};
    cr_assert_eq(kt_run(nd, 13, 1, in, 1, &o, &st), AMP_OK, "%s: %s", op, st.msg);
    size_t es = dt == AMP_DT_FLOAT ? 4 : 2, bytes = (size_t)(d0 * d1) * es;
    void *y = malloc(bytes ? bytes : 1);
    cr_assert(y);
    if (bytes) memcpy(y, o.b[0].data, bytes);
    outs_free(&o);
    amp_model_free(m);
    return y;
}

Test(simd_ops, softmax_rows_match_general_path) {
    static const char *ops[] = {"Softmax", "LogSoftmax"};
    static const int sdt[] = {AMP_DT_FLOAT, AMP_DT_FLOAT16, AMP_DT_BFLOAT16};
    static const float specials[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-40f, -1e-40f, 88.0f, -104.0f, 3.5f};
    const int64_t rows = 3;
    for (int oi = 0; oi < 2; oi++)
        for (int ti = 0; ti < 3; ti++)
            for (size_t li = 1; li < sizeof lengths / sizeof lengths[0]; li++) {
                int dt = sdt[ti];
                int64_t D = lengths[li];
                size_t es = dt == AMP_DT_FLOAT ? 4 : 2;
                uint8_t *x = malloc((size_t)(rows * D) * es), *xt = malloc((size_t)(rows * D) * es);
                cr_assert(x && xt);
                for (int64_t r = 0; r < rows; r++)
                    for (int64_t j = 0; j < D; j++) {
                        /* row 0: specials among ordinary values (NaN, infs); row 1: ordinary;
                         * row 2: zeros and subnormals only */
                        float v = (float)(rnd16() % 2001) / 100.0f - 10.0f;
                        if (r == 0 && j % 7 == 3) v = specials[(j / 7) % 10];
                        if (r == 2) v = specials[3 + j % 4];
                        int64_t at = r * D + j, att = j * rows + r;
                        if (dt == AMP_DT_FLOAT) {
                            memcpy(x + at * 4, &v, 4);
                            memcpy(xt + att * 4, &v, 4);
                        } else {
                            uint16_t h = narrow(dt, v);
                            memcpy(x + at * 2, &h, 2);
                            memcpy(xt + att * 2, &h, 2);
                        }
                    }
                uint8_t *y = run_softmax(ops[oi], dt, rows, D, -1, x), *yt = run_softmax(ops[oi], dt, D, rows, 0, xt);
                for (int64_t r = 0; r < rows; r++)
                    for (int64_t j = 0; j < D; j++)
                        cr_assert(!memcmp(y + (r * D + j) * es, yt + (j * rows + r) * es, es), "%s %s D=%lld [%lld,%lld] %08x %08x",
                                  ops[oi], amp_dtype_name(dt), (long long)D, (long long)r, (long long)j, *(uint32_t *)(void *)(y + (r * D + j) * es), *(uint32_t *)(void *)(yt + (j * rows + r) * es));
                free(x), free(xt), free(y), free(yt);
            }
}

/* ---- LayerNormalization rows ------------------------------------------------------- */

/* Y of LayerNormalization(X [3, 4, c2], Scale, B) at axis 1, Scale and B of shape sdims. */
static float *run_layernorm(int64_t c2, const float *x, const float *s, const float *b, int srank,
                            const int64_t *sdims) {
    AmpModel *m = amp_model_new();
    AmpNode *nd = node(m, "LayerNormalization", 3);
    attr_int(nd, "axis", 1);
    int64_t xd[3] = {3, 4, c2};
    AmpBuf X = mkbuf(AMP_DT_FLOAT, 3, xd, x), S = mkbuf(AMP_DT_FLOAT, srank, sdims, s),
           B = mkbuf(AMP_DT_FLOAT, srank, sdims, b);
    const AmpBuf *in[3] = {&X, &S, &B};
    Outs o;
    AmpStatus st = {0};
    cr_assert_eq(kt_run(nd, 17, 3, in, 1, &o, &st), AMP_OK, "%s", st.msg);
    size_t n = (size_t)(12 * c2);
    float *y = malloc((n ? n : 1) * sizeof *y);
    cr_assert(y);
    if (n) memcpy(y, o.b[0].data, n * sizeof *y);
    outs_free(&o);
    amp_model_free(m);
    return y;
}

/* Scale and B of shape [4, c2] (the AVX-512 rows) against the same values as [1, c2]
 * broadcast over the 4 (the general loop), with NaNs, infinities and subnormals. */
Test(simd_ops, layernorm_rows_match_general_path) {
    static const float sp[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-40f, 3.0f};
    static const int64_t c2s[] = {1, 4, 5, 250};
    for (size_t ci = 0; ci < sizeof c2s / sizeof c2s[0]; ci++) {
        int64_t c2 = c2s[ci], n = 12 * c2;
        float *x = malloc((size_t)n * sizeof *x), *s = malloc((size_t)(4 * c2) * sizeof *s),
              *b = malloc((size_t)(4 * c2) * sizeof *b);
        cr_assert(x && s && b);
        for (int64_t i = 0; i < n; i++) {
            x[i] = (float)(rnd16() % 2001) / 100.0f - 10.0f;
            if (i < 4 * c2 && i % 5 == 2) x[i] = sp[(i / 5) % 8]; /* row 0 only: others stay finite */
        }
        for (int64_t j = 0; j < c2; j++) {
            s[j] = (float)(rnd16() % 200) / 50.0f - 2.0f;
            b[j] = (float)(rnd16() % 200) / 50.0f - 2.0f;
            if (j % 7 == 3) s[j] = sp[(j / 7) % 8];
            if (j % 11 == 4) b[j] = sp[(j / 11 + 3) % 8];
        }
        for (int64_t r = 1; r < 4; r++) memcpy(s + r * c2, s, (size_t)c2 * sizeof *s), memcpy(b + r * c2, b, (size_t)c2 * sizeof *b);
        int64_t full[2] = {4, c2}, bcast[2] = {1, c2};
        float *fast = run_layernorm(c2, x, s, b, 2, full), *slow = run_layernorm(c2, x, s, b, 2, bcast);
        /* Bit for bit, except which NaN: the general path's is the compiler's choice of
         * operand order (an unoptimised build, the sanitizers', picks the other one). */
        for (int64_t i = 0; i < n; i++)
            cr_assert(!memcmp(&fast[i], &slow[i], sizeof *fast) || (isnan(fast[i]) && isnan(slow[i])),
                      "c2=%lld [%lld]: %a vs %a", (long long)c2, (long long)i, (double)fast[i], (double)slow[i]);
        free(x), free(s), free(b), free(fast), free(slow);
    }
}
