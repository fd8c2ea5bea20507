/* The launch contract between the interpreter and a backend's kernels: what one kernel
 * call receives (inputs, the node, a way to get its output buffers, the random state)
 * and its signature. It lives below runtime/ and kernels/ so that neither includes the
 * other; runtime/backend.h carries it to the backends. */
#ifndef AMP_KERNEL_H
#define AMP_KERNEL_H

#include <stdbool.h>
#include <stdint.h>

#include "ir/ir.h"
#include "ir/tensor.h"

/* Gives output `index` of the running node its type and shape and returns the buffer
 * to fill (data allocated, contents undefined), or NULL with st set. Rank must be
 * <= AMP_MAX_RANK. */
typedef AmpBuf *(*AmpAllocFn)(void *alloc_ctx, int index, int dtype, int rank, const int64_t *dims,
                              AmpStatus *st);

/* What a kernel derives from inputs that do not change while the session lives (oneDNN's
 * weights reordered into its blocked layout, made on the first call): one slot per node,
 * which the runtime empties (free_fn(data)) when the session closes or its initializers
 * are bound to other buffers. */
typedef struct AmpKernelPack {
    void *data;
    void (*free_fn)(void *data);
} AmpKernelPack;

/* Empties pack (ir.c). */
void amp_kernel_pack_clear(AmpKernelPack *pack);

typedef struct AmpKernelCtx {
    const AmpNode *node; /* attributes (amp_node_attr*), names for messages */
    int64_t opset;       /* version imported for the node's domain */
    int n_in;
    const AmpBuf *const *in; /* n_in entries; NULL = optional input left out */
    int n_out;               /* outputs the node lists; node->outputs[i] NULL = not wanted */
    /* n_out entries: where out[i].data is set, the runtime placed output i before the call,
     * with the dtype and shape its shape function gave; the kernel fills it. Where it is
     * NULL (a shape only the data tells: NonZero; or an output the node does not list),
     * the kernel asks alloc. (Kernels not yet converted ask alloc for every output; it
     * hands back the placed buffer after checking the shape agrees.) */
    AmpBuf *out;
    /* The node's attributes as the kernel's prepare function parsed them when the session
     * was prepared, or NULL where the kernel has none. */
    const void *attrs;
    /* The node's prepared geometry (ops/geom.h: dims, windows, layouts, what its kernels
     * index by), made by the op's AmpKernelGeomFn from attrs and the shapes of in and out
     * and checked there against the outputs placed: the executor makes it once per input
     * shapes and hands it to every call; NULL where the op has none, where it depends on
     * an input's values, or for a kernel run alone (amp_kernel_geom makes it then). */
    const void *geom;
    AmpAllocFn alloc;
    void *alloc_ctx;
    /* NULL, or the fused update gate (runtime/fuse.c): a bool scalar, a buffer of the
     * node's backend read where the kernel runs (never copied to the host), that the
     * loss_scale pass's Where(amp_found_inf, old, new) gates read. Where it holds true the
     * kernel writes every output as the input that output replaces (an optimizer:
     * output group 0 <- input group 0 after R and T, group k >= 1 <- input group k + 1),
     * i.e. the step is skipped; where false it runs as usual. Only ops
     * amp_kernel_takes_gate() names receive one. */
    const AmpBuf *gate;
    /* Bit k (k < 32) set: input k is an initializer of the model, neither bound to state
     * nor given at run time: the same bytes at the same address for as long as *pack lives,
     * so work derived from it may be kept there. NULL pack: nothing may be kept. */
    uint32_t const_in;
    AmpKernelPack *pack;
    uint64_t *rng; /* state for ops that draw random numbers (Dropout in training mode) */
    bool training; /* a training step is running (Dropout masks, BatchNorm statistics) */
    /* The session's communicator (backend/comm.h) for ai.ampc AllReduceMean: the ranks of a
     * data-parallel job; NULL outside a session that has one. */
    struct AmpComm *comm;
    /* The backend's state for its own kernels, set by its run_node: the CUDA backend's
     * stream, library handles and scratch (kernels/cuda/cuda_impl.h); NULL on the CPU. */
    void *dev;
    AmpStatus *st;
} AmpKernelCtx;

typedef AmpCode (*AmpKernelFn)(AmpKernelCtx *k);

/* An op's geometry function (ops/geom.h): from k's node, opset, attrs and the dtypes and
 * shapes of k->in and k->out (their data is not read: it may live on a device), fills
 * *geom and checks that the outputs placed are what the geometry indexes (AMP_ERR_INTERNAL
 * naming the node where they differ), or errors as the kernel would for bad shapes.
 * *made false: the geometry depends on an input's values (an axes input only the run
 * knows), so the kernel reads them and makes it itself. */
typedef AmpCode (*AmpKernelGeomFn)(AmpKernelCtx *k, void *geom, bool *made);

/* Whether every backend's kernel of op honours AmpKernelCtx.gate (ai.onnx.preview.training
 * Adam, Momentum, Adagrad): the executor folds the Where gates of such a node's outputs
 * into it (ir/ops.c). */
bool amp_kernel_takes_gate(AmpOpId op);

/* The one form of a kernel's error, "node 'NAME' (Op): " and the message (ir.c): for a
 * prepare function (node n), and for a running kernel (its node and status). The executor
 * adds the same prefix to a kernel's message that lacks it. */
AmpCode amp_node_fail(const AmpNode *n, AmpStatus *st, AmpCode code, const char *fmt, ...) AMP_PRINTF(4, 5);
AmpCode amp_kernel_fail(AmpKernelCtx *k, AmpCode code, const char *fmt, ...) AMP_PRINTF(3, 4);

/* Parses and checks node n's attributes once, when the session is prepared: *attrs gets
 * a malloc'd struct the kernel reads as ctx->attrs on every call (the backend frees it
 * with free()). Attribute errors are AMP_ERR_INPUT naming the node. */
typedef AmpCode (*AmpKernelPrepareFn)(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);

#endif
