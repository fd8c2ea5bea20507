/* The in-memory model every pass works on: AmpModel > AmpGraph > AmpNode / AmpValue,
 * with tensors, attributes, subgraphs and training info. It mirrors ONNX closely so a
 * load -> save round trip is lossless: every protobuf field the IR does not model
 * (and every unknown field from a newer ONNX) is kept, packed, in a `rest` blob and
 * written back as it was. */
#ifndef AMP_IR_H
#define AMP_IR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ir/arena.h"
#include "ir/ops.h"
#include "ir/fail.h"

typedef struct AmpModel AmpModel;

/* ONNX TensorProto.DataType values; the numbers are ONNX's own. */
typedef enum AmpDType {
    AMP_DT_UNDEFINED = 0,
    AMP_DT_FLOAT = 1,
    AMP_DT_UINT8 = 2,
    AMP_DT_INT8 = 3,
    AMP_DT_UINT16 = 4,
    AMP_DT_INT16 = 5,
    AMP_DT_INT32 = 6,
    AMP_DT_INT64 = 7,
    AMP_DT_STRING = 8,
    AMP_DT_BOOL = 9,
    AMP_DT_FLOAT16 = 10,
    AMP_DT_DOUBLE = 11,
    AMP_DT_UINT32 = 12,
    AMP_DT_UINT64 = 13,
    AMP_DT_COMPLEX64 = 14,
    AMP_DT_COMPLEX128 = 15,
    AMP_DT_BFLOAT16 = 16,
    AMP_DT_FLOAT8E4M3FN = 17,
    AMP_DT_FLOAT8E4M3FNUZ = 18,
    AMP_DT_FLOAT8E5M2 = 19,
    AMP_DT_FLOAT8E5M2FNUZ = 20,
    AMP_DT_UINT4 = 21,
    AMP_DT_INT4 = 22,
    AMP_DT_FLOAT4E2M1 = 23,
    AMP_DT__COUNT
} AmpDType;

const char *amp_dtype_name(int dt);          /* "float16"; "dtype(99)" style for unknown */
int amp_dtype_from_name(const char *name);   /* -1 when unknown */
size_t amp_dtype_bits(int dt);               /* 0 for string/undefined/unknown */
bool amp_dtype_is_float(int dt);             /* float, double, float16, bfloat16, float8 */
bool amp_dtype_is_int(int dt);               /* int8 to int64, uint8 to uint64 (not bool) */

/* A byte string owned by the model's arena (or borrowed from a mapping). */
typedef struct AmpBytes {
    const uint8_t *data;
    size_t len;
} AmpBytes;

typedef struct AmpStrPair {
    const char *key;
    const char *value;
} AmpStrPair;

/* ---- types ---------------------------------------------------------------------- */

typedef struct AmpDim {
    int64_t value;     /* >= 0 when known, -1 when not */
    const char *param; /* symbolic name (dim_param) or NULL */
} AmpDim;

typedef enum AmpTypeKind {
    AMP_TYPE_NONE = 0, /* nothing known */
    AMP_TYPE_TENSOR,   /* dtype and (maybe) shape below are meaningful */
    AMP_TYPE_OTHER     /* sequence, map, optional, sparse tensor: kept opaque */
} AmpTypeKind;

typedef struct AmpType {
    AmpTypeKind kind;
    int dtype;    /* AmpDType; AMP_DT_UNDEFINED when unknown */
    int rank;     /* -1 when the shape is unknown */
    AmpDim *dims; /* rank entries */
} AmpType;

bool amp_type_equal(const AmpType *a, const AmpType *b);

/* ---- tensors -------------------------------------------------------------------- */

typedef enum AmpTensorHas {
    AMP_TENSOR_HAS_DTYPE = 1u << 0,
    AMP_TENSOR_HAS_RAW = 1u << 1,
    AMP_TENSOR_HAS_LOCATION = 1u << 2
} AmpTensorHas;

/* A constant (initializer, attribute value). Data is in exactly the fields ONNX put it
 * in, so it is written back in the same form; amp_tensor_bytes() gives the canonical
 * little-endian element bytes whatever the form. */
