/* The "export" pass (passes.h, amp_export_model): a training model cut down to the
 * inference model a user deploys. What is kept is the main graph's forward: the nodes the
 * inference outputs need, nothing else. The inference outputs are the main graph's outputs
 * that are not training values: not the loss, not a gradient (`*_grad`), not the
 * loss-scaling state or its outputs (amp_loss_scale*, amp_growth_tracker*, amp_found_inf),
 * and not computed from any of those or from a backward node (a *Grad op, an accumulator,
 * an optimizer). Every training_info goes (ONNX's own layout keeps the loss and backward
 * there: its main graph is the forward already), then every node no inference output
 * needs, every graph input no kept node reads (labels, seeds, lazy_reset_grad, the
 * loss-scale state) and every initializer no kept node reads (optimizer state, backward
 * constants). A training graph whose only output is its loss (onnxruntime-training's
 * models) exports the scores its loss op reads (input 0 of the first
 * SoftmaxCrossEntropyLoss or NegativeLogLikelihoodLoss found walking back from the loss).
 * A forward node in training form becomes its inference form: BatchNormalization's
 * training_mode 1 (`ampc grad --train-mode`) is 0 (the running statistics, as torch's
 * eval()), and Dropout's training_mode input is dropped. */
#include <stdlib.h>
#include <string.h>

#include "ir/half.h"
#include "passes/pass.h"
#include "passes/training.h"
#include "passes/options.h"

static bool ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* A value named as training state or a training output only. */
static bool training_name(const char *name) {
    return ends_with(name, "_grad") || amp_is_loss_scale_name(name) ||
           strncmp(name, AMP_LS_FOUND_INF, strlen(AMP_LS_FOUND_INF)) == 0;
}

/* A node of the backward or of the update: a backward node (training.h), an optimizer, the
 * loss-scaling pass's. */
static bool training_node(const AmpNode *n) {
    return amp_is_backward_node(n) || amp_is_optimizer(n) || n->origin == AMP_ORIGIN_LOSS_SCALE;
}

typedef void (*GraphFn)(AmpGraph *g, void *ctx);

static void for_subgraphs(AmpNode *n, GraphFn fn, void *ctx) {
    for (size_t i = 0; i < n->n_attrs; i++) {
        AmpAttr *a = &n->attrs[i];
        if (a->type == AMP_ATTR_GRAPHS) {
            for (size_t k = 0; k < a->n_graphs; k++)
                if (a->graphs[k]) fn(a->graphs[k], ctx);
        } else if (a->g) {
            fn(a->g, ctx);
        }
    }
}

/* Deletes every node of g and of its subgraphs (so the uses they made of outer values go). */
static void clear_graph(AmpGraph *g, void *ctx) {
    (void)ctx;
    while (g->last) {
        AmpNode *n = g->last;
        for_subgraphs(n, clear_graph, NULL);
        amp_node_delete(n);
    }
}

typedef struct Live {
    AmpGraph *main;
    AmpNode **stack;
    size_t n, cap;
    bool oom;
} Live;

/* Marks p live (mark 1) and queues it. */
static void want(Live *l, AmpNode *p) {
    if (!p || p->mark || p->graph != l->main) return;
    p->mark = 1;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        AmpNode **s = realloc(l->stack, cap * sizeof *s);
        if (!s) {
            l->oom = true;
            return;
        }
        l->stack = s;
        l->cap = cap;
    }
    l->stack[l->n++] = p;
}

/* A kept subgraph needs the main-graph values its nodes read from outside. */
static void want_outer(AmpGraph *g, void *ctx) {
    Live *l = ctx;
    for (AmpNode *n = g->first; n; n = n->next) {
        for (int i = 0; i < n->n_inputs; i++)
            if (n->inputs[i] && n->inputs[i]->graph == l->main) want(l, n->inputs[i]->producer);
        for_subgraphs(n, want_outer, l);
    }
}

/* Drops v's entries from list l and its flag. */
static void drop_io(AmpValueInfoList *l, AmpValue *v, unsigned flag) {
    size_t k = 0;
    for (size_t i = 0; i < l->n; i++)
        if (l->items[i].value != v) l->items[k++] = l->items[i];
    l->n = k;
    v->flags &= ~flag;
}

static bool alive(const AmpValue *v) {
    return v->producer || v->n_uses || (v->flags & (AMP_VALUE_INPUT | AMP_VALUE_OUTPUT | AMP_VALUE_INITIALIZER));
}

/* The scores a loss op reads: walking back from the loss, input 0 of the first
 * SoftmaxCrossEntropyLoss or NegativeLogLikelihoodLoss found (NULL: none). */
