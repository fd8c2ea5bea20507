/* Type and shape inference (ir/infer*.c): shapes of the common ops with their opset
 * differences, constants read from initializers and shape arithmetic, merging with
 * declared types (conflicts are errors that name node and value), unknown ops, and
 * If/Loop bodies. Graphs are built with the builder API; types are compared as text
 * such as "float[2,N,?]" ("?" an unknown dim, "[*]" an unknown rank). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

/* ---- building graphs ------------------------------------------------------------ */

static AmpModel *model(int64_t opset) {
    AmpModel *m = amp_model_new();
    cr_assert_not_null(m);
    m->opsets = amp_arena_calloc(&m->arena, 4, sizeof *m->opsets);
    m->opsets[0] = (AmpOpset){"", opset, true};
    m->opsets[1] = (AmpOpset){"com.microsoft", 1, true};
    m->opsets[2] = (AmpOpset){"ai.onnx.preview.training", 1, true};
    m->n_opsets = 3;
    return m;
}

static AmpValue *val(AmpGraph *g, const char *name) {
    AmpValue *v = amp_graph_lookup(g, name);
    return v ? v : amp_graph_value(g, name);
}

/* Sets a type from text: dims "2,N,?" (number, dim_param, unknown); "" rank 0;
 * NULL unknown rank. */
static void set_type(AmpGraph *g, AmpValue *v, int dtype, const char *dims) {
    v->type.kind = AMP_TYPE_TENSOR;
    v->type.dtype = dtype;
    v->type.rank = -1;
    v->type.dims = NULL;
    if (!dims) return;
    AmpDim *d = amp_arena_calloc(&g->model->arena, 16, sizeof *d);
    int r = 0;
    for (const char *p = dims; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char tok[32];
        cr_assert(len < sizeof tok && r < 16);
        memcpy(tok, p, len);
        tok[len] = '\0';
        if (tok[0] == '?') d[r] = (AmpDim){-1, NULL};
        else if (tok[0] >= '0' && tok[0] <= '9') d[r] = (AmpDim){atoll(tok), NULL};
        else d[r] = (AmpDim){-1, amp_arena_strdup(&g->model->arena, tok)};
        r++;
        p += len + (e != NULL);
    }
    v->type.rank = r;
    v->type.dims = d;
}

static AmpValue *input(AmpGraph *g, const char *name, int dtype, const char *dims) {
    AmpValue *v = amp_graph_value(g, name);
    set_type(g, v, dtype, dims);
    amp_graph_add_input(g, v);
    return v;
}

/* An int64 initializer of rank 1 (or 0 when n < 0: a scalar of vals[0]). */
static AmpValue *init_i64(AmpGraph *g, const char *name, int n, const int64_t *vals) {
    AmpArena *a = &g->model->arena;
    AmpTensor *t = amp_arena_calloc(a, 1, sizeof *t);
    int cnt = n < 0 ? 1 : n;
    t->dtype = AMP_DT_INT64;
    t->has = AMP_TENSOR_HAS_DTYPE;
    t->ndims = n < 0 ? 0 : 1;
    t->dims = amp_arena_calloc(a, 1, sizeof *t->dims);
    t->dims[0] = cnt;
    t->nelem = (uint64_t)cnt;
    t->n_int64 = (size_t)cnt;
    t->int64_data = amp_arena_calloc(a, (size_t)(cnt ? cnt : 1), sizeof *t->int64_data);
    for (int i = 0; i < cnt; i++) t->int64_data[i] = vals[i];
    AmpValue *v = amp_graph_value(g, name);
    cr_assert_eq(amp_graph_add_initializer(g, v, t), AMP_OK);
    return v;
}

static int split(const char *list, char names[16][32]) {
    if (!list || !*list) return 0;
    int n = 0;
    for (const char *p = list;;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        cr_assert(n < 16 && len < 32);
        memcpy(names[n], p, len);
        names[n++][len] = '\0';
        if (!e) return n;
        p = e + 1;
    }
}

/* outs = op(ins) in domain `dom`, appended to g; "" in a list leaves a slot out. */
static AmpNode *node_d(AmpGraph *g, const char *dom, const char *op, const char *name,
                       const char *ins, const char *outs) {
    char in[16][32], out[16][32];
    int ni = split(ins, in), no = split(outs, out);
    AmpNode *n = amp_node_new(g, dom, op, name, ni, no);
    cr_assert_not_null(n);
    for (int i = 0; i < ni; i++)
        if (in[i][0]) amp_node_set_input(n, i, val(g, in[i]));
    for (int i = 0; i < no; i++)
        if (out[i][0]) amp_node_set_output(n, i, amp_graph_value(g, out[i]));
    amp_node_append(g, n);
    return n;
}

static AmpNode *node(AmpGraph *g, const char *op, const char *name, const char *ins, const char *outs) {
    return node_d(g, "", op, name, ins, outs);
}

static void attr_int(AmpNode *n, const char *name, int64_t v) {
    amp_node_add_attr(n, name, AMP_ATTR_INT)->i = v;
}

static void attr_ints(AmpNode *n, const char *name, int cnt, const int64_t *v) {
    AmpAttr *a = amp_node_add_attr(n, name, AMP_ATTR_INTS);
    a->ints = amp_arena_calloc(&n->graph->model->arena, (size_t)(cnt ? cnt : 1), sizeof *a->ints);
    for (int i = 0; i < cnt; i++) a->ints[i] = v[i];
    a->n_ints = (size_t)cnt;
}

