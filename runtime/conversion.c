/* The conversion's phases (convert.h), shared by `ampc MODEL -o OUT` and the C API, and the
 * C API's conversion itself (ampc.h: amp_convert_file, amp_convert_bytes), which runs them in
 * a row: load, verify, the pipeline with the options, verify, save. Its options are set by
 * name through the options table (passes/options.c), as the command's flags are, with the
 * same parsers and the same refusals; it reads no environment variable. */
#include "runtime/conversion.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ampc/ampc.h"
#include "ir/front.h"
#include "passes/passes.h"
#include "runtime/amp_auto.h"

_Static_assert(AMP_CALLER_C == (int)AMP_FRONT_C && AMP_CALLER_CLI == (int)AMP_FRONT_CLI &&
                   AMP_CALLER_PYTHON == (int)AMP_FRONT_PYTHON,
               "ampc.h's callers are ir/front.h's fronts");

/* ---- the phases --------------------------------------------------------------------- */

AmpCode amp_convert_ready(AmpOptions *o, char *summary, size_t n, AmpStatus *st) {
    amp_options_decide(o, amp_auto_device_class(AMP_BACKEND_AUTO));
    summary[0] = '\0';
    if (o->precision_why)
        snprintf(summary, n, "precision auto: %s (%s)",
                 o->stay_fp32 ? "fp32, no amp pass" : o->po.precision == AMP_DT_BFLOAT16 ? "bf16" : "fp16",
                 o->precision_why);
    return amp_options_finish(o, st);
}

const char *amp_convert_pipeline(const AmpOptions *o, const char *list, char *buf, size_t len) {
    if (!list) list = amp_default_pipeline();
    if (!list || !list[0]) list = "none";
    if (!o->stay_fp32) return list;
    /* No 16-bit compute: the passes that make it (amp) or serve it (loss_scale) are left out. */
    size_t k = 0;
    buf[0] = '\0';
    for (const char *p = list; *p;) {
        size_t n = strcspn(p, ",");
        const char *name = p;
        while (n && *name == ' ') name++, n--;
        if (!((n == 3 && !strncmp(name, "amp", 3)) || (n == 10 && !strncmp(name, "loss_scale", 10)))) {
            int w = snprintf(buf + k, len - k, "%s%.*s", k ? "," : "", (int)n, name);
            if (w < 0 || (size_t)w >= len - k) return list; /* cannot happen: the list was checked */
            k += (size_t)w;
        }
        p = name + n;
        if (*p == ',') p++;
    }
    return k ? buf : "none";
}

AmpCode amp_convert_load(const char *path, const void *data, size_t len, const char *dir, AmpModel **out,
                         AmpStatus *st) {
    AmpLoadOptions lo = {.skip_verify = true, .borrow_raw = true};
    return path ? amp_model_load_file(path, &lo, out, st) : amp_model_load_bytes(data, len, dir, &lo, out, st);
}

AmpSaveOptions amp_convert_save_options(AmpExternalMode external, bool value_info) {
    return (AmpSaveOptions){.external = external, .external_min_bytes = 1024, .value_info = value_info};
}

bool amp_convert_is_summary(const char *line) {
    return strncmp(line, "amp: ", 5) == 0 || strncmp(line, "loss_scale: ", 12) == 0 ||
           strncmp(line, "gradient: ", 10) == 0;
}

/* ---- the C API ---------------------------------------------------------------------- */

struct AmpConvertOptions {
    AmpOptions o;
    AmpKept kept; /* copies of the values given: the table's setters keep pointers to them */
};

AmpCode amp_convert_options_new(AmpConvertOptions **out, AmpStatus *st) {
    *out = calloc(1, sizeof **out);
    return *out ? AMP_OK : amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
}

void amp_convert_options_free(AmpConvertOptions *c) {
    if (!c) return;
    amp_options_free(&c->o);
    amp_keep_free(&c->kept);
    free(c);
}

/* A row amp_convert_option_set takes: what the command's conversion takes. The rows taking
 * no value are those whose refusal would expect "nothing" (--keep-io-types). */
static bool takes_value(const AmpOption *d) {
    return strcmp(d->expect, "nothing") != 0;
}

const char *amp_convert_option_name(size_t i, bool *takes) {
    for (size_t k = 0, seen = 0; amp_option_at(k); k++) {
        const AmpOption *d = amp_option_at(k);
        if (!amp_option_converts(d) || !amp_option_keyword(d) || seen++ < i) continue;
        if (takes) *takes = takes_value(d);
        return amp_option_keyword(d);
    }
    return NULL;
}

AmpCode amp_convert_option_set(AmpConvertOptions *c, const char *name, const char *value, AmpStatus *st) {
    const AmpOption *d = name ? amp_option_by_keyword(name) : NULL;
    if (!c) return amp_fail(st, AMP_ERR_USAGE, "amp_convert_option_set: no options object");
    if (!d || !amp_option_converts(d)) return amp_refuse_unknown(st, "conversion", name, amp_convert_option_name);
    const char *v = amp_keep_copy(&c->kept, value);
    if (!v) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    AmpCode rc = amp_option_set(&c->o, d, name, v, st);
    if (!rc && c->o.passes == v) { /* a pipeline: every name a pass, as the command checks it */
        const AmpPass *passes[256];
        size_t n = 0;
        AmpStatus own = {AMP_OK, ""};
        if (amp_pipeline_parse(v, passes, sizeof passes / sizeof *passes, &n, &own))
            rc = amp_fail(st, AMP_ERR_USAGE, "%s: %s", name, own.msg);
    }
    return rc;
}