static AmpValue *loss_scores(AmpGraph *g, AmpValue *loss) {
    for (AmpNode *n = g->first; n; n = n->next) n->mark = 0;
    AmpNode *queue[4096];
    size_t head = 0, tail = 0;
    if (loss->producer) queue[tail++] = loss->producer, loss->producer->mark = 1;
    while (head < tail) {
        AmpNode *n = queue[head++];
        if ((n->op == AMP_OP_SoftmaxCrossEntropyLoss || n->op == AMP_OP_NegativeLogLikelihoodLoss) && n->n_inputs > 0 &&
            n->inputs[0])
            return n->inputs[0];
        for (int i = 0; i < n->n_inputs; i++) {
            AmpNode *p = n->inputs[i] ? n->inputs[i]->producer : NULL;
            if (p && !p->mark && p->graph == g && tail < sizeof queue / sizeof *queue) p->mark = 1, queue[tail++] = p;
        }
    }
    return NULL;
}

/* The training form of a kept node made its inference form; true when changed. */
static bool to_inference(AmpNode *n) {
    if (n->op == AMP_OP_BatchNormalization) {
        AmpAttr *a = (AmpAttr *)amp_node_attr(n, "training_mode");
        if (!a || a->type != AMP_ATTR_INT || a->i == 0) return false;
        a->i = 0;
        /* The running statistics' outputs belong to training mode; nothing kept reads them. */
        for (int k = n->n_outputs - 1; k >= 1; k--) {
            AmpValue *v = n->outputs[k];
            if (v && (v->n_uses || (v->flags & AMP_VALUE_OUTPUT))) break;
            amp_node_set_output(n, k, NULL);
            n->n_outputs = k;
        }
        return true;
    }
    if (n->op == AMP_OP_Dropout && n->n_inputs >= 3 && n->inputs[2]) {
        amp_node_set_input(n, 2, NULL); /* absent: inference, the identity */
        n->n_inputs = n->inputs[1] ? 2 : 1;
        AmpValue *mask = n->n_outputs >= 2 ? n->outputs[1] : NULL;
        if (mask && !mask->n_uses && !(mask->flags & AMP_VALUE_OUTPUT)) {
            amp_node_set_output(n, 1, NULL);
            n->n_outputs = 1;
        }
        return true;
    }
    return false;
}

