/* The conversion's phases (tools/phases.c): --time's per-phase timer, which also times
 * each pass of one pipeline run, and the output's verification on a second thread
 * beside the save. */
#ifndef AMPC_TOOLS_PHASES_H
#define AMPC_TOOLS_PHASES_H

#include <pthread.h>
#include <stdbool.h>

#include "ir/ir.h"
#include "passes/passes.h"

/* --time: one line per phase on stderr, like gcc's -ftime-report: wall time, and the
 * CPU time of the thread doing the work (the honest number on a busy machine). The
 * lines are kept and printed when the run ends (ampc_phase_total) or fails
 * (ampc_phase_flush), so the times do not include their own printing. */
enum { AMPC_PHASE_LINES = 32, AMPC_PHASE_LABEL = 48 };
typedef struct PhaseLine {
    char label[AMPC_PHASE_LABEL]; /* "what name" */
    double ms[2];                 /* wall, CPU */
} PhaseLine;
typedef struct PhaseTimer {
    bool on;
    double start[2], last[2]; /* seconds: wall (CLOCK_MONOTONIC), CPU */
    double other[2];          /* the unnamed steps between phases, printed at the end */
    PhaseLine lines[AMPC_PHASE_LINES]; /* not printed yet */
    int n_lines;
} PhaseTimer;

/* A timer that starts now; `on` false: every call below does nothing. */
void ampc_phase_start(PhaseTimer *t, bool on);
/* Ends the phase that began at the previous call (or at the start) and records it as
 * "what name"; what == NULL counts it as "other". */
void ampc_phase_done(PhaseTimer *t, const char *what, const char *name);
/* Records a line for a phase timed elsewhere (ms: wall, CPU). */
void ampc_phase_line(PhaseTimer *t, const char *what, const char *name, const double ms[2]);
/* Prints the lines recorded so far (a run that stops early calls this). */
void ampc_phase_flush(PhaseTimer *t);
/* Ends the run: its recorded lines, then "other" and "total" (which leave out the
 * printing). */
void ampc_phase_total(PhaseTimer *t);
/* amp_run_pipeline, each pass timed as it ends (one pipeline run, as without --time). */
AmpCode ampc_run_timed(AmpModel *m, const char *list, const AmpPipelineOptions *pl, PhaseTimer *t,
                       AmpStatus *st);

/* The output's verification beside the save, when a save is all that follows: the two
 * only read the model (the saver's few allocations go to the arena, which the verifier
 * does not touch), and the saved files are renamed into place only once the verifier has
 * passed (ampc_verify_commit as AmpSaveOptions.commit), so a model that fails it is still
 * never written. */
typedef struct VerifyJob {
    AmpModel *m;
    AmpStatus st;
    AmpCode code;
    double ms[2];   /* wall and CPU time of the verification */
    size_t n_nodes; /* nodes of every graph, counted by the verification when it passed */
    pthread_t thread;
    bool started, joined;
} VerifyJob;

/* Graphs this big are verified beside the save: a thread (its stack, its malloc arena)
 * costs more than verifying a small graph takes. */
enum { AMPC_VERIFY_BESIDE_MIN_NODES = 10000 };

/* Starts verifying m on a thread; false when no thread could be made (verify inline). */
bool ampc_verify_start(VerifyJob *j, AmpModel *m);
/* Waits for the verification (once; none started: AMP_OK) and returns its code. */
AmpCode ampc_verify_join(VerifyJob *j);
/* AmpSaveOptions.commit: true when the verification passed, else its status in st. */
bool ampc_verify_commit(void *job, AmpStatus *st);

#endif
