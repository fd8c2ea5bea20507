/* Private to the interpreter (exec*.c): the executor's layout. Values live in
 * slots indexed by AmpValue.id; every slot holds a device buffer of the executor's backend:
 * borrowed (an initializer's, a bound state buffer's, a caller's), owned, or a place in the
 * planned arena. */
#ifndef AMP_EXEC_IMPL_H
#define AMP_EXEC_IMPL_H

#include "runtime/exec.h"

typedef enum SlotKind {
    SLOT_EMPTY = 0,
    SLOT_BORROWED, /* an initializer's, a bound state buffer's, a body input's, or a host
                      input the backend reads in place */
    SLOT_OWNED,    /* an intermediate from backend->alloc, freed by slot_clear */
    SLOT_UPLOAD,   /* a graph input copied in for this run, freed by slot_clear (not counted
                      as an intermediate) */
    SLOT_ARENA     /* a planned place in the arena */
} SlotKind;

/* A node's prepared geometry (exec_geom.c): data, made by its op's geometry function for
 * the dtypes and shapes in key (n_key: its inputs, then its outputs); made false where
 * the op left it to the kernel (it depends on an input's values). */
typedef struct AmpGeomKey AmpGeomKey;
typedef struct AmpExecGeom {
    void *data;
    AmpGeomKey *key;
    int n_key;
    bool made, valid;
} AmpExecGeom;

typedef struct Slot {
    AmpBuf buf;
    SlotKind kind;
    size_t live_bytes; /* what it adds to the intermediates live (SLOT_OWNED, SLOT_ARENA) */
} Slot;

enum {
    VAL_INIT = 1u << 0,   /* an initializer of this graph: `init` holds its view */
    VAL_OUTPUT = 1u << 1, /* a graph output */
    VAL_AFTER = 1u << 2   /* read by a graph that runs after this one */
};

/* A small graph input whose bytes the step plan read (a Reshape target fed as an input). */
typedef struct ValRead {
    uint32_t id;
    size_t len;
    unsigned char bytes[512];
} ValRead;

struct AmpExec {
    AmpModel *m;
    AmpGraph *g;
    AmpExecOptions opt;
    AmpBackend *be;
    uint64_t own_rng;
    uint64_t *rng;
    size_t n_nodes;
    AmpNode **nodes;
    AmpBackendKernel *kernels; /* per node; fn NULL for If / Loop (run here) */
    AmpBackend **node_be;      /* per node: the backend that runs it (be, or opt.fallback); NULL for If / Loop / Scan */
    size_t n_fallback;         /* nodes node_be gives to the fallback */
    /* per node: the update gate folded into it (runtime/fuse.c), read as AmpKernelCtx.gate
     * and counted as one more input; NULL for most */
    const AmpValue **gate;
    AmpKernelPack *packs;      /* per node: what its kernel keeps of constant inputs (AmpKernelCtx.pack) */
    AmpExecGeom *geoms;        /* per node (n_geoms_cap of them): its geometry (AmpKernelCtx.geom) */
    size_t n_geoms_cap;
    size_t n_geoms;            /* geometries made, all runs (AmpExecMemory.geometries) */
    const AmpBuf **into;       /* per value id: the state buffer it is computed into (amp_exec_write_into), or NULL */
    size_t n_fused, n_absorbed; /* fused nodes in the plan, and the model's nodes they replace */
    int64_t *opsets;           /* per node: the version imported for its domain */
    /* The launch list, built before the first run (and again when a later graph extends
     * lifetimes): node i reads the slots in_slots[in_at[i] .. in_at[i+1]) (NULL: an input
     * left out; slots of enclosing graphs included), and after it the values of this
     * graph with ids dead[dead_at[i] .. dead_at[i+1]) are dropped. */
    Slot **in_slots;
    size_t *in_at;
    uint32_t *dead;
    size_t *dead_at;
    bool launches_ready;
    size_t n_values;
    Slot *slots;               /* per value id of g */
    unsigned *vflags;          /* per value id: VAL_* */
    int *first;                /* per value id: index of the producing node, -1 if none */
    int *last;                 /* per value id: last node reading it; n_nodes = live to the end */
    AmpBuf *init;              /* per value id: the initializer's host view (VAL_INIT) */
    AmpBuf *dinit;             /* per value id: its device copy, data NULL until uploaded */
    bool *dinit_owned;         /* per value id: dinit's data is from backend->alloc */
    const AmpBuf **bound;      /* per value id: a bound state buffer, or NULL */
    AmpExec *parent;           /* the executor whose values this graph reads */
    AmpExec *children;         /* prepared body executors, a list */
    AmpExec *next_sibling;

