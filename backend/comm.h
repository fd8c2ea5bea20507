/* The communicator interface (docs/parallel.md): what data-parallel training needs from the
 * processes of one job, beside the backend interface. A communicator is a rank among `size`
 * ranks; its collectives take host memory (the CPU's buffers, and the device simulator's,
 * which are host memory too). The one-rank communicator (amp_comm_single) is the identity;
 * the MPI one lives in a plugin, libampc_mpi.so (comm/mpi.c), opened with dlopen only when
 * a job asks for it, so neither the ampc binary nor libampc needs libmpi to start.
 *
 * Every collective is called by every rank in the same order. A collective that does not
 * complete within `timeout` seconds (a rank died or hangs) does not return: the
 * communicator prints which ranks did not arrive and ends the whole job (MPI_Abort), so no
 * rank waits forever. Errors it can report (a bad argument, out of memory) come back as
 * AmpStatus, filled by the communicator itself (the plugin calls no function of ampc's). */
#ifndef AMP_COMM_H
#define AMP_COMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ampc/status.h"

/* The plugin's entry point (comm/mpi.c), looked up by name with dlsym. */
#define AMP_COMM_PLUGIN_ENTRY "amp_comm_mpi_plugin_open"
#define AMP_COMM_PLUGIN_FILE "libampc_mpi.so"
/* The plugin's layout version: the loader refuses a plugin of another build's layout. */
#define AMP_COMM_ABI 3

typedef struct AmpComm AmpComm;
struct AmpComm {
    const char *name; /* "single", "mpi" */
    int rank, size;
    int local_rank;   /* the rank among the job's processes on this host (a GPU's index) */
    double timeout;   /* seconds a collective may wait for the other ranks */
    /* buf[0..n) <- the sum over the ranks of their buf[0..n), every rank the same bits. */
    AmpCode (*allreduce_sum_f32)(AmpComm *c, float *buf, size_t n, AmpStatus *st);
    /* buf[0..bytes) <- root's. */
    AmpCode (*broadcast)(AmpComm *c, void *buf, size_t bytes, int root, AmpStatus *st);
    /* all[r * bytes ..] <- rank r's mine[0..bytes), for every r (all holds size * bytes). */
    AmpCode (*allgather)(AmpComm *c, const void *mine, size_t bytes, void *all, AmpStatus *st);
    AmpCode (*barrier)(AmpComm *c, AmpStatus *st);
    /* Ends every rank of the job with exit status `code`, after printing msg (may be NULL)
     * on this rank's standard error. Does not return. */
    void (*abort)(AmpComm *c, int code, const char *msg);
    /* What the gradients' all-reduce moved since open (the AllReduceMean kernels count it):
     * bytes, collectives, and the bytes reduced where the step left them (no copy in or out). */
    uint64_t grad_bytes, grad_calls, grad_bytes_in_place;
    double grad_seconds;
    /* What carried the gradients when not this communicator ("nccl": the CUDA backend's
     * NCCL communicator, kernels/cuda/allreduce.c); NULL: this one. For the summary line. */
    const char *grad_transport;
    void *impl;
};

/* The plugin's entry: fills *c (its fields zeroed by the caller) for this process's MPI job,
 * initialising MPI once per process. abi must be AMP_COMM_ABI. Returns AMP_OK or fills st. */
typedef AmpCode (*AmpCommPluginOpen)(int abi, double timeout, AmpComm *c, AmpStatus *st);

/* The one-rank communicator (rank 0 of 1): every collective leaves its buffer as it is. A
 * fresh instance (its counts its own); free with amp_comm_close. NULL: out of memory. */
AmpComm *amp_comm_single(void);

/* Whether this process was started by an MPI launcher with more than one rank: mpirun's
 * OMPI_COMM_WORLD_SIZE or PMI's PMI_SIZE above 1, or PMIX_RANK set without either (the
 * size is then MPI's to say). `env` is getenv or a stand-in for tests. */
bool amp_comm_launched(const char *(*env)(const char *name));

/* The MPI communicator of this process's job, made once per process (MPI is initialised
 * once) and shared by every session that asks: libampc_mpi.so from `plugin` when not NULL
 * (AMP_MPI_PLUGIN), else beside the executable, else beside the library holding this code,
 * else wherever the dynamic loader finds it. AMP_ERR_UNSUPPORTED naming the paths tried
 * when none opens. */
AmpCode amp_comm_open_mpi(const char *plugin, double timeout, AmpComm **out, AmpStatus *st);

/* Releases c: a single communicator is freed; the MPI one stays (MPI ends at exit). */
void amp_comm_close(AmpComm *c);

/* 64-bit FNV-1a of bytes, continuing from h (start with AMP_HASH_INIT): the open-time check
 * that every rank runs the same model and options. */
#define AMP_HASH_INIT UINT64_C(0xcbf29ce484222325)
uint64_t amp_hash_bytes(uint64_t h, const void *bytes, size_t n);

#endif