typedef struct AmpTensor {
    const char *name, *doc_string;
    int dtype;
    unsigned has; /* AmpTensorHas */
    size_t ndims;
    int64_t *dims;  /* ndims */
    uint64_t nelem; /* product of dims, checked at load */

    AmpBytes raw; /* raw_data (HAS_RAW), or the bytes of external data once mapped */
    /* Not NULL: a weight the amp pass stores in 16 bits (dtype float16 or bfloat16,
     * HAS_RAW), whose raw.len bytes are not made yet (raw.data NULL): they are the rounding
     * of the raw.len / 2 float32 values here (ONNX's raw layout, any alignment; memory the
     * model holds). The saver converts them straight into the output; amp_tensor_bytes
     * makes them for any other reader. */
    const uint8_t *narrow_from;
    size_t n_float, n_int32, n_int64, n_double, n_uint64, n_string;
    float *float_data;
    int32_t *int32_data; /* also holds float16/bfloat16 bits, int8/16, bool */
    int64_t *int64_data;
    double *double_data;
    uint64_t *uint64_data; /* also uint32 */
    AmpBytes *string_data;

    int data_location;    /* 0 default, 1 external */
    size_t n_external;    /* external_data key/value entries, as in the file */
    AmpStrPair *external;
    bool is_external;     /* raw holds the external file's bytes: in its mapping (a copy if misaligned) */

    AmpBytes rest;
} AmpTensor;

/* The canonical element bytes of a tensor (little-endian, ONNX raw_data layout),
 * converting typed fields once into the arena if needed, and making a deferred 16-bit
 * weight's bytes (narrow_from) once. */
AmpCode amp_tensor_bytes(AmpModel *m, AmpTensor *t, AmpBytes *out, AmpStatus *st);
/* Elements [first, first + n) of a deferred 16-bit weight (t->narrow_from) into dst. */
void amp_tensor_narrow(const AmpTensor *t, size_t first, size_t n, uint16_t *dst);
/* Bytes the elements take in canonical form (sub-byte types are packed). */
bool amp_tensor_expected_bytes(int dtype, uint64_t nelem, size_t *out);

/* ---- attributes ----------------------------------------------------------------- */

/* AmpAttrType is ops.h's: the op table's ATTRS column names those types. */
typedef enum AmpAttrHas {
    AMP_ATTR_HAS_TYPE = 1u << 0,
    AMP_ATTR_HAS_F = 1u << 1,
    AMP_ATTR_HAS_I = 1u << 2,
    AMP_ATTR_HAS_S = 1u << 3
} AmpAttrHas;

typedef struct AmpGraph AmpGraph;

typedef struct AmpAttr {
    const char *name, *ref_attr_name, *doc_string;
    int type;     /* AmpAttrType */
    unsigned has; /* AmpAttrHas */
    float f;
    int64_t i;
    AmpBytes s;
    AmpTensor *t;
    AmpGraph *g;
    size_t n_floats, n_ints, n_strings, n_tensors, n_graphs;
    float *floats;
    int64_t *ints;
    AmpBytes *strings;
    AmpTensor **tensors;
    AmpGraph **graphs;
    AmpBytes rest; /* sparse tensors, type protos, unknown fields */
} AmpAttr;

/* ---- values and nodes ----------------------------------------------------------- */

typedef struct AmpNode AmpNode;
typedef struct AmpValue AmpValue;

typedef struct AmpUse {
    AmpNode *node; /* may be a node of a subgraph (outer-scope use) */
    int slot;      /* input index on that node */
} AmpUse;

typedef enum AmpValueFlags {
    AMP_VALUE_INPUT = 1u << 0,       /* listed in graph.input */
    AMP_VALUE_OUTPUT = 1u << 1,      /* listed in graph.output */
    AMP_VALUE_INITIALIZER = 1u << 2, /* has `initializer` */
    AMP_VALUE_UNDEFINED = 1u << 3    /* used but defined nowhere (verifier error) */
} AmpValueFlags;

