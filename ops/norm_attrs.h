/* The attributes of the softmax, normalisation and loss families below every backend
 * (ops/norm_attrs.c): what their prepare functions hand the kernels in k->attrs. The CPU
 * kernels (kernels/cpu/softmax.c, norm.c, loss.c) and the CUDA ones (kernels/cuda/norm*.c,
 * loss.c) take the same prepare functions and read these structs, so both backends read a
 * node alike. */
#ifndef AMP_OPS_NORM_ATTRS_H
#define AMP_OPS_NORM_ATTRS_H

#include <stdbool.h>
#include <stdint.h>

#include "ir/ir.h"
#include "ir/kernel.h"
#include "ir/tensor.h"

/* Softmax, LogSoftmax, Hardmax, com.microsoft SoftmaxGrad_13 (amp_softmax_prepare):
 * axis as written (normalised against the input's rank when the kernel runs); per_axis:
 * opset >= 13 and SoftmaxGrad_13 normalise along the one axis, older opsets over the 2-D
 * coercion at axis. */
typedef struct AmpSoftmaxAttrs {
    int64_t axis;
    bool per_axis;
} AmpSoftmaxAttrs;
AmpCode amp_softmax_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
/* x's rows as the op normalises them: (outer, d, inner), element (o, j, i) at
 * (o * d + j) * inner + i; per_axis along the axis, else the 2-D coercion at it (inner 1;
 * axis == rank also taken: a trailing dimension of 1). AMP_ERR_INPUT for an axis out of
 * range. */
AmpCode amp_softmax_layout(AmpKernelCtx *k, const AmpSoftmaxAttrs *attr, const AmpBuf *x, uint64_t *outer,
                           uint64_t *d, uint64_t *inner);

/* The softmax family's geometry (ops/geom.h): the rows of amp_softmax_layout; Y (dX for
 * SoftmaxGrad_13) is shaped as X (dY). */
typedef struct AmpSoftmaxGeom {
    uint64_t outer, d, inner;
} AmpSoftmaxGeom;
/* Their AmpKernelGeomFn: AMP_ERR_INPUT for a missing input, dY and Y of different shapes
 * (SoftmaxGrad_13) or an axis out of range. */
AmpCode amp_softmax_geom(AmpKernelCtx *k, void *geom, bool *made);

/* The normalisations (amp_norm_prepare): one struct for the family; each op reads
 * its own fields. An axis is kept as given. */
typedef struct AmpNormAttrs {
    int64_t axis;             /* LayerNormalization(Grad), LpNormalization */
    double eps;               /* epsilon */
    double momentum;          /* BatchNormalization */
    bool train;               /* BatchNormalization: training_mode, or before opset 14 running stats listed */
    bool mode_given;          /* BatchNormalization from opset 14: training_mode decides, not the step */
    int64_t groups;           /* GroupNormalization: num_groups */
    int64_t p;                /* LpNormalization */
    int64_t size;             /* LRN */
    double alpha, beta, bias; /* LRN */
} AmpNormAttrs;
AmpCode amp_norm_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);

/* LayerNormalization's geometry: the axis normalised; X as rows (the dims before it) of
 * cols (the rest); Y shaped as X, Mean and InvStdDev float32 (X's dims before axis, then 1s). */
typedef struct AmpLayerNormGeom {
    int axis;
    uint64_t rows, cols;
} AmpLayerNormGeom;
/* Its AmpKernelGeomFn: AMP_ERR_INPUT without X and Scale or for an axis out of range. */
AmpCode amp_layernorm_geom(AmpKernelCtx *k, void *geom, bool *made);

/* BatchNormalization's geometry: X as (n, c, s = d1 * .. * dk); scale, B, input_mean and
 * input_var 1-D of c; Y shaped as X, the statistics' outputs 1-D of c. */
