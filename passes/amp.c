/* The "amp" pass: automatic mixed precision (docs/design.md, "The colouring lists and the
 * rules beside them"). It infers types, paints every node allow / deny from the op lists
 * (after the user's edits and level), the user's --keep-fp32 globs and the training rules,
 * then rewrites the graph: 16-bit nodes, one Cast per (value, type), weights stored in 16
 * bits for inference graphs. The painting is amp_color.c, the rewrite amp_cast.c and
 * amp_weights.c, the explanations amp_explain.c; this file holds the entry and the training
 * rules of the graph's structure (a node's own rule, which the painting's visit applies, is
 * amp_color.c's). */
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/precision.h"
#include "passes/amp_impl.h"
#include "passes/calib.h"
#include "passes/training.h"
#include "passes/options.h"

/* ---- training rules (docs/design.md, "The training-graph contract") --------------- */

static void force(AmpRun *r, AmpNode *n, AmpWhy why, const char *detail) {
    uint32_t i = amp_idx(n);
    if (i == AMP_NO_NODE || (r->ni[i].flags & AMP_NF_FORCED)) return;
    r->ni[i].flags |= AMP_NF_FORCED;
    r->ni[i].why = (unsigned char)why;
    r->ni[i].detail = detail;
}

/* The loss op and every node downstream of its values, in any graph. A Shape or Size of a
 * value reads only its shape (as ampc grad's ReduceMean backward reads Size(loss) for the
 * mean's count): the walk stops there, or the whole backward pass behind that count would
 * be "downstream of the loss" and stay float32. */
static AmpCode force_loss(AmpRun *r) {
    AmpNode *p = r->loss->producer;
    if (!p) return AMP_OK;
    uint32_t *stack = malloc(r->n * sizeof *stack + sizeof *stack);
    if (!stack) return amp_fail(r->st, AMP_ERR_INTERNAL, "amp: out of memory");
    size_t top = 0;
    force(r, p, AMP_WHY_LOSS, r->loss->name);
    stack[top++] = amp_idx(p);
    while (top) {
        const AmpNode *n = r->ni[stack[--top]].node;
        for (int o = 0; o < n->n_outputs; o++) {
            const AmpValue *v = n->outputs[o];
            for (size_t u = 0; v && u < v->n_uses; u++) {
                uint32_t j = amp_idx(v->uses[u].node);
                AmpOpId op = v->uses[u].node->op;
                if (j == AMP_NO_NODE || (r->ni[j].flags & AMP_NF_FORCED) || op == AMP_OP_Shape || op == AMP_OP_Size)
                    continue;
                force(r, v->uses[u].node, AMP_WHY_LOSS, r->loss->name);
                stack[top++] = j;
            }
        }
    }
    free(stack);
    return AMP_OK;
}

/* The readers of v, as seed readers; through the loss-scaling pass's own nodes (seed ->
 * Mul by the scale [-> Cast]: in a model converted before, those stand between the seed
 * and the nodes that read it), to their readers. `depth` bounds the walk. */
static void force_readers(AmpRun *r, const AmpValue *v, const char *seed, int depth) {
    for (size_t u = 0; v && u < v->n_uses; u++) {
        AmpNode *n = v->uses[u].node;
        if (amp_node_group(n) < 0 || depth >= 4) {
            force(r, n, AMP_WHY_SEED, seed);
            continue;
        }
        for (int o = 0; o < n->n_outputs; o++) force_readers(r, n->outputs[o], seed, depth + 1);
    }
}

/* The readers of the backward seed <loss>_grad begin the loss's backward: they stay
 * float32, as the loss does, since the loss-scaling pass multiplies the seed by the scale
 * (2^16 to start with: past float16's largest value, 65504). */
static AmpCode force_seed_readers(AmpRun *r) {
    AmpValue *seed;
    AmpCode rc = amp_find_seed(r->m, r->loss, &seed, r->st);
    if (!rc && seed) force_readers(r, seed, seed->name, 0);
    return rc;
}

static void force_bound(AmpRun *r, AmpGraph *g, const AmpStrPair *b, size_t n) {
    for (size_t k = 0; g && k < n; k++) {
        AmpValue *v = b[k].value ? amp_graph_lookup(g, b[k].value) : NULL;
        if (v && v->producer) force(r, v->producer, AMP_WHY_UPDATE, v->name);
    }
}