/* A named SSA value of one graph. */
struct AmpValue {
    const char *name;
    AmpGraph *graph; /* the graph whose scope defines it */
    AmpType type;
    AmpNode *producer;  /* NULL for inputs, initializers, undefined */
    AmpTensor *initializer;
    AmpUse *uses;
    size_t n_uses, cap_uses;
    unsigned flags;     /* AmpValueFlags */
    int producer_slot;  /* output index on producer */
    uint32_t id;        /* index in graph->values */
    uint32_t name_len;  /* strlen(name): names are compared and written by the million */
};

/* Which pass made a node, for the passes and reports that treat another pass's nodes
 * apart (the loss-scaling machinery is fp32 and one group in --report). Set by the pass
 * (AmpBuilder.origin) and, on load, from the node's name (precision.h, amp_origin_of_name):
 * files keep only the name, so they do not change. Read through amp_node_group. */
typedef enum AmpOrigin {
    AMP_ORIGIN_MODEL = 0,  /* the input model's own, or made by a pass others need not tell */
    AMP_ORIGIN_LOSS_SCALE, /* the loss-scaling pass (passes/loss_scale.c) */
} AmpOrigin;

struct AmpNode {
    AmpGraph *graph;
    AmpNode *prev, *next; /* topological order */
    const char *name, *op_type, *domain, *doc_string;
    AmpOpId op; /* AMP_OP_UNKNOWN for ops not in the op table */
    int n_inputs, n_outputs;
    AmpValue **inputs;  /* n_inputs; NULL = optional input left out ("") */
    AmpValue **outputs; /* n_outputs; NULL = optional output left out */
    size_t n_attrs;
    AmpAttr *attrs;
    AmpBytes rest;
    uint32_t id;   /* unique within the model, in creation order */
    int mark;      /* scratch for passes and the verifier */
    uint8_t origin; /* AmpOrigin */
};

/* One entry of graph.input / graph.output / graph.value_info. The ValueInfoProto is
 * kept packed as loaded; on save it is written back as it was unless the value's type
 * changed since (then the type is rebuilt from AmpValue.type). */
typedef struct AmpValueInfo {
    AmpValue *value;
    AmpBytes orig;      /* packed ValueInfoProto, or empty for entries made by passes */
    AmpType loaded;     /* the type `orig` holds */
} AmpValueInfo;

typedef struct AmpValueInfoList {
    AmpValueInfo *items;
    size_t n, cap;
} AmpValueInfoList;

typedef struct AmpNameMap AmpNameMap; /* name -> AmpValue*, private to ir.c */

struct AmpGraph {
    AmpModel *model;
    AmpGraph *parent;   /* enclosing scope for subgraphs and training graphs, else NULL */
    AmpNode *owner;     /* the If/Loop/Scan node owning this body, else NULL */
    const char *name, *doc_string;
    AmpNode *first, *last;
    size_t n_nodes;
    AmpValue **values; /* every value this graph's scope defines or references */
    size_t n_values, cap_values;
    AmpNameMap *names;
    AmpValueInfoList inputs, outputs, value_info;
    AmpTensor **initializers; /* in file order; each also hangs off its AmpValue */
    size_t n_initializers, cap_initializers;
    AmpBytes rest; /* sparse initializers, quantization annotations, unknown fields */
};

typedef struct AmpOpset {
    const char *domain; /* "" for ai.onnx */
    int64_t version;
    bool has_version;
} AmpOpset;

typedef struct AmpTrainingInfo {
    AmpGraph *initialization; /* may be NULL */
    AmpGraph *algorithm;      /* may be NULL */
    size_t n_init_bindings, n_update_bindings;
    /* Keys name initializers of the main graph or of this algorithm graph
     * (amp_training_key); values name outputs of the initialization / algorithm graph. */
    AmpStrPair *init_bindings;   /* key: initializer name, value: init graph output */
    AmpStrPair *update_bindings; /* key: initializer name, value: algorithm output */
    AmpBytes rest;
} AmpTrainingInfo;

