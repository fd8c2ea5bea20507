/* The CPU's own fusions (AmpBackend.fuse_cpu), each against the same graph run apart
 * (no_fuse). The convolution epilogues (runtime/fuse_conv.c, kernels/cpu/conv.c): Conv -> Relu,
 * Conv -> Add -> Relu and Conv -> Add run as one ai.ampc ConvEpilogue node on the CPU, each
 * against the same graph run apart (no_fuse): float32 the same bytes (oneDNN's post-ops act
 * on the float32 accumulator before its one store), with oneDNN off too (AMP_DNNL=0: the
 * im2col path and the epilogue's own pass); and what keeps a Conv apart. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "ir/half.h"
#include "backend/backend.h"
#include "runtime/fuse.h"
#include "tests/runtime/rt_util.h"

static AmpStatus st;

enum { N = 2, C = 8, H = 9, M = 16, Y_ELEMS = N * M * H * H };

typedef struct Got {
    float y[2][Y_ELEMS];
    size_t fused, absorbed;
    char ops[64]; /* the fused kinds, as the session's stats list them */
} Got;

/* Runs m's bytes on the CPU on x (N, C, H, H) and z (N, M, H, H) (inputs the model does not
 * have are left out), keeps its (up to two) outputs. */
static Got run_cpu(const uint8_t *bytes, size_t len, bool no_fuse) {
    AmpSessionOptions o = {.backend = AMP_BACKEND_CPU, .ignore_env = true, .no_fuse = no_fuse, .amp_auto = "0"};
    AmpSession *s = NULL;
    cr_assert_eq(amp_session_open_bytes(bytes, len, NULL, &o, &s, &st), AMP_OK, "%s", st.msg);
    static float x[N * C * H * H], z[Y_ELEMS];
    for (size_t i = 0; i < sizeof x / sizeof x[0]; i++) x[i] = sinf((float)i * 0.37f);
    for (size_t i = 0; i < sizeof z / sizeof z[0]; i++) z[i] = cosf((float)i * 0.11f);
    AmpTensorView in[2] = {
        {.name = "x", .dtype = AMP_DT_FLOAT, .rank = 4, .dims = {N, C, H, H}, .data = x},
        {.name = "z", .dtype = AMP_DT_FLOAT, .rank = 4, .dims = {N, M, H, H}, .data = z},
    };
    size_t n_in = amp_session_input_count(s, AMP_MODE_RUN), n_out = amp_session_output_count(s, AMP_MODE_RUN);
    AmpTensorView out[2];
    memset(out, 0, sizeof out);
    cr_assert_eq(amp_session_run(s, in, n_in, NULL, n_out, out, &st), AMP_OK, "%s", st.msg);
    Got g;
    memset(&g, 0, sizeof g);
    rt_keep_outputs(s, out, n_out, 2, g.y, sizeof g.y[0], &g.fused, &g.absorbed);
    AmpSessionStats stats;
    amp_session_stats(s, &stats);
    snprintf(g.ops, sizeof g.ops, "%s", stats.fused_ops ? stats.fused_ops : "");
    amp_session_close(s);
    return g;
}

/* m fused and apart on the CPU, the same bytes; returns the fused run's. */
static Got fused_and_apart(AmpModel *m) {
    uint8_t *bytes = NULL;
    size_t len = 0;
    cr_assert_eq(amp_model_save_bytes(m, &bytes, &len, &st), AMP_OK, "%s", st.msg);
    amp_model_free(m);
    Got apart = run_cpu(bytes, len, true), fused = run_cpu(bytes, len, false);
    free(bytes);
    cr_assert_eq(apart.fused, 0);
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < Y_ELEMS; i++)
            cr_assert_eq(memcmp(&fused.y[k][i], &apart.y[k][i], sizeof(float)), 0,
                         "output %d [%d]: fused %.9g, apart %.9g", k, i, fused.y[k][i], apart.y[k][i]);
    return fused;
}

/* fused_and_apart(m), which must make `fused` nodes of `absorbed`. */
static Got expect_fused(AmpModel *m, size_t fused, size_t absorbed) {
    Got got = fused_and_apart(m);
    cr_assert_eq(got.fused, fused);
    cr_assert_eq(got.absorbed, absorbed);
    return got;
}

