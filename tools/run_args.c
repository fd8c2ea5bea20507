/* The values of 'ampc run' and 'ampc bench' options (--steps, --seed, --backend, --dim,
 * --timeout, ...), checked and stored in RunArgs; a bad one is a usage error. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "tools/cli_options.h"
#include "passes/options.h"
#include "tools/run.h"
#include "ampc/status.h"
#include "tools/cli_say.h"

int ampc_parse_run_value(int val, const char *arg, RunArgs *r) {
    char *end = NULL;
    errno = 0;
    switch (val) {
    case OPT_STEPS:
    case OPT_ITERS:
    case OPT_WARMUP: {
        long n = strtol(arg, &end, 10), least = val == OPT_WARMUP ? 0 : 1;
        const char *name = val == OPT_STEPS ? "steps" : val == OPT_ITERS ? "iters" : "warmup";
        if (errno || end == arg || *end || n < least || n > 100000000)
            return ampc_usage_error("--%s '%s': expected a whole number of at least %ld", name, arg, least);
        if (val == OPT_STEPS) r->steps = n;
        else if (val == OPT_ITERS) r->iters = n;
        else r->warmup = n;
        return AMP_OK;
    }
    case OPT_TRAIN: r->train = true; return AMP_OK;
    case OPT_COMPARE: r->compare = true; return AMP_OK;
    case OPT_PLOT:
        if (!arg[0]) return ampc_usage_error("--plot: FILE is an empty path");
        r->plot = arg;
        return AMP_OK;
    case OPT_NO_FALLBACK: r->no_fallback = true; return AMP_OK;
    case OPT_NO_FUSE: r->no_fuse = true; return AMP_OK;
    case OPT_TF32: r->tf32 = true; return AMP_OK;
    case OPT_THREADS: { /* AMP_THREADS's row: one parser, one message but for the door's name */
        AmpOptions o = {0};
        AmpStatus st = {AMP_OK, ""};
        if (amp_option_set(&o, amp_option_find("AMP_THREADS"), "--threads", arg, &st))
            return ampc_usage_error("%s", st.msg);
        r->threads = o.threads;
        return AMP_OK;
    }
    case OPT_SEED: {
        unsigned long long v = strtoull(arg, &end, 0);
        if (errno || end == arg || *end || arg[0] == '-')
            return ampc_usage_error("--seed '%s': expected a non-negative whole number", arg);
        r->seed = (uint64_t)v;
        return AMP_OK;
    }
    case OPT_MAX_ITERATIONS: {
        unsigned long long v = strtoull(arg, &end, 10);
        if (errno || end == arg || *end || arg[0] == '-' || v == 0)
            return ampc_usage_error("--max-iterations '%s': expected a whole number of at least 1", arg);
        r->max_iterations = (uint64_t)v;
        return AMP_OK;
    }
    case OPT_TIMEOUT: {
        double v = strtod(arg, &end);
        if (errno || end == arg || *end || !(v > 0) || v > 1e9)
            return ampc_usage_error("--timeout '%s': expected a number of seconds above 0", arg);
        r->timeout = v;
        return AMP_OK;
    }
    case OPT_BACKEND: { /* AMP_BACKEND's row: one parser, one message */
        AmpOptions o = {0};
        AmpStatus st = {AMP_OK, ""};
        if (amp_option_set(&o, amp_option_find("AMP_BACKEND"), "--backend", arg, &st))
            return ampc_usage_error("%s", st.msg);
        r->backend = amp_backend_parse(o.run.backend);
        return AMP_OK;
    }
    case OPT_DIM: {
        const char *eq = strchr(arg, '=');
        long long v = eq ? strtoll(eq + 1, &end, 10) : -1;
        if (!eq || eq == arg || errno || end == eq + 1 || *end || v < 0)
            return ampc_usage_error("--dim '%s': expected NAME=VALUE with a whole VALUE of at least 0", arg);
        if (r->n_dims >= AMPC_RUN_MAX_DIMS) return ampc_usage_error("--dim: at most %d of them", AMPC_RUN_MAX_DIMS);
        r->dims[r->n_dims++] = arg;
        return AMP_OK;
    }
    case OPT_INPUTS:
    case OPT_OUTPUTS:
        if (!arg[0]) return ampc_usage_error("--%s: DIR is an empty path", val == OPT_INPUTS ? "inputs" : "outputs");
        if (val == OPT_INPUTS) r->inputs = arg;
        else r->outputs = arg;
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
    case OPT_LR: {
        double v = strtod(arg, &end);
        if (errno || end == arg || *end || !(v > 0) || v > 1e6)
            return ampc_usage_error("--lr '%s': expected a learning rate above 0", arg);
        r->lr = v;
        return AMP_OK;
    }
    default: return ampc_usage_error("internal: unhandled option %d", val);
    }
}
