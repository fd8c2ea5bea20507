/* The Graphviz DOT printer (dot.h): every node drawn once with its precision's colour,
 * then every edge at the root level (so no node is pulled into the wrong cluster),
 * walking graphs in file order and naming things by node id, so the text is stable. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tools/dot.h"
#include "ir/precision.h"

#define ARROW "\xE2\x86\x92"    /* → */
#define ELLIPSIS "\xE2\x80\xA6" /* … */

/* Names are cut after MAX_NAME bytes; shapes longer than MAX_SHAPE characters are left
 * off edge labels; a collapsed chain lists at most CHAIN_OPS op types. */
enum { MAX_NAME = 60, MAX_SHAPE = 20, CHAIN_OPS = 6, KEY_LEN = 64 };

static const char *const FILL[AMP_PREC__COUNT] = {
    [AMP_PREC_NONE] = "#e0e0e0", [AMP_PREC_FP32] = "#fdb863", [AMP_PREC_FP16] = "#a6d96a",
    [AMP_PREC_BF16] = "#80cdc1", [AMP_PREC_CAST] = "#ffff99"};
#define EDGE_16 "#1a9850"
#define EDGE_32 "#b35806"
#define EDGE_OTHER "#888888"

typedef struct Dot {
    FILE *f;
    const AmpModel *m;
    AmpDotOptions opt;
    size_t n_ids;         /* collapse arrays cover node ids below this */
    const AmpNode **succ; /* succ[id]: the next node of id's chain, or NULL */
    uint32_t *rep;        /* rep[id]: the id of the head of id's chain */
} Dot;

/* ---- text ------------------------------------------------------------------------ */

