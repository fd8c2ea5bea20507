/* Float32 Constant nodes in inference graphs (passes/amp_weights.c): a Constant that only
 * 16-bit nodes read is stored in 16 bits in the node itself (same node, same output
 * name, no Cast), in each of its forms (`value`, `value_float`, `value_floats`), in
 * fp16 and bf16, in If bodies too, and the model still computes what it did; one with a
 * value the target cannot hold stays float32, is reported and cast where it is used; one
 * read in float32 too, or read as a shape / scales input, or in a training graph, stays
 * float32; a second conversion changes nothing; the report counts what the file holds. */
#include <math.h>

#include "tests/passes/amp_test_util.h"
#include "ir/half.h"
#include "tools/report.h"

static AmpStatus st;

static char notices[4096];

static void note(void *ctx, const char *line) {
    (void)ctx;
    strncat(notices, line, sizeof notices - strlen(notices) - 2);
    strcat(notices, "\n");
}

/* ---- building Constants -------------------------------------------------------------- */

/* Constant node `name` writing `out`, its `value` a float32 tensor of the given dims
 * holding data (or 0.25 * (i % 9 - 4) when data is NULL). */
static AmpNode *const_tensor(AmpGraph *g, const char *name, const char *out, int rank, const int64_t *dims,
                             const float *data) {
    AmpModel *m = g->model;
    AmpNode *n = nd(g, "Constant", name, "", out);
    uint64_t cnt = 1;
    for (int i = 0; i < rank; i++) cnt *= (uint64_t)dims[i];
    float *d = malloc(cnt * sizeof *d + 4);
    for (uint64_t i = 0; i < cnt; i++) d[i] = data ? data[i] : 0.25f * (float)((int)(i % 9) - 4);
    AmpTensor *t = amp_arena_calloc(&m->arena, 1, sizeof *t);
    t->dtype = AMP_DT_FLOAT;
    t->has = AMP_TENSOR_HAS_DTYPE | AMP_TENSOR_HAS_RAW;
    t->ndims = (size_t)rank;
    t->dims = amp_arena_calloc(&m->arena, rank ? (size_t)rank : 1, sizeof *t->dims);
    for (int i = 0; i < rank; i++) t->dims[i] = dims[i];
    t->nelem = cnt;
    t->raw.data = amp_arena_memdup(&m->arena, d, cnt * sizeof *d + 4);
    t->raw.len = cnt * sizeof *d;
    free(d);
    AmpAttr *a = amp_node_add_attr(n, "value", AMP_ATTR_TENSOR);
    cr_assert_not_null(a);
    a->t = t;
    return n;
}

static AmpNode *const_4x4(AmpGraph *g, const char *name, const char *out) {
    static const int64_t d[2] = {4, 4};
    return const_tensor(g, name, out, 2, d, NULL);
}

static AmpNode *const_float(AmpGraph *g, const char *name, const char *out, float x) {
    AmpNode *n = nd(g, "Constant", name, "", out);
    AmpAttr *a = amp_node_add_attr(n, "value_float", AMP_ATTR_FLOAT);
    cr_assert_not_null(a);
    a->f = x;
    return n;
}

static AmpNode *const_floats(AmpGraph *g, const char *name, const char *out, const float *x, size_t cnt) {
    AmpNode *n = nd(g, "Constant", name, "", out);
    AmpAttr *a = amp_node_add_attr(n, "value_floats", AMP_ATTR_FLOATS);
    cr_assert_not_null(a);
    a->floats = amp_arena_memdup(&g->model->arena, x, cnt * sizeof *x);
    a->n_floats = cnt;
    return n;
}

/* The tensor a Constant node holds in `value` (NULL when it has none). */
static AmpTensor *value_of(const AmpNode *n) {
    const AmpAttr *a = amp_node_attr(n, "value");
    return a && a->type == AMP_ATTR_TENSOR ? a->t : NULL;
}

/* Element i of a 16-bit tensor's raw data, as a float. */
static float elem16(const AmpTensor *t, size_t i) {
    uint16_t h;
    memcpy(&h, t->raw.data + 2 * i, 2);
    return t->dtype == AMP_DT_FLOAT16 ? amp_f16_to_f32(h) : amp_bf16_to_f32(h);
}

