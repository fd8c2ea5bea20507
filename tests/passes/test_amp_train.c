/* The amp pass on training graphs (the loss subgraph stays fp32, optimizer ops and
 * producers of update-bound values stay fp32, one shared 16-bit copy per weight, the
 * loss found by name or --loss), on If/Loop bodies (coloured, values crossing the boundary
 * keep their types), and the regression cases users report with other fp16 converters:
 * redundant Cast pairs, Resize scales / Range / shape and index inputs wrongly cast, an
 * existing Cast(to=float) mistyped, topological order broken by boundary casts, and
 * weights in external data. */
#include "tests/passes/amp_test_util.h"

static AmpStatus st;

/* ---- training graphs --------------------------------------------------------------------
 * x[4,4] -> fwd/mm(W) -> h -> fwd/relu -> r -> loss/mm(r, u[4,1]) -> lm[4,1]
 *   loss = loss/reshape(lm -> [4]) ... ReduceMean would be deny anyway, so the loss is
 *   produced by a clear op (Reshape to a scalar-like [1] after a [1,1] MatMul), which only
 *   the loss rule keeps in fp32; post = Mul(loss, loss) lies downstream of it.
 * backward: bwd/t = Transpose(W); bwd/mm = MatMul(h, bwd/t) -> g1; W_grad = bwd/mmw(x^T, g1)
 * algorithm: W_step = Mul(lr, W_grad); W_new = Sub(W, W_step); update W <- W_new. */
static AmpModel *training_model(void) {
    AmpModel *m = model();
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "4,4");
    w44(g, "W");
    static const int64_t ud[2] = {4, 1}, vd[2] = {1, 4}, sd[1] = {1};
    weight(g, "u", 2, ud, NULL);
    weight(g, "v", 2, vd, NULL);
    const int64_t one[1] = {1};
    rt_init(g, "shape1", AMP_DT_INT64, 1, sd, one);
    nd(g, "MatMul", "fwd/mm", "x,W", "h");
    nd(g, "Relu", "fwd/relu", "h", "r");
    nd(g, "MatMul", "loss/mm1", "r,u", "lm1");
    nd(g, "MatMul", "loss/mm2", "v,lm1", "lm");
    nd(g, "Reshape", "loss/reshape", "lm,shape1", "loss");
    nd(g, "Mul", "loss/sq", "loss,loss", "post");
    nd(g, "Transpose", "bwd/t", "W", "Wt");
    nd(g, "MatMul", "bwd/mm", "h,Wt", "g1");
    nd(g, "Transpose", "bwd/xt", "x", "xt");
    nd(g, "MatMul", "bwd/mmw", "xt,g1", "W_grad");
    rt_output(g, "loss", AMP_DT_FLOAT, "1");
    rt_output(g, "post", AMP_DT_FLOAT, "1");
    rt_output(g, "W_grad", AMP_DT_FLOAT, "4,4");
    AmpGraph *a = rt_training(m);
    const float lr = 0.1f;
    rt_init(g, "lr", AMP_DT_FLOAT, 0, NULL, &lr);
    nd(a, "Mul", "opt/step", "lr,W_grad", "W_step");
    nd(a, "Sub", "opt/update", "W,W_step", "W_new");
    rt_output(a, "W_new", AMP_DT_FLOAT, "4,4");
    rt_bindings(m, false, "W=W_new");
    return m;
}

Test(amp_train, the_loss_subgraph_stays_fp32) {
    AmpModel *m = training_model();
    convert(m, NULL);
    cr_assert(is16(m, "loss/mm2"), "upstream of the loss: 16-bit");
    cr_assert_not(is16(m, "loss/reshape"), "the loss op");
    cr_assert_not(is16(m, "loss/sq"), "downstream of the loss");
    cr_assert_eq(dtype(val_of(m->graph, "loss")), AMP_DT_FLOAT);
    amp_model_free(m);
}

