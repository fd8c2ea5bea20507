/* Training-graph facts shared by the passes (training.h): is this a training graph, which
 * value is the loss, which nodes are optimizers. */
#include "passes/training.h"

#include <stdlib.h>
#include <string.h>

#include "passes/amp_impl.h"

static bool ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* A backward node: a gradient op (com.microsoft's ReluGrad, GatherGrad, SoftmaxGrad_13,
 * BiasGeluGrad_dX, ...), a gradient accumulator, or a node that makes a value named like
 * a gradient (`*_grad`). ONNX's Gradient op is not one: it differentiates inside itself,
 * from no loss seed, so there is nothing to scale. */
static bool is_backward(const AmpNode *n) {
    const char *op = n->op_type ? n->op_type : "";
    if (ends_with(op, "Grad") || strstr(op, "Grad_") || strncmp(op, "InPlaceAccumulator", 18) == 0) return true;
    for (int k = 0; k < n->n_outputs; k++)
        if (n->outputs[k] && ends_with(n->outputs[k]->name, "_grad")) return true;
    return false;
}

bool amp_is_training_graph(const AmpModel *m, const char *loss) {
    if (loss || m->n_training) return true;
    for (size_t i = 0; i < m->graph->outputs.n; i++)
        if (ends_with(m->graph->outputs.items[i].value->name, "_grad")) return true;
    /* onnxruntime-training's graphs have neither: their gradients flow into accumulators */
    for (const AmpNode *n = m->graph->first; n; n = n->next)
        if (is_backward(n)) return true;
    return false;
}

static bool scalar_like(const AmpType *t) {
    if (t->rank < 0) return true;
    for (int i = 0; i < t->rank; i++)
        if (t->dims[i].value != 1) return false;
    return true;
}

AmpCode amp_find_loss(AmpModel *m, const char *name, AmpValue **loss, AmpStatus *st) {
    *loss = NULL;
    if (name) {
        AmpValue *v = amp_graph_lookup(m->graph, name);
        if (!v) return amp_fail(st, AMP_ERR_USAGE, "--loss '%s': the main graph has no value of that name", name);
        *loss = v;
        return AMP_OK;
    }
    size_t found = 0;
    for (size_t i = 0; i < m->graph->outputs.n; i++) {
        AmpValue *v = m->graph->outputs.items[i].value;
        if (amp_is_f32(v) && strstr(v->name, "loss") && !amp_is_loss_scale_name(v->name) && scalar_like(&v->type)) {
            if (!found) *loss = v;
            found++;
        }
    }
    if (found == 1) return AMP_OK;
    /* Several: one named exactly "loss" is the one. */
    AmpValue *exact = amp_graph_lookup(m->graph, "loss");
    if (found > 1 && exact && exact->graph == m->graph && (exact->flags & AMP_VALUE_OUTPUT) && amp_is_f32(exact)) {
        *loss = exact;
        return AMP_OK;
    }
    /* By its seed: the one scalar float output X whose gradient X_grad the main graph
     * holds (onnxruntime-training's graphs feed the seed to the loss's gradient op). */
    AmpValue *seeded = NULL;
    size_t n_seeded = 0;
    for (size_t i = 0; i < m->graph->outputs.n; i++) {
        AmpValue *v = m->graph->outputs.items[i].value;
        if (!amp_is_f32(v) || amp_is_loss_scale_name(v->name) || !scalar_like(&v->type)) continue;
        size_t len = strlen(v->name);
        char *g = malloc(len + 6);
        if (!g) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
        memcpy(g, v->name, len);
        memcpy(g + len, "_grad", 6);
        AmpValue *seed = amp_graph_lookup(m->graph, g);
        free(g);
        if (seed && seed->graph == m->graph) seeded = v, n_seeded++;
    }
    if (n_seeded == 1) {
        *loss = seeded;
        return AMP_OK;
    }
    *loss = NULL;
    return amp_fail(st, AMP_ERR_INPUT,
                    "training graph: %s scalar float output has a name containing \"loss\", and %s is the "
                    "value of a seed X_grad in the graph, so the loss cannot be told: name the loss with --loss NAME",
                    found ? "more than one" : "no", n_seeded ? "more than one" : "none");
}

bool amp_is_loss_scale_name(const char *name) {
    return name && (strncmp(name, AMP_LS_SCALE, strlen(AMP_LS_SCALE)) == 0 ||
                    strncmp(name, AMP_LS_TRACKER, strlen(AMP_LS_TRACKER)) == 0);
}

bool amp_is_optimizer(const AmpNode *n) {
    const char *d = n->domain ? n->domain : "";
    if (!d[0]) return false; /* the default domain, where nearly every node is, has none */
    return strcmp(d, AMP_TRAINING_DOMAIN) == 0 ||
           (strcmp(d, "com.microsoft") == 0 && n->op_type && ends_with(n->op_type, "Optimizer"));
}
