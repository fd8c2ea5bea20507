/* Private to the loader: its state, shared by load.c (models and graphs) and load_msg.c
 * (tensors, attributes, types, and the `rest` blobs of unmodelled fields). The loader
 * decodes the protobuf wire format itself, straight into the model's arena. */
#ifndef AMP_LOAD_IMPL_H
#define AMP_LOAD_IMPL_H

#include "ir/ir.h"
#include "onnx.pb-c.h"
#include "ir/wire.h"

/* Subgraph nesting deeper than this is treated as hostile. */
#define AMP_MAX_GRAPH_DEPTH 64

/* (op_type, domain) as met in the file -> one copy of each string, and the op. */
typedef struct AmpOpIntern {
    uint64_t h; /* 0: empty */
    const char *op_type, *domain;
    size_t op_len, dom_len;
    AmpOpId op;
} AmpOpIntern;

enum { AMP_OP_INTERN = 256 };

/* Values met lately, by name hash: most inputs name a value made a few nodes before, or
 * a weight read all over the graph, so this small table answers most look-ups without a
 * visit to the graph's (big, cold) name map. */
typedef struct AmpRecent {
    AmpValue *v;
    uint64_t h;
} AmpRecent;

enum { AMP_RECENT_MIN = 64, AMP_RECENT_MAX = 4096 };

/* The output names' hashes of a node a few ahead of the one being made (load.c). */
enum { AMP_AHEAD = 32, AMP_AHEAD_OUTPUTS = 4 };
typedef struct AmpAhead {
    const uint8_t *node; /* the NodeProto they belong to */
    size_t n;
    uint64_t h[AMP_AHEAD_OUTPUTS];
} AmpAhead;

typedef struct AmpNestDesc AmpNestDesc; /* load_nest.c */

/* A field of the NodeProto being made, as its one sweep found it (load_node.c); for an
 * input or output, the hash of its name once known (0: not yet). */
typedef struct AmpNodeField {
    uint32_t num;
    const uint8_t *data;
    size_t len;
    uint64_t h;
} AmpNodeField;

typedef struct AmpFieldVec {
    AmpNodeField *v; /* malloc'd */
    size_t n, cap;
} AmpFieldVec;

typedef struct LoadCtx LoadCtx;
/* Loads GraphProto [p, p + len) (load.c's amp_load_graph, below). */
typedef AmpCode (*AmpLoadGraphFn)(LoadCtx *c, const uint8_t *p, size_t len, AmpGraph *parent, AmpNode *owner,
                                  const char *where, AmpGraph **out);

struct LoadCtx {
    AmpModel *m;
    AmpArena *arena;     /* where what is loaded goes: the model's, or a helper's own
                            (load_par.c), handed to the model when the load ends */
    AmpStatus *st;
    int depth;
    size_t total;        /* bytes of the whole input, for messages */
    bool tensor_file;    /* a TensorProto file, not a model (for messages) */
    uint8_t *scratch;    /* malloc'd: unmodelled fields gathered for their rest blob */
    size_t scratch_cap;
    AmpGraph **graphs;   /* malloc'd: graphs as they finish loading (inner ones first) */
    const char **wheres; /* malloc'd: what messages call each of them */
    size_t n_graphs, cap_graphs;
    AmpNestDesc *nest;   /* malloc'd (load_nest.c): message fields of the types met */
    size_t n_nest, cap_nest;
    AmpOpIntern intern[AMP_OP_INTERN];
    AmpRecent *recent;   /* malloc'd with the first graph: a power of two of entries, */
    size_t recent_mask;  /* AMP_RECENT_MIN to _MAX as the graph is big; this is one less */
    AmpAhead ahead[AMP_AHEAD];
    AmpNodeField *fields; /* malloc'd: the node's modelled fields, in file order */
    size_t cap_fields;
    int threads;          /* the most threads that load the main graph's nodes (load_par.c), */
    size_t par_min;       /* ... when it has at least this many */
    bool borrow_raw;      /* raw_data stays in the input, which the model keeps */
    /* How a graph attribute (load_msg.c) loads its graph: amp_load_graph, set by load.c
     * where a load starts. The loader's recursion (a graph's nodes hold graphs) goes back
     * up through this pointer, not by name, so the node and attribute files depend on no
     * file above them; amp_load_graph still bounds the depth. */
    AmpLoadGraphFn load_graph;
};

/* A message's bytes in the input. */
typedef struct Span {
    const uint8_t *p;
    size_t len;
} Span;


/* ---- load_wire.c: single fields, for every message (calls nothing else of the loader) ---- */