AmpCode amp_export_model(AmpModel *m, const char *loss_name, AmpExportSummary *sum, AmpStatus *st) {
    AmpExportSummary dummy;
    if (!sum) sum = &dummy;
    memset(sum, 0, sizeof *sum);
    AmpGraph *g = m->graph;
    /* Types for the outputs this may add (a model inference cannot type wholly still
     * exports: the verifier speaks for what is written). */
    AmpStatus ignored = {0};
    amp_infer_model(m, &ignored);
    sum->training = amp_is_training_graph(m, loss_name);

    /* The loss, when the main graph has one: by --loss, else as the amp pass finds it. */
    AmpValue *loss = NULL;
    if (sum->training) {
        AmpStatus why = {0};
        AmpCode rc = amp_find_loss(m, loss_name, &loss, &why);
        if (rc && loss_name) {
            *st = why;
            return rc;
        }
        if (rc) {
            loss = NULL;
            /* No loss told apart: acceptable only where no output may be one (ONNX's own
             * layout, whose main graph is the forward). */
            for (size_t i = 0; i < g->outputs.n; i++) {
                const char *nm = g->outputs.items[i].value->name;
                if (strstr(nm, "loss") && !amp_is_loss_scale_name(nm))
                    return amp_fail(st, AMP_ERR_INPUT, "export: %s", why.msg);
            }
        }
    }
    if (loss) sum->loss = loss->name;

    /* Training values of the main graph, marked forward in topological order: the loss,
     * `*_grad` and loss-scaling values, what backward and update nodes make, and all that
     * is computed from any of them. mark 1 = a training value (per value, by its
     * producer: a node marked makes only training values). */
    bool *train_val = calloc(g->n_values ? g->n_values : 1, sizeof *train_val);
    if (!train_val) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    for (size_t i = 0; i < g->n_values; i++) {
        AmpValue *v = g->values[i];
        if (v->graph == g && v->id < g->n_values && (v == loss || training_name(v->name))) train_val[v->id] = true;
    }
    for (AmpNode *n = g->first; n; n = n->next) {
        bool t = training_node(n);
        for (int i = 0; !t && i < n->n_inputs; i++) {
            AmpValue *v = n->inputs[i];
            t = v && v->graph == g && v->id < g->n_values && train_val[v->id];
        }
        for (int k = 0; t && k < n->n_outputs; k++)
            if (n->outputs[k] && n->outputs[k]->id < g->n_values) train_val[n->outputs[k]->id] = true;
    }

    /* The inference outputs. */
    AmpValue **keep = calloc(g->outputs.n + 1, sizeof *keep);
    if (!keep) {
        free(train_val);
        return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    }
    size_t n_keep = 0;
    for (size_t i = 0; i < g->outputs.n; i++) {
        AmpValue *v = g->outputs.items[i].value;
        bool t = v->id < g->n_values && v->graph == g && train_val[v->id];
        if (!t && !training_name(v->name)) keep[n_keep++] = v;
    }
    AmpValue *scores = NULL;
    if (!n_keep && loss && (scores = loss_scores(g, loss)) && !(scores->id < g->n_values && train_val[scores->id]))
        keep[n_keep++] = scores, sum->scores = scores->name;
    free(train_val);
    if (!n_keep) {
        free(keep);
        return amp_fail(st, AMP_ERR_INPUT,
                        "export: no inference output left: every output of the main graph is %s, and no "
                        "SoftmaxCrossEntropyLoss or NegativeLogLikelihoodLoss reads the scores",
                        loss ? "the loss, a gradient or loss-scaling state" : "a gradient or loss-scaling state");
    }

    /* The outputs become the kept ones, in their order (the scores last). */
    size_t n_out_before = g->outputs.n;
    for (size_t i = 0; i < g->outputs.n; i++) g->outputs.items[i].value->flags &= ~(unsigned)AMP_VALUE_OUTPUT;
    size_t k = 0;
    for (size_t i = 0; i < g->outputs.n; i++) {
        AmpValue *v = g->outputs.items[i].value;
        for (size_t j = 0; j < n_keep; j++)
            if (keep[j] == v && !(v->flags & AMP_VALUE_OUTPUT)) {
                g->outputs.items[k++] = g->outputs.items[i];
                v->flags |= AMP_VALUE_OUTPUT;
            }
    }
    g->outputs.n = k;
    if (scores && !amp_graph_add_output(g, scores)) {
        free(keep);
        return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    }
    sum->n_outputs = g->outputs.n;
    sum->outputs_removed = n_out_before - (g->outputs.n - (scores != NULL));

    /* Every training_info goes, with the uses its graphs made of the main graph's values. */
    for (size_t i = 0; i < m->n_training; i++) {
        if (m->training[i].algorithm) clear_graph(m->training[i].algorithm, NULL);
        if (m->training[i].initialization) clear_graph(m->training[i].initialization, NULL);
    }
    sum->training_infos_removed = m->n_training;
    m->n_training = 0;
    m->training = NULL;

    /* Live nodes: what the outputs need, through subgraphs' outer reads too. */
    Live l = {.main = g};
    for (AmpNode *n = g->first; n; n = n->next) n->mark = 0;
    for (size_t i = 0; i < g->outputs.n; i++) want(&l, g->outputs.items[i].value->producer);
    while (l.n && !l.oom) {
        AmpNode *n = l.stack[--l.n];
        for (int i = 0; i < n->n_inputs; i++)
            if (n->inputs[i]) want(&l, n->inputs[i]->producer);
        for_subgraphs(n, want_outer, &l);
    }
    free(l.stack);
    free(keep);
    if (l.oom) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    /* Last first: every reader of a dead node's outputs is dead and gone before it. */
    for (AmpNode *n = g->last, *prev; n; n = prev) {
        prev = n->prev;
        if (n->mark) continue;
        for_subgraphs(n, clear_graph, NULL);
        amp_node_delete(n);
        sum->nodes_removed++;
    }
    for (AmpNode *n = g->first; n; n = n->next) {
        n->mark = 0;
        if (to_inference(n)) sum->nodes_to_inference++;
    }

    /* A parameter fed as a graph input (onnxruntime-training's training model, not
     * imported) would leave the export without its weights. */
    for (size_t i = 0; i < g->inputs.n; i++) {
        AmpValue *v = g->inputs.items[i].value;
        if (v->initializer || !v->n_uses) continue;
        size_t len = strlen(v->name);
        char *gn = malloc(len + 6);
        if (!gn) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
        memcpy(gn, v->name, len);
        memcpy(gn + len, "_grad", 6);
        bool param = amp_graph_lookup(g, gn) != NULL;
        free(gn);
        if (param)
            return amp_fail(st, AMP_ERR_INPUT,
                            "export: parameter '%s' is a graph input with no value (onnxruntime-training's training "
                            "model: give %s and %s, which hold the parameters' values)", v->name,
                            AMP_OPT_SAY("optimizer", NULL), AMP_OPT_SAY("checkpoint", NULL));
    }
    /* Inputs and initializers nothing reads any more. */
    for (size_t i = g->inputs.n; i-- > 0;) {
        AmpValue *v = g->inputs.items[i].value;
        if (v->n_uses || (v->flags & AMP_VALUE_OUTPUT)) continue;
        drop_io(&g->inputs, v, AMP_VALUE_INPUT);
        if (!v->initializer) sum->inputs_removed++;
    }
    k = 0;
    for (size_t i = 0; i < g->n_initializers; i++) {
        AmpTensor *t = g->initializers[i];
        AmpValue *v = amp_graph_lookup(g, t->name);
        if (v && v->initializer == t && !v->n_uses && !(v->flags & AMP_VALUE_OUTPUT)) {
            if (v->flags & AMP_VALUE_INPUT) drop_io(&g->inputs, v, AMP_VALUE_INPUT);
            v->initializer = NULL;
            v->flags &= ~(unsigned)AMP_VALUE_INITIALIZER;
            sum->initializers_removed++;
            continue;
        }
        g->initializers[k++] = t;
    }
    g->n_initializers = k;
    /* value_info of values gone. */
    k = 0;
    for (size_t i = 0; i < g->value_info.n; i++)
        if (alive(g->value_info.items[i].value)) g->value_info.items[k++] = g->value_info.items[i];
    g->value_info.n = k;
    return AMP_OK;
}

