/* The CPU backend: the interface of backend.h over the kernels of kernels/cpu (the
 * registry picks one kernel per op, which handles every dtype it supports itself), with
 * malloc'd memory and memcpy for the copies. Also backend selection by name. */
#include "backend.h"
#include "blas.h"
#include "kernels.h"

#include <stdlib.h>
#include <string.h>

static bool cpu_supports(const AmpNode *n, int64_t opset) {
    (void)opset;
    return amp_cpu_kernel(n->op) != NULL;
}

static void *cpu_alloc(size_t bytes) {
    return malloc(bytes ? bytes : 1);
}

static void cpu_free(void *p) {
    free(p);
}

static AmpCode cpu_copy(void *dst, const void *src, size_t bytes, AmpStatus *st) {
    (void)st;
    if (bytes && dst != src) memmove(dst, src, bytes);
    return AMP_OK;
}

static AmpCode cpu_prepare(const AmpNode *n, int64_t opset, AmpBackendKernel *out, AmpStatus *st) {
    (void)opset;
    /* OpenBLAS is opened here, once, so that a missing library is an error of the
     * session that needs it rather than of every ampc command. */
    if (amp_blas_load(st) != AMP_OK) return st->code;
    out->fn = amp_cpu_kernel(n->op);
    out->impl = NULL;
    if (!out->fn)
        return amp_fail(st, AMP_ERR_UNSUPPORTED, "node '%s' (%s%s%s): the CPU backend has no kernel for it",
                        n->name ? n->name : "", n->domain && *n->domain ? n->domain : "",
                        n->domain && *n->domain ? "." : "", n->op_type ? n->op_type : "");
    return AMP_OK;
}

static AmpCode cpu_run(const AmpBackendKernel *k, AmpKernelCtx *ctx) {
    return k->fn(ctx);
}

static const AmpBackend CPU = {
    .name = "cpu",
    .host_memory = true,
    .supports = cpu_supports,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .copy_in = cpu_copy,
    .copy_out = cpu_copy,
    .prepare_node = cpu_prepare,
    .run_node = cpu_run,
};

const AmpBackend *amp_backend_cpu(void) {
    return &CPU;
}

int amp_backend_parse(const char *name) {
    if (!name) return -1;
    if (strcmp(name, "auto") == 0) return AMP_BACKEND_CHOICE_AUTO;
    if (strcmp(name, "cpu") == 0) return AMP_BACKEND_CHOICE_CPU;
    if (strcmp(name, "cuda") == 0) return AMP_BACKEND_CHOICE_CUDA;
    return -1;
}

AmpCode amp_backend_select(int choice, const AmpBackend **out, AmpStatus *st) {
    *out = NULL;
    switch (choice) {
    case AMP_BACKEND_CHOICE_AUTO: /* no CUDA executor yet: the CPU */
    case AMP_BACKEND_CHOICE_CPU: *out = &CPU; return AMP_OK;
    case AMP_BACKEND_CHOICE_CUDA:
        return amp_fail(st, AMP_ERR_UNSUPPORTED,
                        "backend 'cuda': the CUDA backend is not built into the runtime yet (no device "
                        "executor); use 'cpu' or 'auto'");
    default: return amp_fail(st, AMP_ERR_USAGE, "unknown backend %d (expected cpu, cuda or auto)", choice);
    }
}
