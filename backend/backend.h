/* The backend interface (DESIGN.md, "Runtime and executors"): what the interpreter needs
 * from a device. supports / prepare_node choose a kernel once per node by (op, dtypes,
 * opset); run_node runs it; alloc/free/copy_in/copy_out move bytes. CPU is the reference. */
#ifndef AMP_BACKEND_H
#define AMP_BACKEND_H

#include <stdbool.h>
#include <stddef.h>

#include "ir.h"
#include "kernel.h"
#include "tensor.h"

/* The kernel chosen for one node at prepare time. */
typedef struct AmpBackendKernel {
    AmpKernelFn fn;   /* CPU: the registered kernel */
    const void *impl; /* backend-specific data (NULL on the CPU) */
} AmpBackendKernel;

typedef struct AmpBackend {
    const char *name;   /* "cpu", "cuda" */
    bool host_memory;   /* buffers from alloc() are plain host memory (CPU) */
    /* Whether the backend runs node n; opset is the version imported for its domain.
     * Input dtypes are read from the model's value types where known. */
    bool (*supports)(const AmpNode *n, int64_t opset);
    /* Device memory: NULL when out of memory. alloc(0) returns a valid pointer. */
    void *(*alloc)(size_t bytes);
    void (*free)(void *p);
    AmpCode (*copy_in)(void *dst, const void *host_src, size_t bytes, AmpStatus *st);
    AmpCode (*copy_out)(void *host_dst, const void *src, size_t bytes, AmpStatus *st);
    /* Chooses the kernel for n, or AMP_ERR_UNSUPPORTED naming the node and op. */
    AmpCode (*prepare_node)(const AmpNode *n, int64_t opset, AmpBackendKernel *out, AmpStatus *st);
    AmpCode (*run_node)(const AmpBackendKernel *k, AmpKernelCtx *ctx);
} AmpBackend;

/* Which backend a session asks for (AmpSessionOptions.backend uses the same numbers). */
typedef enum AmpBackendChoice {
    AMP_BACKEND_CHOICE_AUTO = 0, /* CUDA when built and a device is present, else CPU */
    AMP_BACKEND_CHOICE_CPU = 1,
    AMP_BACKEND_CHOICE_CUDA = 2
} AmpBackendChoice;

const AmpBackend *amp_backend_cpu(void);

/* The backend for `choice`: CUDA is AMP_ERR_UNSUPPORTED until the CUDA executor exists;
 * auto falls back to the CPU. An unknown choice is AMP_ERR_USAGE. */
AmpCode amp_backend_select(int choice, const AmpBackend **out, AmpStatus *st);

/* "cpu" / "cuda" / "auto" -> choice; -1 when unknown. */
int amp_backend_parse(const char *name);

#endif
