/* The verifier's checks of training_info beyond its graphs (verify.c walks those): the
 * algorithm's output names, update and initialization bindings, and binding keys across
 * every training_info of the model. */
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "ir/verify_impl.h"

/* Sorted names of g's outputs, for binding look-ups (n log n, not bindings x outputs). */
static const char **sorted_outputs(const AmpGraph *g) {
    const char **s = malloc((g->outputs.n + 1) * sizeof *s);
    if (!s) return NULL;
    for (size_t i = 0; i < g->outputs.n; i++) s[i] = g->outputs.items[i].value->name;
    qsort(s, g->outputs.n, sizeof *s, amp_verify_cmp_str);
    return s;
}

/* A binding replaces the initializer's value with the output's, so the output as the
 * model declares it has the initializer's data type and (where both are known) shape:
 * the session refuses any other before the first step, which verify passed. */
static AmpCode check_binding_type(Ctx *c, size_t i, const char *what, const char *key, const char *name,
                                  const AmpValue *var, const AmpValue *out) {
    const AmpTensor *t = var ? var->initializer : NULL;
    if (!t || !out || out->type.kind != AMP_TYPE_TENSOR) return AMP_OK;
    if (out->type.dtype != AMP_DT_UNDEFINED && out->type.dtype != t->dtype)
        return amp_fail(c->st, AMP_ERR_INPUT, "training_info[%zu]: %s '%s' -> '%s': '%s' is %s, but the initializer "
                        "'%s' it updates is %s", i, what, key, name, name, amp_dtype_name(out->type.dtype), key,
                        amp_dtype_name(t->dtype));
    if (amp_verify_shape_holds(&out->type, t)) return AMP_OK;
    char declared[128], held[128];
    amp_verify_dims_text(out->type.dims, out->type.rank, NULL, declared, sizeof declared);
    amp_verify_dims_text(NULL, (int)t->ndims, t->dims, held, sizeof held);
    return amp_fail(c->st, AMP_ERR_INPUT, "training_info[%zu]: %s '%s' -> '%s': '%s' is declared %s, but the "
                    "initializer '%s' it updates is %s", i, what, key, name, name, declared, key, held);
}

/* The bindings of training_info[i] (`what`: "update_binding" or "initialization_binding";
 * tg: the graph whose outputs the values name). A key names an initializer of the main
 * graph or of this training_info's algorithm graph (ONNX TrainingInfoProto: both lists
 * for either binding, since the algorithm's initializers are mutable state too: optimizer
 * buffers, the iteration count); keys are unique within the list. */
static AmpCode check_bindings(Ctx *c, size_t i, const AmpTrainingInfo *ti, const char *what, const AmpStrPair *b,
                              size_t nb, const AmpGraph *tg, const char *tg_name) {
    if (!nb) return AMP_OK;
    if (!tg)
        return amp_fail(c->st, AMP_ERR_INPUT, "training_info[%zu]: %s given but no %s graph", i,
                        what, tg_name);
    const char **outs = sorted_outputs(tg);
    const char **keys = malloc(nb * sizeof *keys);
    AmpCode rc = AMP_OK;
    if (!outs || !keys) {
        rc = amp_fail(c->st, AMP_ERR_INTERNAL, "verifier: out of memory");
        goto done;
    }
    for (size_t k = 0; k < nb && !rc; k++) {
        const char *key = b[k].key ? b[k].key : "", *v = b[k].value ? b[k].value : "";
        keys[k] = key;
        if (!amp_training_key(c->m, ti, key)) {
            if (ti->algorithm)
                rc = amp_fail(c->st, AMP_ERR_INPUT,
                              "training_info[%zu]: %s '%s' -> '%s': '%s' is not an initializer of the main graph, "
                              "nor of training_info[%zu].algorithm", i, what, key, v, key, i);
            else
                rc = amp_fail(c->st, AMP_ERR_INPUT,
                              "training_info[%zu]: %s '%s' -> '%s': '%s' is not an initializer of the main graph "
                              "(and training_info[%zu] has no algorithm graph)", i, what, key, v, key, i);
        } else if (!bsearch(&v, outs, tg->outputs.n, sizeof *outs, amp_verify_cmp_str))
            rc = amp_fail(c->st, AMP_ERR_INPUT,
                          "training_info[%zu]: %s '%s' -> '%s': '%s' is not an output of the %s "
                          "graph", i, what, key, v, v, tg_name);
        else
            rc = check_binding_type(c, i, what, key, v, amp_training_key(c->m, ti, key), amp_graph_lookup(tg, v));
    }
    bool oom = false;
    const char *dup = rc ? NULL : amp_verify_find_duplicate(keys, nb, &oom);
    if (oom) rc = amp_fail(c->st, AMP_ERR_INTERNAL, "verifier: out of memory");
    else if (dup)
        rc = amp_fail(c->st, AMP_ERR_INPUT, "training_info[%zu]: %s binds '%s' twice", i, what,
                      dup);
done:
    free(outs);
    free(keys);
    return rc;
}

