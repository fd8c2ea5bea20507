/* Data-parallel sessions (docs/parallel.md): the communicator a session joins at open
 * (AmpSessionOptions.data_parallel), the allreduce pass over its training graph, and the
 * open-time check that every rank runs the same model with the same options. A session of
 * one rank (no launcher, or one rank under it) has no communicator, runs no pass and
 * compares nothing: it is the session it was before data parallelism. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/amp_auto.h"
#include "runtime/session_impl.h"

/* AmpRunOptions.data_parallel counts AMP_DATA_PARALLEL's words (passes/options.c) as these do. */
_Static_assert(AMP_DATA_PARALLEL_AUTO == 0 && AMP_DATA_PARALLEL_MPI == 1 && AMP_DATA_PARALLEL_OFF == 2,
               "AMP_DATA_PARALLEL's words: auto, mpi, off");

/* The launcher's variables (not AMP_*: MPI's own), which amp_comm_launched reads. */
static const char *real_env(const char *name) {
    return getenv(name);
}

static const char *no_env(const char *name) {
    (void)name;
    return NULL;
}

/* Whether the session runs on CUDA (named, or auto with a usable GPU): the backend whose
 * device collective (NCCL) a one-rank job checks. */
static bool on_cuda(const AmpAutoConfig *cfg) {
    return cfg->backend == AMP_BACKEND_CUDA ||
           (cfg->backend == AMP_BACKEND_AUTO && amp_backend_usable(AMP_BACKEND_CUDA));
}

AmpCode amp_session_dp_open(AmpSession *s, const AmpSessionOptions *opt, AmpAutoConfig *cfg, AmpStatus *st) {
    int mode = opt->data_parallel;
    if (mode < AMP_DATA_PARALLEL_AUTO || mode > AMP_DATA_PARALLEL_OFF)
        return amp_fail(st, AMP_ERR_USAGE, "AmpSessionOptions.data_parallel %d: expected AMP_DATA_PARALLEL_AUTO (0), "
                        "_MPI (1) or _OFF (2)", mode);
    /* AMP_DATA_PARALLEL and AMP_COMM_TIMEOUT, read by the options table where the fields
     * leave them (amp_auto_config), so that `ampc run` can ask for a job of one rank (a
     * one-rank NCCL communicator on one GPU). */
    const AmpRunOptions *r = &cfg->opts.run;
    if (mode == AMP_DATA_PARALLEL_AUTO) mode = r->data_parallel;
    bool launched = amp_comm_launched(opt->ignore_env ? no_env : real_env);
    if (mode == AMP_DATA_PARALLEL_OFF || (mode == AMP_DATA_PARALLEL_AUTO && !launched)) return AMP_OK;
    double timeout = opt->comm_timeout > 0 ? opt->comm_timeout : r->comm_timeout;
    AmpComm *c = NULL;
    AmpCode rc = amp_comm_open_mpi(r->mpi_plugin, timeout > 0 ? timeout : 300, &c, st);
    if (rc) return rc;
    if (timeout > 0) c->timeout = timeout; /* the process's one communicator: the last open's */
    /* One rank is the process without MPI (no pass, the same bytes), except where _MPI asks
     * for it on CUDA: the gradients then go through a one-rank NCCL communicator, which a
     * machine with one GPU can check against none. */
    if (c->size > 1 || (mode == AMP_DATA_PARALLEL_MPI && on_cuda(cfg))) s->comm = c;
    cfg->be.comm = s->comm;
    return AMP_OK;
}

static bool hash_piece(void *ctx, const void *d, size_t len) {
    uint64_t *h = ctx;
    *h = amp_hash_bytes(*h, d, len);
    return true;
}

/* The hash every rank compares at open: the model as this session runs it (serialized
 * after the onnxruntime-training import, the AMP rewrite and the allreduce pass: its bytes
 * streamed, so a model of any size, past protobuf's 2 GB, hashes without a copy) and the
 * options that change its numbers beyond it (backend, random seed, fusion, TF32). */
static AmpCode session_hash(AmpModel *m, const AmpAutoConfig *cfg, const AmpSessionOptions *opt, uint64_t *out,
                            AmpStatus *st) {
    uint64_t h = AMP_HASH_INIT;
    AmpCode rc = amp_model_save_visit(m, hash_piece, &h, st);
    if (rc) {
        amp_status_prefix(st, "data parallel: hashing the model: ");
        return rc;
    }
    int64_t knobs[] = {cfg->backend, cfg->tf32, opt->no_fuse, (int64_t)opt->seed};
    *out = amp_hash_bytes(h, knobs, sizeof knobs);
    return AMP_OK;
}

AmpCode amp_session_dp_prepare(AmpSession *s, const AmpAutoConfig *cfg, const AmpSessionOptions *opt,
                               AmpStatus *st) {
    if (!s->comm) return AMP_OK;
    const AmpPass *pass = amp_pass_find("allreduce");
    AmpCode rc = pass ? pass->run(s->m, NULL, st) : amp_fail(st, AMP_ERR_INTERNAL, "no allreduce pass");
    uint64_t mine = 0, *all = NULL;
    if (!rc) rc = session_hash(s->m, cfg, opt, &mine, st);
    AmpComm *c = s->comm;
    if (!rc && !(all = calloc((size_t)c->size, sizeof *all))) rc = amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    /* Every rank takes part in the all-gather, even one whose pass failed: its hash 0 then
     * fails the others' check instead of leaving them waiting. */
    if (rc) {
        AmpStatus ignored = {0};
        uint64_t zero[1] = {0}, *sink = calloc((size_t)c->size, sizeof *sink);
        if (sink) c->allgather(c, zero, sizeof zero, sink, &ignored);
        free(sink);
        return rc;
    }
    rc = c->allgather(c, &mine, sizeof mine, all, st);
    char ranks[256] = "";
    size_t len = 0;
    int differ = 0, first = 0;
    for (int r = 1; !rc && r < c->size; r++) {
        if (all[r] == all[0]) continue;
        if (!differ) first = r;
        if (len < sizeof ranks - 16) len += (size_t)snprintf(ranks + len, sizeof ranks - len, "%s%d", differ ? ", " : "", r);
        differ++;
    }
    if (!rc && differ)
        rc = amp_fail(st, AMP_ERR_USAGE,
                      "data parallel: rank%s %s opened a different model or options than rank 0 (rank %d's hash "
                      "%016llx, rank 0's %016llx): every rank must open the same model with the same options", differ > 1 ? "s" : "",
                      ranks, first, (unsigned long long)all[first], (unsigned long long)all[0]);
    free(all);
    return rc;
}

AmpComm *amp_session_comm(AmpSession *s) {
    return s ? s->comm : NULL;
}