/* The checks every Constant stored in 16 bits passes: the node `node` still writes
 * `out` (no Cast after it, none reads it), the value is `dt`, and holds `want` rounded. */
static void stored_16(const AmpGraph *g, const char *node, const char *out, int dt, const float *want, size_t cnt) {
    AmpNode *c = find_node(g, node);
    cr_assert_not_null(c, "the Constant '%s' is gone", node);
    cr_assert_eq(c->op, AMP_OP_Constant);
    cr_assert_str_eq(c->outputs[0]->name, out, "same output name");
    cr_assert_eq(dtype(c->outputs[0]), dt, "the output value is 16-bit");
    cr_assert_eq(casts_of(g, out), 0, "no Cast reads '%s'", out);
    AmpTensor *t = value_of(c);
    cr_assert_not_null(t, "the Constant holds a `value` tensor");
    cr_assert_eq(t->dtype, dt);
    cr_assert_eq(t->nelem, cnt);
    cr_assert_eq(t->raw.len, 2 * cnt);
    cr_assert_null(amp_node_attr(c, "value_float"));
    cr_assert_null(amp_node_attr(c, "value_floats"));
    cr_assert_eq(c->n_attrs, 1, "one value attribute, as ONNX requires");
    double tol = dt == AMP_DT_FLOAT16 ? 1e-3 : 8e-3;
    for (size_t i = 0; want && i < cnt; i++)
        cr_assert(fabs(elem16(t, i) - want[i]) <= tol * fabs(want[i]), "element %zu: %g, want %g", i, elem16(t, i),
                  want[i]);
}

/* ---- running a model and its converted form --------------------------------------- */

/* Runs m (freed) on the float inputs x[2,4] (and bool c when with_c), returns y's floats
 * (malloc'd), their count in *n. */
static float *run_model(AmpModel *m, const float *x, bool with_c, bool c, size_t *n) {
    AmpSession *s = NULL;
    AmpStatus rst = {0};
    cr_assert_eq(rt_open(m, NULL, &s, &rst), AMP_OK, "open: %s", rst.msg);
    const int64_t xd[2] = {2, 4};
    uint8_t cb = c;
    AmpTensorView in[2] = {rt_view("x", AMP_DT_FLOAT, (void *)x, 2, xd), rt_view("c", AMP_DT_BOOL, &cb, 0, NULL)};
    const char *names[1] = {"y"};
    AmpTensorView out;
    cr_assert_eq(amp_session_run(s, in, with_c ? 2 : 1, names, 1, &out, &rst), AMP_OK, "run: %s", rst.msg);
    cr_assert_eq(out.dtype, AMP_DT_FLOAT, "the output keeps its float32 type");
    *n = amp_tensor_view_bytes(&out) / sizeof(float);
    float *y = malloc(*n * sizeof *y + 4);
    memcpy(y, out.data, *n * sizeof *y);
    amp_tensor_view_free(&out);
    amp_session_close(s);
    return y;
}

/* Builds the model twice, converts one with po, runs both and compares y within the
 * 16-bit type's tolerance (relative to y's largest magnitude). */
static void same_outputs(AmpModel *(*build)(void), const AmpPassOptions *po, bool with_c, bool c) {
    const float x[8] = {0.5f, -1, 1.5f, 2, -0.25f, 0.75f, -2, 1};
    size_t n32, n16;
    float *ref = run_model(build(), x, with_c, c, &n32);
    AmpModel *m = build();
    convert(m, po);
    float *got = run_model(m, x, with_c, c, &n16);
    cr_assert_eq(n32, n16);
    double big = 0;
    for (size_t i = 0; i < n32; i++) big = fmax(big, fabs(ref[i]));
    bool bf = po && po->precision == AMP_DT_BFLOAT16;
    double rtol = bf ? 6e-2 : 1e-2, atol = (bf ? 1e-2 : 1e-3) * (big > 1 ? big : 1);
    for (size_t i = 0; i < n32; i++)
        cr_assert(fabs(got[i] - ref[i]) <= atol + rtol * fabs(ref[i]), "y[%zu] = %g, fp32 gives %g", i, got[i],
                  ref[i]);
    free(ref);
    free(got);
}

