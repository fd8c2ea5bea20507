/* AMP_AUTO: parses AMP_BACKEND, AMP_AUTO, AMP_PRECISION, AMP_LOSS_SCALE, AMP_LOG_PATH and the eight list
 * edit variables (AMP_ALLOWLIST_ADD ... AMP_DENYLIST_REMOVE; parsed by passes/amp_lists.c,
 * which the CLI shares) once per open, then rewrites the model in memory with the AMP
 * pipeline, so an FP32 model trains in mixed precision with no file and no code changed. */
#include "amp_auto.h"
#include "backend.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* A setting: the option's value when given, else the environment's (unless ignored). */
static const char *setting(const AmpSessionOptions *o, const char *field, const char *var) {
    if (field) return field;
    if (o && o->ignore_env) return NULL;
    return getenv(var);
}

static bool is_blank(const char *s) {
    return !s || !*s;
}

static AmpCode parse_bool(const char *var, const char *s, bool *out, AmpStatus *st) {
    static const char *const yes[] = {"1", "true", "on", "yes"}, *const no[] = {"0", "false", "off", "no"};
    *out = false;
    if (is_blank(s)) return AMP_OK;
    for (size_t i = 0; i < 4; i++) {
        if (strcmp(s, yes[i]) == 0) return *out = true, AMP_OK;
        if (strcmp(s, no[i]) == 0) return AMP_OK;
    }
    return amp_fail(st, AMP_ERR_USAGE, "%s='%.64s': expected 1 (rewrite the model in mixed precision) or 0", var, s);
}

static AmpCode parse_precision(const char *s, int *out, AmpStatus *st) {
    *out = AMP_DT_FLOAT16;
    if (is_blank(s) || strcmp(s, "fp16") == 0 || strcmp(s, "float16") == 0 || strcmp(s, "half") == 0)
        return AMP_OK;
    if (strcmp(s, "bf16") == 0 || strcmp(s, "bfloat16") == 0) return *out = AMP_DT_BFLOAT16, AMP_OK;
    return amp_fail(st, AMP_ERR_USAGE, "AMP_PRECISION='%.64s': expected fp16 or bf16", s);
}

static AmpCode parse_loss_scale(const char *s, AmpLossScaleMode *mode, double *scale, AmpStatus *st) {
    *mode = AMP_LOSS_SCALE_DEFAULT;
    *scale = 0;
    if (is_blank(s)) return AMP_OK;
    if (strcmp(s, "dynamic") == 0) return *mode = AMP_LOSS_SCALE_DYNAMIC, AMP_OK;
    if (strcmp(s, "none") == 0) return *mode = AMP_LOSS_SCALE_NONE, AMP_OK;
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v <= 0)
        return amp_fail(st, AMP_ERR_USAGE, "AMP_LOSS_SCALE='%.64s': expected dynamic, none or a positive number", s);
    *mode = AMP_LOSS_SCALE_STATIC;
    *scale = v;
    return AMP_OK;
}

void amp_auto_config_free(AmpAutoConfig *c) {
    free(c->edits);
    free(c->log_path);
    memset(c, 0, sizeof *c);
}

AmpCode amp_auto_config(const AmpSessionOptions *o, AmpAutoConfig *c, AmpStatus *st) {
    static const AmpSessionOptions none = {0};
    if (!o) o = &none;
    memset(c, 0, sizeof *c);
    c->precision = AMP_DT_FLOAT16;
    c->backend = o->backend;
    const char *be = o->backend == AMP_BACKEND_AUTO ? setting(o, NULL, "AMP_BACKEND") : NULL;
    if (!is_blank(be) && (c->backend = amp_backend_parse(be)) < 0)
        return amp_fail(st, AMP_ERR_USAGE, "AMP_BACKEND='%.64s': expected cpu, cuda, auto or sim", be);
    AmpCode rc = parse_bool("AMP_AUTO", setting(o, o->amp_auto, "AMP_AUTO"), &c->enabled, st);
    if (rc || !c->enabled) return rc;
    if ((rc = parse_precision(setting(o, o->precision, "AMP_PRECISION"), &c->precision, st))) return rc;
    if ((rc = parse_loss_scale(setting(o, o->loss_scale, "AMP_LOSS_SCALE"), &c->loss_scale_mode, &c->loss_scale, st)))
        return rc;
    const struct {
        const char *field, *var;
        AmpOpClass list;
        bool remove;
    } lists[] = {
        /* Additions before removals, as TensorFlow applies them. */
        {o->allowlist_add, "AMP_ALLOWLIST_ADD", AMP_CLASS_ALLOW, false},
        {o->inferlist_add, "AMP_INFERLIST_ADD", AMP_CLASS_INFER, false},
        {o->clearlist_add, "AMP_CLEARLIST_ADD", AMP_CLASS_CLEAR, false},
        {o->denylist_add, "AMP_DENYLIST_ADD", AMP_CLASS_DENY, false},
        {o->allowlist_remove, "AMP_ALLOWLIST_REMOVE", AMP_CLASS_ALLOW, true},
        {o->inferlist_remove, "AMP_INFERLIST_REMOVE", AMP_CLASS_INFER, true},
        {o->clearlist_remove, "AMP_CLEARLIST_REMOVE", AMP_CLASS_CLEAR, true},
        {o->denylist_remove, "AMP_DENYLIST_REMOVE", AMP_CLASS_DENY, true},
    };
    for (size_t i = 0; !rc && i < sizeof lists / sizeof *lists; i++)
        rc = amp_list_edits_parse(lists[i].var, setting(o, lists[i].field, lists[i].var), lists[i].list,
                                  lists[i].remove, &c->edits, &c->n_edits, st);
    if (!rc) rc = amp_list_edits_check(c->edits, c->n_edits, st);
    const char *log = setting(o, o->log_path, "AMP_LOG_PATH");
    if (!rc && !is_blank(log) && !(c->log_path = strdup(log))) rc = amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    if (rc) amp_auto_config_free(c);
    return rc;
}

