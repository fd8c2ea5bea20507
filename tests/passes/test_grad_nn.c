/* `ampc grad`'s rules for what CNN and transformer exports hold beyond test_grad.c's:
 * Split, Slice, convolutions, pooling, BatchNormalization, selections (Where, Max/Min,
 * ReduceMax, Gather on another axis, Expand, Tile) and the piecewise activations, each
 * against central finite differences on shapes that exercise its attributes. */
#include "tests/passes/grad_check.h"

static void attr_s(AmpModel *m, AmpNode *n, const char *name, const char *v) {
    AmpAttr *a = amp_node_add_attr(n, name, AMP_ATTR_STRING);
    a->s = (AmpBytes){(const uint8_t *)amp_arena_strdup(&m->arena, v), strlen(v)};
    a->has |= AMP_ATTR_HAS_S;
}

#define INTS(m, n, name, ...) \
    attr_ints((m)->graph, n, name, sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t), (int64_t[]){__VA_ARGS__})
#define I64(m, name, ...)                                                                                 \
    ints_init((m)->graph, name, 1, (int64_t[]){sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)}, \
              (int64_t[]){__VA_ARGS__})

/* A float32 parameter `name` [dims] holding lo + (k + 1/2) * step for k = 0, 1, ... in a
 * shuffled order: distinct values more than 2 * EPS apart (step > 0.02), so no finite
 * difference crosses a tie between two elements or a value given as a bound. */
static void spaced(AmpGraph *g, const char *name, int rank, const int64_t *dims, float lo, float step) {
    float v[256];
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= dims[i];
    cr_assert(n <= 256);
    for (int64_t i = 0; i < n; i++) v[i] = lo + ((float)i + 0.5f) * step;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)uni(0, (float)(i + 1));
        float t = v[i];
        v[i] = v[j], v[j] = t;
    }
    rt_init(g, name, AMP_DT_FLOAT, rank, dims, v);
}

#define SPACED(g, name, lo, step, ...) \
    spaced(g, name, (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__}, lo, step)

/* ---- Split and Slice ------------------------------------------------------------------- */

/* Sizes as an input (opset 13); the middle part is not read by the loss: zeros there. */
Test(grad_nn, split_input_form_unused_part) {
    AmpModel *m = rt_model(13);
    P(m->graph, "x", -1, 1, 2, 7, 3);
    I64(m, "sizes", 2, 3, 2);
    AmpNode *n = op(m, "Split", "x,sizes", "a,b,c");
    attr_i(n, "axis", 1);
    op(m, "Mul", "a,c", "y");
    out_y(m);
    check(m, AMP_GRAD_LOSS_MSE, "Split input [2,3,2] axis 1");
}

/* Sizes as an attribute (opset 11), negative axis. */
Test(grad_nn, split_attribute_form) {
    AmpModel *m = rt_model(11);
    P(m->graph, "x", -1, 1, 2, 3, 5);
    AmpNode *n = op(m, "Split", "x", "a,b,c");
    attr_i(n, "axis", -1);
    INTS(m, n, "split", 2, 1, 2);
    op(m, "Mul", "a,c", "ac");
    op(m, "Add", "ac,b", "y");
    out_y(m);
    check(m, AMP_GRAD_LOSS_MSE, "Split attribute [2,1,2] axis -1");
}

/* num_outputs (opset 18): uneven parts 3, 3, 1. */
Test(grad_nn, split_num_outputs) {
    AmpModel *m = rt_model(18);
    P(m->graph, "x", -1, 1, 7, 2);
    AmpNode *n = op(m, "Split", "x", "a,b,c");
    attr_i(n, "num_outputs", 3);
    op(m, "Mul", "a,b", "y");
    out_y(m);
    check(m, AMP_GRAD_LOSS_MSE, "Split num_outputs 3");
}

/* Negative starts, ends and steps on two axes out of order. */
Test(grad_nn, slice_negative_steps_axes) {
    AmpModel *m = model();
    P(m->graph, "x", -1, 1, 4, 3, 6);
    I64(m, "starts", -1, 3);
    I64(m, "ends", -7, 0);
    I64(m, "axes", 2, 0);
    I64(m, "steps", -2, -1);
    op(m, "Slice", "x,starts,ends,axes,steps", "y");
    out_y(m);
    check(m, AMP_GRAD_LOSS_MSE, "Slice steps [-2,-1] axes [2,0]");
}

