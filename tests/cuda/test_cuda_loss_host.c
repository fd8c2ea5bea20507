/* The host side of the CUDA losses and backward ops (kernels/cuda/loss.c, norm_grad.c,
 * conv_grad.c, and norm.c's training BatchNormalization), on the CPU (no GPU needed): the
 * table entries (the CPU's prepare functions), the supports predicates (what falls back to
 * the CPU), the launch plans and workspace sizes the reductions' order depends on, the
 * training decision of BatchNormalization, the refusals a kernel answers before it
 * touches the device, and that the bundled training graphs' loss and backward nodes (FP32
 * and AMP) are all taken, none left to the CPU fallback. The numerics against the CPU kernels are tests/cuda/test_cuda_ops.c's
 * loss_train table (needs a GPU). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/kernels.h" /* amp_cpu_kernel_prepare: the CPU's table, the reference */
#include "kernels/cuda/conv_grad.h"
#include "kernels/cuda/loss.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/norm_grad.h"
#include "ops/conv_geom.h"
#include "ops/norm_attrs.h"
#include "passes/passes.h"
#include "tests/runtime/rt_util.h"

enum { F = AMP_DT_FLOAT, H = AMP_DT_FLOAT16, BF = AMP_DT_BFLOAT16, D = AMP_DT_DOUBLE };
enum { I32 = AMP_DT_INT32, I64 = AMP_DT_INT64, I8 = AMP_DT_INT8 };

static const char *const INS[6] = {"", "a", "a,b", "a,b,c", "a,b,c,d", "a,b,c,d,e"};
static const char *const OUTS[6] = {"", "y", "y,o1", "y,o1,o2", "y,o1,o2,o3", "y,o1,o2,o3,o4"};

/* Whether op's CUDA entry takes a node of n_in inputs typed dts (0: absent) and n_out
 * outputs, with attr = v (an int) when attr is given. */
static bool takes(const char *domain, const char *op, int64_t opset, int n_in, const int *dts, int n_out,
                  const char *attr, int64_t v) {
    AmpModel *m = rt_model(opset);
    AmpNode *n = rt_node(m->graph, domain, op, INS[n_in], OUTS[n_out]);
    for (int i = 0; i < n_in; i++)
        if (!dts[i]) n->inputs[i] = NULL;
    if (attr) amp_node_add_attr(n, attr, AMP_ATTR_INT)->i = v;
    int in_dtypes[8] = {0};
    memcpy(in_dtypes, dts, (size_t)n_in * sizeof *dts);
    const AmpCudaOp *e = &amp_cuda_ops[n->op];
    cr_assert_not_null(e->supports, "%s has no CUDA entry", op);
    bool r = e->supports(n, *domain ? 1 : opset, in_dtypes);
    amp_model_free(m);
    return r;
}

#define MS "com.microsoft"

Test(cuda_loss_host, table_entries_use_the_cpu_prepares) {
    static const struct {
        AmpOpId op;
        AmpKernelFn fn;
        AmpKernelPrepareFn prep;
    } rows[] = {
        {AMP_OP_SoftmaxCrossEntropyLoss, amp_cuda_sce_loss, amp_loss_prepare},
        {AMP_OP_NegativeLogLikelihoodLoss, amp_cuda_nll_loss, amp_loss_prepare},
        {AMP_OP_Ms_SoftmaxCrossEntropyLossGrad, amp_cuda_ms_sce_loss_grad, amp_loss_prepare},
        {AMP_OP_Ms_SoftmaxGrad_13, amp_cuda_ms_softmax_grad, amp_softmax_prepare},
        {AMP_OP_Ms_LayerNormalizationGrad, amp_cuda_ms_layernorm_grad, amp_norm_prepare},
        {AMP_OP_Ms_ConvGrad, amp_cuda_ms_conv_grad, amp_conv_grad_prepare},
        {AMP_OP_BatchNormalization, amp_cuda_batchnorm, amp_norm_prepare},
        {AMP_OP_Softmax, amp_cuda_softmax, amp_softmax_prepare},
        {AMP_OP_LayerNormalization, amp_cuda_layernorm, amp_norm_prepare},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const AmpCudaOp *e = &amp_cuda_ops[rows[i].op];
        cr_expect_eq(e->fn, rows[i].fn, "op %d", (int)rows[i].op);
        cr_expect_eq(e->prepare, rows[i].prep, "op %d: the CPU's prepare", (int)rows[i].op);
        cr_expect_not_null(e->supports);
    }
    /* the CPU's prepare is the CPU kernel's: both backends read the node alike */
    cr_expect_eq(amp_cpu_kernel_prepare(AMP_OP_Ms_ConvGrad), amp_conv_grad_prepare);
    cr_expect_eq(amp_cpu_kernel_prepare(AMP_OP_Ms_SoftmaxCrossEntropyLossGrad), amp_loss_prepare);
}

