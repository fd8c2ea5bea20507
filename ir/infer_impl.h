/* Private to the type-inference files (infer*.c) and ops.c: the per-op AmpInferFn
 * declarations named in ops.def, and the helpers they share (shapes under
 * construction, broadcasting, reading small int64 constants, merging into a value). */
#ifndef AMP_INFER_IMPL_H
#define AMP_INFER_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "ir/ir.h"
#include "ir/tensor.h" /* amp_slice_range */

/* ---- the context every infer function reads and writes through ----------------------
 * One function per op serves two callers:
 * - graph mode (the `infer` pass, amp_infer_graph/amp_infer_node): types are the values'
 *   own (&v->type) and outputs merge into the output values (amp_inf_merge);
 * - concrete mode (amp_shape_node, shape.c): types are concrete shapes the caller
 *   supplies, outputs go to the caller's array, and nothing in the model changes.
 * Infer functions never read v->type or write an output directly: every read of a
 * value's type (the node's inputs, and values reached while following producers in
 * amp_inf_value_ints) goes through type_of, every output through set_out. */
struct AmpInferCtx {
    const AmpNode *n;
    int64_t opset; /* the version imported for n's domain (0: unknown) */
    AmpStatus *st;
    /* The type of v, or NULL when nothing is known of it. */
    const AmpType *(*type_of)(AmpInferCtx *c, const AmpValue *v);
    /* Receives output `slot`'s type (t is only read during the call). */
    AmpCode (*set_out)(AmpInferCtx *c, int slot, const AmpType *t);
    /* Host-known elements of v (at most max): the count, or -1 when not known; then
     * initializers, Constants and producers are followed as in graph mode. NULL in
     * graph mode. */
    int (*ints_of)(AmpInferCtx *c, const AmpValue *v, int64_t *out, int max);
    int (*doubles_of)(AmpInferCtx *c, const AmpValue *v, double *out, int max);
    /* Graph mode only: If/Loop/Scan infer (and type) their bodies. */
    bool graph_mode;
    void *user; /* the concrete-mode caller's state */
};

/* A graph-mode context for n. */
void amp_inf_ctx_graph(AmpInferCtx *c, const AmpNode *n, int64_t opset, AmpStatus *st);

/* Every infer function named in ops.def. */
#define AMP_OP(id, domain, name, fp16_class, bf16_class, opsets, inputs, outputs, float_inputs, \
               infer, ...)                                                                    \
    AmpCode infer(AmpInferCtx *c);
#include "ir/ops.def"
#undef AMP_OP

/* Shapes of a higher rank than this are treated as unknown (ONNX models stay far below). */
#define AMP_INF_MAX_RANK 64

/* A shape under construction, on the stack; d[i].value -1 with param NULL = unknown. */
typedef struct AmpInfShape {
    int rank; /* -1: rank unknown */
    AmpDim d[AMP_INF_MAX_RANK];
} AmpInfShape;

/* *dst = *src, copying only the dims in use (the struct is a kilobyte). */
static inline void amp_inf_copy(AmpInfShape *dst, const AmpInfShape *src) {
    dst->rank = src->rank;
    if (src->rank > 0) amp_copy(dst->d, src->d, (size_t)src->rank * sizeof *src->d);
}

/* One element of a small int64 tensor whose value inference could work out, e.g. a
 * Reshape target: a known number, or a dim of some tensor (symbolic or unknown). */
typedef struct AmpInfVal {
    bool known;
    int64_t v;         /* when known */
    const char *param; /* when not known: the dim_param it equals, or NULL */
} AmpInfVal;

/* Infers g's nodes in order (subgraphs as their nodes are met). */
AmpCode amp_infer_graph(AmpGraph *g, AmpStatus *st);
/* Fills the type of a subgraph input from the enclosing node (Loop/Scan bodies) with
 * the same merging rule as node outputs; `what` names it in messages. */
AmpCode amp_inf_merge(const AmpNode *n, AmpValue *v, const AmpType *t, const char *what,
                      AmpStatus *st);

/* "node 'x' (Op): <message>" as AMP_ERR_INPUT. */
AmpCode amp_inf_fail(const AmpNode *n, AmpStatus *st, const char *fmt, ...) AMP_PRINTF(3, 4);

/* ---- reading inputs ---- */
/* The type of value v as c sees it (any kind), or NULL. */
const AmpType *amp_inf_vtype(AmpInferCtx *c, const AmpValue *v);
/* The tensor type of value v, or NULL when unknown, not a tensor, or of unknown dtype
 * and rank. */
