/* amp_session_export (ampc.h): the session's model written as the inference model a user
 * deploys, with the session's current weights. A copy of the model (the session's own is
 * left as it runs) takes each state entry's current value as its initializer, the export
 * pass cuts it to the forward (passes/export.c), the ordinary conversion pipeline converts
 * it when a 16-bit precision is asked for, and the verifier checks it before the save. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"
#include "runtime/session_impl.h"

/* The tensor t takes the bytes of state buffer b (same dtype and shape: checked). */
static AmpCode take_state(AmpSession *s, AmpModel *m, AmpTensor *t, const AmpBuf *b, AmpStatus *st) {
    bool same = t->dtype == b->dtype && t->ndims == (size_t)b->rank;
    for (size_t d = 0; same && d < t->ndims; d++) same = t->dims[d] == b->dims[d];
    if (!same) return amp_fail(st, AMP_ERR_INTERNAL, "export: state '%s' does not match its initializer", t->name);
    size_t bytes = amp_buf_bytes(b);
    uint8_t *raw = amp_arena_alloc(&m->arena, bytes ? bytes : 1);
    if (!raw) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    AmpCode rc = bytes ? s->be->copy_out(s->be, raw, b->data, bytes, st) : AMP_OK;
    if (rc) return rc;
    /* The value is raw_data now, whatever fields (or external file) held it before. */
    t->has = AMP_TENSOR_HAS_DTYPE | AMP_TENSOR_HAS_RAW;
    t->raw = (AmpBytes){raw, bytes};
    t->narrow_from = NULL;
    t->n_float = t->n_int32 = t->n_int64 = t->n_double = t->n_uint64 = t->n_string = 0;
    t->data_location = 0;
    t->n_external = 0;
    t->external = NULL;
    t->is_external = false;
    return AMP_OK;
}

static const char *precision_name(int p) {
    return p == AMP_DT_FLOAT16 ? "converted to float16" : "converted to bfloat16";
}

AmpCode amp_session_export(AmpSession *s, const char *path, const AmpExportOptions *given, AmpStatus *st) {
    AmpExportOptions o;
    const AmpExportOptions *opt = &o;
    /* struct_size 0: the fields of version 0.1, which ended with summary_len. */
    AmpCode rc = amp_api_struct_in(given, given ? given->struct_size : 0,
                                   offsetof(AmpExportOptions, summary_len) + sizeof(size_t), &o, sizeof o,
                                   "AmpExportOptions", st);
    if (rc) return rc;
    if (!s) return amp_fail(st, AMP_ERR_USAGE, "export: no session");
    if (!path || !*path) return amp_fail(st, AMP_ERR_USAGE, "export: no path");
    int prec = opt->precision == AMP_DT_FLOAT ? 0 : opt->precision;
    if (prec != 0 && prec != AMP_DT_FLOAT16 && prec != AMP_DT_BFLOAT16)
        return amp_fail(st, AMP_ERR_USAGE, "export: precision %d: expected 0 or 1 (float32), 10 (float16) or 16 (bfloat16)",
                        opt->precision);
    if (opt->summary && opt->summary_len) opt->summary[0] = '\0';

    /* A copy of the model, by way of its bytes (external data inline). */
    uint8_t *bytes = NULL;
    size_t len = 0;
    AmpModel *m = NULL;
    rc = amp_model_save_bytes(s->m, &bytes, &len, st);
    if (!rc) rc = amp_model_load_bytes(bytes, len, NULL, NULL, &m, st);
    free(bytes);
    if (rc) return rc;

    /* The session's weights: every state entry that is a main-graph initializer (an
     * algorithm's own state, the optimizer's, goes with the algorithm). */
    for (size_t i = 0; !rc && i < s->n_state; i++) {
        const StateEntry *e = &s->state[i];
        if (e->value->graph != s->m->graph) continue;
        AmpValue *v = amp_graph_lookup(m->graph, e->name);
        if (!v || v->graph != m->graph || !v->initializer) {
            rc = amp_fail(st, AMP_ERR_INTERNAL, "export: state '%s' is no initializer of the model's copy", e->name);
            break;
        }
        rc = take_state(s, m, v->initializer, &e->buf, st);
    }

    AmpExportSummary sum;
    if (!rc) rc = amp_export_model(m, opt->loss, &sum, st);
    /* The weights written that are the session's state (trained, or loaded). */
    size_t n_weights = 0;
    for (size_t i = 0; !rc && i < s->n_state; i++) {
        AmpValue *v = amp_graph_lookup(m->graph, s->state[i].name);
        n_weights += v && v->graph == m->graph && v->initializer;
    }
    /* onnxruntime-training's models use LayerNormalization below opset 17 (its own
     * kernel, ONNX's from 17, the same arithmetic): raised to 17, the export is standard. */
    bool layer_norm = false;
    for (AmpNode *n = m->graph->first; !rc && n && !layer_norm; n = n->next)
        layer_norm = n->op == AMP_OP_LayerNormalization && amp_domain_is_default(n->domain);
    if (!rc && layer_norm && amp_model_opset(m, "") < 17) {
        AmpPassOptions po = {.opset_upgrade_to = 17};
        AmpPipelineOptions pl = {.pass = &po};
        rc = amp_run_pipeline(m, "infer,opset_upgrade", &pl, st);
    }
    if (!rc && prec) {
        AmpPassOptions po = {.precision = prec};
        AmpPipelineOptions pl = {.pass = &po};
        rc = amp_run_pipeline(m, amp_default_pipeline(), &pl, st);
        /* A forward the session held converted keeps float32 weights behind Casts. */
        if (!rc) rc = amp_export_fold_weight_casts(m, prec, NULL, st);
    }
    if (!rc) rc = amp_verify_model(m, st);
    if (rc && !strstr(st->msg, "export")) amp_status_prefix(st, "export: ");
    if (!rc) {
        AmpSaveOptions so = {.external = AMP_SAVE_EXTERNAL_AUTO, .external_min_bytes = 1024, .value_info = !opt->no_value_info};
        rc = amp_model_save_file(m, path, &so, st);
    }
    if (!rc && opt->summary && opt->summary_len) {
        snprintf(opt->summary, opt->summary_len,
                 "%s, %zu output%s (%s%s%s), %zu nodes, %zu initializers (%zu from the session's state); "
                 "removed %zu nodes, %zu outputs, %zu inputs, %zu initializers, %zu training_info%s%s",
                 prec ? precision_name(prec) : "no conversion", sum.n_outputs, sum.n_outputs == 1 ? "" : "s",
                 m->graph->outputs.n ? m->graph->outputs.items[0].value->name : "", sum.n_outputs > 1 ? ", ..." : "",
                 sum.scores ? ": the loss's scores" : "", m->graph->n_nodes, m->graph->n_initializers, n_weights, sum.nodes_removed,
                 sum.outputs_removed, sum.inputs_removed, sum.initializers_removed, sum.training_infos_removed,
                 sum.loss ? "; loss " : "", sum.loss ? sum.loss : "");
    }
    amp_model_free(m);
    return rc;
}
