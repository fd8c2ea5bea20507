/* The "allreduce" pass (docs/parallel.md): data-parallel training's gradient all-reduce as
 * nodes of the graph. Each rank of the job runs the same training step on its slice of the
 * batch; for every parameter X, its gradient X_grad (docs/design.md's training-graph
 * contract, as the loss_scale pass finds them) is made the mean over the ranks by an
 * ai.ampc AllReduceMean node, whose kernel calls the session's communicator.
 *
 * Where the gradient is reduced: right after the backward makes it, before anything reads
 * it: the optimizer, an accumulator, a graph output, and in a loss-scaled graph the
 * loss_scale pass's unscale and finiteness check. There the value reduced is the scaled
 * gradient the unscale reads ("X_grad_scaled", before its Cast to float32), so every rank
 * checks the same reduced gradients, finds the same amp_found_inf, and skips or applies the
 * same step with the same scale update. With equal slices and a mean loss, the mean of the
 * ranks' gradients is the whole batch's gradient (up to float32 summation order).
 *
 * The gradients go into buckets in the order the backward makes them, as DDP's do: a bucket
 * closes at BUCKET_BYTES (the parameters' sizes, where their shapes are known) or CHUNK
 * gradients, and its node is placed right after the last of its gradients is made, so the
 * reduction runs while the rest of the backward is still to come (on the CPU the gradients
 * are then still in cache; the executor runs each node where it stands, no overlap yet).
 * An Identity that only names a gradient (`ampc grad` writes `W_grad = Identity(dW)`, all
 * at the end of the graph) would hold every node back to the end: the node reads dW itself
 * and the Identity goes. Nodes and values are named "amp_allreduce/..."; the gradient keeps
 * its name and its readers, and its producer writes "X_grad_local". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/precision.h"
#include "passes/pass.h"
#include "passes/training.h"

#define PREFIX "amp_allreduce/"
/* Gradients per node: the simulator's and the CPU fallback's kernels take up to 64 outputs. */
#define CHUNK 32
/* A bucket's bytes: DDP's first bucket (1 MiB: the first reduction starts early in the
 * backward), and from then on 4 MiB. On the CPU a bucket reduced just after it is made is
 * still in the last-level cache of both ranks; fewer, larger buckets pay the ranks'
 * meeting less often. */
#define FIRST_BUCKET_BYTES ((uint64_t)1 << 20)
#define BUCKET_BYTES ((uint64_t)4 << 20)

typedef struct Grad {
    AmpValue *v;    /* the value reduced: X_grad, or the scaled gradient under loss scaling */
    AmpNode *named; /* the Identity that only names it (naming_identity), or NULL */
    AmpNode *made;  /* the node that makes it: v's producer, or the one `named` reads */
    size_t order;   /* made's position in the graph */
    uint64_t bytes; /* the parameter's bytes (0: shape unknown) */
} Grad;

static AmpCode oom(AmpStatus *st) {
    return amp_fail(st, AMP_ERR_INTERNAL, "allreduce: out of memory");
}

static bool named(const AmpNode *n, const char *prefix) {
    return n && n->name && strncmp(n->name, prefix, strlen(prefix)) == 0;
}

/* The value to reduce for gradient g: under loss scaling (g = Mul(scaled [Cast to
 * float32], 1/scale), the loss_scale pass's names) the scaled gradient, else g. */
static AmpValue *reduced_value(AmpValue *g) {
    AmpNode *p = g->producer;
    if (!named(p, AMP_LOSS_SCALE_PREFIX "/unscale/") || p->n_inputs < 1 || !p->inputs[0]) return g;
    AmpValue *x = p->inputs[0];
    if (named(x->producer, AMP_LOSS_SCALE_PREFIX "/to_fp32/") && x->producer->n_inputs >= 1 &&
        x->producer->inputs[0])
        x = x->producer->inputs[0];
    return x->producer ? x : g;
}

