/* The values of 'ampc run' and 'ampc bench' options (--steps, --seed, --backend, --dim,
 * --timeout, ...), checked and stored in RunArgs; a bad one is a usage error. Numbers are
 * checked by their row of tools/cli_values.c, --threads and --backend by their variable's
 * row of the options table (passes/options.c). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "tools/cli_options.h"
#include "passes/options.h"
#include "tools/run.h"
#include "ir/fail.h"
#include "tools/cli_say.h"
#include "tools/cli_values.h"

int ampc_parse_run_value(int val, const char *arg, RunArgs *r) {
    uint64_t n = 0;
    AmpOptions o = {0};
    int rc;
    switch (val) {
    case OPT_STEPS:
    case OPT_ITERS:
    case OPT_WARMUP:
        if ((rc = ampc_flag_whole(val, arg, &n))) return rc;
        if (val == OPT_STEPS) r->steps = (long)n;
        else if (val == OPT_ITERS) r->iters = (long)n;
        else r->warmup = (long)n;
        return AMP_OK;
    case OPT_TRAIN: r->train = true; return AMP_OK;
    case OPT_COMPARE: r->compare = true; return AMP_OK;
    case OPT_PROFILE: r->profile = true; return AMP_OK;
    case OPT_PLOT:
        if (!arg[0]) return ampc_usage_error("--plot: FILE is an empty path");
        r->plot = arg;
        return AMP_OK;
    case OPT_NO_FALLBACK: r->no_fallback = true; return AMP_OK;
    case OPT_NO_FUSE: r->no_fuse = true; return AMP_OK;
    case OPT_TF32: r->tf32 = true; return AMP_OK;
    case OPT_THREADS: /* AMP_THREADS's row: one parser, one message but for the door's name */
        if ((rc = ampc_flag_table("AMP_THREADS", val, arg, &o))) return rc;
        r->threads = o.threads;
        return AMP_OK;
    case OPT_SEED: return ampc_flag_whole(val, arg, &r->seed);
    case OPT_MAX_ITERATIONS: return ampc_flag_whole(val, arg, &r->max_iterations);
    case OPT_TIMEOUT: return ampc_flag_real(val, arg, &r->timeout);
    case OPT_BACKEND: /* AMP_BACKEND's row */
        if ((rc = ampc_flag_table("AMP_BACKEND", val, arg, &o))) return rc;
        r->backend = amp_backend_parse(o.run.backend);
        return AMP_OK;
    case OPT_DIM: {
        const char *eq = strchr(arg, '=');
        if (!eq || eq == arg || !amp_parse_whole(eq + 1, 0, INT64_MAX, &n))
            return ampc_usage_error("--dim '%s': expected NAME=VALUE with a whole VALUE of at least 0", arg);
        if (r->n_dims >= AMPC_RUN_MAX_DIMS) return ampc_usage_error("--dim: at most %d of them", AMPC_RUN_MAX_DIMS);
        r->dims[r->n_dims++] = arg;
        return AMP_OK;
    }
    case OPT_INPUTS:
    case OPT_OUTPUTS:
    case OPT_INPUTS_PER_RANK:
        if (!arg[0])
            return ampc_usage_error("--%s: DIR is an empty path", val == OPT_INPUTS    ? "inputs"
                                                                  : val == OPT_OUTPUTS ? "outputs"
                                                                                       : "inputs-per-rank");
        if (val == OPT_INPUTS) r->inputs = arg;
        else if (val == OPT_OUTPUTS) r->outputs = arg;
        else r->inputs_per_rank = arg;
        return AMP_OK;
    case OPT_LOSS: r->loss = arg; return AMP_OK;
    case OPT_LOAD_STATE:
    case OPT_SAVE_STATE:
        if (!arg[0]) return ampc_usage_error("--%s: FILE is an empty path", val == OPT_LOAD_STATE ? "load-state" : "save-state");
        if (val == OPT_LOAD_STATE) r->load_state = arg;
        else r->save_state = arg;
        return AMP_OK;
    case OPT_OPTIMIZER:
    case OPT_CHECKPOINT:
        if (!arg[0]) return ampc_usage_error("--%s: FILE is an empty path", val == OPT_OPTIMIZER ? "optimizer" : "checkpoint");
        if (val == OPT_OPTIMIZER) r->ort_optimizer = arg;
        else r->ort_checkpoint = arg;
        return AMP_OK;
    case OPT_LR: return ampc_flag_real(val, arg, &r->lr);
    default: return ampc_usage_error("internal: unhandled option %d", val);
    }
}