/* x (N, C, H, H), z (N, M, H, H); W (M, C, 3, 3) and B (M) initializers; 3x3, pads 1. */
static AmpModel *base(bool with_z, bool bias) {
    AmpModel *m = rt_model(17);
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "2,8,9,9");
    if (with_z) rt_input(g, "z", AMP_DT_FLOAT, "2,16,9,9");
    static float w[M * C * 9], b[M];
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) w[i] = cosf((float)i * 0.7f) * 0.3f;
    for (int i = 0; i < M; i++) b[i] = 0.1f * (float)(i - M / 2);
    const int64_t wd[4] = {M, C, 3, 3}, bd[1] = {M};
    rt_init(g, "W", AMP_DT_FLOAT, 4, wd, w);
    if (bias) rt_init(g, "B", AMP_DT_FLOAT, 1, bd, b);
    AmpNode *c = rt_node(g, "", "Conv", bias ? "x,W,B" : "x,W", "y");
    AmpAttr *a = amp_arena_calloc(&m->arena, 1, sizeof *a);
    a->name = "pads";
    a->type = AMP_ATTR_INTS;
    a->has = AMP_ATTR_HAS_TYPE;
    a->n_ints = 4;
    a->ints = amp_arena_calloc(&m->arena, 4, sizeof *a->ints);
    for (int i = 0; i < 4; i++) a->ints[i] = 1;
    c->attrs = a;
    c->n_attrs = 1;
    return m;
}

Test(fuse_cpu, conv_relu_is_one_node) {
    AmpModel *m = base(false, true);
    rt_node(m->graph, "", "Relu", "y", "r");
    rt_output(m->graph, "r", AMP_DT_FLOAT, "2,16,9,9");
    Got got = expect_fused(m, 1, 2);
    bool neg = false, pos = false;
    for (int i = 0; i < Y_ELEMS; i++) neg = neg || got.y[0][i] < 0, pos = pos || got.y[0][i] > 0;
    cr_assert(!neg && pos);
}

/* Conv -> Add -> Relu, the convolution either side of the Add; with the sum read before the
 * Relu as well (a graph output), Conv + Add fuse and the Relu stays. */
Test(fuse_cpu, conv_add_relu_is_one_node) {
    for (int read = 0; read < 2; read++) {
        AmpModel *m = base(true, true);
        rt_node(m->graph, "", "Add", read ? "y,z" : "z,y", "s");
        rt_node(m->graph, "", "Relu", "s", "r");
        rt_output(m->graph, "r", AMP_DT_FLOAT, "2,16,9,9");
        if (read) rt_output(m->graph, "s", AMP_DT_FLOAT, "2,16,9,9");
        expect_fused(m, 1, read ? 2 : 3);
    }
}

Test(fuse_cpu, conv_add_without_bias_is_one_node) {
    AmpModel *m = base(true, false);
    rt_node(m->graph, "", "Add", "y,z", "s");
    rt_output(m->graph, "s", AMP_DT_FLOAT, "2,16,9,9");
    expect_fused(m, 1, 2);
}

/* Conv -> Relu -> Conv -> Add -> Relu: the tensor between the two convolutions passes
 * channels-last (x_nhwc, y_nhwc); the second convolution's weights (M, M, 3, 3). */
/* base(with_z, bias) then r1 = Relu(y) and W2 (M, M, 3, 3): what the multi-convolution
 * models below build on. */
static AmpModel *conv_relu_w2(bool with_z) {
    AmpModel *m = base(with_z, true);
    static float w2[M * M * 9];
    for (size_t i = 0; i < sizeof w2 / sizeof w2[0]; i++) w2[i] = sinf((float)i * 0.3f) * 0.2f;
    const int64_t wd[4] = {M, M, 3, 3};
    rt_init(m->graph, "W2", AMP_DT_FLOAT, 4, wd, w2);
    rt_node(m->graph, "", "Relu", "y", "r1");
    return m;
}

/* A Conv of g with the first Conv's attributes (its pads). */
static void conv_as_first(AmpGraph *g, const char *ins, const char *out) {
    AmpNode *c = rt_node(g, "", "Conv", ins, out);
    c->attrs = g->first->attrs;
    c->n_attrs = g->first->n_attrs;
}

static AmpModel *two_convs(void) {
    AmpModel *m = conv_relu_w2(true);
    AmpGraph *g = m->graph;
    conv_as_first(g, "r1,W2,B", "y2");
    rt_node(g, "", "Add", "y2,z", "s");
    rt_node(g, "", "Relu", "s", "r");
    rt_output(g, "r", AMP_DT_FLOAT, "2,16,9,9");
    return m;
}

Test(fuse_cpu, two_convolutions_pass_their_tensor_channels_last) {
    expect_fused(two_convs(), 2, 5);
}

Test(fuse_cpu, channels_last_without_onednn) {
    amp_dnnl_set_off();
    cr_assert_eq(fused_and_apart(two_convs()).fused, 2);
}

/* A residual block: r1 = Relu(Conv(x)) is read by the next convolution as X and by the
 * last one's Add as its summand Z; every tensor between the three fused convolutions goes
 * channels-last (r1 as X and as Z, r2 as X), the block's output in ONNX's layout (a graph
 * output). The same bytes as apart, with oneDNN and without (the ONNX-layout fallback
 * transposing X and Z). */
