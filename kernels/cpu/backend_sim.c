/* The device simulator (backend.h): the CPU kernels behind memory the interpreter cannot
 * dereference, so that the whole suite proves, without a GPU, that the runtime moves
 * every byte through the backend. A "device pointer" is a malloc'd host address with bit
 * 62 set: outside the canonical address range of x86-64 (and of any 48- or 57-bit user
 * space), so a host read or write through it faults, and sanitizers name the access.
 * Pointer arithmetic inside a buffer (arena offsets) keeps working. The simulator's own
 * copies and kernels clear the bit, and refuse a host pointer where a device one belongs:
 * a buffer the interpreter forgot to upload is an error naming the node, not a silent
 * host read. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "kernels/cpu/backend_sim.h"
#include "kernels/cpu/kernels.h"

#define SIM_TAG ((uintptr_t)1 << 62)
#define SIM_MAX_OUT 64

typedef struct Sim {
    AmpBackend be;     /* first: the instance is the backend */
    size_t live;       /* allocations not yet freed */
    size_t host_reads; /* copy_out calls */
    char *lacks;   /* settings' lacks at open: ",Relu,Conv," (ops it claims to have no kernel for), or NULL */
    char *refuses; /* settings' refuses: ops it takes at prepare but whose kernels answer
                      AMP_ERR_UNSUPPORTED when they run (a device kernel meeting a shape
                      it cannot do), or NULL */
} Sim;

static bool is_dev(const void *p) {
    return ((uintptr_t)p & SIM_TAG) != 0;
}

static void *to_host(const void *dev) {
    return (void *)((uintptr_t)dev & ~SIM_TAG);
}

static void *to_dev(void *host) {
    return (void *)((uintptr_t)host | SIM_TAG);
}

static void *sim_alloc(AmpBackend *be, size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) return NULL;
    if ((uintptr_t)p & SIM_TAG) { /* never on a real system: the simulator would be meaningless */
        free(p);
        return NULL;
    }
    ((Sim *)be)->live++;
    return to_dev(p);
}

static void sim_free(AmpBackend *be, void *p) {
    if (!p) return;
    if (!is_dev(p)) abort(); /* an internal invariant of the runtime, never user input */
    ((Sim *)be)->live--;
    free(to_host(p));
}

static AmpCode misuse(AmpStatus *st, const char *what) {
    return amp_fail(st, AMP_ERR_INTERNAL, "device simulator: %s", what);
}

static AmpCode sim_copy_in(AmpBackend *be, void *dst, const void *src, size_t bytes, AmpStatus *st) {
    (void)be;
    if (!bytes) return AMP_OK;
    if (!is_dev(dst) || is_dev(src)) return misuse(st, "copy_in needs a device destination and a host source");
    memcpy(to_host(dst), src, bytes);
    return AMP_OK;
}

static AmpCode sim_copy_out(AmpBackend *be, void *dst, const void *src, size_t bytes, AmpStatus *st) {
    ((Sim *)be)->host_reads++;
    if (!bytes) return AMP_OK;
    if (is_dev(dst) || !is_dev(src)) return misuse(st, "copy_out needs a host destination and a device source");
    memcpy(dst, to_host(src), bytes);
    return AMP_OK;
}

static AmpCode sim_copy(AmpBackend *be, void *dst, const void *src, size_t bytes, AmpStatus *st) {
    (void)be;
    if (!bytes) return AMP_OK;
    if (!is_dev(dst) || !is_dev(src)) return misuse(st, "copy needs device buffers on both sides");
    memmove(to_host(dst), to_host(src), bytes);
    return AMP_OK;
}

/* Whether the op is in a ",A,B," list. */
static bool listed(const char *list, const char *op) {
    if (!list || !op) return false;
    size_t len = strlen(op);
    for (const char *p = strstr(list, op); p; p = strstr(p + 1, op))
        if (p[-1] == ',' && p[len] == ',') return true;
    return false;
}

static bool sim_supports(AmpBackend *be, const AmpNode *n, int64_t opset, const int *in_dtypes) {
    (void)opset, (void)in_dtypes;
    if (listed(((const Sim *)be)->lacks, n->op_type)) return false; /* a test's way to make the executor fall back */
    return amp_cpu_kernel(n->op) != NULL;
}

static AmpCode sim_prepare(AmpBackend *be, const AmpNode *n, int64_t opset, AmpBackendKernel *out, AmpStatus *st) {
    (void)be;
    return amp_cpu_prepare_node(n, opset, out, st);
}

static void sim_release(AmpBackend *be, AmpBackendKernel *k) {
    (void)be;
    amp_cpu_release_node(k);
}

/* The kernel's view of the run: host copies of the AmpBufs, pointers translated. */
typedef struct SimRun {
    AmpAllocFn alloc; /* the interpreter's allocator and its context */
    void *alloc_ctx;
    const AmpNode *node;
    AmpBuf out[SIM_MAX_OUT];
} SimRun;

static AmpBuf *sim_run_alloc(void *ctx, int index, int dtype, int rank, const int64_t *dims, AmpStatus *st) {
    SimRun *r = ctx;
    if (index < 0 || index >= SIM_MAX_OUT) {
        amp_fail(st, AMP_ERR_INTERNAL, "device simulator: node '%s' asked for output %d", r->node->name, index);
        return NULL;
    }
    AmpBuf *b = r->alloc(r->alloc_ctx, index, dtype, rank, dims, st);
    if (!b) return NULL;
    if (b->data && !is_dev(b->data)) {
        misuse(st, "the interpreter gave a kernel a host buffer as output");
        return NULL;
    }
    r->out[index] = *b;
    r->out[index].data = to_host(b->data);
    return &r->out[index];
}

