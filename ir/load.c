/* ONNX -> IR. Decodes the protobuf wire format straight into the model's arena (no
 * message tree in between): models and graphs here; tensors and attributes in
 * load_msg.c, value infos in load_type.c; reading the file (mapped, or a stream read to
 * its end) in load_file.c. Every length, dim and offset is checked on the way; whatever
 * the IR does not model (unknown fields included) is packed into `rest` blobs for the
 * saver. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/load_impl.h"
#include "ir/names.h"

/* The newest ai.onnx opset whose operator semantics ampc knows. */
#define AMP_MAX_ONNX_OPSET 23
#define BIT(n) (1u << (n))

/* Arena bytes per node of a loaded model after a default conversion (nodes, values,
 * names, attributes, the casts and their values): about 570 on the synthetic graphs of
 * tools/gen_graph.py from 1k to 100k nodes. */
#define AMP_ARENA_BYTES_PER_NODE 576

/* ---- graphs ---------------------------------------------------------------------- */

enum { G_NODE = 1, G_NAME = 2, G_INIT = 5, G_DOC = 10, G_INPUT = 11, G_OUTPUT = 12, G_VI = 13, G_SPARSE = 15 };
#define GRAPH_MODELLED                                                                                  \
    (BIT(G_NODE) | BIT(G_NAME) | BIT(G_INIT) | BIT(G_DOC) | BIT(G_INPUT) | BIT(G_OUTPUT) | BIT(G_VI) | \
     BIT(G_SPARSE))

/* The graph's repeated fields, each as spans in file order. */
typedef struct GraphParts {
    Span *all; /* one malloc'd block for the six lists below */
    Span *node, *init, *input, *output, *vi, *sparse;
    size_t *later_index; /* malloc'd, n_node: the nodes pass 1 leaves (load.c) */
    size_t n_node, n_init, n_input, n_output, n_vi, n_sparse;
    bool rest;
} GraphParts;

/* The graph's name and doc string, and how many of each repeated field it has. */
static AmpCode graph_parts(LoadCtx *c, AmpGraph *g, const uint8_t *p, const uint8_t *end, GraphParts *gp) {
    memset(gp, 0, sizeof *gp);
    AmpWireField f;
    int r;
    const uint8_t *q = p;
    while ((r = amp_wire_next(&q, end, &f)) > 0) {
        switch (f.num) {
        case G_NODE: gp->n_node++; break;
        case G_INIT: gp->n_init++; break;
        case G_INPUT: gp->n_input++; break;
        case G_OUTPUT: gp->n_output++; break;
        case G_VI: gp->n_vi++; break;
        case G_SPARSE: gp->n_sparse++; break;
        case G_NAME:
        case G_DOC: break;
        default: gp->rest = true; continue;
        }
        if (f.wt != AMP_WT_LEN) return amp_load_malformed(c);
        if (f.num == G_NAME && !(g->name = amp_load_str(c, &f))) return amp_load_oom(c);
        if (f.num == G_DOC && !(g->doc_string = amp_load_str(c, &f))) return amp_load_oom(c);
    }
    if (r < 0) return amp_load_malformed(c);
    return AMP_OK;
}

/* The spans of the graph's repeated fields (graph_parts counted them). */
static AmpCode graph_spans(LoadCtx *c, const uint8_t *p, const uint8_t *end, GraphParts *gp) {
    AmpWireField f;
    const uint8_t *q;
    size_t total = gp->n_node + gp->n_init + gp->n_input + gp->n_output + gp->n_vi + gp->n_sparse;
    if (!total) return AMP_OK;
    if (!(gp->all = malloc(total * sizeof *gp->all)) ||
        (gp->n_node && !(gp->later_index = malloc(gp->n_node * sizeof *gp->later_index))))
        return amp_load_oom(c);
    gp->node = gp->all;
    gp->init = gp->node + gp->n_node;
    gp->input = gp->init + gp->n_init;
    gp->output = gp->input + gp->n_input;
    gp->vi = gp->output + gp->n_output;
    gp->sparse = gp->vi + gp->n_vi;
    size_t kn = 0, ki = 0, kin = 0, ko = 0, kv = 0, ks = 0;
    for (q = p; amp_wire_next(&q, end, &f) > 0;) {
        Span s = {f.data, f.len};
        switch (f.num) {
        case G_NODE: gp->node[kn++] = s; break;
        case G_INIT: gp->init[ki++] = s; break;
        case G_INPUT: gp->input[kin++] = s; break;
        case G_OUTPUT: gp->output[ko++] = s; break;
        case G_VI: gp->vi[kv++] = s; break;
        case G_SPARSE: gp->sparse[ks++] = s; break;
        default: break;
        }
    }
    return AMP_OK;
}

