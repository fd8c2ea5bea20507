/* libampc_mpi.so: the MPI communicator (backend/comm.h), a plugin the runtime opens with
 * dlopen only in an MPI job, so that neither the ampc binary nor libampc links libmpi.
 * It calls nothing of ampc's (the executable exports no symbols to it): messages go into
 * the caller's AmpStatus, or to standard error right before the job is ended.
 *
 * Every collective is nonblocking (MPI_I*) and waited on by polling MPI_Test against a
 * deadline (AmpComm.timeout); the gradients' sum is a nonblocking barrier so waited on, then
 * MPI's blocking all-reduce (mpi_sum). While a rank waits it answers pings on a control
 * communicator with the number of the collective it is in; a rank whose deadline passes
 * pings every other rank, and the ranks that do not answer, or answer from another
 * collective, are named as not arrived before MPI_Abort ends the job. A rank that exits
 * (dies) is seen by mpirun itself, which ends the job and names it. */
#include <mpi.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/comm.h"

enum { TAG_PING = 7001, TAG_PONG = 7002 };
/* MPI counts are int: larger buffers go in pieces. */
#define PIECE ((size_t)1 << 30)

typedef struct Mpi {
    MPI_Comm coll; /* the collectives' */
    MPI_Comm ctl;  /* pings and their answers, apart from the collectives' traffic */
    uint64_t seq;  /* collectives entered so far on this rank */
} Mpi;

