/* `ampc grad --train-mode`: the forward of an eval-mode export put in training mode
 * before the backward is built (without it, each Dropout's mode is pinned false). Each BatchNormalization gets training_mode 1 (batch
 * statistics) and its running_mean / running_var outputs, which the optimizer binds back
 * to the running-stat initializers; each Dropout gets training_mode true and its mask
 * output, which its gradient rule reads. Both stay standard ONNX, so onnxruntime and
 * ampc's executor run the same forward the gradients are of. */
#include <stdlib.h>
#include <string.h>

#include "passes/grad_impl.h"
#include "passes/grad_parts.h"

/* A copy of n with the given inputs and n_out outputs placed before it, its attributes
 * but `skip` copied (NULL when the builder failed). */
static AmpNode *remake(AmpBuilder *b, AmpNode *n, AmpValue *const *in, int n_in, int n_out, const char *skip) {
    b->before = n;
    AmpNode *r = amp_build_start(b, n->op_type, n->name ? n->name : "train", in, n_in, n_out);
    for (size_t i = 0; r && i < n->n_attrs; i++) {
        const AmpAttr *a = &n->attrs[i];
        if (skip && strcmp(a->name, skip) == 0) continue;
        AmpAttr *d = amp_node_add_attr(r, a->name, a->type);
        if (!d) {
            amp_builder_fail(b, AMP_ERR_INTERNAL, "grad: out of memory");
            return NULL;
        }
        *d = *a;
    }
    return r;
}

/* r takes n's place: the readers of n's outputs read r's. */
static AmpCode replace(AmpBuilder *b, AmpNode *n, AmpNode *r, AmpStatus *st) {
    if (!amp_build_end(b, r)) return amp_builder_status(b, st);
    for (int k = 0; k < n->n_outputs && k < r->n_outputs; k++)
        if (n->outputs[k] && amp_value_replace_uses(n->outputs[k], r->outputs[k], true))
            return amp_fail(st, AMP_ERR_INTERNAL, "grad: out of memory");
    amp_node_delete(n);
    return AMP_OK;
}

/* PyTorch's exporter keeps one initializer for buffers of equal value (every BatchNorm's
 * running_mean starts at 0) and gives each buffer an Identity of it. Training updates each
 * BatchNorm's statistics apart: v, such an Identity's output read by nothing else, becomes
 * an initializer of its own holding a copy of the shared data, and the Identity goes. */
static AmpCode own_statistics(AmpModel *m, AmpValue *v, AmpStatus *st) {
    AmpNode *id = v ? v->producer : NULL;
    AmpValue *src = id && id->op == AMP_OP_Identity && id->n_inputs == 1 ? id->inputs[0] : NULL;
    if (!src || !(src->flags & AMP_VALUE_INITIALIZER) || !src->initializer || v->n_uses != 1 ||
        (v->flags & AMP_VALUE_OUTPUT) || v->graph != m->graph)
        return AMP_OK; /* not that pattern: the caller's check decides */
    const AmpTensor *from = src->initializer;
    AmpBytes bytes;
    if (amp_tensor_bytes(m, (AmpTensor *)from, &bytes, st)) return st->code;
    AmpArena *ar = &m->arena;
    AmpTensor *t = amp_arena_calloc(ar, 1, sizeof *t);
    int64_t *dims = amp_arena_calloc(ar, from->ndims + 1, sizeof *dims);
    void *raw = amp_arena_memdup(ar, bytes.data, bytes.len ? bytes.len : 1);
    if (!t || !dims || !raw) return amp_fail(st, AMP_ERR_INTERNAL, "grad: out of memory");
    memcpy(dims, from->dims, from->ndims * sizeof *dims);
    *t = (AmpTensor){.dtype = from->dtype, .has = AMP_TENSOR_HAS_DTYPE | AMP_TENSOR_HAS_RAW, .ndims = from->ndims,
                     .dims = dims, .nelem = from->nelem, .raw = {raw, bytes.len}};
    amp_node_delete(id);
    if (amp_graph_add_initializer(m->graph, v, t)) return amp_fail(st, AMP_ERR_INTERNAL, "grad: out of memory");
    return AMP_OK;
}

static AmpCode batch_norm(AmpBuilder *b, AmpNode *n, AmpGradState *state, size_t *n_state, AmpStatus *st) {
    if (n->n_inputs < 5 || amp_node_attr_int(n, "training_mode", 0)) return AMP_OK;
    for (int i = 3; i < 5; i++) {
        AmpCode rc = own_statistics(b->g->model, n->inputs[i], st);
        if (rc) return rc;
    }
    for (int i = 3; i < 5; i++)
        if (!n->inputs[i] || !(n->inputs[i]->flags & AMP_VALUE_INITIALIZER))
            return amp_fail(st, AMP_ERR_UNSUPPORTED, "grad: --train-mode: BatchNormalization node '%s': its running "
                            "statistics are not initializers, so they cannot be updated", n->name ? n->name : "");
    AmpNode *r = remake(b, n, n->inputs, 5, 3, "training_mode");
    amp_build_attr_int(b, r, "training_mode", 1);
    AmpCode rc = replace(b, n, r, st);
    if (rc) return rc;
    for (int i = 0; i < 2; i++) state[(*n_state)++] = (AmpGradState){r->inputs[3 + i], r->outputs[1 + i]};
    return AMP_OK;
}

/* Dropout with its training_mode input given: true (and the mask output, which the rule
 * reads) in training mode; false otherwise, where the input was left out, since an
 * executor's training step may drop where the model does not say (ampc's does) and the
 * rule then is the identity. */
static AmpCode dropout(AmpBuilder *b, AmpNode *n, bool train, AmpStatus *st) {
    if (!train && n->n_inputs > 2 && n->inputs[2]) return AMP_OK;
    AmpValue *in[3] = {n->inputs[0], n->n_inputs > 1 ? n->inputs[1] : NULL, NULL};
    b->before = n;
    if (!in[1]) in[1] = amp_build_scalar(b, "dropout_ratio", in[0]->type.dtype, 0.5);
    in[2] = amp_build_scalar(b, "dropout_train", AMP_DT_BOOL, train);
    return replace(b, n, remake(b, n, in, 3, train ? 2 : n->n_outputs, NULL), st);
}

AmpCode amp_grad_train_mode(AmpModel *m, bool train, AmpGradState **state, size_t *n_state, AmpStatus *st) {
    AmpGraph *g = m->graph;
    size_t n_bn = 0;
    for (AmpNode *n = g->first; n; n = n->next) n_bn += n->op == AMP_OP_BatchNormalization;
    *n_state = 0;
    *state = calloc(2 * n_bn + 1, sizeof **state);
    if (!*state) return amp_fail(st, AMP_ERR_INTERNAL, "grad: out of memory");
    AmpBuilder b;
    amp_builder_init(&b, g, "train/");
    AmpCode rc = AMP_OK;
    for (AmpNode *n = g->first, *next; n && !rc; n = next) {
        next = n->next;
        if (n->op == AMP_OP_BatchNormalization && train)
            rc = batch_norm(&b, n, *state, n_state, st);
        else if (n->op == AMP_OP_Dropout && n->n_inputs >= 1 && n->inputs[0])
            rc = dropout(&b, n, train, st);
    }
    if (rc) {
        free(*state);
        *state = NULL;
        *n_state = 0;
    }
    return rc;
}