typedef struct AmpFunction {
    const char *domain, *name;
    AmpBytes packed; /* the FunctionProto, kept as it is */
} AmpFunction;

typedef struct AmpMapping AmpMapping; /* an mmap'd external data file */

typedef enum AmpModelHas {
    AMP_MODEL_HAS_IR_VERSION = 1u << 0,
    AMP_MODEL_HAS_MODEL_VERSION = 1u << 1
} AmpModelHas;

struct AmpModel {
    AmpArena arena;
    const char *path; /* file it was loaded from, for messages; may be NULL */
    const char *dir;  /* its folder, the root for external data; may be NULL */
    unsigned has;     /* AmpModelHas */
    int64_t ir_version, model_version;
    const char *producer_name, *producer_version, *domain, *doc_string;
    size_t n_opsets, n_metadata, n_training, n_functions;
    AmpOpset *opsets;
    AmpStrPair *metadata;
    AmpTrainingInfo *training;
    AmpFunction *functions;
    AmpGraph *graph;
    AmpBytes rest;
    AmpMapping *mappings;
    void **owned; /* malloc'd buffers the model frees (16-bit weights made by passes) */
    size_t n_owned, cap_owned;
    uint32_t next_node_id;
    /* True only inside a pipeline run, from the end of an "infer" pass to the start of
     * the next pass (passes/passes.c): the types are those inference gives, and a pass
     * that would infer first (amp) need not do it again. */
    bool types_inferred;
    /* Names (ir.c): every graph's name map, listed to be freed with the model; the graphs
     * that hold values (while only one does, its map alone says whether a name is used
     * anywhere); and the model-wide name set, built the first time a new name is asked
     * for while several graphs hold values, then kept up to date by amp_graph_value. */
    AmpNameMap *maps;
    size_t n_named_graphs;
    AmpGraph *named_graph; /* the first graph that got a value */
    AmpNameMap *all_names;
};

/* ---- model lifetime, load and save (load.c, save.c) ---------------------------- */

typedef struct AmpLoadOptions {
    bool skip_verify; /* structural checks run by default */
    int threads;      /* the most threads the load may use; 0: amp_threads() */
    /* The main graph's nodes are loaded by several threads from this many on; 0: the
     * default, AMP_LOAD_PARALLEL_MIN. The model is the same either way (tests set 1). */
    size_t parallel_min_nodes;
    /* amp_model_load_file: tensors' raw_data stays in the file's mapping, which the model
     * keeps, rather than being copied into the arena (the copy was a fifth of a BERT-base
     * conversion). Those bytes may lie at any alignment: for readers that take them as
     * bytes (the converter), not the runtime, whose kernels read them as typed arrays. */
    bool borrow_raw;
} AmpLoadOptions;

/* From this many nodes on (a choice, not a measured break-even: the helpers' start and
 * their chunks of 16 nodes are cheap next to 4096 nodes' load). */
#define AMP_LOAD_PARALLEL_MIN 4096

/* How many threads one job may use (a load; ampc's conversion, whose output is verified
 * on a second thread beside the save): amp_threads_requested's count when there is one
 * (1: the calling thread alone), else the CPUs this process may run on, at most 8. */
int amp_threads(void);
/* The thread knob, process-wide: n from 1 (more than 64 counts as 64), 0: none. Set by
 * whoever read AMP_THREADS through the options table (passes/options.c) or was given a
 * count: a session (its threads option, else the variable unless ignore_env), ampc for
 * each command (`run/bench --threads` replacing the variable). Nothing below reads the
 * environment itself. */
void amp_threads_set(int n);
/* The knob's count; false when none was set (the libraries below then keep their own
 * defaults: one thread per CPU the process may use). What the CPU kernels set OpenMP's and
 * OpenBLAS's threads from. */
bool amp_threads_requested(int *n);
/* The CPU kernels' other knob, process-wide: oneDNN off, OpenBLAS for everything (a
 * session's AMP_DNNL=0). It counts if set before oneDNN's first use (the library, once
 * opened, stays); amp_dnnl_set_off_asked is what kernels/cpu/dnnl.c reads then. */