/* A float tensor, or a value not typed yet (the session runs the pass before inference):
 * the kernel checks the type it meets. */
static bool may_be_float(const AmpValue *v) {
    int d = v->type.dtype;
    if (v->type.kind == AMP_TYPE_NONE) return true;
    return v->type.kind == AMP_TYPE_TENSOR &&
           (d == AMP_DT_FLOAT || d == AMP_DT_FLOAT16 || d == AMP_DT_BFLOAT16 || d == AMP_DT_UNDEFINED);
}

/* The Identity producing v when it only names its input: an input made by a node of the
 * same graph, read by this Identity alone and no graph output (so it can be read in v's
 * place and the Identity dropped). */
static AmpNode *naming_identity(const AmpValue *v) {
    AmpNode *p = v->producer;
    if (!p || p->op != AMP_OP_Identity || p->n_inputs != 1 || p->n_outputs != 1 || !p->inputs[0]) return NULL;
    const AmpValue *x = p->inputs[0];
    return x->producer && x->graph == v->graph && x->n_uses == 1 && !(x->flags & AMP_VALUE_OUTPUT) ? p : NULL;
}

/* Bytes of a tensor of known static shape and float type; 0 otherwise. */
static uint64_t param_bytes(const AmpValue *p) {
    if (p->type.kind != AMP_TYPE_TENSOR || p->type.rank < 0) return 0;
    uint64_t n = 1;
    for (int i = 0; i < p->type.rank; i++) {
        int64_t d = p->type.dims[i].value;
        if (p->type.dims[i].param || d < 0 || (d && n > UINT64_MAX / 8 / (uint64_t)d)) return 0;
        n *= (uint64_t)d;
    }
    return n * (p->type.dtype == AMP_DT_FLOAT16 || p->type.dtype == AMP_DT_BFLOAT16 ? 2 : 4);
}

static int by_order(const void *a, const void *b) {
    size_t x = ((const Grad *)a)->order, y = ((const Grad *)b)->order;
    return x < y ? -1 : x > y;
}

/* The gradients to reduce, in one graph (*h), in the order their producers run. */
static AmpCode find(AmpModel *m, Grad **out, size_t *n_out, AmpGraph **h, AmpStatus *st) {
    size_t cap = 1;
    for (size_t k = 0; k < amp_n_step_graphs(m); k++)
        if (amp_step_graph(m, k)) cap += amp_step_graph(m, k)->n_values;
    Grad *grads = malloc(cap * sizeof *grads);
    char *name = NULL;
    size_t name_cap = 0, n = 0;
    if (!grads) return oom(st);
    for (size_t k = 0; k < amp_n_step_graphs(m); k++) {
        AmpGraph *g = amp_step_graph(m, k);
        for (size_t i = 0; g && i < g->n_values; i++) {
            AmpValue *p = g->values[i];
            if (!(p->flags & (AMP_VALUE_INPUT | AMP_VALUE_INITIALIZER)) || !may_be_float(p)) continue;
            size_t len = strlen(p->name) + sizeof "_grad";
            if (len > name_cap) {
                char *nn = realloc(name, name_cap = len * 2);
                if (!nn) {
                    free(name), free(grads);
                    return oom(st);
                }
                name = nn;
            }
            strcpy(name, p->name);
            strcat(name, "_grad");
            AmpValue *gv = amp_step_lookup(m, name);
            if (!gv || !gv->producer || !may_be_float(gv)) continue;
            AmpValue *x = reduced_value(gv);
            if (x->producer->op == AMP_OP_Ampc_AllReduceMean) { /* run before: nothing to do */
                free(name), free(grads);
                *n_out = 0;
                return AMP_OK;
            }
            if (n && x->graph != grads[0].v->graph) {
                amp_fail(st, AMP_ERR_UNSUPPORTED,
                         "allreduce: gradients '%s' and '%s' are made in different graphs: data-parallel "
                         "training reduces the gradients of one graph", grads[0].v->name, x->name);
                free(name), free(grads);
                return AMP_ERR_UNSUPPORTED;
            }
            AmpNode *id = naming_identity(x);
            grads[n++] = (Grad){x, id, id ? id->inputs[0]->producer : x->producer, 0, param_bytes(p)};
        }
    }
    free(name);
    *h = n ? grads[0].v->graph : NULL;
    size_t pos = 0;
    for (AmpNode *nd = *h ? (*h)->first : NULL; nd; nd = nd->next) nd->mark = (int)pos++;
    for (size_t i = 0; i < n; i++) grads[i].order = (size_t)grads[i].made->mark;
    qsort(grads, n, sizeof *grads, by_order);
    *out = grads;
    *n_out = n;
    return AMP_OK;
}

