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

/* The kernel chosen for one node at prepare time. */
typedef struct AmpBackendKernel {
    AmpKernelFn fn;   /* the kernel (for backends whose kernels take an AmpKernelCtx) */
    const void *impl; /* backend-specific data */
} AmpBackendKernel;

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
    /* copy_out calls so far, each a wait of the host on the device: counted by the device
     * backends (CUDA, sim: one instance per session); the CPU's shared instance leaves it 0. */
    size_t copies_out;
    void *impl; /* the instance's own state */
};

/* Which backend a session asks for (AmpSessionOptions.backend uses the same numbers). */
typedef enum AmpBackendChoice {
    AMP_BACKEND_CHOICE_AUTO = 0, /* CUDA when built and a device is present, else CPU */
    AMP_BACKEND_CHOICE_CPU = 1,
    AMP_BACKEND_CHOICE_CUDA = 2,
    AMP_BACKEND_CHOICE_SIM = 3 /* the device simulator (tests) */
} AmpBackendChoice;

/* The CPU backend (one static instance; host memory, the reference kernels). */
AmpBackend *amp_backend_cpu(void);

/* The device simulator: the CPU kernels behind memory the interpreter cannot dereference.
 * Its pointers are host addresses moved out of the canonical range, so a stray host read
 * of one faults (and sanitizers name it); its kernels and copies translate them, and
 * refuse a host pointer where a device one belongs. Counts its live allocations. For the
 * tests of the fallback, AMP_SIM_LACKS=Op,Op,... (read at open) names ops it claims to
 * have no kernel for, and AMP_SIM_REFUSES=Op,... ops whose kernels it takes at prepare
 * but which answer AMP_ERR_UNSUPPORTED when they run (as a CUDA kernel does for a
 * geometry its library cannot run): the executor then hands the node to the fallback. */
AmpCode amp_backend_sim_open(AmpBackend **out, AmpStatus *st);
/* Live allocations of a sim instance (0 after everything was freed); SIZE_MAX if be is
 * not the simulator. */
size_t amp_backend_sim_live(const AmpBackend *be);

/* The CUDA backend (kernels/cuda/backend_cuda.c; only in a build with CUDA): one stream,
 * cuBLASLt and cuDNN handles and a workspace per instance. AMP_ERR_UNSUPPORTED when no
 * device is usable. */
AmpCode amp_backend_cuda_open(AmpBackend **out, AmpStatus *st);
/* Small values a CUDA instance's kernels read back from the device (Slice bounds ...),
 * each a wait on the stream; 0 for another backend. */
size_t amp_backend_cuda_syncs(const AmpBackend *be);
/* Device memory in use (all processes) and the device's total, from cudaMemGetInfo. */
AmpCode amp_backend_cuda_memory(const AmpBackend *be, size_t *used, size_t *total);
/* The device time of the kernels between the marks since the last call, in ms (CUDA
 * events; waits for them); -1 for a backend that does not time its kernels. */
double amp_backend_device_ms(AmpBackend *be);

/* Lets a CUDA instance's float32 GEMMs and convolutions use TF32 (no-op elsewhere). */
void amp_backend_cuda_allow_tf32(AmpBackend *be, bool on);
/* The CUDA instance's part of amp_backend_device_ms. */
double amp_backend_cuda_device_ms(AmpBackend *be);

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

/* Whether the CUDA backend has a kernel for node n of m (the node's opset and its input
 * dtypes as m types them, as the executor asks); needs no device, so `ampc verify` lists
 * what would run on the CPU fallback on any machine. False in a build without CUDA. */
bool amp_backend_cuda_takes(const AmpModel *m, const AmpNode *n);

/* Whether backend be has a kernel for node n of m: its supports check on the node's opset
 * and every input's dtype as m types them. The one predicate the executor chooses a
 * node's backend by (runtime/exec_prepare.c), and `ampc verify` reports by. */
bool amp_backend_takes(AmpBackend *be, const AmpModel *m, const AmpNode *n);

/* Where a CUDA session runs node n of m (If / Loop / Scan aside, which the executor runs
 * itself): on the device, on the CPU fallback (copies around it), or nowhere, when
 * neither backend has a kernel: then the session fails at open naming the node. On any
 * machine, with no device: `ampc verify`'s claims, by the executor's own predicates. */
typedef enum AmpNodePlace { AMP_PLACE_NONE = 0, AMP_PLACE_DEVICE, AMP_PLACE_FALLBACK } AmpNodePlace;
AmpNodePlace amp_backend_cuda_place(const AmpModel *m, const AmpNode *n);

/* Whether this build has the CUDA backend, and whether it has and a device is usable
 * (what `auto` picks CUDA on). */
bool amp_backend_cuda_built(void);
bool amp_backend_cuda_usable(void);

/* Opens the backend for `choice`: auto is CUDA when the build has it and a device is
 * usable, else the CPU; CUDA without a build or a device is AMP_ERR_UNSUPPORTED. An
 * unknown choice is AMP_ERR_USAGE. */
AmpCode amp_backend_open(int choice, AmpBackend **out, AmpStatus *st);
void amp_backend_close(AmpBackend *be);

/* "cpu" / "cuda" / "auto" / "sim" -> choice; -1 when unknown. */
int amp_backend_parse(const char *name);
/* What amp_backend_parse takes, for the message that refuses a name (--backend, AMP_BACKEND). */
#define AMP_BACKEND_NAMES "cpu, cuda, auto or sim"

/* A device buffer of `bytes` filled from host memory (owned: free with be->free), or a
 * borrowed view when the backend reads host memory in place (*owned false). */
AmpCode amp_backend_upload(AmpBackend *be, const void *host, size_t bytes, void **dev, bool *owned,
                           AmpStatus *st);

#endif
