/* Helpers shared by the runtime tests: small models built with the builder API (types
 * written as text, "2,N" dims), training_info with bindings, opening them in a session
 * from their serialised bytes, and tensor views over stack arrays. */
#ifndef AMP_RT_UTIL_H
#define AMP_RT_UTIL_H

#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ampc/ampc.h"
#include "ir/ir.h"

static inline AmpModel *rt_model(int64_t opset) {
    AmpModel *m = amp_model_new();
    cr_assert_not_null(m);
    m->has = AMP_MODEL_HAS_IR_VERSION;
    m->ir_version = 8;
    m->opsets = amp_arena_calloc(&m->arena, 3, sizeof *m->opsets);
    m->opsets[0] = (AmpOpset){"", opset, true};
    m->opsets[1] = (AmpOpset){"ai.onnx.preview.training", 1, true};
    m->n_opsets = 2;
    m->graph->name = "g";
    return m;
}

/* Dims from text: "2,N,?" (number, dim_param, unknown); "" is rank 0; NULL unknown rank. */
static inline void rt_type(AmpModel *m, AmpValue *v, int dtype, const char *dims) {
    v->type.kind = AMP_TYPE_TENSOR;
    v->type.dtype = dtype;
    v->type.rank = -1;
    v->type.dims = NULL;
    if (!dims) return;
    AmpDim *d = amp_arena_calloc(&m->arena, 16, sizeof *d);
    int r = 0;
    for (const char *p = dims; *p;) {
        size_t n = strcspn(p, ",");
        char tok[64];
        snprintf(tok, sizeof tok, "%.*s", (int)n, p);
        d[r].value = -1;
        if (tok[0] >= '0' && tok[0] <= '9') d[r].value = atoll(tok);
        else if (strcmp(tok, "?") != 0) d[r].param = amp_arena_strdup(&m->arena, tok);
        r++;
        p += n;
        if (*p == ',') p++;
    }
    v->type.rank = r;
    v->type.dims = d;
}

static inline AmpValue *rt_val(AmpGraph *g, const char *name) {
    AmpValue *v = amp_graph_lookup(g, name);
    return v ? v : amp_graph_value(g, name);
}

static inline AmpValue *rt_input(AmpGraph *g, const char *name, int dtype, const char *dims) {
    AmpValue *v = amp_graph_value(g, name);
    rt_type(g->model, v, dtype, dims);
    cr_assert_not_null(amp_graph_add_input(g, v));
    return v;
}

static inline AmpValue *rt_output(AmpGraph *g, const char *name, int dtype, const char *dims) {
    AmpValue *v = rt_val(g, name);
    if (v->type.kind != AMP_TYPE_TENSOR) rt_type(g->model, v, dtype, dims);
    cr_assert_not_null(amp_graph_add_output(g, v));
    return v;
}

/* An initializer with raw data copied from `data` (nelem from the dims). */
static inline AmpValue *rt_init(AmpGraph *g, const char *name, int dtype, int rank, const int64_t *dims,
                                const void *data) {
    AmpModel *m = g->model;
    AmpTensor *t = amp_arena_calloc(&m->arena, 1, sizeof *t);
    uint64_t n = 1;
    for (int i = 0; i < rank; i++) n *= (uint64_t)dims[i];
    size_t bytes = 0;
    cr_assert(amp_tensor_expected_bytes(dtype, n, &bytes));
    t->dtype = dtype;
    t->has = AMP_TENSOR_HAS_DTYPE | AMP_TENSOR_HAS_RAW;
    t->ndims = (size_t)rank;
    t->dims = amp_arena_calloc(&m->arena, rank ? (size_t)rank : 1, sizeof *t->dims);
    for (int i = 0; i < rank; i++) t->dims[i] = dims[i];
    t->nelem = n;
    t->raw.data = amp_arena_memdup(&m->arena, data, bytes ? bytes : 1);
    t->raw.len = bytes;
    AmpValue *v = amp_graph_value(g, name);
    cr_assert_eq(amp_graph_add_initializer(g, v, t), AMP_OK);
    v->type.kind = AMP_TYPE_TENSOR;
    v->type.dtype = dtype;
    v->type.rank = rank;
    v->type.dims = amp_arena_calloc(&m->arena, rank ? (size_t)rank : 1, sizeof *v->type.dims);
    for (int i = 0; i < rank; i++) v->type.dims[i].value = dims[i];
    return v;
}

static inline AmpValue *rt_scalar_f(AmpGraph *g, const char *name, float x) {
    return rt_init(g, name, AMP_DT_FLOAT, 0, NULL, &x);
}

/* A node: inputs and outputs as comma-separated names ("" between commas = left out). */
static inline AmpNode *rt_node(AmpGraph *g, const char *domain, const char *op, const char *ins, const char *outs) {
    const char *lists[2] = {ins, outs};
    char names[2][16][64];
    int counts[2] = {0, 0};
    for (int l = 0; l < 2; l++) {
        const char *p = lists[l];
        while (p && *p) {
            size_t n = strcspn(p, ",");
            snprintf(names[l][counts[l]++], 64, "%.*s", (int)n, p);
            p += n;
            if (*p == ',') {
                p++;
                if (!*p) snprintf(names[l][counts[l]++], 64, "%s", "");
            }
        }
    }
    static int seq = 0;
    char nm[32];
    snprintf(nm, sizeof nm, "%s_%d", op, seq++);
    AmpNode *n = amp_node_new(g, domain, op, nm, counts[0], counts[1]);
    cr_assert_not_null(n);
    for (int i = 0; i < counts[0]; i++)
        if (names[0][i][0]) amp_node_set_input(n, i, rt_val(g, names[0][i]));
    for (int i = 0; i < counts[1]; i++)
        if (names[1][i][0]) amp_node_set_output(n, i, amp_graph_value(g, names[1][i]));
    amp_node_append(g, n);
    return n;
}

