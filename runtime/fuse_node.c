/* Making the plan-level fusion's nodes (fuse.h): nodes of an internal op in the model's
 * arena, linked into no graph, and the backend's answer whether it runs them. What the
 * fusion's parts share; it calls none of them. */
#include <string.h>

#include "runtime/fuse_state.h"

void *amp_fuse_arena(Fuse *f, size_t bytes) {
    void *p = amp_arena_alloc(&f->m->arena, bytes ? bytes : 1);
    if (p) memset(p, 0, bytes ? bytes : 1);
    return p;
}

AmpNode *amp_fuse_new_node(Fuse *f, AmpOpId op, const char *op_type, const char *domain, const AmpNode *like,
                           int n_in, int n_out) {
    AmpNode *n = amp_fuse_arena(f, sizeof *n);
    if (!n) return NULL;
    n->graph = f->g;
    n->op = op;
    n->op_type = op_type;
    n->domain = domain;
    n->name = like->name; /* messages name the node the fused one stands for */
    n->n_inputs = n_in;
    n->n_outputs = n_out;
    n->inputs = amp_fuse_arena(f, (size_t)n_in * sizeof *n->inputs);
    n->outputs = amp_fuse_arena(f, (size_t)n_out * sizeof *n->outputs);
    n->id = UINT32_MAX; /* in no graph */
    return n->inputs && n->outputs ? n : NULL;
}

bool amp_fuse_add_ints(Fuse *f, AmpAttr *a, const char *name, const int64_t *v, size_t count) {
    a->name = name;
    a->type = AMP_ATTR_INTS;
    a->has = AMP_ATTR_HAS_TYPE;
    a->n_ints = count;
    a->ints = amp_fuse_arena(f, count * sizeof *v);
    if (!a->ints) return false;
    memcpy(a->ints, v, count * sizeof *v);
    return true;
}

/* The one predicate the executor chooses a node's backend by (amp_backend_takes): a fused
 * node runs on the device only where a model node of its kind would. */
bool amp_fuse_device_takes(const Fuse *f, const AmpNode *n) {
    return amp_backend_takes(f->be, f->m, n);
}

bool amp_fuse_const_buf(Fuse *f, const AmpValue *v, AmpBuf *b) {
    AmpTensor *t = NULL;
    if (v->initializer && !(v->flags & AMP_VALUE_INPUT)) t = v->initializer;
    else if (v->producer && v->producer->op == AMP_OP_Constant) {
        const AmpAttr *a = amp_node_attr(v->producer, "value");
        t = a && a->type == AMP_ATTR_TENSOR ? a->t : NULL;
    }
    AmpStatus st = {0};
    return t && amp_buf_from_tensor(f->m, t, b, &st) == AMP_OK;
}
