/* Private to the interpreter (exec.c, exec_ctrl.c): the executor's layout. Values live in
 * slots indexed by AmpValue.id; a slot borrows (inputs, initializers), owns a buffer from
 * the backend, or points into the planned arena. */
#ifndef AMP_EXEC_IMPL_H
#define AMP_EXEC_IMPL_H

#include "exec.h"

typedef enum SlotKind {
    SLOT_EMPTY = 0,
    SLOT_BORROWED, /* an input's, an initializer's or a bound state buffer's data */
    SLOT_OWNED,    /* from backend->alloc, freed by slot_clear */
    SLOT_MALLOC,   /* host memory from malloc (a body's output handed up), freed by slot_clear */
    SLOT_ARENA     /* a planned place in the arena */
} SlotKind;

typedef struct Slot {
    AmpBuf buf;
    SlotKind kind;
} Slot;

enum {
    VAL_INIT = 1u << 0,   /* an initializer of this graph: `init` holds its view */
    VAL_OUTPUT = 1u << 1, /* a graph output */
    VAL_AFTER = 1u << 2   /* read by a graph that runs after this one */
};

struct AmpExec {
    AmpModel *m;
    AmpGraph *g;
    AmpExecOptions opt;
    const AmpBackend *be;
    uint64_t own_rng;
    uint64_t *rng;
    size_t n_nodes;
    AmpNode **nodes;
    AmpBackendKernel *kernels; /* per node; fn NULL for If / Loop (run here) */
    int64_t *opsets;           /* per node: the version imported for its domain */
    size_t n_values;
    Slot *slots;               /* per value id of g */
    unsigned *vflags;          /* per value id: VAL_* */
    int *first;                /* per value id: index of the producing node, -1 if none */
    int *last;                 /* per value id: last node reading it; n_nodes = live to the end */
    AmpBuf *init;              /* per value id: the initializer's view (VAL_INIT) */
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
    size_t live, peak;  /* intermediate bytes live now, and at most, in this run */
};

void amp_exec_slot_clear(AmpExec *e, Slot *s);
Slot *amp_exec_find_slot(AmpExec *e, const AmpValue *v);
/* The prepared executor of body `body` of e (created on first use). */
AmpCode amp_exec_get_child(AmpExec *e, AmpGraph *body, AmpExec **out, AmpStatus *st);
/* A malloc'd copy of src (host memory). */
AmpCode amp_exec_copy_buf(const AmpExec *e, const AmpBuf *src, AmpBuf *dst, AmpStatus *st);
/* Stores a body's output buffer (host malloc'd) as output k of node n; takes b. */
void amp_exec_take_output(AmpExec *e, AmpNode *n, int k, AmpBuf *b);

AmpCode amp_exec_run_if(AmpExec *e, AmpNode *n, const AmpBuf *const *in, AmpStatus *st);
AmpCode amp_exec_run_loop(AmpExec *e, AmpNode *n, const AmpBuf *const *in, AmpStatus *st);
AmpCode amp_exec_run_scan(AmpExec *e, AmpNode *n, const AmpBuf *const *in, AmpStatus *st);

#endif
