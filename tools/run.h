/* `ampc run` and `ampc bench` (tools/run.c): open a model in a session and run inference
 * or training steps on data from --inputs DIR or deterministic random data; run prints one
 * line per step (and writes the outputs with --outputs DIR), bench prints timings. */
#ifndef AMPC_TOOLS_RUN_H
#define AMPC_TOOLS_RUN_H

#include <stdbool.h>
#include <stdint.h>

#include "ampc/ampc.h"
#include "ir/ir.h"

enum { AMPC_RUN_MAX_DIMS = 64 };

typedef struct RunArgs {
    const char *model;
    long steps;          /* >= 1 */
    const char *inputs;  /* --inputs DIR, or NULL */
    const char *inputs_per_rank; /* --inputs-per-rank DIR (data parallel: each rank's own), or NULL */
    int backend;         /* AmpBackendKind */
    uint64_t seed;
    uint64_t max_iterations; /* --max-iterations N, 0: no cap */
    double timeout;          /* --timeout SECONDS, 0: none */
    bool no_fallback;        /* --no-fallback */
    bool no_fuse;            /* --no-fuse */
    bool tf32;               /* --tf32 */
    int threads;             /* --threads N (0: not given) */
    const char *loss;    /* --loss NAME, or NULL */
    const char *load_state, *save_state; /* checkpoint files, or NULL */
    const char *dims[AMPC_RUN_MAX_DIMS]; /* --dim NAME=VALUE, as given */
    int n_dims;
    const char *outputs; /* run --outputs DIR: where the last step's outputs go, or NULL */
    long iters, warmup;  /* bench: timed runs (>= 1) and untimed runs before them (>= 0) */
    bool train;          /* bench --train: training steps instead of inference */
    bool compare;        /* bench --compare: FP32 and AMP_AUTO sessions of MODEL, interleaved */
    const char *plot;    /* bench --compare --plot FILE: their step times as a PNG */
    bool profile;        /* bench --profile: time by op type and node */
    /* --optimizer, --checkpoint, --lr: MODEL is onnxruntime-training's training model,
     * imported with its optimizer model and checkpoint (passes/ort_import.c) */
    const char *ort_optimizer, *ort_checkpoint;
    double lr;           /* > 0 when given */
} RunArgs;

/* A step's inputs: from a->inputs (input_K.pb) and deterministic random data for the rest. */
typedef struct RunInputs {
    AmpTensorView *t;
    size_t n;
    AmpModel *scratch;        /* arena for tensors read from files */
    void **owned;             /* random data buffers */
    size_t n_owned;
} RunInputs;

/* Fills in (zeroed first by the caller) for mode: the files of a->inputs, when given, then
 * random data shaped by the model (a->seed, a->dims) for every input still missing. */
AmpCode ampc_run_inputs(const RunArgs *a, const AmpSession *s, AmpMode mode, RunInputs *in, AmpStatus *st);
void ampc_run_inputs_free(RunInputs *in);
/* What a timed training step hands out: the loss alone, as a training loop asks for it
 * (every gradient copied out of the session would be a pass over the weights no trainer
 * makes): its output name (the session's), or NULL where no output reads as the loss
 * (then every output). */
const char *ampc_bench_loss(const RunArgs *a, const AmpSession *s);

/* Shared by run.c and bench_compare.c: the session options of a (AMP settings from the
 * environment unless the caller sets them), the exit code of a failure (its message on
 * stderr, prefixed by `file` unless it names it), stdout's final flush checked, a
 * monotonic clock in ms, the median of sorted values, and qsort's comparison of doubles. */
/* ", AMP_AUTO rewrite applied (bf16; precision auto: WHY)" for the summary lines of run
 * and bench, or "" without AMP_AUTO; in buf. */
const char *ampc_amp_note(const AmpSessionStats *s, char *buf, size_t len);
AmpSessionOptions ampc_session_options(const RunArgs *a);
int ampc_run_fail(const AmpStatus *st, AmpCode c, const char *file);
int ampc_stdout_done(void);
double ampc_now_ms(void);
double ampc_median_sorted(const double *v, size_t n); /* v sorted, n >= 1 */
int ampc_cmp_double(const void *a, const void *b);

/* Returns the exit code (an AmpCode); messages go to stderr via `say`. */
int ampc_cmd_run(const RunArgs *a);
/* `ampc bench MODEL`: a.warmup untimed then a.iters timed runs (or training steps with
 * a.train); prints the median, min and max time per run and the peak memory. */
int ampc_cmd_bench(const RunArgs *a);
/* `ampc bench MODEL --compare` (tools/bench_compare.c). */
int ampc_cmd_bench_compare(const RunArgs *a);

/* Checks and stores the value `arg` of run/bench option `val` (an OPT_ of cli_options.h)
 * in r (run_args.c): AMP_OK, or AMP_ERR_USAGE with the message said. */
int ampc_parse_run_value(int val, const char *arg, RunArgs *r);

#endif