Test(cuda_loss_host, supports_losses) {
    cr_expect(takes("", "SoftmaxCrossEntropyLoss", 13, 2, (int[]){F, I64}, 2, NULL, 0));
    cr_expect(takes("", "SoftmaxCrossEntropyLoss", 13, 3, (int[]){H, I32, H}, 1, NULL, 0));
    cr_expect(takes("", "NegativeLogLikelihoodLoss", 13, 3, (int[]){BF, I64, BF}, 1, NULL, 0));
    cr_expect(takes("", "NegativeLogLikelihoodLoss", 13, 3, (int[]){F, I64, 0}, 1, NULL, 0), "weights absent");
    cr_expect(!takes("", "SoftmaxCrossEntropyLoss", 13, 2, (int[]){D, I64}, 1, NULL, 0), "double: the CPU's");
    cr_expect(!takes("", "SoftmaxCrossEntropyLoss", 13, 2, (int[]){F, I8}, 1, NULL, 0), "int8 labels");
    cr_expect(!takes("", "SoftmaxCrossEntropyLoss", 13, 2, (int[]){F, F}, 1, NULL, 0), "float labels");
    cr_expect(!takes("", "SoftmaxCrossEntropyLoss", 13, 3, (int[]){H, I64, F}, 1, NULL, 0), "mixed weights");
    cr_expect(!takes("", "NegativeLogLikelihoodLoss", 13, 2, (int[]){0, I64}, 1, NULL, 0), "no scores");
    cr_expect(takes(MS, "SoftmaxCrossEntropyLossGrad", 1, 3, (int[]){F, F, I64}, 1, NULL, 0));
    cr_expect(takes(MS, "SoftmaxCrossEntropyLossGrad", 1, 5, (int[]){H, H, I32, H, H}, 1, NULL, 0));
    cr_expect(takes(MS, "SoftmaxCrossEntropyLossGrad", 1, 5, (int[]){F, F, I64, 0, F}, 1, NULL, 0), "bias only");
    cr_expect(!takes(MS, "SoftmaxCrossEntropyLossGrad", 1, 3, (int[]){F, H, I64}, 1, NULL, 0), "dY of another type");
    cr_expect(!takes(MS, "SoftmaxCrossEntropyLossGrad", 1, 5, (int[]){F, F, I64, F, H}, 1, NULL, 0), "bias");
    cr_expect(!takes(MS, "SoftmaxCrossEntropyLossGrad", 1, 3, (int[]){D, D, I64}, 1, NULL, 0));
}

Test(cuda_loss_host, supports_norm_grads) {
    cr_expect(takes(MS, "SoftmaxGrad_13", 1, 2, (int[]){H, H}, 1, NULL, 0));
    cr_expect(!takes(MS, "SoftmaxGrad_13", 1, 2, (int[]){F, H}, 1, NULL, 0));
    cr_expect(!takes(MS, "SoftmaxGrad_13", 1, 2, (int[]){D, D}, 1, NULL, 0));
    cr_expect(takes(MS, "LayerNormalizationGrad", 1, 3, (int[]){F, F, F}, 3, NULL, 0));
    cr_expect(takes(MS, "LayerNormalizationGrad", 1, 5, (int[]){H, H, H, F, F}, 3, NULL, 0), "float32 statistics");
    cr_expect(takes(MS, "LayerNormalizationGrad", 1, 5, (int[]){BF, BF, BF, BF, BF}, 1, NULL, 0), "X's type");
    cr_expect(takes(MS, "LayerNormalizationGrad", 1, 5, (int[]){F, F, F, F, 0}, 3, NULL, 0), "one statistic");
    cr_expect(!takes(MS, "LayerNormalizationGrad", 1, 5, (int[]){BF, BF, BF, H, H}, 3, NULL, 0));
    cr_expect(!takes(MS, "LayerNormalizationGrad", 1, 5, (int[]){H, H, H, F, H}, 3, NULL, 0), "mixed statistics");
    cr_expect(!takes(MS, "LayerNormalizationGrad", 1, 3, (int[]){F, F, H}, 3, NULL, 0), "scale of another type");
    cr_expect(!takes(MS, "LayerNormalizationGrad", 1, 3, (int[]){F, F, 0}, 3, NULL, 0), "no scale");
}

