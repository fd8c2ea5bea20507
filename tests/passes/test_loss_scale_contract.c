/* The loss-scaling pass (passes/loss_scale.c) over the layouts and shapes of training
 * graphs: ONNX's own layout (the loss and backward in training_info's algorithm), graphs
 * that do not fit the contract and the errors naming what is missing, parameters as
 * inputs, gradients accumulated as onnxruntime-training writes them, embedding gradients,
 * the loss found by its seed, and the state as plain inputs. */
#include <math.h>

#include "ir/precision.h"
#include "tests/passes/loss_scale_test_util.h"
#include "ir/front.h"

/* ---- ONNX's own layout: the loss and backward in the algorithm ------------------------------
 * tiny()'s step with the main graph as the inference graph (p = x * W, an output) and the
 * loss, the seed, the backward and the update in training_info's algorithm. With
 * `w_grad_in_main`, W_grad is made in the main graph while the algorithm holds another
 * gradient: the two graphs cannot share one check. */
static void assert_fails(AmpModel *m, const AmpPassOptions *po, AmpCode code, const char *needle) {
    AmpCode rc = scale_it(m, po);
    cr_assert_eq(rc, code, "code %d, want %d ('%s'): %s", rc, code, needle, st.msg);
    cr_assert_not_null(strstr(st.msg, needle), "'%s' not in: %s", needle, st.msg);
    amp_model_free(m);
}

static AmpModel *tiny_spec(bool w_grad_in_main) {
    AmpModel *m = model();
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "2");
    static const int64_t d2[1] = {2};
    const float w[2] = {0.5f, -0.25f}, v[2] = {0, 0};
    rt_init(g, "W", AMP_DT_FLOAT, 1, d2, w);
    rt_init(g, "U", AMP_DT_FLOAT, 1, d2, w);
    nd(g, "Mul", "fwd/mul", "x,W", "p");
    rt_output(g, "p", AMP_DT_FLOAT, "2");
    if (w_grad_in_main) nd(g, "Mul", "bwd/main", "x,x", "W_grad");
    AmpGraph *a = rt_training(m);
    rt_init(a, "V", AMP_DT_FLOAT, 1, d2, v);
    rt_scalar_f(a, "lr", 0.125f);
    rt_scalar_f(a, "loss_grad", 1.0f);
    AmpNode *r = nd(a, "ReduceSum", "loss/sum", "p", "loss");
    attr_i(r, "keepdims", 0);
    nd(a, "Mul", "bwd/mul", "x,loss_grad", w_grad_in_main ? "U_grad" : "W_grad");
    nd(a, "Add", "opt/v", w_grad_in_main ? "V,U_grad" : "V,W_grad", "V_new");
    nd(a, "Mul", "opt/step", "lr,V_new", "W_step");
    nd(a, "Sub", "opt/w", "W,W_step", "W_new");
    rt_output(a, "loss", AMP_DT_FLOAT, "");
    rt_output(a, "V_new", AMP_DT_FLOAT, "2");
    rt_output(a, "W_new", AMP_DT_FLOAT, "2");
    rt_bindings(m, false, "W=W_new,V=V_new");
    return m;
}

Test(loss_scale, onnx_layout_checks_and_updates_in_the_algorithm) {
    AmpModel *m = tiny_spec(false);
    size_t main_nodes = m->graph->n_nodes;
    scaled(m, NULL);
    AmpGraph *g = m->graph, *a = m->training[0].algorithm;
    /* The main graph gains the scale's state only: its nodes stay the inference graph's. */
    cr_assert_eq(g->n_nodes, main_nodes);
    cr_assert(is_input(g, "amp_loss_scale") && is_input(g, "amp_growth_tracker"));
    cr_assert(!is_output(g, "amp_found_inf"));
    /* The check, the unscaling and the scale's update are the algorithm's. */
    cr_assert(is_output(a, "amp_found_inf") && is_output(a, "amp_loss_scale_new"));
    AmpValue *wg = val_of(a, "W_grad");
    cr_assert_eq(wg->producer->op, AMP_OP_Mul);
    cr_assert_str_eq(wg->producer->inputs[0]->name, "W_grad_scaled");
    cr_assert_eq(val_of(a, "W_new")->producer->op, AMP_OP_Where);
    cr_assert_eq(val_of(a, "V_new")->producer->op, AMP_OP_Where);
    AmpValue *seed_reader = val_of(a, "loss_grad_scaled");
    cr_assert_not_null(seed_reader->producer, "the seed is scaled in the algorithm");
    cr_assert_not_null(bound_to(m, "amp_loss_scale"));
    /* Converting again finds the check and changes nothing. */
    size_t n_alg = a->n_nodes;
    scaled(m, NULL);
    cr_assert_eq(a->n_nodes, n_alg);
    amp_model_free(m);
}