static AmpModel *residual_block(void) {
    AmpModel *m = conv_relu_w2(false);
    AmpGraph *g = m->graph;
    conv_as_first(g, "r1,W2,B", "y2");
    rt_node(g, "", "Relu", "y2", "r2");
    conv_as_first(g, "r2,W2,B", "y3");
    rt_node(g, "", "Add", "y3,r1", "s");
    rt_node(g, "", "Relu", "s", "r");
    rt_output(g, "r", AMP_DT_FLOAT, "2,16,9,9");
    return m;
}

Test(fuse_cpu, a_residual_block_passes_its_tensors_channels_last) {
    expect_fused(residual_block(), 3, 7);
}

Test(fuse_cpu, a_residual_block_without_onednn) {
    amp_dnnl_set_off();
    cr_assert_eq(fused_and_apart(residual_block()).fused, 3);
}

/* A ResNet stage's first block: the shortcut's convolution S, first in the plan, takes the
 * residual Add (and its Relu) with the main path's convolution M's output as its summand;
 * M, left with nothing to absorb, becomes a ConvEpilogue of no epilogue, so that r1 (read by
 * S and M) and M's output pass channels-last. 3 fused nodes for 6; the same bytes as apart,
 * with oneDNN and without. */
static AmpModel *downsample_block(void) {
    AmpModel *m = conv_relu_w2(false);
    AmpGraph *g = m->graph;
    conv_as_first(g, "r1,W2,B", "s");
    conv_as_first(g, "r1,W2", "mm");
    rt_node(g, "", "Add", "s,mm", "sum");
    rt_node(g, "", "Relu", "sum", "r");
    rt_output(g, "r", AMP_DT_FLOAT, "2,16,9,9");
    return m;
}

Test(fuse_cpu, a_downsampling_block_passes_its_tensors_channels_last) {
    expect_fused(downsample_block(), 3, 6);
}

Test(fuse_cpu, a_downsampling_block_without_onednn) {
    amp_dnnl_set_off();
    cr_assert_eq(fused_and_apart(downsample_block()).fused, 3);
}

/* The layouts the CPU's fusion plan (runtime/fuse.c, as a session makes it) chose for m's
 * fused convolutions, in plan order: per ConvEpilogue a
 * string of the flags it carries, "x" (x_nhwc), "y" (y_nhwc), "z" (z_nhwc), "-" for none. */
static void planned_layouts(AmpModel *m, char out[][4], int *n_out) {
    AmpGraph *g = m->graph;
    cr_assert_eq(amp_infer_model(m, &st), AMP_OK, "%s", st.msg); /* the types a session knows at open */
    size_t n = 0;
    for (AmpNode *x = g->first; x; x = x->next) n++;
    AmpNode **nodes = calloc(n, sizeof *nodes);
    AmpBackend **be = calloc(n, sizeof *be);
    size_t i = 0;
    for (AmpNode *x = g->first; x; x = x->next, i++) nodes[i] = x, be[i] = amp_backend_cpu();
    AmpFuseRequest rq = {.m = m, .g = g, .nodes = nodes, .node_be = be, .n = n, .be = amp_backend_cpu(),
                         .max_in = 16, .max_out = 16};
    AmpFusePlan p;
    cr_assert_eq(amp_fuse_plan(&rq, &p, &st), AMP_OK, "%s", st.msg);
    *n_out = 0;
    for (i = 0; i < n; i++) {
        const AmpNode *c = p.repl[i];
        if (!c || c->op != AMP_OP_Ampc_ConvEpilogue) continue;
        char *f = out[(*n_out)++];
        int k = 0;
        if (amp_node_attr_int(c, "x_nhwc", 0)) f[k++] = 'x';
        if (amp_node_attr_int(c, "y_nhwc", 0)) f[k++] = 'y';
        if (amp_node_attr_int(c, "z_nhwc", 0)) f[k++] = 'z';
        if (!k) f[k++] = '-';
        f[k] = '\0';
    }
    amp_fuse_plan_free(&p);
    free(nodes), free(be);
}

/* Which tensors go channels-last: in the residual block, r1 (the first convolution's output,
 * read as X by the second and as Z by the third) and r2, not the block's output (a graph
 * output); in the downsampling block, r1 (X of both S and M) and M's output (S's summand). */
Test(fuse_cpu, the_plan_passes_block_tensors_channels_last) {
    char got[8][4];
    int n = 0;
    AmpModel *m = residual_block();
    planned_layouts(m, got, &n);
    amp_model_free(m);
    cr_assert_eq(n, 3);
    cr_assert_str_eq(got[0], "y");
    cr_assert_str_eq(got[1], "xy");
    cr_assert_str_eq(got[2], "xz");
    m = downsample_block();
    planned_layouts(m, got, &n);
    amp_model_free(m);
    cr_assert_eq(n, 3); /* in plan order: the first conv, M (placed at its own index), S + Add + Relu (at the Relu's) */
    cr_assert_str_eq(got[0], "y");
    cr_assert_str_eq(got[1], "xy");
    cr_assert_str_eq(got[2], "xz");
}

