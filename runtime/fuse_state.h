/* Private to the plan-level fusion (fuse.c, fuse_chain.c, fuse_node.c): the state of one
 * planning and what its parts share. */
#ifndef AMP_FUSE_STATE_H
#define AMP_FUSE_STATE_H

#include "ir/tensor.h"
#include "runtime/fuse.h"

typedef struct Fuse {
    AmpModel *m;
    AmpGraph *g;
    AmpNode *const *nodes; /* the plan */
    AmpBackend *const *node_be;
    AmpBackend *be;
    size_t n;          /* plan nodes */
    int max_in, max_out;
    int *pos;          /* per model node id: its index in the plan, -1 when not in it */
    size_t n_pos;
    bool *pinned;      /* per value id of g: read outside the plan's own nodes (a later
                          graph, a body, a graph output): must stay a real value */
    AmpNode **repl;    /* per plan index: the fused node put here, or NULL */
    bool *gone;        /* per plan index: absorbed into a fused node */
    const AmpValue **gate; /* per plan index: the gate folded into it */
    size_t fused;      /* fused nodes made */
    bool cpu;          /* the CPU's kinds alone (AmpBackend.fuse_cpu): chains of float32
                          arithmetic only, one tensor set a node */
} Fuse;

/* ---- what reads what ------------------------------------------------------------------ */

static inline int pos_of(const Fuse *f, const AmpNode *n) {
    return n->id < f->n_pos ? f->pos[n->id] : -1;
}

/* The plan index of v's producer in this plan, or -1 (an input, an initializer, an outer
 * value). */
static inline int producer_at(const Fuse *f, const AmpValue *v) {
    return v && v->graph == f->g && v->producer ? pos_of(f, v->producer) : -1;
}

/* v's only reader in the plan (none outside it), or -1. */
static inline int sole_reader(const Fuse *f, const AmpValue *v) {
    if (!v || v->graph != f->g || f->pinned[v->id] || v->n_uses != 1) return -1;
    return pos_of(f, v->uses[0].node);
}

/* Node i runs on the device and is in no fused node yet. */
static inline bool on_device(const Fuse *f, int i) {
    return i >= 0 && f->node_be[i] == f->be && !f->gone[i] && !f->repl[i] && !f->gate[i];
}

/* ---- making fused nodes (fuse_node.c) -------------------------------------------------- */

/* bytes zeroed in the model's arena; NULL when out of memory. */
void *amp_fuse_arena(Fuse *f, size_t bytes);
/* A node of g, in no graph, of n_in inputs and n_out outputs (all NULL), named as `like`. */
AmpNode *amp_fuse_new_node(Fuse *f, AmpOpId op, const char *op_type, const char *domain, const AmpNode *like,
                           int n_in, int n_out);
/* Fills a as an ints attribute holding v[0..count). */
bool amp_fuse_add_ints(Fuse *f, AmpAttr *a, const char *name, const int64_t *v, size_t count);
/* Whether the device runs n, asked as the executor asks for model nodes. */
bool amp_fuse_device_takes(const Fuse *f, const AmpNode *n);
/* The bytes of v where the model fixes them (an initializer no feed replaces, or a
 * Constant node's value) into *b; false otherwise. */
bool amp_fuse_const_buf(Fuse *f, const AmpValue *v, AmpBuf *b);

/* ---- types and elementwise chains (fuse_chain.c) ---------------------------------------- */

/* A tensor type of known dtype and rank whose every dim is a number or a name. */
bool amp_fuse_known_type(const AmpType *t);
bool amp_fuse_same_shape(const AmpType *a, const AmpType *b);
/* Whether t holds one element whatever the run (every dim a number). */
bool amp_fuse_one_element(const AmpType *t);
/* Every chain of two nodes or more becomes (with the chains of the same program) a
 * FusedElementwise node. */
AmpCode amp_fuse_chains(Fuse *f);

/* ---- convolution epilogues (fuse_conv.c) ------------------------------------------------ */

/* Every Conv whose output only a Relu, or only an Add of a tensor of its shape (then
 * perhaps only a Relu), reads becomes with them one ai.ampc ConvEpilogue node. */
void amp_fuse_conv_epilogues(Fuse *f);

/* ---- the SGD update (fuse_update.c) ------------------------------------------------------ */

/* Sub(A, Mul(s, B)) at plan index i (float32, s one element, A and B of one shape, the
 * product read by the Sub alone) becomes one ai.ampc SubScaled node (A, s, B). */
void amp_fuse_scaled_sub(Fuse *f, int i);

/* ---- convolution weight gradients (fuse_wgrad.c) ----------------------------------------- */

/* Every `ampc grad` weight gradient Transpose(Conv(Transpose(X), Transpose(dY))[, Slice])
 * becomes a com.microsoft ConvGrad (dY, X) -> (dW). */
void amp_fuse_conv_grads(Fuse *f);

/* ---- copies (fuse_copy.c) ------------------------------------------------------------------ */
/* Every Identity that alone reads a value made by a node on the device: that node, copied
 * with the Identity's output in place of the value, writes it. */
void amp_fuse_copies(Fuse *f);
#endif
