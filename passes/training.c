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

bool amp_is_backward_node(const AmpNode *n) {
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
        if (amp_is_backward_node(n)) return true;
    return false;
}

static bool scalar_like(const AmpType *t) {
    if (t->rank < 0) return true;
    for (int i = 0; i < t->rank; i++)
        if (t->dims[i].value != 1) return false;
    return true;
}

size_t amp_n_step_graphs(const AmpModel *m) {
    return 1 + m->n_training;
}

AmpGraph *amp_step_graph(const AmpModel *m, size_t k) {
    return k == 0 ? m->graph : m->training[k - 1].algorithm;
}

bool amp_is_step_graph(const AmpModel *m, const AmpGraph *g) {
    for (size_t k = 0; g && k < amp_n_step_graphs(m); k++)
        if (amp_step_graph(m, k) == g) return true;
    return false;
}

AmpValue *amp_step_lookup(const AmpModel *m, const char *name) {
    for (size_t k = 0; k < amp_n_step_graphs(m); k++) {
        AmpGraph *g = amp_step_graph(m, k);
        AmpValue *v = g ? amp_graph_lookup(g, name) : NULL;
        if (v && amp_is_step_graph(m, v->graph)) return v;
    }
    return NULL;
}

AmpCode amp_find_seed(const AmpModel *m, const AmpValue *loss, AmpValue **seed, AmpStatus *st) {
    size_t len = strlen(loss->name);
    char small[256], *g = len + 6 <= sizeof small ? small : malloc(len + 6);
    *seed = NULL;
    if (!g) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    memcpy(g, loss->name, len);
    memcpy(g + len, "_grad", 6);
    *seed = amp_step_lookup(m, g);
    if (g != small) free(g);
    return AMP_OK;
}

/* A loss is computed: a graph input or initializer passed through as an output is none
 * (and its X_grad is a parameter's gradient, not a seed). */
static bool loss_like(const AmpValue *v) {
    return amp_is_f32(v) && v->producer && strstr(v->name, "loss") && !amp_is_loss_scale_name(v->name) &&
           scalar_like(&v->type);
}

/* The loss among graph g's outputs, by the rules of amp_find_loss, in *loss; NULL when g's
 * outputs do not tell it. *n_named and *n_seeded count the candidates of each rule (for
 * the message). */
static AmpCode loss_of(const AmpModel *m, const AmpGraph *g, size_t *n_named, size_t *n_seeded, AmpValue **loss,
                       AmpStatus *st) {
    AmpValue *first = NULL, *seeded = NULL;
    size_t found = 0, n_seed = 0;
    for (size_t i = 0; i < g->outputs.n; i++) {
        AmpValue *v = g->outputs.items[i].value;
        if (!loss_like(v)) continue;
        if (!found) first = v;
        found++;
    }
    *n_named += found;
    *loss = found == 1 ? first : NULL;
    /* Several: one named exactly "loss" is the one. */
    for (size_t i = 0; found > 1 && !*loss && i < g->outputs.n; i++) {
        AmpValue *v = g->outputs.items[i].value;
        if (strcmp(v->name, "loss") == 0 && amp_is_f32(v)) *loss = v;
    }
    if (*loss) return AMP_OK;
    /* By its seed: the one scalar float output X whose gradient X_grad the training step
     * holds (onnxruntime-training's graphs feed the seed to the loss's gradient op). */
    for (size_t i = 0; i < g->outputs.n; i++) {
        AmpValue *v = g->outputs.items[i].value;
        if (!amp_is_f32(v) || !v->producer || amp_is_loss_scale_name(v->name) || !scalar_like(&v->type)) continue;
        AmpValue *seed;
        AmpCode rc = amp_find_seed(m, v, &seed, st);
        if (rc) return rc;
        if (seed) seeded = v, n_seed++;
    }
    *n_seeded += n_seed;
    *loss = n_seed == 1 ? seeded : NULL;
    return AMP_OK;
}

AmpCode amp_find_loss(AmpModel *m, const char *name, AmpValue **loss, AmpStatus *st) {
    *loss = NULL;
    if (name) {
        AmpValue *v = amp_step_lookup(m, name);
        if (!v)
            return amp_fail(st, AMP_ERR_USAGE, "--loss '%s': neither the main graph nor a training algorithm "
                            "(training_info) has a value of that name", name);
        *loss = v;
        return AMP_OK;
    }
    /* The main graph's outputs first (ampc grad's and onnxruntime-training's graphs hold the
     * loss there), then each algorithm's (ONNX's own layout). */
    size_t n_named = 0, n_seeded = 0;
    for (size_t k = 0; k < amp_n_step_graphs(m); k++) {
        AmpGraph *g = amp_step_graph(m, k);
        size_t named = 0, seeded = 0;
        AmpValue *v = NULL;
        AmpCode rc = g ? loss_of(m, g, &named, &seeded, &v, st) : AMP_OK;
        if (rc) return rc;
        if (v) {
            *loss = v;
            return AMP_OK;
        }
        n_named += named, n_seeded += seeded;
    }
    return amp_fail(st, AMP_ERR_INPUT,
                    "training graph: %s scalar float output of the main graph or of a training algorithm has a "
                    "name containing \"loss\", and %s is the value of a seed X_grad, so the loss cannot be told: "
                    "name the loss (--loss NAME, a value of either graph)",
                    n_named ? "more than one" : "no", n_seeded ? "more than one" : "none");
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
