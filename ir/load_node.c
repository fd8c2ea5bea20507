/* The loader's NodeProtos (load.c calls it for each graph): a node made in pass 1 with
 * its outputs, and finished there when it can be (its inputs all known), else in pass 2;
 * op types interned, names hashed once and looked up first among the values met lately. */
#include <stdlib.h>
#include <string.h>

#include "ir/load_impl.h"
#include "ir/names.h"
#include "ir/precision.h"

#define BIT(n) (1u << (n))
/* The parts of pass 1 are inlined into each of their two callers (the serial pass 1 and
 * the parallel halves): a call each cost the serial load 7% more instructions. */
#if defined(__GNUC__)
#define AMP_INLINE inline __attribute__((always_inline))
#else
#define AMP_INLINE inline
#endif

/* ---- names ----------------------------------------------------------------------- */

static AmpRecent *recent_slot(LoadCtx *c, uint64_t h) {
    return &c->recent[(h >> 40) & c->recent_mask];
}

/* The value of g's own scope named so, made if absent (amp_graph_value), remembered. */
AmpValue *amp_load_value_in(LoadCtx *c, AmpGraph *g, const char *name, size_t len, uint64_t h) {
    AmpValue *v = amp_graph_value_h(g, name, len, h);
    if (v) *recent_slot(c, h) = (AmpRecent){v, h};
    return v;
}

/* amp_graph_lookup: the value named so that g sees (its scope, then enclosing ones). A
 * remembered value answers only when it is of g's own scope, which is searched first. */
AmpValue *amp_load_lookup(LoadCtx *c, AmpGraph *g, const char *name, size_t len, uint64_t h) {
    AmpRecent *r = recent_slot(c, h);
    if (r->h == h && r->v && r->v->graph == g && amp_value_named(r->v, name, len))
        return r->v;
    AmpValue *v = amp_graph_lookup_h(g, name, len, h);
    if (v && v->graph == g) *r = (AmpRecent){v, h};
    return v;
}

/* ---- nodes ----------------------------------------------------------------------- */

enum { N_INPUT = 1, N_OUTPUT = 2, N_NAME = 3, N_OP = 4, N_ATTR = 5, N_DOC = 6, N_DOMAIN = 7 };
#define NODE_MODELLED \
    (BIT(N_INPUT) | BIT(N_OUTPUT) | BIT(N_NAME) | BIT(N_OP) | BIT(N_ATTR) | BIT(N_DOC) | BIT(N_DOMAIN))

/* What the one sweep over a NodeProto finds: the last of each string, counts, and the
 * inputs, outputs and attributes in file order (LoadCtx.fields, n_fields of them). */
typedef struct NodeHead {
    AmpNodeField name, op, domain, doc;
    bool has_name, has_op, has_domain, has_doc, rest;
    size_t n_in, n_out, n_attr, n_fields;
} NodeHead;

static AMP_INLINE AmpCode node_head(LoadCtx *c, Span s, NodeHead *h) {
    *h = (NodeHead){0};
    const uint8_t *p = s.p, *end = s.p + s.len;
    AmpWireField f;
    int r;
    while ((r = amp_wire_next(&p, end, &f)) > 0) {
        if (f.num > N_DOMAIN) {
            h->rest = true;
            continue;
        }
        if (f.wt != AMP_WT_LEN) return amp_load_malformed(c);
        AmpNodeField nf = {f.num, f.data, f.len, 0};
        switch (f.num) {
        case N_INPUT: h->n_in++; break;
        case N_OUTPUT: h->n_out++; break;
        case N_ATTR: h->n_attr++; break;
        case N_NAME: h->name = nf, h->has_name = true; continue;
        case N_OP: h->op = nf, h->has_op = true; continue;
        case N_DOMAIN: h->domain = nf, h->has_domain = true; continue;
        default: h->doc = nf, h->has_doc = true; continue;
        }
        if (h->n_fields == c->cap_fields) {
            size_t cap = c->cap_fields ? c->cap_fields * 2 : 64;
            AmpNodeField *fs = realloc(c->fields, cap * sizeof *fs);
            if (!fs) return amp_load_oom(c);
            c->fields = fs;
            c->cap_fields = cap;
        }
        c->fields[h->n_fields++] = nf;
    }
    return r < 0 ? amp_load_malformed(c) : AMP_OK;
}

