/* `ampc run` / `ampc bench` as ranks of a data-parallel job (tools/run_dp.c,
 * docs/parallel.md). Every function is the identity (or does nothing) for a session of one
 * rank, which has no communicator. */
#ifndef AMPC_TOOLS_RUN_DP_H
#define AMPC_TOOLS_RUN_DP_H

#include <stdbool.h>
#include <stddef.h>

#include "ampc/ampc.h"
#include "tools/run.h"

struct AmpComm *ampc_dp_comm(const AmpSession *s);
int ampc_dp_rank(const AmpSession *s); /* 0 without a communicator */
/* The folder this rank reads: --inputs-per-rank's ({rank} replaced, else DIR/rankR), else
 * --inputs (NULL: none). */
const char *ampc_dp_inputs_dir(const RunArgs *a, const AmpSession *s, char *buf, size_t len);
/* Training: each input whose first dim the model leaves free and that has the batch's size
 * (the first such input's first dim) becomes this rank's 1/N slice of it (a view into the
 * same data). AMP_ERR_USAGE naming the input when the batch does not split evenly. */
AmpCode ampc_dp_slice(const AmpSession *s, AmpMode mode, RunInputs *in, AmpStatus *st);
/* Ranks other than 0 print nothing on standard output from here on, and on standard error
 * their errors alone, as "ampc (rank N): ..." (notes are rank 0's). */
void ampc_dp_quiet(const AmpSession *s);
/* The mean of the ranks' losses: with equal slices, the whole batch's mean loss. */
double ampc_dp_loss(const AmpSession *s, double loss, AmpStatus *st);
/* Whether this rank writes checkpoints and outputs (rank 0 alone). */
bool ampc_dp_writes(const AmpSession *s);
/* Tests only (AMP_TEST_SAVE_EVERY_RANK=1): where rank R > 0 saves its state too, PATH.rankR;
 * NULL otherwise. */
const char *ampc_dp_rank_copy(const AmpSession *s, const char *path, char *buf, size_t len);
/* Tests only: before step `step` (from 1), rank AMP_TEST_RANK (default 1) exits
 * (AMP_TEST_DIE_AT_STEP=step) or stops for good (AMP_TEST_HANG_AT_STEP=step). */
void ampc_dp_test_hooks(const AmpSession *s, long step);
/* "data parallel: N ranks (mpi), gradients all-reduced per step: B bytes in K calls, T ms". */
void ampc_dp_summary(const AmpSession *s, long steps);
/* A failure of this rank (code != 0) in a job of several ends the job: the others may be
 * waiting in a collective for it. Returns code. */
int ampc_dp_fail(const AmpSession *s, int code);

#endif