static Mpi g_mpi;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static AmpCode fail(AmpStatus *st, AmpCode code, const char *what, int err) {
    char text[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    if (err != MPI_SUCCESS) MPI_Error_string(err, text, &len);
    if (st) {
        st->code = code;
        snprintf(st->msg, sizeof st->msg, "MPI: %s failed%s%s", what, len ? ": " : "", text);
    }
    return code;
}

/* Answers every ping waiting on this rank with the number of the collective it is in. */
static void answer_pings(void) {
    for (;;) {
        int flag = 0;
        MPI_Status s;
        MPI_Iprobe(MPI_ANY_SOURCE, TAG_PING, g_mpi.ctl, &flag, &s);
        if (!flag) return;
        uint64_t ping;
        MPI_Recv(&ping, 1, MPI_UINT64_T, s.MPI_SOURCE, TAG_PING, g_mpi.ctl, MPI_STATUS_IGNORE);
        MPI_Send(&g_mpi.seq, 1, MPI_UINT64_T, s.MPI_SOURCE, TAG_PONG, g_mpi.ctl);
    }
}

/* The deadline passed in collective `what`: asks every other rank where it is, names the
 * ones that are not in this collective, and ends the job. */
static void not_arrived(AmpComm *c, const char *what) {
    int n = c->size;
    uint64_t *at = calloc((size_t)n, sizeof *at);
    char *answered = calloc((size_t)n, 1);
    MPI_Request *req = calloc((size_t)n, sizeof *req);
    if (!at || !answered || !req) MPI_Abort(MPI_COMM_WORLD, 4);
    for (int r = 0; r < n; r++) {
        req[r] = MPI_REQUEST_NULL;
        if (r != c->rank) MPI_Isend(&g_mpi.seq, 1, MPI_UINT64_T, r, TAG_PING, g_mpi.ctl, &req[r]);
    }
    double grace = c->timeout < 2 ? c->timeout : 2, until = now() + grace;
    int got = 0;
    while (got < n - 1 && now() < until) {
        answer_pings();
        int flag = 0;
        MPI_Status s;
        MPI_Iprobe(MPI_ANY_SOURCE, TAG_PONG, g_mpi.ctl, &flag, &s);
        if (!flag) {
            sched_yield();
            continue;
        }
        MPI_Recv(&at[s.MPI_SOURCE], 1, MPI_UINT64_T, s.MPI_SOURCE, TAG_PONG, g_mpi.ctl, MPI_STATUS_IGNORE);
        answered[s.MPI_SOURCE] = 1;
        got++;
    }
    char list[512] = "";
    size_t len = 0;
    int missing = 0;
    for (int r = 0; r < n && len < sizeof list - 64; r++) {
        if (r == c->rank || (answered[r] && at[r] == g_mpi.seq)) continue;
        len += (size_t)snprintf(list + len, sizeof list - len, "%s%d", missing++ ? ", " : "", r);
        if (answered[r])
            len += (size_t)snprintf(list + len, sizeof list - len, " (in collective #%llu)",
                                    (unsigned long long)at[r]);
    }
    fprintf(stderr,
            "ampc: rank %d: data parallel: %s (collective #%llu) did not complete within %g s "
            "(AMP_COMM_TIMEOUT): rank%s %s did not arrive; ending the job (MPI_Abort)\n",
            c->rank, what, (unsigned long long)g_mpi.seq, c->timeout, missing == 1 ? "" : "s",
            missing ? list : "(none found: the transport stalled)");
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* Waits for req, polling, until the deadline. */
static AmpCode wait_for(AmpComm *c, MPI_Request *req, const char *what, AmpStatus *st) {
    double t0 = now(), until = t0 + c->timeout;
    for (unsigned long polls = 0;; polls++) {
        int done = 0;
        int err = MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (err != MPI_SUCCESS) return fail(st, AMP_ERR_INTERNAL, what, err);
        if (done) return AMP_OK;
        if (polls % 256 != 255) continue;
        answer_pings();
        double t = now();
        if (t > until) not_arrived(c, what);
        /* Past a millisecond, give the core away between polls: an oversubscribed job's
         * other ranks may be computing on it. */
        if (t - t0 > 1e-3) sched_yield();
    }
}

/* The gradients' sum: every rank first meets the others at a nonblocking barrier, waited on
 * against the deadline like every collective (a rank that never comes is named there), then
 * the sum is MPI's blocking all-reduce, which every rank has entered: Open MPI's blocking
 * algorithms move the 12.6 MB of the MLP's gradients between two ranks in 2.7 ms, its
 * nonblocking one (libnbc) in 6.0 (2026-12-07, this 2-core host, --bind-to core). A rank
 * that dies inside the sum is mpirun's to see, as everywhere. */
static AmpCode mpi_sum(AmpComm *c, float *buf, size_t n, AmpStatus *st) {
    g_mpi.seq++;
    MPI_Request req;
    int err = MPI_Ibarrier(g_mpi.coll, &req);
    if (err != MPI_SUCCESS) return fail(st, AMP_ERR_INTERNAL, "the all-reduce", err);
    AmpCode rc = wait_for(c, &req, "the all-reduce", st);
    for (size_t at = 0; !rc && at < n; at += PIECE) {
        size_t k = n - at < PIECE ? n - at : PIECE;
        err = MPI_Allreduce(MPI_IN_PLACE, buf + at, (int)k, MPI_FLOAT, MPI_SUM, g_mpi.coll);
        if (err != MPI_SUCCESS) rc = fail(st, AMP_ERR_INTERNAL, "the all-reduce", err);
    }
    return rc;
}

static AmpCode mpi_bcast(AmpComm *c, void *buf, size_t bytes, int root, AmpStatus *st) {
    g_mpi.seq++;
    for (size_t at = 0; at < bytes || (at == 0 && bytes == 0); at += PIECE) {
        size_t k = bytes - at < PIECE ? bytes - at : PIECE;
        MPI_Request req;
        int err = MPI_Ibcast((char *)buf + at, (int)k, MPI_BYTE, root, g_mpi.coll, &req);
        if (err != MPI_SUCCESS) return fail(st, AMP_ERR_INTERNAL, "the broadcast", err);
        AmpCode rc = wait_for(c, &req, "the broadcast", st);
        if (rc || bytes == 0) return rc;
    }
    return AMP_OK;
}

static AmpCode mpi_gather(AmpComm *c, const void *mine, size_t bytes, void *all, AmpStatus *st) {
    if (bytes > PIECE) return fail(st, AMP_ERR_INTERNAL, "an all-gather of over 1 GiB", MPI_SUCCESS);
    g_mpi.seq++;
    MPI_Request req;
    int err = MPI_Iallgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, g_mpi.coll, &req);
    if (err != MPI_SUCCESS) return fail(st, AMP_ERR_INTERNAL, "the all-gather", err);
    return wait_for(c, &req, "the all-gather", st);
}

static AmpCode mpi_barrier(AmpComm *c, AmpStatus *st) {
    g_mpi.seq++;
    MPI_Request req;
    int err = MPI_Ibarrier(g_mpi.coll, &req);
    if (err != MPI_SUCCESS) return fail(st, AMP_ERR_INTERNAL, "the barrier", err);
    return wait_for(c, &req, "the barrier", st);
}

static void mpi_abort(AmpComm *c, int code, const char *msg) {
    (void)c;
    if (msg) fprintf(stderr, "%s\n", msg);
    fflush(stderr);
    fflush(stdout);
    MPI_Abort(MPI_COMM_WORLD, code ? code : 1);
    exit(code ? code : 1); /* MPI_Abort does not return; should it, the rank ends all the same */
}

static void finalize(void) {
    int done = 0;
    MPI_Finalized(&done);
    if (!done) MPI_Finalize();
}

__attribute__((visibility("default"))) AmpCode amp_comm_mpi_plugin_open(int abi, double timeout, AmpComm *c,
                                                                       AmpStatus *st);

AmpCode amp_comm_mpi_plugin_open(int abi, double timeout, AmpComm *c, AmpStatus *st) {
    if (abi != AMP_COMM_ABI) {
        st->code = AMP_ERR_UNSUPPORTED;
        snprintf(st->msg, sizeof st->msg, "data parallel: the MPI plugin has layout %d, this ampc %d: install the "
                 "plugin built with this ampc", AMP_COMM_ABI, abi);
        return st->code;
    }
    int inited = 0, err;
    MPI_Initialized(&inited);
    if (!inited) {
        int provided;
        if ((err = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided)) != MPI_SUCCESS)
            return fail(st, AMP_ERR_UNSUPPORTED, "MPI_Init_thread", err);
        atexit(finalize);
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm local;
    if ((err = MPI_Comm_dup(MPI_COMM_WORLD, &g_mpi.coll)) != MPI_SUCCESS ||
        (err = MPI_Comm_dup(MPI_COMM_WORLD, &g_mpi.ctl)) != MPI_SUCCESS ||
        (err = MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local)) != MPI_SUCCESS)
        return fail(st, AMP_ERR_INTERNAL, "making the job's communicators", err);
    *c = (AmpComm){.name = "mpi",
                   .timeout = timeout > 0 ? timeout : 300,
                   .allreduce_sum_f32 = mpi_sum,
                   .broadcast = mpi_bcast,
                   .allgather = mpi_gather,
                   .barrier = mpi_barrier,
                   .abort = mpi_abort,
                   .impl = &g_mpi};
    MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &c->size);
    MPI_Comm_rank(local, &c->local_rank);
    MPI_Comm_free(&local);
    return AMP_OK;
}
