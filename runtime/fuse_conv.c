/* The plan-level fusion's convolution epilogues (fuse.h; docs/internals.md, "Fusion"), for
 * a backend that asks for them (AmpBackend.fuse_conv: the CPU): Conv -> Relu, Conv ->
 * Add(., Z) and Conv -> Add(., Z) -> Relu, where each value passed along is read by the
 * next node alone, become one ai.ampc ConvEpilogue node (X, W, B, Z; relu), run at the
 * last member's place. On the CPU, oneDNN applies them as post-ops on the float32
 * accumulator before its one store (and the one reorder back to ONNX's layout), instead
 * of a pass over the output for each. */
#include <string.h>

#include "runtime/fuse_state.h"

static bool conv_dtype(int dt) {
    return dt == AMP_DT_FLOAT || dt == AMP_DT_BFLOAT16;
}

/* Node at plan index r, on the device and in no fused node yet, is `op` with `n_in`
 * inputs, no attributes and one output of dtype dt. */
static bool plain_node(const Fuse *f, int r, AmpOpId op, int n_in, int dt) {
    const AmpNode *n = r >= 0 ? f->nodes[r] : NULL;
    return n && on_device(f, r) && n->op == op && n->n_inputs == n_in && !n->n_attrs && n->n_outputs == 1 &&
           n->outputs[0] && n->outputs[0]->type.kind == AMP_TYPE_TENSOR && n->outputs[0]->type.dtype == dt;
}

/* Conv's attributes and relu (1 where a Relu is absorbed). */
static bool epilogue_attrs(Fuse *f, AmpNode *c, const AmpNode *conv, bool relu) {
    c->attrs = amp_fuse_arena(f, (conv->n_attrs + 1) * sizeof *c->attrs);
    if (!c->attrs) return false;
    memcpy(c->attrs, conv->attrs, conv->n_attrs * sizeof *c->attrs);
    c->n_attrs = conv->n_attrs + (relu ? 1 : 0);
    c->attrs[conv->n_attrs] = (AmpAttr){.name = "relu", .type = AMP_ATTR_INT, .has = AMP_ATTR_HAS_TYPE, .i = 1};
    return true;
}

/* Conv at plan index i with what alone reads its output, if it takes an epilogue. */
static void fuse_one(Fuse *f, int i) {
    const AmpNode *conv = f->nodes[i];
    if (conv->op != AMP_OP_Conv || !on_device(f, i) || conv->n_inputs < 2 || conv->n_inputs > 3 ||
        conv->n_outputs != 1 || !conv->inputs[0] || !conv->inputs[1] || !conv->outputs[0])
        return;
    const AmpValue *y = conv->outputs[0];
    int dt = y->type.dtype, r = sole_reader(f, y);
    if (y->type.kind != AMP_TYPE_TENSOR || !conv_dtype(dt)) return;
    int absorbed[3] = {i, r, -1}, n_abs = 2;
    const AmpValue *z = NULL, *out = NULL;
    if (plain_node(f, r, AMP_OP_Relu, 1, dt)) {
        out = f->nodes[r]->outputs[0];
    } else if (plain_node(f, r, AMP_OP_Add, 2, dt)) {
        /* Z of Y's dtype and shape, every dim known (no broadcast: oneDNN's sum adds it
         * element by element) */
        const AmpNode *add = f->nodes[r];
        z = add->inputs[add->inputs[0] == y ? 1 : 0];
        if (!z || z == y || !amp_fuse_known_type(&y->type) || !amp_fuse_known_type(&z->type) ||
            z->type.dtype != dt || !amp_fuse_same_shape(&y->type, &z->type))
            return;
        out = add->outputs[0];
        int r2 = sole_reader(f, out);
        if (plain_node(f, r2, AMP_OP_Relu, 1, dt)) out = f->nodes[r2]->outputs[0], absorbed[n_abs++] = r2;
    } else {
        return;
    }
    int place = absorbed[n_abs - 1];
    int n_in = z ? 4 : conv->n_inputs;
    AmpNode *c = amp_fuse_new_node(f, AMP_OP_Ampc_ConvEpilogue, "ConvEpilogue", "ai.ampc", conv, n_in, 1);
    if (!c || !epilogue_attrs(f, c, conv, f->nodes[place]->op == AMP_OP_Relu)) return;
    memcpy(c->inputs, conv->inputs, (size_t)conv->n_inputs * sizeof *c->inputs);
    if (z) c->inputs[3] = (AmpValue *)z;
    c->outputs[0] = (AmpValue *)out;
    if (!amp_fuse_device_takes(f, c)) return;
    for (int k = 0; k < n_abs; k++) f->gone[absorbed[k]] = k != n_abs - 1;
    f->repl[place] = c;
    f->fused++;
}

void amp_fuse_conv_epilogues(Fuse *f) {
    for (size_t i = 0; i < f->n; i++) fuse_one(f, (int)i);
}