/* op_type and domain come from a handful of strings: one copy of each pair, and its op. */
static AmpCode intern_op(LoadCtx *c, const NodeHead *h, AmpNode *n) {
    const char *op = h->has_op ? (const char *)h->op.data : NULL;
    const char *dom = h->has_domain ? (const char *)h->domain.data : NULL;
    size_t op_len = op ? amp_wire_cstrlen(h->op.data, h->op.len) : 0;
    size_t dom_len = dom ? amp_wire_cstrlen(h->domain.data, h->domain.len) : 0;
    uint64_t hash = (op ? amp_name_hash(op, op_len) : 0) * 31 + (dom ? amp_name_hash(dom, dom_len) : 0);
    hash = (hash << 2 | (op != NULL) << 1 | (dom != NULL)) | 1u << 31; /* never 0 */
    AmpOpIntern *e = &c->intern[(hash >> 8) % AMP_OP_INTERN];
    if (!(e->h == hash && e->op_len == op_len && e->dom_len == dom_len && (e->op_type != NULL) == (op != NULL) &&
          (e->domain != NULL) == (dom != NULL) && (!op || amp_bytes_eq(e->op_type, op, op_len)) &&
          (!dom || amp_bytes_eq(e->domain, dom, dom_len)))) {
        AmpArena *a = c->arena;
        const char *o = op ? amp_arena_strndup(a, op, op_len) : NULL;
        const char *d = dom ? amp_arena_strndup(a, dom, dom_len) : NULL;
        if ((op && !o) || (dom && !d)) return amp_load_oom(c);
        AmpOpId id = amp_op_lookup(d, o ? o : "");
        if (id != AMP_OP_UNKNOWN) o = amp_op_info(id)->name; /* as amp_node_new has it */
        *e = (AmpOpIntern){hash, o, d, op_len, dom_len, id};
    }
    n->op_type = e->op_type;
    n->domain = e->domain;
    n->op = e->op;
    return AMP_OK;
}

void amp_load_prefetch_outputs(LoadCtx *c, const AmpGraph *g, Span s, size_t i) {
    AmpAhead *a = &c->ahead[i % AMP_AHEAD];
    a->node = s.p;
    a->n = 0;
    const uint8_t *p = s.p, *end = s.p + s.len;
    AmpWireField f;
    while (a->n < AMP_AHEAD_OUTPUTS && amp_wire_next(&p, end, &f) > 0)
        if (f.num == N_OUTPUT && f.wt == AMP_WT_LEN) {
            uint64_t h = amp_name_hash((const char *)f.data, amp_wire_strlen(&f));
            amp_graph_prefetch_hash(g, h);
            a->h[a->n++] = h;
        } else if (f.num > N_OUTPUT) {
            break; /* outputs come before the other fields in files that are in order */
        }
}

/* AmpNode.mark while the graph loads, with AMP_NODE_LATER: the node has unmodelled
 * fields; its attributes and rest are loaded already (amp_load_node_prepare). */
enum { NODE_REST = 1, NODE_ATTRS_DONE = 4 };

/* Whether attribute record [d, d + len) holds a graph (g, field 6, or graphs, field 11). */
static bool attr_has_graph(const uint8_t *d, size_t len) {
    const uint8_t *p = d, *end = d + len;
    AmpWireField f;
    while (amp_wire_next(&p, end, &f) > 0)
        if (f.num == 6 || f.num == 11) return true;
    return false;
}