/* One AllReduceMean over grads[0..n), placed right after the last of them is made: each
 * producer writes a fresh "<name>_local" the node reads (a naming Identity's input is read
 * as it is, and the Identity dropped), and the node writes the gradient's value itself. */
static AmpCode reduce_chunk(AmpGraph *g, const Grad *grads, size_t n, AmpStatus *st) {
    const char *name = amp_graph_unique_name(g, PREFIX "mean");
    AmpNode *node = name ? amp_node_new(g, "ai.ampc", "AllReduceMean", name, (int)n, (int)n) : NULL;
    if (!node) return oom(st);
    node->op = AMP_OP_Ampc_AllReduceMean;
    AmpNode *after = grads[n - 1].made; /* the last to run */
    for (size_t j = 0; j < n; j++) {
        AmpValue *v = grads[j].v;
        AmpNode *id = grads[j].named;
        if (id) {
            AmpValue *local = id->inputs[0];
            if (amp_node_set_input(node, (int)j, local)) return oom(st);
            amp_node_delete(id); /* unlinked: its output v is the node's now */
            amp_node_set_output(node, (int)j, v);
            continue;
        }
        size_t len = strlen(v->name) + sizeof "_local";
        char *base = malloc(len);
        if (!base) return oom(st);
        strcpy(base, v->name);
        strcat(base, "_local");
        AmpValue *local = amp_graph_new_value(g, base);
        free(base);
        if (!local) return oom(st);
        local->type = v->type;
        amp_node_set_output(v->producer, v->producer_slot, local);
        if (amp_node_set_input(node, (int)j, local)) return oom(st);
        amp_node_set_output(node, (int)j, v);
    }
    amp_node_insert_after(after, node);
    return AMP_OK;
}

AmpCode amp_pass_allreduce(AmpModel *m, const AmpPassOptions *opt, AmpStatus *st) {
    const char *loss = opt ? opt->loss : NULL;
    if (!amp_is_training_graph(m, loss)) return AMP_OK;
    Grad *grads = NULL;
    size_t n = 0;
    AmpGraph *h = NULL;
    AmpCode rc = find(m, &grads, &n, &h, st);
    if (!rc && n && !amp_model_import_opset(m, "ai.ampc", 1)) rc = oom(st);
    size_t nodes = 0;
    for (size_t at = 0, k; !rc && at < n; at += k, nodes++) {
        uint64_t bytes = 0, cap = nodes ? BUCKET_BYTES : FIRST_BUCKET_BYTES;
        for (k = 0; at + k < n && k < CHUNK && (!k || bytes < cap); k++) bytes += grads[at + k].bytes;
        rc = reduce_chunk(h, grads + at, k, st);
    }
    if (!rc && n) rc = amp_graph_toposort(h, st);
    if (!rc && n && opt && opt->notify) {
        char line[256];
        snprintf(line, sizeof line, "allreduce: %zu gradients made the mean over the ranks in %zu AllReduceMean "
                 "node%s", n, nodes, nodes > 1 ? "s" : "");
        opt->notify(opt->notify_ctx, line);
    }
    free(grads);
    return rc;
}