Test(loss_scale, onnx_layout_loss_named_in_the_algorithm) {
    AmpModel *m = tiny_spec(false);
    AmpPassOptions po = {.loss = "loss"};
    scaled(m, &po);
    cr_assert(is_output(m->training[0].algorithm, "amp_found_inf"));
    amp_model_free(m);
}

Test(loss_scale, gradients_in_two_graphs_are_refused) {
    assert_fails(tiny_spec(true), NULL, AMP_ERR_UNSUPPORTED, "are made in different graphs");
}

/* ---- training graphs that do not fit ------------------------------------------------------- */


/* x, W, seed, loss = ReduceSum(x * W) and a gradient `grad` = x * seed (not "W_grad"
 * unless grad_name says so), with no update path of its own. */
static AmpModel *bare(const char *seed_name, const char *grad_name) {
    AmpModel *m = model();
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "2");
    static const int64_t d2[1] = {2};
    const float w[2] = {1, 2};
    rt_init(g, "W", AMP_DT_FLOAT, 1, d2, w);
    rt_scalar_f(g, seed_name, 1.0f);
    nd(g, "Mul", "fwd", "x,W", "p");
    AmpNode *r = nd(g, "ReduceSum", "loss/sum", "p", "loss");
    attr_i(r, "keepdims", 0);
    char ins[64];
    snprintf(ins, sizeof ins, "x,%s", seed_name);
    nd(g, "Mul", "bwd", ins, grad_name);
    rt_output(g, "loss", AMP_DT_FLOAT, "");
    return m;
}

Test(loss_scale, a_training_graph_that_does_not_fit_says_which_part_is_missing) {
    /* The seed of 'loss' is loss_grad: absent. */
    AmpModel *m = bare("seed", "W_grad");
    rt_output(m->graph, "W_grad", AMP_DT_FLOAT, "2");
    assert_fails(m, NULL, AMP_ERR_INPUT, "no float backward seed 'loss_grad'");

    /* --loss naming nothing. */
    AmpPassOptions po = {.loss = "nope"};
    assert_fails(tiny(true, false), &po, AMP_ERR_USAGE, "--loss 'nope'");

    /* No gradient named after a parameter (training_info makes it a training graph). */
    m = bare("loss_grad", "dW");
    AmpGraph *a = rt_training(m);
    nd(a, "Sub", "opt", "W,dW", "W_new");
    rt_output(a, "W_new", AMP_DT_FLOAT, "2");
    rt_bindings(m, false, "W=W_new");
    assert_fails(m, NULL, AMP_ERR_INPUT, "no parameter gradient");

    /* Gradients, but nothing takes them: no binding, no optimizer, not an output. */
    po = (AmpPassOptions){.loss = "loss"};
    assert_fails(bare("loss_grad", "W_grad"), &po, AMP_ERR_INPUT, "no update path");

    /* More than one candidate loss and no --loss. */
    m = model();
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "2");
    static const int64_t d2[1] = {2};
    const float w[2] = {1, 2};
    rt_init(g, "W", AMP_DT_FLOAT, 1, d2, w);
    nd(g, "Mul", "fwd", "x,W", "p");
    AmpNode *r = nd(g, "ReduceSum", "sum", "p", "loss_a");
    attr_i(r, "keepdims", 0);
    nd(g, "Identity", "copy", "loss_a", "loss_b");
    nd(g, "Mul", "bwd", "x,x", "W_grad");
    rt_output(g, "loss_a", AMP_DT_FLOAT, "");
    rt_output(g, "loss_b", AMP_DT_FLOAT, "");
    rt_output(g, "W_grad", AMP_DT_FLOAT, "2");
    assert_fails(m, NULL, AMP_ERR_INPUT,
                 "more than one scalar float output of the main graph or of a training algorithm has a name "
                 "containing \"loss\"");

    /* An update that computes another shape than its weight's, though declared as the
     * weight (found by fuzz_convert: the gate Where(found_inf, W, W_new) was made, and the
     * output could not be converted again). */
    m = tiny(true, false);
    AmpGraph *a2 = m->training[0].algorithm;
    AmpNode *sub = find_node(a2, "opt/w");
    static const int64_t d22[2] = {2, 2};
    const float four[4] = {1, 2, 3, 4};
    static const int64_t d1[1] = {1};
    const int64_t zero = 0;
    rt_init(m->graph, "M", AMP_DT_FLOAT, 2, d22, four);
    rt_init(m->graph, "axes0", AMP_DT_INT64, 1, d1, &zero);
    nd(a2, "MatMul", "opt/wide", "W,M", "W_wide");           /* [2] x [2,2] -> [2], then */
    nd(a2, "Unsqueeze", "opt/col", "W_wide,axes0", "W_col"); /* [1,2] */
    amp_node_set_input(sub, 0, val_of(a2, "W_col")); /* W_new = W_col - W_step: [1,2] */
    amp_graph_toposort(a2, &st);
    assert_fails(m, NULL, AMP_ERR_INPUT, "'W_new' replaces 'W' in a training update, but their types or shapes differ");
}