/* ONNX runs the main graph and an algorithm as one graph, whose initializer names are
 * unique: an algorithm initializer may not have the name of a main-graph one (a binding
 * key would not say which of the two is the variable, and the algorithm would read its
 * own constant where the main graph's state was meant). */
static AmpCode check_algorithm_names(Ctx *c, size_t i, const AmpGraph *a) {
    for (size_t k = 0; a && k < a->n_initializers; k++) {
        const char *name = a->initializers[k]->name;
        const AmpValue *w = name ? amp_graph_lookup(c->m->graph, name) : NULL;
        if (w && w->graph == c->m->graph && w->initializer)
            return amp_fail(c->st, AMP_ERR_INPUT,
                            "training_info[%zu].algorithm: initializer '%s' has the name of an initializer of the "
                            "main graph; ONNX runs the two graphs as one, where initializer names are unique: "
                            "rename one of them", i, name);
    }
    return AMP_OK;
}

typedef struct KeyRef {
    const char *name;
    const AmpValue *v;
    size_t ti;
    bool update;
} KeyRef;

static int cmp_key_ref(const void *a, const void *b) {
    const KeyRef *x = a, *y = b;
    int d = strcmp(x->name, y->name);
    if (d) return d;
    return x->ti < y->ti ? -1 : x->ti > y->ti;
}

/* Across training_infos: every update_binding key is bound once in the whole model (ONNX:
 * "unique keys in all update_bindings", so a variable is assigned at most once per
 * iteration), and one name never means two initializers (two algorithms' own initializers
 * of one name both bound): the session's state is a set of names. */
AmpCode amp_verify_keys_across(Ctx *c) {
    const AmpModel *m = c->m;
    size_t n = 0;
    for (size_t i = 0; i < m->n_training; i++) n += m->training[i].n_update_bindings + m->training[i].n_init_bindings;
    if (m->n_training < 2 || !n) return AMP_OK;
    KeyRef *r = malloc(n * sizeof *r);
    if (!r) return amp_fail(c->st, AMP_ERR_INTERNAL, "verifier: out of memory");
    size_t k = 0;
    for (size_t i = 0; i < m->n_training; i++) {
        const AmpTrainingInfo *ti = &m->training[i];
        for (size_t j = 0; j < ti->n_update_bindings; j++) {
            const char *key = ti->update_bindings[j].key ? ti->update_bindings[j].key : "";
            r[k++] = (KeyRef){key, amp_training_key(m, ti, key), i, true};
        }
        for (size_t j = 0; j < ti->n_init_bindings; j++) {
            const char *key = ti->init_bindings[j].key ? ti->init_bindings[j].key : "";
            r[k++] = (KeyRef){key, amp_training_key(m, ti, key), i, false};
        }
    }
    qsort(r, n, sizeof *r, cmp_key_ref);
    AmpCode rc = AMP_OK;
    for (size_t a = 0; a < n && !rc; a++) {
        for (size_t b = a + 1; b < n && !rc && strcmp(r[a].name, r[b].name) == 0; b++) {
            if (r[a].v != r[b].v)
                rc = amp_fail(c->st, AMP_ERR_INPUT,
                              "binding key '%s' names an initializer of training_info[%zu] and another of "
                              "training_info[%zu]: the names of bound initializers must differ", r[a].name, r[a].ti,
                              r[b].ti);
            else if (r[a].update && r[b].update && r[a].ti != r[b].ti)
                rc = amp_fail(c->st, AMP_ERR_INPUT,
                              "update_binding key '%s' is bound by training_info[%zu] and by training_info[%zu]; "
                              "ONNX allows one update_binding per variable in the whole model", r[a].name, r[a].ti,
                              r[b].ti);
        }
    }
    free(r);
    return rc;
}

AmpCode amp_verify_training_bindings(Ctx *c, size_t i) {
    const AmpTrainingInfo *ti = &c->m->training[i];
    AmpCode rc = check_algorithm_names(c, i, ti->algorithm);
    if (!rc)
        rc = check_bindings(c, i, ti, "update_binding", ti->update_bindings, ti->n_update_bindings, ti->algorithm,
                            "algorithm");
    if (!rc)
        rc = check_bindings(c, i, ti, "initialization_binding", ti->init_bindings, ti->n_init_bindings,
                            ti->initialization, "initialization");
    return rc;
}
