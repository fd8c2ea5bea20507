/* The CUDA backend (backend.h): device memory, one stream, the cuBLASLt and cuDNN handles
 * and one workspace per instance (a session opens its own), and the kernels of
 * amp_cuda_ops (table.c). A node it has no kernel for runs on the CPU fallback (the
 * interpreter's). Every CUDA error becomes an AmpStatus naming the node; nothing here
 * exits or aborts.
 *
 * Memory: freed blocks are kept by size and handed out again, so that a run's uploads and
 * outputs do not pay cudaMalloc / cudaFree (each of which may synchronise the device)
 * once the first run has made them. The cache is emptied when an allocation fails and
 * when the instance is destroyed.
 *
 * Copies between the host and the device of more than STAGE_MIN bytes go through one
 * pinned staging buffer (DMA from pinned memory runs at the bus's speed; from pageable
 * memory the driver stages it in small pieces).
 *
 * The open's settings (backend.h, a session's options and variables): sync_each
 * (AMP_CUDA_SYNC=1) waits for the stream after every node and names the node whose kernel
 * failed (an illegal address is otherwise reported by the next copy out, unnamed);
 * profile (AMP_CUDA_PROFILE=1) times every node with CUDA events and prints, when the
 * session closes, the device time per op type (stderr); tf32 (AMP_TF32=1 or the session's
 * tf32 option) lets float32 GEMMs and convolutions use TF32.
 *
 * In a data-parallel job (AmpBackendSettings.comm) the instance binds to the GPU of its local
 * rank and owns an NCCL communicator (nccl_comm.h) for ai.ampc AllReduceMean (allreduce.c).
 *
 * The registry finds this backend by amp_backend_entry_cuda (the build lists it when it
 * compiles this folder); nothing outside this file names its functions. */
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "kernels/cuda/convert.h"
#include "ops/geom.h" /* amp_op_geom */
#include "kernels/cuda/cuda_impl.h"
#include "kernels/cuda/nccl_comm.h"
#include "kernels/cuda/cuda_libs.h" /* last: cuBLASLt and cuDNN through dlopen */

#define WORKSPACE_BYTES ((size_t)64 << 20)
#define STAGE_MIN ((size_t)256 << 10)
#define MARK_PAIRS 64
#define STAGE_CHUNK ((size_t)64 << 20) /* the staging buffer's size at most: larger copies go in pieces */

/* AMP_CUDA_PROFILE: one node's events, and the per-op totals */
typedef struct ProfNode {
    char op[40]; /* copied: the model may be freed before the session's backend */
    cudaEvent_t start, stop;
} ProfNode;
typedef struct ProfOp {
    char op[40];
    double ms;
    size_t calls;
} ProfOp;

typedef struct FreeBlock {
    void *p;
    size_t bytes;
} FreeBlock;

typedef struct Cuda {
    AmpBackend be; /* first: the instance is the backend */
    AmpCudaCtx ctx;
    bool sync_each;
    size_t live;         /* allocations handed out and not freed */
    size_t host_reads;   /* copy_out calls */
    size_t used_before;  /* device memory in use (all processes) just before the instance opened */
    FreeBlock *cache;    /* freed blocks kept for reuse */
    size_t n_cache, cap_cache;
    /* the size of every live block, to cache it by size when freed */
    FreeBlock *sizes;
    size_t n_sizes, cap_sizes;
    void *stage; /* pinned host memory for copies (cudaHostAlloc), stage_bytes of it */
    size_t stage_bytes;
    bool profile;    /* AMP_CUDA_PROFILE */
    ProfNode *prof;  /* events of nodes not yet read */
    size_t n_prof, cap_prof;
    ProfOp *ops;     /* totals per op type */
    size_t n_ops, cap_ops;
    const void **seen; /* kernels already run once: their first call (planning, loading
                          the library's kernels) is not profiled */
    size_t n_seen, cap_seen;
    /* the marks (backend.h): event pairs around each graph's kernels; the first n_marks
       recorded and not yet read */
    cudaEvent_t marks[2 * MARK_PAIRS];
    size_t n_marks;
    double marked_ms;
} Cuda;

