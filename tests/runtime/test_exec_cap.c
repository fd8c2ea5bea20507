/* The 64 GiB cap on a single output allocation, in the executor's allocator that every
 * kernel calls (runtime/exec.c): an Expand of a scalar, ConstantOfShape, Tile, a MatMul
 * outer product, a broadcast Add and a broadcast Equal one byte over the cap, all from
 * small inputs, fail with AMP_ERR_UNSUPPORTED (returned and in the status) and a message
 * naming the node and the size. A shape whose element count overflows is AMP_ERR_INPUT.
 * In every case nothing is allocated or crashes, and the same session then runs a
 * normal-sized input.
 * If a cap ever broke, the giant malloc must fail rather than take the machine: the
 * address space is limited (setrlimit; under AddressSanitizer, which reserves terabytes
 * of shadow, its allocator's own limit instead), so a broken cap shows as a failed
 * assertion ("out of memory"), never as the OOM killer. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>

#include "tests/runtime/rt_util.h"

#if defined(__SANITIZE_ADDRESS__)
#define CAP_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CAP_ASAN 1
#endif
#endif

#ifdef CAP_ASAN
/* Read by ASan at start-up, before ASAN_OPTIONS (which may still override it). */
const char *__asan_default_options(void);
const char *__asan_default_options(void) {
    return "allocator_may_return_null=1:max_allocation_size_mb=16384";
}
#endif

static void limit_memory(void) {
#ifndef CAP_ASAN
    struct rlimit rl = {(rlim_t)32 << 30, (rlim_t)32 << 30};
    struct rlimit cur;
    if (getrlimit(RLIMIT_AS, &cur) == 0 && cur.rlim_max != RLIM_INFINITY && cur.rlim_max < rl.rlim_max)
        rl.rlim_cur = rl.rlim_max = cur.rlim_max;
    cr_assert_eq(setrlimit(RLIMIT_AS, &rl), 0, "setrlimit");
#endif
}

TestSuite(exec_cap, .init = limit_memory);

#define CAP_BYTES (UINT64_C(64) << 30)
#define CAP_TEXT "68719476736"

static AmpSession *open_model(AmpModel *m) {
    AmpSession *s = NULL;
    AmpStatus st = {0};
    AmpSessionOptions o = {.ignore_env = true};
    cr_assert_eq(rt_open(m, &o, &s, &st), AMP_OK, "open: %s", st.msg);
    return s;
}

/* Runs s on `in` expecting failure with `code` (returned, and in the status) and every
 * one of `want` (NULL-ended) in the message; no output may be left allocated. */
static void run_fails(AmpSession *s, const AmpTensorView *in, size_t n_in, AmpCode code, const char *const *want) {
    AmpStatus st = {0};
    AmpTensorView out;
    memset(&out, 0, sizeof out);
    const char *names[1] = {"y"};
    AmpCode rc = amp_session_run(s, in, n_in, names, 1, &out, &st);
    cr_assert_eq(rc, code, "returned %d (%s), want %d: %s", (int)rc, amp_code_name(rc), (int)code, st.msg);
    cr_assert_eq(st.code, code, "status code %d (%s), want %d: %s", (int)st.code, amp_code_name(st.code), (int)code,
                 st.msg);
    for (size_t i = 0; want[i]; i++) cr_assert_not_null(strstr(st.msg, want[i]), "'%s' not in: %s", want[i], st.msg);
    cr_assert_null(out.data, "no output is left allocated on failure");
}

