/* The plan-level fusion's convolution epilogues (fuse.h; docs/internals.md, "Fusion"), for
 * a backend that asks for them (AmpBackend.fuse_cpu: the CPU): Conv -> Relu, Conv ->
 * Add(., Z) and Conv -> Add(., Z) -> Relu, where each value passed along is read by the
 * next node alone, become one ai.ampc ConvEpilogue node (X, W, B, Z; relu), run at the
 * last member's place. On the CPU, oneDNN applies them as post-ops on the float32
 * accumulator before its one store (and the one reorder back to ONNX's layout), instead
 * of a pass over the output for each. And where such a node's output is read by fused
 * convolutions alone (as X or as the summand Z), they pass it channels-last (x_nhwc,
 * y_nhwc, z_nhwc), oneDNN's own layout: no reorder out and back in between. Nothing but
 * those reads it: hooks that read every value run with no_fuse. */
#include <stdlib.h>
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

/* Adds INT attribute `name` = 1 to c (room made by epilogue_attrs). */
static void set_flag(AmpNode *c, const char *name) {
    c->attrs[c->n_attrs++] = (AmpAttr){.name = name, .type = AMP_ATTR_INT, .has = AMP_ATTR_HAS_TYPE, .i = 1};
}

/* Conv's attributes and relu where a Relu is absorbed, with room for x_nhwc, y_nhwc and
 * z_nhwc. */
static bool epilogue_attrs(Fuse *f, AmpNode *c, const AmpNode *conv, bool relu) {
    c->attrs = amp_fuse_arena(f, (conv->n_attrs + 4) * sizeof *c->attrs);
    if (!c->attrs) return false;
    memcpy(c->attrs, conv->attrs, conv->n_attrs * sizeof *c->attrs);
    c->n_attrs = conv->n_attrs;
    if (relu) set_flag(c, "relu");
    return true;
}

/* Conv at plan index i with what alone reads its output, if it takes an epilogue: the
 * fused node, or NULL; the plan indices it absorbs in absorbed[0..*n_abs). */
static AmpNode *fuse_one(Fuse *f, int i, int *absorbed_out, int *n_abs_out) {
    const AmpNode *conv = f->nodes[i];
    if (conv->op != AMP_OP_Conv || !on_device(f, i) || conv->n_inputs < 2 || conv->n_inputs > 3 ||
        conv->n_outputs != 1 || !conv->inputs[0] || !conv->inputs[1] || !conv->outputs[0])
        return NULL;
    const AmpValue *y = conv->outputs[0];
    int dt = y->type.dtype, r = sole_reader(f, y);
    if (y->type.kind != AMP_TYPE_TENSOR || !conv_dtype(dt)) return NULL;
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
            return NULL;
        out = add->outputs[0];
        int r2 = sole_reader(f, out);
        if (plain_node(f, r2, AMP_OP_Relu, 1, dt)) out = f->nodes[r2]->outputs[0], absorbed[n_abs++] = r2;
    } else {
        return NULL;
    }
    int place = absorbed[n_abs - 1];
    int n_in = z ? 4 : conv->n_inputs;
    AmpNode *c = amp_fuse_new_node(f, AMP_OP_Ampc_ConvEpilogue, "ConvEpilogue", "ai.ampc", conv, n_in, 1);
    if (!c || !epilogue_attrs(f, c, conv, f->nodes[place]->op == AMP_OP_Relu)) return NULL;
    memcpy(c->inputs, conv->inputs, (size_t)conv->n_inputs * sizeof *c->inputs);
    if (z) c->inputs[3] = (AmpValue *)z;
    c->outputs[0] = (AmpValue *)out;
    if (!amp_fuse_device_takes(f, c)) return NULL;
    for (int k = 0; k < n_abs; k++) f->gone[absorbed[k]] = k != n_abs - 1;
    f->repl[place] = c;
    f->fused++;
    memcpy(absorbed_out, absorbed, (size_t)n_abs * sizeof *absorbed);
    *n_abs_out = n_abs;
    return c;
}

/* Where fused node c writes a tensor (N, C, spatial...: 1 to 3 spatial dims) that only
 * fused convolutions read, as their X or as their summand Z (a ResNet block's output: the
 * next block's first convolution, its shortcut's, and the residual Add of its last), all
 * of them pass it channels-last, the layout oneDNN computes in: no reorder out of the one
 * and into the others. owner: per plan index, the fused node that absorbed that node. */