const char *amp_keep_copy(AmpKept *k, const char *value) {
    char **grown = realloc(k->s, (k->n + 1) * sizeof *grown);
    if (!grown) return NULL;
    k->s = grown;
    char *v = strdup(value ? value : "");
    if (v) grown[k->n++] = v;
    return v;
}

AmpCode amp_refuse_unknown(AmpStatus *st, const char *what, const char *name, const char *(*at)(size_t, bool *)) {
    char known[1024] = "";
    const char *k;
    for (size_t i = 0, n = 0; (k = at(i, NULL)); i++)
        n += (size_t)snprintf(known + n, n < sizeof known ? sizeof known - n : 0, "%s%s", i ? ", " : "", k);
    return amp_fail(st, AMP_ERR_USAGE, "no %s option '%s' (the options: %s)", what, name ? name : "(null)", known);
}

void amp_keep_free(AmpKept *k) {
    for (size_t i = 0; i < k->n; i++) free(k->s[i]);
    free(k->s);
    *k = (AmpKept){0};
}

/* The pass's notices: the summary's lines after the "N nodes" line's head, the rest each on
 * a line of its own below it. */
typedef struct Notes {
    char summary[1024];
    char *rest; /* malloc'd, "\n"-separated */
    size_t n_rest;
    bool oom;
} Notes;

static void note(void *ctx, const char *line) {
    Notes *x = ctx;
    if (amp_convert_is_summary(line)) {
        size_t k = strlen(x->summary);
        snprintf(x->summary + k, sizeof x->summary - k, "%s%s", k ? "; " : "", line);
        return;
    }
    size_t n = strlen(line);
    char *r = realloc(x->rest, x->n_rest + n + 2);
    if (!r) {
        x->oom = true;
        return;
    }
    x->rest = r;
    x->rest[x->n_rest++] = '\n';
    memcpy(x->rest + x->n_rest, line, n + 1);
    x->n_rest += n;
}

/* "N nodes (M before), passes: LIST; SUMMARY" then the other notices, malloc'd. */
static char *summary_text(const Notes *x, size_t before, size_t after, const char *list) {
    size_t n = strlen(x->summary) + strlen(list) + x->n_rest + 96;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "%zu nodes (%zu before), passes: %s%s%s%s", after, before, list, x->summary[0] ? "; " : "",
                 x->summary, x->rest ? x->rest : "");
    return s;
}

/* Load (path, or the bytes), convert, verify, then save to dst or into *out. */
static AmpCode convert(const char *path, const void *data, size_t len, const char *dir, const AmpConvertOptions *opt,
                       const char *dst, void **out, size_t *out_len, char **summary, AmpStatus *st) {
    if (summary) *summary = NULL;
    /* A copy: deciding auto and finishing change it, and a caller's options serve again. */
    AmpOptions o = opt ? opt->o : (AmpOptions){0};
    Notes notes = {.summary = ""};
    AmpCode c = amp_convert_ready(&o, notes.summary, sizeof notes.summary, st);
    if (c) return c;
    o.po.notify = note;
    o.po.notify_ctx = &notes;
    char buf[512];
    const char *list = amp_convert_pipeline(&o, o.passes, buf, sizeof buf);
    AmpModel *m = NULL;
    size_t before = 0, after = 0;
    c = amp_convert_load(path, data, len, dir, &m, st);
    if (c == AMP_OK) c = amp_verify_model_counted(m, &before, st);
    if (c == AMP_OK) {
        AmpPipelineOptions pl = {.verify_each = false, .pass = &o.po};
        c = amp_run_pipeline(m, list, &pl, st);
    }
    if (c == AMP_OK) c = amp_verify_model_counted(m, &after, st);
    AmpSaveOptions so = amp_convert_save_options((AmpExternalMode)o.external, !o.no_value_info);
    if (c == AMP_OK && dst) c = amp_model_save_file(m, dst, &so, st);
    if (c == AMP_OK && !dst) c = amp_model_save_bytes_opt(m, &so, (uint8_t **)out, out_len, st);
    if (c == AMP_OK && notes.oom) c = amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    if (c == AMP_OK && summary && !(*summary = summary_text(&notes, before, after, list)))
        c = amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    if (c != AMP_OK && out) {
        free(*out);
        *out = NULL;
    }
    free(notes.rest);
    amp_model_free(m);
    return c;
}

AmpCode amp_convert_file(const char *src, const char *dst, const AmpConvertOptions *opt, char **summary,
                         AmpStatus *st) {
    if (!src || !src[0]) return amp_fail(st, AMP_ERR_USAGE, "amp_convert_file: no src path");
    if (!dst || !dst[0]) return amp_fail(st, AMP_ERR_USAGE, "amp_convert_file: no dst path");
    return convert(src, NULL, 0, NULL, opt, dst, NULL, NULL, summary, st);
}

AmpCode amp_convert_bytes(const void *model, size_t len, const char *dir, const AmpConvertOptions *opt, void **out,
                          size_t *out_len, char **summary, AmpStatus *st) {
    if (!out || !out_len) return amp_fail(st, AMP_ERR_USAGE, "amp_convert_bytes: out and out_len are needed");
    *out = NULL;
    *out_len = 0;
    if (!model && len) return amp_fail(st, AMP_ERR_USAGE, "amp_convert_bytes: no model");
    return convert(NULL, model, len, dir, opt, NULL, out, out_len, summary, st);
}

void amp_free(void *p) {
    free(p);
}

void amp_set_front(int front) {
    if (front >= AMP_FRONT_C && front <= AMP_FRONT_PYTHON) amp_front_set((AmpFront)front);
}
