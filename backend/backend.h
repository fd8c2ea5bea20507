/* The backend interface (docs/design.md, "The runtime and the backend contract"):
 * everything the interpreter needs from a device, and the only way the runtime reaches one.
 * A backend is an instance (a session opens its own: a CUDA backend holds a stream and
 * library handles); its buffers are device memory the interpreter never dereferences: bytes
 * move only through copy_in / copy_out / copy, and kernels run through prepare_node /
 * run_node. CPU is the reference; the device simulator ("sim", test-only) proves the
 * interpreter keeps to this. */
#ifndef AMP_BACKEND_H
#define AMP_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>

#include "ir/ir.h"
#include "ir/kernel.h"
#include "ir/tensor.h"
#include "ampc/ampc.h" /* AmpBackendKind */

/* The kernel chosen for one node at prepare time. */
typedef struct AmpBackendKernel {
    AmpKernelFn fn;   /* the kernel (for backends whose kernels take an AmpKernelCtx) */
    const void *impl; /* backend-specific data */
    /* What every backend's prepare_node sets alike: the attributes its prepare function
     * parsed (AmpKernelCtx.attrs), and the op's geometry function (ops/geom.h: the one
     * table of them) with the bytes of what it makes; geom NULL where the op has none.
     * The executor makes the geometry before the launch (AmpKernelCtx.geom). */
    const void *attrs;
    AmpKernelGeomFn geom;
    size_t geom_size;
} AmpBackendKernel;

/* A backend's device memory (AmpBackend.memory). */
typedef struct AmpBackendMemory {
    size_t used;   /* in use now, by every process */
    size_t total;  /* the device's total */
    size_t before; /* in use just before this instance opened */
} AmpBackendMemory;

/* A backend's counts since it opened (AmpBackend.stats); 0 for what it does not count. */
typedef struct AmpBackendStats {
    size_t host_reads;   /* copy_out calls, each a wait of the host on the device */
    size_t kernel_syncs; /* small values its kernels read back from the device (Slice
                            bounds ...), each a wait */
} AmpBackendStats;

/* What the opener of a backend hands it: the settings of a session's options and
 * variables, read by the options table (passes/options.c, runtime/amp_auto.c), so that no
 * backend reads the environment and a session with ignore_env is not reached by it. Zero:
 * the defaults; each backend reads the fields it has. (The CPU's settings are the
 * process's, as its libraries' thread pools are: ir.h's knobs, amp_threads_set and
 * amp_dnnl_set_off.) */
typedef struct AmpBackendSettings {
    bool tf32;           /* CUDA: float32 GEMMs and convolutions may use TF32 tensor cores */
    bool sync_each;      /* CUDA: wait after every node, naming the node of a failing kernel */
    bool profile;        /* CUDA: time every node, print the device time per op at close */
    const char *lacks;   /* the simulator: op types it claims to have no kernel for ("Relu,Conv") */
    const char *refuses; /* the simulator: op types whose kernels refuse when they run */
    /* The session's data-parallel job (backend/comm.h), NULL outside one. CUDA binds to the
     * GPU of its local rank (local_rank modulo the GPUs) and reduces the gradients with
     * NCCL bootstrapped over it (kernels/cuda/nccl_comm.h); libnccl from nccl_lib
     * (AMP_NCCL_LIB) when not NULL. */
    struct AmpComm *comm;
    const char *nccl_lib;
} AmpBackendSettings;