/* ---- memory ------------------------------------------------------------------------ */

static bool remember(FreeBlock **v, size_t *n, size_t *cap, void *p, size_t bytes) {
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 64;
        FreeBlock *x = realloc(*v, c * sizeof *x);
        if (!x) return false;
        *v = x;
        *cap = c;
    }
    (*v)[(*n)++] = (FreeBlock){p, bytes};
    return true;
}

static void drop_cache(Cuda *c) {
    for (size_t i = 0; i < c->n_cache; i++) cudaFree(c->cache[i].p);
    c->n_cache = 0;
}

static void *cuda_alloc(AmpBackend *be, size_t bytes) {
    Cuda *c = (Cuda *)be;
    size_t want = (bytes + 255) & ~(size_t)255;
    if (!want) want = 256;
    /* the smallest cached block that fits without wasting more than half of it */
    size_t best = SIZE_MAX;
    for (size_t i = 0; i < c->n_cache; i++)
        if (c->cache[i].bytes >= want && c->cache[i].bytes / 2 <= want &&
            (best == SIZE_MAX || c->cache[i].bytes < c->cache[best].bytes))
            best = i;
    void *p = NULL;
    size_t got = want;
    if (best != SIZE_MAX) {
        p = c->cache[best].p;
        got = c->cache[best].bytes;
        c->cache[best] = c->cache[--c->n_cache];
    } else if (cudaMalloc(&p, want) != cudaSuccess) {
        (void)cudaGetLastError();
        drop_cache(c); /* free what is cached, and try once more */
        if (cudaMalloc(&p, want) != cudaSuccess) {
            (void)cudaGetLastError();
            return NULL;
        }
    }
    if (!remember(&c->sizes, &c->n_sizes, &c->cap_sizes, p, got)) {
        cudaFree(p);
        return NULL;
    }
    c->live++;
    return p;
}

static void cuda_free(AmpBackend *be, void *p) {
    Cuda *c = (Cuda *)be;
    if (!p) return;
    size_t i = c->n_sizes;
    while (i-- > 0)
        if (c->sizes[i].p == p) break;
    if (i == SIZE_MAX) abort(); /* not ours: an invariant of the runtime, never user input */
    FreeBlock b = c->sizes[i];
    c->sizes[i] = c->sizes[--c->n_sizes];
    c->live--;
    /* A block freed while kernels that use it may still be queued is safe to hand out
     * again: every later use is on the same stream, so it runs after them. */
    if (!remember(&c->cache, &c->n_cache, &c->cap_cache, b.p, b.bytes)) cudaFree(b.p);
}

static AmpCode copy_fail(AmpStatus *st, const char *what, cudaError_t err) {
    (void)cudaGetLastError();
    return amp_fail(st, AMP_ERR_INTERNAL, "CUDA %s: error %d: %s", what, (int)err, cudaGetErrorString(err));
}

/* The pinned staging buffer, grown to min(bytes, STAGE_CHUNK); false when pinned memory
 * is not to be had (the copy then goes from pageable memory). */
static bool stage_for(Cuda *c, size_t bytes) {
    size_t want = bytes < STAGE_CHUNK ? bytes : STAGE_CHUNK;
    if (c->stage_bytes >= want) return true;
    /* the stream may still be reading the old buffer */
    if (c->stage && (cudaStreamSynchronize(c->ctx.stream) || cudaFreeHost(c->stage))) {
        (void)cudaGetLastError();
        return false;
    }
    c->stage = NULL;
    c->stage_bytes = 0;
    if (cudaHostAlloc(&c->stage, want, cudaHostAllocDefault) != cudaSuccess) {
        (void)cudaGetLastError();
        c->stage = NULL;
        return false;
    }
    c->stage_bytes = want;
    return true;
}

