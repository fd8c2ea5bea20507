/* Helpers shared by the AMP pass tests (test_amp.c, test_amp_train.c, test_cast_cleanup.c):
 * small models built with the builder API (rt_util.h) and named nodes, running the
 * default pipeline with the verifier after every pass (plus inference at the end, which
 * must agree with the types the pass set), and looking at the result. */
#ifndef AMP_AMP_TEST_UTIL_H
#define AMP_AMP_TEST_UTIL_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/runtime/rt_util.h"
#include "ir/ir.h"
#include "passes/passes.h"

/* A node named `name`: inputs and outputs as comma-separated names ("" = left out). */
static inline AmpNode *nd(AmpGraph *g, const char *op, const char *name, const char *ins, const char *outs) {
    AmpNode *n = rt_node(g, "", op, ins, outs);
    n->name = amp_arena_strdup(&g->model->arena, name);
    return n;
}

static inline AmpNode *nd_dom(AmpGraph *g, const char *dom, const char *op, const char *name, const char *ins,
                              const char *outs) {
    AmpNode *n = rt_node(g, dom, op, ins, outs);
    n->name = amp_arena_strdup(&g->model->arena, name);
    return n;
}

static inline void attr_i(AmpNode *n, const char *name, int64_t v) {
    AmpAttr *a = amp_node_add_attr(n, name, AMP_ATTR_INT);
    cr_assert_not_null(a);
    a->i = v;
}

/* A float32 initializer of the given dims filled with `fill` (or 0.5 * (i % 7 - 3)). */
static inline AmpValue *weight(AmpGraph *g, const char *name, int rank, const int64_t *dims, const float *fill) {
    size_t n = 1;
    for (int i = 0; i < rank; i++) n *= (size_t)dims[i];
    float *d = malloc(n * sizeof *d + 4);
    for (size_t i = 0; i < n; i++) d[i] = fill ? *fill : 0.5f * (float)((int)(i % 7) - 3);
    AmpValue *v = rt_init(g, name, AMP_DT_FLOAT, rank, dims, d);
    free(d);
    return v;
}

static inline AmpValue *w44(AmpGraph *g, const char *name) {
    static const int64_t d[2] = {4, 4};
    return weight(g, name, 2, d, NULL);
}

static inline AmpModel *model(void) {
    return rt_model(17);
}

/* Runs `list` (NULL: the default pipeline, then "infer" again) with the verifier between
 * passes; returns the code, message in *st. */
static inline AmpCode run_list(AmpModel *m, const char *list, const AmpPassOptions *po, AmpStatus *st) {
    amp_status_clear(st);
    AmpPipelineOptions o = {.verify_each = true, .pass = po};
    return amp_run_pipeline(m, list ? list : "infer,amp,cast_cleanup,infer", &o, st);
}

static inline void convert(AmpModel *m, const AmpPassOptions *po) {
    AmpStatus st;
    cr_assert_eq(run_list(m, NULL, po, &st), AMP_OK, "%s", st.msg);
}

static inline AmpNode *find_node(const AmpGraph *g, const char *name) {
    for (AmpNode *n = g->first; n; n = n->next)
        if (n->name && strcmp(n->name, name) == 0) return n;
    return NULL;
}

static inline AmpNode *node_of(const AmpModel *m, const char *name) {
    AmpNode *n = find_node(m->graph, name);
    cr_assert_not_null(n, "no node '%s'", name);
    return n;
}

static inline int dtype(const AmpValue *v) {
    return v && v->type.kind == AMP_TYPE_TENSOR ? v->type.dtype : -1;
}

/* The dtype node `name` reads at input `slot` / writes at output `slot`. */
static inline int in_dt(const AmpModel *m, const char *name, int slot) {
    return dtype(node_of(m, name)->inputs[slot]);
}
static inline int out_dt(const AmpModel *m, const char *name, int slot) {
    return dtype(node_of(m, name)->outputs[slot]);
}

static inline bool is16(const AmpModel *m, const char *name) {
    return in_dt(m, name, 0) == AMP_DT_FLOAT16 || in_dt(m, name, 0) == AMP_DT_BFLOAT16;
}

static inline size_t count_op(const AmpGraph *g, const char *op) {
    size_t k = 0;
    for (const AmpNode *n = g->first; n; n = n->next) k += n->op_type && strcmp(n->op_type, op) == 0;
    return k;
}

/* Casts in g whose input is the value named `from`. */
static inline size_t casts_of(const AmpGraph *g, const char *from) {
    size_t k = 0;
    for (const AmpNode *n = g->first; n; n = n->next)
        k += n->op == AMP_OP_Cast && n->inputs[0] && strcmp(n->inputs[0]->name, from) == 0;
    return k;
}

static inline AmpValue *val_of(const AmpGraph *g, const char *name) {
    AmpValue *v = amp_graph_lookup(g, name);
    cr_assert_not_null(v, "no value '%s'", name);
    return v;
}

/* Bytes of the saved model (malloc'd). */
static inline uint8_t *saved(AmpModel *m, size_t *len) {
    uint8_t *b = NULL;
    AmpStatus st;
    amp_status_clear(&st);
    cr_assert_eq(amp_model_save_bytes(m, &b, len, &st), AMP_OK, "%s", st.msg);
    return b;
}

/* Everything written to a FILE* by fn, as a malloc'd string. */
typedef struct Captured {
    char *text;
    size_t len;
    FILE *f;
} Captured;

static inline void capture_begin(Captured *c) {
    c->text = NULL;
    c->len = 0;
    c->f = open_memstream(&c->text, &c->len);
    cr_assert_not_null(c->f);
}

static inline const char *capture_end(Captured *c) {
    fclose(c->f);
    return c->text;
}

#endif