void amp_dnnl_set_off(void);
bool amp_dnnl_set_off_asked(void);
/* The CPUs this process may run on (sched_getaffinity), at least 1. */
int amp_cpus_available(void);

/* What the CPU computes 16-bit floats with (ir/host.c), the facts `--precision auto`
 * decides by (passes/options.h, amp_precision_auto). */
enum {
    AMP_CPU_AVX512_BF16 = 1u << 0, /* bf16 dot products into float32 (VDPBF16PS) */
    AMP_CPU_AMX_BF16 = 1u << 1,    /* AMX tiles of bf16 */
    AMP_CPU_AVX512_FP16 = 1u << 2, /* fp16 arithmetic */
    AMP_CPU_AMX_FP16 = 1u << 3     /* AMX tiles of fp16 */
};
/* This machine's (cpuid, where the operating system enables the registers); 0 off x86. */
unsigned amp_cpu_features(void);
/* "none", or a comma-separated list of avx512_bf16, amx_bf16, avx512_fp16, amx_fp16 (the
 * names of Linux's /proc/cpuinfo flags), into *out; false otherwise. */
bool amp_cpu_features_parse(const char *s, unsigned *out);

/* A model from a regular file (mapped; anything else is refused, so that a FIFO or a
 * device cannot hang the load), or from standard input, "-", read to its end (such a
 * model may hold no external data). External data is resolved in the file's folder. */
AmpCode amp_model_load_file(const char *path, const AmpLoadOptions *opt, AmpModel **out,
                            AmpStatus *st);
/* What messages call a model path: "standard input" for "-", else the path. */
const char *amp_model_path_shown(const char *path);
/* `dir` is the folder external data is resolved in (NULL: external data is an error). */
AmpCode amp_model_load_bytes(const void *data, size_t len, const char *dir,
                             const AmpLoadOptions *opt, AmpModel **out, AmpStatus *st);
void amp_model_free(AmpModel *m);
/* Parses a serialised TensorProto (a conformance test's input_0.pb) into m's arena.
 * External data is resolved against m->dir. */
AmpCode amp_tensor_load_bytes(AmpModel *m, const void *data, size_t len, AmpTensor **out, AmpStatus *st);
/* Hands a malloc'd buffer to the model, freed with it; false on OOM (p not taken). */
bool amp_model_own(AmpModel *m, void *p);

typedef enum AmpExternalMode {
    AMP_SAVE_EXTERNAL_AUTO = 0, /* one file when it fits under 2 GB, else external data */
    AMP_SAVE_EXTERNAL_NEVER,
    AMP_SAVE_EXTERNAL_ALWAYS
} AmpExternalMode;

typedef struct AmpSaveOptions {
    AmpExternalMode external;
    size_t external_min_bytes; /* tensors smaller than this stay inline (default 1024) */
    /* Asked once every file is written and synced, before any is renamed into place:
     * false keeps them out (the temporary files are removed) and the save fails with the
     * code the hook set in st. NULL: always commit. (ampc verifies the output meanwhile.) */
    bool (*commit)(void *ctx, AmpStatus *st);
    void *commit_ctx;
    /* Also a graph.value_info entry for every value a node produces whose tensor type is
     * known and that the graph lists nowhere yet, in every graph (subgraphs and training
     * graphs too): the types of intermediates, for the tools that read them (ampc's
     * --report, Netron, onnxruntime). Entries the model had are written either way. */
    bool value_info;
} AmpSaveOptions;

/* Where an output named `path` is written, as every writer of ampc does it (the saver,
 * the DOT writer, `ampc run --outputs`). "-" is standard output, a stream. A path that
 * names nothing yet, or a regular file,
 * is replaced by a temporary file renamed over it. A symbolic link to a regular file is
 * followed, so the file it names is replaced and the link stays (a dangling link is
 * replaced). Anything else that exists, but a directory (an error), is a stream: a device
 * such as /dev/null or /dev/stdout, a FIFO; *stream is set, and it must be written
 * straight into, never renamed over, or the device itself would be replaced by a file.
 * *target (malloc'd) is the path to write or rename over. */