Test(cuda_loss_host, supports_conv_grad_and_batchnorm) {
    cr_expect(takes(MS, "ConvGrad", 1, 3, (int[]){F, F, F}, 3, NULL, 0));
    cr_expect(takes(MS, "ConvGrad", 1, 3, (int[]){BF, BF, BF}, 1, NULL, 0));
    cr_expect(!takes(MS, "ConvGrad", 1, 3, (int[]){H, F, H}, 3, NULL, 0));
    cr_expect(!takes(MS, "ConvGrad", 1, 3, (int[]){D, D, D}, 3, NULL, 0));
    cr_expect(!takes(MS, "ConvGrad", 1, 3, (int[]){F, F, F}, 4, NULL, 0), "a fourth output");
    int bn[5] = {F, F, F, F, F};
    cr_expect(takes("", "BatchNormalization", 15, 5, bn, 3, "training_mode", 1), "training");
    cr_expect(takes("", "BatchNormalization", 15, 5, bn, 1, "training_mode", 0));
    cr_expect(takes("", "BatchNormalization", 9, 5, bn, 5, NULL, 0), "running statistics listed");
    cr_expect(!takes("", "BatchNormalization", 7, 5, bn, 1, "spatial", 0), "per-activation statistics");
    cr_expect(!takes("", "BatchNormalization", 15, 5, (int[]){H, F, F, F, F}, 3, "training_mode", 1), "mixed types");
}

/* BatchNormalization's training decision as its prepare parses it (ops/norm_attrs.h). */
static bool bn_trains(int64_t opset, int n_out, int64_t mode, bool step) {
    AmpModel *m = rt_model(opset);
    AmpNode *n = rt_node(m->graph, "", "BatchNormalization", INS[5], OUTS[n_out]);
    if (mode >= 0) amp_node_add_attr(n, "training_mode", AMP_ATTR_INT)->i = mode;
    void *attrs = NULL;
    AmpStatus st = {0};
    cr_assert_eq(amp_norm_prepare(n, opset, &attrs, &st), AMP_OK, "%s", st.msg);
    bool r = amp_batchnorm_trains(attrs, step);
    free(attrs);
    amp_model_free(m);
    return r;
}

Test(cuda_loss_host, batchnorm_training_decision) {
    cr_expect(bn_trains(15, 3, 1, false));
    cr_expect(!bn_trains(15, 1, 0, true), "opset 14+: training_mode decides, not the step");
    cr_expect(!bn_trains(15, 3, 0, true), "opset 14+: listed outputs do not decide");
    cr_expect(bn_trains(9, 5, -1, false), "before 14: the running statistics listed");
    cr_expect(bn_trains(9, 1, -1, true), "before 14: a training step");
    cr_expect(!bn_trains(9, 1, -1, false));
}

Test(cuda_loss_host, loss_plan) {
    AmpCudaLoss p = {.n = 8, .c = 5, .dk = 1};
    amp_cuda_loss_plan(&p);
    cr_expect_eq(p.mode, AMP_CUDA_LOSS_WARP);
    cr_expect_eq(p.blocks, 1u);
    cr_expect_eq(p.threads, 256u);
    p = (AmpCudaLoss){.n = 5000, .c = 10, .dk = 1};
    amp_cuda_loss_plan(&p);
    cr_expect(p.mode == AMP_CUDA_LOSS_WARP && p.blocks == 625, "8 samples a block: %u", p.blocks);
    p = (AmpCudaLoss){.n = 4, .c = 2000, .dk = 1};
    amp_cuda_loss_plan(&p);
    cr_expect(p.mode == AMP_CUDA_LOSS_BLOCK && p.blocks == 4 && p.threads == 512);
    p = (AmpCudaLoss){.n = 2, .c = 4, .dk = 15};
    amp_cuda_loss_plan(&p);
    cr_expect(p.mode == AMP_CUDA_LOSS_THREAD && p.blocks == 1);
    p = (AmpCudaLoss){.n = 1 << 20, .c = 50257, .dk = 1};
    amp_cuda_loss_plan(&p);
    cr_expect_eq(p.blocks, (unsigned)AMP_CUDA_LOSS_MAX_BLOCKS, "capped: the partials stay small");
    cr_expect_eq(amp_cuda_loss_workspace(&p), (2 * AMP_CUDA_LOSS_MAX_BLOCKS + 1) * sizeof(double));
    p = (AmpCudaLoss){.n = 0, .c = 5, .dk = 1};
    amp_cuda_loss_plan(&p);
    cr_expect_eq(p.blocks, 1u, "no sample: one block");
}

