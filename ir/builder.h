/* A graph builder over the IR: the nodes a pass adds, written as calls that return the new
 * value. It keeps the first error (every later call is a no-op returning NULL, so a rule
 * is a straight sequence of calls checked once at its end), names every node and value
 * under a prefix ("grad/...": unique in the model, deterministic), places each node before
 * a chosen node (or after one, or at the end of the graph), and infers the outputs' types as it builds
 * (ir/infer*.c), so the next call can read ranks and dims. Ops whose form changed with the
 * opset (Reduce* axes, Squeeze/Unsqueeze axes) are emitted in the form of the model's
 * ai.onnx opset. */
#ifndef AMP_BUILDER_H
#define AMP_BUILDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir/ir.h"

typedef struct AmpBuilder {
    AmpGraph *g;        /* the graph nodes go into */
    const char *prefix; /* every node and value name starts with it (may be "") */
    AmpNode *before;    /* new nodes are inserted before it; NULL: appended to g */
    AmpStatus st;       /* the first error (st.code AMP_OK while none) */
    int64_t opset;      /* the model's ai.onnx opset, read at init */
    size_t n_nodes;     /* nodes made so far */
    AmpOrigin origin;   /* given to every node it makes (AMP_ORIGIN_MODEL after init) */
} AmpBuilder;

void amp_builder_init(AmpBuilder *b, AmpGraph *g, const char *prefix);
static inline bool amp_builder_ok(const AmpBuilder *b) { return b->st.code == AMP_OK; }
/* Records an error unless one is recorded already; returns the first error's code. */
AmpCode amp_builder_fail(AmpBuilder *b, AmpCode code, const char *fmt, ...) AMP_PRINTF(3, 4);
/* The first error, copied into st (when st has none yet); AMP_OK when none. */
AmpCode amp_builder_status(const AmpBuilder *b, AmpStatus *st);

/* Names: a NULL `what` or `name` (one the caller could not make for want of memory) is an
 * out-of-memory error, like any allocation the builder makes. */

/* A node `op` reading in[0..n_in) (a NULL entry leaves that optional slot out: a value
 * an earlier call failed to make is never read, since that call recorded the error and
 * this one then does nothing), with n_out outputs named prefix+what ("_1", "_2"... when
 * taken; the node takes output 0's name), placed, not yet typed: add attributes, then
 * amp_build_end. NULL after an error. */
AmpNode *amp_build_start(AmpBuilder *b, const char *op, const char *what, AmpValue *const *in, int n_in,
                         int n_out);
/* The same with output 0 named exactly `name` (the contract's "<param>_grad"): a name the
 * model already uses is an error. */
AmpNode *amp_build_start_named(AmpBuilder *b, const char *op, const char *name, AmpValue *const *in, int n_in,
                               int n_out);
/* A node named prefix+what (as given: node names need not be unique) whose one output is
 * `out`: a value the caller made (amp_build_value) or one keeping a name the model reads
 * (its producer becomes this node). A type out has already is kept; inference refines it.
 * out NULL (a value that could not be made) is an out-of-memory error. */
AmpNode *amp_build_start_to(AmpBuilder *b, const char *op, const char *what, AmpValue *const *in, int n_in,
                            AmpValue *out);
/* A fresh, untyped value named from `base` (made unique in the model; no prefix). */
AmpValue *amp_build_value(AmpBuilder *b, const char *base);
/* New nodes go right after n, in the order they are made; n NULL: before the graph's first
 * node (called again before each node, it puts each at the top). */
void amp_builder_place_after(AmpBuilder *b, AmpNode *n);
/* Types n's outputs (inference from its inputs and attributes); returns output 0, NULL
 * after an error. */
AmpValue *amp_build_end(AmpBuilder *b, AmpNode *n);

/* Attributes of a node being built (no-ops on NULL). */
void amp_build_attr_int(AmpBuilder *b, AmpNode *n, const char *name, int64_t v);
void amp_build_attr_float(AmpBuilder *b, AmpNode *n, const char *name, float v);
void amp_build_attr_ints(AmpBuilder *b, AmpNode *n, const char *name, const int64_t *v, size_t count);
void amp_build_attr_string(AmpBuilder *b, AmpNode *n, const char *name, const char *v);

/* One-output nodes without attributes, in one call. */
AmpValue *amp_build1(AmpBuilder *b, const char *op, const char *what, AmpValue *x);
AmpValue *amp_build2(AmpBuilder *b, const char *op, const char *what, AmpValue *x, AmpValue *y);

/* A Constant holding a scalar of dtype (float, double, float16, bfloat16, int64, int32,
 * bool) with value v. */
AmpValue *amp_build_scalar(AmpBuilder *b, const char *what, int dtype, double v);
/* The same named exactly `name` (a name in use is an error). */
AmpValue *amp_build_scalar_named(AmpBuilder *b, const char *name, int dtype, double v);
/* A scalar graph input `name` of dtype (a training step's state: a loss scale, a step
 * count), made if absent; with_init, also an initializer holding v (else the caller feeds it). */
AmpValue *amp_build_state(AmpBuilder *b, const char *name, int dtype, double v, bool with_init);
/* ConstantOfShape(shape) filled with v of dtype. */
AmpValue *amp_build_fill(AmpBuilder *b, const char *what, AmpValue *shape, int dtype, double v);
/* A Constant holding a 1-D int64 tensor (shapes, axes, perms). */
AmpValue *amp_build_ints(AmpBuilder *b, const char *what, const int64_t *v, size_t count);

/* Version-correct forms. Reduce* over `axes` (count 0: every axis), keepdims 0/1: axes as
 * an input from opset 13 (ReduceSum) or 18 (the others), an attribute before. */
AmpValue *amp_build_reduce(AmpBuilder *b, const char *op, const char *what, AmpValue *x, const int64_t *axes,
                           size_t count, int keepdims);
/* Unsqueeze / Squeeze over `axes`: an input from opset 13, an attribute before. */
AmpValue *amp_build_axes_op(AmpBuilder *b, const char *op, const char *what, AmpValue *x, const int64_t *axes,
                            size_t count);
/* Cast to dtype (the `to` attribute in the opset's form). */
AmpValue *amp_build_cast(AmpBuilder *b, const char *what, AmpValue *x, int dtype);
/* The same into `out` (as amp_build_start_to), the node named prefix+what. */
AmpValue *amp_build_cast_to(AmpBuilder *b, const char *what, AmpValue *x, AmpValue *out, int dtype);
/* Transpose with perm (count entries). */
AmpValue *amp_build_transpose(AmpBuilder *b, const char *what, AmpValue *x, const int64_t *perm, size_t count);

/* The int64 elements of a constant value (an initializer, or a Constant node's output):
 * true with *count set (at most max copied), false when v is not such a constant. */
bool amp_value_const_ints(AmpValue *v, int64_t *out, size_t max, size_t *count);

#endif