static void attr_str(AmpNode *n, const char *name, const char *s) {
    AmpAttr *a = amp_node_add_attr(n, name, AMP_ATTR_STRING);
    a->s.data = (const uint8_t *)amp_arena_strdup(&n->graph->model->arena, s);
    a->s.len = strlen(s);
}

static void attr_graph(AmpNode *n, const char *name, AmpGraph *body) {
    AmpAttr *a = amp_node_add_attr(n, name, AMP_ATTR_GRAPH);
    a->g = body;
    body->owner = n;
}

#define I64(...) (const int64_t[]){__VA_ARGS__}
#define NI64(...) (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), I64(__VA_ARGS__)

/* ---- checking --------------------------------------------------------------------- */

static const char *type_str(const AmpValue *v) {
    static char buf[256];
    const AmpType *t = &v->type;
    if (t->kind == AMP_TYPE_NONE) return "none";
    if (t->kind == AMP_TYPE_OTHER) return "other";
    size_t k = (size_t)snprintf(buf, sizeof buf, "%s[", amp_dtype_name(t->dtype));
    if (t->rank < 0) k += (size_t)snprintf(buf + k, sizeof buf - k, "*");
    for (int i = 0; i < t->rank && k < sizeof buf; i++) {
        const AmpDim *d = &t->dims[i];
        const char *sep = i ? "," : "";
        if (d->value >= 0) k += (size_t)snprintf(buf + k, sizeof buf - k, "%s%lld", sep, (long long)d->value);
        else if (d->param) k += (size_t)snprintf(buf + k, sizeof buf - k, "%s%s", sep, d->param);
        else k += (size_t)snprintf(buf + k, sizeof buf - k, "%s?", sep);
    }
    if (k < sizeof buf) snprintf(buf + k, sizeof buf - k, "]");
    return buf;
}

static void infer_ok(AmpModel *m) {
    AmpStatus st;
    amp_status_clear(&st);
    AmpCode rc = amp_infer_model(m, &st);
    cr_assert_eq(rc, AMP_OK, "inference failed: %s", st.msg);
}

/* Runs inference expecting AMP_ERR_INPUT; returns the message (static). */
static const char *infer_err(AmpModel *m) {
    static AmpStatus st;
    amp_status_clear(&st);
    AmpCode rc = amp_infer_model(m, &st);
    cr_assert_eq(rc, AMP_ERR_INPUT, "expected a bad-input error, got %d (%s)", rc, st.msg);
    return st.msg;
}

#define EXPECT_TYPE(g, name, want)                                                        \
    do {                                                                                  \
        const char *got_ = type_str(val(g, name));                                        \
        cr_expect_str_eq(got_, want, "value %s: got %s, want %s", name, got_, want);      \
    } while (0)

/* ---- elementwise ------------------------------------------------------------------ */

Test(infer, elementwise_broadcast_and_symbols) {
    AmpModel *m = model(17);
    AmpGraph *g = m->graph;
    input(g, "A", AMP_DT_FLOAT, "N,3,1");
    input(g, "B", AMP_DT_FLOAT, "4");
    input(g, "C", AMP_DT_FLOAT, "N,3,4");
    input(g, "D", AMP_DT_FLOAT, NULL);
    node(g, "Add", "add", "A,B", "ab");
    node(g, "Mul", "mul", "ab,C", "abc");
    node(g, "Relu", "relu", "abc", "r");
    node(g, "Less", "less", "r,B", "lt");
    node(g, "Not", "not", "lt", "nlt");
    node(g, "Sub", "sub", "A,D", "ad");
    node(g, "Sum", "sum", "A,B,C", "s3");
    infer_ok(m);
    EXPECT_TYPE(g, "ab", "float[N,3,4]");
    EXPECT_TYPE(g, "abc", "float[N,3,4]");
    EXPECT_TYPE(g, "r", "float[N,3,4]");
    EXPECT_TYPE(g, "lt", "bool[N,3,4]");
    EXPECT_TYPE(g, "nlt", "bool[N,3,4]");
    EXPECT_TYPE(g, "ad", "float[*]");
    EXPECT_TYPE(g, "s3", "float[N,3,4]");
    amp_model_free(m);
}

Test(infer, broadcast_mismatch_is_an_error) {
    AmpModel *m = model(17);
    AmpGraph *g = m->graph;
    input(g, "A", AMP_DT_FLOAT, "2,3");
    input(g, "B", AMP_DT_FLOAT, "4");
    node(g, "Add", "bad_add", "A,B", "y");
    const char *msg = infer_err(m);
    cr_expect(strstr(msg, "bad_add") && strstr(msg, "Add"), "%s", msg);
    amp_model_free(m);
}

/* Einsum: letters, the ellipsis, the implicit output; and (found by fuzz_convert) a term
 * with two ellipses, or an output with a lone '.', is a bad equation: the second ellipsis
 * read dims past the input's rank. */
static AmpModel *einsum(const char *eq, const char *dims0, const char *dims1) {
    AmpModel *m = model(12);
    AmpGraph *g = m->graph;
    input(g, "x", AMP_DT_FLOAT, dims0);
    if (dims1) input(g, "w", AMP_DT_FLOAT, dims1);
    attr_str(node(g, "Einsum", "es", dims1 ? "x,w" : "x", "y"), "equation", eq);
    return m;
}