/* The convolution's output read twice, and an Add that broadcasts: nothing fuses. */
Test(fuse_cpu, what_keeps_a_conv_apart) {
    AmpModel *m = base(false, true);
    rt_node(m->graph, "", "Relu", "y", "r");
    rt_output(m->graph, "r", AMP_DT_FLOAT, "2,16,9,9");
    rt_output(m->graph, "y", AMP_DT_FLOAT, "2,16,9,9");
    cr_assert_eq(fused_and_apart(m).fused, 0);

    m = base(false, true);
    const int64_t one[1] = {1};
    const float half = 0.5f;
    rt_init(m->graph, "h", AMP_DT_FLOAT, 1, one, &half);
    rt_node(m->graph, "", "Add", "y,h", "s");
    rt_output(m->graph, "s", AMP_DT_FLOAT, "2,16,9,9");
    cr_assert_eq(fused_and_apart(m).fused, 0);
}

/* oneDNN off: the im2col path and the epilogue's own pass give the unfused bytes too. */
Test(fuse_cpu, without_onednn_the_same_bytes) {
    amp_dnnl_set_off(); /* a session's AMP_DNNL=0, before oneDNN's first use (criterion forks each test) */
    AmpModel *m = base(true, true);
    rt_node(m->graph, "", "Add", "y,z", "s");
    rt_node(m->graph, "", "Relu", "s", "r");
    rt_output(m->graph, "r", AMP_DT_FLOAT, "2,16,9,9");
    cr_assert_eq(fused_and_apart(m).fused, 1);
}

/* The SGD update (runtime/fuse_update.c, kernels/cpu/sub_scaled.c): Sub(z, Mul(lr, z)), the
 * same bytes as apart; a product read twice keeps the two apart. */
Test(fuse_cpu, an_sgd_update_is_one_node) {
    for (int twice = 0; twice < 2; twice++) {
        AmpModel *m = rt_model(17);
        AmpGraph *g = m->graph;
        rt_input(g, "x", AMP_DT_FLOAT, "2,8,9,9");
        rt_input(g, "z", AMP_DT_FLOAT, "2,16,9,9");
        rt_scalar_f(g, "lr", 0.0123f);
        rt_node(g, "", "Mul", twice ? "z,lr" : "lr,z", "t");
        rt_node(g, "", "Sub", "z,t", "y");
        rt_output(g, "y", AMP_DT_FLOAT, "2,16,9,9");
        if (twice) rt_output(g, "t", AMP_DT_FLOAT, "2,16,9,9");
        /* With the product read elsewhere SubScaled does not take it; the float32 chains
         * (AVX-512 CPUs) take both nodes as one node of two outputs instead. */
        bool chains = twice && amp_half_have_avx512();
        expect_fused(m, twice ? chains : 1, twice ? 2 * chains : 2);
    }
}

/* An Identity that alone reads a value (`ampc grad`'s gradient outputs) is a copy: the
 * producer writes its output instead (runtime/fuse_copy.c), listed as "Conv+Identity".
 * Not where the value is read elsewhere (a graph output too), nor where the Identity reads
 * a graph input (no producer to write it). */
Test(fuse_cpu, an_identity_is_written_by_its_producer) {
    for (int read = 0; read < 2; read++) {
        AmpModel *m = base(false, true);
        rt_node(m->graph, "", "Identity", "y", "r");
        rt_output(m->graph, "r", AMP_DT_FLOAT, "2,16,9,9");
        if (read) rt_output(m->graph, "y", AMP_DT_FLOAT, "2,16,9,9");
        Got got = expect_fused(m, read ? 0 : 1, read ? 0 : 2);
        cr_assert_str_eq(got.ops, read ? "" : "Conv+Identity x1");
        if (read)
            for (int i = 0; i < Y_ELEMS; i++) cr_assert_eq(memcmp(&got.y[0][i], &got.y[1][i], sizeof(float)), 0);
    }
    AmpModel *m = rt_model(17);
    rt_input(m->graph, "x", AMP_DT_FLOAT, "2,8,9,9");
    rt_node(m->graph, "", "Identity", "x", "r");
    rt_output(m->graph, "r", AMP_DT_FLOAT, "2,8,9,9");
    uint8_t *bytes = NULL;
    size_t len = 0;
    cr_assert_eq(amp_model_save_bytes(m, &bytes, &len, &st), AMP_OK, "%s", st.msg);
    amp_model_free(m);
    Got got = run_cpu(bytes, len, false);
    free(bytes);
    cr_assert_eq(got.fused, 0);
}
