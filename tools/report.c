/* The conversion report (report.h): one walk over every graph counting nodes by
 * precision and op type, casts by direction, and the FLOPs of matrix products and
 * convolutions whose shapes are static; then a short text summary and a table. */
#include <stdlib.h>
#include <string.h>

#include "tools/report.h"

/* ---- counting -------------------------------------------------------------------- */

static AmpOpCount *op_row(AmpReport *r, const AmpNode *n) {
    const char *dom = amp_domain_is_default(n->domain) ? "" : n->domain;
    const char *op = n->op_type ? n->op_type : "?";
    for (size_t i = 0; i < r->n_ops; i++)
        if (strcmp(r->ops[i].op_type, op) == 0 && strcmp(r->ops[i].domain, dom) == 0)
            return &r->ops[i];
    if (r->n_ops == r->cap_ops) {
        size_t cap = r->cap_ops ? 2 * r->cap_ops : 32;
        AmpOpCount *p = realloc(r->ops, cap * sizeof *p);
        if (!p) return NULL;
        r->ops = p;
        r->cap_ops = cap;
    }
    AmpOpCount *row = &r->ops[r->n_ops++];
    memset(row, 0, sizeof *row);
    row->domain = dom;
    row->op_type = op;
    return row;
}

static bool untyped(const AmpValue *v) {
    return v && (v->type.kind == AMP_TYPE_NONE ||
                 (v->type.kind == AMP_TYPE_TENSOR && v->type.dtype == AMP_DT_UNDEFINED));
}

static AmpCode count_node(AmpReport *r, const AmpNode *n, AmpStatus *st) {
    r->nodes++;
    bool unknown = false;
    for (int i = 0; i < n->n_inputs; i++) unknown |= untyped(n->inputs[i]);
    for (int i = 0; i < n->n_outputs; i++) unknown |= untyped(n->outputs[i]);
    r->untyped_nodes += unknown;
    /* X, Y and N by the rule the amp pass's summary uses too (precision.h). */
    AmpFloatCounts fc = {0};
    int grp;
    AmpPrecision p = amp_count_node(n, &fc, &grp);
    r->float_nodes += fc.float_nodes;
    r->converted += fc.converted;
    r->casts += fc.casts;
    r->other_casts += fc.other_casts;
    if (grp >= 0) {
        r->group_nodes[grp]++;
        return AMP_OK;
    }
    if (p == AMP_PREC_CAST) {
        int from, to;
        amp_cast_dtypes(n, &from, &to);
        int dir = -1;
        if (from == AMP_DT_FLOAT && to == AMP_DT_FLOAT16) dir = AMP_CAST_32_TO_16;
        if (from == AMP_DT_FLOAT16 && to == AMP_DT_FLOAT) dir = AMP_CAST_16_TO_32;
        if (from == AMP_DT_FLOAT && to == AMP_DT_BFLOAT16) dir = AMP_CAST_32_TO_BF16;
        if (from == AMP_DT_BFLOAT16 && to == AMP_DT_FLOAT) dir = AMP_CAST_BF16_TO_32;
        if (dir >= 0) r->cast_dirs[dir]++;
        return AMP_OK;
    }
    AmpOpCount *row = op_row(r, n);
    if (!row) return amp_fail(st, AMP_ERR_INTERNAL, "report: out of memory");
    row->nodes++;
    if (p == AMP_PREC_NONE) {
        row->none++;
        return AMP_OK;
    }
    bool is16 = amp_precision_is_16(p);
    row->n16 += is16;
    row->n32 += !is16;
    double fl = 0;
    int got = amp_node_flops(n, &fl);
    if (got < 0) r->flop_skipped++;
    if (got > 0) {
        r->flop_nodes++;
        r->flops += fl;
        if (is16) r->flops16 += fl;
    }
    return AMP_OK;
}

static AmpCode count_graph(AmpReport *r, const AmpGraph *g, AmpStatus *st) {
    if (!g) return AMP_OK;
    r->graphs++;
    for (const AmpNode *n = g->first; n; n = n->next) {
        AmpCode rc = count_node(r, n, st);
        for (size_t i = 0; !rc && i < n->n_attrs; i++) {
            const AmpAttr *a = &n->attrs[i];
            rc = count_graph(r, a->g, st);
            for (size_t k = 0; !rc && k < a->n_graphs; k++) rc = count_graph(r, a->graphs[k], st);
        }
        if (rc) return rc;
    }
    return AMP_OK;
}

static int cmp_ops(const void *pa, const void *pb) {
    const AmpOpCount *a = pa, *b = pb;
    if (a->nodes != b->nodes) return a->nodes > b->nodes ? -1 : 1;
    int c = strcmp(a->domain, b->domain);
    return c ? c : strcmp(a->op_type, b->op_type);
}