/* onnxruntime training's artifacts: parameters are graph inputs, and gradients reach the
 * outputs through an accumulation ("W_grad.accumulation.out"); the loss is named. */
Test(loss_scale, parameters_as_inputs_and_accumulated_gradients) {
    AmpModel *m = model();
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "2");
    rt_input(g, "W", AMP_DT_FLOAT, "2");
    rt_input(g, "W_grad.accumulation.buffer", AMP_DT_FLOAT, "2");
    rt_scalar_f(g, "loss_grad", 1.0f);
    nd(g, "Mul", "fwd", "x,W", "p");
    AmpNode *r = nd(g, "ReduceSum", "loss/sum", "p", "loss");
    attr_i(r, "keepdims", 0);
    nd(g, "Mul", "bwd", "x,loss_grad", "W_grad");
    nd(g, "Add", "accumulate", "W_grad.accumulation.buffer,W_grad", "W_grad.accumulation.out");
    rt_output(g, "loss", AMP_DT_FLOAT, "");
    rt_output(g, "W_grad.accumulation.out", AMP_DT_FLOAT, "2");
    AmpPassOptions po = {.loss = "loss"};
    scaled(m, &po);
    AmpNode *acc = node_of(m, "accumulate");
    cr_assert_str_eq(acc->inputs[1]->name, "W_grad");
    cr_assert_str_eq(acc->inputs[1]->producer->name, "amp_loss_scale/unscale/W_grad", "accumulates unscaled");
    amp_model_free(m);
}

/* An embedding's training graph as onnxruntime-training writes it: the table E's gradient
 * comes out of com.microsoft GatherGrad (shape, indices, dY).
 *   Y = Gather(E, ids); loss = ReduceSum(Y); Y_grad = Expand(loss_grad, [3,2]);
 *   E_grad = GatherGrad([4,2], ids, Y_grad)    (or an op ampc cannot type: `grad_op`)
 *   E_grad_out = Identity(E_grad), an output (the update path; E_grad itself untyped in
 *   the file, as in onnxruntime's graphs, where it flows into an accumulator). */