/* The node's attributes and its rest (the inputs are the caller's): from the fields
 * node_head found (fs, n_fs of them), or with fs NULL from a sweep of the node (pass 2,
 * where loading a subgraph's nodes reuses LoadCtx.fields). */
static AmpCode node_attrs(LoadCtx *c, AmpNode *n, Span s, const AmpNodeField *fs, size_t n_fs, bool rest) {
    const uint8_t *end = s.p + s.len;
    AmpCode rc = AMP_OK;
    if (n->n_attrs) {
        size_t na = n->n_attrs, k = 0;
        n->n_attrs = 0;
        if (!(n->attrs = amp_arena_calloc(c->arena, na, sizeof *n->attrs))) return amp_load_oom(c);
        n->n_attrs = na;
        if (fs) {
            for (size_t j = 0; !rc && j < n_fs; j++)
                if (fs[j].num == N_ATTR) rc = amp_load_attr(c, fs[j].data, fs[j].len, n, &n->attrs[k++]);
        } else {
            AmpWireField f;
            for (const uint8_t *p = s.p; !rc && k < na && amp_wire_next(&p, end, &f) > 0;)
                if (f.num == N_ATTR) rc = amp_load_attr(c, f.data, f.len, n, &n->attrs[k++]);
        }
        if (rc) return rc;
    }
    return rest ? amp_load_rest(c, &onnx__node_proto__descriptor, s.p, end, NODE_MODELLED, &n->rest) : AMP_OK;
}

/* The node itself from its sweep: the input and output arrays and the name right behind
 * it, op type, doc string and the count of attributes (their array is made with them).
 * Not yet in the graph: no id, no values. */
static AMP_INLINE AmpCode node_make(LoadCtx *c, AmpGraph *g, AmpNode *n, const NodeHead *h) {
    AmpArena *a = c->arena;
    size_t name_len = h->has_name ? amp_wire_cstrlen(h->name.data, h->name.len) : 0;
    size_t io = (h->n_in + h->n_out) * sizeof(AmpValue *), tail = io + (h->has_name ? name_len + 1 : 0);
    uint8_t *t = tail ? amp_arena_alloc(a, tail) : NULL;
    if (tail && !t) return amp_load_oom(c);
    n->graph = g;
    n->n_inputs = (int)h->n_in;
    n->n_outputs = (int)h->n_out;
    n->inputs = h->n_in ? (AmpValue **)t : NULL;
    n->outputs = h->n_out ? (AmpValue **)t + h->n_in : NULL;
    if (h->has_name) {
        char *name = (char *)t + io;
        amp_copy(name, h->name.data, name_len);
        name[name_len] = '\0';
        n->name = name;
        n->origin = (uint8_t)amp_origin_of_name(name); /* the name is the origin in a file */
    }
    AmpCode rc = intern_op(c, h, n);
    if (rc) return rc;
    if (h->has_doc && !(n->doc_string = amp_arena_strndup(a, (const char *)h->doc.data,
                                                          amp_wire_cstrlen(h->doc.data, h->doc.len))))
        return amp_load_oom(c);
    n->n_attrs = h->n_attr;
    return AMP_OK;
}

/* A name field's length as a C string: a field with its hash (amp_load_node_prepare's)
 * was cut at its NUL already. */
static inline size_t field_name_len(const AmpNodeField *f) {
    return f->h ? f->len : amp_wire_cstrlen(f->data, f->len);
}

/* The node into g in file order: its id, its outputs defined, and when every input
 * names a value of g made already (and `later` is not set already) its inputs bound and
 * counted; else *later, and the inputs are left for pass 2. fs: the node's fields in file
 * order (others than inputs and outputs are passed over), with their hashes where known
 * (0: not yet), or for the first n_known outputs those in `known` (found ahead). */
