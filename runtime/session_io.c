/* A session's inputs and outputs: the lists for inference and for a training step (main
 * graph, then each algorithm), the checks on what a caller passes (name, dtype, fixed
 * dims: AMP_ERR_USAGE naming the input), and which inputs are indices with a known range. */
#include <stdlib.h>
#include <string.h>

#include "runtime/session_impl.h"

/* ---- index inputs -------------------------------------------------------------------- */

static int64_t dim_of(const AmpValue *v, int64_t axis) {
    if (!v || v->type.kind != AMP_TYPE_TENSOR || v->type.rank < 0) return 0;
    int a;
    if (!amp_norm_axis(axis, v->type.rank, &a)) return 0;
    return v->type.dims[a].value > 0 ? v->type.dims[a].value : 0;
}

/* The range an integer value indexes into, found by following it (through ops that keep
 * its values) to a loss's labels or a gather's indices: 0 when none is known. */
static int64_t index_bound(const AmpValue *v, int depth) {
    if (!v || depth > 8) return 0;
    int64_t best = 0;
    for (size_t u = 0; u < v->n_uses; u++) {
        const AmpNode *n = v->uses[u].node;
        int slot = v->uses[u].slot;
        int64_t b = 0;
        switch (n->op) {
        case AMP_OP_Identity:
        case AMP_OP_Cast:
        case AMP_OP_Reshape:
        case AMP_OP_Squeeze:
        case AMP_OP_Unsqueeze:
        case AMP_OP_Flatten:
            if (slot == 0 && n->n_outputs > 0) b = index_bound(n->outputs[0], depth + 1);
            break;
        case AMP_OP_SoftmaxCrossEntropyLoss:
        case AMP_OP_NegativeLogLikelihoodLoss:
            /* scores (N, C, d1, ...): labels lie in [0, C) */
            if (slot == 1 && n->n_inputs > 0) b = dim_of(n->inputs[0], 1);
            break;
        case AMP_OP_Gather:
        case AMP_OP_GatherElements:
            if (slot == 1 && n->n_inputs > 0) b = dim_of(n->inputs[0], amp_node_attr_int(n, "axis", 0));
            break;
        default: break;
        }
        if (b > 0 && (best == 0 || b < best)) best = b;
    }
    return best;
}

/* ---- lists --------------------------------------------------------------------------- */

static InEntry *push_in(IoList *l, size_t n_alg) {
    InEntry *p = realloc(l->in, (l->n_in + 1) * sizeof *p);
    if (!p) return NULL;
    l->in = p;
    InEntry *e = &l->in[l->n_in];
    memset(e, 0, sizeof *e);
    if (n_alg && !(e->alg = calloc(n_alg, sizeof *e->alg))) return NULL;
    l->n_in++;
    return e;
}

static InEntry *find_in(IoList *l, const char *name) {
    for (size_t i = 0; i < l->n_in; i++)
        if (strcmp(l->in[i].name, name) == 0) return &l->in[i];
    return NULL;
}

static bool push_out(IoList *l, const char *name, AmpValue *v, int graph) {
    for (size_t i = 0; i < l->n_out; i++)
        if (strcmp(l->out[i].name, name) == 0) return true; /* listed already */
    OutEntry *p = realloc(l->out, (l->n_out + 1) * sizeof *p);
    if (!p) return false;
    l->out = p;
    l->out[l->n_out++] = (OutEntry){name, v, graph};
    return true;
}

static AmpCode add_graph(AmpSession *s, IoList *l, AmpGraph *g, int k, size_t n_alg, AmpStatus *st) {
    for (size_t i = 0; i < g->inputs.n; i++) {
        AmpValue *v = g->inputs.items[i].value;
        InEntry *e = find_in(l, v->name);
        if (!e) {
            if (!(e = push_in(l, n_alg))) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
            e->name = v->name;
            e->decl = v;
            e->optional = v->initializer != NULL;
        }
        if (k < 0) e->main = v;
        else e->alg[k] = v;
        if (!v->initializer) e->optional = false;
        int64_t b = index_bound(v, 0);
        if (b > 0 && (!e->index_bound || b < e->index_bound)) e->index_bound = b;
    }
    for (size_t i = 0; i < g->outputs.n; i++) {
        AmpValue *v = g->outputs.items[i].value;
        if (!push_out(l, v->name, v, k)) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    }
    (void)s;
    return AMP_OK;
}

AmpCode amp_session_build_io(AmpSession *s, AmpStatus *st) {
    AmpCode rc = add_graph(s, &s->io[AMP_MODE_RUN], s->m->graph, -1, 0, st);
    if (!rc) rc = add_graph(s, &s->io[AMP_MODE_TRAIN], s->m->graph, -1, s->n_alg, st);
    for (size_t k = 0; !rc && k < s->n_alg; k++)
        rc = add_graph(s, &s->io[AMP_MODE_TRAIN], s->alg[k].ti->algorithm, (int)k, s->n_alg, st);
    return rc;
}

