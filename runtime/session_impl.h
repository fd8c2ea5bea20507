/* Private to the session (session.c, session_io.c, state.c): the session's layout. The
 * main graph runs in one executor; each training algorithm in an executor that runs after
 * it and reads its values; state entries are the session-owned buffers bound to
 * initializers (the main graph's, or an algorithm's own), so weights and optimizer state
 * stay resident between steps. */
#ifndef AMP_SESSION_IMPL_H
#define AMP_SESSION_IMPL_H

#include "ampc/ampc.h"
#include "backend/backend.h"
#include "backend/comm.h"
#include "runtime/exec.h"
#include "ir/ir.h"

typedef struct StateEntry {
    const char *name;
    AmpValue *value; /* the initializer: of the main graph, or of a training algorithm */
    AmpExec *exec;   /* the executor of value's graph (the main one, or that algorithm's) */
    AmpBuf buf;      /* the current value (device memory), bound into `exec` */
    bool owned;      /* buf.data is the session's (else the executor's upload of the model's tensor) */
    void *host;      /* a host copy handed out by amp_session_state_at (malloc'd), or NULL */
} StateEntry;

typedef struct InEntry {
    const char *name;
    AmpValue *decl;  /* the declaration checked against (the main graph's, else an algorithm's) */
    AmpValue *main;  /* the main graph's input of this name, or NULL */
    AmpValue **alg;  /* per algorithm: its own input of this name, or NULL (TRAIN lists only) */
    bool optional;   /* an initializer gives it a default */
    int64_t index_bound;
} InEntry;

typedef struct OutEntry {
    const char *name;
    AmpValue *value;
    int graph; /* -1: the main graph; k: algorithm k */
} OutEntry;

typedef struct IoList {
    InEntry *in;
    size_t n_in;
    OutEntry *out;
    size_t n_out;
} IoList;

typedef struct Algo {
    AmpTrainingInfo *ti;
    AmpExec *exec;
} Algo;

/* The training outputs each step reports (session_track.c): the loss, the loss scale for
 * the next step (amp_loss_scale_new), the overflow flag (amp_found_inf). */
enum { AMP_TRACK_LOSS, AMP_TRACK_SCALE, AMP_TRACK_FOUND_INF, AMP_TRACK_N };

/* Wall times of calls of one kind, in ms. */
typedef struct AmpTimes {
    double last, sum;
    uint64_t n;
} AmpTimes;

struct AmpSession {
    AmpModel *m;
    AmpBackend *be;        /* the session's own instance, closed with it */
    size_t reads_at;       /* the backend's host_reads (amp_backend_stats) when the current run or step began */
    size_t last_reads;     /* copies out of the device in the last run or step */
    AmpExec *main;
    Algo *alg;
    size_t n_alg;
    StateEntry *state;
    size_t n_state;
    IoList io[2]; /* by AmpMode */
    uint64_t rng, steps;
    double deadline;       /* this run's, on amp_exec_clock (0: no timeout) */
    double timeout;        /* AmpSessionOptions.timeout_seconds */
    uint64_t max_tensor_bytes; /* AmpSessionOptions.max_tensor_bytes (0: the executor's own cap) */
    char fallback_ops[512]; /* amp_session_stats' text */
    char fused_ops[256];    /* amp_session_stats' text */
    bool amp_applied;
    AmpComm *comm;         /* data parallel: the job's communicator (more than one rank), else NULL */
    const char *amp_precision; /* AmpSessionStats' (static strings) */
    const char *amp_precision_why;
    int tracked[AMP_TRACK_N]; /* indices among the training outputs, -1: the model has none */
    double loss, loss_scale;  /* the last step's (NaN: none) */
    uint64_t skipped_steps;   /* steps whose gradients overflowed, over the session's life */
    AmpTimes step_time, run_time;
};

/* session_io.c */
/* A public options struct as this library lays it out (AmpSessionOptions, AmpExportOptions:
 * ampc.h, "Options structs"): *dst (dst_size bytes) zeroed, then the first bytes of `given`
 * copied in: given_size of them (its struct_size), or size_0_1 when that is 0 (a caller of
 * version 0.1, before struct_size was counted). AMP_ERR_USAGE naming `type` when the
 * size is impossible, or when a caller built against a newer header set a field this
 * library does not have (ignoring it would drop what was asked). NULL given: defaults. */
AmpCode amp_api_struct_in(const void *given, size_t given_size, size_t size_0_1, void *dst, size_t dst_size,
                          const char *type, AmpStatus *st);

AmpCode amp_session_build_io(AmpSession *s, AmpStatus *st);
void amp_session_free_io(AmpSession *s);
/* Checks inputs against the mode's list and fills `named` (n_inputs entries) in the
 * same order. */
AmpCode amp_session_check_inputs(const AmpSession *s, AmpMode mode, const AmpTensorView *inputs, size_t n,
                                 AmpNamedBuf *named, AmpStatus *st);
/* Resolves requested output names (NULL: all) to indices into the mode's output list. */
AmpCode amp_session_resolve_outputs(const AmpSession *s, AmpMode mode, const char *const *names, size_t n,
                                    size_t *idx, size_t *n_idx, AmpStatus *st);
void amp_session_fill_info(const AmpValue *v, AmpIoInfo *out);

/* session_dp.c (docs/parallel.md) */
struct AmpAutoConfig;
/* Joins the MPI job when opt asks (data_parallel, else AMP_DATA_PARALLEL as cfg read it,
 * and the launcher's variables): s->comm set when the job has more than one rank, or one
 * rank asked for explicitly on CUDA (a one-rank NCCL communicator); cfg->be then carries
 * the communicator to the backend (beside AMP_NCCL_LIB, which amp_auto_config put there). */
AmpCode amp_session_dp_open(AmpSession *s, const AmpSessionOptions *opt, struct AmpAutoConfig *cfg, AmpStatus *st);
/* With a communicator: the allreduce pass over s->m, then every rank's hash of the model
 * and options compared (AMP_ERR_USAGE naming the ranks that differ from rank 0). */
AmpCode amp_session_dp_prepare(AmpSession *s, const struct AmpAutoConfig *cfg, const AmpSessionOptions *opt,
                               AmpStatus *st);
/* session_track.c */
/* The loss output (amp_session_find_loss: `loss`, else the rule) and the loss-scaling ones;
 * fails only when `loss` names no output. */
AmpCode amp_session_track_init(AmpSession *s, const char *loss, AmpStatus *st);
/* After a successful step that copied out outs (indices idx) and took ms: its loss, loss
 * scale and overflow, read from outs (a step reads nothing back unless asked, issue 20: an
 * output left out leaves its report NaN, or the step uncounted), and its time. */
void amp_session_track_step(AmpSession *s, const size_t *idx, size_t n_idx, const AmpTensorView *outs, double ms);
void amp_session_track_time(AmpTimes *t, double ms);

/* state.c */
/* Version 0.1's fields of the stats, the rest zero (amp_session_stats_sized adds them). */
void amp_session_stats_base(const AmpSession *s, AmpSessionStats *out);
AmpCode amp_session_build_state(AmpSession *s, AmpStatus *st);
void amp_session_free_state(AmpSession *s);
StateEntry *amp_session_find_state(const AmpSession *s, const char *name);
/* Replaces entry e's value with src, a device buffer (on_device) or host memory (any shape
 * when reshape, else the same dtype and shape); `what` names the source for messages. */
AmpCode amp_state_assign(AmpSession *s, StateEntry *e, const AmpBuf *src, bool on_device, bool reshape,
                         const char *what, AmpStatus *st);

#endif
