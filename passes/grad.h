/* `ampc grad` (issue 23): a training graph from an FP32 inference graph, in standard ONNX
 * ops. grad.c appends a loss, the backward (reverse-mode autodiff from the scalar loss,
 * one rule per op: grad_rules*.c) and an optimizer bound by a TrainingInfoProto, as
 * docs/design.md's training-graph contract says (gradients `<param>_grad`, seed `<loss>_grad`), so
 * that `ampc MODEL -o OUT` (loss scaling) and `ampc run --steps N` take the result. */
#ifndef AMP_GRAD_H
#define AMP_GRAD_H

#include <stdbool.h>
#include <stddef.h>

#include "ir/ir.h"

typedef enum AmpGradLoss {
    AMP_GRAD_LOSS_CROSS_ENTROPY = 0, /* SoftmaxCrossEntropyLoss(output, labels), mean */
    AMP_GRAD_LOSS_MSE,               /* ReduceMean((output - target)^2) */
    AMP_GRAD_LOSS_OUTPUT             /* an existing scalar float output (loss_name) */
} AmpGradLoss;

typedef enum AmpGradOptimizer {
    AMP_GRAD_OPT_SGD = 0, /* torch.optim.SGD: p_new = p - lr * (p_grad + wd p) */
    AMP_GRAD_OPT_MOMENTUM, /* torch.optim.SGD(momentum): buf = mu buf + g; p -= lr buf */
    AMP_GRAD_OPT_ADAM,    /* torch.optim.Adam with bias correction; AdamW's decay with wd */
    AMP_GRAD_OPT_NONE     /* gradients as graph outputs, no training_info (tests) */
} AmpGradOptimizer;

typedef struct AmpGradOptions {
    AmpGradLoss loss;
    const char *loss_name; /* LOSS_OUTPUT: the output that is the loss */
    const char *output;    /* the output the loss reads; NULL: the first float output */
    const char *labels;    /* the input holding labels (cross-entropy, int64: the output's
                              dims but the class axis) or the target (mse, shaped like the
                              output); NULL: "labels" / "target" */
    int class_axis;        /* cross-entropy: the output's class axis, 1 or -1 (0: -1, the
                              last: [N, C] and [B, T, V] logits) */
    AmpGradOptimizer optimizer;
    double lr;             /* the learning rate; 0: 0.01 (SGD, momentum), 0.001 (Adam) */
    double momentum;       /* momentum's mu; 0: 0.9 */
    double beta1, beta2, eps; /* Adam's; 0: 0.9, 0.999, 1e-8 */
    double weight_decay;   /* 0: none; SGD/momentum add wd p to the gradient, Adam decays
                              p by lr wd apart from it (AdamW) */
    const char *const *freeze; /* n_freeze fnmatch(3) globs: matching initializers stay fixed */
    size_t n_freeze;
    bool train_mode;       /* BatchNormalization on batch statistics (running ones bound
                              as state), Dropout dropping: grad_mode.c */
} AmpGradOptions;

/* What amp_grad_model did, for the summary line. */
typedef struct AmpGradSummary {
    const char *loss;      /* the loss value's name */
    size_t n_params;       /* parameters given a gradient and an update binding */
    size_t n_state;        /* optimizer state tensors (moments, buffers, step) bound */
    size_t n_frozen;       /* float initializers --freeze matched */
    size_t n_unused;       /* trainable initializers the loss does not depend on */
    size_t n_nodes;        /* nodes added */
    size_t n_running;      /* running statistics bound (--train-mode) */
    int64_t opset_from, opset_to; /* the ai.onnx opset before and after (raised to 16) */
} AmpGradSummary;

/* Appends the loss, the backward and the optimizer to m's main graph. An op on a path
 * from a parameter to the loss without a gradient rule is AMP_ERR_UNSUPPORTED naming it
 * and its node; nothing is half done on success only (on failure m is to be dropped). */
AmpCode amp_grad_model(AmpModel *m, const AmpGradOptions *opt, AmpGradSummary *sum, AmpStatus *st);

/* Whether op has a gradient rule (grad_rules.c), and how many ops do. */
bool amp_grad_has_rule(AmpOpId op);
size_t amp_grad_rule_count(void);

#endif