Test(infer, einsum_shapes_and_bad_equations) {
    static const struct {
        const char *eq, *d0, *d1, *want;
    } ok[] = {
        {"bij,bjk->bik", "2,3,4", "2,4,5", "float[2,3,5]"},
        {"...ii->...i", "3,5,5", NULL, "float[3,5]"},
        {"ij,jk", "3,4", "4,5", "float[3,5]"},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        AmpModel *m = einsum(ok[i].eq, ok[i].d0, ok[i].d1);
        infer_ok(m);
        EXPECT_TYPE(m->graph, "y", ok[i].want);
        amp_model_free(m);
    }
    static const char *const bad[] = {"...ii...", "...ii &>...$", "ij->i.", "ij->i.."};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        AmpModel *m = einsum(bad[i], "3,5,5", NULL);
        const char *msg = infer_err(m);
        cr_expect(strstr(msg, "bad equation"), "'%s': %s", bad[i], msg);
        amp_model_free(m);
    }
}

Test(infer, where_broadcasts_data_inputs) {
    AmpModel *m = model(17);
    AmpGraph *g = m->graph;
    input(g, "c", AMP_DT_BOOL, "2,1");
    input(g, "x", AMP_DT_FLOAT16, "1,3");
    input(g, "y", AMP_DT_FLOAT16, "");
    node(g, "Where", "where", "c,x,y", "w");
    infer_ok(m);
    EXPECT_TYPE(g, "w", "float16[2,3]");
    amp_model_free(m);
}

Test(infer, cast_shape_size) {
    AmpModel *m = model(17);
    AmpGraph *g = m->graph;
    input(g, "X", AMP_DT_FLOAT, "B,3,5");
    attr_int(node(g, "Cast", "cast", "X", "h"), "to", AMP_DT_FLOAT16);
    node(g, "Shape", "shape", "X", "s");
    attr_int(node(g, "Shape", "shape_tail", "X", "s2"), "start", 1);
    node(g, "Size", "size", "X", "n");
    node(g, "Dropout", "drop", "h", "d,mask");
    infer_ok(m);
    EXPECT_TYPE(g, "h", "float16[B,3,5]");
    EXPECT_TYPE(g, "s", "int64[3]");
    EXPECT_TYPE(g, "s2", "int64[2]");
    EXPECT_TYPE(g, "n", "int64[]");
    EXPECT_TYPE(g, "d", "float16[B,3,5]");
    EXPECT_TYPE(g, "mask", "bool[B,3,5]");
    amp_model_free(m);
}

Test(infer, constants) {
    AmpModel *m = model(17);
    AmpGraph *g = m->graph;
    AmpNode *c = node(g, "Constant", "c0", "", "k");
    AmpAttr *a = amp_node_add_attr(c, "value_ints", AMP_ATTR_INTS);
    static int64_t three[3] = {1, 2, 3};
    a->ints = three;
    a->n_ints = 3;
    amp_node_add_attr(node(g, "Constant", "c1", "", "f"), "value_float", AMP_ATTR_FLOAT)->f = 2.0f;
    node(g, "ConstantOfShape", "cos", "k", "z");
    init_i64(g, "start", -1, I64(2));
    init_i64(g, "limit", -1, I64(11));
    init_i64(g, "delta", -1, I64(3));
    node(g, "Range", "range", "start,limit,delta", "r");
    infer_ok(m);
    EXPECT_TYPE(g, "k", "int64[3]");
    EXPECT_TYPE(g, "f", "float[]");
    EXPECT_TYPE(g, "z", "float[1,2,3]");
    EXPECT_TYPE(g, "r", "int64[3]"); /* 2, 5, 8 */
    EXPECT_TYPE(g, "start", "int64[]");
    amp_model_free(m);
}

/* ---- matrix products and convolutions --------------------------------------------- */

Test(infer, matmul_broadcasting) {
    AmpModel *m = model(17);
    AmpGraph *g = m->graph;
    input(g, "A", AMP_DT_FLOAT, "2,1,3,4");
    input(g, "B", AMP_DT_FLOAT, "5,4,6");
    input(g, "v", AMP_DT_FLOAT, "4");
    input(g, "M", AMP_DT_FLOAT, "4,6");
    input(g, "S", AMP_DT_FLOAT, "N,T,4");
    node(g, "MatMul", "mm", "A,B", "y");
    node(g, "MatMul", "vm", "v,M", "vy");
    node(g, "MatMul", "mv", "S,v", "sv");
    node(g, "MatMul", "sm", "S,M", "sy");
    infer_ok(m);
    EXPECT_TYPE(g, "y", "float[2,5,3,6]");
    EXPECT_TYPE(g, "vy", "float[6]");
    EXPECT_TYPE(g, "sv", "float[N,T]");
    EXPECT_TYPE(g, "sy", "float[N,T,6]");
    amp_model_free(m);
}

Test(infer, matmul_inner_mismatch) {
    AmpModel *m = model(17);
    AmpGraph *g = m->graph;
    input(g, "A", AMP_DT_FLOAT, "3,4");
    input(g, "B", AMP_DT_FLOAT, "5,6");
    node(g, "MatMul", "mm_bad", "A,B", "y");
    const char *msg = infer_err(m);
    cr_expect(strstr(msg, "mm_bad") != NULL, "%s", msg);
    amp_model_free(m);
}

