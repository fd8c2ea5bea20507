/* The pass manager: the single list of passes, pipeline parsing, and the loop that runs
 * passes with the verifier between them and --dump-after (as in QBE: one straight list,
 * a verifier between passes, a dump after any of them). */
#include "passes/passes.h"

#include <stdlib.h>
#include <string.h>

/* Every pass, in one place. A new pass adds one row here and one file. */
static const AmpPass PASSES[] = {
    {"infer", "type and shape inference: fills every value's type it can", amp_pass_infer},
    {"dce", "dead code elimination: removes nodes whose outputs nothing uses", amp_pass_dce},
    {"gradient", "ONNX's Gradient op (ai.onnx.preview.training) expanded into backward nodes by ampc grad's rules "
                 "(the gradient of x named x_grad, the seed y_grad), in the main graph or a training algorithm; "
                 "a no-op without one", amp_pass_gradient},
    {"opset_upgrade", "raises the model's ai.onnx opset to the lowest at which every allow-list op "
                      "takes the 16-bit type (Conv: bf16 from 22), adapting the nodes whose op changed "
                      "on the way; a no-op when not needed, or with --opset-upgrade never",
     amp_pass_opset_upgrade},
    {"fuse_norm", "LayerNorm and GELU written out as their formula (exports before opsets 17 and 20) become one "
                  "LayerNormalization or Gelu node where the opset has it; below, the amp pass colours each "
                  "group as that op", amp_pass_fuse_norm},
    {"amp", "automatic mixed precision: paints nodes allow/deny from the op lists and rules, "
            "makes allow nodes 16-bit with one Cast per value and type, stores weights of "
            "inference graphs in 16 bits", amp_pass_amp},
    {"loss_scale", "loss scaling of training graphs (GradScaler as graph nodes): seed x scale, "
                   "gradients unscaled in fp32, amp_found_inf, updates gated on it, the dynamic scale "
                   "update bound by update_binding; inference graphs pass through", amp_pass_loss_scale},
    {"allreduce", "data parallel: the parameter gradients of a training graph made the mean over the job's ranks "
                  "(ai.ampc AllReduceMean nodes, before the loss-scaling check); a session of more than one rank "
                  "runs it at open; inference graphs pass through", amp_pass_allreduce},
    {"cast_cleanup", "removes lossless Cast round trips (fp16->fp32->fp16) and duplicate Casts",
     amp_pass_cast_cleanup},
    {"export", "a training model's inference model (ampc export): the main graph's forward cut to the "
               "outputs that are not the loss, gradients or loss-scaling state; training_info, the "
               "backward, unused inputs and initializers removed", amp_pass_export},
};
enum { N_PASSES = sizeof PASSES / sizeof PASSES[0] };

/* Longest pipeline accepted; anything longer is surely a mistake. */
enum { MAX_PIPELINE = 256 };

const AmpPass *amp_pass_find(const char *name) {
    for (size_t i = 0; name && i < N_PASSES; i++)
        if (strcmp(PASSES[i].name, name) == 0) return &PASSES[i];
    return NULL;
}

size_t amp_pass_count(void) {
    return N_PASSES;
}

const AmpPass *amp_pass_at(size_t i) {
    return i < N_PASSES ? &PASSES[i] : NULL;
}

const char *amp_default_pipeline(void) {
    return "gradient,infer,opset_upgrade,fuse_norm,amp,loss_scale,cast_cleanup";
}

static void known_names(char *buf, size_t len) {
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < N_PASSES && used < len; i++) {
        int k = snprintf(buf + used, len - used, "%s%s", i ? ", " : "", PASSES[i].name);
        if (k < 0) break;
        used += (size_t)k;
    }
}

AmpCode amp_pipeline_check_dump(const AmpPass *const *passes, size_t n, const char *dump_after, AmpStatus *st) {
    if (!dump_after) return AMP_OK;
    char names[512] = "";
    size_t used = 0;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(passes[i]->name, dump_after) == 0) return AMP_OK;
        int k = used < sizeof names ? snprintf(names + used, sizeof names - used, "%s%s", i ? "," : "", passes[i]->name) : 0;
        if (k > 0) used += (size_t)k;
    }
    if (!amp_pass_find(dump_after)) {
        known_names(names, sizeof names);
        return amp_fail(st, AMP_ERR_USAGE, "--dump-after: unknown pass '%s' (known passes: %s)", dump_after, names);
    }
    return amp_fail(st, AMP_ERR_USAGE, "--dump-after: pass '%s' is not in the pipeline '%s'", dump_after,
                    n ? names : "none");
}