static AmpCode load_inputs(LoadCtx *c, AmpGraph *g, const GraphParts *gp, const char *gwhere) {
    for (size_t i = 0; i < gp->n_input; i++) {
        const char *name;
        size_t len;
        if (!amp_load_name(gp->input[i].p, gp->input[i].len, 1, &name, &len) || !len)
            return amp_fail(c->st, AMP_ERR_INPUT, "%s: input %zu has no name", gwhere, i);
        AmpValue *v = amp_load_value_in(c, g, name, len, amp_name_hash(name, len));
        if (!v) return amp_load_oom(c);
        if (v->flags & AMP_VALUE_INPUT)
            return amp_fail(c->st, AMP_ERR_INPUT, "%s: input '%s' is listed twice", gwhere, v->name);
        AmpValueInfo *e = amp_graph_add_input(g, v);
        if (!e) return amp_load_oom(c);
        AmpCode rc = amp_load_value_info(c, e, gp->input[i].p, gp->input[i].len);
        if (rc) return rc;
    }
    return AMP_OK;
}

/* The graph's initializers, then its sparse initializers made dense (load_sparse.c),
 * named by their values (SparseTensorProto: values.name is the tensor's name). */
static AmpCode load_initializers(LoadCtx *c, AmpGraph *g, const GraphParts *gp, const char *gwhere) {
    AmpArena *a = c->arena;
    for (size_t i = 0; i < gp->n_init + gp->n_sparse; i++) {
        bool sparse = i >= gp->n_init;
        Span s = sparse ? gp->sparse[i - gp->n_init] : gp->init[i];
        AmpTensor *t;
        AmpCode rc = sparse ? amp_load_sparse_dense(c, s.p, s.len, gwhere, &t) : AMP_OK;
        if (rc) return rc;
        const char *name = sparse ? t->name : NULL;
        size_t len = name ? strlen(name) : 0;
        if (sparse ? !len : !amp_load_name(s.p, s.len, 8, &name, &len) || !len)
            return amp_fail(c->st, AMP_ERR_INPUT, "%s: %sinitializer %zu has no name", gwhere, sparse ? "sparse " : "",
                            sparse ? i - gp->n_init : i);
        AmpValue *v = amp_load_value_in(c, g, name, len, amp_name_hash(name, len));
        if (!v) return amp_load_oom(c);
        if (v->flags & AMP_VALUE_INITIALIZER)
            return amp_fail(c->st, AMP_ERR_INPUT, "%s: initializer '%s' is defined twice", gwhere, v->name);
        if (!sparse && (rc = amp_load_tensor(c, s.p, s.len, gwhere, &t))) return rc;
        if (amp_graph_add_initializer(g, v, t)) return amp_load_oom(c);
        if (v->type.kind == AMP_TYPE_NONE) {
            v->type.kind = AMP_TYPE_TENSOR;
            v->type.dtype = t->dtype;
            v->type.rank = (int)t->ndims;
            if (t->ndims) {
                v->type.dims = amp_arena_calloc(a, t->ndims, sizeof *v->type.dims);
                if (!v->type.dims) return amp_load_oom(c);
                for (size_t k = 0; k < t->ndims; k++) v->type.dims[k].value = t->dims[k];
            }
        }
    }
    return AMP_OK;
}