static AmpModel *embedding(const char *grad_op) {
    AmpModel *m = model();
    m->opsets[m->n_opsets++] = (AmpOpset){"com.microsoft", 1, true};
    AmpGraph *g = m->graph;
    rt_input(g, "ids", AMP_DT_INT64, "3");
    static const int64_t d42[2] = {4, 2}, d1[1] = {2};
    const float e[8] = {0.5f, -1, 2, 0.25f, 1, 1, -3, 0.125f};
    rt_init(g, "E", AMP_DT_FLOAT, 2, d42, e);
    rt_scalar_f(g, "loss_grad", 1.0f);
    const int64_t yshape[2] = {3, 2}, eshape[2] = {4, 2};
    rt_init(g, "y_shape", AMP_DT_INT64, 1, d1, yshape);
    rt_init(g, "e_shape", AMP_DT_INT64, 1, d1, eshape);
    nd(g, "Gather", "fwd/embed", "E,ids", "Y");
    AmpNode *r = nd(g, "ReduceSum", "loss/sum", "Y", "loss");
    attr_i(r, "keepdims", 0);
    nd(g, "Expand", "bwd/expand", "loss_grad,y_shape", "Y_grad");
    nd_dom(g, "com.microsoft", grad_op, "bwd/embed_grad", "e_shape,ids,Y_grad", "E_grad");
    rt_output(g, "loss", AMP_DT_FLOAT, "");
    nd(g, "Identity", "bwd/out", "E_grad", "E_grad_out");
    rt_output(g, "E_grad_out", AMP_DT_FLOAT, NULL);
    return m;
}

/* GatherGrad is typed (dY's dtype, the shape input's values), so E's gradient is found
 * and unscaled: rows of repeated ids sum, exactly, whatever the scale. */
