/* What makes a model a training graph, and which value is its loss (docs/design.md,
 * "The training-graph contract"): one place, read by the AMP pass (the loss subgraph stays fp32)
 * and the loss-scaling pass (the seed it scales). */
#ifndef AMP_TRAINING_H
#define AMP_TRAINING_H

#include <stdbool.h>

#include "ir/ir.h"
#include "ir/precision.h"

/* The domain of ONNX's training ops (Adam, Momentum, Adagrad, Gradient). */
#define AMP_TRAINING_DOMAIN "ai.onnx.preview.training"

/* A training graph has training_info, or gradients (outputs named `*_grad`), or backward
 * nodes in its main graph (gradient ops such as com.microsoft's *Grad, accumulators, nodes
 * that make `*_grad` values: onnxruntime-training's graphs), or a loss the user named
 * (`loss` non-NULL). */
bool amp_is_training_graph(const AmpModel *m, const char *loss);

/* The loss: the value named `name` when given, in the main graph or a training algorithm
 * (absent: AMP_ERR_USAGE); else, looking at the main graph's outputs first and then each
 * algorithm's (ONNX's own layout keeps the loss there): the one scalar float32 output
 * whose name contains "loss" (the loss-scaling pass's own outputs aside), or among several
 * the one named exactly "loss", or the one output X whose seed X_grad the training step
 * holds; else AMP_ERR_INPUT asking for the loss's name. */
AmpCode amp_find_loss(AmpModel *m, const char *name, AmpValue **loss, AmpStatus *st);

/* A backward node: a gradient op (com.microsoft's ReluGrad, GatherGrad, SoftmaxGrad_13,
 * BiasGeluGrad_dX, ...), a gradient accumulator, or a node that makes a value named like
 * a gradient (`*_grad`). ONNX's Gradient op is not one: it differentiates inside itself
 * (the gradient pass expands it first). */
bool amp_is_backward_node(const AmpNode *n);

/* A training step runs the main graph, then each training_info's algorithm, as one graph
 * (ONNX's definition): graph k of amp_n_step_graphs(m), k = 0 the main graph (an algorithm
 * left out is NULL); whether g is one of them. */
size_t amp_n_step_graphs(const AmpModel *m);
AmpGraph *amp_step_graph(const AmpModel *m, size_t k);
bool amp_is_step_graph(const AmpModel *m, const AmpGraph *g);
/* The value of that name defined by the main graph or an algorithm (NULL: none). */
AmpValue *amp_step_lookup(const AmpModel *m, const char *name);
/* The backward seed of `loss`: the value <loss>_grad of the training step, or NULL in
 * *seed (an error only when out of memory). */
AmpCode amp_find_seed(const AmpModel *m, const AmpValue *loss, AmpValue **seed, AmpStatus *st);

/* An optimizer op: ai.onnx.preview.training Adam/Momentum/Adagrad, or a com.microsoft
 * *Optimizer. */
bool amp_is_optimizer(const AmpNode *n);

/* The names the loss-scaling pass (passes/loss_scale.c, docs/design.md "Loss scaling and the
 * gradient check") gives
 * its state and outputs, in one place; its nodes are named AMP_LOSS_SCALE_PREFIX "/..."
 * and carry AMP_ORIGIN_LOSS_SCALE. */
#define AMP_LS_SCALE AMP_LOSS_SCALE_PREFIX       /* state: float32 scalar, input with a value */
#define AMP_LS_TRACKER "amp_growth_tracker"      /* state: int64 scalar, clean steps */
#define AMP_LS_FOUND_INF "amp_found_inf"         /* output: bool scalar */
#define AMP_LS_SCALE_NEW AMP_LS_SCALE "_new"     /* outputs: the state after the step */
#define AMP_LS_TRACKER_NEW AMP_LS_TRACKER "_new"

/* Values the loss-scaling pass makes are named "amp_loss_scale..." (and the state
 * "amp_growth_tracker..."): such an output is never the loss. */
bool amp_is_loss_scale_name(const char *name);

#endif