/* A step of 2 and an end past the dim; the element read twice (Slice feeding both sides
 * of a Mul) adds up. */
Test(grad_nn, slice_step_end_clamped) {
    AmpModel *m = model();
    P(m->graph, "x", -1, 1, 3, 7);
    I64(m, "starts", 1);
    I64(m, "ends", 100);
    I64(m, "axes", -1);
    I64(m, "steps", 2);
    op(m, "Slice", "x,starts,ends,axes,steps", "s");
    op(m, "Mul", "s,s", "y");
    out_y(m);
    check(m, AMP_GRAD_LOSS_MSE, "Slice step 2 end 100");
}

/* ---- convolutions ------------------------------------------------------------------------- */

/* Groups, a stride, asymmetric pads and a dilation on different axes; the weight's
 * gradient Conv yields more than the kernel (cut back). */
Test(grad_nn, conv_groups_strides_pads_dilations) {
    AmpModel *m = model();
    P(m->graph, "X", -1, 1, 2, 4, 5, 5);
    P(m->graph, "W", -1, 1, 6, 2, 3, 2);
    P(m->graph, "B", -1, 1, 6);
    AmpNode *n = op(m, "Conv", "X,W,B", "y");
    attr_i(n, "group", 2);
    INTS(m, n, "strides", 2, 1);
    INTS(m, n, "pads", 1, 0, 0, 1);
    INTS(m, n, "dilations", 1, 2);
    out_y(m);
    check(m, AMP_GRAD_LOSS_MSE, "Conv group 2 stride pads dil");
}

/* Depthwise (group = channels) with dilation 2 and symmetric pads, as MobileNet's. */
Test(grad_nn, conv_depthwise_dilated) {
    AmpModel *m = model();
    P(m->graph, "X", -1, 1, 1, 4, 6, 6);
    P(m->graph, "W", -1, 1, 4, 1, 3, 3);
    AmpNode *n = op(m, "Conv", "X,W", "y");
    attr_i(n, "group", 4);
    INTS(m, n, "dilations", 2, 2);
    INTS(m, n, "pads", 2, 2, 2, 2);
    out_y(m);
    check(m, AMP_GRAD_LOSS_MSE, "Conv depthwise dilation 2");
}

/* 1-D, auto_pad SAME_UPPER with stride 2 (pads derived from the shapes). */
Test(grad_nn, conv_1d_same_upper_stride) {
    AmpModel *m = model();
    P(m->graph, "X", -1, 1, 2, 3, 8);
    P(m->graph, "W", -1, 1, 4, 3, 3);
    P(m->graph, "B", -1, 1, 4);
    AmpNode *n = op(m, "Conv", "X,W,B", "y");
    attr_s(m, n, "auto_pad", "SAME_UPPER");
    INTS(m, n, "strides", 2);
    out_y(m);
    check(m, AMP_GRAD_LOSS_MSE, "Conv 1-D SAME_UPPER stride 2");
}

Test(grad_nn, conv_transpose_groups_output_padding) {
    AmpModel *m = model();
    P(m->graph, "X", -1, 1, 2, 4, 3, 3);
    P(m->graph, "W", -1, 1, 4, 3, 2, 3);
    P(m->graph, "B", -1, 1, 6);
    AmpNode *n = op(m, "ConvTranspose", "X,W,B", "y");
    attr_i(n, "group", 2);
    INTS(m, n, "strides", 2, 1);
    INTS(m, n, "pads", 1, 0, 0, 1);
    INTS(m, n, "output_padding", 1, 0);
    INTS(m, n, "dilations", 1, 2);
    out_y(m);
    check(m, AMP_GRAD_LOSS_MSE, "ConvTranspose group 2 out_pad");
}

/* ---- pooling --------------------------------------------------------------------------------- */

/* Overlapping windows with pads: an element that is the max of two windows gets both. */
Test(grad_nn, max_pool_overlapping_padded) {
    AmpModel *m = model();
    SPACED(m->graph, "x", -2.25f, 0.03f, 2, 3, 5, 5);
    AmpNode *n = op(m, "MaxPool", "x", "y");
    INTS(m, n, "kernel_shape", 3, 3);
    INTS(m, n, "strides", 2, 2);
    INTS(m, n, "pads", 1, 1, 1, 1);
    out_y(m);
    check(m, AMP_GRAD_LOSS_MSE, "MaxPool 3x3 s2 p1");
}