Test(amp_train, one_shared_16_bit_copy_per_weight_and_fp32_masters) {
    AmpModel *m = training_model();
    convert(m, NULL);
    AmpGraph *g = m->graph;
    cr_assert_eq(casts_of(g, "W"), 1, "forward and backward share W's copy");
    cr_assert_str_eq(node_of(m, "fwd/mm")->inputs[1]->name, "W_to_fp16");
    cr_assert_str_eq(node_of(m, "bwd/t")->inputs[0]->name, "W_to_fp16");
    cr_assert_eq(val_of(g, "W")->initializer->dtype, AMP_DT_FLOAT, "training weights stay fp32");
    /* The gradient keeps its name in fp32 for the optimizer; the update is fp32. */
    cr_assert_eq(dtype(val_of(g, "W_grad")), AMP_DT_FLOAT);
    AmpGraph *a = m->training[0].algorithm;
    AmpNode *upd = find_node(a, "opt/update");
    cr_assert_eq(dtype(upd->inputs[0]), AMP_DT_FLOAT);
    cr_assert_eq(dtype(upd->outputs[0]), AMP_DT_FLOAT);
    amp_model_free(m);
}

Test(amp_train, rules_are_explained) {
    AmpModel *m = training_model();
    Captured c;
    capture_begin(&c);
    AmpPassOptions po = {.explain_nodes = (const char *const[]){"loss/reshape"}, .n_explain_nodes = 1, .explain_out = c.f};
    convert(m, &po);
    const char *t = capture_end(&c);
    cr_assert_not_null(strstr(t, "the loss subgraph (the op computing 'loss'"), "%s", t);
    free(c.text);
    amp_model_free(m);

    m = training_model();
    /* An update op of the 16-bit lists is kept fp32 by the binding rule. */
    AmpListEdit e[1] = {{AMP_OP_Sub, AMP_CLASS_ALLOW, false}};
    capture_begin(&c);
    AmpPassOptions p2 = {.explain_nodes = (const char *const[]){"opt/update"}, .n_explain_nodes = 1, .explain_out = c.f, .list_edits = e, .n_list_edits = 1};
    convert(m, &p2);
    t = capture_end(&c);
    cr_assert_not_null(strstr(t, "it produces 'W_new', which training_info binds"), "%s", t);
    cr_assert_eq(dtype(find_node(m->training[0].algorithm, "opt/update")->outputs[0]), AMP_DT_FLOAT);
    free(c.text);
    amp_model_free(m);
}

Test(amp_train, optimizer_ops_stay_fp32_even_when_listed_allow) {
    AmpModel *m = rt_model(17);
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "4,4");
    w44(g, "W");
    w44(g, "W_mom");
    const float lr = 0.1f;
    const int64_t step = 0;
    rt_init(g, "lr", AMP_DT_FLOAT, 0, NULL, &lr);
    rt_init(g, "step", AMP_DT_INT64, 0, NULL, &step);
    nd(g, "MatMul", "mm", "x,W", "loss_m");
    nd(g, "ReduceSum", "sum", "loss_m", "loss");
    attr_i(node_of(m, "sum"), "keepdims", 0);
    nd(g, "MatMul", "gmm", "x,x", "W_grad");
    rt_output(g, "loss", AMP_DT_FLOAT, "");
    AmpGraph *a = rt_training(m);
    AmpNode *mo = nd_dom(a, "ai.onnx.preview.training", "Momentum", "opt", "lr,step,W,W_grad,W_mom", "W_new,W_mom_new");
    AmpAttr *at = amp_node_add_attr(mo, "mode", AMP_ATTR_STRING);
    at->s.data = (const uint8_t *)"standard";
    at->s.len = 8;
    AmpAttr *al = amp_node_add_attr(mo, "alpha", AMP_ATTR_FLOAT);
    al->f = 0.9f;
    AmpAttr *be = amp_node_add_attr(mo, "beta", AMP_ATTR_FLOAT);
    be->f = 1.0f;
    AmpAttr *nc = amp_node_add_attr(mo, "norm_coefficient", AMP_ATTR_FLOAT);
    nc->f = 0.0f;
    rt_output(a, "W_new", AMP_DT_FLOAT, "4,4");
    rt_output(a, "W_mom_new", AMP_DT_FLOAT, "4,4");
    rt_bindings(m, false, "W=W_new,W_mom=W_mom_new");
    AmpListEdit e[1] = {{AMP_OP_Momentum, AMP_CLASS_ALLOW, false}};
    AmpPassOptions po = {.list_edits = e, .n_list_edits = 1, .level = AMP_LEVEL_UNSAFE_FORCE_ALL};
    convert(m, &po);
    AmpNode *opt = find_node(a, "opt");
    for (int i = 0; i < opt->n_inputs; i++)
        if (i != 1) cr_assert_eq(dtype(opt->inputs[i]), AMP_DT_FLOAT, "input %d", i);
    cr_assert(is16(m, "gmm"));
    cr_assert_eq(dtype(val_of(g, "W_grad")), AMP_DT_FLOAT);
    amp_model_free(m);
}