/* Runs s on `in` expecting success; y's dims must be `dims`; returns y (caller frees). */
static AmpTensorView run_ok(AmpSession *s, const AmpTensorView *in, size_t n_in, int rank, const int64_t *dims) {
    AmpStatus st = {0};
    AmpTensorView out;
    const char *names[1] = {"y"};
    cr_assert_eq(amp_session_run(s, in, n_in, names, 1, &out, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(out.rank, rank);
    for (int i = 0; i < rank; i++) cr_assert_eq(out.dims[i], dims[i], "dim %d: %lld", i, (long long)out.dims[i]);
    return out;
}

/* ---- the shape family: their kernels' own cap (kernels/cpu/shape.c) ---------------------- */

/* y = Expand(x, shape): x a float scalar, shape an int64 [3] input. */
static AmpModel *expand_model(void) {
    AmpModel *m = rt_model(17);
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "");
    rt_input(g, "shape", AMP_DT_INT64, "3");
    AmpNode *n = rt_node(g, "", "Expand", "x,shape", "y");
    n->name = "big/expand";
    rt_output(g, "y", AMP_DT_FLOAT, NULL);
    return m;
}

Test(exec_cap, expand_of_a_scalar_to_80_gib_fails_naming_the_node) {
    AmpSession *s = open_model(expand_model());
    float x = 2.5f;
    const int64_t sd[1] = {3};
    int64_t shape[3] = {65536, 65536, 5}; /* 2^32 * 5 floats: 80 GiB */
    AmpTensorView in[2] = {rt_view("x", AMP_DT_FLOAT, &x, 0, NULL), rt_view("shape", AMP_DT_INT64, shape, 1, sd)};
    const char *want[] = {"node 'big/expand' (Expand)", "output 0 would take", "over the " CAP_TEXT "-byte limit", NULL};
    run_fails(s, in, 2, AMP_ERR_UNSUPPORTED, want);
    /* Twice: the failure left nothing behind that the next run trips on. */
    run_fails(s, in, 2, AMP_ERR_UNSUPPORTED, want);
    /* A normal shape now runs in the same session. */
    shape[0] = 2, shape[1] = 3, shape[2] = 4;
    const int64_t yd[3] = {2, 3, 4};
    AmpTensorView y = run_ok(s, in, 2, 3, yd);
    cr_assert_eq(y.dtype, AMP_DT_FLOAT);
    for (int i = 0; i < 24; i++) cr_assert_eq(((float *)y.data)[i], 2.5f);
    amp_tensor_view_free(&y);
    /* And a huge one fails again after a success (the plan made from the small run). */
    shape[0] = 65536, shape[1] = 65536, shape[2] = 5;
    run_fails(s, in, 2, AMP_ERR_UNSUPPORTED, want);
    shape[0] = 1, shape[1] = 1, shape[2] = 1;
    const int64_t one[3] = {1, 1, 1};
    y = run_ok(s, in, 2, 3, one);
    cr_assert_eq(((float *)y.data)[0], 2.5f);
    amp_tensor_view_free(&y);
    amp_session_close(s);
}

Test(exec_cap, an_element_count_past_int64_is_bad_input) {
    AmpSession *s = open_model(expand_model());
    float x = 1;
    const int64_t sd[1] = {3};
    int64_t shape[3] = {INT64_C(1) << 31, INT64_C(1) << 31, 4}; /* 2^64 elements */
    AmpTensorView in[2] = {rt_view("x", AMP_DT_FLOAT, &x, 0, NULL), rt_view("shape", AMP_DT_INT64, shape, 1, sd)};
    const char *want[] = {"node 'big/expand' (Expand)", NULL};
    run_fails(s, in, 2, AMP_ERR_INPUT, want);
    shape[0] = 1, shape[1] = 2, shape[2] = 1;
    const int64_t yd[3] = {1, 2, 1};
    AmpTensorView y = run_ok(s, in, 2, 3, yd);
    amp_tensor_view_free(&y);
    amp_session_close(s);
}


/* y = ConstantOfShape(shape), value a one-element tensor of `dt` (uint8 or float). */
static AmpModel *const_of_shape_model(int dt, int rank) {
    AmpModel *m = rt_model(17);
    AmpGraph *g = m->graph;
    char dims[8];
    snprintf(dims, sizeof dims, "%d", rank);
    rt_input(g, "shape", AMP_DT_INT64, dims);
    AmpNode *n = rt_node(g, "", "ConstantOfShape", "shape", "y");
    n->name = "fill";
    AmpTensor *t = amp_arena_calloc(&m->arena, 1, sizeof *t);
    t->dtype = dt;
    t->has = AMP_TENSOR_HAS_DTYPE | AMP_TENSOR_HAS_RAW;
    t->ndims = 1;
    t->dims = amp_arena_calloc(&m->arena, 1, sizeof *t->dims);
    t->dims[0] = 1;
    t->nelem = 1;
    static const float f = 7;
    static const uint8_t u = 7;
    t->raw.data = dt == AMP_DT_FLOAT ? (const uint8_t *)&f : &u;
    t->raw.len = dt == AMP_DT_FLOAT ? 4 : 1;
    AmpAttr *a = amp_node_add_attr(n, "value", AMP_ATTR_TENSOR);
    cr_assert_not_null(a);
    a->t = t;
    rt_output(g, "y", dt, NULL);
    return m;
}

Test(exec_cap, constant_of_shape_over_the_cap_fails) {
    AmpSession *s = open_model(const_of_shape_model(AMP_DT_FLOAT, 2));
    const int64_t sd[1] = {2};
    int64_t shape[2] = {INT64_C(1) << 18, INT64_C(1) << 18}; /* 2^36 floats: 256 GiB */
    AmpTensorView in = rt_view("shape", AMP_DT_INT64, shape, 1, sd);
    const char *want[] = {"node 'fill' (ConstantOfShape)", "output 0 would take", "over the " CAP_TEXT "-byte limit", NULL};
    run_fails(s, &in, 1, AMP_ERR_UNSUPPORTED, want);
    shape[0] = 3, shape[1] = 5;
    const int64_t yd[2] = {3, 5};
    AmpTensorView y = run_ok(s, &in, 1, 2, yd);
    for (int i = 0; i < 15; i++) cr_assert_eq(((float *)y.data)[i], 7.0f);
    amp_tensor_view_free(&y);
    amp_session_close(s);
}

Test(exec_cap, constant_of_shape_one_byte_over_fails) {
    /* uint8: bytes == elements, so 2^36 + 1 elements is the cap plus one byte. */
    AmpSession *s = open_model(const_of_shape_model(AMP_DT_UINT8, 1));
    const int64_t sd[1] = {1};
    int64_t shape[1] = {(int64_t)CAP_BYTES + 1};
    AmpTensorView in = rt_view("shape", AMP_DT_INT64, shape, 1, sd);
    const char *want[] = {"node 'fill' (ConstantOfShape)", "output 0 would take", "over the " CAP_TEXT "-byte limit", NULL};
    run_fails(s, &in, 1, AMP_ERR_UNSUPPORTED, want);
    shape[0] = 9;
    const int64_t yd[1] = {9};
    AmpTensorView y = run_ok(s, &in, 1, 1, yd);
    cr_assert_eq(y.dtype, AMP_DT_UINT8);
    for (int i = 0; i < 9; i++) cr_assert_eq(((uint8_t *)y.data)[i], 7);
    amp_tensor_view_free(&y);
    amp_session_close(s);
}

Test(exec_cap, tile_over_the_cap_fails) {
    AmpModel *m = rt_model(17);
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "2,2");
    rt_input(g, "repeats", AMP_DT_INT64, "2");
    rt_node(g, "", "Tile", "x,repeats", "y")->name = "tile/huge";
    rt_output(g, "y", AMP_DT_FLOAT, NULL);
    AmpSession *s = open_model(m);
    float x[4] = {1, 2, 3, 4};
    const int64_t xd[2] = {2, 2}, rd[1] = {2};
    int64_t rep[2] = {INT64_C(1) << 17, INT64_C(1) << 17}; /* (2^18)^2 floats: 256 GiB */
    AmpTensorView in[2] = {rt_view("x", AMP_DT_FLOAT, x, 2, xd), rt_view("repeats", AMP_DT_INT64, rep, 1, rd)};
    const char *want[] = {"node 'tile/huge' (Tile)", "output 0 would take", "over the " CAP_TEXT "-byte limit", NULL};
    run_fails(s, in, 2, AMP_ERR_UNSUPPORTED, want);
    rep[0] = 2, rep[1] = 3;
    const int64_t yd[2] = {4, 6};
    AmpTensorView y = run_ok(s, in, 2, 2, yd);
    const float *v = y.data;
    cr_assert_eq(v[0], 1);
    cr_assert_eq(v[1], 2);
    cr_assert_eq(v[2], 1);
    cr_assert_eq(v[6], 3);
    cr_assert_eq(v[23], 4);
    amp_tensor_view_free(&y);
    amp_session_close(s);
}