static AmpCode cuda_copy_in(AmpBackend *be, void *dst, const void *src, size_t bytes, AmpStatus *st) {
    Cuda *c = (Cuda *)be;
    cudaStream_t s = c->ctx.stream;
    if (!bytes) return AMP_OK;
    cudaError_t err = cudaSuccess;
    if (bytes < STAGE_MIN || !stage_for(c, bytes)) {
        /* From pageable memory the copy has read the host bytes when the call returns. */
        err = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s);
        return err ? copy_fail(st, "copy to the device", err) : AMP_OK;
    }
    /* piece by piece through the staging buffer: wait until the stream has read the
     * buffer's last contents before writing it again */
    for (size_t at = 0; at < bytes && !err; at += c->stage_bytes) {
        size_t n = bytes - at < c->stage_bytes ? bytes - at : c->stage_bytes;
        if ((err = cudaStreamSynchronize(s))) break;
        memcpy(c->stage, (const char *)src + at, n);
        err = cudaMemcpyAsync((char *)dst + at, c->stage, n, cudaMemcpyHostToDevice, s);
    }
    return err ? copy_fail(st, "copy to the device", err) : AMP_OK;
}

static AmpCode cuda_copy_out(AmpBackend *be, void *dst, const void *src, size_t bytes, AmpStatus *st) {
    Cuda *c = (Cuda *)be;
    c->host_reads++;
    cudaStream_t s = c->ctx.stream;
    cudaError_t err = cudaSuccess;
    if (bytes < STAGE_MIN || !stage_for(c, bytes)) {
        err = bytes ? cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s) : cudaSuccess;
        if (!err) err = cudaStreamSynchronize(s); /* also reports a kernel's failure */
        return err ? copy_fail(st, "copy from the device (or a kernel before it)", err) : AMP_OK;
    }
    for (size_t at = 0; at < bytes && !err; at += c->stage_bytes) {
        size_t n = bytes - at < c->stage_bytes ? bytes - at : c->stage_bytes;
        err = cudaMemcpyAsync(c->stage, (const char *)src + at, n, cudaMemcpyDeviceToHost, s);
        if (!err) err = cudaStreamSynchronize(s);
        if (!err) memcpy((char *)dst + at, c->stage, n);
    }
    return err ? copy_fail(st, "copy from the device (or a kernel before it)", err) : AMP_OK;
}

static AmpCode cuda_copy(AmpBackend *be, void *dst, const void *src, size_t bytes, AmpStatus *st) {
    if (!bytes) return AMP_OK;
    cudaError_t err = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, ((Cuda *)be)->ctx.stream);
    return err ? copy_fail(st, "device copy", err) : AMP_OK;
}

/* ---- kernels ----------------------------------------------------------------------- */

static bool cuda_supports(AmpBackend *be, const AmpNode *n, int64_t opset, const int *in_dtypes) {
    if (n->op < 0 || n->op >= AMP_OP__COUNT) return false;
    /* The gradients' all-reduce runs here only over NCCL; an instance without it (one
     * process, or a job whose ranks cannot all use NCCL) leaves it to the CPU fallback,
     * which reduces on the host through the session's communicator. */
    if (n->op == AMP_OP_Ampc_AllReduceMean && be && !((Cuda *)be)->ctx.nccl) return false;
    const AmpCudaOp *o = &amp_cuda_ops[n->op];
    return o->fn && o->supports && o->supports(n, opset, in_dtypes);
}

/* The registry's takes (amp_backend_kind_takes): needs no device, the table's predicates
 * read the node, its opset and its input dtypes as the model types them (the executor
 * asks the same, amp_backend_takes). */
static bool cuda_takes(const AmpNode *n, int64_t opset, const int *in_dtypes) {
    return cuda_supports(NULL, n, opset, in_dtypes);
}

static AmpCode cuda_prepare(AmpBackend *be, const AmpNode *n, int64_t opset, AmpBackendKernel *out, AmpStatus *st) {
    (void)be;
    out->fn = NULL;
    out->impl = NULL;
    const AmpCudaOp *o = n->op >= 0 && n->op < AMP_OP__COUNT ? &amp_cuda_ops[n->op] : NULL;
    if (!o || !o->fn)
        return amp_node_fail(n, st, AMP_ERR_UNSUPPORTED, "the CUDA backend has no kernel for it");
    out->fn = o->fn;
    void *attrs = NULL;
    AmpCode rc = o->prepare ? o->prepare(n, opset, &attrs, st) : AMP_OK;
    out->impl = out->attrs = attrs;
    amp_op_geom(n->op, &out->geom, &out->geom_size);
    return rc;
}

