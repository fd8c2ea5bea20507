/* AMP_AUTO (private to the runtime): the environment variables (or the session options
 * that replace them) read once at amp_session_open, checked, and the AMP passes run over
 * the model in memory before it is planned, with the graph logged before and after. */
#ifndef AMP_AUTO_H
#define AMP_AUTO_H

#include <stdbool.h>

#include "ampc/ampc.h"
#include "backend/backend.h"
#include "ir/ir.h"
#include "passes/options.h"
#include "passes/passes.h"

typedef struct AmpAutoConfig {
    int backend;           /* AmpBackendKind: the option's, else AMP_BACKEND's when the option is auto */
    bool tf32;             /* the tf32 option, or AMP_TF32=1 (read whether or not AMP_AUTO is) */
    bool enabled;          /* AMP_AUTO=1 */
    AmpOptions opts;       /* AMP_PRECISION, AMP_LOSS_SCALE, AMP_OPSET_UPGRADE, AMP_CALIBRATION and the
                              list edits, read by the option table the CLI shares (passes/options.c) */
    char *log_path;        /* malloc'd; NULL: no log */
    int threads;           /* the threads option, else AMP_THREADS (0: neither; read whether or not AMP_AUTO is) */
    /* What the session hands the backend it opens (tf32 and AMP_CUDA_SYNC, AMP_CUDA_PROFILE,
     * AMP_SIM_LACKS, AMP_SIM_REFUSES, AMP_NCCL_LIB; read whether or not AMP_AUTO is; the
     * communicator is set by the session's data-parallel open). Its strings live as long as
     * the options and the environment they came from. */
    AmpBackendSettings be;
    bool no_dnnl;          /* AMP_DNNL=0: the CPU kernels' process-wide knob (amp_dnnl_set_off) */
} AmpAutoConfig;

/* The class of device a session on backend kind (auto: what amp_backend_open would pick)
 * computes on, which `--precision auto` decides for: the CPU backend's is the CPU, any
 * other's a GPU (passes/options.h, amp_precision_auto). */
AmpDeviceClass amp_auto_device_class(int backend);

/* Reads and checks the settings, by the options table (every variable of AMP_DOOR_SESSION,
 * the session's options replacing theirs; none with ignore_env): the backend
 * (AMP_BACKEND=cpu|cuda|auto|sim when the option says auto), AMP_TF32, AMP_AUTO,
 * AMP_THREADS (the threads option replaces it), the backend's settings; with AMP_AUTO
 * unset or 0 nothing else is read (so a stale AMP option cannot fail an open that
 * rewrites nothing). With AMP_AUTO (AMP_DOOR_AMP), the precision
 * is auto unless set (AMP_PRECISION or the option), decided here for the backend's device
 * class (opts.stay_fp32: no rewrite; opts.precision_why says why). A bad value is AMP_ERR_USAGE
 * naming the variable and the value; unknown op names in a list are named all at once. */
AmpCode amp_auto_config(const AmpSessionOptions *opt, AmpAutoConfig *out, AmpStatus *st);
void amp_auto_config_free(AmpAutoConfig *c);

/* Runs the AMP pipeline (the default pipeline: infer, amp, cast_cleanup) over m when
 * enabled and auto did not choose float32 (then nothing runs and the log's summary says why), verifies the result, and writes into log_path the before/after dumps, the
 * paint buckets (paint.txt) and a summary. *applied says whether anything ran. */
AmpCode amp_auto_apply(AmpModel *m, const AmpAutoConfig *c, bool *applied, AmpStatus *st);

/* The pipeline amp_auto_apply runs. */
const char *amp_auto_pipeline(void);

/* Whether a session reads the AmpSessionOptions field of that name (an AmpOption.field of
 * the options table) in place of its variable: the test that every row's field is real. */
bool amp_auto_reads_field(const char *field);

#endif
