/* The CPU backend: the interface of backend.h over the kernels of kernels/cpu (table.c
 * gives one kernel per op, which handles every dtype it supports itself), with
 * malloc'd memory, memcpy for the copies, and host memory read in place. */
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "kernels/cpu/blas.h"
#include "kernels/cpu/kernels.h"

static bool cpu_supports(AmpBackend *be, const AmpNode *n, int64_t opset, const int *in_dtypes) {
    (void)be, (void)opset, (void)in_dtypes;
    return amp_cpu_kernel(n->op) != NULL;
}

static void *cpu_alloc(AmpBackend *be, size_t bytes) {
    (void)be;
    return malloc(bytes ? bytes : 1);
}

static void cpu_free(AmpBackend *be, void *p) {
    (void)be;
    free(p);
}

static AmpCode cpu_copy(AmpBackend *be, void *dst, const void *src, size_t bytes, AmpStatus *st) {
    (void)be, (void)st;
    if (bytes && dst != src) memmove(dst, src, bytes);
    return AMP_OK;
}

static const void *cpu_borrow(AmpBackend *be, const void *host, size_t bytes) {
    (void)be, (void)bytes;
    return host;
}

AmpCode amp_cpu_prepare_node(const AmpNode *n, int64_t opset, AmpBackendKernel *out, AmpStatus *st) {
    /* OpenBLAS is opened here, once, so that a missing library is an error of the
     * session that needs it rather than of every ampc command. */
    if (amp_blas_load(st) != AMP_OK) return st->code;
    out->fn = amp_cpu_kernel(n->op);
    out->impl = NULL;
    if (!out->fn)
        return amp_fail(st, AMP_ERR_UNSUPPORTED, "node '%s' (%s%s%s): the CPU backend has no kernel for it",
                        n->name ? n->name : "", n->domain && *n->domain ? n->domain : "",
                        n->domain && *n->domain ? "." : "", n->op_type ? n->op_type : "");
    AmpKernelPrepareFn prep = amp_cpu_kernel_prepare(n->op);
    void *attrs = NULL;
    AmpCode rc = prep ? prep(n, opset, &attrs, st) : AMP_OK;
    out->impl = attrs;
    return rc;
}

void amp_cpu_release_node(AmpBackendKernel *k) {
    free((void *)k->impl);
    k->impl = NULL;
}

static AmpCode cpu_prepare(AmpBackend *be, const AmpNode *n, int64_t opset, AmpBackendKernel *out, AmpStatus *st) {
    (void)be;
    return amp_cpu_prepare_node(n, opset, out, st);
}

static AmpCode cpu_run(AmpBackend *be, const AmpBackendKernel *k, AmpKernelCtx *ctx) {
    (void)be;
    ctx->attrs = k->impl;
    return k->fn(ctx);
}

static void cpu_release(AmpBackend *be, AmpBackendKernel *k) {
    (void)be;
    amp_cpu_release_node(k);
}

static AmpBackend CPU = {
    .name = "cpu",
    .supports = cpu_supports,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .copy_in = cpu_copy,
    .copy_out = cpu_copy,
    .copy = cpu_copy,
    .borrow_host = cpu_borrow,
    .prepare_node = cpu_prepare,
    .run_node = cpu_run,
    .release_node = cpu_release,
    .fuse_cpu = true,
};

static AmpCode cpu_open(const AmpBackendSettings *set, AmpBackend **out, AmpStatus *st) {
    (void)set, (void)st; /* one shared instance: its one process-wide setting, no_dnnl, is read by dnnl.c */
    *out = &CPU;
    return AMP_OK;
}

static bool cpu_takes(const AmpNode *n, int64_t opset, const int *in_dtypes) {
    return cpu_supports(NULL, n, opset, in_dtypes);
}

/* The registry's entry (backend.h): every build has it; amp_backend_cpu() opens it. */
const AmpBackendEntry amp_backend_entry_cpu = {
    .name = "cpu", .kind = AMP_BACKEND_CPU, .open = cpu_open, .takes = cpu_takes};