Test(infer, gemm_transposes) {
    AmpModel *m = model(13);
    AmpGraph *g = m->graph;
    input(g, "A", AMP_DT_FLOAT, "4,3");
    input(g, "B", AMP_DT_FLOAT, "5,4");
    input(g, "C", AMP_DT_FLOAT, "5");
    AmpNode *n = node(g, "Gemm", "gemm", "A,B,C", "y");
    attr_int(n, "transA", 1);
    attr_int(n, "transB", 1);
    input(g, "P", AMP_DT_FLOAT, "B,4");
    input(g, "Q", AMP_DT_FLOAT, "4,7");
    node(g, "Gemm", "gemm2", "P,Q", "z");
    infer_ok(m);
    EXPECT_TYPE(g, "y", "float[3,5]");
    EXPECT_TYPE(g, "z", "float[B,7]");
    amp_model_free(m);
}

Test(infer, conv_pads_strides_dilations_groups) {
    AmpModel *m = model(17);
    AmpGraph *g = m->graph;
    input(g, "X", AMP_DT_FLOAT, "1,4,32,32");
    input(g, "W", AMP_DT_FLOAT, "8,2,3,3");
    AmpNode *n = node(g, "Conv", "conv", "X,W", "y");
    attr_ints(n, "pads", NI64(1, 1, 1, 1));
    attr_ints(n, "strides", NI64(2, 2));
    attr_ints(n, "dilations", NI64(2, 2));
    attr_int(n, "group", 2);
    /* (32 + 2 - ((3 - 1) * 2 + 1)) / 2 + 1 = 15 */
    AmpNode *same = node(g, "Conv", "conv_same", "X,W", "ys");
    attr_str(same, "auto_pad", "SAME_UPPER");
    attr_ints(same, "strides", NI64(2, 2));
    attr_int(same, "group", 2);
    input(g, "Z", AMP_DT_FLOAT, "N,4,H,9");
    node(g, "Conv", "conv_sym", "Z,W", "yz");
    AmpNode *p = node(g, "MaxPool", "pool", "X", "pooled,idx");
    attr_ints(p, "kernel_shape", NI64(3, 3));
    attr_ints(p, "strides", NI64(2, 2));
    attr_int(p, "ceil_mode", 1);
    node(g, "GlobalAveragePool", "gap", "X", "gap");
    infer_ok(m);
    EXPECT_TYPE(g, "y", "float[1,8,15,15]");
    EXPECT_TYPE(g, "ys", "float[1,8,16,16]");
    EXPECT_TYPE(g, "yz", "float[N,8,?,7]");
    EXPECT_TYPE(g, "pooled", "float[1,4,16,16]"); /* ceil((32 - 3) / 2) + 1 */
    EXPECT_TYPE(g, "idx", "int64[1,4,16,16]");
    EXPECT_TYPE(g, "gap", "float[1,4,1,1]");
    amp_model_free(m);
}

Test(infer, conv_transpose) {
    AmpModel *m = model(17);
    AmpGraph *g = m->graph;
    input(g, "X", AMP_DT_FLOAT, "1,8,10,10");
    input(g, "W", AMP_DT_FLOAT, "8,3,4,4");
    AmpNode *n = node(g, "ConvTranspose", "deconv", "X,W", "y");
    attr_ints(n, "strides", NI64(2, 2));
    attr_ints(n, "pads", NI64(1, 1, 1, 1));
    attr_int(n, "group", 2);
    infer_ok(m);
    /* 2 * (10 - 1) + 4 - 2 = 20; channels 3 * group */
    EXPECT_TYPE(g, "y", "float[1,6,20,20]");
    amp_model_free(m);
}

/* ---- data movement ------------------------------------------------------------------ */

Test(infer, reshape_from_initializer) {
    AmpModel *m = model(14);
    AmpGraph *g = m->graph;
    input(g, "X", AMP_DT_FLOAT, "2,3,4");
    init_i64(g, "shape", 2, I64(0, -1));
    init_i64(g, "shape3", 3, I64(-1, 2, 2));
    node(g, "Reshape", "rs", "X,shape", "y");
    node(g, "Reshape", "rs3", "X,shape3", "y3");
    input(g, "dyn", AMP_DT_INT64, "3");
    node(g, "Reshape", "rs_dyn", "X,dyn", "yd");
    infer_ok(m);
    EXPECT_TYPE(g, "y", "float[2,12]");
    EXPECT_TYPE(g, "y3", "float[6,2,2]");
    EXPECT_TYPE(g, "yd", "float[?,?,?]"); /* values unknown, length known */
    amp_model_free(m);
}

/* The exporter pattern Shape -> Gather -> Unsqueeze -> Concat -> Reshape keeps a
 * symbolic batch dim. */
Test(infer, reshape_through_shape_arithmetic) {
    AmpModel *m = model(13);
    AmpGraph *g = m->graph;
    input(g, "X", AMP_DT_FLOAT, "N,3,4");
    init_i64(g, "zero", -1, I64(0));
    init_i64(g, "axes0", 1, I64(0));
    init_i64(g, "minus1", 1, I64(-1));
    node(g, "Shape", "sh", "X", "s");
    node(g, "Gather", "ga", "s,zero", "b");
    node(g, "Unsqueeze", "un", "b,axes0", "b1");
    attr_int(node(g, "Concat", "cat", "b1,minus1", "target"), "axis", 0);
    node(g, "Reshape", "rs", "X,target", "y");
    infer_ok(m);
    EXPECT_TYPE(g, "b", "int64[]");
    EXPECT_TYPE(g, "b1", "int64[1]");
    EXPECT_TYPE(g, "target", "int64[2]");
    EXPECT_TYPE(g, "y", "float[N,12]");
    amp_model_free(m);
}