Test(loss_scale, an_embedding_gradient_from_gather_grad_is_unscaled) {
    AmpModel *m = embedding("GatherGrad");
    scaled(m, NULL);
    cr_assert_eq(m->n_training, 1, "found a training graph (by its backward nodes) and scaled it");
    AmpSession *s;
    cr_assert_eq(rt_open(m, NULL, &s, &st), AMP_OK, "%s", st.msg);
    int64_t ids[3] = {1, 3, 1};
    static const int64_t d3[1] = {3};
    AmpTensorView in[1] = {rt_view("ids", AMP_DT_INT64, ids, 1, d3)};
    const char *names[1] = {"E_grad_out"};
    AmpTensorView out[1];
    cr_assert_eq(amp_session_train_step(s, in, 1, names, 1, out, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(out[0].rank, 2);
    cr_assert_eq(out[0].dims[0], 4);
    const float *gE = out[0].data, want[8] = {0, 0, 2, 2, 0, 0, 1, 1};
    for (int i = 0; i < 8; i++) cr_assert_eq(gE[i], want[i], "element %d: %g, want %g (unscaled)", i, gE[i], want[i]);
    amp_tensor_view_free(&out[0]);
    amp_session_close(s);
}

/* A parameter gradient that nothing can type would stay scaled: the conversion refuses,
 * naming the gradient, its producer and the way out, instead of exiting 0 half-done. */
Test(loss_scale, a_gradient_ampc_cannot_type_fails_the_conversion) {
    assert_fails(embedding("MysteryGrad"), NULL, AMP_ERR_UNSUPPORTED, "gradient 'E_grad' of 'E' has no known type");
    assert_fails(embedding("MysteryGrad"), NULL, AMP_ERR_UNSUPPORTED, "com.microsoft.MysteryGrad");
    /* The way out in the words of the caller's front end (ir/front.h): a C program's field
     * (or variable), the command's flag. */
    assert_fails(embedding("MysteryGrad"), NULL, AMP_ERR_UNSUPPORTED,
                 "convert with loss_scale = \"none\" (AmpSessionOptions; or AMP_LOSS_SCALE=none)");
    amp_front_set(AMP_FRONT_CLI);
    assert_fails(embedding("MysteryGrad"), NULL, AMP_ERR_UNSUPPORTED, "convert with --loss-scale none");
    amp_front_set(AMP_FRONT_C);
}

/* onnxruntime-training's shape: the parameter W and its accumulation buffer are graph
 * inputs, the gradient adds into the buffer through com.microsoft InPlaceAccumulatorV2
 * (no training_info, no `*_grad` output: found by its backward nodes). The value added is
 * gated: a finite step accumulates the unscaled gradient, a step with an inf adds nothing
 * (the buffer stays exactly as it was, or zero on a reset step) and says amp_found_inf. */
Test(loss_scale, accumulated_gradients_are_unscaled_and_gated) {
    AmpModel *m = model();
    m->opsets[m->n_opsets++] = (AmpOpset){"com.microsoft", 1, true};
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "2");
    rt_input(g, "W", AMP_DT_FLOAT, "2");
    rt_input(g, "W_grad.accumulation.buffer", AMP_DT_FLOAT, "2");
    rt_input(g, "lazy_reset_grad", AMP_DT_BOOL, "1");
    rt_scalar_f(g, "loss_grad", 1.0f);
    nd(g, "Mul", "fwd", "x,W", "p");
    AmpNode *r = nd(g, "ReduceSum", "loss/sum", "p", "loss");
    attr_i(r, "keepdims", 0);
    nd(g, "Mul", "bwd", "x,loss_grad", "W_grad");
    nd_dom(g, "com.microsoft", "InPlaceAccumulatorV2", "accumulate",
           "W_grad.accumulation.buffer,W_grad,lazy_reset_grad", "W_grad.accumulation.flag,W_grad.accumulation.out");
    rt_output(g, "loss", AMP_DT_FLOAT, "");
    rt_output(g, "W_grad.accumulation.out", AMP_DT_FLOAT, "2");
    scaled(m, NULL);
    AmpSession *s;
    cr_assert_eq(rt_open(m, NULL, &s, &st), AMP_OK, "%s", st.msg);
    static const int64_t d2[1] = {2}, d1[1] = {1};
    float w[2] = {1, 2}, buf[2] = {10, 20};
    uint8_t reset = 0;
    for (int overflow = 0; overflow < 3; overflow++) {
        reset = overflow == 2; /* a step that resets the buffer and overflows */
        float x[2] = {3.0f, overflow ? INFINITY : -0.5f};
        AmpTensorView in[4] = {rt_view("x", AMP_DT_FLOAT, x, 1, d2), rt_view("W", AMP_DT_FLOAT, w, 1, d2),
                               rt_view("W_grad.accumulation.buffer", AMP_DT_FLOAT, buf, 1, d2),
                               rt_view("lazy_reset_grad", AMP_DT_BOOL, &reset, 1, d1)};
        const char *names[2] = {"W_grad.accumulation.out", "amp_found_inf"};
        AmpTensorView out[2];
        cr_assert_eq(amp_session_train_step(s, in, 4, names, 2, out, &st), AMP_OK, "%s", st.msg);
        const float *acc = out[0].data;
        cr_assert_eq(*(const uint8_t *)out[1].data, overflow != 0, "amp_found_inf");
        if (overflow == 2) {
            cr_assert_eq(acc[0], 0.0f, "a reset step that overflows: no good gradient since the reset");
            cr_assert_eq(acc[1], 0.0f);
        } else if (overflow) {
            cr_assert_eq(acc[0], 10.0f, "a skipped step leaves the buffer as it was");
            cr_assert_eq(acc[1], 20.0f);
        } else {
            cr_assert_eq(acc[0], 13.0f, "buffer + the unscaled gradient x * seed");
            cr_assert_eq(acc[1], 19.5f);
        }
        amp_tensor_view_free(&out[0]), amp_tensor_view_free(&out[1]);
    }
    amp_session_close(s);
}

/* onnxruntime-training's graph with a loss not named like one (an onnxblock loss whose
 * output is "output"): found by its seed "output_grad"; and an accumulator that adds a
 * value that is no parameter's gradient fails the conversion (it would stay scaled). */
static AmpModel *ort_shaped(const char *loss, const char *added) {
    AmpModel *m = model();
    m->opsets[m->n_opsets++] = (AmpOpset){"com.microsoft", 1, true};
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "2");
    rt_input(g, "W", AMP_DT_FLOAT, "2");
    rt_input(g, "W_grad.accumulation.buffer", AMP_DT_FLOAT, "2");
    rt_input(g, "lazy_reset_grad", AMP_DT_BOOL, "1");
    char seed[64], inputs[128];
    snprintf(seed, sizeof seed, "%s_grad", loss);
    rt_scalar_f(g, seed, 1.0f);
    nd(g, "Mul", "fwd", "x,W", "p");
    AmpNode *r = nd(g, "ReduceSum", "loss/sum", "p", loss);
    attr_i(r, "keepdims", 0);
    snprintf(inputs, sizeof inputs, "x,%s", seed);
    nd(g, "Mul", "bwd", inputs, "W_grad");
    nd(g, "Mul", "bwd2", "W_grad,x", "other");
    snprintf(inputs, sizeof inputs, "W_grad.accumulation.buffer,%s,lazy_reset_grad", added);
    nd_dom(g, "com.microsoft", "InPlaceAccumulatorV2", "accumulate", inputs, "W_grad.accumulation.out");
    rt_output(g, loss, AMP_DT_FLOAT, "");
    rt_output(g, "W_grad.accumulation.out", AMP_DT_BOOL, "1");
    return m;
}

