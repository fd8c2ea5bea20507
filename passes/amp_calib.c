/* Measured ranges in the amp pass (docs/design.md, "The colouring lists and the rules
 * beside them", rule 9; docs/calibration.md): the statistics file `ampc calibrate` writes
 * (calib.h), the rule that keeps float32 every node reading or writing a value whose
 * recorded |x| passes --calib-max-activation (ModelOpt AutoCast's rule; its default is 512)
 * or whose largest |x| stays below --calib-min-activation (the whole value would be
 * subnormal in float16), and the advice on gradients that would underflow. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "passes/amp_impl.h"
#include "passes/calib.h"
#include "ir/front.h"

/* ---- the file ------------------------------------------------------------------------ */

static size_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return (size_t)h;
}

AmpCode amp_calib_index(AmpCalibStats *s, AmpStatus *st) {
    size_t cap = 16;
    while (cap < 2 * s->n_v + 2) cap *= 2;
    size_t *ix = calloc(cap, sizeof *ix);
    if (!ix) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    for (size_t i = 0; i < s->n_v; i++) {
        size_t j = hash_str(s->v[i].name) & (cap - 1);
        while (ix[j]) j = (j + 1) & (cap - 1);
        ix[j] = i + 1;
    }
    free(s->index);
    s->index = ix, s->cap_index = cap;
    return AMP_OK;
}

const AmpCalibValue *amp_calib_find(const AmpCalibStats *s, const char *name) {
    if (!s || !s->cap_index || !name) return NULL;
    for (size_t j = hash_str(name) & (s->cap_index - 1); s->index[j]; j = (j + 1) & (s->cap_index - 1))
        if (strcmp(s->v[s->index[j] - 1].name, name) == 0) return &s->v[s->index[j] - 1];
    return NULL;
}

void amp_calib_free(AmpCalibStats *s) {
    if (!s) return;
    for (size_t i = 0; i < s->n_v; i++) free(s->v[i].name);
    for (size_t i = 0; i < s->n_r; i++) free(s->r[i].node);
    free(s->v), free(s->r), free(s->index), free(s);
}

/* Names run to the end of their line. A name the line cannot hold as it is (a control
 * character: a newline ends the line, a carriage return at its end is dropped; leading
 * white space is skipped after the numbers; a backslash, the escape itself) is written
 * escaped, \n \r \t \\ and \xHH, in a file of version 2; a file whose names need none
 * stays version 1, as ampc wrote it before, byte for byte. */
static bool needs_escape(const char *name) {
    if (name[0] == ' ') return true;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        if (*p < 0x20 || *p == 0x7f || *p == '\\') return true;
    return false;
}

static void put_name(FILE *f, const char *name, bool escape) {
    if (!escape) {
        fputs(name, f);
        return;
    }
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
        if (*p == '\n') fputs("\\n", f);
        else if (*p == '\r') fputs("\\r", f);
        else if (*p == '\t') fputs("\\t", f);
        else if (*p == '\\') fputs("\\\\", f);
        else if (*p < 0x20 || *p == 0x7f || (*p == ' ' && p == (const unsigned char *)name)) fprintf(f, "\\x%02x", *p);
        else fputc(*p, f);
    }
}