/* Length of the well-formed UTF-8 sequence at s (n bytes left), or 0. */
static size_t utf8_len(const unsigned char *s, size_t n) {
    unsigned c = s[0], lo = 0x80, hi = 0xBF;
    size_t len;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F; /* no surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else {
        return 0;
    }
    if (n < len || s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xBF) return 0;
    return len;
}

/* s as the inside of a DOT string: quotes and backslashes escaped (so Graphviz's \N, \G,
 * \l escapes cannot be smuggled in), a newline as a label line break, other control
 * bytes and bytes that are not UTF-8 as the visible text \xNN; cut after `max` bytes. */
static void put_esc(FILE *f, const char *str, size_t max) {
    const unsigned char *s = (const unsigned char *)(str ? str : "");
    size_t n = strlen((const char *)s);
    for (size_t i = 0; i < n;) {
        if (i >= max) {
            fputs(ELLIPSIS, f);
            return;
        }
        unsigned c = s[i];
        size_t len = utf8_len(s + i, n - i);
        if (c == '"' || c == '\\') {
            fputc('\\', f);
            fputc((int)c, f);
        } else if (c == '\n') {
            fputs("\\n", f);
        } else if (c < 0x20 || c == 0x7f || len == 0) {
            fprintf(f, "\\\\x%02X", c);
        } else {
            fwrite(s + i, 1, len, f);
            i += len;
            continue;
        }
        i++;
    }
}

static void put_op(FILE *f, const AmpNode *n) {
    if (!amp_domain_is_default(n->domain)) {
        put_esc(f, n->domain, MAX_NAME);
        fputs("::", f);
    }
    put_esc(f, n->op_type ? n->op_type : "?", MAX_NAME);
}

/* "fp16[2,3]": the short dtype, then the shape when every dim is known (or, with
 * `symbolic`, named or '?') and it is short; "" when the type is unknown. */
static void type_text(const AmpType *t, bool symbolic, char *buf, size_t len) {
    buf[0] = '\0';
    if (t->kind != AMP_TYPE_TENSOR || t->dtype == AMP_DT_UNDEFINED) return;
    snprintf(buf, len, "%s", amp_dtype_short_name(t->dtype));
    if (t->rank < 0) return;
    char shape[MAX_SHAPE * 2 + 8];
    size_t k = 0;
    shape[k++] = '[';
    for (int i = 0; i < t->rank && k < sizeof shape; i++) {
        const AmpDim *d = &t->dims[i];
        int w;
        const char *sep = i ? "," : "";
        if (d->value >= 0)
            w = snprintf(shape + k, sizeof shape - k, "%s%lld", sep, (long long)d->value);
        else if (!symbolic)
            return;
        else
            w = snprintf(shape + k, sizeof shape - k, "%s%s", sep, d->param && *d->param ? d->param : "?");
        if (w < 0 || (size_t)w >= sizeof shape - k) return;
        k += (size_t)w;
    }
    if (k + 1 >= sizeof shape || k + 1 > (symbolic ? 2 * MAX_SHAPE : MAX_SHAPE)) return;
    shape[k++] = ']';
    shape[k] = '\0';
    size_t used = strlen(buf);
    snprintf(buf + used, len - used, "%s", shape);
}

static void indent(FILE *f, int depth) {
    for (int i = 0; i < depth; i++) fputs("  ", f);
}

/* ---- names of things --------------------------------------------------------------- */

/* A key for g unique in the model, from where it hangs: "m" the main graph, "t3a"/"t3i"
 * training_info[3]'s algorithm/initialization, "b17_2" the graph in attribute 2 of node
 * 17, "b17_2_0" graph 0 of a GRAPHS attribute; "x" when it hangs nowhere. */
static void graph_key(const AmpModel *m, const AmpGraph *g, char *buf, size_t len) {
    if (g == m->graph) {
        snprintf(buf, len, "m");
        return;
    }
    for (size_t i = 0; i < m->n_training; i++) {
        if (m->training[i].algorithm == g) {
            snprintf(buf, len, "t%zua", i);
            return;
        }
        if (m->training[i].initialization == g) {
            snprintf(buf, len, "t%zui", i);
            return;
        }
    }
    const AmpNode *o = g->owner;
    for (const AmpNode *n = g->parent && !o ? g->parent->first : NULL; n && !o; n = n->next)
        for (size_t i = 0; i < n->n_attrs && !o; i++) { /* a body built without its owner set */
            if (n->attrs[i].g == g) o = n;
            for (size_t k = 0; k < n->attrs[i].n_graphs && !o; k++)
                if (n->attrs[i].graphs[k] == g) o = n;
        }
    for (size_t i = 0; o && i < o->n_attrs; i++) {
        const AmpAttr *a = &o->attrs[i];
        if (a->g == g) {
            snprintf(buf, len, "b%u_%zu", o->id, i);
            return;
        }
        for (size_t k = 0; k < a->n_graphs; k++)
            if (a->graphs[k] == g) {
                snprintf(buf, len, "b%u_%zu_%zu", o->id, i, k);
                return;
            }
    }
    snprintf(buf, len, "x");
}

static uint32_t rep_of(const Dot *d, const AmpNode *n) {
    return d->rep && n->id < d->n_ids ? d->rep[n->id] : n->id;
}

static bool is_const(const AmpValue *v) {
    return (v->flags & AMP_VALUE_INITIALIZER) && !(v->flags & AMP_VALUE_INPUT);
}

/* A value with nothing to define it (verifier error, or left so by a pass), drawn so
 * its uses still show. */
static bool is_orphan(const AmpValue *v) {
    return !v->producer && !(v->flags & (AMP_VALUE_INPUT | AMP_VALUE_INITIALIZER)) &&
           (v->n_uses > 0 || (v->flags & AMP_VALUE_OUTPUT));
}

/* The DOT id of what draws v; false when nothing does (a hidden initializer). */
static bool source_id(const Dot *d, const AmpValue *v, char *buf, size_t len) {
    if (v->producer) {
        snprintf(buf, len, "n%u", rep_of(d, v->producer));
        return true;
    }
    if (is_const(v) && !d->opt.initializers) return false;
    if (!v->graph) return false;
    char key[KEY_LEN];
    graph_key(d->m, v->graph, key, sizeof key);
    snprintf(buf, len, "v%s_%u", key, v->id);
    return true;
}

/* ---- collapse -------------------------------------------------------------------- */

static bool has_subgraph(const AmpNode *n) {
    for (size_t i = 0; i < n->n_attrs; i++)
        if (n->attrs[i].g || n->attrs[i].n_graphs) return true;
    return false;
}

/* The node a chains into (dot.h, AmpDotOptions.collapse), or NULL. */
static const AmpNode *chain_next(const AmpNode *a) {
    if (has_subgraph(a)) return NULL;
    const AmpValue *o = NULL;
    for (int i = 0; i < a->n_outputs; i++) {
        if (!a->outputs[i]) continue;
        if (o) return NULL;
        o = a->outputs[i];
    }
    if (!o || (o->flags & AMP_VALUE_OUTPUT) || o->n_uses != 1) return NULL;
    const AmpNode *b = o->uses[0].node;
    if (!b || b->graph != a->graph || has_subgraph(b)) return NULL;
    for (int i = 0; i < b->n_inputs; i++)
        if (b->inputs[i] && b->inputs[i] != o && !is_const(b->inputs[i])) return NULL;
    if (amp_node_precision(a) != amp_node_precision(b)) return NULL;
    return amp_node_group(a) == amp_node_group(b) ? b : NULL;
}

typedef void (*GraphFn)(Dot *d, const AmpGraph *g, int step);

/* Calls fn on g and every graph below it, in file order. */
static void each_graph(Dot *d, const AmpGraph *g, GraphFn fn, int step) {
    if (!g) return;
    fn(d, g, step);
    for (const AmpNode *n = g->first; n; n = n->next)
        for (size_t i = 0; i < n->n_attrs; i++) {
            const AmpAttr *a = &n->attrs[i];
            each_graph(d, a->g, fn, step);
            for (size_t k = 0; k < a->n_graphs; k++) each_graph(d, a->graphs[k], fn, step);
        }
}

static void each_model_graph(Dot *d, GraphFn fn, int step) {
    each_graph(d, d->m->graph, fn, step);
    for (size_t i = 0; i < d->m->n_training; i++) {
        each_graph(d, d->m->training[i].initialization, fn, step);
        each_graph(d, d->m->training[i].algorithm, fn, step);
    }
}

enum { NO_REP = UINT32_MAX, HAS_PRED = UINT32_MAX - 1 };

/* Step 0 links each node to the next of its chain and marks the second and later;
 * step 1 gives every chain its head; step 2 unties pure cycles (malformed graphs). */
static void link_graph(Dot *d, const AmpGraph *g, int step) {
    for (const AmpNode *n = g->first; n; n = n->next) {
        if (n->id >= d->n_ids) continue;
        if (step == 0) {
            const AmpNode *b = chain_next(n);
            if (b && b->id < d->n_ids && d->rep[b->id] != HAS_PRED) {
                d->succ[n->id] = b;
                d->rep[b->id] = HAS_PRED;
            }
        } else if (step == 1 && d->rep[n->id] == NO_REP) {
            for (const AmpNode *x = n; x; x = d->succ[x->id]) d->rep[x->id] = n->id;
        } else if (step == 2 && d->rep[n->id] == HAS_PRED) {
            d->rep[n->id] = n->id;
            d->succ[n->id] = NULL;
        }
    }
}

static void collapse_setup(Dot *d) {
    size_t n = d->m->next_node_id;
    if (!d->opt.collapse || n == 0 || n >= HAS_PRED) return;
    d->succ = calloc(n, sizeof *d->succ);
    d->rep = malloc(n * sizeof *d->rep);
    if (!d->succ || !d->rep) {
        free(d->succ);
        free(d->rep);
        d->succ = NULL;
        d->rep = NULL;
        fputs("  // --dot-collapse skipped: out of memory\n", d->f);
        return;
    }
    d->n_ids = n;
    for (size_t i = 0; i < n; i++) d->rep[i] = NO_REP;
    for (int step = 0; step < 3; step++) each_model_graph(d, link_graph, step);
}

/* ---- nodes ----------------------------------------------------------------------- */

static void put_node(Dot *d, const AmpNode *n, int depth) {
    FILE *f = d->f;
    if (rep_of(d, n) != n->id) return; /* drawn by its chain's head */
    AmpPrecision p = amp_node_precision(n);
    const AmpNode *next = d->succ && n->id < d->n_ids ? d->succ[n->id] : NULL;
    indent(f, depth);
    fprintf(f, "n%u [", n->id);
    if (p == AMP_PREC_CAST) fputs("shape=cds, style=filled, ", f);
    else if (has_subgraph(n)) fputs("shape=box3d, style=filled, ", f);
    if (next) fputs("peripheries=2, ", f);
    fprintf(f, "fillcolor=\"%s\", tooltip=\"%s\", label=\"", FILL[p], amp_precision_name(p));
    if (next) {
        size_t k = 0;
        const AmpNode *last = n;
        for (const AmpNode *x = n; x; x = d->succ[x->id]) k++, last = x;
        fprintf(f, "%zu nodes: ", k);
        size_t i = 0;
        for (const AmpNode *x = n; x; x = d->succ[x->id], i++) {
            if (k > CHAIN_OPS && i >= CHAIN_OPS / 2 && i + 2 < k) {
                if (i == CHAIN_OPS / 2) fputs(" " ARROW " " ELLIPSIS, f);
                continue;
            }
            if (i) fputs(" " ARROW " ", f);
            put_op(f, x);
        }
        fputs("\\n", f);
        put_esc(f, n->name && *n->name ? n->name : "?", MAX_NAME);
        fputs(" " ELLIPSIS " ", f);
        put_esc(f, last->name && *last->name ? last->name : "?", MAX_NAME);
    } else {
        put_op(f, n);
        int from, to;
        if (amp_cast_dtypes(n, &from, &to))
            fprintf(f, " %s" ARROW "%s", amp_dtype_short_name(from), amp_dtype_short_name(to));
        if (n->name && *n->name) {
            fputs("\\n", f);
            put_esc(f, n->name, MAX_NAME);
        }
    }
    fputs("\"];\n", f);
}

/* A small node for a graph input, initializer, orphan value or graph output. */
static void put_value_node(Dot *d, const char *id, const AmpValue *v, const char *shape,
                           const char *extra, int depth) {
    char type[128];
    type_text(&v->type, true, type, sizeof type);
    indent(d->f, depth);
    fprintf(d->f, "%s [shape=%s, style=filled, fillcolor=white, fontsize=9, %slabel=\"", id, shape,
            extra);
    put_esc(d->f, v->name, MAX_NAME);
    if (type[0]) fprintf(d->f, "\\n%s", type);
    fputs("\"];\n", d->f);
}

static void put_cluster_open(Dot *d, const char *key, const char *style, int depth) {
    indent(d->f, depth);
    fprintf(d->f, "subgraph cluster_%s {\n", key);
    indent(d->f, depth + 1);
    fprintf(d->f, "%s;\n", style);
    indent(d->f, depth + 1);
    fputs("label=\"", d->f);
}

static void put_graph(Dot *d, const AmpGraph *g, int depth);

/* The bodies of n as clusters labelled "If 'name' · then_branch". */
static void put_bodies(Dot *d, const AmpNode *n, int depth) {
    char key[KEY_LEN];
    for (size_t i = 0; i < n->n_attrs; i++) {
        const AmpAttr *a = &n->attrs[i];
        for (size_t k = 0; k < (a->g ? 1 : a->n_graphs); k++) {
            const AmpGraph *body = a->g ? a->g : a->graphs[k];
            if (!body) continue;
            graph_key(d->m, body, key, sizeof key);
            put_cluster_open(d, key, "style=\"rounded,dashed\"; color=\"#777777\"", depth);
            put_op(d->f, n);
            if (n->name && *n->name) {
                fputs(" '", d->f);
                put_esc(d->f, n->name, MAX_NAME);
                fputc('\'', d->f);
            }
            fputs(" \xC2\xB7 ", d->f);
            put_esc(d->f, a->name ? a->name : "?", MAX_NAME);
            if (!a->g) fprintf(d->f, "[%zu]", k);
            fputs("\";\n", d->f);
            put_graph(d, body, depth + 1);
            indent(d->f, depth);
            fputs("}\n", d->f);
        }
    }
}

/* g's value nodes, nodes (grouped ones in a cluster per group) and bodies. */
static void put_graph(Dot *d, const AmpGraph *g, int depth) {
    char key[KEY_LEN], id[KEY_LEN + 32];
    graph_key(d->m, g, key, sizeof key);
    for (size_t i = 0; i < g->inputs.n; i++) {
        const AmpValue *v = g->inputs.items[i].value;
        if (!v) continue;
        snprintf(id, sizeof id, "v%s_%u", key, v->id);
        put_value_node(d, id, v, "invhouse", "", depth);
    }
    for (size_t i = 0; i < g->n_values; i++) {
        const AmpValue *v = g->values[i];
        if (!v || v->graph != g || (v->flags & AMP_VALUE_INPUT)) continue;
        snprintf(id, sizeof id, "v%s_%u", key, v->id);
        if (is_const(v) && d->opt.initializers) put_value_node(d, id, v, "note", "", depth);
        else if (is_orphan(v))
            put_value_node(d, id, v, "ellipse", "color=red, style=\"filled,dashed\", ", depth);
    }
    for (const AmpNode *n = g->first; n; n = n->next)
        if (amp_node_group(n) < 0) put_node(d, n, depth);
    for (size_t k = 0; k < amp_node_group_count(); k++) {
        bool open = false;
        for (const AmpNode *n = g->first; n; n = n->next) {
            if (amp_node_group(n) != (int)k) continue;
            if (!open) {
                char gk[KEY_LEN + 32];
                snprintf(gk, sizeof gk, "%s_group%zu", key, k);
                put_cluster_open(d, gk, "style=\"rounded,filled\"; fillcolor=\"#f2f2f2\"", depth);
                put_esc(d->f, amp_node_group_at(k)->label, MAX_NAME);
                fputs("\";\n", d->f);
                open = true;
            }
            put_node(d, n, depth + 1);
        }
        if (open) {
            indent(d->f, depth);
            fputs("}\n", d->f);
        }
    }
    for (size_t i = 0; i < g->outputs.n; i++) {
        const AmpValue *v = g->outputs.items[i].value;
        if (!v) continue;
        snprintf(id, sizeof id, "o%s_%zu", key, i);
        put_value_node(d, id, v, "house", "", depth);
    }
    for (const AmpNode *n = g->first; n; n = n->next) put_bodies(d, n, depth);
}

/* ---- edges ----------------------------------------------------------------------- */

static void put_edge(Dot *d, const char *from, const char *to, const AmpValue *v) {
    char type[128];
    type_text(&v->type, false, type, sizeof type);
    int dt = v->type.kind == AMP_TYPE_TENSOR ? v->type.dtype : AMP_DT_UNDEFINED;
    bool is16 = dt == AMP_DT_FLOAT16 || dt == AMP_DT_BFLOAT16;
    const char *color = is16 ? EDGE_16 : dt == AMP_DT_FLOAT ? EDGE_32 : EDGE_OTHER;
    fprintf(d->f, "  %s -> %s [color=\"%s\"", from, to, color);
    if (is16) fputs(", penwidth=1.6", d->f);
    if (type[0]) fprintf(d->f, ", label=\"%s\"", type);
    fputs("];\n", d->f);
}

static void edges_graph(Dot *d, const AmpGraph *g, int step) {
    (void)step;
    char key[KEY_LEN], from[KEY_LEN + 32], to[KEY_LEN + 32];
    graph_key(d->m, g, key, sizeof key);
    for (const AmpNode *n = g->first; n; n = n->next) {
        snprintf(to, sizeof to, "n%u", rep_of(d, n));
        for (int i = 0; i < n->n_inputs; i++) {
            const AmpValue *v = n->inputs[i];
            if (!v) continue;
            const AmpNode *p = v->producer;
            if (p && d->succ && p->id < d->n_ids && d->succ[p->id] == n) continue; /* in a chain */
            if (source_id(d, v, from, sizeof from)) put_edge(d, from, to, v);
        }
    }
    for (size_t i = 0; i < g->outputs.n; i++) {
        const AmpValue *v = g->outputs.items[i].value;
        if (!v) continue;
        snprintf(to, sizeof to, "o%s_%zu", key, i);
        if (source_id(d, v, from, sizeof from)) put_edge(d, from, to, v);
        if (g->owner)
            fprintf(d->f, "  %s -> n%u [style=dashed, color=\"#999999\", arrowhead=empty];\n", to,
                    g->owner->id);
    }
    for (size_t i = 0; g->owner && i < g->inputs.n; i++) {
        const AmpValue *v = g->inputs.items[i].value;
        if (v)
            fprintf(d->f,
                    "  n%u -> v%s_%u [style=dashed, color=\"#999999\", arrowhead=empty, "
                    "constraint=false];\n",
                    g->owner->id, key, v->id);
    }
}

/* ---- the model ------------------------------------------------------------------- */

static void put_legend(Dot *d) {
    FILE *f = d->f;
    fputs("  subgraph cluster_legend {\n"
          "    label=\"legend\"; style=rounded; color=\"#bbbbbb\";\n"
          "    { rank=same;\n",
          f);
    static const AmpPrecision order[] = {AMP_PREC_FP32, AMP_PREC_FP16, AMP_PREC_BF16,
                                         AMP_PREC_NONE};
    static const char *const text[] = {"fp32", "fp16", "bf16", "no float data"};
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
        fprintf(f, "      legend_%s [fillcolor=\"%s\", label=\"%s\"];\n",
                amp_precision_name(order[i]), FILL[order[i]], text[i]);
    fprintf(f, "      legend_cast [shape=cds, style=filled, fillcolor=\"%s\", label=\"Cast\"];\n",
            FILL[AMP_PREC_CAST]);
    static const char *const small[][2] = {
        {"in", "shape=invhouse"}, {"out", "shape=house"}, {"init", "shape=note"}};
    static const char *const small_text[] = {"graph input", "graph output", "initializer"};
    for (int i = 0; i < (d->opt.initializers ? 3 : 2); i++)
        fprintf(f, "      legend_%s [%s, style=filled, fillcolor=white, fontsize=9, label=\"%s\"];\n",
                small[i][0], small[i][1], small_text[i]);
    if (d->opt.collapse)
        fputs("      legend_chain [peripheries=2, fillcolor=white, label=\"collapsed chain\"];\n", f);
    /* Invisible edges keep the entries in this order, left to right. */
    fputs("      legend_fp32 -> legend_fp16 -> legend_bf16 -> legend_none -> legend_cast -> legend_in "
          "-> legend_out",
          f);
    if (d->opt.initializers) fputs(" -> legend_init", f);
    if (d->opt.collapse) fputs(" -> legend_chain", f);
    fputs(" [style=invis];\n    }\n  }\n", f);
}

static void put_root(Dot *d) {
    FILE *f = d->f;
    const AmpModel *m = d->m;
    fputs("digraph ampc {\n"
          "  graph [fontname=\"Helvetica\", fontsize=11, rankdir=TB, newrank=true];\n"
          "  node [fontname=\"Helvetica\", fontsize=10, shape=box, style=\"rounded,filled\", "
          "color=\"#555555\", fillcolor=\"#e0e0e0\"];\n"
          "  edge [fontname=\"Helvetica\", fontsize=8, fontcolor=\"#555555\"];\n",
          f);
    collapse_setup(d);
    if (!d->opt.no_legend) put_legend(d);
    if (m->graph) put_graph(d, m->graph, 1);
    char key[KEY_LEN];
    for (size_t i = 0; i < m->n_training; i++) {
        const AmpTrainingInfo *ti = &m->training[i];
        const AmpGraph *gs[2] = {ti->initialization, ti->algorithm};
        for (int k = 0; k < 2; k++) {
            if (!gs[k]) continue;
            snprintf(key, sizeof key, "t%zu%c", i, k ? 'a' : 'i');
            put_cluster_open(d, key, "style=rounded; color=\"#3060a0\"", 1);
            fprintf(f, "training_info[%zu] %s\";\n", i, k ? "algorithm" : "initialization");
            put_graph(d, gs[k], 2);
            fputs("  }\n", f);
        }
    }
    each_model_graph(d, edges_graph, 0);
    fputs("  label=\"", f);
    if (m->graph && m->graph->name && *m->graph->name) {
        fputs("graph '", f);
        put_esc(f, m->graph->name, MAX_NAME);
        fputs("'", f);
    } else {
        fputs("main graph", f);
    }
    fputs("\"; labelloc=t;\n}\n", f);
}

void amp_dot_model(FILE *f, const AmpModel *m, const AmpDotOptions *opt) {
    Dot d = {.f = f, .m = m};
    if (opt) d.opt = *opt;
    put_root(&d);
    free(d.succ);
    free(d.rep);
}

typedef struct DotJob {
    const AmpModel *m;
    const AmpDotOptions *opt;
} DotJob;

static bool dot_write(void *ctx, FILE *f) {
    const DotJob *j = ctx;
    amp_dot_model(f, j->m, j->opt);
    return !ferror(f);
}

AmpCode amp_dot_model_file(const char *path, const AmpModel *m, const AmpDotOptions *opt, AmpStatus *st) {
    DotJob j = {m, opt};
    return amp_output_write(path, dot_write, &j, st);
}
