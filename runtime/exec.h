/* The graph interpreter under the session: runs one graph of a model node by node through
 * a backend (kernel chosen once per node at prepare), frees each intermediate after its last
 * use, places intermediates in one planned arena from the second run on (plan.h), and runs
 * If / Loop bodies and training algorithms with access to the enclosing values.
 * Device-neutral: every value the interpreter holds is a backend buffer it never
 * dereferences. Weights are uploaded once, inputs go in with copy_in (or are read in place
 * where the backend reads host memory), outputs come back with copy_out, and control flow
 * reads its conditions and trip counts with copy_out. */
#ifndef AMP_EXEC_H
#define AMP_EXEC_H

#include <stdbool.h>
#include <stddef.h>

#include "backend/backend.h"
#include "ir/ir.h"
#include "ir/tensor.h"

typedef struct AmpExec AmpExec;

typedef struct AmpNamedBuf {
    const char *name;
    AmpBuf buf; /* host memory, borrowed: the executor never writes or frees input data */
} AmpNamedBuf;

typedef struct AmpExecOptions {
    bool training;              /* Dropout masks and BatchNorm statistics as in training */
    uint64_t seed;              /* for ops that draw random numbers (when rng is NULL) */
    AmpBackend *backend;        /* NULL: the CPU backend (borrowed: outlives the executor) */
    /* A host-memory backend (the CPU) that runs the nodes `backend` has no kernel for,
     * with copies around each (as onnxruntime's providers fall back); NULL: none, and
     * such a node fails prepare, naming it. */
    AmpBackend *fallback;
    uint64_t *rng;              /* shared RNG state (a session's); NULL: the executor's own */
    bool no_plan;               /* never build an arena: every intermediate is allocated alone */
    /* No plan-level fusion (runtime/fuse.c): every node runs as the model has it. A hook
     * that reads every value (amp_exec_set_hook) needs this: fused nodes do not make the
     * values inside them. */
    bool no_fuse;
    uint64_t max_iterations;    /* a Loop / Scan node stops past this many iterations (0: no cap) */
    /* The largest tensor a node may make, in bytes (0, or over AMP_EXEC_MAX_OUTPUT_BYTES:
     * that cap, 64 GiB): a larger output fails the run with AMP_ERR_UNSUPPORTED. */
    uint64_t max_tensor_bytes;
    /* A CLOCK_MONOTONIC time in seconds past which a run stops between nodes (*deadline
     * 0: none); shared, like rng, by the executors of one session, which sets it per run. */
    const double *deadline;
    /* The session's communicator (backend/comm.h), handed to every kernel (AllReduceMean's);
     * NULL: none. Borrowed: outlives the executor. */
    struct AmpComm *comm;
} AmpExecOptions;

/* Seconds on CLOCK_MONOTONIC (for AmpExecOptions.deadline). */
double amp_exec_clock(void);

/* Prepares g (a graph of m) for running: every node gets its kernel, or the call fails
 * with AMP_ERR_UNSUPPORTED naming the first op the backend cannot run. */
AmpCode amp_exec_prepare(AmpModel *m, AmpGraph *g, const AmpExecOptions *opt, AmpExec **out,
                         AmpStatus *st);

/* Prepares g, whose parent scope is prev's graph, to run right after prev (a training
 * algorithm after the main graph: ONNX runs their concatenation). g reads prev's values
 * as they are after prev's run, so every value of prev that g reads is kept alive to the
 * end of prev's run. The result is freed separately, before prev. */
AmpCode amp_exec_prepare_after(AmpExec *prev, AmpGraph *g, const AmpExecOptions *opt, AmpExec **out,
                               AmpStatus *st);

/* Prepares g, whose parent scope is outer's graph, to run on its own while outer's values
 * are as amp_exec_reset left them (a training initialization graph reading initializers). */
AmpCode amp_exec_prepare_in(AmpExec *outer, AmpGraph *g, const AmpExecOptions *opt, AmpExec **out,
                            AmpStatus *st);

/* Drops the values of the last run and puts the initializers (or their bound buffers)
 * back in place, as at the start of a run (uploading an initializer the first time it is
 * needed: this can fail for want of device memory). */
AmpCode amp_exec_reset(AmpExec *e, AmpStatus *st);

