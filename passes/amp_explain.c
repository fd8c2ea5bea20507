/* Why each node has its precision: `--explain NODE` prints the chain of rules that set a
 * node's paint (its op's list and where that came from, user overrides, training rules,
 * the neighbour a spread came from, recursively), and AMP_LOG_PATH's paint buckets list
 * the op lists in force and the nodes by paint. Reads only the pass's side table. */
#include <stdio.h>
#include <string.h>

#include "passes/amp_impl.h"
#include "passes/fuse_impl.h"

static const char *node_name(const AmpNode *n, char *buf, size_t len) {
    if (n->name && *n->name)
        snprintf(buf, len, "'%s' (%s)", n->name, n->op_type ? n->op_type : "?");
    else
        snprintf(buf, len, "#%lu (%s)", (unsigned long)n->id, n->op_type ? n->op_type : "?");
    return buf;
}

const char *amp_inelig_text(const AmpRun *r, const AmpNode *n, AmpInelig why, char *buf, size_t len) {
    const char *dt = amp_dtype_name(r->dt);
    switch (why) {
    case AMP_ELIGIBLE: snprintf(buf, len, "can compute in %s", dt); break;
    case AMP_INELIG_CLASS: snprintf(buf, len, "an op in no list is never converted"); break;
    case AMP_INELIG_NO_SLOTS: snprintf(buf, len, "the op table marks no float data input"); break;
    case AMP_INELIG_NO_F32: snprintf(buf, len, "no float data input is float32"); break;
    case AMP_INELIG_TYPE: snprintf(buf, len, "a float data input is not float32 (only float32 changes)"); break;
    case AMP_INELIG_UNKNOWN: snprintf(buf, len, "a float data input has no known type"); break;
    case AMP_INELIG_OPSET:
        snprintf(buf, len, "%s takes %s only from ai.onnx opset %d; the model imports %lld", n->op_type, dt,
                 r->min_opset[n->op], (long long)amp_model_opset(r->m, ""));
        break;
    case AMP_INELIG_CAST_OPSET:
        snprintf(buf, len, "Cast to bfloat16 needs opset 13; the model imports %lld",
                 (long long)amp_model_opset(r->m, ""));
        break;
    }
    return buf;
}

/* "MatMul is in the allow list (default for float16)", with the edits and level. */
static void list_line(const AmpRun *r, const AmpNode *n, FILE *f, const char *pad) {
    if (n->op == AMP_OP_UNKNOWN) {
        fprintf(f, "%s%s is not in the op table: never converted, its inputs keep their types\n", pad,
                n->op_type ? n->op_type : "?");
        return;
    }
    const AmpOpInfo *info = amp_op_info(n->op);
    AmpOpClass dflt = r->dt == AMP_DT_BFLOAT16 ? info->bf16_class : info->fp16_class;
    AmpOpClass now = r->cls[n->op];
    const char *how = "default";
    for (size_t i = 0; i < r->opt->n_list_edits; i++) {
        const AmpListEdit *e = &r->opt->list_edits[i];
        if (e->op != n->op) continue;
        if (!e->remove) how = "added by a list edit (--allow ... or AMP_..LIST_ADD)";
        else if (e->list == now || now == AMP_CLASS_NEVER) how = "removed by a list edit (AMP_..LIST_REMOVE)";
    }
    if (r->opt->level != AMP_LEVEL_DEFAULT && now != dflt && strcmp(how, "default") == 0) how = "the level";
    if (now == AMP_CLASS_NEVER && dflt == AMP_CLASS_NEVER)
        fprintf(f, "%s%s is in no list (%s): never converted\n", pad, n->op_type, info->doc);
    else if (now == AMP_CLASS_NEVER)
        fprintf(f, "%s%s is in no list: %s (default: %s)\n", pad, n->op_type, how, amp_op_class_name(dflt));
    else if (strcmp(how, "default") == 0)
        fprintf(f, "%s%s is in the %s list (the default for %s: %s)\n", pad, n->op_type, amp_op_class_name(now),
                amp_dtype_name(r->dt), info->doc);
    else
        fprintf(f, "%s%s is in the %s list: %s (default: %s)\n", pad, n->op_type, amp_op_class_name(now), how,
                amp_op_class_name(dflt));
    if (r->opt->level != AMP_LEVEL_DEFAULT)
        fprintf(f, "%s  (level %s)\n", pad, amp_level_name(r->opt->level));
}