Test(infer, transpose_flatten_concat_split) {
    AmpModel *m = model(13);
    AmpGraph *g = m->graph;
    input(g, "X", AMP_DT_FLOAT, "2,3,4");
    input(g, "Y", AMP_DT_FLOAT, "2,5,4");
    input(g, "U", AMP_DT_FLOAT, "2,?,4");
    attr_ints(node(g, "Transpose", "tp", "X", "t"), "perm", NI64(2, 0, 1));
    node(g, "Transpose", "tp_default", "X", "tr");
    attr_int(node(g, "Flatten", "fl", "X", "f"), "axis", 2);
    attr_int(node(g, "Concat", "cat", "X,Y", "c"), "axis", 1);
    attr_int(node(g, "Concat", "cat_neg", "X,Y", "c2"), "axis", -2);
    attr_int(node(g, "Concat", "cat_unknown", "X,U", "cu"), "axis", 1);
    init_i64(g, "parts", 2, I64(3, 5));
    attr_int(node(g, "Split", "sp", "c,parts", "p0,p1"), "axis", 1);
    attr_int(node(g, "Split", "sp_eq", "X", "e0,e1"), "axis", 2);
    infer_ok(m);
    EXPECT_TYPE(g, "t", "float[4,2,3]");
    EXPECT_TYPE(g, "tr", "float[4,3,2]");
    EXPECT_TYPE(g, "f", "float[6,4]");
    EXPECT_TYPE(g, "c", "float[2,8,4]");
    EXPECT_TYPE(g, "c2", "float[2,8,4]");
    EXPECT_TYPE(g, "cu", "float[2,?,4]");
    EXPECT_TYPE(g, "p0", "float[2,3,4]");
    EXPECT_TYPE(g, "p1", "float[2,5,4]");
    EXPECT_TYPE(g, "e0", "float[2,3,2]");
    amp_model_free(m);
}

Test(infer, squeeze_unsqueeze_opset11_attribute) {
    AmpModel *m = model(11);
    AmpGraph *g = m->graph;
    input(g, "X", AMP_DT_FLOAT, "1,3,1,5");
    attr_ints(node(g, "Squeeze", "sq", "X", "s"), "axes", NI64(0, -2));
    node(g, "Squeeze", "sq_all", "X", "s_all");
    attr_ints(node(g, "Unsqueeze", "un", "s", "u"), "axes", NI64(0, 3));
    infer_ok(m);
    EXPECT_TYPE(g, "s", "float[3,5]");
    EXPECT_TYPE(g, "s_all", "float[3,5]");
    EXPECT_TYPE(g, "u", "float[1,3,5,1]");
    amp_model_free(m);
}

Test(infer, squeeze_unsqueeze_opset13_input) {
    AmpModel *m = model(13);
    AmpGraph *g = m->graph;
    input(g, "X", AMP_DT_FLOAT, "1,3,1,5");
    init_i64(g, "ax", 1, I64(2));
    init_i64(g, "ax2", 2, I64(-1, 1));
    node(g, "Squeeze", "sq", "X,ax", "s");
    node(g, "Unsqueeze", "un", "s,ax2", "u");
    input(g, "dyn_axes", AMP_DT_INT64, "1");
    node(g, "Squeeze", "sq_dyn", "X,dyn_axes", "sd");
    /* an opset-11 style attribute is ignored at opset 13 */
    attr_ints(node(g, "Unsqueeze", "un_attr", "X", "ua"), "axes", NI64(0));
    infer_ok(m);
    EXPECT_TYPE(g, "s", "float[1,3,5]");
    EXPECT_TYPE(g, "u", "float[1,1,3,5,1]");
    EXPECT_TYPE(g, "sd", "float[*]");
    EXPECT_TYPE(g, "ua", "float[*]");
    amp_model_free(m);
}

Test(infer, slice_gather_expand_tile_pad) {
    AmpModel *m = model(13);
    AmpGraph *g = m->graph;
    input(g, "X", AMP_DT_FLOAT, "10,20,N");
    init_i64(g, "starts", 2, I64(1, -5));
    init_i64(g, "ends", 2, I64(1000, 20));
    init_i64(g, "axes", 2, I64(0, 1));
    init_i64(g, "steps", 2, I64(3, 1));
    node(g, "Slice", "sl", "X,starts,ends,axes,steps", "s");
    input(g, "idx", AMP_DT_INT64, "4,2");
    attr_int(node(g, "Gather", "ga", "X,idx", "gt"), "axis", 1);
    input(g, "E", AMP_DT_FLOAT, "3,1");
    init_i64(g, "eshape", 3, I64(2, 1, 6));
    node(g, "Expand", "ex", "E,eshape", "e");
    init_i64(g, "reps", 2, I64(2, 3));
    node(g, "Tile", "ti", "E,reps", "t");
    init_i64(g, "pads", 4, I64(1, 0, 2, 1));
    node(g, "Pad", "pad", "E,pads", "p");
    infer_ok(m);
    EXPECT_TYPE(g, "s", "float[3,5,N]"); /* rows 1,4,7; columns 15..19 */
    EXPECT_TYPE(g, "gt", "float[10,4,2,N]");
    EXPECT_TYPE(g, "e", "float[2,3,6]");
    EXPECT_TYPE(g, "t", "float[6,3]");
    EXPECT_TYPE(g, "p", "float[6,2]");
    amp_model_free(m);
}

