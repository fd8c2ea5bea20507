/* Between the autodiff (grad.c) and the loss and optimizer around it (grad_train.c). */
#ifndef AMP_GRAD_TRAIN_H
#define AMP_GRAD_TRAIN_H

#include "grad.h"

typedef struct AmpGradParam {
    AmpValue *param; /* a float initializer of the main graph */
    AmpValue *grad;  /* "<param>_grad" */
} AmpGradParam;

/* The backward from `loss` (a value of m's main graph): every parameter the loss depends
 * on gets "<param>_grad"; *params (malloc'd, the caller frees) lists them in the graph's
 * value order. */
AmpCode amp_grad_backward(AmpModel *m, AmpValue *loss, const AmpGradOptions *o, AmpGradSummary *sum,
                          AmpGradParam **params, size_t *n_params, AmpStatus *st);

#endif