AmpCode amp_output_target(const char *path, char **target, bool *stream, AmpStatus *st);
/* A stream output opened for writing as it is (no creating, no truncating; "-": a
 * duplicate of standard output's descriptor); NULL with st set when it cannot be opened. */
FILE *amp_output_stream(const char *path, AmpStatus *st);
/* What messages call an output: "standard output" for "-", else the path. */
const char *amp_output_shown(const char *path);

/* A file written beside its target and renamed over it once complete (output.c). Its
 * name is the target's and ".tmp.<pid>.<n>"; while it exists it is in the table of files a
 * fatal signal removes (ir/signals.h), and it is locked (flock) while open, so that a
 * later writer of the same target knows a temporary file left by a process that died
 * (amp_temp_clean_stale). */
typedef struct AmpTempFile {
    FILE *f;          /* open for writing until amp_temp_close */
    char *tmp;        /* malloc'd: the temporary file's path, until renamed or removed */
    const char *path; /* the target (not owned) */
    bool sync;        /* the target exists now: sync before renaming over it (a system
                         crash cannot then lose the old contents); a new file need not be */
    struct AmpSigEntry *sig; /* its entry in the signal handlers' table */
} AmpTempFile;
/* A new temporary file beside `path` (so the rename stays on one filesystem), created
 * exclusively with mode 0666 so the umask applies as to a plain fopen. */
AmpCode amp_temp_open(AmpTempFile *t, const char *path, AmpStatus *st);
/* Removes the temporary files of targets[0..n) (paths in one folder) that processes which
 * have ended left behind (SIGKILL, a crash, a power cut): those whose pid names no
 * process, and which no process holds locked. Another process's file being written is
 * never touched. Best effort: errors are ignored. */
void amp_temp_clean_stale(const char *const *targets, size_t n);
/* Flushes, syncs when asked, closes; false (errno set) on any failure then or before. */
bool amp_temp_close(AmpTempFile *t, bool sync);
/* Renames the (closed) temporary file over the target; false (errno set) when it fails. */
bool amp_temp_rename(AmpTempFile *t);
/* Closes and removes what is left of it; safe after a rename, and to repeat. */
void amp_temp_abort(AmpTempFile *t);
/* A whole output as amp_output_target says, by write(ctx, f) (false: it failed): into a
 * stream as it is, else into a temporary file renamed over the target (synced first
 * when it replaces a file). On failure nothing is left behind but what a stream got. */
AmpCode amp_output_write(const char *path, bool (*write)(void *ctx, FILE *f), void *ctx, AmpStatus *st);

/* Writes atomically: a temporary file renamed over `path` once complete, and synced to
 * disk first when it replaces a file (so a system crash cannot lose the old contents).
 * External data (if any) goes to `<basename of path>.data` beside it. A stream (see
 * amp_output_target) is written straight into, once opt->commit has agreed; a model with
 * external data cannot go to one. */
AmpCode amp_model_save_file(AmpModel *m, const char *path, const AmpSaveOptions *opt,
                            AmpStatus *st);
/* Serialises to a malloc'd buffer (no external data); the caller frees *out. */
AmpCode amp_model_save_bytes(AmpModel *m, uint8_t **out, size_t *len, AmpStatus *st);
/* The same with options (only value_info applies: bytes have no external data). */
AmpCode amp_model_save_bytes_opt(AmpModel *m, const AmpSaveOptions *opt, uint8_t **out, size_t *len, AmpStatus *st);
/* The bytes amp_model_save_bytes would make, handed to put(ctx, ...) in order, in pieces
 * (big tensors from where they lie, nothing gathered), and without protobuf's 2 GB limit:
 * for hashing a model of any size (the data-parallel open check). put returning false
 * stops it (AMP_ERR_INTERNAL). */