static void paint_line(const AmpRun *r, const AmpNodeInfo *x, FILE *f, const char *pad) {
    char a[300];
    const char *c = amp_op_class_name((AmpOpClass)x->cls);
    switch ((AmpWhy)x->why) {
    case AMP_WHY_NONE:
        if (x->inelig != AMP_ELIGIBLE) {
            fprintf(f, "%snot painted: %s\n", pad, amp_inelig_text(r, x->node, (AmpInelig)x->inelig, a, sizeof a));
        } else
            fprintf(f, "%snot painted: a %s node that is not between 16-bit nodes stays float32\n", pad, c);
        break;
    case AMP_WHY_LIST:
        fprintf(f, "%spainted %s: an op of the %s list\n", pad, x->paint == AMP_PAINT_ALLOW ? "allow" : "deny", c);
        break;
    case AMP_WHY_KEEP_FP32:
        fprintf(f, "%spainted deny: --keep-fp32 '%s' matches its name (user override)\n", pad, x->detail);
        break;
    case AMP_WHY_LOSS:
        fprintf(f, "%spainted deny: training rule: the loss subgraph (the op computing '%s' and everything "
                   "downstream of it) stays float32\n", pad, x->detail);
        break;
    case AMP_WHY_OPTIMIZER:
        fprintf(f, "%spainted deny: training rule: optimizer ops keep float32 master weights and state\n", pad);
        break;
    case AMP_WHY_UPDATE:
        fprintf(f, "%spainted deny: training rule: it produces '%s', which training_info binds to a weight "
                   "or optimizer state\n", pad, x->detail);
        break;
    case AMP_WHY_LOSS_SCALE:
        fprintf(f, "%spainted deny: training rule: loss scaling (unscaling, the gradient check, the scale "
                   "update) computes in float32\n", pad);
        break;
    case AMP_WHY_SEED:
        fprintf(f, "%spainted deny: training rule: it reads the backward seed '%s', so the loss's backward "
                   "starts in float32 (loss scaling makes the seed 2^16 and more, past float16's range)\n",
                pad, x->detail);
        break;
    case AMP_WHY_TABLE:
        fprintf(f, "%spainted allow: a lookup into a float32 weight table (embeddings) of an inference graph: the "
                   "table is stored in 16 bits and read a row at a time\n", pad);
        break;
    case AMP_WHY_RANGE:
        fprintf(f, "%spainted deny: it reads a value computed from %s, beyond %s's range (it would become "
                   "infinite), so it computes in float32\n", pad, x->detail, amp_dtype_name(r->dt));
        break;
    case AMP_WHY_INTEGERS:
        fprintf(f, "%spainted deny: it multiplies positions (a Range cast to float, or an arange constant: "
                   "rotary embeddings' angles); in %s an angle's error grows with the position (whole radians "
                   "by position 4096), so it computes in float32\n", pad, amp_dtype_name(r->dt));
        break;
    case AMP_WHY_CALIB:
        fprintf(f, "%spainted deny: %s, so it computes in float32 (--calibration)\n", pad, x->detail);
        break;
    case AMP_WHY_DENY_FWD:
        fprintf(f, "%spainted deny: deny spreads forward from %s through infer nodes and clear nodes upstream "
                   "of deny/infer nodes\n", pad, node_name(r->ni[x->from].node, a, sizeof a));
        break;
    case AMP_WHY_BETWEEN:
        fprintf(f, "%spainted allow: %s %s node both downstream of allow (reached from %s) and upstream of "
                   "allow\n", pad, x->cls == AMP_CLASS_INFER ? "an" : "a", c,
                x->down_from != AMP_NO_NODE ? node_name(r->ni[x->down_from].node, a, sizeof a) : "?");
        break;
    case AMP_WHY_CLEAR_PROP:
        fprintf(f, "%spainted allow: allow spreads through clear nodes, from %s\n", pad,
                node_name(r->ni[x->from].node, a, sizeof a));
        break;
    case AMP_WHY_STATS:
        fprintf(f, "%spainted deny: its decomposed LayerNorm was painted %s as one node, whose statistics and "
                   "division stay float32 (as LayerNormalization's stash_type keeps them): the 16-bit input is "
                   "cast once, the normalised value cast back\n",
                pad, amp_dtype_name(r->dt));
        break;
    }
}