AmpCode amp_run_passes(AmpModel *m, const AmpPass *const *passes, size_t n,
                       const AmpPipelineOptions *opt, AmpStatus *st) {
    static const AmpPipelineOptions defaults = {0};
    if (!opt) opt = &defaults;
    static const AmpPassOptions pass_defaults = {0};
    const AmpPassOptions *popt = opt->pass ? opt->pass : &pass_defaults;
    const char *dump = opt->dump_after && *opt->dump_after ? opt->dump_after : NULL;
    AmpCode rc = amp_pipeline_check_dump(passes, n, dump, st);
    if (rc) return rc;
    FILE *out = opt->dump_to ? opt->dump_to : stdout;
    uint32_t first_new = m->next_node_id; /* the nodes the passes make have ids from here */
    if (opt->verify_each && (rc = amp_verify_model(m, st))) {
        amp_status_prefix(st, "input model: ");
        return rc;
    }
    for (size_t i = 0; i < n; i++) {
        const AmpPass *p = passes[i];
        /* The opset upgrade keeps the types inferred unless it changed the graph; a fused
         * node's output keeps the type of the value it makes. */
        bool keeps_types = (p->run == amp_pass_opset_upgrade || p->run == amp_pass_fuse_norm) && m->types_inferred;
        rc = p->run(m, popt, st);
        m->types_inferred = !rc && (p->run == amp_pass_infer || (keeps_types && m->types_inferred));
        if (rc) {
            amp_fail(st, rc, "failed with no message");
            amp_status_prefix(st, "pass '%s': ", p->name);
            return rc;
        }
        if (opt->after_pass) opt->after_pass(opt->after_pass_ctx, p->name);
        /* Dump before verifying: a graph the pass broke is what one wants to see. */
        if (dump && strcmp(p->name, dump) == 0) {
            fprintf(out, "# after pass '%s'\n", p->name);
            amp_print_model(out, m);
            fflush(out);
        }
        if (opt->verify_each && amp_verify_model(m, st)) {
            /* The input verified, so the pass is at fault: an internal error. */
            m->types_inferred = false;
            if (st) st->code = AMP_ERR_INTERNAL;
            amp_status_prefix(st, "pass '%s' broke the graph: ", p->name);
            return AMP_ERR_INTERNAL;
        }
    }
    /* Outside a pipeline anyone may edit the graph: the flag would soon be stale. */
    m->types_inferred = false;
    /* Passes name their nodes after what they replace: two such names may meet (two
     * fused GELUs of one module scope). ONNX wants them unique; onnxruntime insists. */
    if (n && (rc = amp_model_unique_node_names(m, first_new, NULL, st)))
        amp_status_prefix(st, "pass '%s': ", passes[n - 1]->name);
    return rc;
}

AmpCode amp_pipeline_parse(const char *list, const AmpPass **passes, size_t cap, size_t *n, AmpStatus *st) {
    *n = 0;
    const char *p = list;
    while (*p == ' ' || *p == '\t') p++;
    if (!*p) return AMP_OK;
    for (;;) {
        /* One entry: [p, p + len), spaces around it trimmed. */
        while (*p == ' ' || *p == '\t') p++;
        size_t len = strcspn(p, ","), t = len;
        while (t && (p[t - 1] == ' ' || p[t - 1] == '\t')) t--;
        if (*n == 0 && !p[len] && t == 4 && strncmp(p, "none", 4) == 0) return AMP_OK;
        char known[512]; /* for the messages below: built only when one is given */
        if (!t) {
            known_names(known, sizeof known);
            return amp_fail(st, AMP_ERR_USAGE, "pass list '%s' has an empty entry (known passes: %s)", list, known);
        }
        char name[64];
        const AmpPass *q = NULL;
        if (t < sizeof name) {
            memcpy(name, p, t);
            name[t] = '\0';
            q = amp_pass_find(name);
        }
        if (!q) {
            known_names(known, sizeof known);
            return amp_fail(st, AMP_ERR_USAGE, "unknown pass '%.*s' (known passes: %s, or 'none')",
                            t > 64 ? 64 : (int)t, p, known);
        }
        if (*n == cap) return amp_fail(st, AMP_ERR_USAGE, "pass list has more than %zu entries", cap);
        passes[(*n)++] = q;
        if (!p[len]) return AMP_OK;
        p += len + 1;
    }
}

AmpCode amp_run_pipeline(AmpModel *m, const char *list, const AmpPipelineOptions *opt,
                         AmpStatus *st) {
    const AmpPass **passes = malloc(MAX_PIPELINE * sizeof *passes);
    if (!passes) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    size_t n = 0;
    AmpCode rc = amp_pipeline_parse(list ? list : amp_default_pipeline(), passes, MAX_PIPELINE, &n, st);
    if (!rc) rc = amp_run_passes(m, passes, n, opt, st);
    free(passes);
    return rc;
}
