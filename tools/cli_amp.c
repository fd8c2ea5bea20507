/* The AMP options of the convert command (cli_amp.h): each option's value is checked as it
 * is read (a bad one is a usage error, exit 2), list edits from the command line come
 * before the environment's, and the pass's notices (weights kept in fp32, the summary)
 * come back through a callback. */
#include "cli_amp.h"

#include <errno.h>
#include <float.h>
#include <stdint.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib.h"
#include "run.h"

static int usage(const char *fmt, ...) AMP_PRINTF(1, 2);
static int usage(const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    ampc_say("%s (run 'ampc --help' for usage)", buf);
    return AMP_ERR_USAGE;
}

static int status_error(const AmpStatus *st) {
    ampc_say("%s", st->msg);
    return st->code ? (int)st->code : AMP_ERR_INTERNAL;
}

static int list_option(AmpcAmp *x, const char *name, const char *arg, AmpOpClass list) {
    char what[32];
    snprintf(what, sizeof what, "--%s", name);
    if (!arg[0]) return usage("%s: expected op names, e.g. MatMul,Gemm", what);
    AmpStatus st = {AMP_OK, ""};
    if (amp_list_edits_parse(what, arg, list, false, &x->edits, &x->n_edits, &st)) return status_error(&st);
    return 0;
}

/* 0 when s is a whole finite number. */
static int parse_double(const char *s, double *v) {
    char *end = NULL;
    errno = 0;
    *v = strtod(s, &end);
    return errno || end == s || *end || !isfinite(*v) ? -1 : 0;
}

