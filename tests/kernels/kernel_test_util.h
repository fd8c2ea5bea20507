/* What the CPU kernel tests share: a test allocator that gives a kernel its outputs
 * (malloc'd; outs_free frees them), one call of a node's kernel through the registry,
 * attribute setters, buffers over given data, and reading any element as a double.
 * Static functions: each test file is its own executable and includes this once.
 * gemm_test_util.h adds a model fixture and random buffers for gemm, conv and attention. */
#ifndef AMP_KERNEL_TEST_UTIL_H
#define AMP_KERNEL_TEST_UTIL_H

#include <criterion/criterion.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ir/half.h"
#include "ir/ir.h"
#include "kernels/cpu/kernels.h"
#include "ir/shape.h"

#define I64(...) ((const int64_t[]){__VA_ARGS__})

/* ---- outputs: a test allocator --------------------------------------------------- */

/* Output `index` of `n_slots` becomes a buffer of dtype and shape with room for its
 * elements (what the slot held is freed first). A kernel that asks for a slot or rank
 * out of range, a dtype with no byte size, or more than 4 GiB fails the test: in these
 * small cases that is a kernel bug, never a giant allocation. */
static inline AmpBuf *kt_alloc_slot(AmpBuf *slots, int n_slots, int index, int dtype, int rank,
                                    const int64_t *dims) {
    cr_assert(index >= 0 && index < n_slots, "kernel asked for output %d of %d", index, n_slots);
    cr_assert(rank >= 0 && rank <= AMP_MAX_RANK, "kernel asked for rank %d", rank);
    AmpBuf *b = &slots[index];
    free(b->data);
    memset(b, 0, sizeof *b);
    b->dtype = dtype;
    b->rank = rank;
    for (int i = 0; i < rank; i++) b->dims[i] = dims[i];
    b->nelem = amp_shape_nelem(rank, dims);
    size_t bytes = 0;
    cr_assert(amp_tensor_expected_bytes(dtype, b->nelem, &bytes), "output %d: no byte size for %s x %llu",
              index, amp_dtype_name(dtype), (unsigned long long)b->nelem);
    cr_assert(bytes < ((size_t)1 << 32), "kernel asked for a %zu-byte output", bytes);
    b->data = malloc(bytes ? bytes : 1);
    return b;
}

#define KT_MAX_OUT 8

/* A kernel's outputs; zero it (or let kt_run do so) before the first run. */
typedef struct Outs {
    AmpBuf b[KT_MAX_OUT];
} Outs;

/* The AmpAllocFn over an Outs. Like the executor's allocator (runtime/exec.c), it refuses
 * a shape whose element count overflows (AMP_ERR_INPUT) and an output over its cap
 * (AMP_ERR_UNSUPPORTED; 4 GiB here), so kernels can leave sizes to it. */
static inline AmpBuf *test_alloc(void *ctx, int index, int dtype, int rank, const int64_t *dims,
                                 AmpStatus *st) {
    Outs *o = ctx;
    uint64_t nelem = 1;
    for (int i = 0; i < rank && i < AMP_MAX_RANK; i++) {
        if (dims[i] < 0 || (dims[i] && nelem > (UINT64_C(1) << 62) / (uint64_t)dims[i])) {
            amp_fail(st, AMP_ERR_INPUT, "test allocator: output %d has an invalid or huge shape", index);
            return NULL;
        }
        nelem *= (uint64_t)dims[i];
    }
    size_t bytes = 0;
    if (amp_tensor_expected_bytes(dtype, nelem, &bytes) && bytes >= ((size_t)1 << 32)) {
        amp_fail(st, AMP_ERR_UNSUPPORTED, "test allocator: output %d would take %zu bytes", index, bytes);
        return NULL;
    }
    return kt_alloc_slot(o->b, KT_MAX_OUT, index, dtype, rank, dims);
}

static inline void outs_free(Outs *o) {
    for (int i = 0; i < KT_MAX_OUT; i++) free(o->b[i].data);
    memset(o, 0, sizeof *o);
}

/* ---- attributes (copied into the node's model arena) ----------------------------- */

static inline AmpArena *kt_arena(AmpNode *n) {
    return &n->graph->model->arena;
}

static inline void attr_int(AmpNode *n, const char *name, int64_t v) {
    amp_node_add_attr(n, name, AMP_ATTR_INT)->i = v;
}

static inline void attr_float(AmpNode *n, const char *name, float v) {
    amp_node_add_attr(n, name, AMP_ATTR_FLOAT)->f = v;
}