const AmpType *amp_inf_vtensor(AmpInferCtx *c, const AmpValue *v);
/* The type of input i (any kind: sequences pass through Identity), or NULL. */
const AmpType *amp_inf_type(AmpInferCtx *c, int i);
/* The tensor type of input i, or NULL when absent, not a tensor, or of unknown dtype
 * and rank. */
const AmpType *amp_inf_in(AmpInferCtx *c, int i);
int amp_inf_dtype(AmpInferCtx *c, int i); /* AMP_DT_UNDEFINED when unknown */
/* Copies input i's shape into s; false (s->rank = -1) when the rank is unknown. */
bool amp_inf_shape(AmpInferCtx *c, int i, AmpInfShape *s);
bool amp_inf_has_input(const AmpNode *n, int i);

/* ---- setting outputs (merged with what the model declares; see infer.c) ---- */
AmpCode amp_inf_set(AmpInferCtx *c, int slot, int dtype, const AmpInfShape *s);
/* The shape an int64 shape-tensor input describes: its values where they can be read,
 * else just its length (from its static 1-D shape); rank -1 when neither. */
void amp_inf_shape_from_value(AmpInferCtx *c, int slot, AmpInfShape *s);
AmpCode amp_inf_set_type(AmpInferCtx *c, int slot, const AmpType *t);

/* ---- dims ---- */
/* A known dim; a negative number (from a hostile or broken attribute) is unknown. */
static inline AmpDim amp_dim_of(int64_t v) {
    AmpDim d = {v < 0 ? -1 : v, NULL};
    return d;
}
static inline AmpDim amp_dim_unknown(void) {
    AmpDim d = {-1, NULL};
    return d;
}
static inline bool amp_dim_known(AmpDim d) {
    return d.value >= 0;
}
/* Products/sums of known dims; unknown (or overflowing) gives unknown. */
AmpDim amp_dim_mul(AmpDim a, AmpDim b);
AmpDim amp_dim_add(AmpDim a, AmpDim b);
/* Merges two facts about the same dim (known beats symbolic beats unknown). */
AmpDim amp_dim_merge(AmpDim a, AmpDim b);
void amp_shape_unknown_dims(AmpInfShape *s, int rank); /* rank dims, all unknown */

/* Multidirectional (numpy) broadcast of b into acc; an incompatible pair of known dims
 * is an error naming n. acc->rank -1 stays unknown. */
AmpCode amp_inf_broadcast_into(const AmpNode *n, AmpInfShape *acc, const AmpInfShape *b,
                               AmpStatus *st);

/* ---- attributes ---- */
/* INTS attribute into out (up to max); the count, or -1 when absent or too long. */
int amp_inf_attr_ints(const AmpNode *n, const char *name, int64_t *out, int max);
/* axis in [-rank, rank) to [0, rank); -1 when out of range. */
int amp_inf_axis(int64_t axis, int rank);
/* Whether an argument that moved from an attribute to input `slot` at opset `since`
 * is read from the input: by opset when known, else by whether the input is there. */
bool amp_inf_from_input(const AmpNode *n, int64_t opset, int64_t since, int slot);

/* Whether |v| < 2^40: sizes and attribute values inference does arithmetic on are
 * checked with this first, so that no sum or product of a few of them overflows. */
static inline bool amp_inf_small(int64_t v) {
    return v > -((int64_t)1 << 40) && v < ((int64_t)1 << 40);
}

/* ---- small constants ---- */
/* The elements of a small int tensor value (at most max), following initializers,
 * Constant nodes and cheap shape arithmetic (Shape, Size, Gather, Concat, Slice, Cast,
 * Squeeze, Unsqueeze, Identity, ConstantOfShape, integer Add/Sub/Mul/Div/Neg) a
 * bounded number of steps. The count, or -1. */
int amp_inf_value_ints(AmpInferCtx *c, const AmpValue *v, AmpInfVal *out, int max);
/* Same, but every element must be a known number. */
int amp_inf_const_ints(AmpInferCtx *c, const AmpValue *v, int64_t *out, int max);
/* A small float or int value as doubles (initializers, Constants, integer shape
 * arithmetic as amp_inf_const_ints follows it, through Identity and Cast); count or -1. */
int amp_inf_const_doubles(AmpInferCtx *c, const AmpValue *v, double *out, int max);
/* The tensor a Constant node holds in its `value` attribute, or NULL. */
AmpTensor *amp_inf_constant_tensor(const AmpNode *c);

#endif
