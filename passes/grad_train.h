/* Between the autodiff (grad.c) and the loss and optimizer around it (grad_train.c). */
#ifndef AMP_GRAD_TRAIN_H
#define AMP_GRAD_TRAIN_H

#include "grad.h"

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

/* --train-mode (grad_mode.c): BatchNormalization and Dropout in m's main graph put in
 * training mode; *state (malloc'd) lists what the optimizer binds. */
AmpCode amp_grad_train_mode(AmpModel *m, AmpGradState **state, size_t *n_state, AmpStatus *st);

/* The backward from `loss` (a value of m's main graph): every parameter the loss depends
 * on gets "<param>_grad"; *params (malloc'd, the caller frees) lists them in the graph's
 * value order. */
AmpCode amp_grad_backward(AmpModel *m, AmpValue *loss, const AmpGradOptions *o, AmpGradSummary *sum,
                          AmpGradParam **params, size_t *n_params, AmpStatus *st);

#endif