AmpCode amp_model_save_visit(AmpModel *m, bool (*put)(void *ctx, const void *d, size_t len), void *ctx,
                             AmpStatus *st);
/* Serialises one tensor as a TensorProto (the form amp_tensor_load_bytes reads: a
 * conformance test's output_0.pb) to a malloc'd buffer, its data in the fields it has
 * (external data inline); the caller frees *out. */
AmpCode amp_tensor_save_bytes(AmpModel *m, AmpTensor *t, uint8_t **out, size_t *len, AmpStatus *st);

/* ---- builder API (ir.c) ---------------------------------------------------------- */

AmpModel *amp_model_new(void); /* an empty model with an empty main graph; NULL on OOM */
AmpGraph *amp_graph_new(AmpModel *m, AmpGraph *parent);

/* The value named `name` visible from g (its own scope, then enclosing ones), or NULL. */
AmpValue *amp_graph_lookup(const AmpGraph *g, const char *name);
/* The value named `name` in g's own scope, created (with no producer) if absent. */
AmpValue *amp_graph_value(AmpGraph *g, const char *name);
/* A fresh value whose name starts with `base` and is unique in the whole model. */
AmpValue *amp_graph_new_value(AmpGraph *g, const char *base);
/* A name not used by any value of the model (any graph: enclosing, nested or unrelated),
 * from `base` ("base", "base_1", ...); NULL when out of memory. */
const char *amp_graph_unique_name(AmpGraph *g, const char *base);

AmpValueInfo *amp_graph_add_input(AmpGraph *g, AmpValue *v);
AmpValueInfo *amp_graph_add_output(AmpGraph *g, AmpValue *v);
AmpValueInfo *amp_graph_add_value_info(AmpGraph *g, AmpValue *v);
/* Makes v an initializer holding t (t->name is set to v->name). */
AmpCode amp_graph_add_initializer(AmpGraph *g, AmpValue *v, AmpTensor *t);

/* A detached node with room for the given arity; domain "" is ai.onnx. Inputs and
 * outputs are set with amp_node_set_input/output, then it is placed with insert_*. */
AmpNode *amp_node_new(AmpGraph *g, const char *domain, const char *op_type, const char *name,
                      int n_inputs, int n_outputs);
/* Keeps use lists right. Out of memory: AMP_ERR_INTERNAL and nothing changed. */
AmpCode amp_node_set_input(AmpNode *n, int slot, AmpValue *v);
void amp_node_set_output(AmpNode *n, int slot, AmpValue *v);  /* sets the producer */
/* A detached Cast node `name`: out = Cast(in) to dtype `to`, its `to` attribute in the form
 * the model's ai.onnx opset takes (a string before Cast-6). NULL on OOM. */
AmpNode *amp_node_new_cast(AmpGraph *g, const char *name, AmpValue *in, AmpValue *out, int to);
AmpAttr *amp_node_add_attr(AmpNode *n, const char *name, int type);
const AmpAttr *amp_node_attr(const AmpNode *n, const char *name);
int64_t amp_node_attr_int(const AmpNode *n, const char *name, int64_t dflt);
float amp_node_attr_float(const AmpNode *n, const char *name, float dflt);
const char *amp_node_attr_string(const AmpNode *n, const char *name, const char *dflt);

void amp_node_insert_before(AmpNode *pos, AmpNode *n); /* pos NULL: append */
void amp_node_insert_after(AmpNode *pos, AmpNode *n);  /* pos NULL: prepend */
void amp_node_append(AmpGraph *g, AmpNode *n);
/* Unlinks n, drops its uses, clears the producer of its outputs. */
void amp_node_delete(AmpNode *n);

/* Every use of `from` (in g and nested subgraphs) now reads `to`; graph outputs that
 * were `from` become `to` when `outputs_too`. Out of memory: AMP_ERR_INTERNAL and
 * nothing changed. */
AmpCode amp_value_replace_uses(AmpValue *from, AmpValue *to, bool outputs_too);
/* Makes room for `extra` more uses of v, so that many amp_node_set_input calls reading
 * v cannot fail; AMP_ERR_INTERNAL when out of memory. */
