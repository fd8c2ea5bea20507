/* The plan-level fusion as a planning step (docs/internals.md, "Fusion"): given an
 * executor's plan (its nodes in order, each with the backend that runs it), it decides
 * which groups of nodes run as one node of an internal op, asking the backend whether it
 * runs each fused node, and answers with a description the executor applies before it
 * prepares its kernels. It never calls the executor: the executor calls it. */
#ifndef AMP_FUSE_H
#define AMP_FUSE_H

#include <stdbool.h>
#include <stddef.h>

#include "backend/backend.h"
#include "ir/ir.h"

/* What the plan step reads (borrowed, unchanged by it). */
typedef struct AmpFuseRequest {
    AmpModel *m;                /* the fused nodes are made in its arena (the model is not changed) */
    AmpGraph *g;                /* the graph the plan runs */
    AmpNode *const *nodes;      /* the plan: n nodes of g in the order they run */
    AmpBackend *const *node_be; /* per plan index: the backend that runs it (NULL: the executor, If / Loop / Scan) */
    size_t n;
    AmpBackend *be;             /* the device: only its own nodes fuse, if AmpBackend.fuse asks for it */
    int max_in, max_out;        /* the most inputs and outputs one node of the plan may have */
} AmpFuseRequest;

/* The answer, per plan index i of the request: node i is absorbed (gone[i]: it runs no
 * more), or runs as it is, or a fused node runs in its place (repl[i]), reading the update
 * gate gate[i] when one is folded into it. Every group of nodes fused is one repl entry
 * at one of its members' places, the others gone. */
typedef struct AmpFusePlan {
    size_t n;               /* the request's */
    AmpNode **repl;         /* per plan index: the fused node run there, or NULL */
    bool *gone;             /* per plan index: absorbed into a fused node */
    const AmpValue **gate;  /* per plan index: the gate folded into the node run there, or NULL */
    size_t fused;           /* fused nodes made: 0, the plan runs as it is */
} AmpFusePlan;

/* Plans the fusion of rq's plan into *out (empty when rq->be does not ask for fusion);
 * free it with amp_fuse_plan_free, on failure too. */
AmpCode amp_fuse_plan(const AmpFuseRequest *rq, AmpFusePlan *out, AmpStatus *st);
void amp_fuse_plan_free(AmpFusePlan *p);

#endif