Test(cuda_loss_host, layernorm_grad_chunks) {
    const size_t big = (size_t)64 << 20;
    cr_expect_eq(amp_cuda_lngrad_chunks(0, 8, big), 1);
    cr_expect_eq(amp_cuda_lngrad_chunks(4, 8, big), 1);
    cr_expect_eq(amp_cuda_lngrad_chunks(1000, 64, big), 32);
    cr_expect_eq(amp_cuda_lngrad_chunks(1 << 20, 768, big), 512);
    cr_expect_eq(amp_cuda_lngrad_ws_floats(10, 3, 2), 2 * 10 + 2 * 2 * 3);
    /* a workspace that holds the statistics and 64 ranges of 768 columns, not 512 */
    size_t ws = amp_cuda_lngrad_ws_floats(1 << 16, 768, 64) * sizeof(float);
    int64_t ch = amp_cuda_lngrad_chunks(1 << 16, 768, ws);
    cr_expect_eq(ch, 64);
    cr_expect_leq(amp_cuda_lngrad_ws_floats(1 << 16, 768, ch) * sizeof(float), ws);
    cr_expect_eq(amp_cuda_lngrad_chunks(1 << 20, 8, 1024), 0, "the statistics alone do not fit");
    /* the chunks' row ranges cover the rows once, in order */
    static const int64_t rows[] = {0, 1, 31, 32, 33, 1000, 4097, 1 << 20};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        int64_t chunks = amp_cuda_lngrad_chunks(rows[i], 64, big), next = 0;
        for (int64_t ch = 0; ch < chunks; ch++) {
            int64_t r0, r1;
            amp_cuda_lngrad_range(ch, chunks, rows[i], &r0, &r1);
            cr_expect(r0 == next && r1 >= r0 && r1 <= rows[i], "rows %lld chunk %lld: [%lld, %lld)",
                      (long long)rows[i], (long long)ch, (long long)r0, (long long)r1);
            next = r1;
        }
        cr_expect_eq(next, rows[i], "rows %lld: covered up to %lld", (long long)rows[i], (long long)next);
    }
}

Test(cuda_loss_host, conv_grad_refusal) {
    AmpConvGeom g = {.nsp = 2, .in = {9, 9}, .kern = {3, 3}, .stride = {1, 1}, .dil = {1, 1}, .out = {7, 7}};
    cr_expect_null(amp_cuda_conv_grad_refusal(&g));
    g.pad0[1] = 1, g.pad1[1] = 1;
    cr_expect_null(amp_cuda_conv_grad_refusal(&g));
    g.pad1[0] = 1; /* SAME with an odd total, or pads=[0,1,1,1] */
    cr_expect(amp_cuda_conv_grad_refusal(&g) && strstr(amp_cuda_conv_grad_refusal(&g), "asymmetric"));
    g.pad1[0] = 0;
    g.in[0] = (int64_t)INT32_MAX + 1;
    cr_expect_not_null(amp_cuda_conv_grad_refusal(&g));
    AmpConvGeom g4 = {.nsp = 4};
    cr_expect_not_null(amp_cuda_conv_grad_refusal(&g4));
}

/* ---- refusals answered before the device is touched ----------------------------------- */

/* A host buffer of dtype and shape (its data: zeros; never read by a refusing kernel). */
static AmpBuf hbuf(int dtype, int rank, const int64_t *dims) {
    AmpBuf b = {.dtype = dtype, .rank = rank};
    memcpy(b.dims, dims, (size_t)rank * sizeof *dims);
    b.nelem = amp_shape_nelem(rank, dims);
    b.data = calloc(b.nelem ? b.nelem : 1, 8);
    return b;
}