/* Adds the elapsed times of the recorded nodes to the per-op totals (waits for them). */
static void prof_collect(Cuda *c) {
    for (size_t i = 0; i < c->n_prof; i++) {
        ProfNode *p = &c->prof[i];
        float ms = 0;
        if (cudaEventSynchronize(p->stop) || cudaEventElapsedTime(&ms, p->start, p->stop)) (void)cudaGetLastError();
        cudaEventDestroy(p->start);
        cudaEventDestroy(p->stop);
        size_t j = 0;
        while (j < c->n_ops && strcmp(c->ops[j].op, p->op) != 0) j++;
        if (j == c->n_ops) {
            if (c->n_ops == c->cap_ops) {
                size_t cap = c->cap_ops ? 2 * c->cap_ops : 32;
                ProfOp *x = realloc(c->ops, cap * sizeof *x);
                if (!x) continue;
                c->ops = x;
                c->cap_ops = cap;
            }
            c->ops[c->n_ops] = (ProfOp){0};
            memcpy(c->ops[c->n_ops++].op, p->op, sizeof p->op);
        }
        c->ops[j].ms += ms;
        c->ops[j].calls++;
    }
    c->n_prof = 0;
}

static int cmp_prof(const void *a, const void *b) {
    double x = ((const ProfOp *)a)->ms, y = ((const ProfOp *)b)->ms;
    return x < y ? 1 : x > y ? -1 : 0;
}

static void prof_print(Cuda *c) {
    prof_collect(c);
    if (!c->n_ops) return;
    double total = 0;
    for (size_t j = 0; j < c->n_ops; j++) total += c->ops[j].ms;
    qsort(c->ops, c->n_ops, sizeof *c->ops, cmp_prof);
    fprintf(stderr, "AMP_CUDA_PROFILE: device time by op over the session, each node's first call left out: %.3f ms\n",
            total);
    for (size_t j = 0; j < c->n_ops; j++)
        fprintf(stderr, "  %-28s %10.3f ms %5.1f%% %8zu calls\n", c->ops[j].op, c->ops[j].ms,
                total > 0 ? 100 * c->ops[j].ms / total : 0, c->ops[j].calls);
}

static AmpCode cuda_run(AmpBackend *be, const AmpBackendKernel *k, AmpKernelCtx *ctx) {
    Cuda *c = (Cuda *)be;
    ctx->dev = &c->ctx;
    ctx->attrs = k->impl;
    ProfNode *p = NULL;
    bool first = false;
    if (c->profile) {
        size_t j = 0;
        while (j < c->n_seen && c->seen[j] != k) j++;
        if (j == c->n_seen) {
            first = true;
            if (c->n_seen == c->cap_seen) {
                size_t cap = c->cap_seen ? 2 * c->cap_seen : 256;
                const void **x = realloc(c->seen, cap * sizeof *x);
                if (x) c->seen = x, c->cap_seen = cap;
            }
            if (c->n_seen < c->cap_seen) c->seen[c->n_seen++] = k;
        }
    }
    if (c->profile && !first) {
        if (c->n_prof >= 4096) prof_collect(c); /* bounded: read the events out */
        if (c->n_prof == c->cap_prof) {
            size_t cap = c->cap_prof ? 2 * c->cap_prof : 256;
            ProfNode *x = realloc(c->prof, cap * sizeof *x);
            if (x) c->prof = x, c->cap_prof = cap;
        }
        if (c->n_prof < c->cap_prof) {
            p = &c->prof[c->n_prof];
            snprintf(p->op, sizeof p->op, "%s", ctx->node->op_type ? ctx->node->op_type : "?");
            if (cudaEventCreate(&p->start) || cudaEventCreate(&p->stop) || cudaEventRecord(p->start, c->ctx.stream)) {
                (void)cudaGetLastError();
                p = NULL;
            }
        }
    }
    AmpCode rc = k->fn(ctx);
    if (p && cudaEventRecord(p->stop, c->ctx.stream) == cudaSuccess) c->n_prof++;
    if (!rc && c->sync_each) rc = amp_cuda_check(ctx, cudaStreamSynchronize(c->ctx.stream), "the kernel (AMP_CUDA_SYNC)");
    return rc;
}