static inline void attr_ints(AmpNode *n, const char *name, int cnt, const int64_t *v) {
    AmpAttr *a = amp_node_add_attr(n, name, AMP_ATTR_INTS);
    a->ints = amp_arena_calloc(kt_arena(n), (size_t)(cnt ? cnt : 1), sizeof *a->ints);
    for (int i = 0; i < cnt; i++) a->ints[i] = v[i];
    a->n_ints = (size_t)cnt;
}

static inline void attr_floats(AmpNode *n, const char *name, int cnt, const float *v) {
    AmpAttr *a = amp_node_add_attr(n, name, AMP_ATTR_FLOATS);
    a->floats = amp_arena_calloc(kt_arena(n), (size_t)(cnt ? cnt : 1), sizeof *a->floats);
    for (int i = 0; i < cnt; i++) a->floats[i] = v[i];
    a->n_floats = (size_t)cnt;
}

static inline void attr_str(AmpNode *n, const char *name, const char *s) {
    AmpAttr *a = amp_node_add_attr(n, name, AMP_ATTR_STRING);
    a->s.data = (const uint8_t *)amp_arena_strdup(kt_arena(n), s);
    a->s.len = strlen(s);
}

static inline void attr_strs(AmpNode *n, const char *name, int cnt, const char *const *v) {
    AmpAttr *a = amp_node_add_attr(n, name, AMP_ATTR_STRINGS);
    a->strings = amp_arena_calloc(kt_arena(n), (size_t)cnt, sizeof *a->strings);
    for (int i = 0; i < cnt; i++) {
        a->strings[i].data = (const uint8_t *)amp_arena_strdup(kt_arena(n), v[i]);
        a->strings[i].len = strlen(v[i]);
    }
    a->n_strings = (size_t)cnt;
}

/* ---- buffers --------------------------------------------------------------------- */

/* A buffer over data the caller owns. */
static inline AmpBuf mkbuf(int dtype, int rank, const int64_t *dims, const void *data) {
    AmpBuf b = {.dtype = dtype, .rank = rank, .data = (void *)data};
    for (int i = 0; i < rank; i++) b.dims[i] = dims[i];
    b.nelem = amp_shape_nelem(rank, dims);
    return b;
}

/* Element i of any numeric buffer, as a double. */
static inline double getf(const AmpBuf *b, uint64_t i) {
    switch (b->dtype) {
    case AMP_DT_FLOAT: return ((const float *)b->data)[i];
    case AMP_DT_DOUBLE: return ((const double *)b->data)[i];
    case AMP_DT_FLOAT16: return amp_f16_to_f32(((const uint16_t *)b->data)[i]);
    case AMP_DT_BFLOAT16: return amp_bf16_to_f32(((const uint16_t *)b->data)[i]);
    default: return (double)amp_buf_get_i64(b, i);
    }
}

static inline void expect_shape(const AmpBuf *b, int rank, const int64_t *dims) {
    cr_assert_eq(b->rank, rank, "rank %d, expected %d", b->rank, rank);
    for (int i = 0; i < rank; i++)
        cr_assert_eq(b->dims[i], dims[i], "dim %d is %lld, expected %lld", i, (long long)b->dims[i],
                     (long long)dims[i]);
}

/* ---- running one kernel ---------------------------------------------------------- */

/* The shape functions' view of one kernel call: the node's inputs are the given buffers. */
typedef struct KtEnv {
    const AmpNode *n;
    int n_in;
    const AmpBuf *const *in;
} KtEnv;

static inline const AmpBuf *kt_env_buf(const KtEnv *e, const AmpValue *v) {
    for (int i = 0; i < e->n_in && i < e->n->n_inputs; i++)
        if (e->n->inputs[i] == v && e->in[i]) return e->in[i];
    return NULL;
}

static inline bool kt_env_shape(void *user, const AmpValue *v, AmpBuf *out) {
    const AmpBuf *b = kt_env_buf(user, v);
    if (!b) return false;
    *out = *b;
    out->data = NULL;
    return true;
}

static inline int kt_env_ints(void *user, const AmpValue *v, int64_t *out, int max) {
    const AmpBuf *b = kt_env_buf(user, v);
    if (!b || amp_dtype_is_float(b->dtype) || b->dtype == AMP_DT_STRING || b->nelem > (uint64_t)max) return -1;
    for (uint64_t i = 0; i < b->nelem; i++) out[i] = amp_buf_get_i64(b, i);
    return (int)b->nelem;
}

static inline int kt_env_doubles(void *user, const AmpValue *v, double *out, int max) {
    const AmpBuf *b = kt_env_buf(user, v);
    if (!b || b->dtype == AMP_DT_STRING || b->nelem > (uint64_t)max) return -1;
    for (uint64_t i = 0; i < b->nelem; i++) out[i] = getf(b, i);
    return (int)b->nelem;
}

