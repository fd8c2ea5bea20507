/* Concrete shapes: the output dtypes and shapes of one node computed from the concrete
 * shapes of its inputs, by the same per-op function the `infer` pass runs on the model's
 * types (ops.def's infer column; docs/internals.md, "Shapes: one function per op").
 * The runtime sizes its buffers with it at prepare time; the model is only read. */
#ifndef AMP_SHAPE_H
#define AMP_SHAPE_H

#include <stdbool.h>
#include <stdint.h>

#include "ir/ir.h"
#include "ir/tensor.h"

/* What the caller knows about the values a node reads: its inputs, and the values
 * reached while following producers for shape arithmetic (Shape(x) reads x's dims). */
typedef struct AmpShapeEnv {
    /* The concrete type of value v: dtype, rank (at most AMP_MAX_RANK) and dims in
     * out (nelem and data are ignored), or false when unknown. */
    bool (*shape_of)(void *user, const AmpValue *v, AmpBuf *out);
    /* The elements of integer value v when known on the host (an initializer, a
     * Constant, a small int tensor already computed), at most max: the count, or -1.
     * May be NULL. When it says -1, initializers, Constants and cheap shape arithmetic
     * (Shape, Gather, Concat, Slice, Cast, Unsqueeze, integer Add/Sub/Mul/Div ...) are
     * followed, reading types through shape_of. */
    int (*ints_of)(void *user, const AmpValue *v, int64_t *out, int max);
    /* The elements of a float or integer value v as doubles when known on the host
     * (Range bounds, Resize scales, OneHot depth), at most max: the count, or -1. May
     * be NULL; then ints_of answers for integer values. */
    int (*doubles_of)(void *user, const AmpValue *v, double *out, int max);
    void *user;
} AmpShapeEnv;

/* The concrete output dtypes and shapes of node n (opset: the version imported for its
 * domain): out[k] and known[k] for each k < n->n_outputs. known[k] is false where the
 * shape cannot be known before running: ops marked AMP_SHAPE_FROM_DATA in ops.def
 * (NonZero, If, Loop, Scan), ops without inference, and outputs whose shape depends on
 * a value not available (an input's shape, or the elements of a Reshape target, Slice
 * bound, ... that neither env nor the graph gives). out[k].dtype is set wherever the
 * dtype is known, even when the shape is not; everything else of out[k] is zero unless
 * known[k] (data is always NULL). Absent outputs stay zeroed and unknown.
 * Errors (inputs that do not broadcast, a bad Reshape target, an axis out of range)
 * are AMP_ERR_INPUT naming the node; then every known[k] is false. */
AmpCode amp_shape_node(const AmpNode *n, int64_t opset, const AmpShapeEnv *env, AmpBuf *out,
                       bool *known, AmpStatus *st);

#endif
