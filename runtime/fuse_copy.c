/* The plan-level fusion's copy elision (fuse.h; docs/internals.md, "Fusion"), for a backend
 * that asks for the CPU's kinds (AmpBackend.fuse_cpu): an Identity that alone reads a value
 * is a copy of it. `ampc grad` names every gradient output so (`W_grad = Identity(dW)`), and
 * on the MLP step those copies were 3% of the bf16 step (4 MiB each for a 1024 x 1024
 * weight). The producer writes the Identity's output instead, the same bytes: a copy of
 * the producer's node whose output is the Identity's, op_type "<op>+Identity" so the
 * summaries and profiles say what ran. Run after the other kinds, so a node they absorb
 * (a weight gradient's Identity into ConvGrad, a chain's) is theirs. */
#include <stdio.h>
#include <string.h>

#include "runtime/fuse_state.h"

/* Node at plan index i: an Identity on the device, in no fused node, whose one input X is
 * read by it alone and made by a node on the device in no fused node either; that
 * producer's plan index, or -1. */
static int elidable(const Fuse *f, int i) {
    const AmpNode *id = f->nodes[i];
    if (id->op != AMP_OP_Identity || !on_device(f, i) || id->n_inputs != 1 || id->n_outputs != 1) return -1;
    const AmpValue *x = id->inputs[0], *y = id->outputs[0];
    if (!x || !y || y->graph != f->g || x->type.kind != AMP_TYPE_TENSOR || y->type.kind != AMP_TYPE_TENSOR ||
        x->type.dtype != y->type.dtype || sole_reader(f, x) != i)
        return -1;
    int p = producer_at(f, x);
    return p >= 0 && on_device(f, p) && f->nodes[p]->n_outputs <= f->max_out ? p : -1;
}

void amp_fuse_copies(Fuse *f) {
    for (size_t i = 0; i < f->n; i++) {
        int p = elidable(f, (int)i);
        if (p < 0) continue;
        const AmpNode *src = f->nodes[p], *id = f->nodes[i];
        size_t len = strlen(src->op_type ? src->op_type : "?") + sizeof "+Identity";
        char *op_type = amp_fuse_arena(f, len);
        if (!op_type) return;
        snprintf(op_type, len, "%s+Identity", src->op_type ? src->op_type : "?");
        AmpNode *c = amp_fuse_new_node(f, src->op, op_type, src->domain, src, src->n_inputs, src->n_outputs);
        if (!c) return;
        c->attrs = src->attrs, c->n_attrs = src->n_attrs; /* read-only, in the model's arena */
        memcpy(c->inputs, src->inputs, (size_t)src->n_inputs * sizeof *c->inputs);
        for (int o = 0; o < src->n_outputs; o++)
            c->outputs[o] = src->outputs[o] == id->inputs[0] ? id->outputs[0] : src->outputs[o];
        if (!amp_fuse_device_takes(f, c)) continue;
        f->repl[p] = c;
        f->gone[i] = true;
        f->fused++;
    }
}