enum { MAX_HOPS = 64 };

/* "'Sub' -> 'Mul' -> 'MatMul_W2'": the way from a node painted between allow nodes to the
 * allow node downstream of it (step 3's upstream walk, followed back). */
static void towards(const AmpRun *r, const AmpNodeInfo *x, FILE *f, const char *pad) {
    char nm[300];
    fprintf(f, "%supstream of allow: it feeds ", pad);
    int hops = 0;
    uint32_t j = x->from;
    while (j != AMP_NO_NODE && hops++ < MAX_HOPS) {
        const AmpNodeInfo *y = &r->ni[j];
        fprintf(f, "%s%s", hops > 1 ? " -> " : "", node_name(y->node, nm, sizeof nm));
        if (y->why != AMP_WHY_BETWEEN) break;
        j = y->from;
    }
    fprintf(f, "%s\n", hops > MAX_HOPS ? " ..." : "");
}

/* One node's lines; returns the neighbour whose own explanation comes next (the way
 * back to the rule that started the spread), or AMP_NO_NODE. */
static uint32_t describe(const AmpRun *r, uint32_t i, FILE *f, bool first) {
    const AmpNodeInfo *x = &r->ni[i];
    char nm[300];
    const char *prec = x->paint == AMP_PAINT_ALLOW ? amp_dtype_name(r->dt) : "keeps its types";
    const char *pad = first ? "  " : "    ";
    if (first) {
        const AmpGraph *g = x->node->graph;
        fprintf(f, "node %s in graph '%s': %s\n", node_name(x->node, nm, sizeof nm),
                g == r->m->graph ? "main" : g->name && *g->name ? g->name : "(subgraph)", prec);
    } else {
        fprintf(f, "  because of %s: %s\n", node_name(x->node, nm, sizeof nm), prec);
    }
    list_line(r, x->node, f, pad);
    if (x->group) /* amp_color.c's group_rule */
        fprintf(f, "%s  here %s as part of a decomposed %s (the model's opset %lld has no such op): the "
                   "group is coloured as one node of that op\n", pad, amp_op_class_name((AmpOpClass)x->cls),
                amp_fuse_kind_name((AmpFuseKind)x->group), (long long)amp_model_opset(r->m, ""));
    const char *doc = x->node->doc_string;
    if (doc && strncmp(doc, AMP_FUSE_DOC, strlen(AMP_FUSE_DOC)) == 0)
        fprintf(f, "%s%.*s (a decomposed %s found by the fuse_norm pass)\n", pad, (int)strcspn(doc, ":"), doc,
                x->node->op_type);
    if (x->inelig != AMP_ELIGIBLE && x->paint == AMP_PAINT_DENY)
        fprintf(f, "%s(it could not compute in %s anyway: %s)\n", pad, amp_dtype_name(r->dt),
                amp_inelig_text(r, x->node, (AmpInelig)x->inelig, nm, sizeof nm));
    if (x->why == AMP_WHY_NONE && x->cls == AMP_CLASS_ALLOW && x->inelig != AMP_ELIGIBLE)
        fprintf(f, "%sallow dropped: the op cannot take %s here\n", pad, amp_dtype_name(r->dt));
    paint_line(r, x, f, pad);
    /* A Constant is a weight: the weights rule (amp_weights.c) may store its value in
     * 16 bits though the node itself is not painted. */
    const AmpValue *out = x->node->n_outputs == 1 ? x->node->outputs[0] : NULL;
    if (x->node->op == AMP_OP_Constant && !r->training && amp_is_f32(out) &&
        !(out->flags & (AMP_VALUE_INPUT | AMP_VALUE_OUTPUT)) && amp_read_only_by_16(r, x->node->graph, out))
        fprintf(f, "%sa weight that only %s nodes read: its value is stored in %s unless it is out of range "
                   "(inference graphs)\n", pad, amp_dtype_name(r->dt), amp_dtype_name(r->dt));
    switch ((AmpWhy)x->why) {
    case AMP_WHY_BETWEEN:
        towards(r, x, f, pad);
        return x->down_from;
    case AMP_WHY_DENY_FWD:
    case AMP_WHY_CLEAR_PROP: return x->from;
    default: return AMP_NO_NODE;
    }
}