/* x[2,4] -> MatMul(x, C) -> y[2,4], C a Constant 4x4. */
static AmpModel *matmul_const(void) {
    AmpModel *m = model();
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "2,4");
    const_4x4(g, "c", "C");
    nd(g, "MatMul", "mm", "x,C", "y");
    rt_output(g, "y", AMP_DT_FLOAT, "2,4");
    return m;
}

static const float *c4x4_values(void) {
    static float v[16];
    for (int i = 0; i < 16; i++) v[i] = 0.25f * (float)(i % 9 - 4);
    return v;
}

/* ---- stored in 16 bits ------------------------------------------------------------------ */

Test(amp_const, read_only_by_a_matmul_is_stored_fp16_without_a_cast) {
    AmpModel *m = matmul_const();
    notices[0] = '\0';
    AmpPassOptions po = {.notify = note};
    convert(m, &po);
    AmpGraph *g = m->graph;
    stored_16(g, "c", "C", AMP_DT_FLOAT16, c4x4_values(), 16);
    cr_assert(is16(m, "mm"));
    cr_assert_str_eq(node_of(m, "mm")->inputs[1]->name, "C", "the MatMul reads the Constant itself");
    cr_assert_eq(count_op(g, "Cast"), 2, "only x in and y out are cast");
    cr_assert_not_null(strstr(notices, "2 casts, 1 weights stored in 16 bits"), "%s", notices);
    amp_model_free(m);
    same_outputs(matmul_const, NULL, false, false);
}

Test(amp_const, bf16_likewise) {
    AmpModel *m = matmul_const();
    AmpPassOptions po = {.precision = AMP_DT_BFLOAT16};
    convert(m, &po);
    stored_16(m->graph, "c", "C", AMP_DT_BFLOAT16, c4x4_values(), 16);
    cr_assert_eq(in_dt(m, "mm", 0), AMP_DT_BFLOAT16);
    amp_model_free(m);
    same_outputs(matmul_const, &po, false, false);
}

Test(amp_const, below_opset_13_bf16_leaves_the_constant_alone) {
    /* Below opset 13 nothing turns bf16 (Cast-13 and Constant-13 take it): nor does C. */
    AmpModel *m = matmul_const();
    m->opsets[0].version = 12;
    AmpPassOptions po = {.precision = AMP_DT_BFLOAT16};
    convert(m, &po);
    cr_assert_eq(dtype(val_of(m->graph, "C")), AMP_DT_FLOAT);
    cr_assert_eq(value_of(node_of(m, "c"))->dtype, AMP_DT_FLOAT);
    amp_model_free(m);
}

/* x[2,4] -> MatMul(x, W) -> Mul(., s) -> MatMul(., V) -> y[2,4]: s a value_float (the Mul
 * is between allow nodes, so 16-bit), V a value_floats [4] broadcast by an Add. */
static AmpModel *scalar_and_list(void) {
    AmpModel *m = model();
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "2,4");
    const_4x4(g, "w", "W");
    const_float(g, "s", "S", 1.5f);
    const float b[4] = {0.5f, -0.25f, 2, 1};
    const_floats(g, "b", "B", b, 4);
    const_4x4(g, "v", "V");
    nd(g, "MatMul", "mm1", "x,W", "h");
    nd(g, "Mul", "mul", "h,S", "hs");
    nd(g, "Add", "add", "hs,B", "hb");
    nd(g, "MatMul", "mm2", "hb,V", "y");
    rt_output(g, "y", AMP_DT_FLOAT, "2,4");
    return m;
}