static AmpCode load_outputs(LoadCtx *c, AmpGraph *g, const GraphParts *gp, const char *gwhere) {
    for (size_t i = 0; i < gp->n_output; i++) {
        const char *name;
        size_t len;
        if (!amp_load_name(gp->output[i].p, gp->output[i].len, 1, &name, &len) || !len)
            return amp_fail(c->st, AMP_ERR_INPUT, "%s: output %zu has no name", gwhere, i);
        uint64_t h = amp_name_hash(name, len);
        AmpValue *v = amp_graph_lookup_h(g, name, len, h);
        if (!v) {
            if (!(v = amp_graph_value_h(g, name, len, h))) return amp_load_oom(c);
            v->flags |= AMP_VALUE_UNDEFINED;
        }
        unsigned was = v->flags;
        AmpValueInfo *e = amp_graph_add_output(g, v);
        if (!e) return amp_load_oom(c);
        if (v->graph != g) v->flags = was; /* an outer value returned as is */
        AmpCode rc = amp_load_value_info(c, e, gp->output[i].p, gp->output[i].len);
        if (rc) return rc;
    }
    for (size_t i = 0; i < gp->n_vi; i++) {
        const char *name = "";
        size_t len = 0;
        bool named = amp_load_name(gp->vi[i].p, gp->vi[i].len, 1, &name, &len);
        uint64_t h = amp_name_hash(name, len);
        AmpValue *v = named ? amp_graph_lookup_h(g, name, len, h) : NULL;
        if (!v && !(v = amp_graph_value_h(g, name, len, h))) return amp_load_oom(c);
        AmpValueInfo *e = amp_graph_add_value_info(g, v);
        if (!e) return amp_load_oom(c);
        AmpCode rc = amp_load_value_info(c, e, gp->vi[i].p, gp->vi[i].len);
        if (rc) return rc;
    }
    return AMP_OK;
}

/* Remembers g (and what to call it) for the topological sort at the end of the load. */
static AmpCode graph_done(LoadCtx *c, AmpGraph *g, const char *gwhere) {
    if (c->n_graphs == c->cap_graphs) {
        size_t cap = c->cap_graphs ? c->cap_graphs * 2 : 8;
        AmpGraph **gs = realloc(c->graphs, cap * sizeof *gs);
        const char **ws = realloc(c->wheres, cap * sizeof *ws);
        if (gs) c->graphs = gs;
        if (ws) c->wheres = ws;
        if (!gs || !ws) return amp_load_oom(c);
        c->cap_graphs = cap;
    }
    c->graphs[c->n_graphs] = g;
    if (!(c->wheres[c->n_graphs++] = amp_arena_strdup(c->arena, gwhere))) return amp_load_oom(c);
    return AMP_OK;
}

/* node_threads: how many threads load the nodes (this one and helpers). */
static AmpCode graph_body(LoadCtx *c, AmpGraph *g, const uint8_t *p, const uint8_t *end, GraphParts *gp,
                          const char *gwhere, int node_threads) {
    AmpCode rc;
    if ((rc = load_inputs(c, g, gp, gwhere)) || (rc = load_initializers(c, g, gp, gwhere))) return rc;
    /* Pass 1: nodes and their outputs, so inputs can refer to any node's output. The
     * nodes are one array, so every walk over the graph reads memory in order. */
    AmpNode *nodes = gp->n_node ? amp_arena_calloc(c->arena, gp->n_node, sizeof *nodes) : NULL;
    if (gp->n_node && !nodes) return amp_load_oom(c);
    /* Nodes AMP_PREFETCH_AHEAD in front announce their outputs' names, so that their
     * places in the name map are fetched meanwhile (AMP_PREFETCH_MIN_VALUES: in big
     * graphs only). */
    size_t ahead = g->n_values + gp->n_node >= AMP_PREFETCH_MIN_VALUES ? AMP_PREFETCH_AHEAD : 0;
    /* The main graph's nodes, when many, are prepared by helper threads meanwhile. */
    AmpLoadPar *par = node_threads >= 2
                          ? amp_load_par_start(c, g, nodes, gp->node, gp->n_node, node_threads, ahead != 0)
                          : NULL;
    if (par) ahead = 0;
    for (size_t i = 0; i < gp->n_node && i < ahead; i++) amp_load_prefetch_outputs(c, g, gp->node[i], i);
    size_t n_later = 0;
    for (size_t i = 0; i < gp->n_node; i++) {
        if (ahead && i + ahead < gp->n_node) amp_load_prefetch_outputs(c, g, gp->node[i + ahead], i + ahead);
        rc = par ? amp_load_par_node(par, i, gwhere) : amp_load_node_pass1(c, g, &nodes[i], gp->node[i], i, gwhere);
        if (rc) break;
        /* The nodes left for pass 2 go to the front of the span list, with their index in
         * the (unused from here) length of the spans of nodes done. */
        if (nodes[i].mark & AMP_NODE_LATER) {
            gp->node[n_later] = gp->node[i];
            gp->later_index[n_later++] = i;
        }
    }
    amp_load_par_end(par);
    if (rc) return rc;
    /* Pass 2: attributes and inputs of the nodes pass 1 left, in order. */
    for (size_t k = 0; k < n_later; k++)
        if ((rc = amp_load_node_pass2(c, g, &nodes[gp->later_index[k]], gp->node[k]))) return rc;
    if ((rc = load_outputs(c, g, gp, gwhere))) return rc;
    if (gp->rest && (rc = amp_load_rest(c, &onnx__graph_proto__descriptor, p, end, GRAPH_MODELLED, &g->rest)))
        return rc;
    return graph_done(c, g, gwhere);
}