int ampc_amp_option(AmpcAmp *x, const char *name, const char *arg) {
    if (strcmp(name, "precision") == 0) {
        if (strcmp(arg, "fp16") == 0 || strcmp(arg, "float16") == 0)
            x->po.precision = AMP_DT_FLOAT16;
        else if (strcmp(arg, "bf16") == 0 || strcmp(arg, "bfloat16") == 0)
            x->po.precision = AMP_DT_BFLOAT16;
        else
            return usage("--precision '%s': expected fp16 or bf16", arg);
        return 0;
    }
    if (strcmp(name, "calibration") == 0) {
        AmpStatus st = {AMP_OK, ""};
        if (x->calib) return usage("--calibration: given twice");
        if (amp_calib_read(arg, &x->calib, &st)) return status_error(&st);
        x->po.calib = x->calib;
        return 0;
    }
    if (strcmp(name, "calib-max-activation") == 0) {
        double v;
        if (parse_double(arg, &v) || !(v > 0))
            return usage("--calib-max-activation '%s': expected a positive number", arg);
        x->po.calib_max_activation = v;
        return 0;
    }
    if (strcmp(name, "calib-min-activation") == 0) {
        double v;
        if (parse_double(arg, &v) || !(v >= 0) || isinf(v))
            return usage("--calib-min-activation '%s': expected a number >= 0 (0: off)", arg);
        x->po.calib_min_activation = v > 0 ? v : -1;
        return 0;
    }
    if (strcmp(name, "level") == 0) {
        int l = amp_level_parse(arg);
        if (l < 0)
            return usage("--level '%s': expected default, tensor-cores-only, treat-infer-as-deny or "
                         "unsafe-force-all", arg);
        x->po.level = (AmpLevel)l;
        return 0;
    }
    if (strcmp(name, "opset-upgrade") == 0) {
        char *end = NULL;
        long v = strtol(arg, &end, 10);
        if (end != arg && !*end && v >= 7 && v <= 22) {
            x->po.opset_upgrade = AMP_OPSET_UPGRADE_AUTO;
            x->po.opset_upgrade_to = (int)v;
            return 0;
        }
        if (strcmp(arg, "auto") && strcmp(arg, "never"))
            return usage("--opset-upgrade '%s': expected auto, never or an opset from 7 to 22", arg);
        x->po.opset_upgrade = strcmp(arg, "never") == 0 ? AMP_OPSET_UPGRADE_NEVER : AMP_OPSET_UPGRADE_AUTO;
        return 0;
    }
    if (strcmp(name, "allow") == 0) return list_option(x, name, arg, AMP_CLASS_ALLOW);
    if (strcmp(name, "infer") == 0) return list_option(x, name, arg, AMP_CLASS_INFER);
    if (strcmp(name, "clear") == 0) return list_option(x, name, arg, AMP_CLASS_CLEAR);
    if (strcmp(name, "deny") == 0) return list_option(x, name, arg, AMP_CLASS_DENY);
    if (strcmp(name, "keep-fp32") == 0) {
        if (!arg[0]) return usage("--keep-fp32: GLOB is empty");
        const char **k = realloc(x->keep, (x->n_keep + 1) * sizeof *k);
        if (!k) return usage("out of memory");
        x->keep = k;
        x->keep[x->n_keep++] = arg;
        return 0;
    }
    if (strcmp(name, "keep-io-types") == 0) {
        x->po.no_keep_io_types = false;
        return 0;
    }
    if (strcmp(name, "no-keep-io-types") == 0) {
        x->po.no_keep_io_types = true;
        return 0;
    }
    if (strcmp(name, "loss") == 0) {
        if (!arg[0]) return usage("--loss: NAME is empty");
        x->po.loss = arg;
        return 0;
    }
    if (strcmp(name, "loss-scale") == 0) {
        if (strcmp(arg, "dynamic") == 0) {
            x->po.loss_scale_mode = AMP_LOSS_SCALE_DYNAMIC;
            return 0;
        }
        if (strcmp(arg, "none") == 0) {
            x->po.loss_scale_mode = AMP_LOSS_SCALE_NONE;
            return 0;
        }
        double v;
        if (parse_double(arg, &v) || v <= 0 || v > FLT_MAX)
            return usage("--loss-scale '%s': expected dynamic, none or a positive number", arg);
        x->po.loss_scale_mode = AMP_LOSS_SCALE_STATIC;
        x->po.loss_scale = v;
        return 0;
    }
    if (strcmp(name, "loss-scale-state") == 0) {
        if (strcmp(arg, "initializers") && strcmp(arg, "inputs"))
            return usage("--loss-scale-state '%s': expected initializers or inputs", arg);
        x->po.loss_scale_state_inputs = strcmp(arg, "inputs") == 0;
        return 0;
    }
    if (strcmp(name, "loss-scale-init") == 0) {
        double v;
        if (parse_double(arg, &v) || v <= 0 || v > FLT_MAX)
            return usage("--loss-scale-init '%s': expected a positive number that fits in float32", arg);
        x->loss_scale_init = v;
        return 0;
    }
    if (strcmp(name, "growth-interval") == 0) {
        char *end = NULL;
        errno = 0;
        long long v = strtoll(arg, &end, 10);
        if (errno || end == arg || *end || v < 1 || v > INT32_MAX)
            return usage("--growth-interval '%s': expected a whole number from 1 to %d", arg, INT32_MAX);
        x->po.growth_interval = v;
        return 0;
    }
    if (strcmp(name, "growth-factor") == 0) {
        double v;
        if (parse_double(arg, &v) || v <= 1 || v > FLT_MAX)
            return usage("--growth-factor '%s': expected a number above 1", arg);
        x->po.growth_factor = v;
        return 0;
    }
    if (strcmp(name, "backoff-factor") == 0) {
        double v;
        if (parse_double(arg, &v) || v <= 0 || v >= 1)
            return usage("--backoff-factor '%s': expected a number between 0 and 1", arg);
        x->po.backoff_factor = v;
        return 0;
    }
    if (strcmp(name, "explain") == 0) {
        if (!arg[0]) return usage("--explain: NODE is empty");
        const char **e = realloc(x->explain, (x->n_explain + 1) * sizeof *e);
        if (!e) return usage("out of memory");
        x->explain = e;
        x->explain[x->n_explain++] = arg;
        return 0;
    }
    return -1;
}

/* Notices from the passes: the amp and loss_scale summaries are kept for the "wrote" line,
 * the rest printed. */