/* The rules of the graph's structure (amp_own_rule's were applied by amp_collect, in
 * amp_color.c, and come first: a node keeps the first rule that forced it). */
static AmpCode training_rules(AmpRun *r) {
    AmpModel *m = r->m;
    for (size_t i = 0; i < m->n_training; i++) {
        const AmpTrainingInfo *ti = &m->training[i];
        force_bound(r, ti->algorithm, ti->update_bindings, ti->n_update_bindings);
        force_bound(r, ti->initialization, ti->init_bindings, ti->n_init_bindings);
    }
    if (!r->training) return AMP_OK;
    AmpCode rc = amp_find_loss(m, r->opt->loss, &r->loss, r->st);
    if (rc || (rc = force_seed_readers(r))) return rc;
    return force_loss(r);
}

static void keep_fp32(AmpRun *r) {
    for (size_t k = 0; k < r->opt->n_keep_fp32; k++) {
        const char *glob = r->opt->keep_fp32[k];
        for (size_t i = 0; glob && i < r->n; i++) {
            AmpNode *n = r->ni[i].node;
            if (fnmatch(glob, n->name ? n->name : "", 0) == 0) force(r, n, AMP_WHY_KEEP_FP32, glob);
        }
    }
}

/* ---- the pass --------------------------------------------------------------------- */

/* Appends to line (k used) what keeps allow-list nodes fp32 other than the lists: an
 * opset too old for the type, a data type, --keep-fp32; with the share of GEMM/conv
 * FLOPs they hold and what changes it. */
static int kept_fp32_clause(const AmpRun *r, char *line, size_t len, int k) {
    enum { OPSET, DTYPE, KEEP, N_WHY };
    size_t count[N_WHY] = {0};
    double flops[N_WHY] = {0}, total = 0;
    const char *op[N_WHY] = {NULL};
    bool flops_known = true;
    for (size_t i = 0; i < r->n; i++) {
        const AmpNodeInfo *x = &r->ni[i];
        double f = 0;
        int got = amp_node_flops(x->node, &f);
        if (got > 0) total += f;
        if (x->cls != AMP_CLASS_ALLOW || x->paint == AMP_PAINT_ALLOW) continue;
        int w = x->inelig == AMP_INELIG_OPSET || x->inelig == AMP_INELIG_CAST_OPSET ? OPSET
                : x->inelig == AMP_INELIG_TYPE || x->inelig == AMP_INELIG_UNKNOWN   ? DTYPE
                : x->why == AMP_WHY_KEEP_FP32                                        ? KEEP
                                                                                     : N_WHY;
        if (w == N_WHY) continue;
        count[w]++;
        if (!op[w]) op[w] = x->node->op_type;
        if (got > 0) flops[w] += f;
        if (got < 0) flops_known = false;
    }
    static const char *const what[N_WHY] = {"", "their data is not float32 (or its type is unknown)",
                                            "--keep-fp32 keeps them"};
    for (int w = 0; w < N_WHY && k > 0 && (size_t)k < len; w++) {
        if (!count[w]) continue;
        char share[64] = "";
        if (total > 0 && flops_known) snprintf(share, sizeof share, " (%.1f%% of GEMM/conv FLOPs)", 100.0 * flops[w] / total);
        else snprintf(share, sizeof share, " (GEMM/conv FLOPs unknown: shapes not static)");
        char why[256];
        if (w == OPSET)
            snprintf(why, sizeof why, "opset %lld takes no %s for %s; %s%s", (long long)r->opset_default, r->dt_short, op[w],
                     r->opt->opset_upgrade == AMP_OPSET_UPGRADE_NEVER
                         ? amp_option_say("opset-upgrade", "auto", (char[192]){0}, 192)
                         : "the opset_upgrade pass did not raise it (see its message)",
                     r->opt->opset_upgrade == AMP_OPSET_UPGRADE_NEVER ? " converts them" : "");
        else
            snprintf(why, sizeof why, "%s", what[w]);
        k += snprintf(line + k, len - (size_t)k, "; %zu allow-list %s%s stay%s fp32: %s", count[w],
                      count[w] == 1 ? "node" : "nodes", share, count[w] == 1 ? "s" : "", why);
    }
    return k;
}

/* The counts are the model's after the rewrite, by --report's rule (amp_count_model):
 * a converted model's report says the same. */