void amp_session_free_io(AmpSession *s) {
    for (int m = 0; m < 2; m++) {
        for (size_t i = 0; i < s->io[m].n_in; i++) free(s->io[m].in[i].alg);
        free(s->io[m].in);
        free(s->io[m].out);
        memset(&s->io[m], 0, sizeof s->io[m]);
    }
}

/* ---- public look-ups ------------------------------------------------------------------ */

void amp_session_fill_info(const AmpValue *v, AmpIoInfo *out) {
    memset(out, 0, sizeof *out);
    out->name = v->name;
    out->rank = -1;
    for (int i = 0; i < AMP_TENSOR_MAX_RANK; i++) out->dims[i] = -1;
    if (v->type.kind != AMP_TYPE_TENSOR) return;
    out->dtype = v->type.dtype;
    out->rank = v->type.rank;
    for (int i = 0; i < v->type.rank && i < AMP_TENSOR_MAX_RANK; i++) {
        out->dims[i] = v->type.dims[i].value;
        out->dim_params[i] = v->type.dims[i].param;
    }
}

size_t amp_session_input_count(const AmpSession *s, AmpMode mode) {
    return mode == AMP_MODE_TRAIN || mode == AMP_MODE_RUN ? s->io[mode].n_in : 0;
}

size_t amp_session_output_count(const AmpSession *s, AmpMode mode) {
    return mode == AMP_MODE_TRAIN || mode == AMP_MODE_RUN ? s->io[mode].n_out : 0;
}

bool amp_session_input_info(const AmpSession *s, AmpMode mode, size_t i, AmpIoInfo *out) {
    if (i >= amp_session_input_count(s, mode)) return false;
    const InEntry *e = &s->io[mode].in[i];
    amp_session_fill_info(e->decl, out);
    out->optional = e->optional;
    out->index_bound = e->index_bound;
    return true;
}

bool amp_session_output_info(const AmpSession *s, AmpMode mode, size_t i, AmpIoInfo *out) {
    if (i >= amp_session_output_count(s, mode)) return false;
    amp_session_fill_info(s->io[mode].out[i].value, out);
    return true;
}

/* ---- checks -------------------------------------------------------------------------- */

static void names_of_inputs(const IoList *l, char *buf, size_t len) {
    size_t k = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < l->n_in && k + 40 < len; i++) {
        int w = snprintf(buf + k, len - k, "%s%s", i ? ", " : "", l->in[i].name);
        if (w < 0) break;
        k += (size_t)w;
    }
    if (!l->n_in) snprintf(buf, len, "none");
}

static void type_str(int dtype, int rank, const int64_t *dims, const AmpDim *ddims, char *buf, size_t len) {
    size_t k = (size_t)snprintf(buf, len, "%s[", dtype ? amp_dtype_name(dtype) : "?");
    for (int i = 0; i < rank && k + 24 < len; i++) {
        int w;
        if (ddims && ddims[i].value < 0) w = snprintf(buf + k, len - k, "%s%s", i ? "," : "", ddims[i].param ? ddims[i].param : "?");
        else w = snprintf(buf + k, len - k, "%s%lld", i ? "," : "", (long long)(ddims ? ddims[i].value : dims[i]));
        if (w < 0) break;
        k += (size_t)w;
    }
    if (k + 2 < len) buf[k] = ']', buf[k + 1] = '\0';
}

