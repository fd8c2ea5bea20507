/* NCCL for CUDA ranks (docs/parallel.md): the device-memory collective of a data-parallel
 * job, owned by the CUDA backend instance (one NCCL communicator per instance, on the GPU
 * it is bound to) and bootstrapped over the session's host communicator (backend/comm.h:
 * its all-gather and broadcast), so no MPI code is here and the MPI plugin knows nothing of
 * CUDA. libnccl is opened with dlopen, as cuBLASLt is (cuda_libs.c): only a CUDA session
 * that joins a job loads it.
 *
 * NCCL's calls wait on the other ranks without a deadline of their own; every wait here is
 * polled against the host communicator's timeout, and one that passes aborts the NCCL
 * communicator (so no kernel spins on) and then ends the job through the host
 * communicator's abort, naming what did not complete. */
#ifndef AMP_CUDA_NCCL_COMM_H
#define AMP_CUDA_NCCL_COMM_H

#include <stddef.h>

#include "backend/comm.h"
#include "ir/ir.h"

/* libnccl's soname, opened when AMP_NCCL_LIB (AmpBackendSettings.nccl_lib) names no path. */
#define AMP_NCCL_SONAME "libnccl.so.2"

typedef struct AmpNccl AmpNccl;

/* Opens libnccl once per process and finds its functions: `path` when not NULL (an
 * error naming it and dlerror's reason when it does not open), else AMP_NCCL_SONAME by the
 * loader's search, then in the folders the build found the CUDA libraries in. Needs no
 * GPU. AMP_ERR_UNSUPPORTED when the library or one of its functions is missing. */
AmpCode amp_nccl_load(const char *path, AmpStatus *st);

/* The NCCL communicator of host's ranks, every rank on its current CUDA device. Every rank
 * of host calls it, in the same order as its other collectives. The ranks first all-gather
 * whether NCCL loaded and their device's UUID: when a rank lacks NCCL or two ranks share a
 * GPU (more ranks than GPUs: NCCL refuses a GPU twice in one communicator), *out is NULL on
 * every rank (rank 0 says why on stderr) and the gradients are reduced on the host, as
 * without NCCL. Else rank 0 makes the unique id, broadcasts it, and every rank joins
 * (ncclCommInitRankConfig, nonblocking, the wait bounded by host->timeout). An error when
 * `path` was given and does not open on this rank, or when NCCL fails to set up. */
AmpCode amp_nccl_open(AmpComm *host, const char *path, AmpNccl **out, AmpStatus *st);

/* dbuf[0..n) (device float32) <- its sum over the ranks, queued on stream (a cudaStream_t). */
AmpCode amp_nccl_sum(AmpNccl *n, float *dbuf, size_t count, void *stream, AmpStatus *st);

/* Waits until everything queued on stream so far has run, polling NCCL's state and the
 * stream against the host communicator's timeout; `what` names the wait in messages. Past
 * the timeout it does not return: the job ends (host->abort). */
AmpCode amp_nccl_wait(AmpNccl *n, void *stream, const char *what, AmpStatus *st);

/* Frees n (NULL: nothing): finalized when healthy, aborted when a call failed. */
void amp_nccl_close(AmpNccl *n);

#endif