/* Whether every use of v is a Cast to dtype `to` in v's graph. */
static bool only_cast_to(const AmpValue *v, int to) {
    if (!v->n_uses) return false;
    for (size_t u = 0; u < v->n_uses; u++) {
        const AmpNode *c = v->uses[u].node;
        if (c->op != AMP_OP_Cast || c->graph != v->graph || amp_node_attr_int(c, "to", 0) != to) return false;
    }
    return true;
}

AmpCode amp_export_fold_weight_casts(AmpModel *m, int dtype, size_t *n_folded, AmpStatus *st) {
    AmpGraph *g = m->graph;
    size_t folded = 0;
    if (n_folded) *n_folded = 0;
    if (dtype != AMP_DT_FLOAT16 && dtype != AMP_DT_BFLOAT16) return AMP_OK;
    for (AmpNode *n = g->first, *next; n; n = next) {
        next = n->next;
        AmpValue *w = n->op == AMP_OP_Cast && n->n_inputs == 1 ? n->inputs[0] : NULL;
        AmpValue *out = n->n_outputs == 1 ? n->outputs[0] : NULL;
        if (!w || !out || w->graph != g || !w->initializer || w->initializer->dtype != AMP_DT_FLOAT ||
            (w->flags & (AMP_VALUE_INPUT | AMP_VALUE_OUTPUT)) || (out->flags & AMP_VALUE_OUTPUT) ||
            !only_cast_to(w, (int)dtype))
            continue;
        AmpTensor *src = w->initializer;
        AmpBytes b;
        AmpCode rc = amp_tensor_bytes(m, src, &b, st);
        if (rc) return rc;
        size_t nel = (size_t)src->nelem;
        if (b.len < nel * sizeof(float)) continue;
        uint16_t *dst = malloc(nel ? nel * sizeof *dst : 1);
        AmpTensor *t = amp_arena_calloc(&m->arena, 1, sizeof *t);
        if (!dst || !t || !amp_model_own(m, dst)) {
            free(dst);
            return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
        }
        /* What the Cast computes (round to nearest even), done once into the file. */
        if (dtype == AMP_DT_FLOAT16) amp_f32_bytes_to_f16(dst, b.data, nel);
        else amp_f32_bytes_to_bf16(dst, b.data, nel);
        t->dtype = dtype;
        t->has = AMP_TENSOR_HAS_DTYPE | AMP_TENSOR_HAS_RAW;
        t->ndims = src->ndims;
        t->dims = src->dims;
        t->nelem = src->nelem;
        t->raw = (AmpBytes){(const uint8_t *)dst, nel * sizeof *dst};
        amp_node_delete(n);
        if (amp_graph_add_initializer(g, out, t)) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
        folded++;
        /* The float32 weight goes once its last Cast has. */
        if (!w->n_uses) {
            size_t k = 0;
            for (size_t i = 0; i < g->n_initializers; i++)
                if (g->initializers[i] != src) g->initializers[k++] = g->initializers[i];
            g->n_initializers = k;
            w->initializer = NULL;
            w->flags &= ~(unsigned)AMP_VALUE_INITIALIZER;
        }
    }
    if (n_folded) *n_folded = folded;
    return AMP_OK;
}

AmpCode amp_pass_export(AmpModel *m, const AmpPassOptions *opt, AmpStatus *st) {
    return amp_export_model(m, opt ? opt->loss : NULL, NULL, st);
}