Test(infer, resize_sizes_and_scales) {
    AmpModel *m = model(13);
    AmpGraph *g = m->graph;
    input(g, "X", AMP_DT_FLOAT, "1,3,10,10");
    init_i64(g, "sizes", 4, I64(1, 3, 25, 30));
    node(g, "Resize", "rz", "X,,,sizes", "y");
    input(g, "scales", AMP_DT_FLOAT, "4");
    node(g, "Resize", "rz_dyn", "X,,scales", "yd");
    infer_ok(m);
    EXPECT_TYPE(g, "y", "float[1,3,25,30]");
    EXPECT_TYPE(g, "yd", "float[?,?,?,?]");
    amp_model_free(m);
}

/* ---- reductions and normalisations -------------------------------------------------- */

Test(infer, reduce_axes_as_input_opset18) {
    AmpModel *m = model(18);
    AmpGraph *g = m->graph;
    input(g, "X", AMP_DT_FLOAT, "2,3,4");
    init_i64(g, "ax", 1, I64(1));
    node(g, "ReduceMean", "keep", "X,ax", "k");
    attr_int(node(g, "ReduceMean", "drop", "X,ax", "d"), "keepdims", 0);
    node(g, "ReduceMax", "all", "X", "a");
    attr_int(node(g, "ReduceSum", "noop", "X", "n"), "noop_with_empty_axes", 1);
    input(g, "dyn", AMP_DT_INT64, "1");
    node(g, "ReduceMin", "dynk", "X,dyn", "dk");
    attr_int(node(g, "ReduceMin", "dynd", "X,dyn", "dd"), "keepdims", 0);
    infer_ok(m);
    EXPECT_TYPE(g, "k", "float[2,1,4]");
    EXPECT_TYPE(g, "d", "float[2,4]");
    EXPECT_TYPE(g, "a", "float[1,1,1]");
    EXPECT_TYPE(g, "n", "float[2,3,4]");
    EXPECT_TYPE(g, "dk", "float[?,?,?]");
    EXPECT_TYPE(g, "dd", "float[*]");
    amp_model_free(m);
}

Test(infer, reduce_axes_as_attribute_opset11) {
    AmpModel *m = model(11);
    AmpGraph *g = m->graph;
    input(g, "X", AMP_DT_FLOAT, "2,3,4");
    AmpNode *n = node(g, "ReduceMean", "rm", "X", "y");
    attr_ints(n, "axes", NI64(0, -1));
    attr_int(n, "keepdims", 0);
    attr_ints(node(g, "ReduceSum", "rs", "X", "z"), "axes", NI64(2));
    AmpNode *am = node(g, "ArgMax", "am", "X", "i");
    attr_int(am, "axis", 1);
    attr_int(am, "keepdims", 0);
    infer_ok(m);
    EXPECT_TYPE(g, "y", "float[3]");
    EXPECT_TYPE(g, "z", "float[2,3,1]");
    EXPECT_TYPE(g, "i", "int64[2,4]");
    amp_model_free(m);
}

Test(infer, normalisations_and_losses) {
    AmpModel *m = model(17);
    AmpGraph *g = m->graph;
    input(g, "X", AMP_DT_FLOAT16, "B,T,8");
    input(g, "s", AMP_DT_FLOAT16, "8");
    attr_int(node(g, "LayerNormalization", "ln", "X,s,s", "y,mean,istd"), "axis", -1);
    input(g, "I", AMP_DT_FLOAT, "N,C,5,5");
    input(g, "c", AMP_DT_FLOAT, "C");
    node(g, "BatchNormalization", "bn", "I,c,c,c,c", "bny");
    input(g, "scores", AMP_DT_FLOAT, "N,10");
    input(g, "labels", AMP_DT_INT64, "N");
    node(g, "SoftmaxCrossEntropyLoss", "sce", "scores,labels", "loss,logp");
    attr_str(node(g, "NegativeLogLikelihoodLoss", "nll", "logp,labels", "nl"), "reduction", "none");
    node(g, "Softmax", "sm", "scores", "p");
    init_i64(g, "k", 1, I64(3));
    node(g, "TopK", "topk", "scores,k", "tv,ti");
    infer_ok(m);
    EXPECT_TYPE(g, "y", "float16[B,T,8]");
    EXPECT_TYPE(g, "mean", "float[B,T,1]");
    EXPECT_TYPE(g, "istd", "float[B,T,1]");
    EXPECT_TYPE(g, "bny", "float[N,C,5,5]");
    EXPECT_TYPE(g, "loss", "float[]");
    EXPECT_TYPE(g, "logp", "float[N,10]");
    EXPECT_TYPE(g, "nl", "float[N]");
    EXPECT_TYPE(g, "p", "float[N,10]");
    EXPECT_TYPE(g, "tv", "float[N,3]");
    EXPECT_TYPE(g, "ti", "int64[N,3]");
    amp_model_free(m);
}

