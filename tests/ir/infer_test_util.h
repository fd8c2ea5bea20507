/* Builders and checks shared by the type-inference tests (test_infer.c,
 * test_infer_ctrl.c), beside graph_build_util.h's nodes: models, typed inputs,
 * initializers and attributes, and types compared as text such as "float[2,N,?]" ("?" an
 * unknown dim, "[*]" an unknown rank). */
#ifndef AMP_INFER_TEST_UTIL_H
#define AMP_INFER_TEST_UTIL_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/ir/graph_build_util.h"
#include "ir/ir.h"

/* ---- building graphs ------------------------------------------------------------ */

static inline AmpModel *model(int64_t opset) {
    AmpModel *m = amp_model_new();
    cr_assert_not_null(m);
    m->opsets = amp_arena_calloc(&m->arena, 4, sizeof *m->opsets);
    m->opsets[0] = (AmpOpset){"", opset, true};
    m->opsets[1] = (AmpOpset){"com.microsoft", 1, true};
    m->opsets[2] = (AmpOpset){"ai.onnx.preview.training", 1, true};
    m->n_opsets = 3;
    return m;
}

/* Sets a type from text: dims "2,N,?" (number, dim_param, unknown); "" rank 0;
 * NULL unknown rank. */
static inline void set_type(AmpGraph *g, AmpValue *v, int dtype, const char *dims) {
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

static inline AmpValue *input(AmpGraph *g, const char *name, int dtype, const char *dims) {
    AmpValue *v = amp_graph_value(g, name);
    set_type(g, v, dtype, dims);
    amp_graph_add_input(g, v);
    return v;
}

/* An int64 initializer of rank 1 (or 0 when n < 0: a scalar of vals[0]). */
static inline AmpValue *init_i64(AmpGraph *g, const char *name, int n, const int64_t *vals) {
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

static inline void attr_int(AmpNode *n, const char *name, int64_t v) {
    amp_node_add_attr(n, name, AMP_ATTR_INT)->i = v;
}

static inline void attr_ints(AmpNode *n, const char *name, int cnt, const int64_t *v) {
    AmpAttr *a = amp_node_add_attr(n, name, AMP_ATTR_INTS);
    a->ints = amp_arena_calloc(&n->graph->model->arena, (size_t)(cnt ? cnt : 1), sizeof *a->ints);
    for (int i = 0; i < cnt; i++) a->ints[i] = v[i];
    a->n_ints = (size_t)cnt;
}

static inline void attr_str(AmpNode *n, const char *name, const char *s) {
    AmpAttr *a = amp_node_add_attr(n, name, AMP_ATTR_STRING);
    a->s.data = (const uint8_t *)amp_arena_strdup(&n->graph->model->arena, s);
    a->s.len = strlen(s);
}

static inline void attr_graph(AmpNode *n, const char *name, AmpGraph *body) {
    AmpAttr *a = amp_node_add_attr(n, name, AMP_ATTR_GRAPH);
    a->g = body;
    body->owner = n;
}

#define I64(...) (const int64_t[]){__VA_ARGS__}
#define NI64(...) (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), I64(__VA_ARGS__)

/* ---- checking --------------------------------------------------------------------- */

static inline const char *type_str(const AmpValue *v) {
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

static inline void infer_ok(AmpModel *m) {
    AmpStatus st;
    amp_status_clear(&st);
    AmpCode rc = amp_infer_model(m, &st);
    cr_assert_eq(rc, AMP_OK, "inference failed: %s", st.msg);
}

/* Runs inference expecting AMP_ERR_INPUT; returns the message (static). */
static inline const char *infer_err(AmpModel *m) {
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


#endif