static AmpModel *two_losses(void) {
    AmpModel *m = model();
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "4,4");
    w44(g, "W");
    nd(g, "MatMul", "mm", "x,W", "h");
    nd(g, "ReduceSum", "la", "h", "loss_a");
    attr_i(node_of(m, "la"), "keepdims", 0);
    nd(g, "ReduceMax", "lb", "h", "loss_b");
    attr_i(node_of(m, "lb"), "keepdims", 0);
    nd(g, "MatMul", "gmm", "x,x", "W_grad");
    rt_output(g, "loss_a", AMP_DT_FLOAT, "");
    rt_output(g, "loss_b", AMP_DT_FLOAT, "");
    rt_output(g, "W_grad", AMP_DT_FLOAT, "4,4");
    return m;
}

Test(amp_train, the_loss_is_found_by_name_or_given) {
    AmpModel *m = two_losses();
    cr_assert_eq(run_list(m, NULL, NULL, &st), AMP_ERR_INPUT);
    cr_assert_not_null(strstr(st.msg, "--loss"), "%s", st.msg);
    amp_model_free(m);

    m = two_losses();
    AmpPassOptions po = {.loss = "loss_b"};
    convert(m, &po);
    cr_assert_not(is16(m, "lb"), "ReduceMax (clear) is the loss op: fp32");
    amp_model_free(m);

    m = two_losses();
    po.loss = "no_such_value";
    cr_assert_eq(run_list(m, NULL, &po, &st), AMP_ERR_USAGE);
    cr_assert_not_null(strstr(st.msg, "no_such_value"), "%s", st.msg);
    amp_model_free(m);
}

/* Found by fuzz_convert: in a model converted before, the loss-scaling pass's Mul stands
 * between the backward seed and its readers, which read <loss>_grad_scaled (65536 times
 * the gradient, past float16's range). The seed rule follows the seed through that Mul:
 * under unsafe-force-all the reader (grad/loss/Div of models/mlp_train) stayed float32 in
 * the first conversion but became float16 in the second. */