Test(loss_scale, the_loss_is_found_by_its_seed) {
    AmpModel *m = ort_shaped("output", "W_grad");
    scaled(m, NULL);
    AmpNode *acc = node_of(m, "accumulate");
    cr_assert_str_eq(acc->inputs[1]->producer->op_type, "Where", "the value added is gated");
    cr_assert_str_eq(acc->inputs[1]->producer->inputs[2]->producer->name, "amp_loss_scale/unscale/W_grad");
    cr_assert_str_eq(val_of(m->graph, "output_grad")->uses[0].node->name, "amp_loss_scale/seed", "the seed is scaled");
    amp_model_free(m);
}

Test(loss_scale, an_accumulated_value_that_is_no_gradient_fails) {
    assert_fails(ort_shaped("loss", "other"), NULL, AMP_ERR_INPUT, "accumulator 'accumulate' adds 'other'");
}

/* loss_scale_state_inputs (`--loss-scale-state inputs`): the scale and tracker are plain
 * graph inputs with no initializer and no update_binding, for runtimes that treat
 * initializers as constants; the caller feeds them and reads the new ones back. */
Test(loss_scale, the_state_as_plain_inputs) {
    AmpModel *m = tiny(false, false);
    AmpPassOptions po = {.loss_scale_state_inputs = true};
    scaled(m, &po);
    cr_assert(is_input(m->graph, "amp_loss_scale") && is_input(m->graph, "amp_growth_tracker"));
    cr_assert_null(amp_graph_lookup(m->graph, "amp_loss_scale")->initializer, "no initializer");
    cr_assert_null(amp_graph_lookup(m->graph, "amp_growth_tracker")->initializer);
    cr_assert_eq(m->n_training, 0, "no update_binding");
    cr_assert(is_output(m->graph, "amp_loss_scale_new") && is_output(m->graph, "amp_growth_tracker_new"));
    AmpSession *s;
    cr_assert_eq(rt_open(m, NULL, &s, &st), AMP_OK, "%s", st.msg);
    float x[2] = {3.0f, -0.75f}, scale = 1024.0f;
    int64_t tracker = 0;
    static const int64_t d2[1] = {2};
    AmpTensorView in[3] = {rt_view("x", AMP_DT_FLOAT, x, 1, d2), rt_view("amp_loss_scale", AMP_DT_FLOAT, &scale, 0, NULL),
                           rt_view("amp_growth_tracker", AMP_DT_INT64, &tracker, 0, NULL)};
    const char *names[3] = {"W_grad", "amp_loss_scale_new", "amp_growth_tracker_new"};
    AmpTensorView out[3];
    cr_assert_eq(amp_session_run(s, in, 3, names, 3, out, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(((const float *)out[0].data)[0], 3.0f, "unscaled with the fed scale");
    cr_assert_eq(*(const float *)out[1].data, 1024.0f, "no growth after one clean step");
    cr_assert_eq(*(const int64_t *)out[2].data, 1, "the tracker counts the clean step");
    for (int i = 0; i < 3; i++) amp_tensor_view_free(&out[i]);
    amp_session_close(s);
}