/* The table of values met lately, sized for the first graph loaded (the main one): a
 * small model does not pay for clearing a big one. */
static AmpCode recent_new(LoadCtx *c, size_t n_values) {
    size_t n = AMP_RECENT_MIN;
    while (n < AMP_RECENT_MAX && n < 2 * n_values) n *= 2;
    if (!(c->recent = calloc(n, sizeof *c->recent))) return amp_load_oom(c);
    c->recent_mask = n - 1;
    return AMP_OK;
}

AmpCode amp_load_graph(LoadCtx *c, const uint8_t *p, size_t len, AmpGraph *parent, AmpNode *owner,
                       const char *where, AmpGraph **out) {
    if (++c->depth > AMP_MAX_GRAPH_DEPTH)
        return amp_fail(c->st, AMP_ERR_INPUT, "%s: subgraphs nested deeper than %d", where, AMP_MAX_GRAPH_DEPTH);
    AmpGraph *g = amp_graph_new(c->m, parent);
    if (!g) return amp_load_oom(c);
    *out = g;
    g->owner = owner;
    const uint8_t *end = p + len;
    GraphParts gp;
    AmpCode rc = graph_parts(c, g, p, end, &gp);
    /* Messages name the graph, or for an unnamed one where it hangs (an attribute). */
    char gwhere[320];
    if (g->name && *g->name) snprintf(gwhere, sizeof gwhere, "graph '%s'", g->name);
    else snprintf(gwhere, sizeof gwhere, "%s", where);
    /* The main graph's nodes are most of the model: room for them (and for what a
     * conversion adds) in one block, so a big model costs few page faults, faulted in by
     * a helper thread while the nodes are made (see below). The helper starts last: while
     * it works, every mapping the loader makes waits for its current step. */
    size_t expect = parent ? 0 : gp.n_node * AMP_ARENA_BYTES_PER_NODE;
    if (!rc) amp_arena_expect(c->arena, expect);
    if (!rc) rc = graph_spans(c, p, end, &gp);
    if (!rc && !c->recent) rc = recent_new(c, gp.n_node + gp.n_input + gp.n_init);
    /* Room for every value named in the graph, and in the main graph for those a
     * conversion adds (about 0.3 per node for inference), so the name map is not
     * rebuilt half way through the AMP pass. */
    size_t n_named = gp.n_input + gp.n_init + gp.n_node + gp.n_output + (parent ? 0 : gp.n_node / 2);
    if (!rc && !amp_graph_reserve_values(g, n_named)) rc = amp_load_oom(c);
    /* The loading thread's helpers: one faulting the block in, and from three threads
     * on the others preparing nodes (load_par.c). On two CPUs a node helper in place of
     * the prefault thread was no faster (10k nodes: load 5.3-5.8 ms at best against 4.2;
     * 100k: medians within the noise), though with the prefault thread off on both sides
     * one node helper took the 100k load from 78 to 60 ms. With one thread (threads 1),
     * neither helper runs. */
    int node_threads = !parent && gp.n_node >= c->par_min && c->threads >= 3 ? c->threads - 1 : 1;
    if (!rc && c->threads >= 2) amp_arena_prefault(c->arena, expect);
    if (!rc) rc = graph_body(c, g, p, end, &gp, gwhere, node_threads);
    free(gp.all);
    free(gp.later_index);
    c->depth--;
    return rc;
}

/* ---- after the load: use lists and topological order -------------------------------- */

/* One graph of the walk below: the position of the node being visited, and whether
 * some node reads a value made later (the graph needs sorting). */
typedef struct FillFrame {
    const AmpGraph *g;
    int cur;
    bool unsorted;
} FillFrame;