Test(amp_const, value_float_and_value_floats_become_a_16_bit_value) {
    for (int p = 0; p < 2; p++) {
        AmpModel *m = scalar_and_list();
        AmpPassOptions po = {.precision = p ? AMP_DT_BFLOAT16 : AMP_DT_FLOAT16};
        convert(m, &po);
        AmpGraph *g = m->graph;
        cr_assert(is16(m, "mul") && is16(m, "add"));
        const float s = 1.5f, b[4] = {0.5f, -0.25f, 2, 1};
        stored_16(g, "s", "S", po.precision, &s, 1);
        cr_assert_eq(value_of(node_of(m, "s"))->ndims, 0, "value_float is a scalar");
        cr_assert_eq(val_of(g, "S")->type.rank, 0);
        stored_16(g, "b", "B", po.precision, b, 4);
        AmpTensor *t = value_of(node_of(m, "b"));
        cr_assert_eq(t->ndims, 1, "value_floats is 1-D");
        cr_assert_eq(t->dims[0], 4);
        stored_16(g, "w", "W", po.precision, c4x4_values(), 16);
        stored_16(g, "v", "V", po.precision, c4x4_values(), 16);
        cr_assert_eq(count_op(g, "Cast"), 2);
        /* The saved model loads back with the same form. */
        size_t len;
        uint8_t *bytes = saved(m, &len);
        AmpModel *back = NULL;
        cr_assert_eq(amp_model_load_bytes(bytes, len, NULL, NULL, &back, &st), AMP_OK, "%s", st.msg);
        cr_assert_eq(value_of(node_of(back, "s"))->dtype, po.precision);
        cr_assert_eq(value_of(node_of(back, "b"))->dtype, po.precision);
        amp_model_free(back);
        free(bytes);
        amp_model_free(m);
        same_outputs(scalar_and_list, &po, false, false);
    }
}

Test(amp_const, several_16_bit_readers_share_the_stored_value) {
    AmpModel *m = matmul_const();
    AmpGraph *g = m->graph;
    nd(g, "MatMul", "mm2", "x,C", "z");
    rt_output(g, "z", AMP_DT_FLOAT, "2,4");
    convert(m, NULL);
    stored_16(g, "c", "C", AMP_DT_FLOAT16, c4x4_values(), 16);
    cr_assert_str_eq(node_of(m, "mm2")->inputs[1]->name, "C");
    amp_model_free(m);
}

/* ---- kept in float32 ---------------------------------------------------------------------- */

static AmpModel *big_const(float fill) {
    AmpModel *m = model();
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "2,4");
    float d[16];
    for (int i = 0; i < 16; i++) d[i] = i == 5 ? fill : 1;
    static const int64_t dims[2] = {4, 4};
    const_tensor(g, "big", "BIG", 2, dims, d);
    nd(g, "MatMul", "mm", "x,BIG", "y");
    rt_output(g, "y", AMP_DT_FLOAT, "2,4");
    return m;
}

/* A constant float16 cannot hold (it would round to inf) keeps its reader in float32
 * (passes/amp_range.c): no cast of it, the summary names it. */
Test(amp_const, out_of_range_stays_fp32_with_its_reader_and_is_reported) {
    AmpModel *m = big_const(1e5f);
    notices[0] = '\0';
    AmpPassOptions po = {.notify = note};
    convert(m, &po);
    AmpGraph *g = m->graph;
    cr_assert_eq(value_of(node_of(m, "big"))->dtype, AMP_DT_FLOAT);
    cr_assert_eq(dtype(val_of(g, "BIG")), AMP_DT_FLOAT);
    cr_assert_eq(casts_of(g, "BIG"), 0);
    cr_assert(!is16(m, "mm"));
    cr_assert_not_null(strstr(notices, "1 node kept in float32 for values beyond float16's range (from "
                                       "constant 'BIG' (100000))"), "%s", notices);
    amp_model_free(m);
    /* 65519 rounds to 65504, float16's largest: it fits. */
    m = big_const(65519.0f);
    convert(m, NULL);
    cr_assert(is16(m, "mm"));
    amp_model_free(m);
    /* 65504 is float16's largest: it fits. bfloat16 holds 1e5. */
    m = big_const(65504.0f);
    convert(m, NULL);
    cr_assert_eq(value_of(node_of(m, "big"))->dtype, AMP_DT_FLOAT16);
    amp_model_free(m);
    m = big_const(1e5f);
    po.precision = AMP_DT_BFLOAT16;
    convert(m, &po);
    cr_assert_eq(value_of(node_of(m, "big"))->dtype, AMP_DT_BFLOAT16);
    amp_model_free(m);
}

