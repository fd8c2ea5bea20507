/* `ampc export TRAIN -o INFER [--load-state CKPT] [--precision fp32|fp16|bf16|auto]`
 * (cli_export.h): opens TRAIN as `ampc run` does (the environment's AMP_AUTO included, so a
 * checkpoint of such a run loads; onnxruntime-training's artifacts with --optimizer and
 * --checkpoint), loads the checkpoint as --load-state does, and writes the inference model
 * (amp_session_export: the forward only, the session's weights, converted on request). */
#include "tools/cli_export.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ampc/ampc.h"
#include "tools/cli_options.h"
#include "passes/options.h"
#include "runtime/amp_auto.h"
#include "tools/run.h"
#include "tools/cli_say.h"

int ampc_parse_export_value(int val, const char *arg, ExportArgs *e, RunArgs *ra) {
    switch (val) {
    case OPT_OUTPUT: e->out = arg; return AMP_OK;
    case OPT_QUIET: e->quiet = true; return AMP_OK;
    case OPT_LOSS:
        if (!*arg) return ampc_usage_error("export: --loss: NAME is empty");
        e->loss = arg;
        return AMP_OK;
    case OPT_LOAD_STATE:
        if (!*arg) return ampc_usage_error("--load-state: FILE is an empty path");
        e->load_state = arg;
        return AMP_OK;
    case OPT_PRECISION:
        if (strcmp(arg, "fp32") && strcmp(arg, "float32") && strcmp(arg, "fp16") && strcmp(arg, "float16") &&
            strcmp(arg, "half") && strcmp(arg, "bf16") && strcmp(arg, "bfloat16") && strcmp(arg, "auto"))
            return ampc_usage_error("export: --precision '%s': expected fp32, fp16, bf16 or auto", arg);
        e->precision = arg;
        return AMP_OK;
    case OPT_OPTIMIZER:
    case OPT_CHECKPOINT:
    case OPT_LR: return ampc_parse_run_value(val, arg, ra);
    default: return ampc_usage_error("export: internal: unhandled option %d", val);
    }
}

/* ONNX dtype of --precision: 0 (float32, no conversion), 10 or 16; auto: the options'
 * one decision (passes/options.h, amp_precision_auto) for the machine export runs on
 * (AMP_CPU_FEATURES, its test hook, read as the conversion reads it), said in *why. */
static int precision_of(const char *p, const char **why, AmpStatus *st) {
    *why = NULL;
    if (!p || !strcmp(p, "fp32") || !strcmp(p, "float32")) return 0;
    if (!strcmp(p, "bf16") || !strcmp(p, "bfloat16")) return 16;
    if (strcmp(p, "auto")) return 10;
    AmpOptions o = {.precision_auto = true};
    if (amp_options_read_env(&o, amp_option_getenv, NULL, AMP_DOOR_EXPORT, st)) return -1;
    amp_options_decide(&o, amp_auto_device_class(AMP_BACKEND_AUTO));
    *why = o.precision_why;
    return o.stay_fp32 ? 0 : o.po.precision;
}

int ampc_cmd_export(const ExportArgs *e, const RunArgs *ra) {
    if (!e->out) return ampc_usage_error("export: missing -o INFER (where the inference model goes)");
    if (!*e->out) return ampc_usage_error("export: -o: INFER is an empty path");
    if (strcmp(e->out, "-") == 0 && isatty(STDOUT_FILENO))
        return ampc_usage_error("export: -o '-': standard output is a terminal: redirect it to a file or a pipe");
    RunArgs r = *ra;
    r.model = e->model;
    r.backend = AMP_BACKEND_CPU; /* nothing runs: the state is read, not computed */
    AmpSessionOptions so = ampc_session_options(&r);
    AmpStatus st = {AMP_OK, ""};
    AmpSession *s = NULL;
    const char *shown = amp_model_path_shown(e->model);
    AmpCode rc = amp_session_open(e->model, &so, &s, &st);
    if (rc) return ampc_run_fail(&st, rc, shown);
    if (e->load_state && (rc = amp_session_state_load(s, e->load_state, &st))) {
        amp_session_close(s);
        AmpAutoConfig cfg; /* whether this session rewrote the model, as its open read it */
        AmpStatus ignored = {AMP_OK, ""};
        bool amp = amp_auto_config(&so, &cfg, &ignored) == AMP_OK && cfg.enabled;
        amp_auto_config_free(&cfg);
        if (strstr(st.msg, "'amp_loss_scale") && !amp) {
            size_t n = strlen(st.msg);
            snprintf(st.msg + n, sizeof st.msg - n, " (a checkpoint of an AMP_AUTO=1 run? export with AMP_AUTO=1 too)");
        }
        return ampc_run_fail(&st, rc, e->load_state);
    }
    char line[512];
    const char *why;
    int precision = precision_of(e->precision, &why, &st);
    if (precision < 0) {
        amp_session_close(s);
        return ampc_usage_error("%s", st.msg);
    }
    AmpExportOptions eo = {.precision = precision, .loss = e->loss, .summary = line, .summary_len = sizeof line};
    rc = amp_session_export(s, e->out, &eo, &st);
    amp_session_close(s);
    if (rc) return ampc_run_fail(&st, rc, shown);
    if (!e->quiet)
        ampc_say("wrote %s: %s%s%s%s%s", amp_output_shown(e->out), why ? "precision auto: " : "",
                 why ? (precision == 16 ? "bf16 (" : precision == 10 ? "fp16 (" : "fp32 (") : "", why ? why : "",
                 why ? "); " : "", line);
    return AMP_OK;
}