Test(amp_train, seed_readers_behind_the_loss_scaling_stay_fp32_when_converted_again) {
    AmpModel *m = NULL;
    cr_assert_eq(amp_model_load_file(AMPC_TEST_DIR "/../models/mlp_train/model.onnx", NULL, &m, &st), AMP_OK,
                 "%s", st.msg);
    AmpPassOptions po = {.level = AMP_LEVEL_UNSAFE_FORCE_ALL};
    const char *pipeline = "infer,amp,loss_scale,cast_cleanup";
    cr_assert_eq(run_list(m, pipeline, &po, &st), AMP_OK, "%s", st.msg);
    AmpNode *div = node_of(m, "grad/loss/Div");
    cr_assert_str_eq(div->inputs[0]->name, "loss_grad_scaled", "the loss-scaling pass scaled the seed");
    cr_assert_eq(out_dt(m, "grad/loss/Div", 0), AMP_DT_FLOAT);
    size_t n1, n2;
    uint8_t *a = saved(m, &n1);
    amp_model_free(m);
    cr_assert_eq(amp_model_load_bytes(a, n1, NULL, NULL, &m, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(run_list(m, pipeline, &po, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(out_dt(m, "grad/loss/Div", 0), AMP_DT_FLOAT, "the seed's reader, converted again");
    uint8_t *b = saved(m, &n2);
    cr_assert(n1 == n2 && memcmp(a, b, n1) == 0, "converting the converted model changed it");
    free(a);
    free(b);
    amp_model_free(m);
}

/* ---- subgraphs ---------------------------------------------------------------------------- */

static AmpGraph *body(AmpNode *owner, const char *attr, const char *name) {
    AmpGraph *b = amp_graph_new(owner->graph->model, owner->graph);
    b->owner = owner;
    b->name = name;
    amp_node_add_attr(owner, attr, AMP_ATTR_GRAPH)->g = b;
    return b;
}

Test(amp_subgraph, if_branches_are_coloured_and_keep_their_boundary_types) {
    AmpModel *m = model();
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "4,4");
    rt_input(g, "c", AMP_DT_BOOL, "");
    w44(g, "W");
    nd(g, "MatMul", "outer", "x,W", "h");
    AmpNode *iff = nd(g, "If", "if", "c", "y");
    AmpGraph *t = body(iff, "then_branch", "then");
    nd(t, "MatMul", "then/mm", "h,W", "t1");
    nd(t, "Relu", "then/relu", "t1", "t_out");
    rt_output(t, "t_out", AMP_DT_FLOAT, "4,4");
    AmpGraph *e = body(iff, "else_branch", "else");
    nd(e, "Exp", "else/exp", "h", "e_out");
    rt_output(e, "e_out", AMP_DT_FLOAT, "4,4");
    rt_output(g, "y", AMP_DT_FLOAT, "4,4");
    convert(m, NULL);
    cr_assert(is16(m, "outer"));
    AmpNode *tm = find_node(t, "then/mm"), *tr = find_node(t, "then/relu");
    cr_assert_eq(dtype(tm->inputs[0]), AMP_DT_FLOAT16);
    cr_assert_eq(dtype(tr->inputs[0]), AMP_DT_FLOAT16);
    /* Values crossing the boundary keep their types: h is read in fp32 by the bodies. */
    cr_assert_eq(dtype(val_of(g, "h")), AMP_DT_FLOAT);
    cr_assert_eq(tm->inputs[0]->graph, t, "the body casts outer values itself");
    cr_assert_eq(dtype(t->outputs.items[0].value), AMP_DT_FLOAT);
    cr_assert_eq(dtype(val_of(g, "y")), AMP_DT_FLOAT);
    cr_assert_eq(val_of(g, "W")->initializer->dtype, AMP_DT_FLOAT, "read across the boundary: stays fp32");
    amp_model_free(m);
}

Test(amp_subgraph, loop_body_is_coloured) {
    AmpModel *m = model();
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "4,4");
    w44(g, "W");
    const int64_t trips = 3;
    const uint8_t yes = 1;
    rt_init(g, "M", AMP_DT_INT64, 0, NULL, &trips);
    rt_init(g, "cond", AMP_DT_BOOL, 0, NULL, &yes);
    AmpNode *loop = nd(g, "Loop", "loop", "M,cond,x", "y");
    AmpGraph *b = body(loop, "body", "body");
    rt_input(b, "i", AMP_DT_INT64, "");
    rt_input(b, "c_in", AMP_DT_BOOL, "");
    rt_input(b, "v_in", AMP_DT_FLOAT, "4,4");
    nd(b, "Identity", "body/cond", "c_in", "c_out");
    nd(b, "MatMul", "body/mm", "v_in,W", "v_mm");
    nd(b, "Tanh", "body/tanh", "v_mm", "v_out");
    rt_output(b, "c_out", AMP_DT_BOOL, "");
    rt_output(b, "v_out", AMP_DT_FLOAT, "4,4");
    rt_output(g, "y", AMP_DT_FLOAT, "4,4");
    convert(m, NULL);
    cr_assert_eq(dtype(find_node(b, "body/mm")->inputs[0]), AMP_DT_FLOAT16);
    cr_assert_eq(dtype(val_of(b, "v_in")), AMP_DT_FLOAT, "loop-carried values keep their type");
    cr_assert_eq(dtype(val_of(b, "v_out")), AMP_DT_FLOAT);
    cr_assert_eq(dtype(find_node(b, "body/cond")->inputs[0]), AMP_DT_BOOL);
    amp_model_free(m);
}

/* ---- regressions: problems users report with other fp16 converters -------------------------- */

Test(amp_regression, redundant_cast_pairs_are_not_made) {
    /* The model already casts its fp16 input up: the MatMul reads the fp16 input itself. */
    AmpModel *m = model();
    AmpGraph *g = m->graph;
    rt_input(g, "x16", AMP_DT_FLOAT16, "4,4");
    w44(g, "W");
    nd(g, "Cast", "up", "x16", "x");
    attr_i(node_of(m, "up"), "to", AMP_DT_FLOAT);
    nd(g, "MatMul", "mm", "x,W", "h");
    nd(g, "Relu", "relu", "h", "y");
    rt_output(g, "y", AMP_DT_FLOAT, "4,4");
    convert(m, NULL);
    cr_assert_str_eq(node_of(m, "mm")->inputs[0]->name, "x16");
    cr_assert_null(find_node(g, "up"), "the user's up-cast is now unused and gone");
    cr_assert_eq(count_op(g, "Cast"), 1, "one Cast: y back to fp32");
    amp_model_free(m);
}

Test(amp_regression, resize_scales_range_and_indices_keep_their_types) {
    AmpModel *m = model();
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "1,1,4,4");
    const int64_t kd[4] = {1, 1, 1, 1}, sd[1] = {4};
    weight(g, "K", 4, kd, NULL);
    weight(g, "K2", 4, kd, NULL);
    const float scales[4] = {1, 1, 2, 2};
    rt_init(g, "scales", AMP_DT_FLOAT, 1, sd, scales);
    const float start = 0, limit = 8, delta = 1;
    rt_init(g, "start", AMP_DT_FLOAT, 0, NULL, &start);
    rt_init(g, "limit", AMP_DT_FLOAT, 0, NULL, &limit);
    rt_init(g, "delta", AMP_DT_FLOAT, 0, NULL, &delta);
    nd(g, "Conv", "conv1", "x,K", "c1");
    nd(g, "Resize", "resize", "c1,,scales", "rs");
    nd(g, "Range", "range", "start,limit,delta", "rg");
    nd(g, "Add", "add", "rs,rg", "a");
    nd(g, "Conv", "conv2", "a,K2", "y");
    rt_output(g, "y", AMP_DT_FLOAT, NULL);
    convert(m, NULL);
    cr_assert(is16(m, "resize") && is16(m, "add"));
    cr_assert_str_eq(node_of(m, "resize")->inputs[2]->name, "scales");
    cr_assert_eq(in_dt(m, "resize", 2), AMP_DT_FLOAT);
    cr_assert_eq(val_of(g, "scales")->initializer->dtype, AMP_DT_FLOAT);
    cr_assert_eq(in_dt(m, "range", 0), AMP_DT_FLOAT);
    cr_assert_eq(out_dt(m, "range", 0), AMP_DT_FLOAT, "Range is never converted");
    cr_assert_eq(val_of(g, "start")->initializer->dtype, AMP_DT_FLOAT);
    cr_assert_str_eq(node_of(m, "add")->inputs[1]->name, "rg_to_fp16");
    amp_model_free(m);
}

Test(amp_regression, an_existing_cast_to_float_keeps_its_meaning_and_type) {
    AmpModel *m = model();
    AmpGraph *g = m->graph;
    rt_input(g, "ids", AMP_DT_INT64, "4,4");
    w44(g, "W");
    nd(g, "Cast", "usercast", "ids", "f");
    attr_i(node_of(m, "usercast"), "to", AMP_DT_FLOAT);
    AmpValueInfo *vi = amp_graph_add_value_info(g, val_of(g, "f"));
    cr_assert_not_null(vi);
    nd(g, "MatMul", "mm", "f,W", "y");
    rt_output(g, "y", AMP_DT_FLOAT, NULL);
    convert(m, NULL);
    AmpNode *c = node_of(m, "usercast");
    cr_assert_eq(amp_node_attr_int(c, "to", 0), AMP_DT_FLOAT);
    cr_assert_eq(out_dt(m, "usercast", 0), AMP_DT_FLOAT);
    cr_assert_str_eq(node_of(m, "mm")->inputs[0]->name, "f_to_fp16");
    amp_model_free(m);
}

Test(amp_regression, boundary_casts_keep_topological_order) {
    /* Values produced late and read by 16-bit nodes, inputs read deep in the graph: the
     * verifier (after every pass) checks the order; the casts sit right after producers. */
    AmpModel *m = model();
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "4,4");
    rt_input(g, "z", AMP_DT_FLOAT, "4,4");
    w44(g, "W");
    nd(g, "Exp", "e1", "x", "a");
    nd(g, "Exp", "e2", "a", "b");
    nd(g, "MatMul", "mm1", "b,W", "c");
    nd(g, "Exp", "e3", "c", "d");
    nd(g, "MatMul", "mm2", "d,z", "y");
    nd(g, "MatMul", "mm3", "a,z", "y2");
    rt_output(g, "y", AMP_DT_FLOAT, NULL);
    rt_output(g, "y2", AMP_DT_FLOAT, NULL);
    convert(m, NULL);
    cr_assert_eq(node_of(m, "e1")->next->op, AMP_OP_Cast, "a's cast follows its producer");
    cr_assert_eq(casts_of(g, "z"), 1);
    cr_assert_eq(g->first->op, AMP_OP_Cast);
    cr_assert_eq(amp_graph_toposort(g, &st), AMP_OK);
    amp_model_free(m);
}