Test(grad_nn, max_pool_ceil_mode_dilated) {
    AmpModel *m = model();
    SPACED(m->graph, "x", -1, 0.05f, 2, 2, 9);
    AmpNode *n = op(m, "MaxPool", "x", "y");
    INTS(m, n, "kernel_shape", 2);
    INTS(m, n, "strides", 2);
    INTS(m, n, "dilations", 2);
    attr_i(n, "ceil_mode", 1);
    out_y(m);
    check(m, AMP_GRAD_LOSS_MSE, "MaxPool 1-D ceil dil 2");
}

/* A window of equal values: g goes to one of them, not to each. */
Test(grad_nn, max_pool_tie_counted_once) {
    AmpModel *m = model();
    float zeros[4] = {0};
    rt_init(m->graph, "x", AMP_DT_FLOAT, 4, (int64_t[]){1, 1, 2, 2}, zeros);
    AmpNode *n = op(m, "MaxPool", "x", "y");
    INTS(m, n, "kernel_shape", 2, 2);
    out_y(m);
    AmpStatus st = {0};
    AmpGradOptions o = {.loss = AMP_GRAD_LOSS_MSE, .optimizer = AMP_GRAD_OPT_NONE};
    cr_assert_eq(amp_grad_model(m, &o, NULL, &st), AMP_OK, "%s", st.msg);
    AmpSession *s = NULL;
    cr_assert_eq(rt_open(m, NULL, &s, &st), AMP_OK, "%s", st.msg);
    float t = 1.0f;
    AmpTensorView in = rt_view("target", AMP_DT_FLOAT, &t, 4, (int64_t[]){1, 1, 1, 1});
    const char *names[1] = {"x_grad"};
    AmpTensorView out;
    cr_assert_eq(amp_session_run(s, &in, 1, names, 1, &out, &st), AMP_OK, "%s", st.msg);
    const float *d = out.data;
    int nonzero = 0;
    for (int i = 0; i < 4; i++) nonzero += d[i] != 0;
    cr_assert_eq(nonzero, 1, "x_grad %g %g %g %g", d[0], d[1], d[2], d[3]);
    cr_assert_float_eq(d[0] + d[1] + d[2] + d[3], -2.0f, 1e-6); /* d mse / dy = 2 (0 - 1) */
    amp_tensor_view_free(&out);
    amp_session_close(s);
}

static void average_pool(int include_pad, const char *what) {
    AmpModel *m = model();
    P(m->graph, "x", -1, 1, 2, 3, 5, 5);
    AmpNode *n = op(m, "AveragePool", "x", "y");
    INTS(m, n, "kernel_shape", 3, 2);
    INTS(m, n, "strides", 2, 1);
    INTS(m, n, "pads", 1, 0, 1, 1);
    attr_i(n, "count_include_pad", include_pad);
    out_y(m);
    check(m, AMP_GRAD_LOSS_MSE, what);
}

Test(grad_nn, average_pool_pads_excluded) { average_pool(0, "AveragePool count_include_pad 0"); }
Test(grad_nn, average_pool_pads_included) { average_pool(1, "AveragePool count_include_pad 1"); }

Test(grad_nn, global_average_pool) {
    AmpModel *m = model();
    P(m->graph, "x", -1, 1, 2, 3, 4, 5);
    op(m, "GlobalAveragePool", "x", "y");
    out_y(m);
    check(m, AMP_GRAD_LOSS_MSE, "GlobalAveragePool");
}

/* Inference form: the running statistics are inputs, not trained. */
Test(grad_nn, batch_norm_inference) {
    AmpModel *m = model();
    P(m->graph, "x", -2, 2, 2, 3, 4, 2);
    P(m->graph, "scale", 0.5f, 1.5f, 3);
    P(m->graph, "bias", -1, 1, 3);
    P(m->graph, "running_mean", -0.5f, 0.5f, 3);
    P(m->graph, "running_var", 0.5f, 2, 3);
    AmpNode *n = op(m, "BatchNormalization", "x,scale,bias,running_mean,running_var", "y");
    attr_f(n, "epsilon", 1e-3f);
    out_y(m);
    check(m, AMP_GRAD_LOSS_MSE, "BatchNormalization inference");
}

