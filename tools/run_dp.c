/* `ampc run` and `ampc bench` as ranks of a data-parallel job (docs/parallel.md): under
 * mpirun every rank opens the same model (the session joins the job and all-reduces the
 * gradients), takes its 1/N slice of the batch, or its own folder with --inputs-per-rank;
 * rank 0 prints the whole batch's loss (the ranks' losses averaged) and writes the
 * checkpoint and outputs; the other ranks print nothing but errors. An error on one rank
 * ends the whole job, so no rank waits for one that left. The AMP_TEST_* variables read
 * here are test hooks, the one set of AMP_* variables outside the options table
 * (docs/env.md says so): tests/runtime/test_data_parallel.py alone sets them. */
#include "tools/run_dp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/comm.h"
#include "runtime/observe.h"
#include "tools/cli_say.h"

AmpComm *ampc_dp_comm(const AmpSession *s) {
    return amp_session_comm((AmpSession *)s);
}

int ampc_dp_rank(const AmpSession *s) {
    AmpComm *c = ampc_dp_comm(s);
    return c ? c->rank : 0;
}

const char *ampc_dp_inputs_dir(const RunArgs *a, const AmpSession *s, char *buf, size_t len) {
    if (!a->inputs_per_rank) return a->inputs;
    int rank = ampc_dp_rank(s);
    const char *at = strstr(a->inputs_per_rank, "{rank}");
    if (at)
        snprintf(buf, len, "%.*s%d%s", (int)(at - a->inputs_per_rank), a->inputs_per_rank, rank, at + 6);
    else
        snprintf(buf, len, "%s/rank%d", a->inputs_per_rank, rank);
    return buf;
}

/* The session's input of this name: whether the model leaves its first dim free. */
static bool first_dim_free(const AmpSession *s, AmpMode mode, const char *name) {
    AmpIoInfo info;
    for (size_t i = 0; amp_session_input_info(s, mode, i, &info); i++)
        if (strcmp(info.name, name) == 0) return info.rank >= 1 && info.dims[0] < 0;
    return false;
}

AmpCode ampc_dp_slice(const AmpSession *s, AmpMode mode, RunInputs *in, AmpStatus *st) {
    AmpComm *c = ampc_dp_comm(s);
    if (!c || mode != AMP_MODE_TRAIN) return AMP_OK;
    /* The batch: the first dim of the first input whose first dim the model leaves free. */
    const AmpTensorView *first = NULL;
    for (size_t k = 0; k < in->n && !first; k++)
        if (in->t[k].rank >= 1 && first_dim_free(s, mode, in->t[k].name)) first = &in->t[k];
    if (!first)
        return amp_fail(st, AMP_ERR_USAGE, "data parallel: no input has a free first dim (a batch axis) to split "
                        "over the %d ranks: give each rank its own data with --inputs-per-rank", c->size);
    int64_t batch = first->dims[0];
    if (batch % c->size)
        return amp_fail(st, AMP_ERR_USAGE, "data parallel: input '%s' has a batch of %lld, which %d ranks cannot split "
                        "evenly (%lld %% %d = %lld): give a batch divisible by the ranks, or each rank its own data with "
                        "--inputs-per-rank", first->name, (long long)batch, c->size, (long long)batch, c->size,
                        (long long)(batch % c->size));
    int64_t part = batch / c->size;
    for (size_t k = 0; k < in->n; k++) {
        AmpTensorView *t = &in->t[k];
        if (t->rank < 1 || t->dims[0] != batch || !first_dim_free(s, mode, t->name)) continue;
        size_t row = amp_tensor_view_bytes(t) / (size_t)batch;
        t->data = (char *)t->data + row * (size_t)part * (size_t)c->rank;
        t->dims[0] = part;
    }
    return AMP_OK;
}

void ampc_dp_quiet(const AmpSession *s) {
    AmpComm *c = ampc_dp_comm(s);
    if (!c || c->rank == 0) return;
    ampc_say_rank(c->rank);
    fflush(stdout);
    if (!freopen("/dev/null", "w", stdout)) ampc_say("rank %d: cannot silence standard output", c->rank);
}

double ampc_dp_loss(const AmpSession *s, double loss, AmpStatus *st) {
    AmpComm *c = ampc_dp_comm(s);
    if (!c) return loss;
    float v = (float)loss;
    if (c->allreduce_sum_f32(c, &v, 1, st)) return loss;
    return (double)v / c->size;
}

bool ampc_dp_writes(const AmpSession *s) {
    return ampc_dp_rank(s) == 0;
}

const char *ampc_dp_rank_copy(const AmpSession *s, const char *path, char *buf, size_t len) {
    int rank = ampc_dp_rank(s);
    const char *every = getenv("AMP_TEST_SAVE_EVERY_RANK");
    if (rank == 0 || !path || !every || strcmp(every, "1") != 0) return NULL;
    snprintf(buf, len, "%s.rank%d", path, rank);
    return buf;
}

void ampc_dp_test_hooks(const AmpSession *s, long step) {
    AmpComm *c = ampc_dp_comm(s);
    const char *die = getenv("AMP_TEST_DIE_AT_STEP"), *hang = getenv("AMP_TEST_HANG_AT_STEP");
    const char *who = getenv("AMP_TEST_RANK");
    if (!c || (!die && !hang) || c->rank != (who ? atoi(who) : 1)) return;
    if (die && atol(die) == step) {
        fprintf(stderr, "ampc: rank %d: AMP_TEST_DIE_AT_STEP=%ld: exiting before step %ld\n", c->rank, step, step);
        fflush(stderr);
        _exit(3);
    }
    if (hang && atol(hang) == step) {
        fprintf(stderr, "ampc: rank %d: AMP_TEST_HANG_AT_STEP=%ld: stopping before step %ld\n", c->rank, step, step);
        fflush(stderr);
        for (;;) pause();
    }
}

void ampc_dp_summary(const AmpSession *s, long steps) {
    AmpComm *c = ampc_dp_comm(s);
    if (!c || steps < 1 || !c->grad_calls) return;
    printf("data parallel: %d ranks (%s%s%s), gradients all-reduced per step: %llu bytes in %.1f call%s (%llu where "
           "they lie), %.3f ms\n",
           c->size, c->name, c->grad_transport ? ", gradients over " : "", c->grad_transport ? c->grad_transport : "",
           (unsigned long long)(c->grad_bytes / (uint64_t)steps),
           (double)c->grad_calls / (double)steps, c->grad_calls == (uint64_t)steps ? "" : "s",
           (unsigned long long)(c->grad_bytes_in_place / (uint64_t)steps), c->grad_seconds * 1e3 / (double)steps);
}

int ampc_dp_fail(const AmpSession *s, int code) {
    AmpComm *c = ampc_dp_comm(s);
    if (c && code) c->abort(c, code, NULL); /* the others may be waiting in a collective for this rank */
    return code;
}
