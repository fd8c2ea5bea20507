/* Shared by the autodiff (grad.c) and its rules (grad_rules*.c): the context a rule gets,
 * the rule table's row, and the helpers every rule family uses. */
#ifndef AMP_GRAD_IMPL_H
#define AMP_GRAD_IMPL_H

#include <stdint.h>

#include "ir/builder.h"
#include "passes/grad.h"

/* One backward step of node n. gy[k] is the gradient of output k (NULL: the loss does not
 * depend on it); the rule sets gx[i] for every input slot i whose bit is in `want` (only
 * slots of its row's `slots`), each typed and shaped like input i. */
typedef struct AmpGradCtx {
    AmpBuilder *b;
    AmpNode *n;
    AmpValue *const *gy;
    AmpValue **gx;
    uint32_t want;
} AmpGradCtx;

typedef void (*AmpGradFn)(AmpGradCtx *c);

typedef struct AmpGradRule {
    AmpGradFn fn;   /* NULL: the op has no rule */
    uint32_t slots; /* inputs it differentiates (AMP_SLOT bits); others get no gradient */
} AmpGradRule;

/* The rule of op (a row with fn NULL when it has none). */
const AmpGradRule *amp_grad_rule(AmpOpId op);

/* Whether the rule must give input i's gradient. */
static inline bool amp_grad_wants(const AmpGradCtx *c, int i) { return (c->want >> i) & 1u; }

/* ---- the helpers (grad_helpers.c) ---- */

/* Fails the build with AMP_ERR_UNSUPPORTED naming the node: "<op> node 'n': <why>". */
void amp_grad_unsupported(AmpGradCtx *c, const char *why);

/* The rank of v's type, or -1 (and an error naming the node) when unknown. */
int amp_grad_rank(AmpGradCtx *c, const AmpValue *v);
/* A scalar constant of v's dtype. */
AmpValue *amp_grad_scalar_like(AmpGradCtx *c, const AmpValue *v, double x);
/* g summed back to x's shape where x was broadcast (ReduceSum over the broadcast axes,
 * keepdims, then Reshape to Shape(x) when the rank differs); g itself when no axis was. */
AmpValue *amp_grad_unbroadcast(AmpGradCtx *c, AmpValue *g, AmpValue *x);
/* Reshape(g, Shape(x)). */
AmpValue *amp_grad_reshape_like(AmpGradCtx *c, AmpValue *g, AmpValue *x);
/* v with its last two axes swapped (rank >= 2). */
AmpValue *amp_grad_swap_last(AmpGradCtx *c, AmpValue *v);
/* The constant axes of a Reduce* node (attribute, or input 1); *count 0 with *all true
 * when it reduces every axis. Axes come back normalised (>= 0) for rank. false: not
 * constant (error set). */
bool amp_grad_reduce_axes(AmpGradCtx *c, int rank, int64_t *axes, size_t *count, bool *all);
/* Copies every attribute of the rule's node onto n (a forward op run again in the backward). */
void amp_grad_copy_attrs(AmpGradCtx *c, AmpNode *n);
/* Zeros of v's shape and dtype. */
AmpValue *amp_grad_zeros_like(AmpGradCtx *c, AmpValue *v);
/* The element indices of x (int64, x's shape: 0, 1, ... in row-major order): a data
 * movement op applied to it tells where each output element came from. */
AmpValue *amp_grad_iota_like(AmpGradCtx *c, AmpValue *x);
/* The adjoint of a data movement: g's elements added into zeros shaped like x at the flat
 * indices `from` (shaped like g) says they came from (ScatterND, reduction "add", so an
 * element read twice gets both). */
AmpValue *amp_grad_scatter_back(AmpGradCtx *c, AmpValue *g, AmpValue *from, AmpValue *x);

/* The rule functions, by family. */
void amp_grad_matmul(AmpGradCtx *c);
void amp_grad_gemm(AmpGradCtx *c);
void amp_grad_add(AmpGradCtx *c);
void amp_grad_sub(AmpGradCtx *c);
void amp_grad_mul(AmpGradCtx *c);
void amp_grad_div(AmpGradCtx *c);
void amp_grad_neg(AmpGradCtx *c);
void amp_grad_pow(AmpGradCtx *c);
void amp_grad_relu(AmpGradCtx *c);
void amp_grad_sigmoid(AmpGradCtx *c);
void amp_grad_tanh(AmpGradCtx *c);
void amp_grad_exp(AmpGradCtx *c);
void amp_grad_log(AmpGradCtx *c);
void amp_grad_sqrt(AmpGradCtx *c);
void amp_grad_erf(AmpGradCtx *c);
void amp_grad_gelu(AmpGradCtx *c);
void amp_grad_abs(AmpGradCtx *c);
void amp_grad_reciprocal(AmpGradCtx *c);
void amp_grad_leaky_relu(AmpGradCtx *c);
void amp_grad_clip(AmpGradCtx *c);
void amp_grad_hard_sigmoid(AmpGradCtx *c);
void amp_grad_hard_swish(AmpGradCtx *c);
void amp_grad_max_min(AmpGradCtx *c);
void amp_grad_identity(AmpGradCtx *c);
void amp_grad_cast(AmpGradCtx *c);
void amp_grad_reshape(AmpGradCtx *c);
void amp_grad_transpose(AmpGradCtx *c);
void amp_grad_concat(AmpGradCtx *c);
void amp_grad_gather(AmpGradCtx *c);
void amp_grad_reduce_sum(AmpGradCtx *c);
void amp_grad_reduce_mean(AmpGradCtx *c);
void amp_grad_reduce_max(AmpGradCtx *c);
void amp_grad_split(AmpGradCtx *c);
void amp_grad_slice(AmpGradCtx *c);
void amp_grad_tile(AmpGradCtx *c);
void amp_grad_expand(AmpGradCtx *c);
void amp_grad_where(AmpGradCtx *c);
void amp_grad_dropout(AmpGradCtx *c);
void amp_grad_conv(AmpGradCtx *c);
void amp_grad_conv_transpose(AmpGradCtx *c);
void amp_grad_max_pool(AmpGradCtx *c);
void amp_grad_average_pool(AmpGradCtx *c);
void amp_grad_global_average_pool(AmpGradCtx *c);
void amp_grad_batch_norm(AmpGradCtx *c);
void amp_grad_softmax(AmpGradCtx *c);
void amp_grad_log_softmax(AmpGradCtx *c);
void amp_grad_layer_norm(AmpGradCtx *c);
void amp_grad_softmax_ce(AmpGradCtx *c);

#endif