static int hex_digit(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Name `s` of a version-2 file unescaped in place; false when an escape is malformed. */
static bool unescape(char *s) {
    char *o = s;
    for (const char *p = s; *p; p++) {
        if (*p != '\\') {
            *o++ = *p;
            continue;
        }
        char c = *++p;
        int hi, lo;
        if (c == 'n') *o++ = '\n';
        else if (c == 'r') *o++ = '\r';
        else if (c == 't') *o++ = '\t';
        else if (c == '\\') *o++ = '\\';
        else if (c == 'x' && (hi = hex_digit(p[1])) >= 0 && (lo = hex_digit(p[2])) >= 0 && (hi || lo)) {
            *o++ = (char)(hi * 16 + lo);
            p += 2;
        } else {
            return false;
        }
    }
    *o = '\0';
    return true;
}

bool amp_calib_write(const AmpCalibStats *s, FILE *f) {
    bool escape = false;
    for (size_t i = 0; i < s->n_v && !escape; i++) escape = needs_escape(s->v[i].name);
    for (size_t i = 0; i < s->n_r && !escape; i++) escape = needs_escape(s->r[i].node);
    fprintf(f, "ampc-calibration %d\n# value|grad MAX SUB ZERO NONFINITE COUNT NAME; reduce LENGTH NODE%s "
               "(docs/calibration.md)\nruns %" PRIu64 "\nloss_scale %.17g\n", escape ? 2 : 1,
            escape ? "; names escaped" : "", s->runs, s->loss_scale);
    for (size_t i = 0; i < s->n_v; i++) {
        const AmpCalibValue *v = &s->v[i];
        fprintf(f, "%s %.9g %.6g %.6g %" PRIu64 " %" PRIu64 " ", v->grad ? "grad" : "value", v->max_abs,
                v->sub_share, v->zero_share, v->nonfinite, v->count);
        put_name(f, v->name, escape);
        fputc('\n', f);
    }
    for (size_t i = 0; i < s->n_r; i++) {
        fprintf(f, "reduce %" PRId64 " ", s->r[i].length);
        put_name(f, s->r[i].node, escape);
        fputc('\n', f);
    }
    return fflush(f) == 0 && !ferror(f);
}

/* The rest of the line after n space-separated numbers, parsed into x[0..n). */
static char *numbers(char *p, double *x, int n) {
    for (int i = 0; i < n; i++) {
        while (*p == ' ' || *p == '\t') p++;
        char *end;
        errno = 0;
        x[i] = strtod(p, &end);
        if (end == p || errno || !(*end == ' ' || *end == '\t') || x[i] < 0 || isnan(x[i])) return NULL;
        p = end;
    }
    while (*p == ' ' || *p == '\t') p++;
    return *p ? p : NULL;
}

static AmpCode parse_line(AmpCalibStats *s, char *line, bool escaped, AmpStatus *st) {
    double x[5];
    char *rest;
    bool grad = strncmp(line, "grad ", 5) == 0;
    if (grad || strncmp(line, "value ", 6) == 0) {
        if (!(rest = numbers(line + (grad ? 5 : 6), x, 5)) || x[1] > 1 || x[2] > 1)
            return amp_fail(st, AMP_ERR_INPUT, "expected '%s MAX SUB ZERO NONFINITE COUNT NAME'", grad ? "grad" : "value");
        AmpCalibValue *v = realloc(s->v, (s->n_v + 1) * sizeof *v);
        if (!v) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
        s->v = v;
        v = &s->v[s->n_v];
        *v = (AmpCalibValue){.max_abs = x[0], .sub_share = x[1], .zero_share = x[2], .nonfinite = (uint64_t)x[3],
                             .count = (uint64_t)x[4], .grad = grad};
        if (escaped && !unescape(rest)) return amp_fail(st, AMP_ERR_INPUT, "a malformed escape in the name");
        if (!(v->name = strdup(rest))) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
        s->n_v++;
    } else if (strncmp(line, "reduce ", 7) == 0) {
        if (!(rest = numbers(line + 7, x, 1))) return amp_fail(st, AMP_ERR_INPUT, "expected 'reduce LENGTH NODE'");
        AmpCalibReduce *r = realloc(s->r, (s->n_r + 1) * sizeof *r);
        if (!r) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
        s->r = r;
        if (escaped && !unescape(rest)) return amp_fail(st, AMP_ERR_INPUT, "a malformed escape in the node's name");
        s->r[s->n_r] = (AmpCalibReduce){.length = (int64_t)x[0]};
        if (!(s->r[s->n_r].node = strdup(rest))) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
        s->n_r++;
    } else if (strncmp(line, "runs ", 5) == 0 || strncmp(line, "loss_scale ", 11) == 0) {
        char *end;
        bool runs = line[0] == 'r';
        double d = strtod(line + (runs ? 5 : 11), &end);
        if (*end || !(d > 0) || isinf(d)) return amp_fail(st, AMP_ERR_INPUT, "expected a positive number");
        if (runs) s->runs = (uint64_t)d;
        else s->loss_scale = d;
    } else {
        return amp_fail(st, AMP_ERR_INPUT, "unknown line");
    }
    return AMP_OK;
}

AmpCode amp_calib_read(const char *path, AmpCalibStats **out, AmpStatus *st) {
    *out = NULL;
    FILE *f = fopen(path, "r");
    if (!f) return amp_fail(st, AMP_ERR_INPUT, "%s: %s", path, strerror(errno));
    AmpCalibStats *s = calloc(1, sizeof *s);
    char *line = NULL;
    size_t cap = 0, no = 0;
    ssize_t len;
    bool escaped = false; /* version 2: names escaped (amp_calib_write) */
    AmpCode rc = s ? AMP_OK : amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    if (s) s->loss_scale = 1;
    while (!rc && (len = getline(&line, &cap, f)) >= 0) {
        no++;
        /* The line's end (a carriage return too: version 2 writes none but escaped). */
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
        if (no == 1) {
            escaped = strcmp(line, "ampc-calibration 2") == 0;
            if (!escaped && strcmp(line, "ampc-calibration 1") != 0)
                rc = amp_fail(st, AMP_ERR_INPUT,
                              "%s: not an ampc calibration file (expected 'ampc-calibration 1' or 2)", path);
            continue;
        }
        if (!*line || *line == '#') continue;
        if ((rc = parse_line(s, line, escaped, st))) amp_status_prefix(st, "%s:%zu: ", path, no);
    }
    if (!rc && no == 0) rc = amp_fail(st, AMP_ERR_INPUT, "%s: empty file", path);
    if (!rc && ferror(f)) rc = amp_fail(st, AMP_ERR_INPUT, "%s: %s", path, strerror(errno));
    free(line);
    fclose(f);
    if (!rc) rc = amp_calib_index(s, st);
    if (rc) amp_calib_free(s);
    else *out = s;
    return rc;
}

/* ---- gradients that underflow --------------------------------------------------------- */

static int worse(const void *a, const void *b) {
    double x = (*(const AmpCalibValue *const *)a)->zero_share, y = (*(const AmpCalibValue *const *)b)->zero_share;
    return x < y ? 1 : x > y ? -1 : 0;
}

size_t amp_calib_underflow(const AmpCalibStats *s, const AmpModel *m, size_t max_lines, AmpNotifyFn fn, void *ctx) {
    const AmpCalibValue **u = malloc((s->n_v + 1) * sizeof *u);
    if (!u) { /* the advice is lost, not the conversion: say so rather than nothing */
        if (fn) fn(ctx, "calibration: out of memory: the gradients that underflow are not listed");
        return 0;
    }
    size_t n = 0;
    double top = 0; /* the largest unscaled gradient */
    for (size_t i = 0; i < s->n_v; i++) {
        if (!s->v[i].grad) continue;
        if (s->v[i].max_abs > top) top = s->v[i].max_abs;
        if (s->v[i].zero_share > 0.01) u[n++] = &s->v[i];
    }
    qsort(u, n, sizeof *u, worse);
    char line[1024];
    for (size_t i = 0; i < n && i < max_lines && fn; i++) {
        const AmpValue *v = m ? amp_graph_lookup(m->graph, u[i]->name) : NULL;
        snprintf(line, sizeof line, "calibration: gradient '%s' underflows at loss scale %g: %.1f%% of its non-zero "
                 "elements round to zero in float16 (%.1f%% subnormal), max |g| %.3g%s%s%s",
                 u[i]->name, s->loss_scale, 100 * u[i]->zero_share, 100 * u[i]->sub_share, u[i]->max_abs,
                 v && v->producer ? " (node '" : "", v && v->producer && v->producer->name ? v->producer->name : "",
                 v && v->producer ? "')" : "");
        fn(ctx, line);
    }
    if (n && fn) {
        /* The largest power of two that keeps the largest gradient 8x below 65504. */
        double safe = top > 0 ? exp2(floor(log2(65504.0 / 8 / top))) : 65536;
        if (safe > 16777216) safe = 16777216;
        if (safe > s->loss_scale)
            snprintf(line, sizeof line, "calibration: advice: start the loss scale at %g (--loss-scale-init %g): the "
                     "largest gradient (%.3g) still fits float16 there; or keep the nodes above fp32 (--keep-fp32)",
                     safe, safe, top);
        else
            snprintf(line, sizeof line, "calibration: advice: no loss scale serves both the largest gradient (%.3g) "
                     "and these: keep the nodes above fp32 (--keep-fp32 NODE), or use %s", top,
                     /* the options table's spellings (amp_option_say), which reads calibration files
                      * through this file and so cannot be called from it */
                     amp_front() == AMP_FRONT_CLI ? "--precision bf16" : "precision \"bf16\" (or AMP_PRECISION=bf16)");
        fn(ctx, line);
    }
    free(u);
    return n;
}

/* ---- the rule ------------------------------------------------------------------------- */

/* The forward value of n (an input or output carrying float data) that decides the rule:
 * the one with the largest recorded |x| beyond `over`, else the one with the smallest
 * non-zero largest |x| below `under` (0: no lower bound); NULL when none. */
static const AmpCalibValue *out_of_range(const AmpCalibStats *s, const AmpNode *n, double over, double under) {
    const AmpCalibValue *high = NULL, *low = NULL;
    for (int k = 0; k < n->n_inputs + n->n_outputs; k++) {
        bool in = k < n->n_inputs;
        const AmpValue *v = in ? n->inputs[k] : n->outputs[k - n->n_inputs];
        if (!amp_is_f32(v) || (in && !amp_float_slot(n, k))) continue;
        const AmpCalibValue *c = amp_calib_find(s, v->name);
        if (!c || c->grad) continue;
        if (c->max_abs > over && (!high || c->max_abs > high->max_abs)) high = c;
        if (c->max_abs > 0 && c->max_abs < under && (!low || c->max_abs < low->max_abs)) low = c;
    }
    return high ? high : low;
}

AmpCode amp_calib_rule(AmpRun *r, size_t *n_forced, const char **first) {
    const AmpCalibStats *s = r->opt->calib;
    *n_forced = 0;
    *first = NULL;
    if (!s || r->dt != AMP_DT_FLOAT16) return AMP_OK; /* bfloat16 has float32's range */
    double over = r->opt->calib_max_activation > 0 ? r->opt->calib_max_activation : AMP_CALIB_DEFAULT_MAX;
    double under = r->opt->calib_min_activation < 0 ? 0
                   : r->opt->calib_min_activation > 0 ? r->opt->calib_min_activation : AMP_CALIB_DEFAULT_MIN;
    for (size_t i = 0; i < r->n; i++) {
        AmpNodeInfo *x = &r->ni[i];
        if ((x->flags & AMP_NF_FORCED) || x->cls == AMP_CLASS_NEVER || x->node->op == AMP_OP_Cast) continue;
        const AmpCalibValue *c = out_of_range(s, x->node, over, under);
        if (!c) continue;
        char buf[512];
        if (c->max_abs > over)
            snprintf(buf, sizeof buf, "calibration: max |x| %.3g > %g (value '%s')", c->max_abs, over, c->name);
        else
            snprintf(buf, sizeof buf, "calibration: max |x| %.3g < %g, all subnormal in float16 (value '%s')",
                     c->max_abs, under, c->name);
        const char *d = amp_arena_strdup(&r->m->arena, buf);
        if (!d) return amp_fail(r->st, AMP_ERR_INTERNAL, "amp: out of memory");
        x->flags |= AMP_NF_FORCED;
        x->why = AMP_WHY_CALIB;
        x->detail = d;
        if (!*first) *first = d;
        (*n_forced)++;
    }
    return AMP_OK;
}