/* ---- the executor's cap (runtime/exec.c), reached by every other kernel ------------------ */

Test(exec_cap, matmul_outer_product_over_the_cap_fails) {
    /* a[M,1] @ b[1,N]: 1 MiB inputs, a 2^36-float (256 GiB) product. */
    AmpModel *m = rt_model(17);
    AmpGraph *g = m->graph;
    rt_input(g, "a", AMP_DT_FLOAT, "M,1");
    rt_input(g, "b", AMP_DT_FLOAT, "1,N");
    rt_node(g, "", "MatMul", "a,b", "y")->name = "outer";
    rt_output(g, "y", AMP_DT_FLOAT, "M,N");
    AmpSession *s = open_model(m);
    const size_t n = (size_t)1 << 18;
    float *a = calloc(n, sizeof *a), *b = calloc(n, sizeof *b);
    cr_assert(a && b);
    const int64_t ad[2] = {(int64_t)n, 1}, bd[2] = {1, (int64_t)n};
    AmpTensorView in[2] = {rt_view("a", AMP_DT_FLOAT, a, 2, ad), rt_view("b", AMP_DT_FLOAT, b, 2, bd)};
    const char *want[] = {"node 'outer' (MatMul)", "output 0 would take 274877906944 bytes",
                          "over the " CAP_TEXT "-byte limit", NULL};
    run_fails(s, in, 2, AMP_ERR_UNSUPPORTED, want);
    float a2[2] = {1, 2}, b2[3] = {3, 4, 5};
    const int64_t ad2[2] = {2, 1}, bd2[2] = {1, 3};
    AmpTensorView in2[2] = {rt_view("a", AMP_DT_FLOAT, a2, 2, ad2), rt_view("b", AMP_DT_FLOAT, b2, 2, bd2)};
    const int64_t yd[2] = {2, 3};
    AmpTensorView y = run_ok(s, in2, 2, 2, yd);
    const float want_y[6] = {3, 4, 5, 6, 8, 10};
    for (int i = 0; i < 6; i++) cr_assert_float_eq(((float *)y.data)[i], want_y[i], 1e-6);
    amp_tensor_view_free(&y);
    amp_session_close(s);
    free(a);
    free(b);
}

