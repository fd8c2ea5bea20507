/* The parts a training graph is made of, each in a file of its own: the forward's mode
 * (grad_mode.c), the backward (grad.c), the optimizer (grad_optim.c). `ampc grad`
 * (grad_train.c: the loss, then these) and the Gradient op's expansion (gradient.c) put
 * them together; the parts call neither. */
#ifndef AMP_GRAD_PARTS_H
#define AMP_GRAD_PARTS_H

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

/* The most graphs one backward spans (the main graph and a training algorithm today). */
#define AMP_GRAD_MAX_GRAPHS 8

/* What amp_grad_backward_wrt differentiates: y with respect to xs, over the nodes of
 * graphs[0..n_graphs) run one after the other (outer first: ONNX's training step is the
 * main graph, then a training algorithm whose nodes read main-graph values by name). */
typedef struct AmpGradWrt {
    AmpGraph *const *graphs;
    size_t n_graphs;
    const AmpNode *skip;  /* a node of those graphs that is not part of the forward (the
                             Gradient node being expanded), or NULL */
    AmpNode *at;          /* the backward's nodes go into graphs[n_graphs - 1] before this
                             node (NULL: appended) */
    AmpValue *y;          /* a float value of those graphs */
    AmpValue *const *xs;  /* n_xs distinct float values of those graphs */
    AmpValue *const *into; /* NULL, or n_xs values (NULL entries allowed) with no producer
                             that are to hold each x's gradient too */
    size_t n_xs;
    const char *hint;     /* what the error for an op without a rule says after naming
                             the node; NULL: a default */
} AmpGradWrt;

/* The backward of w->y: the seed "<y>_grad" (a Constant 1 for y of one element, as
 * amp_grad_backward makes it; ones shaped like y otherwise), then for every x the value
 * "<x>_grad" (zeros shaped like x when y does not depend on x), which into[i] also holds:
 * into[i] itself when it has that name, else an Identity of it. Values y does not depend
 * on, or that do not depend on an x, get no backward. An op without a gradient rule on a
 * path from an x to y is AMP_ERR_UNSUPPORTED naming it and its node; a name "<x>_grad"
 * or "<y>_grad" the model uses already is an error. *n_nodes (may be NULL): nodes made.
 * On failure the model is to be dropped. */
AmpCode amp_grad_backward_wrt(AmpModel *m, const AmpGradWrt *w, size_t *n_nodes, AmpStatus *st);

/* Appends o's optimizer (not NONE) over ps[0..n) as a new training_info (grad_optim.c),
 * which also binds each --train-mode running statistic state[i].init to its forward's new
 * value state[i].next. */
AmpCode amp_grad_add_optimizer(AmpModel *m, const AmpGradOptions *o, const AmpGradParam *ps, size_t n,
                               const AmpGradState *state, size_t n_state, AmpGradSummary *sum, AmpStatus *st);

#endif