    /* memory planner */
    size_t *rec;        /* per value id: bytes its kernel asked for in the last run (0: none) */
    size_t *off;        /* per value id: planned arena offset; SIZE_MAX when unplanned */
    size_t *psize;      /* per value id: planned bytes */
    void *arena;
    size_t arena_bytes;
    bool planned;       /* off/psize/arena are valid */
    bool replan;        /* plan again from `rec` before the next run */
    bool fallback;      /* this run allocated something the plan did not hold */
    AmpBuf *sig;        /* shapes of the graph inputs at the last run, per graph input */
    bool have_sig;
    /* The step plan's shapes (plan_shapes in exec.c): per value id, the dtype and shape
     * the shape functions give before the step runs (pknown), for the current input
     * shapes; and the values of enclosing graphs those shapes were computed from, with
     * their shapes then (a change of either plans again). */
    AmpBuf *pshape;
    size_t *pbytes; /* per value id: pshape's bytes, where pknown */
    bool *pknown;
    bool shapes_ready;
    const AmpValue **outer_read;
    AmpBuf *outer_shape;
    size_t n_outer, cap_outer;
    size_t n_known, n_unknown; /* intermediates sized before the run, and not */
    size_t n_late;             /* last run: nodes sized when reached (shapes from values made in the step) */
    size_t n_syncs;            /* last run: values copied out of the device for those shapes */
    uint32_t *bound_ids;       /* value ids amp_exec_bind has bound, n_bound of them */
    size_t n_bound;
    const AmpBuf **host_in;    /* per value id: a graph input's host buffer, during a run given
                                  host inputs (NULL otherwise) */
    ValRead *vals_read;        /* graph inputs whose bytes the plan read */
    size_t n_vals_read, cap_vals_read;
    size_t live, peak;  /* intermediate bytes live now, and at most, in this run */
    AmpExecHook hook;   /* after each node (amp_exec_set_hook), or NULL */
    void *hook_ctx;
};

/* The most inputs and outputs one node of a plan may have (a fused multi-tensor node has
 * many; the arrays of a running node are on the stack). */
#define AMP_EXEC_MAX_IN 64
#define AMP_EXEC_MAX_OUT 64

/* The largest single tensor the executor allocates (64 GiB). */
#define AMP_EXEC_MAX_OUTPUT_BYTES (UINT64_C(64) << 30)

/* The cap on one tensor this executor enforces: opt.max_tensor_bytes where set and lower,
 * else AMP_EXEC_MAX_OUTPUT_BYTES. */
static inline uint64_t amp_exec_max_bytes(const AmpExec *e) {
    uint64_t cap = e->opt.max_tensor_bytes;
    return cap && cap < AMP_EXEC_MAX_OUTPUT_BYTES ? cap : AMP_EXEC_MAX_OUTPUT_BYTES;
}

/* What names that cap in a message: the session option when it is the one in force. */
static inline const char *amp_exec_max_bytes_name(const AmpExec *e) {
    uint64_t cap = e->opt.max_tensor_bytes;
    return cap && cap < AMP_EXEC_MAX_OUTPUT_BYTES ? " (max_tensor_bytes)" : "";
}

static inline const char *amp_exec_node_name(const AmpNode *n) {
    return n->name ? n->name : "";
}

/* What the allocator of a running node knows (exec_alloc.c). */
typedef struct AllocCtx {
    AmpExec *e;
    AmpNode *n;
    AmpBuf *scratch; /* outputs the node lists as "" (n_outputs entries) */
    bool *placed;    /* per output: placed before the kernel ran (its slot holds it) */
} AllocCtx;

/* ---- exec_slot.c: what every part of the interpreter shares (it calls none of them) ---- */

/* Empties slot s (freeing what it owns) and takes its bytes off the live count. */
void amp_exec_slot_clear(AmpExec *e, Slot *s);
/* Slot s now holds an intermediate of `bytes` (SLOT_OWNED or SLOT_ARENA). */
void amp_exec_count_live(AmpExec *e, Slot *s, size_t bytes);
/* v's slot in e or in the executor of the enclosing graph that holds it, or NULL. */
Slot *amp_exec_find_slot(AmpExec *e, const AmpValue *v);
/* A device buffer of e's backend shaped as `like` (contents undefined); NULL data on OOM. */
AmpCode amp_exec_alloc_like(const AmpExec *e, const AmpBuf *like, AmpBuf *dst, AmpStatus *st);
/* A device copy of device buffer src. */
AmpCode amp_exec_copy_buf(const AmpExec *e, const AmpBuf *src, AmpBuf *dst, AmpStatus *st);
/* Frees a device buffer made by the two above or handed out by amp_exec_run_body. */
void amp_exec_buf_free(const AmpExec *e, AmpBuf *b);
/* Stores a device buffer as output k of node n; takes b. */
void amp_exec_take_output(AmpExec *e, AmpNode *n, int k, AmpBuf *b);
/* AMP_ERR_UNSUPPORTED once the run's deadline (AmpExecOptions.deadline) has passed. */
AmpCode amp_exec_check_deadline(const AmpExec *e, AmpStatus *st);