static void notify(void *ctx, const char *line) {
    AmpcAmp *x = ctx;
    if (strncmp(line, "amp: ", 5) == 0 || strncmp(line, "loss_scale: ", 12) == 0) {
        size_t k = strlen(x->summary);
        snprintf(x->summary + k, sizeof x->summary - k, "%s%s", k ? "; " : "", line);
    }
    else if (!x->quiet)
        ampc_say("%s", line);
}

int ampc_amp_finish(AmpcAmp *x) {
    AmpStatus st = {AMP_OK, ""};
    if (amp_list_edits_from_env(&x->edits, &x->n_edits, &st) || amp_list_edits_check(x->edits, x->n_edits, &st))
        return status_error(&st);
    /* The dynamic-scaling settings mean nothing without dynamic scaling: say so. */
    bool dyn_opts = x->loss_scale_init > 0 || x->po.growth_interval || x->po.growth_factor > 0 ||
                    x->po.backoff_factor > 0;
    AmpLossScaleMode mode = x->po.loss_scale_mode;
    if (mode == AMP_LOSS_SCALE_DEFAULT)
        mode = x->po.precision == AMP_DT_BFLOAT16 ? AMP_LOSS_SCALE_NONE : AMP_LOSS_SCALE_DYNAMIC;
    if (dyn_opts && mode != AMP_LOSS_SCALE_DYNAMIC)
        return usage("--loss-scale-init, --growth-interval, --growth-factor and --backoff-factor set "
                     "dynamic loss scaling, which is off here (%s); add --loss-scale dynamic",
                     x->po.loss_scale_mode == AMP_LOSS_SCALE_DEFAULT ? "bf16 needs none by default"
                                                                      : "--loss-scale is not dynamic");
    if (x->loss_scale_init > 0) x->po.loss_scale = x->loss_scale_init;
    x->po.list_edits = x->edits;
    x->po.n_list_edits = x->n_edits;
    x->po.keep_fp32 = x->keep;
    x->po.n_keep_fp32 = x->n_keep;
    x->po.notify = notify;
    x->po.notify_ctx = x;
    if (x->n_explain) {
        x->po.explain_nodes = x->explain;
        x->po.n_explain_nodes = x->n_explain;
        x->po.explain_out = stdout;
    }
    return 0;
}

static bool has_node(const AmpGraph *g, const char *name) {
    for (const AmpNode *n = g->first; n; n = n->next) {
        if (n->name && strcmp(n->name, name) == 0) return true;
        for (size_t i = 0; i < n->n_attrs; i++) {
            const AmpAttr *a = &n->attrs[i];
            if (a->g && has_node(a->g, name)) return true;
            for (size_t k = 0; k < a->n_graphs; k++)
                if (a->graphs[k] && has_node(a->graphs[k], name)) return true;
        }
    }
    return false;
}

static bool runs_amp(const char *pipeline) {
    for (const char *p = pipeline; p && *p;) {
        while (*p == ' ' || *p == ',') p++;
        size_t len = strcspn(p, ",");
        size_t t = len;
        while (t && p[t - 1] == ' ') t--;
        if (t == 3 && strncmp(p, "amp", 3) == 0) return true;
        p += len;
    }
    return false;
}

int ampc_amp_check_explain(const AmpcAmp *x, AmpModel *m, const char *path, const char *pipeline) {
    if (!x->n_explain) return 0;
    if (!runs_amp(pipeline)) return usage("--explain needs the amp pass, which the pipeline '%s' does not run", pipeline);
    for (size_t k = 0; k < x->n_explain; k++) {
        const char *name = x->explain[k];
        bool found = has_node(m->graph, name);
        for (size_t i = 0; !found && i < m->n_training; i++) {
            if (m->training[i].algorithm) found = has_node(m->training[i].algorithm, name);
            if (!found && m->training[i].initialization) found = has_node(m->training[i].initialization, name);
        }
        if (!found) return usage("--explain '%s': %s has no node of that name", name, path);
    }
    return 0;
}

void ampc_amp_free(AmpcAmp *x) {
    free(x->edits);
    free(x->keep);
    free(x->explain);
    amp_calib_free(x->calib);
    x->calib = NULL;
    x->po.calib = NULL;
    x->edits = NULL;
    x->keep = NULL;
    x->explain = NULL;
}