AmpCode amp_session_check_inputs(const AmpSession *s, AmpMode mode, const AmpTensorView *inputs, size_t n,
                                 AmpNamedBuf *named, AmpStatus *st) {
    const IoList *l = &s->io[mode];
    char list[512];
    if (n && !inputs) return amp_fail(st, AMP_ERR_USAGE, "%zu inputs announced but none given", n);
    for (size_t i = 0; i < n; i++) {
        const AmpTensorView *t = &inputs[i];
        if (!t->name) return amp_fail(st, AMP_ERR_USAGE, "input %zu has no name", i);
        const InEntry *e = NULL;
        for (size_t k = 0; k < l->n_in && !e; k++)
            if (strcmp(l->in[k].name, t->name) == 0) e = &l->in[k];
        if (!e) {
            names_of_inputs(l, list, sizeof list);
            return amp_fail(st, AMP_ERR_USAGE, "input '%s': the model has no input of that name%s (inputs: %s)",
                            t->name, mode == AMP_MODE_RUN && s->n_alg ? " for inference" : "", list);
        }
        for (size_t k = 0; k < i; k++)
            if (strcmp(inputs[k].name, t->name) == 0)
                return amp_fail(st, AMP_ERR_USAGE, "input '%s' is given twice", t->name);
        if (t->rank < 0 || t->rank > AMP_TENSOR_MAX_RANK)
            return amp_fail(st, AMP_ERR_USAGE, "input '%s': rank %d (at most %d)", t->name, t->rank, AMP_TENSOR_MAX_RANK);
        uint64_t nelem = 1;
        for (int d = 0; d < t->rank; d++) {
            if (t->dims[d] < 0 || (t->dims[d] && nelem > (UINT64_C(1) << 62) / (uint64_t)t->dims[d]))
                return amp_fail(st, AMP_ERR_USAGE, "input '%s': dim %d is %lld", t->name, d, (long long)t->dims[d]);
            nelem *= (uint64_t)t->dims[d];
        }
        size_t bytes;
        if (!amp_tensor_expected_bytes(t->dtype, nelem, &bytes) || t->dtype == AMP_DT_STRING)
            return amp_fail(st, AMP_ERR_USAGE, "input '%s': dtype %s is not supported", t->name, amp_dtype_name(t->dtype));
        if (s->max_tensor_bytes && bytes > s->max_tensor_bytes)
            return amp_fail(st, AMP_ERR_UNSUPPORTED, "input '%s' takes %zu bytes, over the %llu-byte limit (max_tensor_bytes)",
                            t->name, bytes, (unsigned long long)s->max_tensor_bytes);
        if (bytes && !t->data) return amp_fail(st, AMP_ERR_USAGE, "input '%s': no data", t->name);
        const AmpType *ty = &e->decl->type;
        if (ty->kind == AMP_TYPE_TENSOR) {
            bool ok = !ty->dtype || ty->dtype == t->dtype;
            if (ty->rank >= 0) {
                ok = ok && ty->rank == t->rank;
                for (int d = 0; ok && d < t->rank; d++) ok = ty->dims[d].value < 0 || ty->dims[d].value == t->dims[d];
            }
            if (!ok) {
                char want[200], got[200];
                type_str(ty->dtype, ty->rank < 0 ? 0 : ty->rank, NULL, ty->dims, want, sizeof want);
                type_str(t->dtype, t->rank, t->dims, NULL, got, sizeof got);
                return amp_fail(st, AMP_ERR_USAGE, "input '%s': the model takes %s%s, got %s", t->name, want,
                                ty->rank < 0 ? " (any shape)" : "", got);
            }
        }
        AmpBuf *b = &named[i].buf;
        memset(b, 0, sizeof *b);
        named[i].name = e->name;
        b->dtype = t->dtype;
        b->rank = t->rank;
        for (int d = 0; d < t->rank; d++) b->dims[d] = t->dims[d];
        b->nelem = nelem;
        b->data = t->data;
    }
    for (size_t k = 0; k < l->n_in; k++) {
        if (l->in[k].optional) continue;
        bool given = false;
        for (size_t i = 0; i < n && !given; i++) given = strcmp(inputs[i].name, l->in[k].name) == 0;
        if (!given) return amp_fail(st, AMP_ERR_USAGE, "input '%s' was not given", l->in[k].name);
    }
    return AMP_OK;
}

AmpCode amp_session_resolve_outputs(const AmpSession *s, AmpMode mode, const char *const *names, size_t n,
                                    size_t *idx, size_t *n_idx, AmpStatus *st) {
    const IoList *l = &s->io[mode];
    if (!names) {
        if (n < l->n_out)
            return amp_fail(st, AMP_ERR_USAGE, "room for %zu outputs given, the model has %zu", n, l->n_out);
        for (size_t i = 0; i < l->n_out; i++) idx[i] = i;
        *n_idx = l->n_out;
        return AMP_OK;
    }
    for (size_t i = 0; i < n; i++) {
        size_t k = 0;
        while (k < l->n_out && (!names[i] || strcmp(l->out[k].name, names[i]) != 0)) k++;
        if (k == l->n_out) {
            char list[512];
            size_t used = 0;
            list[0] = '\0';
            for (size_t j = 0; j < l->n_out && used + 40 < sizeof list; j++) {
                int w = snprintf(list + used, sizeof list - used, "%s%s", j ? ", " : "", l->out[j].name);
                if (w > 0) used += (size_t)w;
            }
            return amp_fail(st, AMP_ERR_USAGE, "output '%s': the model has no output of that name%s (outputs: %s)",
                            names[i] ? names[i] : "(null)", mode == AMP_MODE_RUN && s->n_alg ? " for inference" : "",
                            l->n_out ? list : "none");
        }
        idx[i] = k;
    }
    *n_idx = n;
    return AMP_OK;
}
