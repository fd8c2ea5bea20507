/* The patterns of fuse_norm.c, shared with the amp pass: LayerNorm and GELU as exporters
 * write them when the opset has no LayerNormalization (before 17) or Gelu (before 20).
 * The fuse_norm pass replaces a group by the op where the opset has it; the amp pass
 * colours a group left decomposed as one node of that op (amp_color.c). */
#ifndef AMP_FUSE_IMPL_H
#define AMP_FUSE_IMPL_H

#include <stdbool.h>

#include "ir/ir.h"

typedef enum AmpFuseKind {
    AMP_FUSE_NONE = 0,
    AMP_FUSE_LAYERNORM, /* mean, centre, variance, eps, sqrt, divide [, * gamma [, + beta]] */
    AMP_FUSE_GELU_ERF,  /* 0.5 * x * (1 + erf(x / sqrt(2))) */
    AMP_FUSE_GELU_TANH, /* 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))) */
    AMP_FUSE_RMSNORM    /* x / sqrt(mean(x^2) + eps) [* gamma]: T5, LLaMA and their kin */
} AmpFuseKind;

enum { AMP_FUSE_MAX = 12 };

typedef struct AmpFuseGroup {
    AmpFuseKind kind;
    AmpNode *nodes[AMP_FUSE_MAX]; /* the group's nodes; nodes[n - 1] makes `out` */
    int n;
    int n_stats; /* LayerNorm, RMSNorm: nodes[0, n_stats) compute the normalised value
                    (statistics and division); after them only gamma's Mul and beta's Add */
    AmpValue *x, *out;
    AmpValue *scale, *bias; /* LayerNorm's gamma and beta; NULL when absent */
    double eps;             /* the norm's epsilon */
} AmpFuseGroup;

/* Whether `root` starts a group: the first ReduceMean of a LayerNorm, the Pow(x, 2) of an
 * RMSNorm, the Erf or the Tanh of a GELU. Every value inside the group has readers only in it and is no graph output;
 * the constants are what the formula says (within 1e-4), the reductions are over the last
 * axis only (axes -1 or rank-1, as attribute or input) with keepdims. */
bool amp_fuse_match(const AmpModel *m, AmpNode *root, AmpFuseGroup *g);

/* "LayerNormalization", "Gelu" (erf), "Gelu (tanh)", "RMSNorm". */
const char *amp_fuse_kind_name(AmpFuseKind k);

/* How the doc_string of a fused node begins: "fused by ampc fuse_norm from N nodes: "
 * and the names of those nodes, by which --explain finds it. */
#define AMP_FUSE_DOC "fused by ampc fuse_norm"

/* Whether n is a Cast that changes nothing: to the float type its input has already
 * (PyTorch writes RMSNorm's `x.to(float32)` so in a float32 export). */
bool amp_fuse_noop_cast(const AmpNode *n);

#endif