AmpCode amp_report_model(const AmpModel *m, AmpReport *r, AmpStatus *st) {
    memset(r, 0, sizeof *r);
    AmpCode rc = count_graph(r, m->graph, st);
    for (size_t i = 0; !rc && i < m->n_training; i++) {
        rc = count_graph(r, m->training[i].initialization, st);
        if (!rc) rc = count_graph(r, m->training[i].algorithm, st);
    }
    if (!rc && r->n_ops > 1) qsort(r->ops, r->n_ops, sizeof *r->ops, cmp_ops);
    return rc;
}

void amp_report_free(AmpReport *r) {
    free(r->ops);
    r->ops = NULL;
    r->n_ops = r->cap_ops = 0;
}

/* ---- printing -------------------------------------------------------------------- */

enum { MAX_OP_WIDTH = 48 }; /* longer op names are cut in the table */

/* 96, 123456, or 1.23G for counts of a million and more. */
static void fmt_count(char *buf, size_t len, double x) {
    static const char *const unit[] = {"", "k", "M", "G", "T", "P", "E"};
    if (x < 1e6) {
        snprintf(buf, len, "%.0f", x);
        return;
    }
    size_t u = 0;
    while (x >= 1000 && u + 1 < sizeof unit / sizeof unit[0]) x /= 1000, u++;
    snprintf(buf, len, "%.3g%s", x, unit[u]);
}

static const char *plural(size_t n, const char *one, const char *many) { return n == 1 ? one : many; }

void amp_report_print(FILE *f, const AmpReport *r) {
    fprintf(f, "converted %zu of %zu float nodes using %zu casts\n", r->converted, r->float_nodes,
            r->casts);
#define TO "\xE2\x86\x92" /* → */
    static const char *const dir_name[AMP_CAST__DIRS] = {"fp32" TO "fp16", "fp16" TO "fp32",
                                                         "fp32" TO "bf16", "bf16" TO "fp32"};
#undef TO
    fputs("casts:", f);
    bool any = false;
    for (int i = 0; i < AMP_CAST__DIRS; i++) {
        if (!r->cast_dirs[i]) continue;
        fprintf(f, "%s %s %zu", any ? "," : "", dir_name[i], r->cast_dirs[i]);
        any = true;
    }
    if (!any) fputs(" none", f);
    fprintf(f, "; other casts %zu\n", r->other_casts);

    fputs("16-bit share of MatMul/Gemm/Conv/ConvTranspose FLOPs: ", f);
    if (r->flop_nodes && r->flops > 0) {
        char a[32], b[32];
        fmt_count(a, sizeof a, r->flops16);
        fmt_count(b, sizeof b, r->flops);
        fprintf(f, "%.1f%% (%s of %s FLOPs in %zu %s", 100.0 * r->flops16 / r->flops, a, b,
                r->flop_nodes, plural(r->flop_nodes, "node", "nodes"));
    } else {
        fputs("n/a (no such node with static shapes", f);
    }
    if (r->flop_skipped)
        fprintf(f, "; %zu %s skipped: shapes not static", r->flop_skipped,
                plural(r->flop_skipped, "node", "nodes"));
    fputs(")\n", f);

    for (size_t i = 0; i < amp_node_group_count(); i++)
        if (r->group_nodes[i])
            fprintf(f, "%s: %zu %s, one group (not counted above)\n", amp_node_group_at(i)->label,
                    r->group_nodes[i], plural(r->group_nodes[i], "node", "nodes"));
    fprintf(f, "%zu %s in %zu %s\n", r->nodes, plural(r->nodes, "node", "nodes"), r->graphs,
            plural(r->graphs, "graph", "graphs"));
    if (r->untyped_nodes)
        fprintf(f, "note: %zu %s values of unknown type, so precisions may be understated "
                   "(the infer pass fills types in)\n",
                r->untyped_nodes, plural(r->untyped_nodes, "node has", "nodes have"));
    if (!r->n_ops) return;

    int w = 7; /* "op type" */
    for (size_t i = 0; i < r->n_ops; i++) {
        const AmpOpCount *o = &r->ops[i];
        size_t len = strlen(o->op_type) + (o->domain[0] ? strlen(o->domain) + 2 : 0);
        if (len > (size_t)w) w = len > MAX_OP_WIDTH ? MAX_OP_WIDTH : (int)len;
    }
    fprintf(f, "%-*s  %7s  %7s  %7s  %7s\n", w, "op type", "nodes", "16-bit", "fp32", "none");
    for (size_t i = 0; i < r->n_ops; i++) {
        const AmpOpCount *o = &r->ops[i];
        char name[MAX_OP_WIDTH + 1];
        snprintf(name, sizeof name, "%s%s%s", o->domain, o->domain[0] ? "::" : "", o->op_type);
        for (char *c = name; *c; c++)
            if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?'; /* one row per line */
        fprintf(f, "%-*s  %7zu  %7zu  %7zu  %7zu\n", w, name, o->nodes, o->n16, o->n32, o->none);
    }
}