/* y = op(a, b): a[M,1], b[1,N] broadcast to [M,N]; the output's dtype is `out_dt`. */
static AmpSession *broadcast_session(const char *op, const char *name, int out_dt) {
    AmpModel *m = rt_model(17);
    AmpGraph *g = m->graph;
    rt_input(g, "a", AMP_DT_FLOAT, "M,1");
    rt_input(g, "b", AMP_DT_FLOAT, "1,N");
    rt_node(g, "", op, "a,b", "y")->name = name;
    rt_output(g, "y", out_dt, "M,N");
    return open_model(m);
}

/* Runs s with a[m,1] (zeros) and b[1,n] (zeros), expecting the cap's error naming `node`,
 * its op and `bytes`. */
static void broadcast_fails(AmpSession *s, size_t m, size_t n, const char *node, const char *bytes) {
    float *a = calloc(m, sizeof *a), *b = calloc(n, sizeof *b);
    cr_assert(a && b);
    const int64_t ad[2] = {(int64_t)m, 1}, bd[2] = {1, (int64_t)n};
    AmpTensorView in[2] = {rt_view("a", AMP_DT_FLOAT, a, 2, ad), rt_view("b", AMP_DT_FLOAT, b, 2, bd)};
    const char *want[] = {node, "output 0 would take", bytes, "over the " CAP_TEXT "-byte limit", NULL};
    run_fails(s, in, 2, AMP_ERR_UNSUPPORTED, want);
    free(a);
    free(b);
}