const char *amp_auto_pipeline(void) {
    const char *d = amp_default_pipeline();
    return d && *d ? d : "none";
}

/* ---- applying ---------------------------------------------------------------------- */

static size_t count_casts(const AmpGraph *g) {
    size_t n = 0;
    for (const AmpNode *x = g->first; x; x = x->next) {
        n += x->op == AMP_OP_Cast;
        for (size_t k = 0; k < x->n_attrs; k++) {
            if (x->attrs[k].g) n += count_casts(x->attrs[k].g);
            for (size_t j = 0; j < x->attrs[k].n_graphs; j++) n += count_casts(x->attrs[k].graphs[j]);
        }
    }
    return n;
}

static size_t count_model_casts(const AmpModel *m) {
    size_t n = count_casts(m->graph);
    for (size_t i = 0; i < m->n_training; i++) {
        if (m->training[i].algorithm) n += count_casts(m->training[i].algorithm);
        if (m->training[i].initialization) n += count_casts(m->training[i].initialization);
    }
    return n;
}

/* Writes <dir>/<stem>.onnx and <dir>/<stem>.txt (amp_print_model). */
static AmpCode log_model(AmpModel *m, const char *dir, const char *stem, AmpStatus *st) {
    char path[4096];
    if (snprintf(path, sizeof path, "%s/%s.onnx", dir, stem) >= (int)sizeof path)
        return amp_fail(st, AMP_ERR_USAGE, "AMP_LOG_PATH '%.64s...': path too long", dir);
    AmpCode rc = amp_model_save_file(m, path, NULL, st);
    if (rc) {
        amp_status_prefix(st, "AMP_LOG_PATH: ");
        return rc;
    }
    snprintf(path, sizeof path, "%s/%s.txt", dir, stem);
    FILE *f = fopen(path, "w");
    if (!f) return amp_fail(st, AMP_ERR_USAGE, "AMP_LOG_PATH: cannot write %s: %s", path, strerror(errno));
    amp_print_model(f, m);
    if (fclose(f) != 0) return amp_fail(st, AMP_ERR_INTERNAL, "AMP_LOG_PATH: writing %s failed", path);
    return AMP_OK;
}

static size_t count_nodes(const AmpModel *m) {
    size_t n = m->graph->n_nodes;
    for (size_t i = 0; i < m->n_training; i++)
        if (m->training[i].algorithm) n += m->training[i].algorithm->n_nodes;
    return n;
}

AmpCode amp_auto_apply(AmpModel *m, const AmpAutoConfig *c, bool *applied, AmpStatus *st) {
    *applied = false;
    if (!c->enabled) return AMP_OK;
    AmpCode rc;
    if (c->log_path) {
        if (mkdir(c->log_path, 0777) != 0 && errno != EEXIST)
            return amp_fail(st, AMP_ERR_USAGE, "AMP_LOG_PATH '%s': cannot create the folder: %s", c->log_path,
                            strerror(errno));
        if ((rc = log_model(m, c->log_path, "before", st))) return rc;
    }
    size_t nodes_before = count_nodes(m), casts_before = count_model_casts(m);
    AmpPassOptions po = {
        .precision = c->precision,
        .list_edits = c->edits,
        .n_list_edits = c->n_edits,
        .loss_scale_mode = c->loss_scale_mode,
        .loss_scale = c->loss_scale,
    };
    FILE *paint = NULL;
    if (c->log_path) {
        char path[4096];
        snprintf(path, sizeof path, "%s/paint.txt", c->log_path);
        if (!(paint = fopen(path, "w")))
            return amp_fail(st, AMP_ERR_USAGE, "AMP_LOG_PATH: cannot write %s: %s", path, strerror(errno));
        po.paint_out = paint; /* the op lists in force and the nodes of each paint bucket */
    }
    AmpPipelineOptions pl = {.pass = &po};
    const char *list = amp_auto_pipeline();
    rc = amp_run_pipeline(m, list, &pl, st);
    if (paint && fclose(paint) != 0 && !rc)
        rc = amp_fail(st, AMP_ERR_INTERNAL, "AMP_LOG_PATH: writing paint.txt failed");
    if (!rc) rc = amp_verify_model(m, st);
    if (rc) {
        amp_status_prefix(st, "AMP_AUTO (pipeline '%s'): ", list);
        return rc;
    }
    *applied = true;
    if (c->log_path) {
        if ((rc = log_model(m, c->log_path, "after", st))) return rc;
        char path[4096];
        snprintf(path, sizeof path, "%s/summary.txt", c->log_path);
        FILE *f = fopen(path, "w");
        if (!f) return amp_fail(st, AMP_ERR_USAGE, "AMP_LOG_PATH: cannot write %s: %s", path, strerror(errno));
        fprintf(f, "pipeline: %s\nprecision: %s\nlist edits: %zu\nnodes: %zu before, %zu after\n"
                   "casts: %zu before, %zu after\n",
                list, amp_dtype_name(c->precision), c->n_edits, nodes_before, count_nodes(m), casts_before,
                count_model_casts(m));
        if (fclose(f) != 0) return amp_fail(st, AMP_ERR_INTERNAL, "AMP_LOG_PATH: writing %s failed", path);
    }
    return AMP_OK;
}