static void summary(const AmpRun *r) {
    if (!r->opt->notify) return;
    AmpFloatCounts c;
    amp_count_model(r->m, &c);
    char line[1024];
    int k = snprintf(line, sizeof line, "amp: %s: %zu of %zu float nodes in 16 bits, %zu casts", amp_dtype_name(r->dt),
                     c.converted, c.float_nodes, c.casts);
    if (k > 0 && (size_t)k < sizeof line && !r->training)
        k += snprintf(line + k, sizeof line - (size_t)k, ", %zu weights stored in 16 bits", r->n_weights16);
    if (k > 0 && (size_t)k < sizeof line && r->n_weights_kept)
        k += snprintf(line + k, sizeof line - (size_t)k, " (%zu kept in float32: out of range)", r->n_weights_kept);
    if (k > 0 && (size_t)k < sizeof line && r->n_range)
        k += snprintf(line + k, sizeof line - (size_t)k, "; %zu node%s kept in float32 for values beyond %s's range "
                      "(from %s)", r->n_range, r->n_range == 1 ? "" : "s", amp_dtype_name(r->dt),
                      r->range_first ? r->range_first : "?");
    if (k > 0 && (size_t)k < sizeof line && r->n_ints)
        k += snprintf(line + k, sizeof line - (size_t)k, "; %zu product%s of positions (rotary angles) "
                      "kept in float32 (%s)", r->n_ints, r->n_ints == 1 ? "" : "s", r->ints_first);
    if (k > 0 && (size_t)k < sizeof line && r->n_calib)
        k += snprintf(line + k, sizeof line - (size_t)k, "; %zu node%s kept in float32 by measured ranges (first: %s)",
                      r->n_calib, r->n_calib == 1 ? "" : "s", r->calib_first ? r->calib_first : "?");
    if (k > 0 && (size_t)k < sizeof line && r->training && r->loss)
        k += snprintf(line + k, sizeof line - (size_t)k, "; training graph, loss '%s'", r->loss->name);
    k = kept_fp32_clause(r, line, sizeof line, k);
    r->opt->notify(r->opt->notify_ctx, line);
    if (r->training && r->opt->calib && r->dt == AMP_DT_FLOAT16)
        amp_calib_underflow(r->opt->calib, r->m, 8, r->opt->notify, r->opt->notify_ctx);
}

AmpCode amp_pass_amp(AmpModel *m, const AmpPassOptions *opt, AmpStatus *st) {
    static const AmpPassOptions defaults = {0};
    if (!opt) opt = &defaults;
    AmpRun r;
    memset(&r, 0, sizeof r);
    r.m = m;
    r.opt = opt;
    r.st = st;
    r.dt = opt->precision ? opt->precision : AMP_DT_FLOAT16;
    if (r.dt != AMP_DT_FLOAT16 && r.dt != AMP_DT_BFLOAT16)
        return amp_fail(st, AMP_ERR_USAGE, "amp: precision %s: expected float16 or bfloat16",
                        amp_dtype_name(r.dt));
    r.dt_short = r.dt == AMP_DT_FLOAT16 ? "fp16" : "bf16";
    AmpCode rc = amp_op_classes(r.dt, opt->list_edits, opt->n_list_edits, opt->level, r.cls, st);
    if (rc) return rc;
    amp_op_min_opsets_16(r.dt, r.min_opset);
    /* Colouring reads dtypes: make sure every one that can be known is (the pipeline's
     * "infer" pass, when it ran just before, has done it). */
    if (!m->types_inferred && (rc = amp_infer_model(m, st))) return rc;
    if ((rc = amp_collect(&r))) goto done;
    r.training = amp_is_training_graph(m, opt->loss);
    if ((rc = training_rules(&r))) goto done;
    keep_fp32(&r);
    if ((rc = amp_range_rule(&r, &r.n_range, &r.range_first))) goto done;
    if ((rc = amp_integers_rule(&r, &r.n_ints, &r.ints_first))) goto done;
    if ((rc = amp_calib_rule(&r, &r.n_calib, &r.calib_first))) goto done;
    if ((rc = amp_color(&r))) goto done;
    for (size_t i = 0; opt->explain_out && i < opt->n_explain_nodes; i++)
        if (opt->explain_nodes[i]) amp_explain(&r, opt->explain_nodes[i], opt->explain_out);
    if (opt->paint_out) amp_paint_buckets(&r, opt->paint_out);
    if ((rc = amp_rewrite(&r))) goto done;
    summary(&r);
done:
    amp_range_free(&r);
    free(r.ni);
    free(r.graphs);
    return rc;
}