AmpCode amp_value_reserve_uses(AmpValue *v, size_t extra);

/* The opset version of `domain` ("" and "ai.onnx" are the same), or 0 if not imported. */
int64_t amp_model_opset(const AmpModel *m, const char *domain);
/* Imports `domain` at `version` into m's opset_import unless it is imported already (a
 * node of a domain the model does not import fails verification). false: out of memory. */
bool amp_model_import_opset(AmpModel *m, const char *domain, int64_t version);

/* Puts g's nodes in topological order, keeping the current order where it already is
 * one (stable); a cycle is AMP_ERR_INPUT naming a node on it. Uses AmpNode.mark. */
AmpCode amp_graph_toposort(AmpGraph *g, AmpStatus *st);

/* Sets every node's `op` from the op table (after load, or after op_type edits: the
 * verifier refuses a node whose `op` disagrees with its op_type). */
void amp_graph_bind_ops(AmpGraph *g);

/* Calls fn on g and every subgraph (attribute graphs) below it, depth first. */
typedef AmpCode (*AmpGraphFn)(AmpGraph *g, void *ctx, AmpStatus *st);
AmpCode amp_graph_walk(AmpGraph *g, AmpGraphFn fn, void *ctx, AmpStatus *st);
/* Same over the model: main graph, then each training_info's graphs. */
AmpCode amp_model_walk(AmpModel *m, AmpGraphFn fn, void *ctx, AmpStatus *st);
/* Node names unique within each graph (node_names.c): a node of id first_new or later (made
 * after that point) named as another node of its graph is renamed <name>_1, <name>_2, ...
 * (the first that no node there has); the other nodes keep their names, repeated or not.
 * How many were renamed in *renamed (may be NULL). Unnamed nodes stay unnamed. */
AmpCode amp_model_unique_node_names(AmpModel *m, uint32_t first_new, size_t *renamed, AmpStatus *st);
/* The first node name used twice in one graph (*name NULL: none), and that graph; an
 * error only when out of memory. ONNX wants node names unique; onnxruntime refuses a file
 * where they are not. */
AmpCode amp_model_duplicate_node_name(AmpModel *m, const AmpGraph **graph, const char **name, AmpStatus *st);

/* The initializer a binding key of training_info ti names (update_binding and
 * initialization_binding alike): an initializer of ti's algorithm graph, else one of the
 * main graph (ONNX allows both: optimizer state and the step count may live in the
 * algorithm); NULL when neither has one of that name. The verifier refuses an algorithm
 * initializer that has the name of a main-graph one, so the answer is never ambiguous. */
AmpValue *amp_training_key(const AmpModel *m, const AmpTrainingInfo *ti, const char *key);

/* ---- analysis (verify.c, infer.c, print.c) --------------------------------------- */

/* Structural and type checks; the first problem found is reported. Among them: every
 * node's `op` agrees with its op_type and domain (see amp_graph_bind_ops). */
AmpCode amp_verify_model(AmpModel *m, AmpStatus *st);
/* ... and, when it passes, the number of nodes of every graph in *n_nodes (what
 * amp_model_walk would count: the verifier walks them all anyway). */
AmpCode amp_verify_model_counted(AmpModel *m, size_t *n_nodes, AmpStatus *st);
/* Fills AmpValue.type for every value it can; keeps types from the model where the
 * op is unknown. */
AmpCode amp_infer_model(AmpModel *m, AmpStatus *st);
/* The same for one node of a graph (not its bodies): its outputs' types merged with what
 * inference gives from its inputs' types now. */
AmpCode amp_infer_node(AmpNode *n, AmpStatus *st);

void amp_print_model(FILE *f, const AmpModel *m);

/* The FLOPs of one MatMul, Gemm, Conv or ConvTranspose node, as the amp summary and
 * --report count them (ir/flops.c): 1 when counted into *flops; 0 for other ops; -1 when
 * its shapes are not static. */
int amp_node_flops(const AmpNode *n, double *flops);

#endif
