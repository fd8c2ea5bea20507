/* AMP_AUTO (private to the runtime): the environment variables (or the session options
 * that replace them) read once at amp_session_open, checked, and the AMP passes run over
 * the model in memory before it is planned, with the graph logged before and after. */
#ifndef AMP_AUTO_H
#define AMP_AUTO_H

#include <stdbool.h>

#include "ampc/ampc.h"
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
} AmpAutoConfig;

/* Reads and checks the settings: the backend (AMP_BACKEND=cpu|cuda|auto|sim when the
 * option says auto), AMP_TF32 (yes or no, as AMP_AUTO), then AMP_AUTO; with AMP_AUTO unset or 0 nothing else is read (so a
 * stale variable cannot fail an open that rewrites nothing). A bad value is AMP_ERR_USAGE
 * naming the variable and the value; unknown op names in a list are named all at once. */
AmpCode amp_auto_config(const AmpSessionOptions *opt, AmpAutoConfig *out, AmpStatus *st);
void amp_auto_config_free(AmpAutoConfig *c);

/* Runs the AMP pipeline (the default pipeline: infer, amp, cast_cleanup) over m when
 * enabled, verifies the result, and writes into log_path the before/after dumps, the
 * paint buckets (paint.txt) and a summary. *applied says whether anything ran. */
AmpCode amp_auto_apply(AmpModel *m, const AmpAutoConfig *c, bool *applied, AmpStatus *st);

/* The pipeline amp_auto_apply runs. */
const char *amp_auto_pipeline(void);

#endif