static void chain(const AmpRun *r, uint32_t i, FILE *f) {
    int hops = 0;
    for (bool first = true; i != AMP_NO_NODE; first = false) {
        if (hops++ > MAX_HOPS) {
            fprintf(f, "  ... (the chain goes on)\n");
            return;
        }
        i = describe(r, i, f, first);
    }
}

/* Whether a node fused by fuse_norm replaced one named `name` (its doc_string lists them). */
static bool fused_from(const AmpNode *n, const char *name) {
    const char *doc = n->doc_string;
    if (!doc || strncmp(doc, AMP_FUSE_DOC, strlen(AMP_FUSE_DOC)) != 0 || !(doc = strstr(doc, ": "))) return false;
    size_t len = strlen(name);
    for (const char *p = doc + 2; *p;) {
        size_t k = strcspn(p, ",");
        if (k == len && strncmp(p, name, len) == 0) return true;
        p += k;
        while (*p == ',' || *p == ' ') p++;
    }
    return false;
}

void amp_explain(const AmpRun *r, const char *name, FILE *f) {
    bool found = false;
    for (size_t i = 0; i < r->n; i++) {
        const AmpNode *n = r->ni[i].node;
        if (n->name && strcmp(n->name, name) == 0) chain(r, (uint32_t)i, f), found = true;
    }
    for (size_t i = 0; !found && i < r->n; i++) {
        const AmpNode *n = r->ni[i].node;
        char nm[300];
        if (!fused_from(n, name)) continue;
        fprintf(f, "node '%s' was fused into %s:\n", name, node_name(n, nm, sizeof nm));
        chain(r, (uint32_t)i, f);
    }
    fflush(f);
}

void amp_paint_buckets(const AmpRun *r, FILE *f) {
    static const AmpOpClass lists[] = {AMP_CLASS_ALLOW, AMP_CLASS_INFER, AMP_CLASS_CLEAR, AMP_CLASS_DENY};
    fprintf(f, "# AMP paint buckets: precision %s, level %s, %zu list edits\n", amp_dtype_name(r->dt),
            amp_level_name(r->opt->level), r->opt->n_list_edits);
    fprintf(f, "\n# op lists in force\n");
    for (size_t k = 0; k < 4; k++) {
        fprintf(f, "%s:", amp_op_class_name(lists[k]));
        for (int op = 1; op < AMP_OP__COUNT; op++) {
            if (r->cls[op] != lists[k]) continue;
            const AmpOpInfo *info = amp_op_info((AmpOpId)op);
            fprintf(f, " %s%s%s", info->domain && *info->domain ? info->domain : "",
                    info->domain && *info->domain ? ":" : "", info->name);
        }
        fprintf(f, "\n");
    }
    /* Buckets: allow (16-bit), deny, and list members left in float32 (infer, clear). */
    static const char *const heads[] = {"allow (16-bit)", "deny (float32)", "infer (left float32)",
                                        "clear (left float32)"};
    for (int b = 0; b < 4; b++) {
        size_t count = 0;
        for (size_t i = 0; i < r->n; i++) {
            const AmpNodeInfo *x = &r->ni[i];
            int bucket = x->paint == AMP_PAINT_ALLOW ? 0 : x->paint == AMP_PAINT_DENY ? 1
                         : x->cls == AMP_CLASS_INFER ? 2 : x->cls == AMP_CLASS_CLEAR ? 3 : -1;
            count += bucket == b;
        }
        fprintf(f, "\n# %s: %zu nodes\n", heads[b], count);
        for (size_t i = 0; i < r->n; i++) {
            const AmpNodeInfo *x = &r->ni[i];
            int bucket = x->paint == AMP_PAINT_ALLOW ? 0 : x->paint == AMP_PAINT_DENY ? 1
                         : x->cls == AMP_CLASS_INFER ? 2 : x->cls == AMP_CLASS_CLEAR ? 3 : -1;
            if (bucket != b) continue;
            char nm[300];
            fprintf(f, "%s\n", node_name(x->node, nm, sizeof nm));
        }
    }
    fflush(f);
}