static AmpCode sim_run_in(AmpBackend *be, const AmpBackendKernel *k, AmpKernelCtx *ctx, AmpBuf *in,
                          const AmpBuf **inp);

/* The kernel's inputs translated into arrays on the stack, or allocated for a node with
 * many inputs. */
static AmpCode sim_run(AmpBackend *be, const AmpBackendKernel *k, AmpKernelCtx *ctx) {
    enum { MAX_IN = 64 };
    if (listed(((const Sim *)be)->refuses, ctx->node->op_type))
        return amp_fail(ctx->st, AMP_ERR_UNSUPPORTED, "device simulator: node '%s' (%s): refused (AMP_SIM_REFUSES)",
                        ctx->node->name ? ctx->node->name : "", ctx->node->op_type);
    if (ctx->n_out > SIM_MAX_OUT) return misuse(ctx->st, "a node with more outputs than the simulator takes");
    AmpBuf in_stack[MAX_IN], *in = in_stack;
    const AmpBuf *inp_stack[MAX_IN], **inp = inp_stack;
    if (ctx->n_in > MAX_IN) {
        in = malloc((size_t)ctx->n_in * sizeof *in);
        inp = malloc((size_t)ctx->n_in * sizeof *inp);
    }
    AmpCode rc = in && inp ? sim_run_in(be, k, ctx, in, inp) : misuse(ctx->st, "out of memory");
    if (in != in_stack) free(in), free(inp);
    return rc;
}

static AmpCode sim_run_in(AmpBackend *be, const AmpBackendKernel *k, AmpKernelCtx *ctx, AmpBuf *in,
                          const AmpBuf **inp) {
    (void)be;
    for (int i = 0; i < ctx->n_in; i++) {
        inp[i] = NULL;
        if (!ctx->in[i]) continue;
        in[i] = *ctx->in[i];
        if (in[i].data && !is_dev(in[i].data))
            return amp_fail(ctx->st, AMP_ERR_INTERNAL,
                            "device simulator: input %d of node '%s' (%s) is host memory: the interpreter did not "
                            "upload it",
                            i, ctx->node->name ? ctx->node->name : "", ctx->node->op_type);
        in[i].data = in[i].data ? to_host(in[i].data) : NULL;
        inp[i] = &in[i];
    }
    SimRun r = {.alloc = ctx->alloc, .alloc_ctx = ctx->alloc_ctx, .node = ctx->node};
    for (int i = 0; ctx->out && i < ctx->n_out; i++) {
        r.out[i] = ctx->out[i];
        if (!r.out[i].data) continue;
        if (!is_dev(r.out[i].data)) return misuse(ctx->st, "the interpreter placed an output in host memory");
        r.out[i].data = to_host(r.out[i].data);
    }
    AmpBuf gate;
    if (ctx->gate) {
        if (!is_dev(ctx->gate->data)) return misuse(ctx->st, "the interpreter gave a kernel a host buffer as its gate");
        gate = *ctx->gate;
        gate.data = to_host(gate.data);
    }
    AmpKernelCtx host = *ctx;
    host.gate = ctx->gate ? &gate : NULL;
    host.in = inp;
    host.out = ctx->out ? r.out : NULL;
    host.attrs = k->impl;
    host.alloc = sim_run_alloc;
    host.alloc_ctx = &r;
    return k->fn(&host);
}

static void sim_stats(AmpBackend *be, AmpBackendStats *out) {
    out->host_reads = ((const Sim *)be)->host_reads;
}

static void sim_destroy(AmpBackend *be) {
    free(((Sim *)be)->lacks);
    free(((Sim *)be)->refuses);
    free(be);
}

/* ",A,B," from an environment list "A,B" (NULL when unset or empty); false on OOM. */
static bool op_list(const char *names, char **out) {
    *out = NULL;
    if (!names || !*names) return false;
    size_t len = strlen(names);
    if (!(*out = malloc(len + 3))) return true;
    (*out)[0] = ',';
    memcpy(*out + 1, names, len);
    (*out)[len + 1] = ',';
    (*out)[len + 2] = '\0';
    return false;
}

AmpCode amp_backend_sim_open(const AmpBackendSettings *set, AmpBackend **out, AmpStatus *st) {
    *out = NULL;
    Sim *s = calloc(1, sizeof *s);
    if (!s) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    s->be = (AmpBackend){
        .name = "sim",
        .fuse = true,
        .supports = sim_supports,
        .alloc = sim_alloc,
        .free = sim_free,
        .copy_in = sim_copy_in,
        .copy_out = sim_copy_out,
        .copy = sim_copy,
        .borrow_host = NULL,
        .prepare_node = sim_prepare,
        .run_node = sim_run,
        .release_node = sim_release,
        .destroy = sim_destroy,
        .stats = sim_stats,
    };
    if (op_list(set->lacks, &s->lacks) || op_list(set->refuses, &s->refuses)) {
        sim_destroy(&s->be);
        return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    }
    *out = &s->be;
    return AMP_OK;
}

size_t amp_backend_sim_live(const AmpBackend *be) {
    return be && be->destroy == sim_destroy ? ((const Sim *)be)->live : SIZE_MAX;
}

/* The registry's entry (backend.h). Its supports check needs an instance (the ops it lacks
 * are the open's settings). */
const AmpBackendEntry amp_backend_entry_sim = {.name = "sim", .kind = AMP_BACKEND_SIM, .open = amp_backend_sim_open};