typedef struct AmpBackend AmpBackend;
struct AmpBackend {
    const char *name; /* "cpu", "sim", "cuda" */
    /* Whether the backend runs node n; opset is the version imported for its domain,
     * in_dtypes[i] the dtype of input i as the model types it (AMP_DT_UNDEFINED when
     * absent or unknown). */
    bool (*supports)(AmpBackend *be, const AmpNode *n, int64_t opset, const int *in_dtypes);
    /* Device memory: NULL when out of memory. alloc(0) returns a valid pointer. */
    void *(*alloc)(AmpBackend *be, size_t bytes);
    void (*free)(AmpBackend *be, void *p);
    /* host -> device, device -> host, device -> device (the ranges may not overlap). */
    AmpCode (*copy_in)(AmpBackend *be, void *dst, const void *host_src, size_t bytes, AmpStatus *st);
    AmpCode (*copy_out)(AmpBackend *be, void *host_dst, const void *src, size_t bytes, AmpStatus *st);
    AmpCode (*copy)(AmpBackend *be, void *dst, const void *src, size_t bytes, AmpStatus *st);
    /* Optional (NULL: always copy): a device pointer through which the backend reads
     * `bytes` of host memory in place for as long as the host memory lives, or NULL when
     * it cannot. The CPU answers with the pointer itself, so weights and inputs are not
     * copied there; a GPU copies them in. Never written through. */
    const void *(*borrow_host)(AmpBackend *be, const void *host, size_t bytes);
    /* Chooses the kernel for n, or AMP_ERR_UNSUPPORTED naming the node and op. */
    AmpCode (*prepare_node)(AmpBackend *be, const AmpNode *n, int64_t opset, AmpBackendKernel *out,
                            AmpStatus *st);
    /* Runs one node: ctx->in and ctx->out are device buffers, and ctx->alloc hands out
     * device buffers. */
    AmpCode (*run_node)(AmpBackend *be, const AmpBackendKernel *k, AmpKernelCtx *ctx);
    /* Frees what prepare_node made for k (NULL: nothing to free). */
    void (*release_node)(AmpBackend *be, AmpBackendKernel *k);
    /* Frees the instance (NULL for static instances). */
    void (*destroy)(AmpBackend *be);
    /* Optional: marks the start (end false) and the end (true) of a graph's kernels in a
     * run, after its inputs are in place and before its outputs are read back, so that a
     * device can time the kernels alone (amp_backend_device_ms). */
    void (*mark)(AmpBackend *be, bool end);
    /* The executor fuses nodes for this backend (runtime/fuse.c): a device, where a launch
     * and a round trip through memory cost more than the arithmetic (CUDA), and the
     * simulator, whose runs prove the fused kernels against the CPU's unfused ones. */
    bool fuse;
    /* The executor makes the fused nodes that pay on a CPU, where a pass over memory costs
     * and a kernel call does not (the CPU backend asks), whether or not it asks for the rest:
     * each Conv with the Relu, or the Add of a same-shaped tensor (and the Relu after it),
     * that alone reads its output, as one ai.ampc ConvEpilogue node (runtime/fuse_conv.c:
     * oneDNN's post-ops on the float32 accumulator before its one store); `ampc grad`'s
     * convolution weight gradients (a Conv between Transposes) as com.microsoft ConvGrad
     * nodes (runtime/fuse_wgrad.c), whose Transposes and swapped-layout reorders cost more
     * than the convolutions; A - s * B (an SGD update) as one ai.ampc SubScaled node
     * (runtime/fuse_update.c); and chains of float32 Add/Sub/Mul/Div, each its own node (an
     * update stays in place), which the CPU runs in vector rows in one pass over memory. */
    bool fuse_cpu;
    /* Optional slots: a backend that lacks the figure or the option leaves its slot NULL,
     * and the wrapper below answers with a neutral value. */
    /* Device memory: in use (all processes), the device's total, and in use just before
     * the instance opened (amp_backend_memory). */
    AmpCode (*memory)(AmpBackend *be, AmpBackendMemory *out);
    /* Counts since open (amp_backend_stats). */
    void (*stats)(AmpBackend *be, AmpBackendStats *out);
    /* The device time of the kernels between the marks since the last call, in ms (waits
     * for them; amp_backend_device_ms). */
    double (*device_ms)(AmpBackend *be);
    void *impl; /* the instance's own state */
};

/* ---- the registry: which backends this build has ---------------------------------- */

/* One backend this build has. Each backend's own file defines its entry
 * (kernels/cpu/backend_cpu.c, backend_sim.c, kernels/cuda/backend_cuda.c), and the build
 * lists the entries of the backends it compiles in the registry (amp_backend_registry,
 * generated by CMakeLists.txt from cmake/backend_registry.c.in): the CUDA entry is there
 * when, and only when, the build compiles kernels/cuda. */
typedef struct AmpBackendEntry {
    const char *name;     /* "cpu", "sim", "cuda": AmpBackend.name of its instances */
    AmpBackendKind kind;  /* the AmpSessionOptions.backend that asks for it */
    /* Opens an instance with the settings given (or hands out a shared one: the CPU's);
     * AMP_ERR_UNSUPPORTED when no device is usable. */
    AmpCode (*open)(const AmpBackendSettings *set, AmpBackend **out, AmpStatus *st);
    /* Whether a device is there to open (NULL: always). */
    bool (*usable)(void);
    /* Its supports check with no instance and no device (what `ampc verify` reports by),
     * or NULL when the answer needs an instance. */
    bool (*takes)(const AmpNode *n, int64_t opset, const int *in_dtypes);
    bool automatic; /* `auto` opens it when it is usable (else the CPU) */
} AmpBackendEntry;

/* The registry: the entries, NULL-terminated (defined by the build, see above). */
extern const AmpBackendEntry *const amp_backend_registry[];

/* A backend kind as users name it, whether this build has it or not. */
typedef struct AmpBackendKindInfo {
    AmpBackendKind kind;
    const char *name;    /* "auto", "cpu", "cuda", "sim" (--backend, AMP_BACKEND) */
    const char *title;   /* "CUDA": in messages */
    const char *missing; /* why a build lacks it: in the message that refuses to open it */
    bool device;         /* a device users have (`ampc verify` reports where its session runs) */
} AmpBackendKindInfo;
/* Every kind, n_out of them. */
const AmpBackendKindInfo *amp_backend_kinds(size_t *n_out);