/* ---- exec_alloc.c: the places of a running node's outputs ---------------------------- */

/* The AmpAllocFn of a running node (ctx: an AllocCtx): the placed output, checked against
 * the shape asked for, or a place for one the plan could not size. */
AmpBuf *amp_exec_alloc(void *ctx, int index, int dtype, int rank, const int64_t *dims, AmpStatus *st);
/* Places the outputs of node i whose shapes are known before its kernel runs into outs. */
AmpCode amp_exec_place_outputs(AmpExec *e, size_t i, AllocCtx *a, AmpBuf *outs, AmpStatus *st);

/* ---- exec_prepare.c, exec.c, exec_ctrl.c ------------------------------------------------ */

/* The prepared executor of body `body` of e (created on first use; exec_prepare.c). */
AmpCode amp_exec_get_child(AmpExec *e, AmpGraph *body, AmpExec **out, AmpStatus *st);
/* Runs a body: inputs are device buffers (borrowed for the run), outputs[i] receives
 * output i as a device buffer the caller owns (free with amp_exec_buf_free; exec.c). */
AmpCode amp_exec_run_body(AmpExec *e, const AmpNamedBuf *inputs, size_t n_inputs, AmpBuf *outputs,
                          AmpStatus *st);
/* Reads element 0 of an integer or bool device buffer (copied out); AMP_ERR_INPUT when
 * it holds no element. `what` names it in messages (exec_ctrl.c). */
AmpCode amp_exec_read_i64(const AmpExec *e, const AmpBuf *b, const char *what, int64_t *out, AmpStatus *st);
/* AMP_ERR_UNSUPPORTED naming node n once it has run more than the cap's iterations
 * (exec_ctrl.c). */
AmpCode amp_exec_check_iterations(const AmpExec *e, const AmpNode *n, uint64_t done, AmpStatus *st);

/* exec_plan.c: the launch list; whether the plan still fits this run's inputs (it
 * records their signature); the shapes of every intermediate before the run; those of
 * node i when it is reached (reading back small values made in the step); the arena. */
AmpCode amp_exec_build_launches(AmpExec *e, AmpStatus *st);
bool amp_exec_plan_current(AmpExec *e);
void amp_exec_plan_shapes(AmpExec *e);
AmpCode amp_exec_late_shapes(AmpExec *e, size_t i, AmpBuf *out, bool *known, AmpStatus *st);
void amp_exec_build_arena(AmpExec *e);
void amp_exec_free_arena(AmpExec *e);

/* The values node i reads: its inputs, then its folded gate (the launch list's order). */
static inline int amp_exec_n_reads(const AmpExec *e, size_t i) {
    return e->nodes[i]->n_inputs + (e->gate[i] != NULL);
}
static inline const AmpValue *amp_exec_read(const AmpExec *e, size_t i, int k) {
    return k < e->nodes[i]->n_inputs ? e->nodes[i]->inputs[k] : e->gate[i];
}

/* exec_geom.c: node i's geometry into k->geom, made by its op's geometry function unless
 * the one kept was made for the same input and output shapes; freed with e. */
AmpCode amp_exec_node_geom(AmpExec *e, size_t i, AmpKernelCtx *k, AmpStatus *st);
void amp_exec_geom_free(AmpExec *e);

/* exec_fallback.c: runs node i, which e's backend lacks, on its fallback backend. */
AmpCode amp_exec_run_fallback(AmpExec *e, size_t i, AmpKernelCtx *k, AllocCtx *ac, AmpStatus *st);

/* exec_ctrl.c: If, Loop and Scan node n of e, run through child executors. `body` runs a
 * body (exec.c hands down amp_exec_run_body): a body may hold control flow again, and the
 * interpreter's recursion goes back up through this pointer, not by name, so exec_ctrl.c
 * depends on no file above it. */
typedef AmpCode (*AmpExecBodyFn)(AmpExec *e, const AmpNamedBuf *inputs, size_t n_inputs, AmpBuf *outputs,
                                 AmpStatus *st);
AmpCode amp_exec_run_if(AmpExec *e, AmpNode *n, const AmpBuf *const *in, AmpExecBodyFn run_body, AmpStatus *st);
AmpCode amp_exec_run_loop(AmpExec *e, AmpNode *n, const AmpBuf *const *in, AmpExecBodyFn run_body, AmpStatus *st);
AmpCode amp_exec_run_scan(AmpExec *e, AmpNode *n, const AmpBuf *const *in, AmpExecBodyFn run_body, AmpStatus *st);

#endif