/* Appends every use in the order the inputs were met while loading: a node's subgraphs
 * first (their attributes were loaded before its inputs), then its own inputs. On the
 * way, numbers the nodes (AmpNode.mark, 0 before) and checks the order as
 * amp_graph_toposort would: a producer of the node's graph, or of an enclosing graph for
 * a subgraph's node, must come before it (or before the node owning the subgraph).
 * Graphs out of order are sorted, inner ones first. */
static AmpCode fill_uses(LoadCtx *c, AmpGraph *g, FillFrame *frames, int depth) {
    FillFrame *f = &frames[depth];
    *f = (FillFrame){g, 0, false};
    AmpCode rc;
    for (AmpNode *n = g->first; n; n = n->next) {
        n->mark = ++f->cur;
        for (size_t i = 0; i < n->n_attrs; i++) {
            AmpAttr *at = &n->attrs[i];
            if (at->g && (rc = fill_uses(c, at->g, frames, depth + 1))) return rc;
            for (size_t k = 0; k < at->n_graphs; k++)
                if ((rc = fill_uses(c, at->graphs[k], frames, depth + 1))) return rc;
        }
        for (int k = 0; k < n->n_inputs; k++) {
            AmpValue *v = n->inputs[k];
            if (!v) continue;
            v->uses[v->n_uses++] = (AmpUse){n, k};
            if (!v->producer) continue;
            for (int d = depth; d >= 0; d--)
                if (frames[d].g == v->graph) {
                    int pm = v->producer->mark;
                    if (pm == 0 || pm >= frames[d].cur) frames[d].unsorted = true;
                    break;
                }
        }
    }
    if (!f->unsorted) return AMP_OK;
    if ((rc = amp_graph_toposort(g, c->st)))
        for (size_t i = 0; i < c->n_graphs; i++)
            if (c->graphs[i] == g) amp_status_prefix(c->st, "%s: ", c->wheres[i]);
    return rc;
}

static AmpCode finish_model(LoadCtx *c) {
    AmpModel *m = c->m;
    /* Every use list exactly as long as its value's count (one after the other in the
     * arena: an AmpUse is 16 bytes, its unit). */
    for (size_t i = 0; i < c->n_graphs; i++)
        for (size_t k = 0; k < c->graphs[i]->n_values; k++) {
            AmpValue *v = c->graphs[i]->values[k];
            if (!v->n_uses) continue;
            if (!(v->uses = amp_arena_alloc_raw(&m->arena, v->n_uses * sizeof *v->uses))) return amp_load_oom(c);
            v->cap_uses = v->n_uses;
            v->n_uses = 0;
        }
    FillFrame frames[AMP_MAX_GRAPH_DEPTH + 1];
    AmpCode rc = fill_uses(c, m->graph, frames, 0);
    for (size_t i = 0; !rc && i < m->n_training; i++) {
        if (m->training[i].initialization) rc = fill_uses(c, m->training[i].initialization, frames, 0);
        if (!rc && m->training[i].algorithm) rc = fill_uses(c, m->training[i].algorithm, frames, 0);
    }
    return rc;
}

/* ---- model ----------------------------------------------------------------------- */

enum { M_IR = 1, M_PRODUCER = 2, M_PRODUCER_VERSION = 3, M_DOMAIN = 4, M_MODEL_VERSION = 5, M_DOC = 6,
       M_GRAPH = 7, M_OPSET = 8, M_METADATA = 14, M_TRAINING = 20, M_FUNCTIONS = 25 };
#define MODEL_MODELLED                                                                                   \
    (BIT(M_IR) | BIT(M_PRODUCER) | BIT(M_PRODUCER_VERSION) | BIT(M_DOMAIN) | BIT(M_MODEL_VERSION) |     \
     BIT(M_DOC) | BIT(M_GRAPH) | BIT(M_OPSET) | BIT(M_METADATA) | BIT(M_TRAINING) | BIT(M_FUNCTIONS))