/* The node a call runs: n itself when it lists a value for every given input and every
 * output, else a detached copy of it (same op, name and attributes) that does, with
 * fresh values, so that shape functions and amp_kernel_outputs see a node as the
 * executor's are (many kernel tests build bare nodes). */
static inline const AmpNode *kt_call_node(const AmpNode *n, int n_in, const AmpBuf *const *in, int n_out) {
    bool whole = n->n_inputs >= n_in && n->n_outputs >= n_out;
    for (int i = 0; whole && i < n_in; i++) whole = !in[i] || n->inputs[i];
    for (int i = 0; whole && i < n_out; i++) whole = n->outputs[i] != NULL;
    if (whole) return n;
    static unsigned long seq;
    AmpNode *c = amp_node_new(n->graph, n->domain, n->op_type, n->name, n_in, n_out);
    cr_assert_not_null(c);
    c->attrs = n->attrs;
    c->n_attrs = n->n_attrs;
    char name[64];
    for (int i = 0; i < n_in; i++) {
        if (!in[i]) continue;
        snprintf(name, sizeof name, "kt_in_%lu_%d", seq, i);
        c->inputs[i] = i < n->n_inputs && n->inputs[i] ? n->inputs[i] : amp_graph_value(n->graph, name);
    }
    for (int i = 0; i < n_out; i++) {
        snprintf(name, sizeof name, "kt_out_%lu_%d", seq, i);
        c->outputs[i] = i < n->n_outputs && n->outputs[i] ? n->outputs[i] : amp_graph_value(n->graph, name);
    }
    seq++;
    return c;
}

/* Calls the node's CPU kernel once as the executor does (the test fails when there is
 * none): its attributes parsed by its prepare function, and every output whose shape the
 * shape function knows from these inputs placed first through `alloc` (a shape
 * function's error is the call's, as in the executor); st is cleared first. rng may be
 * NULL for ops that draw no random numbers. */
static inline AmpCode kt_call(const AmpNode *n, int64_t opset, int n_in, const AmpBuf *const *in, int n_out,
                              AmpAllocFn alloc, void *alloc_ctx, uint64_t *rng, bool training,
                              AmpStatus *st) {
    AmpKernelFn fn = amp_cpu_kernel(n->op);
    cr_assert_not_null(fn, "no kernel for %s", n->op_type);
    amp_status_clear(st);
    n = kt_call_node(n, n_in, in, n_out);
    AmpKernelPrepareFn prep = amp_cpu_kernel_prepare(n->op);
    void *attrs = NULL;
    AmpCode rc = prep ? prep(n, opset, &attrs, st) : AMP_OK;
    if (rc) return rc;
    AmpBuf shapes[KT_MAX_OUT], out[KT_MAX_OUT];
    bool known[KT_MAX_OUT];
    cr_assert_leq(n->n_outputs, KT_MAX_OUT);
    memset(out, 0, sizeof out);
    KtEnv env = {n, n_in, in};
    AmpShapeEnv se = {.shape_of = kt_env_shape, .ints_of = kt_env_ints, .doubles_of = kt_env_doubles, .user = &env};
    bool shaped = false;
    if (!amp_op_shape_from_data(n->op)) {
        rc = amp_shape_node(n, opset, &se, shapes, known, st);
        if (rc) {
            free(attrs);
            return rc;
        }
        shaped = true;
    }
    for (int i = 0; shaped && i < n_out && i < n->n_outputs; i++) {
        size_t bytes = 0;
        if (!known[i] || !n->outputs[i] || !amp_tensor_expected_bytes(shapes[i].dtype, shapes[i].nelem, &bytes))
            continue; /* the kernel asks, and meets the allocator's refusal (strings) */
        AmpBuf *b = alloc(alloc_ctx, i, shapes[i].dtype, shapes[i].rank, shapes[i].dims, st);
        if (!b) {
            free(attrs);
            return st->code ? st->code : AMP_ERR_INTERNAL;
        }
        out[i] = *b;
    }
    AmpKernelCtx k = {.node = n,
                      .opset = opset,
                      .n_in = n_in,
                      .in = in,
                      .n_out = n_out,
                      .out = out,
                      .attrs = attrs,
                      .alloc = alloc,
                      .alloc_ctx = alloc_ctx,
                      .rng = rng,
                      .training = training,
                      .st = st};
    rc = fn(&k);
    free(attrs);
    return rc;
}

/* Runs the node's kernel with its outputs in *o (cleared first; outs_free after). */
static inline AmpCode kt_run(const AmpNode *n, int64_t opset, int n_in, const AmpBuf *const *in, int n_out,
                             Outs *o, AmpStatus *st) {
    memset(o, 0, sizeof *o);
    return kt_call(n, opset, n_in, in, n_out, test_alloc, o, NULL, false, st);
}

#endif