Test(amp_const, non_finite_values_stay_fp32_in_both_precisions) {
    const float bad[2] = {INFINITY, NAN};
    for (int k = 0; k < 2; k++)
        for (int p = 0; p < 2; p++) {
            AmpModel *m = big_const(bad[k]);
            notices[0] = '\0';
            AmpPassOptions po = {.notify = note, .precision = p ? AMP_DT_BFLOAT16 : AMP_DT_FLOAT16};
            convert(m, &po);
            cr_assert_eq(value_of(node_of(m, "big"))->dtype, AMP_DT_FLOAT);
            cr_assert_eq(casts_of(m->graph, "BIG"), 1);
            cr_assert_not_null(strstr(notices, "constant 'BIG' (node 'big') has values that are not finite"), "%s",
                               notices);
            amp_model_free(m);
        }
}

/* x[2,4] -> MatMul(x, W) -> Mul(., S) -> MatMul(., V) -> y, S a value_float. */
static AmpModel *scaled(float sv) {
    AmpModel *m = model();
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "2,4");
    const_4x4(g, "w", "W");
    const_float(g, "s", "S", sv);
    const_4x4(g, "v", "V");
    nd(g, "MatMul", "mm1", "x,W", "h");
    nd(g, "Mul", "mul", "h,S", "hs");
    nd(g, "MatMul", "mm2", "hs,V", "y");
    rt_output(g, "y", AMP_DT_FLOAT, "2,4");
    return m;
}

/* A value_float float16 cannot hold: kept as it was; the Mul reading it and the MatMul
 * reading the product (which carries its magnitude) stay float32. */
Test(amp_const, an_out_of_range_value_float_stays_as_it_was) {
    AmpModel *m = scaled(-7e4f);
    notices[0] = '\0';
    AmpPassOptions po = {.notify = note};
    convert(m, &po);
    AmpGraph *g = m->graph;
    cr_assert(is16(m, "mm1"));
    cr_assert(!is16(m, "mul"));
    cr_assert(!is16(m, "mm2"), "it reads the product, beyond float16's range too");
    AmpNode *s = node_of(m, "s");
    const AmpAttr *a = amp_node_attr(s, "value_float");
    cr_assert_not_null(a, "kept as it was");
    cr_assert_eq(a->f, -7e4f);
    cr_assert_null(value_of(s));
    cr_assert_eq(dtype(val_of(g, "S")), AMP_DT_FLOAT);
    cr_assert_eq(casts_of(g, "S"), 0);
    cr_assert_not_null(strstr(notices, "2 nodes kept in float32 for values beyond float16's range (from "
                                       "constant 'S' (-70000))"), "%s", notices);
    amp_model_free(m);
}

Test(amp_const, read_in_fp32_and_16_bits_stays_fp32_with_one_shared_cast) {
    AmpModel *m = matmul_const();
    AmpGraph *g = m->graph;
    nd(g, "MatMul", "mm2", "x,C", "z");
    nd(g, "Exp", "exp", "C", "e");
    rt_output(g, "z", AMP_DT_FLOAT, "2,4");
    rt_output(g, "e", AMP_DT_FLOAT, "4,4");
    convert(m, NULL);
    cr_assert_eq(value_of(node_of(m, "c"))->dtype, AMP_DT_FLOAT);
    cr_assert_eq(dtype(val_of(g, "C")), AMP_DT_FLOAT);
    cr_assert_eq(casts_of(g, "C"), 1, "one Cast, shared by both MatMuls");
    cr_assert_str_eq(node_of(m, "mm")->inputs[1]->name, "C_to_fp16");
    cr_assert_str_eq(node_of(m, "mm2")->inputs[1]->name, "C_to_fp16");
    cr_assert_str_eq(node_of(m, "exp")->inputs[0]->name, "C");
    /* The Cast comes right after the Constant. */
    cr_assert_eq(node_of(m, "c")->next->op, AMP_OP_Cast);
    amp_model_free(m);
}

Test(amp_const, a_graph_output_keeps_its_type) {
    AmpModel *m = matmul_const();
    rt_output(m->graph, "C", AMP_DT_FLOAT, "4,4");
    convert(m, NULL);
    cr_assert_eq(value_of(node_of(m, "c"))->dtype, AMP_DT_FLOAT);
    cr_assert_eq(dtype(val_of(m->graph, "C")), AMP_DT_FLOAT);
    cr_assert_eq(casts_of(m->graph, "C"), 1);
    amp_model_free(m);
}