/* Training form (training_mode 1): the batch's statistics, which depend on x. */
Test(grad_nn, batch_norm_training) {
    AmpModel *m = model();
    P(m->graph, "x", -2, 2, 3, 2, 3, 2);
    P(m->graph, "scale", 0.5f, 1.5f, 2);
    P(m->graph, "bias", -1, 1, 2);
    P(m->graph, "running_mean", -0.5f, 0.5f, 2);
    P(m->graph, "running_var", 0.5f, 2, 2);
    AmpNode *n = op(m, "BatchNormalization", "x,scale,bias,running_mean,running_var", "y,rm,rv");
    attr_i(n, "training_mode", 1);
    out_y(m);
    check(m, AMP_GRAD_LOSS_MSE, "BatchNormalization training");
}

/* Dropping with a seed (the same mask on every run, so differences see it): the mask's
 * elements get g / (1 - ratio), the dropped ones nothing. */
Test(grad_nn, dropout_training_mask) {
    AmpModel *m = model();
    P(m->graph, "x", -1, 1, 4, 5);
    rt_scalar_f(m->graph, "ratio", 0.4f);
    uint8_t on = 1;
    rt_init(m->graph, "training", AMP_DT_BOOL, 0, NULL, &on);
    AmpNode *n = op(m, "Dropout", "x,ratio,training", "y,mask");
    attr_i(n, "seed", 3);
    out_y(m);
    check(m, AMP_GRAD_LOSS_MSE, "Dropout training (seeded mask)");
}

/* --train-mode: an eval export's BatchNormalization uses batch statistics, its running
 * ones become state bound to the forward's new values; Dropout drops with its mask out. */