/* Makes initializer v of e's graph read *buf (a device buffer of e's backend) on every
 * later run instead of the model's tensor (resident weights and optimizer state). buf is
 * borrowed and may change between runs (its contents and even its data pointer); NULL
 * restores the model's tensor. */
AmpCode amp_exec_bind(AmpExec *e, const AmpValue *v, const AmpBuf *buf, AmpStatus *st);

/* The device buffer holding initializer v of e's graph as the model gives it (uploaded
 * now if it was not yet), borrowed until amp_exec_free. */
AmpCode amp_exec_initializer(AmpExec *e, const AmpValue *v, const AmpBuf **out, AmpStatus *st);

void amp_exec_set_training(AmpExec *e, bool training);

/* Called after each node of e's graph (not of its bodies) has run, while its inputs and
 * outputs are held: read them with amp_exec_value (device buffers: copy out through
 * amp_exec_backend). A nonzero return stops the run with that code (calibration and
 * `ampc compare` read every value this way). */
typedef AmpCode (*AmpExecHook)(void *ctx, AmpExec *e, const AmpNode *n, AmpStatus *st);
void amp_exec_set_hook(AmpExec *e, AmpExecHook fn, void *ctx);
AmpBackend *amp_exec_backend(const AmpExec *e);

/* Runs the graph. Inputs (host memory) are matched to graph inputs by name; a graph input
 * that is also an initializer may be left out (its initializer is used). outputs[i]
 * receives graph output i copied out into malloc'd host memory the caller frees
 * (amp_buf_free); outputs may be NULL, then the results stay inside (amp_exec_value)
 * until the next run. */
AmpCode amp_exec_run(AmpExec *e, const AmpNamedBuf *inputs, size_t n_inputs, AmpBuf *outputs,
                     AmpStatus *st);

/* Asks e to compute value v, made by one of its nodes, straight into *buf: the buffer of
 * the state `old` that v replaces when the step ends (an update binding), so that no copy
 * follows. True where it is safe, and then done: v's producer has one output and reads
 * `old` only if it is elementwise (Add, Sub, Mul, Div, Where: each output element from the
 * same element of that input), and nothing e runs after it reads `old`. *buf is read at
 * every run (the state may move); a run where its type or shape is not v's places v as
 * before. */
bool amp_exec_write_into(AmpExec *e, const AmpValue *v, const AmpValue *old, const AmpBuf *buf);

/* After a run: the device buffer of value v (a graph output, a value a later graph reads,
 * an initializer or an input), borrowed until the next run; NULL when it holds nothing. */
const AmpBuf *amp_exec_value(const AmpExec *e, const AmpValue *v);

typedef struct AmpExecMemory {
    size_t arena_bytes; /* planned arenas of this executor and of the bodies it ran */
    size_t peak_bytes;  /* most intermediate bytes live at once during the last run */
    bool planned;       /* an arena is in use (planned before the run from the shape
                           functions, or from the sizes of the last run) */
    size_t values_sized;   /* intermediates whose shape the step plan knew before running */
    size_t values_dynamic; /* intermediates the plan could not size before running */
    size_t late_nodes;     /* last run: nodes sized when reached, from values made in the step */
    size_t syncs;          /* last run: small values copied out of the device for those shapes */
    size_t fallback_nodes; /* nodes run by the fallback backend (bodies once prepared included) */
    size_t fused_nodes;    /* nodes of the plan that stand for several of the model's (fuse.c) */
    size_t absorbed_nodes; /* the model's nodes they stand for */
    size_t geometries;     /* node geometries made (ops/geom.h), all runs: once per node and shapes */
} AmpExecMemory;

void amp_exec_memory(const AmpExec *e, AmpExecMemory *out);

/* The op types of the nodes of es[0..n) (bodies prepared so far included) that run on the
 * fallback backend, with their counts ("Relu x3, Conv x1"), into buf; "" when none. */
void amp_exec_fallback_ops(const AmpExec *const *es, size_t n, char *buf, size_t len);
/* The same for the plans' fused nodes ("FusedElementwise x4, UnscaleCheck x1, Adam+gate x1"). */
void amp_exec_fused_ops(const AmpExec *const *es, size_t n, char *buf, size_t len);

void amp_exec_free(AmpExec *e);

#endif