Test(amp_const, shape_scales_and_index_inputs_are_never_float_cast) {
    AmpModel *m = model();
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "1,1,4,4");
    static const int64_t kd[4] = {1, 1, 1, 1}, sd[1] = {4};
    const_tensor(g, "k", "K", 4, kd, NULL);
    const_tensor(g, "k2", "K2", 4, kd, NULL);
    const float scales[4] = {1, 1, 2, 2};
    const_tensor(g, "scales", "SC", 1, sd, scales);
    nd(g, "Conv", "conv1", "x,K", "c1");
    nd(g, "Resize", "resize", "c1,,SC", "rs");
    nd(g, "Conv", "conv2", "rs,K2", "y");
    rt_output(g, "y", AMP_DT_FLOAT, NULL);
    convert(m, NULL);
    cr_assert(is16(m, "resize"));
    cr_assert_str_eq(node_of(m, "resize")->inputs[2]->name, "SC");
    cr_assert_eq(value_of(node_of(m, "scales"))->dtype, AMP_DT_FLOAT, "scales stay float32");
    cr_assert_eq(casts_of(g, "SC"), 0, "and are not cast");
    cr_assert_eq(value_of(node_of(m, "k"))->dtype, AMP_DT_FLOAT16);
    cr_assert_eq(value_of(node_of(m, "k2"))->dtype, AMP_DT_FLOAT16);
    amp_model_free(m);
}

Test(amp_const, training_graphs_keep_constants_fp32) {
    AmpModel *m = matmul_const();
    AmpGraph *g = m->graph;
    AmpNode *r = nd(g, "ReduceSum", "sum", "y", "loss");
    attr_i(r, "keepdims", 0);
    nd(g, "Identity", "grad", "y", "y_grad");
    rt_output(g, "loss", AMP_DT_FLOAT, "");
    rt_output(g, "y_grad", AMP_DT_FLOAT, "2,4");
    convert(m, NULL);
    cr_assert(is16(m, "mm"));
    cr_assert_eq(value_of(node_of(m, "c"))->dtype, AMP_DT_FLOAT);
    cr_assert_eq(casts_of(g, "C"), 1);
    amp_model_free(m);
}

/* ---- subgraphs --------------------------------------------------------------------------- */

static AmpGraph *body(AmpNode *owner, const char *attr, const char *name) {
    AmpGraph *b = amp_graph_new(owner->graph->model, owner->graph);
    b->owner = owner;
    b->name = name;
    amp_node_add_attr(owner, attr, AMP_ATTR_GRAPH)->g = b;
    return b;
}

/* If(c) then: MatMul(x, K) with K a Constant of the branch, MatMul(., O) with O a Constant
 * of the main graph; else: Relu(x). */
static AmpModel *if_model(void) {
    AmpModel *m = model();
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "2,4");
    rt_input(g, "c", AMP_DT_BOOL, "");
    const_4x4(g, "outer_c", "O");
    AmpNode *iff = nd(g, "If", "if", "c", "y");
    AmpGraph *t = body(iff, "then_branch", "then");
    const_4x4(t, "then/k", "K");
    nd(t, "MatMul", "then/mm", "x,K", "t1");
    nd(t, "MatMul", "then/mm2", "t1,O", "t_out");
    rt_output(t, "t_out", AMP_DT_FLOAT, "2,4");
    AmpGraph *e = body(iff, "else_branch", "else");
    nd(e, "Relu", "else/relu", "x", "e_out");
    rt_output(e, "e_out", AMP_DT_FLOAT, "2,4");
    rt_output(g, "y", AMP_DT_FLOAT, "2,4");
    return m;
}

Test(amp_const, constants_in_if_branches_are_stored_16_bit) {
    AmpModel *m = if_model();
    convert(m, NULL);
    AmpGraph *g = m->graph;
    AmpNode *iff = node_of(m, "if");
    AmpGraph *t = amp_node_attr(iff, "then_branch")->g;
    stored_16(t, "then/k", "K", AMP_DT_FLOAT16, c4x4_values(), 16);
    cr_assert_str_eq(find_node(t, "then/mm")->inputs[1]->name, "K");
    /* O crosses the boundary: it keeps its type and the body casts it. */
    cr_assert_eq(value_of(node_of(m, "outer_c"))->dtype, AMP_DT_FLOAT);
    cr_assert_eq(dtype(val_of(g, "O")), AMP_DT_FLOAT);
    cr_assert_eq(casts_of(t, "O"), 1);
    amp_model_free(m);
    same_outputs(if_model, NULL, true, true);
    same_outputs(if_model, NULL, true, false);
}