Test(grad_nn, train_mode_rewrites_and_binds) {
    AmpModel *m = model();
    P(m->graph, "x", -2, 2, 3, 2, 4);
    P(m->graph, "scale", 0.5f, 1.5f, 2);
    P(m->graph, "bias", -1, 1, 2);
    P(m->graph, "running_mean", -0.5f, 0.5f, 2);
    P(m->graph, "running_var", 0.5f, 2, 2);
    op(m, "BatchNormalization", "x,scale,bias,running_mean,running_var", "bn");
    op(m, "Dropout", "bn", "y");
    out_y(m);
    AmpStatus st = {0};
    AmpGradOptions o = {.loss = AMP_GRAD_LOSS_MSE, .train_mode = true};
    AmpGradSummary sum;
    cr_assert_eq(amp_grad_model(m, &o, &sum, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(sum.n_params, 3);
    cr_assert_eq(sum.n_running, 2);
    int bn = 0, drop = 0;
    for (AmpNode *n = m->graph->first; n; n = n->next) {
        if (n->op == AMP_OP_BatchNormalization) {
            bn++;
            cr_assert_eq(amp_node_attr_int(n, "training_mode", 0), 1);
            cr_assert_eq(n->n_outputs, 3);
        }
        if (n->op == AMP_OP_Dropout && n->n_inputs == 3) drop += n->n_outputs == 2 && n->outputs[1];
    }
    cr_assert_eq(bn, 1);
    cr_assert_eq(drop, 1);
    AmpTrainingInfo *ti = &m->training[0];
    cr_assert_eq(ti->n_update_bindings, 5);
    cr_assert_str_eq(ti->update_bindings[3].key, "running_mean");
    cr_assert_str_eq(ti->update_bindings[4].key, "running_var");
    cr_assert_eq(amp_verify_model(m, &st), AMP_OK, "%s", st.msg);
    amp_model_free(m);
}

/* ---- selections ------------------------------------------------------------------------------ */

Test(grad_nn, where_broadcast) {
    AmpModel *m = model();
    uint8_t cond[12] = {1, 0, 0, 1, 1, 1, 0, 0, 1, 0, 1, 0};
    rt_init(m->graph, "cond", AMP_DT_BOOL, 2, (int64_t[]){3, 4}, cond);
    P(m->graph, "a", -1, 1, 2, 3, 4);
    P(m->graph, "b", -1, 1, 4);
    op(m, "Where", "cond,a,b", "y");
    out_y(m);
    check(m, AMP_GRAD_LOSS_MSE, "Where cond[3,4] a[2,3,4] b[4]");
}

/* Ties go to the first input; the inputs broadcast. */
Test(grad_nn, max_min_variadic) {
    AmpModel *m = model();
    SPACED(m->graph, "a", -1, 0.07f, 2, 3);
    SPACED(m->graph, "b", -0.97f, 0.07f, 3);
    SPACED(m->graph, "c", -0.94f, 0.07f, 2, 1);
    op(m, "Max", "a,b,c", "hi");
    op(m, "Min", "a,c", "lo");
    op(m, "Add", "hi,lo", "y");
    out_y(m);
    check(m, AMP_GRAD_LOSS_MSE, "Max(a,b,c) + Min(a,c)");
}

Test(grad_nn, reduce_max_min) {
    AmpModel *m = model();
    SPACED(m->graph, "x", -1, 0.05f, 2, 3, 4);
    I64(m, "axes", 1);
    AmpNode *n = op(m, "ReduceMax", "x", "hi");
    INTS(m, n, "axes", 1); /* opset 17: an attribute */
    attr_i(n, "keepdims", 0);
    n = op(m, "ReduceMin", "x", "lo");
    INTS(m, n, "axes", -1);
    op(m, "Unsqueeze", "hi,axes", "hi1"); /* [2,1,4] */
    op(m, "Mul", "hi1,lo", "y");          /* with lo [2,3,1]: [2,3,4] */
    out_y(m);
    check(m, AMP_GRAD_LOSS_MSE, "ReduceMax axes [1] * ReduceMin [-1]");
}

/* Axis 1, negative and repeated indices. */
Test(grad_nn, gather_axis1_negative_repeated) {
    AmpModel *m = model();
    P(m->graph, "x", -1, 1, 3, 4, 2);
    ints_init(m->graph, "idx", 2, (int64_t[]){2, 2}, (int64_t[]){-1, 0, 3, -1});
    AmpNode *n = op(m, "Gather", "x,idx", "y");
    attr_i(n, "axis", 1);
    out_y(m);
    check(m, AMP_GRAD_LOSS_MSE, "Gather axis 1 idx [[-1,0],[3,-1]]");
}

Test(grad_nn, expand) {
    AmpModel *m = model();
    P(m->graph, "x", -1, 1, 3, 1);
    I64(m, "shape", 2, 3, 4);
    op(m, "Expand", "x,shape", "y");
    out_y(m);
    check(m, AMP_GRAD_LOSS_MSE, "Expand [3,1] to [2,3,4]");
}

Test(grad_nn, tile) {
    AmpModel *m = model();
    P(m->graph, "x", -1, 1, 2, 3);
    I64(m, "reps", 2, 3);
    op(m, "Tile", "x,reps", "y");
    out_y(m);
    check(m, AMP_GRAD_LOSS_MSE, "Tile [2,3] by [2,3]");
}

/* Dropout as an inference export has it: the identity. */
Test(grad_nn, dropout_inference) {
    AmpModel *m = model();
    P(m->graph, "x", -1, 1, 3, 4);
    rt_scalar_f(m->graph, "ratio", 0.3f);
    uint8_t off = 0;
    rt_init(m->graph, "training", AMP_DT_BOOL, 0, NULL, &off);
    op(m, "Dropout", "x,ratio,training", "y");
    out_y(m);
    check(m, AMP_GRAD_LOSS_MSE, "Dropout training_mode false");
}

/* A Dropout with no training_mode input is an inference Dropout by the spec, but an
 * executor's training step may drop there (ampc's does): without --train-mode the mode is
 * given as false, so every executor runs the identity the rule differentiates. */
Test(grad_nn, dropout_without_a_mode_is_pinned_to_inference) {
    AmpModel *m = model();
    P(m->graph, "x", -1, 1, 3, 4);
    op(m, "Dropout", "x", "y");
    out_y(m);
    AmpStatus st = {0};
    AmpGradOptions o = {.loss = AMP_GRAD_LOSS_MSE};
    AmpGradSummary sum;
    cr_assert_eq(amp_grad_model(m, &o, &sum, &st), AMP_OK, "%s", st.msg);
    int seen = 0;
    for (AmpNode *n = m->graph->first; n; n = n->next) {
        if (n->op != AMP_OP_Dropout) continue;
        seen++;
        cr_assert_eq(n->n_inputs, 3);
        const AmpValue *v = n->inputs[2];
        cr_assert(v && v->type.dtype == AMP_DT_BOOL && v->producer && v->producer->op == AMP_OP_Constant,
                  "no constant bool training_mode input");
        const AmpAttr *a = amp_node_attr(v->producer, "value");
        AmpBytes b;
        cr_assert(a && a->t && amp_tensor_bytes(m, a->t, &b, &st) == AMP_OK && b.len == 1);
        cr_assert_eq(b.data[0], 0, "training_mode is not false");
    }
    cr_assert_eq(seen, 1);
    amp_model_free(m);
}

Test(grad_nn, matmul_dot) {
    AmpModel *m = model();
    P(m->graph, "a", -1, 1, 5);
    P(m->graph, "b", -1, 1, 5);
    P(m->graph, "w", -1, 1, 3);
    op(m, "MatMul", "a,b", "dot"); /* a scalar */
    op(m, "Mul", "dot,w", "y");
    out_y(m);
    check(m, AMP_GRAD_LOSS_MSE, "MatMul [5].[5] (a scalar) * w");
}

/* ---- piecewise activations ------------------------------------------------------------------ */

static void act(const char *type, float lo, float hi, const char *fattr, float fv, const char *what) {
    AmpModel *m = model();
    P(m->graph, "x", lo, hi, 3, 5);
    AmpNode *n = op(m, type, "x", "y");
    if (fattr) attr_f(n, fattr, fv);
    out_y(m);
    check(m, AMP_GRAD_LOSS_MSE, what);
}

Test(grad_nn, abs) { act("Abs", -1, 1, NULL, 0, "Abs"); }
Test(grad_nn, reciprocal) { act("Reciprocal", 0.5f, 2, NULL, 0, "Reciprocal"); }
Test(grad_nn, leaky_relu) { act("LeakyRelu", -1, 1, "alpha", 0.3f, "LeakyRelu alpha 0.3"); }
Test(grad_nn, hard_sigmoid) { act("HardSigmoid", -4, 4, "alpha", 0.3f, "HardSigmoid alpha 0.3"); }
Test(grad_nn, hard_swish) { act("HardSwish", -5, 5, NULL, 0, "HardSwish"); }

Test(grad_nn, clip_inputs) {
    AmpModel *m = model();
    SPACED(m->graph, "x", -0.8f, 0.1f, 3, 5); /* -0.75 ... 0.65: 0.05 from each bound */
    rt_scalar_f(m->graph, "lo", -0.4f);
    rt_scalar_f(m->graph, "hi", 0.5f);
    op(m, "Clip", "x,lo,hi", "y");
    out_y(m);
    check(m, AMP_GRAD_LOSS_MSE, "Clip [-0.4, 0.5] inputs");
}

/* Before opset 11 the bounds are attributes; only max given. */
Test(grad_nn, clip_attribute_max) {
    AmpModel *m = rt_model(10);
    SPACED(m->graph, "x", -0.8f, 0.1f, 3, 5);
    AmpNode *n = op(m, "Clip", "x", "y");
    attr_f(n, "max", 0.2f);
    out_y(m);
    check(m, AMP_GRAD_LOSS_MSE, "Clip max 0.2 attribute");
}

Test(grad_nn, gelu_tanh) {
    AmpModel *m = rt_model(20);
    P(m->graph, "x", -3, 3, 3, 5);
    AmpNode *n = op(m, "Gelu", "x", "y");
    attr_s(m, n, "approximate", "tanh");
    out_y(m);
    check(m, AMP_GRAD_LOSS_MSE, "Gelu approximate tanh");
}

/* A parameter read by 70 nodes (an exporter's one shared zero bias): its gradient sums
 * 70 contributions, in a tree of Sums the executor runs (at most 64 inputs a node). */
Test(grad_nn, many_readers_summed_in_a_tree) {
    AmpModel *m = model();
    P(m->graph, "x", -1, 1, 3);
    P(m->graph, "w", -1, 1, 70, 3);
    op(m, "Tanh", "x", "acc0");
    char ins[64], out[16];
    for (int i = 0; i < 70; i++) {
        ints_init(m->graph, (snprintf(out, sizeof out, "i%d", i), out), 0, NULL, (int64_t[]){i});
        snprintf(ins, sizeof ins, "w,i%d", i);
        snprintf(out, sizeof out, "w%d", i);
        op(m, "Gather", ins, out); /* row i of w: [3] */
        snprintf(ins, sizeof ins, "x,w%d", i);
        snprintf(out, sizeof out, "p%d", i);
        op(m, "Mul", ins, out);
        snprintf(ins, sizeof ins, "acc%d,p%d", i, i);
        snprintf(out, sizeof out, i == 69 ? "y" : "acc%d", i + 1);
        op(m, "Add", ins, out);
    }
    out_y(m);
    check(m, AMP_GRAD_LOSS_MSE, "x read by 71 nodes");
}