Test(exec_cap, broadcast_add_just_over_the_cap_fails) {
    /* (2^17 + 1) x 2^17 floats: 2^36 + 2^19 bytes, from 1 MiB of inputs. */
    AmpSession *s = broadcast_session("Add", "wide/add", AMP_DT_FLOAT);
    broadcast_fails(s, ((size_t)1 << 17) + 1, (size_t)1 << 17, "node 'wide/add' (Add)", " 68720001024 bytes");
    float a[2] = {1, 2}, b[3] = {10, 20, 30};
    const int64_t ad[2] = {2, 1}, bd[2] = {1, 3}, yd[2] = {2, 3};
    AmpTensorView in[2] = {rt_view("a", AMP_DT_FLOAT, a, 2, ad), rt_view("b", AMP_DT_FLOAT, b, 2, bd)};
    AmpTensorView y = run_ok(s, in, 2, 2, yd);
    const float want[6] = {11, 21, 31, 12, 22, 32};
    for (int i = 0; i < 6; i++) cr_assert_eq(((float *)y.data)[i], want[i]);
    amp_tensor_view_free(&y);
    amp_session_close(s);
}

Test(exec_cap, broadcast_equal_one_byte_over_the_cap_fails) {
    /* bool: one byte an element; 1774001 x 38737 = 2^36 + 1 (17 * 241 * 433 * 38737), from
     * 7 MiB of inputs. */
    AmpSession *s = broadcast_session("Equal", "eq", AMP_DT_BOOL);
    broadcast_fails(s, 1774001, 38737, "node 'eq' (Equal)", " 68719476737 bytes");
    float a[2] = {1, 2}, b[2] = {2, 1};
    const int64_t ad[2] = {2, 1}, bd[2] = {1, 2}, yd[2] = {2, 2};
    AmpTensorView in[2] = {rt_view("a", AMP_DT_FLOAT, a, 2, ad), rt_view("b", AMP_DT_FLOAT, b, 2, bd)};
    AmpTensorView y = run_ok(s, in, 2, 2, yd);
    cr_assert_eq(y.dtype, AMP_DT_BOOL);
    const uint8_t want[4] = {0, 1, 1, 0};
    for (int i = 0; i < 4; i++) cr_assert_eq(((uint8_t *)y.data)[i], want[i]);
    amp_tensor_view_free(&y);
    amp_session_close(s);
}

/* ---- AmpSessionOptions.max_tensor_bytes: a lower cap of the session's own ---------------- */

static AmpSession *open_capped(AmpModel *m, uint64_t cap) {
    AmpSession *s = NULL;
    AmpStatus st = {0};
    AmpSessionOptions o = {.ignore_env = true, .max_tensor_bytes = cap};
    cr_assert_eq(rt_open(m, &o, &s, &st), AMP_OK, "open: %s", st.msg);
    return s;
}