static AmpCode load_opset(LoadCtx *c, const AmpWireField *of, AmpOpset *o) {
    const uint8_t *p = of->data, *end = of->data + of->len;
    AmpWireField f;
    int r;
    while ((r = amp_wire_next(&p, end, &f)) > 0) {
        if (f.num == 1) {
            if (f.wt != AMP_WT_LEN) return amp_load_malformed(c);
            if (!(o->domain = amp_load_str(c, &f))) return amp_load_oom(c);
        } else if (f.num == 2) {
            if (f.wt != AMP_WT_VARINT) return amp_load_malformed(c);
            o->version = (int64_t)f.v;
            o->has_version = true;
        }
    }
    if (r < 0) return amp_load_malformed(c);
    const char *d = o->domain ? o->domain : "";
    /* The contract: a newer opset is bad input (exit 1), with a message saying
     * what ampc knows. */
    if (amp_domain_is_default(d) && o->version > AMP_MAX_ONNX_OPSET)
        return amp_fail(c->st, AMP_ERR_INPUT, "the model imports ai.onnx opset %lld; ampc knows opsets up to %d",
                        (long long)o->version, AMP_MAX_ONNX_OPSET);
    return AMP_OK;
}

/* Whether a tensor of the FunctionProto's nodes keeps its data in a file (load_function
 * refuses it: a function is kept as it is, and its data would not follow into OUT). */
static bool nodes_external(Onnx__NodeProto **nodes, size_t n);

static bool tensor_external(const Onnx__TensorProto *t) {
    return t && (t->n_external_data || (t->has_data_location && t->data_location == 1));
}

static bool sparse_external(const Onnx__SparseTensorProto *s) {
    return s && (tensor_external(s->values) || tensor_external(s->indices));
}

static bool graph_external(const Onnx__GraphProto *g) {
    if (!g) return false;
    for (size_t i = 0; i < g->n_initializer; i++)
        if (tensor_external(g->initializer[i])) return true;
    for (size_t i = 0; i < g->n_sparse_initializer; i++)
        if (sparse_external(g->sparse_initializer[i])) return true;
    return nodes_external(g->node, g->n_node);
}

static bool nodes_external(Onnx__NodeProto **nodes, size_t n) {
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < nodes[i]->n_attribute; k++) {
            const Onnx__AttributeProto *a = nodes[i]->attribute[k];
            bool ext = tensor_external(a->t) || sparse_external(a->sparse_tensor) || graph_external(a->g);
            for (size_t j = 0; !ext && j < a->n_tensors; j++) ext = tensor_external(a->tensors[j]);
            for (size_t j = 0; !ext && j < a->n_sparse_tensors; j++) ext = sparse_external(a->sparse_tensors[j]);
            for (size_t j = 0; !ext && j < a->n_graphs; j++) ext = graph_external(a->graphs[j]);
            if (ext) return true;
        }
    return false;
}

static AmpCode load_function(LoadCtx *c, const AmpWireField *ff, AmpFunction *fn) {
    AmpCode rc = amp_load_two_strs(c, ff, 1, &fn->name, 10, &fn->domain); /* name, domain */
    if (rc) return rc;
    /* The FunctionProto is kept as it is, once protobuf-c has checked it against the schema. */
    ProtobufCMessage *msg;
    if ((rc = amp_load_unpack(c, &onnx__function_proto__descriptor, ff->data, ff->len, &msg))) return rc;
    const Onnx__FunctionProto *fp = (const Onnx__FunctionProto *)msg;
    bool external = nodes_external(fp->node, fp->n_node);
    protobuf_c_message_free_unpacked(msg, NULL);
    if (external)
        return amp_fail(c->st, AMP_ERR_UNSUPPORTED, "function '%s': a tensor of its body keeps its data in an external "
                        "file, which ampc would not carry into its output", fn->name ? fn->name : "");
    fn->packed.len = ff->len;
    if (!(fn->packed.data = amp_arena_memdup(c->arena, ff->data, ff->len))) return amp_load_oom(c);
    return AMP_OK;
}

enum { TI_INIT = 1, TI_ALGORITHM = 2, TI_INIT_BINDING = 3, TI_UPDATE_BINDING = 4 };