/* Adds training_info[0] with an algorithm graph (returned) and no bindings yet. */
static inline AmpGraph *rt_training(AmpModel *m) {
    m->training = amp_arena_calloc(&m->arena, 1, sizeof *m->training);
    m->n_training = 1;
    m->training[0].algorithm = amp_graph_new(m, m->graph);
    m->training[0].algorithm->name = "algorithm";
    return m->training[0].algorithm;
}

/* Sets the update (or initialization) bindings "W=W_new,V=V_new". */
static inline void rt_bindings(AmpModel *m, bool init, const char *spec) {
    AmpStrPair *pairs = amp_arena_calloc(&m->arena, 16, sizeof *pairs);
    size_t n = 0;
    for (const char *p = spec; *p;) {
        size_t len = strcspn(p, ",");
        char tok[128];
        snprintf(tok, sizeof tok, "%.*s", (int)len, p);
        char *eq = strchr(tok, '=');
        cr_assert_not_null(eq);
        *eq = '\0';
        pairs[n].key = amp_arena_strdup(&m->arena, tok);
        pairs[n].value = amp_arena_strdup(&m->arena, eq + 1);
        n++;
        p += len;
        if (*p == ',') p++;
    }
    if (init) {
        m->training[0].init_bindings = pairs;
        m->training[0].n_init_bindings = n;
    } else {
        m->training[0].update_bindings = pairs;
        m->training[0].n_update_bindings = n;
    }
}

/* Serialises m (freeing it) and opens the bytes; returns the code, fills *out. */
static inline AmpCode rt_open(AmpModel *m, const AmpSessionOptions *opt, AmpSession **out, AmpStatus *st) {
    uint8_t *bytes = NULL;
    size_t len = 0;
    AmpStatus sst = {0};
    cr_assert_eq(amp_model_save_bytes(m, &bytes, &len, &sst), AMP_OK, "save: %s", sst.msg);
    amp_model_free(m);
    AmpSessionOptions o = opt ? *opt : (AmpSessionOptions){0};
    AmpCode rc = amp_session_open_bytes(bytes, len, NULL, &o, out, st);
    free(bytes);
    return rc;
}

/* Y = Relu(X W): X float[2,3], W [[1,2],[3,4],[5,6]] an initializer; opset 17. The small
 * model of the sessions' settings tests (AMP_AUTO rewrites its MatMul). */
static inline AmpModel *rt_matmul_relu(void) {
    AmpModel *m = rt_model(17);
    AmpGraph *g = m->graph;
    const int64_t wd[2] = {3, 2};
    const float w[6] = {1, 2, 3, 4, 5, 6};
    rt_input(g, "X", AMP_DT_FLOAT, "2,3");
    rt_init(g, "W", AMP_DT_FLOAT, 2, wd, w);
    rt_node(g, "", "MatMul", "X,W", "H");
    rt_node(g, "", "Relu", "H", "Y");
    rt_output(g, "Y", AMP_DT_FLOAT, "2,2");
    return m;
}

/* Copies the first `keep` of a run's n_out outputs into dst[k] (cap bytes each, the rest
 * cut off), frees them all; *fused and *absorbed from s's stats. */
static inline void rt_keep_outputs(AmpSession *s, AmpTensorView *out, size_t n_out, size_t keep, void *dst, size_t cap,
                                   size_t *fused, size_t *absorbed) {
    for (size_t k = 0; k < n_out; k++) {
        size_t bytes = amp_tensor_view_bytes(&out[k]);
        if (k < keep) memcpy((char *)dst + k * cap, out[k].data, bytes < cap ? bytes : cap);
        amp_tensor_view_free(&out[k]);
    }
    AmpSessionStats stats;
    amp_session_stats(s, &stats);
    *fused = stats.fused_nodes;
    *absorbed = stats.absorbed_nodes;
}

/* Saves m to `path` (freeing it). */
static inline void rt_save(AmpModel *m, const char *path) {
    AmpStatus st = {0};
    cr_assert_eq(amp_model_save_file(m, path, NULL, &st), AMP_OK, "save %s: %s", path, st.msg);
    amp_model_free(m);
}

static inline AmpTensorView rt_view(const char *name, int dtype, void *data, int rank, const int64_t *dims) {
    AmpTensorView t = {.name = name, .dtype = dtype, .rank = rank, .data = data};
    for (int i = 0; i < rank; i++) t.dims[i] = dims[i];
    return t;
}

/* The session's state entry `name` (a borrowed view in *out), or false. */
static inline bool rt_state_find(const AmpSession *s, const char *name, AmpTensorView *out) {
    for (size_t i = 0; amp_session_state_at(s, i, out); i++)
        if (strcmp(out->name, name) == 0) return true;
    return false;
}

#endif