Test(infer, training_optimizers_mirror_inputs) {
    AmpModel *m = model(17);
    AmpGraph *g = m->graph;
    input(g, "R", AMP_DT_FLOAT, "");
    input(g, "T", AMP_DT_INT64, "");
    input(g, "W1", AMP_DT_FLOAT, "3,4");
    input(g, "W2", AMP_DT_FLOAT, "5");
    input(g, "G1", AMP_DT_FLOAT, "3,4");
    input(g, "G2", AMP_DT_FLOAT, "5");
    input(g, "V1", AMP_DT_FLOAT, "3,4");
    input(g, "V2", AMP_DT_FLOAT, "5");
    input(g, "H1", AMP_DT_DOUBLE, "3,4");
    input(g, "H2", AMP_DT_DOUBLE, "5");
    node_d(g, "ai.onnx.preview.training", "Adam", "adam", "R,T,W1,W2,G1,G2,V1,V2,H1,H2",
           "W1n,W2n,V1n,V2n,H1n,H2n");
    node_d(g, "ai.onnx.preview.training", "Momentum", "mom", "R,T,W1,G1,V1", "W1m,V1m");
    node_d(g, "com.microsoft", "InPlaceAccumulatorV2", "acc", "G1,G1", "flag,G1acc");
    infer_ok(m);
    EXPECT_TYPE(g, "W1n", "float[3,4]");
    EXPECT_TYPE(g, "W2n", "float[5]");
    EXPECT_TYPE(g, "V2n", "float[5]");
    EXPECT_TYPE(g, "H1n", "double[3,4]");
    EXPECT_TYPE(g, "H2n", "double[5]");
    EXPECT_TYPE(g, "V1m", "float[3,4]");
    EXPECT_TYPE(g, "flag", "bool[1]");
    EXPECT_TYPE(g, "G1acc", "float[3,4]");
    amp_model_free(m);
}

/* ---- merging with declared types ---------------------------------------------------- */

Test(infer, declared_conflict_names_node_and_value) {
    AmpModel *m = model(17);
    AmpGraph *g = m->graph;
    input(g, "A", AMP_DT_FLOAT, "2");
    input(g, "B", AMP_DT_FLOAT, "2");
    node(g, "Add", "the_add", "A,B", "sum_out");
    AmpValue *y = val(g, "sum_out");
    set_type(g, y, AMP_DT_FLOAT16, "2");
    amp_graph_add_output(g, y);
    const char *msg = infer_err(m);
    cr_expect_str_eq(msg, "node 'the_add' (Add): output 'sum_out' is declared float16 but computes float");
    amp_model_free(m);
}

Test(infer, declared_types_are_filled_not_replaced) {
    AmpModel *m = model(17);
    AmpGraph *g = m->graph;
    input(g, "A", AMP_DT_FLOAT, "2,3");
    node(g, "Relu", "r1", "A", "y1");
    node(g, "Relu", "r2", "A", "y2");
    node(g, "Relu", "r3", "A", "y3");
    set_type(g, val(g, "y1"), AMP_DT_FLOAT, "?,3");
    set_type(g, val(g, "y2"), AMP_DT_FLOAT, NULL);
    set_type(g, val(g, "y3"), AMP_DT_FLOAT, "7,3"); /* stale value_info: kept */
    AmpDim *declared = val(g, "y1")->type.dims;
    infer_ok(m);
    EXPECT_TYPE(g, "y1", "float[2,3]");
    EXPECT_TYPE(g, "y2", "float[2,3]");
    EXPECT_TYPE(g, "y3", "float[7,3]");
    cr_expect_eq(declared[0].value, -1, "declared dims were edited in place");
    /* running again changes nothing */
    infer_ok(m);
    EXPECT_TYPE(g, "y1", "float[2,3]");
    amp_model_free(m);
}

Test(infer, unknown_op_keeps_declared_types) {
    AmpModel *m = model(17);
    AmpGraph *g = m->graph;
    input(g, "A", AMP_DT_FLOAT, "2,3");
    node_d(g, "my.domain", "MyOp", "custom", "A", "c0,c1");
    set_type(g, val(g, "c0"), AMP_DT_FLOAT16, "7");
    node(g, "Relu", "after", "c0", "r");
    node(g, "Relu", "after_untyped", "c1", "r1");
    infer_ok(m);
    cr_expect_eq(amp_op_lookup("my.domain", "MyOp"), AMP_OP_UNKNOWN);
    EXPECT_TYPE(g, "c0", "float16[7]");
    EXPECT_TYPE(g, "c1", "none");
    EXPECT_TYPE(g, "r", "float16[7]");
    EXPECT_TYPE(g, "r1", "none");
    amp_model_free(m);
}

/* ---- control flow ------------------------------------------------------------------- */

/* A branch graph computing `out = op(X)` from the outer X. */
static AmpGraph *branch(AmpModel *m, const char *op, const char *out) {
    AmpGraph *b = amp_graph_new(m, m->graph);
    node(b, op, op, "X", out);
    amp_graph_add_output(b, amp_graph_lookup(b, out));
    return b;
}

Test(infer, if_outputs_from_branches) {
    AmpModel *m = model(17);
    AmpGraph *g = m->graph;
    input(g, "X", AMP_DT_FLOAT, "2,N");
    input(g, "cond", AMP_DT_BOOL, "");
    AmpNode *n = node(g, "If", "if0", "cond", "y");
    attr_graph(n, "then_branch", branch(m, "Relu", "t"));
    attr_graph(n, "else_branch", branch(m, "Neg", "e"));
    node(g, "Abs", "after", "y", "z");
    infer_ok(m);
    AmpGraph *then_g = amp_node_attr(n, "then_branch")->g;
    cr_expect_str_eq(type_str(amp_graph_lookup(then_g, "t")), "float[2,N]");
    EXPECT_TYPE(g, "y", "float[2,N]");
    EXPECT_TYPE(g, "z", "float[2,N]");
    amp_model_free(m);
}