AmpCode amp_load_oom(LoadCtx *c);
/* The input's encoding is malformed (a field of the wrong wire type, a bad packed array). */
AmpCode amp_load_malformed(LoadCtx *c);

/* A copy of string field f in the arena, cut at a NUL as protobuf-c reads it; NULL only
 * when out of memory. */
const char *amp_load_str(LoadCtx *c, const AmpWireField *f);

/* The string fields numbered na and nb of message field mf, the last of each, into *a
 * and *b (left alone when absent); other fields are skipped. */
AmpCode amp_load_two_strs(LoadCtx *c, const AmpWireField *mf, uint32_t na, const char **a, uint32_t nb,
                          const char **b);
/* A StringStringEntryProto (key 1, value 2; anything else is dropped). */
AmpCode amp_load_pair(LoadCtx *c, const AmpWireField *ef, AmpStrPair *out);
/* The n StringStringEntryProtos of repeated field `num` of [msg, end), in file order. */
AmpCode amp_load_pairs(LoadCtx *c, const uint8_t *msg, const uint8_t *end, uint32_t num, size_t n,
                       AmpStrPair **out);

/* The payload of singular message field `num` of [p, end), which occurs `count` >= 1
 * times after `from`: the one payload, or (protobuf merges repeats) their concatenation,
 * copied into the arena. */
AmpCode amp_load_merged(LoadCtx *c, const uint8_t *from, const uint8_t *end, uint32_t num,
                        size_t count, const uint8_t **data, size_t *len);

/* The last `name` (field 1) of a message, as a span; false when it has none. */
bool amp_load_name(const uint8_t *p, size_t len, uint32_t num, const char **name, size_t *n);

/* ---- load_nest.c ---- */

/* protobuf-c's unpacking of the `desc` message [p, p + len), after a walk that refuses
 * nesting deeper than protobuf-c's unbounded recursion may safely take (load_nest.c):
 * every unpack of the loader goes through here. The caller frees *out. */
AmpCode amp_load_unpack(LoadCtx *c, const ProtobufCMessageDescriptor *desc, const uint8_t *p, size_t len,
                        ProtobufCMessage **out);
void amp_load_nest_free(LoadCtx *c);

/* ---- the messages: load_msg.c (rest blobs, tensors, attributes), load_type.c (value
 * infos), load.c (graphs). A graph's nodes load their graph attributes as graphs: the
 * loader's one recursion (amp_load_graph bounds its depth). ---- */

/* The rest blob of the message [p, end): its fields whose numbers are not in `modelled`
 * (a bit mask; numbers of 32 and up are never modelled) packed by protobuf-c as `desc`,
 * so they come back in canonical order with unknown fields last. */
AmpCode amp_load_rest(LoadCtx *c, const ProtobufCMessageDescriptor *desc, const uint8_t *p,
                      const uint8_t *end, uint32_t modelled, AmpBytes *out);

AmpCode amp_load_tensor(LoadCtx *c, const uint8_t *p, size_t len, const char *where,
                        AmpTensor **out);
/* ---- load_sparse.c: SparseTensorProto ---- */

/* The most dims a sparse tensor may have (ONNX's tensors have at most a few). */
#define AMP_MAX_RANK_SPARSE 64

/* A SparseTensorProto's fields: its values and indices TensorProtos (merged when
 * repeated; indices NULL when absent), and the dense shape. */
typedef struct AmpSparse {
    const uint8_t *values, *indices;
    size_t values_len, indices_len;
    size_t n_values, n_indices, ndims;
    int64_t dims[AMP_MAX_RANK_SPARSE];
} AmpSparse;

AmpCode amp_load_sparse_fields(LoadCtx *c, const uint8_t *p, size_t len, const char *where, AmpSparse *s);
/* The dense tensor s means, its values and indices (NULL: none) loaded as tensors. */
AmpCode amp_load_sparse_make(LoadCtx *c, const AmpSparse *s, AmpTensor *vals, AmpTensor *idx, const char *where,
                             AmpTensor **out);
/* AMP_ERR_UNSUPPORTED when SparseTensorProto [p, p + len), kept as it is (an unknown op's
 * attribute), has external data. */
AmpCode amp_load_sparse_check(LoadCtx *c, const uint8_t *p, size_t len, const char *where);
/* load_msg.c: all of it: SparseTensorProto [p, p + len) made dense (a sparse_initializer,
 * Constant's sparse_value), its values and indices loaded as any tensor. */