Test(exec_cap, max_tensor_bytes_caps_an_expand) {
    AmpSession *s = open_capped(expand_model(), 1024);
    float x = 1.5f;
    const int64_t sd[1] = {3};
    int64_t shape[3] = {16, 16, 2}; /* 512 floats: 2048 bytes */
    AmpTensorView in[2] = {rt_view("x", AMP_DT_FLOAT, &x, 0, NULL), rt_view("shape", AMP_DT_INT64, shape, 1, sd)};
    const char *want[] = {"node 'big/expand' (Expand)", "would take 2048 bytes",
                          "over the 1024-byte limit (max_tensor_bytes)", NULL};
    run_fails(s, in, 2, AMP_ERR_UNSUPPORTED, want);
    run_fails(s, in, 2, AMP_ERR_UNSUPPORTED, want);
    shape[2] = 1; /* exactly the cap */
    const int64_t yd[3] = {16, 16, 1};
    AmpTensorView y = run_ok(s, in, 2, 3, yd);
    for (int i = 0; i < 256; i++) cr_assert_eq(((float *)y.data)[i], 1.5f);
    amp_tensor_view_free(&y);
    shape[2] = 2;
    run_fails(s, in, 2, AMP_ERR_UNSUPPORTED, want);
    amp_session_close(s);
}

/* An intermediate the plan sizes before the run (a broadcast Add feeding a Relu). */
Test(exec_cap, max_tensor_bytes_caps_a_planned_intermediate) {
    AmpModel *m = rt_model(17);
    AmpGraph *g = m->graph;
    rt_input(g, "a", AMP_DT_FLOAT, "M,1");
    rt_input(g, "b", AMP_DT_FLOAT, "1,N");
    rt_node(g, "", "Add", "a,b", "t")->name = "wide/add";
    rt_node(g, "", "Relu", "t", "y");
    rt_output(g, "y", AMP_DT_FLOAT, "M,N");
    AmpSession *s = open_capped(m, 4096);
    float a[33] = {0}, b[32] = {0};
    a[0] = 1;
    int64_t ad[2] = {32, 1};
    const int64_t bd[2] = {1, 32};
    AmpTensorView in[2] = {rt_view("a", AMP_DT_FLOAT, a, 2, ad), rt_view("b", AMP_DT_FLOAT, b, 2, bd)};
    const int64_t yd[2] = {32, 32};
    for (int k = 0; k < 2; k++) { /* twice: the second from the plan */
        AmpTensorView y = run_ok(s, in, 2, 2, yd);
        cr_assert_eq(((float *)y.data)[0], 1.0f);
        amp_tensor_view_free(&y);
    }
    ad[0] = 33; /* 33 x 32 floats: 4224 bytes */
    in[0] = rt_view("a", AMP_DT_FLOAT, a, 2, ad);
    const char *want[] = {"node 'wide/add' (Add)", "would take 4224 bytes", "over the 4096-byte limit (max_tensor_bytes)",
                          NULL};
    run_fails(s, in, 2, AMP_ERR_UNSUPPORTED, want);
    run_fails(s, in, 2, AMP_ERR_UNSUPPORTED, want);
    ad[0] = 32;
    in[0] = rt_view("a", AMP_DT_FLOAT, a, 2, ad);
    AmpTensorView y = run_ok(s, in, 2, 2, yd);
    amp_tensor_view_free(&y);
    amp_session_close(s);
}

/* An input over the cap is refused before anything runs; 0 leaves the executor's cap. */
Test(exec_cap, max_tensor_bytes_caps_an_input) {
    AmpModel *m = rt_model(17);
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "N");
    rt_node(g, "", "Relu", "x", "y");
    rt_output(g, "y", AMP_DT_FLOAT, "N");
    AmpSession *s = open_capped(m, 1024);
    float x[257] = {0};
    int64_t xd[1] = {257};
    AmpTensorView in[1] = {rt_view("x", AMP_DT_FLOAT, x, 1, xd)};
    const char *want[] = {"input 'x' takes 1028 bytes", "over the 1024-byte limit (max_tensor_bytes)", NULL};
    run_fails(s, in, 1, AMP_ERR_UNSUPPORTED, want);
    xd[0] = 256;
    in[0] = rt_view("x", AMP_DT_FLOAT, x, 1, xd);
    AmpTensorView y = run_ok(s, in, 1, 1, xd);
    amp_tensor_view_free(&y);
    amp_session_close(s);
}
