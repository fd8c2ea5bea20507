/* The plan-level fusion's SGD update (fuse.h; docs/internals.md, "Fusion"), for a backend
 * that asks for it (AmpBackend.fuse_cpu: the CPU): W_new = Sub(W, Mul(lr, G)), as `ampc
 * grad --optimizer sgd` writes each parameter's update, becomes one ai.ampc SubScaled node
 * (W, lr, G): one pass over W and G instead of a pass writing lr * G and one reading it
 * back (the CPU's fused elementwise chains, interpreted, are many times slower than both). */
#include "runtime/fuse_state.h"

/* Node at plan index i on the device, in no fused node yet, of op `op`: two inputs, no
 * attributes, one float32 output of a known shape. */
static bool f32_binary(const Fuse *f, int i, AmpOpId op) {
    const AmpNode *n = i >= 0 ? f->nodes[i] : NULL;
    return n && on_device(f, i) && n->op == op && n->n_inputs == 2 && n->inputs[0] && n->inputs[1] && !n->n_attrs &&
           n->n_outputs == 1 && n->outputs[0] && amp_fuse_known_type(&n->outputs[0]->type) &&
           n->outputs[0]->type.dtype == AMP_DT_FLOAT;
}

static bool f32_of(const AmpValue *v, const AmpType *shape) {
    return amp_fuse_known_type(&v->type) && v->type.dtype == AMP_DT_FLOAT &&
           (shape ? amp_fuse_same_shape(&v->type, shape) : amp_fuse_one_element(&v->type));
}

void amp_fuse_scaled_sub(Fuse *f, int i) {
    if (!f32_binary(f, i, AMP_OP_Sub)) return;
    const AmpNode *sub = f->nodes[i];
    const AmpValue *a = sub->inputs[0], *t = sub->inputs[1];
    int m = producer_at(f, t);
    if (m < 0 || sole_reader(f, t) != i || !f32_binary(f, m, AMP_OP_Mul)) return;
    const AmpNode *mul = f->nodes[m];
    /* s * B or B * s: one product either way */
    int si = f32_of(mul->inputs[0], NULL) ? 0 : 1;
    const AmpValue *s = mul->inputs[si], *b = mul->inputs[1 - si];
    const AmpType *y = &sub->outputs[0]->type;
    if (!f32_of(s, NULL) || !f32_of(a, y) || !f32_of(b, y) || !amp_fuse_same_shape(&t->type, y)) return;
    AmpNode *c = amp_fuse_new_node(f, AMP_OP_Ampc_SubScaled, "SubScaled", "ai.ampc", sub, 3, 1);
    if (!c) return;
    c->inputs[0] = (AmpValue *)a, c->inputs[1] = (AmpValue *)s, c->inputs[2] = (AmpValue *)b;
    c->outputs[0] = sub->outputs[0];
    if (!amp_fuse_device_takes(f, c)) return;
    f->gone[m] = true;
    f->repl[i] = c;
    f->fused++;
}
