/* NCCL for CUDA ranks (nccl_comm.h): the library through dlopen, the communicator
 * bootstrapped over the host communicator, and every wait bounded by its timeout. */
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <nccl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/cuda/cuda_libs.h" /* amp_cuda_dlopen */
#include "kernels/cuda/nccl_comm.h"

/* The functions used, found by name in the library (never linked: see cuda_libs.h). */
#define AMP_NCCL_FUNCS(X) \
    X(ncclGetVersion) \
    X(ncclGetErrorString) \
    X(ncclGetUniqueId) \
    X(ncclCommInitRankConfig) \
    X(ncclCommGetAsyncError) \
    X(ncclAllReduce) \
    X(ncclCommFinalize) \
    X(ncclCommDestroy) \
    X(ncclCommAbort)

static struct {
#define NCCL_FN_PTR(f) __typeof__(f) *f;
    AMP_NCCL_FUNCS(NCCL_FN_PTR)
#undef NCCL_FN_PTR
} nc;

static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static bool loaded;

struct AmpNccl {
    ncclComm_t comm;
    AmpComm *host;
    cudaEvent_t done; /* recorded where a wait is to end */
    bool broken;      /* a call failed or timed out: the communicator was aborted */
};

AmpCode amp_nccl_load(const char *path, AmpStatus *st) {
    pthread_mutex_lock(&load_lock);
    AmpCode rc = AMP_OK;
    if (!loaded) {
        char why[512] = "";
        void *lib = NULL;
        if (path && *path) {
            if (!(lib = dlopen(path, RTLD_NOW | RTLD_LOCAL))) snprintf(why, sizeof why, "%s", dlerror());
        } else {
            lib = amp_cuda_dlopen(AMP_NCCL_SONAME, why, sizeof why);
        }
        if (!lib)
            rc = amp_fail(st, AMP_ERR_UNSUPPORTED, "NCCL: cannot load %s%s: %s", path && *path ? path : AMP_NCCL_SONAME,
                          path && *path ? " (AMP_NCCL_LIB)" : "", why);
        /* Every function or none: a failed search leaves the table unset. */
#define FIND(f)                                                                                                        \
    if (!rc && !(*(void **)&nc.f = dlsym(lib, #f)))                                                                    \
        rc = amp_fail(st, AMP_ERR_UNSUPPORTED, "NCCL: %s has no function %s (NCCL 2.14 or later is needed)",          \
                      path && *path ? path : AMP_NCCL_SONAME, #f);
        AMP_NCCL_FUNCS(FIND)
#undef FIND
        if (rc && lib) dlclose(lib);
        loaded = !rc; /* the library stays loaded for the process's life: sessions come and go */
    }
    pthread_mutex_unlock(&load_lock);
    return rc;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static AmpCode nccl_fail(AmpNccl *n, AmpStatus *st, const char *what, ncclResult_t r) {
    if (n && !n->broken && n->comm) nc.ncclCommAbort(n->comm);
    if (n) n->broken = true;
    return amp_fail(st, AMP_ERR_INTERNAL, "data parallel: NCCL %s: error %d: %s", what, (int)r, nc.ncclGetErrorString(r));
}

/* Polls NCCL's state (and, when ev is not NULL, that event) until NCCL is no longer busy
 * and the event has happened, or host->timeout passes: then the communicator is aborted
 * and the job ended, naming `what`. */
static AmpCode poll(AmpNccl *n, cudaEvent_t ev, const char *what, AmpStatus *st) {
    double deadline = now() + (n->host->timeout > 0 ? n->host->timeout : 300);
    for (unsigned spins = 0;; spins++) {
        ncclResult_t state = ncclSuccess;
        ncclResult_t r = nc.ncclCommGetAsyncError(n->comm, &state);
        if (r != ncclSuccess) return nccl_fail(n, st, what, r);
        if (state != ncclSuccess && state != ncclInProgress) return nccl_fail(n, st, what, state);
        if (state == ncclSuccess) {
            cudaError_t e = ev ? cudaEventQuery(ev) : cudaSuccess;
            if (e == cudaSuccess) return AMP_OK;
            if (e != cudaErrorNotReady) {
                (void)cudaGetLastError();
                return amp_fail(st, AMP_ERR_INTERNAL, "data parallel: %s: CUDA error %d: %s", what, (int)e,
                                cudaGetErrorString(e));
            }
        }
        if (now() > deadline) {
            char msg[512];
            snprintf(msg, sizeof msg,
                     "ampc: rank %d: data parallel: %s (NCCL) did not complete within %g s (AMP_COMM_TIMEOUT): a rank did "
                     "not arrive or NCCL stalled; ending the job", n->host->rank, what, n->host->timeout);
            nc.ncclCommAbort(n->comm); /* no kernel of it spins on */
            n->broken = true;
            n->host->abort(n->host, 1, msg);
            return amp_fail(st, AMP_ERR_INTERNAL, "%s", msg); /* abort does not return */
        }
        /* a tight loop for the first microseconds (a collective of small gradients), then
         * 20 us naps so that a long wait leaves the core to others */
        if (spins > 64) nanosleep(&(struct timespec){0, 20000}, NULL);
    }
}

/* What each rank tells the others before NCCL is tried: whether it loaded, and its GPU. */
enum { PROBE_NO_NCCL = 0, PROBE_READY = 1, PROBE_NO_GPU = 2 };
typedef struct Probe {
    int32_t state; /* PROBE_* */
    unsigned char uuid[16];
} Probe;

/* Whether every rank loaded NCCL and no two share a GPU; else why not in why. */
static bool all_can(const Probe *all, int size, char *why, size_t len) {
    for (int r = 0; r < size; r++) {
        if (all[r].state != PROBE_READY) {
            snprintf(why, len, "rank %d %s", r,
                     all[r].state == PROBE_NO_GPU ? "could not name its CUDA device" : "could not load NCCL");
            return false;
        }
        for (int q = 0; q < r; q++)
            if (!memcmp(all[q].uuid, all[r].uuid, sizeof all[r].uuid)) {
                snprintf(why, len, "ranks %d and %d share a GPU (more ranks than GPUs on a host)", q, r);
                return false;
            }
    }
    return true;
}

AmpCode amp_nccl_open(AmpComm *host, const char *path, AmpNccl **out, AmpStatus *st) {
    *out = NULL;
    AmpStatus load_st = {0};
    Probe mine = {.state = amp_nccl_load(path, &load_st) == AMP_OK ? PROBE_READY : PROBE_NO_NCCL};
    Probe *all = calloc((size_t)host->size, sizeof *all);
    int dev = 0;
    struct cudaDeviceProp prop;
    if (cudaGetDevice(&dev) || cudaGetDeviceProperties(&prop, dev)) {
        (void)cudaGetLastError();
        if (mine.state == PROBE_READY) mine.state = PROBE_NO_GPU; /* no NCCL anywhere; the others still hear from us */
    } else {
        memcpy(mine.uuid, &prop.uuid, sizeof mine.uuid);
    }
    if (!all) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory"); /* the others time out: the job ends */
    AmpCode rc = host->allgather(host, &mine, sizeof mine, all, st);
    char why[160] = "";
    bool can = !rc && all_can(all, host->size, why, sizeof why);
    free(all);
    if (rc) return rc;
    if (load_st.code && path && *path) return amp_fail(st, load_st.code, "%s", load_st.msg); /* asked for, not there */
    struct {
        int32_t ok;
        ncclUniqueId id;
    } root = {0};
    if (can && host->rank == 0) root.ok = nc.ncclGetUniqueId(&root.id) == ncclSuccess;
    if (can && (rc = host->broadcast(host, &root, sizeof root, 0, st))) return rc;
    if (can && !root.ok) snprintf(why, sizeof why, "rank 0's ncclGetUniqueId failed");
    if (!can || !root.ok) {
        if (host->rank == 0)
            fprintf(stderr, "ampc: data parallel: NCCL not used (%s%s%s): the gradients are all-reduced on the host\n",
                    why, load_st.code ? ": " : "", load_st.code ? load_st.msg : "");
        return AMP_OK;
    }
    AmpNccl *n = calloc(1, sizeof *n);
    if (!n) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    n->host = host;
    if (cudaEventCreateWithFlags(&n->done, cudaEventDisableTiming)) {
        (void)cudaGetLastError();
        free(n);
        return amp_fail(st, AMP_ERR_INTERNAL, "data parallel: cudaEventCreate failed");
    }
    /* Nonblocking: the set-up returns at once and is polled, so a rank that never joins
     * costs the timeout, not a hang. */
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclResult_t r = nc.ncclCommInitRankConfig(&n->comm, host->size, root.id, host->rank, &config);
    if (r != ncclSuccess && r != ncclInProgress) rc = nccl_fail(n, st, "ncclCommInitRankConfig", r);
    if (!rc) rc = poll(n, NULL, "the NCCL communicator's set-up (ncclCommInitRankConfig)", st);
    if (rc) {
        amp_nccl_close(n);
        return rc;
    }
    *out = n;
    return AMP_OK;
}

AmpCode amp_nccl_sum(AmpNccl *n, float *dbuf, size_t count, void *stream, AmpStatus *st) {
    if (n->broken) return amp_fail(st, AMP_ERR_INTERNAL, "data parallel: the NCCL communicator failed before");
    ncclResult_t r = nc.ncclAllReduce(dbuf, dbuf, count, ncclFloat, ncclSum, n->comm, (cudaStream_t)stream);
    if (r != ncclSuccess && r != ncclInProgress) return nccl_fail(n, st, "ncclAllReduce", r);
    /* nonblocking: the call is queued once NCCL's state leaves ncclInProgress */
    return r == ncclInProgress ? poll(n, NULL, "queueing the all-reduce (ncclAllReduce)", st) : AMP_OK;
}

AmpCode amp_nccl_wait(AmpNccl *n, void *stream, const char *what, AmpStatus *st) {
    cudaError_t e = cudaEventRecord(n->done, (cudaStream_t)stream);
    if (e) {
        (void)cudaGetLastError();
        return amp_fail(st, AMP_ERR_INTERNAL, "data parallel: %s: cudaEventRecord: %s", what, cudaGetErrorString(e));
    }
    return poll(n, n->done, what, st);
}

void amp_nccl_close(AmpNccl *n) {
    if (!n) return;
    /* A healthy communicator is finalized (what is queued flushed; nonblocking: polled,
     * bounded), then destroyed locally; a failed one was aborted where it failed. */
    if (n->comm && !n->broken) {
        AmpStatus ignored = {0};
        ncclResult_t r = nc.ncclCommFinalize(n->comm);
        if (r != ncclSuccess && r != ncclInProgress) nc.ncclCommAbort(n->comm);
        else if (!poll(n, NULL, "closing the NCCL communicator", &ignored)) nc.ncclCommDestroy(n->comm);
    }
    if (n->done) cudaEventDestroy(n->done);
    free(n);
}