/* Runs CUDA kernel fn on node n (prepared by its CPU prepare) with host buffers and a
 * context whose workspace is ws_bytes (no stream, no device). */
static AmpCode run_host(AmpNode *n, int64_t opset, AmpKernelFn fn, int n_in, AmpBuf *in, int n_out, AmpBuf *out,
                        size_t ws_bytes, AmpStatus *st) {
    void *attrs = NULL;
    AmpKernelPrepareFn prep = amp_cuda_ops[n->op].prepare;
    cr_assert_eq(prep(n, opset, &attrs, st), AMP_OK, "%s", st->msg);
    const AmpBuf *ins[6];
    for (int i = 0; i < n_in; i++) ins[i] = &in[i];
    AmpCudaCtx dev = {.workspace_bytes = ws_bytes};
    AmpKernelCtx k = {.node = n, .opset = opset, .n_in = n_in, .in = ins, .n_out = n_out, .out = out,
                      .attrs = attrs, .dev = &dev, .st = st};
    AmpCode rc = fn(&k);
    free(attrs);
    return rc;
}

Test(cuda_loss_host, conv_grad_asymmetric_pads_fall_back) {
    AmpModel *m = rt_model(17);
    AmpNode *n = rt_node(m->graph, MS, "ConvGrad", INS[3], OUTS[3]);
    int64_t pads[4] = {0, 1, 2, 0};
    AmpAttr *a = amp_node_add_attr(n, "pads", AMP_ATTR_INTS);
    a->ints = pads, a->n_ints = 4;
    AmpBuf in[3] = {hbuf(F, 4, (int64_t[]){1, 4, 8, 7}), hbuf(F, 4, (int64_t[]){1, 3, 8, 8}),
                    hbuf(F, 4, (int64_t[]){4, 3, 3, 3})};
    AmpBuf out[3] = {hbuf(F, 4, in[1].dims), hbuf(F, 4, in[2].dims), hbuf(F, 1, (int64_t[]){4})};
    AmpStatus st = {0};
    AmpCode rc = run_host(n, 1, amp_cuda_ms_conv_grad, 3, in, 3, out, 1 << 20, &st);
    cr_expect_eq(rc, AMP_ERR_UNSUPPORTED, "%s", st.msg);
    cr_expect(strstr(st.msg, "asymmetric"), "%s", st.msg);
    /* a dY that is not the convolution's output: the CPU's error */
    free(in[0].data);
    in[0] = hbuf(F, 4, (int64_t[]){1, 4, 8, 8});
    amp_status_clear(&st);
    cr_expect_eq(run_host(n, 1, amp_cuda_ms_conv_grad, 3, in, 3, out, 1 << 20, &st), AMP_ERR_INPUT);
    cr_expect(strstr(st.msg, "dY's shape"), "%s", st.msg);
    for (int i = 0; i < 3; i++) free(in[i].data), free(out[i].data);
    a->ints = NULL, a->n_ints = 0;
    amp_model_free(m);
}

Test(cuda_loss_host, loss_checks_as_the_cpu) {
    AmpModel *m = rt_model(13);
    AmpNode *n = rt_node(m->graph, "", "SoftmaxCrossEntropyLoss", INS[2], OUTS[1]);
    AmpBuf in[2] = {hbuf(F, 2, (int64_t[]){8, 5}), hbuf(I64, 1, (int64_t[]){7})};
    AmpBuf out[1] = {hbuf(F, 0, NULL)};
    AmpStatus st = {0};
    cr_expect_eq(run_host(n, 13, amp_cuda_sce_loss, 2, in, 1, out, 1 << 20, &st), AMP_ERR_INPUT);
    cr_expect(strstr(st.msg, "without the class axis"), "%s", st.msg);
    free(in[1].data);
    in[1] = hbuf(I64, 1, (int64_t[]){8});
    amp_status_clear(&st);
    cr_expect_eq(run_host(n, 13, amp_cuda_sce_loss, 2, in, 1, out, 16, &st), AMP_ERR_UNSUPPORTED,
                 "partials past the workspace: the CPU runs it");
    for (int i = 0; i < 2; i++) free(in[i].data);
    free(out[0].data);
    amp_model_free(m);
}