/* The marks (backend.h): a ring of MARK_PAIRS event pairs made at open, so that a session
 * that never reads its device time does not grow; when the ring is full, its pairs are
 * read (a wait on the oldest) into marked_ms and it starts again. */
static double cuda_device_ms(AmpBackend *be);

static void cuda_mark(AmpBackend *be, bool end) {
    Cuda *c = (Cuda *)be;
    if (end != (c->n_marks % 2 == 1)) return; /* an end without a start, or a second start */
    if (!end && c->n_marks == 2 * MARK_PAIRS) c->marked_ms = cuda_device_ms(be); /* kept */
    if (cudaEventRecord(c->marks[c->n_marks], c->ctx.stream)) {
        (void)cudaGetLastError();
        return;
    }
    c->n_marks++;
}

static double cuda_device_ms(AmpBackend *be) {
    Cuda *c = (Cuda *)be;
    double ms = c->marked_ms;
    for (size_t i = 0; i + 1 < c->n_marks; i += 2) {
        float t = 0;
        if (cudaEventSynchronize(c->marks[i + 1]) || cudaEventElapsedTime(&t, c->marks[i], c->marks[i + 1]))
            (void)cudaGetLastError();
        ms += t;
    }
    if (c->n_marks % 2) { /* a start whose end is to come: it moves to the ring's front */
        cudaEvent_t open = c->marks[c->n_marks - 1];
        c->marks[c->n_marks - 1] = c->marks[0];
        c->marks[0] = open;
    }
    c->n_marks %= 2;
    c->marked_ms = 0;
    return ms;
}

static void cuda_release(AmpBackend *be, AmpBackendKernel *k) {
    (void)be;
    free((void *)k->impl);
    k->impl = k->attrs = NULL;
}

static void cuda_destroy(AmpBackend *be) {
    Cuda *c = (Cuda *)be;
    if (c->ctx.stream) cudaStreamSynchronize(c->ctx.stream);
    amp_nccl_close(c->ctx.nccl);
    if (c->profile) prof_print(c);
    free(c->prof);
    free(c->ops);
    free(c->seen);
    for (size_t i = 0; i < 2 * MARK_PAIRS; i++)
        if (c->marks[i]) cudaEventDestroy(c->marks[i]);
    if (c->stage) cudaFreeHost(c->stage);
    amp_cuda_cache_free(c->ctx.cache);
    drop_cache(c);
    for (size_t i = 0; i < c->n_sizes; i++) cudaFree(c->sizes[i].p); /* leaked by a caller: still give it back */
    free(c->cache);
    free(c->sizes);
    if (c->ctx.workspace) cudaFree(c->ctx.workspace);
    if (c->ctx.dnn) cudnnDestroy(c->ctx.dnn);
    if (c->ctx.lt) cublasLtDestroy(c->ctx.lt);
    if (c->ctx.stream) cudaStreamDestroy(c->ctx.stream);
    free(c);
}

static void cuda_stats(AmpBackend *be, AmpBackendStats *out) {
    const Cuda *c = (const Cuda *)be;
    out->host_reads = c->host_reads;
    out->kernel_syncs = c->ctx.syncs;
}

/* Device memory in use (all processes) and the device's total, from cudaMemGetInfo. */
static AmpCode device_memory(size_t *used, size_t *total) {
    size_t fr = 0, tot = 0;
    if (cudaMemGetInfo(&fr, &tot) != cudaSuccess) {
        (void)cudaGetLastError();
        return AMP_ERR_INTERNAL;
    }
    *used = tot - fr;
    *total = tot;
    return AMP_OK;
}

static AmpCode cuda_memory(AmpBackend *be, AmpBackendMemory *out) {
    out->before = ((const Cuda *)be)->used_before;
    return device_memory(&out->used, &out->total);
}

static bool cuda_usable(void) {
    return amp_cuda_device_available() != 0;
}