typedef struct AmpBatchNormGeom {
    uint64_t n, c, s;
} AmpBatchNormGeom;
/* Its AmpKernelGeomFn: AMP_ERR_INPUT for a missing input, X of rank < 2, or a parameter
 * not 1-D of c. */
AmpCode amp_batchnorm_geom(AmpKernelCtx *k, void *geom, bool *made);

/* com.microsoft LayerNormalizationGrad's geometry: AmpLayerNormGeom of X (input 1); X_grad
 * shaped as X, scale_grad and bias_grad as scale. Its AmpKernelGeomFn: AMP_ERR_INPUT
 * without Y_grad, X and scale, for an axis out of range, Y_grad not of X's size, scale not
 * of one element per column or mean / inv_std_dev not of one per row. */
AmpCode amp_layernorm_grad_geom(AmpKernelCtx *k, void *geom, bool *made);

/* InstanceNormalization's and GroupNormalization's geometry: X as (n, c, s = d1 * .. * dk)
 * in `groups` groups of c / groups channels (InstanceNormalization: groups = c); scale
 * and bias 1-D, one per group (per_group) or per channel; Y shaped as X. GroupNormalization
 * takes them per group before opset 21, per channel from it, and parameters of the other
 * length (and only that one) as meaning it: exporters targeting 18 sometimes emit
 * per-channel parameters. */
typedef struct AmpGroupNormGeom {
    uint64_t n, c, s, groups;
    bool per_group;
} AmpGroupNormGeom;
/* Their AmpKernelGeomFn: AMP_ERR_INPUT for X missing or of rank < 2, channels that do not
 * split into the groups, or scale or bias missing or not of the length above. */
AmpCode amp_groupnorm_geom(AmpKernelCtx *k, void *geom, bool *made);

/* LpNormalization's and LRN's geometry: X as (outer, d, inner) along the axis
 * (LpNormalization's attribute, LRN's channels: axis 1), element (o, j, i) at
 * (o * d + j) * inner + i; Y shaped as X. */
typedef struct AmpAxisGeom {
    uint64_t outer, d, inner;
} AmpAxisGeom;
/* Their AmpKernelGeomFn: AMP_ERR_INPUT for X missing, an axis out of range (LpNormalization)
 * or X of rank < 2 (LRN). */
AmpCode amp_axis_norm_geom(AmpKernelCtx *k, void *geom, bool *made);

/* SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss, com.microsoft
 * SoftmaxCrossEntropyLossGrad (amp_loss_prepare). */
typedef enum AmpLossReduction { AMP_LOSS_NONE, AMP_LOSS_SUM, AMP_LOSS_MEAN } AmpLossReduction;

typedef struct AmpLossAttrs {
    AmpLossReduction red;
    bool has_ii;
    int64_t ii; /* ignore_index */
} AmpLossAttrs;
AmpCode amp_loss_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);

/* The losses' geometry: the scores (SoftmaxCrossEntropyLossGrad: log_prob) as
 * (n, c, dk = d1 * .. * dk), labels (n, d1..dk), weights (c) where given; loss shaped as
 * the labels for reduction none, else a scalar, and log_prob (SoftmaxCrossEntropyLoss) as
 * the scores, both of the scores' type; SoftmaxCrossEntropyLossGrad's dY one element per
 * sample (none) or one, its bias of log_prob's size, d_logits shaped as log_prob. */
typedef struct AmpLossGeom {
    uint64_t n, c, dk;
} AmpLossGeom;
/* Its AmpKernelGeomFn: AMP_ERR_INPUT for an input required and missing or a shape above
 * that does not hold. */
AmpCode amp_loss_geom(AmpKernelCtx *k, void *geom, bool *made);

/* BatchNormalization computes batch statistics (training) rather than reading its
 * running ones: from opset 14 as training_mode says, before in a training step or where
 * the node lists the running-statistics outputs. */
static inline bool amp_batchnorm_trains(const AmpNormAttrs *a, bool training_step) {
    return a->mode_given ? a->train : training_step || a->train;
}

#endif
