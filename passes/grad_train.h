/* Between the autodiff (grad.c) and the loss and optimizer around it (grad_train.c). */
#ifndef AMP_GRAD_TRAIN_H
#define AMP_GRAD_TRAIN_H

#include "passes/grad.h"

typedef struct AmpGradParam {
    AmpValue *param; /* a float initializer of the main graph */
    AmpValue *grad;  /* "<param>_grad" */
} AmpGradParam;

/* A running statistic --train-mode binds: the initializer, and the value of the new
 * running value the forward computes (BatchNormalization's running_mean / running_var). */
typedef struct AmpGradState {
    AmpValue *init;
    AmpValue *next;
} AmpGradState;

/* The forward's mode made explicit (grad_mode.c): with train (--train-mode)
 * BatchNormalization and Dropout in m's main graph are put in training mode and *state
 * (malloc'd) lists what the optimizer binds; without, each Dropout's training_mode input
 * is given as false (BatchNormalization's attribute says it already). */
AmpCode amp_grad_train_mode(AmpModel *m, bool train, AmpGradState **state, size_t *n_state, AmpStatus *st);

/* The backward from `loss` (a value of m's main graph): every parameter the loss depends
 * on gets "<param>_grad"; *params (malloc'd, the caller frees) lists them in the graph's
 * value order. */
AmpCode amp_grad_backward(AmpModel *m, AmpValue *loss, const AmpGradOptions *o, AmpGradSummary *sum,
                          AmpGradParam **params, size_t *n_params, AmpStatus *st);

/* Appends o's optimizer (not NONE) over ps[0..n) as a new training_info (grad_optim.c),
 * which also binds each --train-mode running statistic state[i].init to its forward's new
 * value state[i].next. */
AmpCode amp_grad_add_optimizer(AmpModel *m, const AmpGradOptions *o, const AmpGradParam *ps, size_t n,
                               const AmpGradState *state, size_t n_state, AmpGradSummary *sum, AmpStatus *st);

#endif