/* ---- idempotence and the report -------------------------------------------------------- */

static AmpModel *everything(void) {
    AmpModel *m = scalar_and_list();
    AmpGraph *g = m->graph;
    float d[16];
    for (int i = 0; i < 16; i++) d[i] = i == 3 ? 1e5f : 1;
    static const int64_t dims[2] = {4, 4};
    const_tensor(g, "big", "BIG", 2, dims, d);
    const_4x4(g, "mixed", "MIX");
    nd(g, "MatMul", "mm_big", "x,BIG", "z1");
    nd(g, "MatMul", "mm_mix", "x,MIX", "z2");
    nd(g, "Exp", "exp_mix", "MIX", "z3");
    rt_output(g, "z1", AMP_DT_FLOAT, "2,4");
    rt_output(g, "z2", AMP_DT_FLOAT, "2,4");
    rt_output(g, "z3", AMP_DT_FLOAT, "4,4");
    return m;
}

Test(amp_const, converting_twice_changes_nothing) {
    for (int p = 0; p < 2; p++) {
        AmpModel *m = everything();
        AmpPassOptions po = {.precision = p ? AMP_DT_BFLOAT16 : AMP_DT_FLOAT16};
        convert(m, &po);
        size_t n1, n2;
        uint8_t *a = saved(m, &n1);
        /* Through the bytes, as ampc would see the file. */
        AmpModel *again = NULL;
        cr_assert_eq(amp_model_load_bytes(a, n1, NULL, NULL, &again, &st), AMP_OK, "%s", st.msg);
        convert(again, &po);
        uint8_t *b = saved(again, &n2);
        cr_assert_eq(n1, n2, "the second conversion changed the size (%zu -> %zu)", n1, n2);
        cr_assert_eq(memcmp(a, b, n1), 0, "the second conversion changed the model");
        free(a);
        free(b);
        amp_model_free(again);
        amp_model_free(m);
        same_outputs(everything, &po, false, false);
    }
}

Test(amp_const, the_file_shrinks) {
    AmpModel *m = model();
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "2,64");
    static const int64_t d[2] = {64, 64};
    const_tensor(g, "c", "C", 2, d, NULL);
    nd(g, "MatMul", "mm", "x,C", "y");
    rt_output(g, "y", AMP_DT_FLOAT, "2,64");
    size_t before, after;
    free(saved(m, &before));
    convert(m, NULL);
    free(saved(m, &after));
    /* 64 x 64 floats take 8 KiB less; two Casts take a few bytes. */
    cr_assert_lt(after, before - 8000, "%zu -> %zu bytes", before, after);
    amp_model_free(m);
}

Test(amp_const, the_report_counts_what_the_model_holds) {
    AmpModel *m = everything();
    convert(m, NULL);
    AmpReport r;
    cr_assert_eq(amp_report_model(m, &r, &st), AMP_OK, "%s", st.msg);
    const AmpOpCount *row = NULL;
    for (size_t i = 0; i < r.n_ops; i++)
        if (strcmp(r.ops[i].op_type, "Constant") == 0) row = &r.ops[i];
    cr_assert_not_null(row);
    /* w, s, b, v in 16 bits; big (out of range: its MatMul stays fp32) and mixed (read by
     * Exp) in fp32. */
    cr_assert_eq(row->nodes, 6);
    cr_assert_eq(row->n16, 4);
    cr_assert_eq(row->n32, 2);
    /* Casts: x and MIX to 16 bits; y and z2 back. */
    cr_assert_eq(r.cast_dirs[AMP_CAST_32_TO_16], 2);
    cr_assert_eq(r.cast_dirs[AMP_CAST_16_TO_32], 2);
    cr_assert_eq(r.casts, 4);
    amp_report_free(&r);
    amp_model_free(m);
}