Test(infer, if_branches_disagree) {
    AmpModel *m = model(17);
    AmpGraph *g = m->graph;
    input(g, "X", AMP_DT_FLOAT, "2");
    input(g, "cond", AMP_DT_BOOL, "");
    AmpNode *n = node(g, "If", "if_bad", "cond", "y");
    attr_graph(n, "then_branch", branch(m, "Relu", "t"));
    AmpGraph *e = amp_graph_new(m, g);
    AmpNode *c = node(e, "Cast", "cast", "X", "ec");
    attr_int(c, "to", AMP_DT_INT32);
    amp_graph_add_output(e, amp_graph_lookup(e, "ec"));
    attr_graph(n, "else_branch", e);
    const char *msg = infer_err(m);
    cr_expect(strstr(msg, "if_bad") != NULL, "%s", msg);
    amp_model_free(m);
}

/* Loop with one carried value (doubled each iteration) and one scan output. */
Test(infer, loop_carried_and_scan_outputs) {
    AmpModel *m = model(17);
    AmpGraph *g = m->graph;
    input(g, "M", AMP_DT_INT64, "");
    input(g, "v0", AMP_DT_FLOAT, "3");
    AmpNode *n = node(g, "Loop", "loop", "M,,v0", "vN,scan");
    AmpGraph *b = amp_graph_new(m, g);
    amp_graph_add_input(b, amp_graph_value(b, "i"));
    amp_graph_add_input(b, amp_graph_value(b, "c_in"));
    amp_graph_add_input(b, amp_graph_value(b, "v"));
    node(b, "Identity", "keep", "c_in", "c_out");
    node(b, "Add", "dbl", "v,v", "v2");
    node(b, "Cast", "toi", "i", "fi");
    attr_int(b->last, "to", AMP_DT_FLOAT);
    amp_graph_add_output(b, amp_graph_lookup(b, "c_out"));
    amp_graph_add_output(b, amp_graph_lookup(b, "v2"));
    amp_graph_add_output(b, amp_graph_lookup(b, "fi"));
    attr_graph(n, "body", b);
    infer_ok(m);
    cr_expect_str_eq(type_str(amp_graph_lookup(b, "i")), "int64[*]");
    cr_expect_str_eq(type_str(amp_graph_lookup(b, "c_out")), "bool[*]");
    cr_expect_str_eq(type_str(amp_graph_lookup(b, "v2")), "float[*]");
    EXPECT_TYPE(g, "vN", "float[*]");
    EXPECT_TYPE(g, "scan", "float[*]");
    amp_model_free(m);
}

/* Scan-11: state (2) plus scan input (5, 2) sliced on axis 0; the body adds the slice
 * to the state and emits it, so the scan output stacks 5 slices of (2). */
Test(infer, scan_states_and_scan_outputs) {
    AmpModel *m = model(11);
    AmpGraph *g = m->graph;
    input(g, "s0", AMP_DT_FLOAT, "2");
    input(g, "xs", AMP_DT_FLOAT, "5,2");
    AmpNode *n = node(g, "Scan", "scan", "s0,xs", "sN,ys");
    attr_int(n, "num_scan_inputs", 1);
    AmpGraph *b = amp_graph_new(m, g);
    amp_graph_add_input(b, amp_graph_value(b, "s"));
    amp_graph_add_input(b, amp_graph_value(b, "x"));
    node(b, "Add", "acc", "s,x", "s2");
    node(b, "Identity", "emit", "x", "y");
    amp_graph_add_output(b, amp_graph_lookup(b, "s2"));
    amp_graph_add_output(b, amp_graph_lookup(b, "y"));
    attr_graph(n, "body", b);
    infer_ok(m);
    cr_expect_str_eq(type_str(amp_graph_lookup(b, "x")), "float[2]");
    cr_expect_str_eq(type_str(amp_graph_lookup(b, "s2")), "float[2]");
    EXPECT_TYPE(g, "sN", "float[2]");
    EXPECT_TYPE(g, "ys", "float[5,2]");
    amp_model_free(m);
}

/* Training graphs (training_info algorithm) are inferred after the main graph and see
 * its values; initializers without a declared type take the tensor's. */
Test(infer, training_graph_and_initializers) {
    AmpModel *m = model(17);
    AmpGraph *g = m->graph;
    input(g, "X", AMP_DT_FLOAT, "4,3");
    init_i64(g, "perm", 2, I64(1, 0));
    node(g, "Relu", "fwd", "X", "h");
    m->training = amp_arena_calloc(&m->arena, 1, sizeof *m->training);
    m->n_training = 1;
    AmpGraph *alg = amp_graph_new(m, g);
    m->training[0].algorithm = alg;
    node(alg, "Transpose", "t", "h", "ht");
    infer_ok(m);
    EXPECT_TYPE(g, "perm", "int64[2]");
    cr_expect_str_eq(type_str(amp_graph_lookup(alg, "ht")), "float[3,4]");
    amp_model_free(m);
}