static AMP_INLINE AmpCode node_bind(LoadCtx *c, AmpGraph *g, AmpNode *n, const AmpNodeField *fs, size_t n_fs,
                                    const uint64_t *known, size_t n_known, const char *gwhere, bool *later) {
    n->id = c->m->next_node_id++;
    amp_node_append(g, n);
    int k = 0;
    for (size_t j = 0; j < n_fs; j++) {
        if (fs[j].num != N_OUTPUT) continue;
        int slot = k++;
        size_t len = field_name_len(&fs[j]);
        if (!len) continue;
        const char *name = (const char *)fs[j].data;
        uint64_t h = (size_t)slot < n_known ? known[slot] : fs[j].h ? fs[j].h : amp_name_hash(name, len);
        AmpValue *v = amp_load_value_in(c, g, name, len, h);
        if (!v) return amp_load_oom(c);
        if (v->producer || (v->flags & (AMP_VALUE_INPUT | AMP_VALUE_INITIALIZER)))
            return amp_fail(c->st, AMP_ERR_INPUT, "%s: node '%s' (%s): output '%s' is already defined by %s%s%s",
                            gwhere, n->name ? n->name : "", n->op_type ? n->op_type : "", v->name,
                            v->producer ? "node '" : "a graph input or initializer",
                            v->producer ? (v->producer->name ? v->producer->name : "") : "",
                            v->producer ? "'" : "");
        amp_node_set_output(n, slot, v);
    }
    AmpValue **in = n->inputs;
    for (size_t j = 0; !*later && j < n_fs; j++) {
        if (fs[j].num != N_INPUT) continue;
        AmpValue **slot = in++;
        size_t len = field_name_len(&fs[j]);
        if (!len) continue;
        const char *name = (const char *)fs[j].data;
        AmpValue *v = amp_load_lookup(c, g, name, len, fs[j].h ? fs[j].h : amp_name_hash(name, len));
        if (!v || v->graph != g) *later = true;
        else *slot = v;
    }
    if (*later) {
        for (k = 0; k < n->n_inputs; k++) n->inputs[k] = NULL;
        return AMP_OK;
    }
    /* Inputs are only counted on their values here; the use lists are made once the whole
     * model is loaded (fill_uses). */
    for (k = 0; k < n->n_inputs; k++)
        if (n->inputs[k]) n->inputs[k]->n_uses++;
    return AMP_OK;
}

/* Pass 1 for one node: the node itself, appended to g, and its outputs defined. When
 * every input names a value of g made already (a graph input, an initializer, an earlier
 * node's output: always so in a graph in topological order) and no attribute holds a
 * graph, the node is finished here; else in pass 2, where inputs may name outputs of
 * later nodes and subgraphs see them all. The NodeProto is swept once (node_head); what
 * follows reads the fields it found. */
AmpCode amp_load_node_pass1(LoadCtx *c, AmpGraph *g, AmpNode *n, Span s, size_t i, const char *gwhere) {
    NodeHead h;
    AmpCode rc = node_head(c, s, &h);
    if (rc) return rc;
    if (h.n_in > INT32_MAX || h.n_out > INT32_MAX)
        return amp_fail(c->st, AMP_ERR_INPUT, "%s: node %zu has too many inputs or outputs", gwhere, i);
    if ((rc = node_make(c, g, n, &h))) return rc;
    const AmpAhead *ah = &c->ahead[i % AMP_AHEAD];
    bool later = false;
    for (size_t j = 0; j < h.n_fields && !later; j++)
        if (c->fields[j].num == N_ATTR) later = attr_has_graph(c->fields[j].data, c->fields[j].len);
    if ((rc = node_bind(c, g, n, c->fields, h.n_fields, ah->h, ah->node == s.p ? ah->n : 0, gwhere, &later)))
        return rc;
    if (later) {
        n->mark = AMP_NODE_LATER | (h.rest ? NODE_REST : 0);
        return AMP_OK;
    }
    return node_attrs(c, n, s, c->fields, h.n_fields, h.rest);
}