/* The registry's entry for kind, or NULL when this build lacks it (or kind is auto). */
const AmpBackendEntry *amp_backend_find(AmpBackendKind kind);
/* Whether this build has the backend of kind, and whether it has it and a device is
 * usable (what `auto` picks a device on). */
bool amp_backend_built(AmpBackendKind kind);
bool amp_backend_usable(AmpBackendKind kind);

/* The CPU backend: one shared instance (host memory, the reference kernels), the fallback
 * of every device; the registry's entry of AMP_BACKEND_CPU. */
AmpBackend *amp_backend_cpu(void);

/* ---- the optional slots, through which callers above backend/ read a backend -------- */

/* Device memory (AmpBackend.memory); AMP_ERR_UNSUPPORTED with zeros for a backend that
 * has none of its own (the CPU, the simulator) or when the device does not answer. */
AmpCode amp_backend_memory(AmpBackend *be, AmpBackendMemory *out);
/* Counts since open (AmpBackend.stats); zeros for a backend that counts nothing. */
void amp_backend_stats(AmpBackend *be, AmpBackendStats *out);
/* The device time of the kernels between the marks since the last call, in ms; -1 for a
 * backend that does not time its kernels. */
double amp_backend_device_ms(AmpBackend *be);

/* The dtype of each input of node n as m types it (AMP_DT_UNDEFINED when absent or not a
 * tensor), what AmpBackend.supports reads: in `buf` when n has at most n_buf inputs, else
 * in a malloc'd array (free it when the answer is not buf); NULL when out of memory. */
static inline int *amp_backend_in_dtypes(const AmpNode *n, int *buf, int n_buf) {
    int *dts = n->n_inputs <= n_buf ? buf : (int *)malloc((size_t)n->n_inputs * sizeof *dts);
    for (int i = 0; dts && i < n->n_inputs; i++) {
        const AmpValue *v = n->inputs[i];
        dts[i] = v && v->type.kind == AMP_TYPE_TENSOR ? v->type.dtype : AMP_DT_UNDEFINED;
    }
    return dts;
}

/* Whether the backend of kind has a kernel for node n of m (the node's opset and its input
 * dtypes as m types them, as the executor asks), by its entry's takes: needs no device,
 * so `ampc verify` lists what would run on the CPU fallback on any machine. False when
 * the build lacks the backend or it cannot answer without an instance. */
bool amp_backend_kind_takes(AmpBackendKind kind, const AmpModel *m, const AmpNode *n);

/* Whether backend be has a kernel for node n of m: its supports check on the node's opset
 * and every input's dtype as m types them. The one predicate the executor chooses a
 * node's backend by (runtime/exec_prepare.c), and `ampc verify` reports by. */
bool amp_backend_takes(AmpBackend *be, const AmpModel *m, const AmpNode *n);

/* Where a session on the backend of kind runs node n of m (If / Loop / Scan aside, which
 * the executor runs itself): on the device, on the CPU fallback (copies around it), or
 * nowhere, when neither backend has a kernel: then the session fails at open naming the
 * node. On any machine, with no device: `ampc verify`'s claims, by the executor's own
 * predicates. */
typedef enum AmpNodePlace { AMP_PLACE_NONE = 0, AMP_PLACE_DEVICE, AMP_PLACE_FALLBACK } AmpNodePlace;
AmpNodePlace amp_backend_place(AmpBackendKind kind, const AmpModel *m, const AmpNode *n);

/* Opens the backend of kind with settings `set` (NULL: the defaults): auto is the first
 * automatic entry whose device is usable and opens (CUDA), else the CPU; a kind the build
 * lacks, or whose device is not there, is AMP_ERR_UNSUPPORTED. An unknown kind is
 * AMP_ERR_USAGE. */
AmpCode amp_backend_open(AmpBackendKind kind, const AmpBackendSettings *set, AmpBackend **out, AmpStatus *st);
void amp_backend_close(AmpBackend *be);

/* "cpu" / "cuda" / "auto" / "sim" -> kind; -1 when unknown. */
int amp_backend_parse(const char *name);
/* What amp_backend_parse takes, for the message that refuses a name (--backend, AMP_BACKEND). */
#define AMP_BACKEND_NAMES "cpu, cuda, auto or sim"

/* A device buffer of `bytes` filled from host memory (owned: free with be->free), or a
 * borrowed view when the backend reads host memory in place (*owned false). */
AmpCode amp_backend_upload(AmpBackend *be, const void *host, size_t bytes, void **dev, bool *owned,
                           AmpStatus *st);

#endif