Test(cuda_loss_host, layernorm_grad_checks_as_the_cpu) {
    AmpModel *m = rt_model(17);
    AmpNode *n = rt_node(m->graph, MS, "LayerNormalizationGrad", INS[3], OUTS[3]);
    AmpBuf in[3] = {hbuf(F, 2, (int64_t[]){4, 8}), hbuf(F, 2, (int64_t[]){4, 8}), hbuf(F, 1, (int64_t[]){7})};
    AmpBuf out[3] = {hbuf(F, 2, in[0].dims), hbuf(F, 1, (int64_t[]){8}), hbuf(F, 1, (int64_t[]){8})};
    AmpStatus st = {0};
    cr_expect_eq(run_host(n, 1, amp_cuda_ms_layernorm_grad, 3, in, 3, out, 1 << 20, &st), AMP_ERR_INPUT);
    cr_expect(strstr(st.msg, "one element per normalised column"), "%s", st.msg);
    free(in[2].data);
    in[2] = hbuf(F, 1, (int64_t[]){8});
    amp_status_clear(&st);
    cr_expect_eq(run_host(n, 1, amp_cuda_ms_layernorm_grad, 3, in, 3, out, 8, &st), AMP_ERR_UNSUPPORTED,
                 "statistics past the workspace: the CPU runs it");
    for (int i = 0; i < 3; i++) free(in[i].data), free(out[i].data);
    amp_model_free(m);
}

/* ---- the bundled training graphs: their loss and backward nodes are the GPU's ---------- */

/* Whether op is one of this family's (the ops the tables above cover). */
static bool family_op(AmpOpId op) {
    return op == AMP_OP_SoftmaxCrossEntropyLoss || op == AMP_OP_NegativeLogLikelihoodLoss ||
           op == AMP_OP_Ms_SoftmaxCrossEntropyLossGrad || op == AMP_OP_Ms_SoftmaxGrad_13 ||
           op == AMP_OP_Ms_LayerNormalizationGrad || op == AMP_OP_Ms_ConvGrad || op == AMP_OP_BatchNormalization;
}

/* Counts the family's nodes of m's main graph that the CUDA predicates take, failing on
 * one they refuse (it would run on the CPU fallback). */
static int family_taken(AmpModel *m, const char *what) {
    int taken = 0;
    for (AmpNode *n = m->graph->first; n; n = n->next) {
        if (!family_op(n->op)) continue;
        int dts[16] = {0};
        for (int i = 0; i < n->n_inputs && i < 16; i++) dts[i] = n->inputs[i] ? n->inputs[i]->type.dtype : 0;
        bool ok = amp_cuda_ops[n->op].supports(n, amp_model_opset(m, n->domain), dts);
        cr_expect(ok, "%s: node '%s' (%s) would fall back to the CPU", what, n->name, n->op_type);
        taken += ok;
    }
    return taken;
}

Test(cuda_loss_host, bundled_training_graphs_run_their_losses_on_the_gpu) {
    static const struct {
        const char *path;
        int min_nodes; /* the family's nodes in the graph */
    } models[] = {
        {AMPC_TEST_DIR "/../models/ort_bert/training_model.onnx", 9},
        {AMPC_TEST_DIR "/../models/ort_mlp/training_model.onnx", 2},
        {AMPC_TEST_DIR "/../models/mlp_train/model.onnx", 1},
        {AMPC_TEST_DIR "/../models/resnet_cnn/model.onnx", 3}, /* BatchNormalization (inference export) */
    };
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++)
        for (int amp = 0; amp < 2; amp++) { /* FP32, then the default AMP pipeline (float16) */
            AmpModel *m = NULL;
            AmpStatus st = {0};
            cr_assert_eq(amp_model_load_file(models[i].path, NULL, &m, &st), AMP_OK, "%s", st.msg);
            cr_assert_eq(amp_run_pipeline(m, amp ? NULL : "infer", NULL, &st), AMP_OK, "%s: %s", models[i].path,
                         st.msg);
            char what[512];
            snprintf(what, sizeof what, "%s (%s)", models[i].path, amp ? "AMP" : "FP32");
            int taken = family_taken(m, what);
            cr_expect_geq(taken, models[i].min_nodes, "%s: %d nodes of the family", what, taken);
            amp_model_free(m);
        }
}