/* Whether attribute record [d, d + len) holds a tensor or a graph (fields 5, 6, 10, 11),
 * or a sparse tensor (22, 23: made dense, or checked, by load_sparse.c). */
static bool attr_has_message(const uint8_t *d, size_t len) {
    const uint8_t *p = d, *end = d + len;
    AmpWireField f;
    while (amp_wire_next(&p, end, &f) > 0)
        if (f.num == 5 || f.num == 6 || f.num == 10 || f.num == 11 || f.num == 22 || f.num == 23) return true;
    return false;
}

bool amp_load_node_prepare(LoadCtx *w, AmpGraph *g, AmpNode *n, Span s, AmpFieldVec *names) {
    NodeHead h;
    if (node_head(w, s, &h) || h.n_in > INT32_MAX || h.n_out > INT32_MAX) return false;
    size_t need = names->n + h.n_in + h.n_out;
    if (need > names->cap) {
        size_t cap = names->cap ? names->cap : 256;
        while (cap < need) cap *= 2;
        AmpNodeField *v = realloc(names->v, cap * sizeof *v);
        if (!v) return false;
        names->v = v;
        names->cap = cap;
    }
    for (size_t j = 0; j < h.n_fields; j++) {
        AmpNodeField f = w->fields[j];
        if (f.num == N_ATTR && attr_has_message(f.data, f.len)) return false;
        if (f.num != N_INPUT && f.num != N_OUTPUT) continue;
        f.len = amp_wire_cstrlen(f.data, f.len);
        f.h = f.len ? amp_name_hash((const char *)f.data, f.len) : 0;
        names->v[names->n++] = f;
    }
    return !node_make(w, g, n, &h) && !node_attrs(w, n, s, w->fields, h.n_fields, h.rest);
}

AmpCode amp_load_node_bind(LoadCtx *c, AmpGraph *g, AmpNode *n, const AmpNodeField *names, size_t n_names,
                           const char *gwhere) {
    bool later = false;
    AmpCode rc = node_bind(c, g, n, names, n_names, NULL, 0, gwhere, &later);
    if (!rc && later) n->mark = AMP_NODE_LATER | NODE_ATTRS_DONE;
    return rc;
}

/* Pass 2 for a node left by pass 1: attributes (subgraphs see every value of this
 * scope), then the inputs. */
AmpCode amp_load_node_pass2(LoadCtx *c, AmpGraph *g, AmpNode *n, Span s) {
    bool rest = n->mark & NODE_REST, done = n->mark & NODE_ATTRS_DONE;
    n->mark = 0;
    AmpCode rc = done ? AMP_OK : node_attrs(c, n, s, NULL, 0, false);
    if (rc) return rc;
    const uint8_t *p, *end = s.p + s.len;
    AmpWireField f;
    int k = 0;
    for (p = s.p; k < n->n_inputs && amp_wire_next(&p, end, &f) > 0;) {
        if (f.num != N_INPUT) continue;
        int slot = k++;
        size_t len = amp_wire_strlen(&f);
        if (!len) continue;
        const char *name = (const char *)f.data;
        uint64_t h = amp_name_hash(name, len);
        AmpValue *v = amp_load_lookup(c, g, name, len, h);
        if (!v) {
            if (!(v = amp_load_value_in(c, g, name, len, h))) return amp_load_oom(c);
            v->flags |= AMP_VALUE_UNDEFINED;
        }
        n->inputs[slot] = v;
        v->n_uses++;
    }
    /* The nodes that follow read these most. */
    for (k = 0; k < n->n_outputs; k++) {
        AmpValue *v = n->outputs[k];
        if (!v) continue;
        uint64_t h = amp_name_hash(v->name, v->name_len);
        *recent_slot(c, h) = (AmpRecent){v, h};
    }
    return rest ? amp_load_rest(c, &onnx__node_proto__descriptor, s.p, end, NODE_MODELLED, &n->rest) : AMP_OK;
}