AmpCode amp_load_sparse_dense(LoadCtx *c, const uint8_t *p, size_t len, const char *where, AmpTensor **out);
/* Attribute [p, p + len) of node n; subgraphs are loaded with c->load_graph. */
AmpCode amp_load_attr(LoadCtx *c, const uint8_t *p, size_t len, AmpNode *n, AmpAttr *at);
/* One ValueInfoProto kept in e (its bytes, its type parsed; the value takes the type if
 * it has none). */
AmpCode amp_load_value_info(LoadCtx *c, AmpValueInfo *e, const uint8_t *p, size_t len);
AmpCode amp_load_graph(LoadCtx *c, const uint8_t *p, size_t len, AmpGraph *parent, AmpNode *owner,
                       const char *where, AmpGraph **out);

/* ---- load_node.c ---- */

/* amp_graph_value: the value of g's own scope named so, made if absent; remembered. */
AmpValue *amp_load_value_in(LoadCtx *c, AmpGraph *g, const char *name, size_t len, uint64_t h);
/* amp_graph_lookup: the value named so that g sees, the values met lately first. */
AmpValue *amp_load_lookup(LoadCtx *c, AmpGraph *g, const char *name, size_t len, uint64_t h);

/* Every node output is a new entry of the (big, cold) name map: its place there is
 * fetched this many nodes ahead (amp_load_prefetch_outputs, for node i), and the hashes
 * kept for when the node is made. */
enum { AMP_PREFETCH_AHEAD = 16 };
/* ... in graphs of at least this many values and nodes: at 100k nodes it saved 7% of
 * the load; at 10k (a 512 KiB map) it gained nothing measurable, load CPU medians 6.85
 * and 6.80 ms without and with it. */
enum { AMP_PREFETCH_MIN_VALUES = 16384 };
void amp_load_prefetch_outputs(LoadCtx *c, const AmpGraph *g, Span s, size_t i);

/* AmpNode.mark after pass 1: the node waits for pass 2 (0 once finished). */
enum { AMP_NODE_LATER = 2 };
/* Pass 1 for node i of g, made in *n (zeroed, of the graph's node array). */
AmpCode amp_load_node_pass1(LoadCtx *c, AmpGraph *g, AmpNode *n, Span s, size_t i, const char *gwhere);
AmpCode amp_load_node_pass2(LoadCtx *c, AmpGraph *g, AmpNode *n, Span s);

/* Pass 1 in two halves, for load_par.c. amp_load_node_prepare, in any thread with a
 * LoadCtx of its own (`w`, whose arena the node's memory comes from): what does not
 * depend on other nodes (the sweep, the node's arrays and strings, op type, attributes,
 * rest) into *n, and its input and output fields in file order, names cut at a NUL and
 * hashed, appended to *names.
 * false leaves the node to amp_load_node_pass1 (zeroed first), which then meets any
 * error in it as a serial load would: a node the sweep finds malformed, or one with a
 * tensor or graph attribute (those load as a serial load loads them). */
bool amp_load_node_prepare(LoadCtx *w, AmpGraph *g, AmpNode *n, Span s, AmpFieldVec *names);
/* ... and in file order, in the loading thread: the rest of pass 1 for a prepared node
 * (the n_names fields it appended). */
AmpCode amp_load_node_bind(LoadCtx *c, AmpGraph *g, AmpNode *n, const AmpNodeField *names, size_t n_names,
                           const char *gwhere);

/* ---- load_par.c ---- */

typedef struct AmpLoadPar AmpLoadPar;
/* threads - 1 helper threads start preparing the n nodes of g (`prefetch`: the name map
 * slots of outputs are fetched AMP_PREFETCH_AHEAD nodes ahead); NULL when threads < 2 or
 * no thread could start: the caller loads the nodes itself. */
AmpLoadPar *amp_load_par_start(LoadCtx *c, AmpGraph *g, AmpNode *nodes, const Span *spans, size_t n,
                               int threads, bool prefetch);
/* Pass 1 for node i, called for i = 0, 1, ... in turn: bound if prepared, else loaded by
 * amp_load_node_pass1. */
AmpCode amp_load_par_node(AmpLoadPar *p, size_t i, const char *gwhere);
/* Stops and joins the helpers (safe after an error at any node), gives their arenas to
 * the model's, frees p. NULL: nothing. */
void amp_load_par_end(AmpLoadPar *p);

/* load.c: decodes a whole model from data[0..len) (dir: where external data lies); with
 * `borrow`, raw_data is left in `data`, which must outlive the model. Verifies it unless
 * opt->skip_verify. */
AmpCode amp_load_bytes(const void *data, size_t len, const char *dir, const AmpLoadOptions *opt, bool borrow,
                       AmpModel **out, AmpStatus *st);

#endif