static AmpCode load_training(LoadCtx *c, const AmpWireField *tf, AmpTrainingInfo *ti) {
    const uint8_t *p = tf->data, *end = tf->data + tf->len, *q = p;
    AmpWireField f;
    int r;
    size_t n[5] = {0};
    bool rest = false;
    while ((r = amp_wire_next(&q, end, &f)) > 0) {
        if (f.num > TI_UPDATE_BINDING) {
            rest = true;
            continue;
        }
        if (f.wt != AMP_WT_LEN) return amp_load_malformed(c);
        n[f.num]++;
    }
    if (r < 0) return amp_load_malformed(c);
    AmpModel *m = c->m;
    const uint8_t *data;
    size_t len;
    AmpCode rc;
    if (n[TI_INIT] && ((rc = amp_load_merged(c, p, end, TI_INIT, n[TI_INIT], &data, &len)) ||
                       (rc = amp_load_graph(c, data, len, m->graph, NULL, "training_info initialization",
                                            &ti->initialization))))
        return rc;
    if (n[TI_ALGORITHM] && ((rc = amp_load_merged(c, p, end, TI_ALGORITHM, n[TI_ALGORITHM], &data, &len)) ||
                            (rc = amp_load_graph(c, data, len, m->graph, NULL, "training_info algorithm",
                                                 &ti->algorithm))))
        return rc;
    if ((rc = amp_load_pairs(c, p, end, TI_INIT_BINDING, n[TI_INIT_BINDING], &ti->init_bindings))) return rc;
    ti->n_init_bindings = n[TI_INIT_BINDING];
    if ((rc = amp_load_pairs(c, p, end, TI_UPDATE_BINDING, n[TI_UPDATE_BINDING], &ti->update_bindings)))
        return rc;
    ti->n_update_bindings = n[TI_UPDATE_BINDING];
    if (rest)
        return amp_load_rest(c, &onnx__training_info_proto__descriptor, p, end,
                             BIT(TI_INIT) | BIT(TI_ALGORITHM) | BIT(TI_INIT_BINDING) | BIT(TI_UPDATE_BINDING),
                             &ti->rest);
    return AMP_OK;
}

/* Counts of the model's repeated fields; its singular fields as read. */
static AmpCode model_fields(LoadCtx *c, const uint8_t *p, const uint8_t *end, size_t *n, bool *rest) {
    AmpModel *m = c->m;
    AmpWireField f;
    int r;
    while ((r = amp_wire_next(&p, end, &f)) > 0) {
        if (f.num >= 32 || !(MODEL_MODELLED & BIT(f.num))) {
            *rest = true;
            continue;
        }
        bool varint = f.num == M_IR || f.num == M_MODEL_VERSION;
        if (f.wt != (varint ? AMP_WT_VARINT : AMP_WT_LEN)) return amp_load_malformed(c);
        n[f.num]++;
        const char **s = NULL;
        switch (f.num) {
        case M_IR: m->has |= AMP_MODEL_HAS_IR_VERSION, m->ir_version = (int64_t)f.v; break;
        case M_MODEL_VERSION: m->has |= AMP_MODEL_HAS_MODEL_VERSION, m->model_version = (int64_t)f.v; break;
        case M_PRODUCER: s = &m->producer_name; break;
        case M_PRODUCER_VERSION: s = &m->producer_version; break;
        case M_DOMAIN: s = &m->domain; break;
        case M_DOC: s = &m->doc_string; break;
        default: break;
        }
        if (s && !(*s = amp_load_str(c, &f))) return amp_load_oom(c);
    }
    return r < 0 ? amp_load_malformed(c) : AMP_OK;
}