static AmpCode cuda_open(const AmpBackendSettings *set, AmpBackend **out, AmpStatus *st) {
    *out = NULL;
    if (!amp_cuda_device_available())
        return amp_fail(st, AMP_ERR_UNSUPPORTED, "backend 'cuda': no usable CUDA device (the driver reports none)");
    /* A rank of a data-parallel job takes the GPU of its local rank, before anything makes
     * a context on another: ranks beyond the GPUs share them round robin (and then reduce
     * on the host: NCCL takes a GPU once per communicator, nccl_comm.h). */
    int devices = 0, device = 0;
    if (set->comm && cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0)
        device = (set->comm->local_rank % devices + devices) % devices;
    (void)cudaGetLastError();
    if (cudaSetDevice(device) != cudaSuccess) {
        (void)cudaGetLastError();
        return amp_fail(st, AMP_ERR_UNSUPPORTED, "backend 'cuda': cudaSetDevice(%d) failed", device);
    }
    size_t used_before = 0, total = 0;
    if (device_memory(&used_before, &total)) used_before = 0;
    if (amp_cuda_libs_load(st)) return st->code;
    Cuda *c = calloc(1, sizeof *c);
    if (!c) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    c->used_before = used_before;
    c->be = (AmpBackend){
        .name = "cuda",
        .fuse = true,
        .supports = cuda_supports,
        .alloc = cuda_alloc,
        .free = cuda_free,
        .copy_in = cuda_copy_in,
        .copy_out = cuda_copy_out,
        .copy = cuda_copy,
        .borrow_host = NULL,
        .prepare_node = cuda_prepare,
        .run_node = cuda_run,
        .release_node = cuda_release,
        .destroy = cuda_destroy,
        .mark = cuda_mark,
        .memory = cuda_memory,
        .stats = cuda_stats,
        .device_ms = cuda_device_ms,
    };
    c->sync_each = set->sync_each;
    c->profile = set->profile;
    c->ctx.tf32 = set->tf32;
    const char *what = NULL;
    int err = 0;
    cudaStream_t s = NULL;
    cublasLtHandle_t lt = NULL;
    cudnnHandle_t dnn = NULL;
    if ((err = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking))) what = "cudaStreamCreate";
    if (!what) c->ctx.stream = s;
    if (!what && (err = cublasLtCreate(&lt))) what = "cublasLtCreate";
    if (!what) c->ctx.lt = lt;
    if (!what && (err = cudnnCreate(&dnn))) what = "cudnnCreate";
    if (!what) c->ctx.dnn = dnn;
    if (!what && (err = cudnnSetStream(dnn, s))) what = "cudnnSetStream";
    if (!what && (err = cudaMalloc(&c->ctx.workspace, WORKSPACE_BYTES))) what = "the workspace's cudaMalloc";
    for (size_t i = 0; !what && i < 2 * MARK_PAIRS; i++)
        if ((err = cudaEventCreate(&c->marks[i]))) what = "cudaEventCreate";
    if (what) {
        AmpCode rc = amp_fail(st, AMP_ERR_UNSUPPORTED, "backend 'cuda': %s failed (error %d)", what, err);
        (void)cudaGetLastError();
        cuda_destroy(&c->be);
        return rc;
    }
    c->ctx.workspace_bytes = WORKSPACE_BYTES;
    /* Every rank's instance joins the NCCL communicator (a collective, as the session's
     * open is); NULL where the ranks cannot all use NCCL. */
    if (set->comm) {
        AmpCode rc = amp_nccl_open(set->comm, set->nccl_lib, &c->ctx.nccl, st);
        if (rc) {
            cuda_destroy(&c->be);
            return rc;
        }
    }
    *out = &c->be;
    return AMP_OK;
}

/* The registry's entry (backend.h): `auto` opens it when a device is there. */
const AmpBackendEntry amp_backend_entry_cuda = {.name = "cuda",
                                                .kind = AMP_BACKEND_CUDA,
                                                .open = cuda_open,
                                                .usable = cuda_usable,
                                                .takes = cuda_takes,
                                                .automatic = true};
