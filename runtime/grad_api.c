/* The training graph from an inference one (grad_api.h): `ampc grad`'s phases, and the C API's
 * grad options (ampc.h), set by name through the grad options' one table
 * (passes/grad_options.c) as the command's flags are, with the same refusals. */
#include "runtime/grad_api.h"

#include <stdlib.h>
#include <string.h>

#include "ampc/ampc.h"
#include "runtime/conversion.h"

AmpCode amp_grad_run(const char *path, const void *data, size_t len, const char *dir, const AmpGradArgs *g,
                     const char *dst, void **out, size_t *out_len, char *summary, size_t n, AmpStatus *st) {
    AmpCode rc = amp_grad_args_check(g, st);
    if (rc) return rc;
    AmpModel *m = NULL;
    rc = path ? amp_model_load_file(path, NULL, &m, st) : amp_model_load_bytes(data, len, dir, NULL, &m, st);
    AmpGradSummary sum = {0};
    if (!rc) rc = amp_grad_model(m, &g->opt, &sum, st);
    if (!rc) rc = amp_verify_model(m, st);
    AmpSaveOptions so = {.external = AMP_SAVE_EXTERNAL_AUTO, .value_info = true};
    if (!rc && dst) rc = amp_model_save_file(m, dst, &so, st);
    if (!rc && !dst) rc = amp_model_save_bytes_opt(m, &so, (uint8_t **)out, out_len, st);
    if (!rc) amp_grad_summary_text(&sum, &g->opt, summary, n); /* before the model goes: the loss's name is its */
    amp_model_free(m);
    return rc;
}

/* ---- the C API ---------------------------------------------------------------------- */

struct AmpGradSettings {
    AmpGradArgs g;
    AmpKept kept; /* copies of the values given (amp_keep_copy) */
};

AmpCode amp_grad_options_new(AmpGradSettings **out, AmpStatus *st) {
    *out = calloc(1, sizeof **out);
    return *out ? AMP_OK : amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
}

void amp_grad_options_free(AmpGradSettings *c) {
    if (!c) return;
    amp_grad_args_free(&c->g);
    amp_keep_free(&c->kept);
    free(c);
}

const char *amp_grad_option_name(size_t i, bool *takes) {
    const AmpGradFlag *d = amp_grad_flag_at(i);
    if (d && takes) *takes = amp_grad_flag_takes_value(d);
    return d ? amp_grad_flag_keyword(d) : NULL;
}

AmpCode amp_grad_option_set(AmpGradSettings *c, const char *name, const char *value, AmpStatus *st) {
    const AmpGradFlag *d = amp_grad_flag_find(name);
    if (!c) return amp_fail(st, AMP_ERR_USAGE, "amp_grad_option_set: no options object");
    if (!d || strcmp(amp_grad_flag_keyword(d), name) != 0) return amp_refuse_unknown(st, "grad", name, amp_grad_option_name);
    const char *v = amp_keep_copy(&c->kept, value);
    if (!v) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    return amp_grad_arg_set(&c->g, d, name, v, st);
}

/* *summary, when asked: the line amp_grad_run wrote, malloc'd. */
static AmpCode summarize(AmpCode rc, const char *line, char **summary, AmpStatus *st) {
    if (rc || !summary) return rc;
    return (*summary = strdup(line)) ? AMP_OK : amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
}

AmpCode amp_grad_bytes(const void *model, size_t len, const char *dir, const AmpGradSettings *opt, void **out,
                       size_t *out_len, char **summary, AmpStatus *st) {
    if (summary) *summary = NULL;
    if (!out || !out_len) return amp_fail(st, AMP_ERR_USAGE, "amp_grad_bytes: out and out_len are needed");
    *out = NULL;
    *out_len = 0;
    if (!model && len) return amp_fail(st, AMP_ERR_USAGE, "amp_grad_bytes: no model");
    const AmpGradArgs defaults = {0}, *g = opt ? &opt->g : &defaults;
    char line[1024];
    AmpCode rc = summarize(amp_grad_run(NULL, model, len, dir, g, NULL, out, out_len, line, sizeof line, st), line,
                           summary, st);
    if (rc) {
        free(*out);
        *out = NULL;
        *out_len = 0;
    }
    return rc;
}

AmpCode amp_grad_file(const char *src, const char *dst, const AmpGradSettings *opt, char **summary, AmpStatus *st) {
    if (summary) *summary = NULL;
    if (!src || !src[0]) return amp_fail(st, AMP_ERR_USAGE, "amp_grad_file: no src path");
    if (!dst || !dst[0]) return amp_fail(st, AMP_ERR_USAGE, "amp_grad_file: no dst path");
    const AmpGradArgs defaults = {0}, *g = opt ? &opt->g : &defaults;
    char line[1024];
    return summarize(amp_grad_run(src, NULL, 0, NULL, g, dst, NULL, NULL, line, sizeof line, st), line, summary, st);
}