static AmpCode load_model(LoadCtx *c, const uint8_t *p, size_t len) {
    AmpModel *m = c->m;
    AmpArena *a = &m->arena;
    const uint8_t *end = p + len, *q;
    size_t n[32] = {0};
    bool rest = false;
    AmpCode rc = model_fields(c, p, end, n, &rest);
    if (rc) return rc;
    if (!n[M_GRAPH]) return amp_fail(c->st, AMP_ERR_INPUT, "not an ONNX model: it has no graph");
    AmpWireField f;
    if (n[M_OPSET]) {
        m->n_opsets = n[M_OPSET];
        if (!(m->opsets = amp_arena_calloc(a, m->n_opsets, sizeof *m->opsets))) return amp_load_oom(c);
        size_t k = 0;
        for (q = p; amp_wire_next(&q, end, &f) > 0;)
            if (f.num == M_OPSET && (rc = load_opset(c, &f, &m->opsets[k++]))) return rc;
    }
    /* ONNX requires opset_import from IR version 3 on: without it no op has a meaning. */
    if (!n[M_OPSET] && (!(m->has & AMP_MODEL_HAS_IR_VERSION) || m->ir_version >= 3))
        return amp_fail(c->st, AMP_ERR_INPUT, "the model imports no opset (opset_import is empty)");
    if ((rc = amp_load_pairs(c, p, end, M_METADATA, n[M_METADATA], &m->metadata))) return rc;
    m->n_metadata = n[M_METADATA];
    if (n[M_FUNCTIONS]) {
        m->n_functions = n[M_FUNCTIONS];
        if (!(m->functions = amp_arena_calloc(a, m->n_functions, sizeof *m->functions))) return amp_load_oom(c);
        size_t k = 0;
        for (q = p; amp_wire_next(&q, end, &f) > 0;)
            if (f.num == M_FUNCTIONS && (rc = load_function(c, &f, &m->functions[k++]))) return rc;
    }
    const uint8_t *gdata;
    size_t glen;
    if ((rc = amp_load_merged(c, p, end, M_GRAPH, n[M_GRAPH], &gdata, &glen)) ||
        (rc = amp_load_graph(c, gdata, glen, NULL, NULL, "graph", &m->graph)))
        return rc;
    if (n[M_TRAINING]) {
        m->n_training = n[M_TRAINING];
        if (!(m->training = amp_arena_calloc(a, m->n_training, sizeof *m->training))) return amp_load_oom(c);
        size_t k = 0;
        for (q = p; amp_wire_next(&q, end, &f) > 0;)
            if (f.num == M_TRAINING && (rc = load_training(c, &f, &m->training[k++]))) return rc;
    }
    if (rest && (rc = amp_load_rest(c, &onnx__model_proto__descriptor, p, end, MODEL_MODELLED, &m->rest)))
        return rc;
    return finish_model(c);
}

/* ---- entry points ----------------------------------------------------------------- */

static void ctx_free(LoadCtx *c) {
    free(c->scratch);
    free(c->graphs);
    free(c->wheres);
    free(c->recent);
    free(c->fields);
    amp_load_nest_free(c);
}

AmpCode amp_load_bytes(const void *data, size_t len, const char *dir, const AmpLoadOptions *opt, bool borrow,
                       AmpModel **out, AmpStatus *st) {
    *out = NULL;
    if (len == 0) return amp_fail(st, AMP_ERR_INPUT, "the file is empty");
    const uint8_t *bytes = data;
    AmpModel *m = amp_model_new();
    if (!m) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    if (dir && !(m->dir = amp_arena_strdup(&m->arena, dir))) {
        amp_model_free(m);
        return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    }
    LoadCtx *c = calloc(1, sizeof *c);
    if (!c) {
        amp_model_free(m);
        return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    }
    c->m = m;
    c->arena = &m->arena;
    c->st = st;
    c->total = len;
    c->threads = opt && opt->threads > 0 ? opt->threads : amp_threads();
    c->par_min = opt && opt->parallel_min_nodes ? opt->parallel_min_nodes : AMP_LOAD_PARALLEL_MIN;
    c->borrow_raw = borrow;
    c->load_graph = amp_load_graph;
    AmpCode rc = load_model(c, bytes, len);
    ctx_free(c);
    free(c);
    if (!rc && !(opt && opt->skip_verify)) rc = amp_verify_model(m, st);
    amp_arena_prefault_stop(&m->arena); /* no thread outlives the load */
    if (rc) {
        amp_model_free(m);
        return rc;
    }
    *out = m;
    return AMP_OK;
}

AmpCode amp_model_load_bytes(const void *data, size_t len, const char *dir, const AmpLoadOptions *opt,
                             AmpModel **out, AmpStatus *st) {
    return amp_load_bytes(data, len, dir, opt, false, out, st);
}

AmpCode amp_tensor_load_bytes(AmpModel *m, const void *data, size_t len, AmpTensor **out, AmpStatus *st) {
    *out = NULL;
    static const uint8_t empty[1];
    if (!len) data = empty; /* no arithmetic on a null pointer below */
    LoadCtx *c = calloc(1, sizeof *c);
    if (!c) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    c->m = m;
    c->arena = &m->arena;
    c->st = st;
    c->total = len;
    c->tensor_file = true;
    c->load_graph = amp_load_graph;
    AmpCode rc = amp_load_tensor(c, data, len, "tensor file", out);
    if (rc) *out = NULL;
    ctx_free(c);
    free(c);
    return rc;
}