Test(amp_regression, weights_in_external_data_are_converted) {
    char dir[] = "/tmp/ampc_amp_ext_XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char in[256], out[256], data[256];
    snprintf(in, sizeof in, "%s/in.onnx", dir);
    snprintf(out, sizeof out, "%s/out.onnx", dir);
    snprintf(data, sizeof data, "%s/in.onnx.data", dir);
    AmpModel *m = model();
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "2,512");
    static const int64_t d[2] = {512, 512};
    weight(g, "W", 2, d, NULL);
    nd(g, "MatMul", "mm", "x,W", "y");
    rt_output(g, "y", AMP_DT_FLOAT, NULL);
    AmpSaveOptions so = {.external = AMP_SAVE_EXTERNAL_ALWAYS, .external_min_bytes = 1024};
    cr_assert_eq(amp_model_save_file(m, in, &so, &st), AMP_OK, "%s", st.msg);
    amp_model_free(m);
    m = NULL;
    cr_assert_eq(amp_model_load_file(in, NULL, &m, &st), AMP_OK, "%s", st.msg);
    cr_assert(val_of(m->graph, "W")->initializer->is_external);
    convert(m, NULL);
    AmpTensor *t = val_of(m->graph, "W")->initializer;
    cr_assert_eq(t->dtype, AMP_DT_FLOAT16);
    cr_assert_eq(t->raw.len, 512 * 512 * 2);
    cr_assert_not(t->is_external);
    cr_assert_eq(amp_model_save_file(m, out, &so, &st), AMP_OK, "%s", st.msg);
    amp_model_free(m);
    m = NULL;
    cr_assert_eq(amp_model_load_file(out, NULL, &m, &st), AMP_OK, "%s", st.msg);
    t = val_of(m->graph, "W")->initializer;
    cr_assert_eq(t->dtype, AMP_DT_FLOAT16);
    AmpBytes b;
    cr_assert_eq(amp_tensor_bytes(m, t, &b, &st), AMP_OK);
    cr_assert_eq(((const uint16_t *)b.data)[0], 0xBE00);
    amp_model_free(m);
    char rm[300];
    snprintf(rm, sizeof rm, "rm -rf %s", dir);
    cr_assert_eq(system(rm), 0);
    (void)data;
}
