/* The AMP options of the convert command (cli_amp.h): each option's value is checked as it
 * is read, by the library's table (a bad one is a usage error, exit 2); the conversion's
 * variables (AMP_PRECISION, ...) are read after the flags, which win (list edits add up:
 * the command line's first), and the pass's notices (weights kept in fp32, the summary)
 * come back through a callback. */
#include "tools/cli_amp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/conversion.h"
#include "tools/run.h"
#include "tools/cli_say.h"

static int status_error(const AmpStatus *st) {
    if (st->code == AMP_ERR_USAGE) return ampc_usage_error("%s", st->msg);
    ampc_say("%s", st->msg);
    return st->code ? (int)st->code : AMP_ERR_INTERNAL;
}

int ampc_amp_option(AmpcAmp *x, const char *name, const char *arg) {
    if (strcmp(name, "explain") == 0) {
        if (!arg[0]) return ampc_usage_error("--explain: NODE is empty");
        const char **e = realloc(x->explain, (x->n_explain + 1) * sizeof *e);
        if (!e) return ampc_usage_error("out of memory");
        x->explain = e;
        x->explain[x->n_explain++] = arg;
        return 0;
    }
    const AmpOption *d = amp_option_find(name);
    if (!d || !d->name) return -1;
    char label[64];
    snprintf(label, sizeof label, "--%s", name);
    AmpStatus st = {AMP_OK, ""};
    return amp_option_set(&x->o, d, label, arg, &st) ? status_error(&st) : 0;
}

/* Notices from the passes: the gradient, amp and loss_scale summaries are kept for the "wrote" line,
 * the rest printed. */
static void notify(void *ctx, const char *line) {
    AmpcAmp *x = ctx;
    if (amp_convert_is_summary(line)) {
        size_t k = strlen(x->summary);
        snprintf(x->summary + k, sizeof x->summary - k, "%s%s", k ? "; " : "", line);
    }
    else if (!x->quiet)
        ampc_say("%s", line);
}

int ampc_amp_finish(AmpcAmp *x) {
    AmpStatus st = {AMP_OK, ""};
    if (amp_options_read_env(&x->o, amp_option_getenv, NULL, AMP_DOOR_CONVERT, &st)) return status_error(&st);
    /* auto: for the machine ampc runs on, said first in the "wrote" line; then the checks
     * of the whole (runtime/conversion.c, as the C API's conversion does). */
    if (amp_convert_ready(&x->o, x->summary, sizeof x->summary, &st)) return status_error(&st);
    x->o.po.notify = notify;
    x->o.po.notify_ctx = x;
    if (x->n_explain) {
        x->o.po.explain_nodes = x->explain;
        x->o.po.n_explain_nodes = x->n_explain;
        x->o.po.explain_out = stdout;
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

/* Whether pipeline `list` (checked already) runs the amp pass. */
static bool runs_amp(const char *list) {
    const AmpPass *passes[64];
    size_t n = 0;
    AmpStatus st = {AMP_OK, ""};
    if (amp_pipeline_parse(list, passes, sizeof passes / sizeof *passes, &n, &st)) return false;
    for (size_t i = 0; i < n; i++)
        if (passes[i]->run == amp_pass_amp) return true;
    return false;
}

int ampc_amp_check_explain(const AmpcAmp *x, AmpModel *m, const char *path, const char *pipeline) {
    if (!x->n_explain) return 0;
    if (!runs_amp(pipeline)) return ampc_usage_error("--explain needs the amp pass, which the pipeline '%s' does not run", pipeline);
    for (size_t k = 0; k < x->n_explain; k++) {
        const char *name = x->explain[k];
        bool found = has_node(m->graph, name);
        for (size_t i = 0; !found && i < m->n_training; i++) {
            if (m->training[i].algorithm) found = has_node(m->training[i].algorithm, name);
            if (!found && m->training[i].initialization) found = has_node(m->training[i].initialization, name);
        }
        if (!found) return ampc_usage_error("--explain '%s': %s has no node of that name", name, path);
    }
    return 0;
}

int ampc_command_env(void) {
    AmpOptions o = {0};
    AmpStatus st = {AMP_OK, ""};
    int rc = amp_options_read_env(&o, amp_option_getenv, NULL, AMP_DOOR_COMMAND, &st) ? status_error(&st) : 0;
    if (!rc && o.threads > 0) amp_threads_set(o.threads);
    amp_options_free(&o);
    return rc;
}

void ampc_amp_free(AmpcAmp *x) {
    amp_options_free(&x->o);
    free(x->explain);
    x->explain = NULL;
    x->n_explain = 0;
}