static void pass_channels_last(Fuse *f, AmpNode *const *owner, AmpNode *c) {
    const AmpValue *y = c->outputs[0];
    if (!y || y->graph != f->g || f->pinned[y->id] || y->type.kind != AMP_TYPE_TENSOR || y->type.rank < 3 ||
        y->type.rank > 5 || !y->n_uses)
        return;
    for (size_t u = 0; u < y->n_uses; u++) {
        int j = pos_of(f, y->uses[u].node);
        const AmpNode *r = j >= 0 ? owner[j] : NULL;
        if (!r || r == c) return;
        bool as_x = r->inputs[0] == y, as_z = r->n_inputs > 3 && r->inputs[3] == y;
        if (as_x == as_z || r->inputs[1] == y || (r->n_inputs > 2 && r->inputs[2] == y)) return;
    }
    set_flag(c, "y_nhwc");
    for (size_t u = 0; u < y->n_uses; u++) {
        AmpNode *r = owner[pos_of(f, y->uses[u].node)];
        const char *flag = r->inputs[0] == y ? "x_nhwc" : "z_nhwc";
        if (!amp_node_attr(r, flag)) set_flag(r, flag); /* (two uses by one node: once) */
    }
}

/* Conv at plan index i, left apart by fuse_one, whose output only fused convolutions read
 * (as X or Z: the first block of a ResNet stage, where the shortcut's convolution took the
 * residual Add and the main path's last convolution feeds it): a ConvEpilogue of no
 * epilogue, so that it too can pass its tensors channels-last. NULL where not. */
static AmpNode *bare_one(Fuse *f, AmpNode *const *owner, int i) {
    const AmpNode *conv = f->nodes[i];
    if (conv->op != AMP_OP_Conv || !on_device(f, i) || conv->n_inputs < 2 || conv->n_inputs > 3 ||
        conv->n_outputs != 1 || !conv->inputs[0] || !conv->inputs[1] || !conv->outputs[0])
        return NULL;
    const AmpValue *y = conv->outputs[0];
    if (y->graph != f->g || f->pinned[y->id] || y->type.kind != AMP_TYPE_TENSOR || !conv_dtype(y->type.dtype) ||
        !y->n_uses)
        return NULL;
    for (size_t u = 0; u < y->n_uses; u++) {
        int j = pos_of(f, y->uses[u].node);
        if (j < 0 || !owner[j]) return NULL;
    }
    AmpNode *c = amp_fuse_new_node(f, AMP_OP_Ampc_ConvEpilogue, "ConvEpilogue", "ai.ampc", conv, conv->n_inputs, 1);
    if (!c || !epilogue_attrs(f, c, conv, false)) return NULL;
    memcpy(c->inputs, conv->inputs, (size_t)conv->n_inputs * sizeof *c->inputs);
    c->outputs[0] = (AmpValue *)y;
    if (!amp_fuse_device_takes(f, c)) return NULL;
    f->repl[i] = c;
    f->fused++;
    return c;
}

void amp_fuse_conv_epilogues(Fuse *f) {
    AmpNode **owner = calloc(f->n ? f->n : 1, sizeof *owner); /* per plan index: the fused node absorbing it */
    AmpNode **made = calloc(f->n ? f->n : 1, sizeof *made);
    size_t n_made = 0;
    for (size_t i = 0; i < f->n; i++) {
        int absorbed[3], n_abs = 0;
        AmpNode *c = fuse_one(f, (int)i, absorbed, &n_abs);
        if (!c || !owner || !made) continue;
        for (int k = 0; k < n_abs; k++) owner[absorbed[k]] = c;
        made[n_made++] = c;
    }
    /* last to first, so that a chain of them (each read by the next) is taken whole */
    for (size_t i = f->n; owner && made && i-- > 0;) {
        AmpNode *c = bare_one(f, owner, (int)i);
        if (c) owner[i] = c, made[n_made++] = c;
    }
    for (size_t i = 0; i < n_made; i++) pass_channels_last(f, owner, made[i]);
    free(owner), free(made);
}
