/* Sessions (ampc.h): open a model (AMP_AUTO rewrite, kernels chosen, state made resident,
 * training initialization run once), inference runs, and training steps: the main graph
 * and each training algorithm run as one graph, then the update bindings are applied. */
#include <stdlib.h>
#include <string.h>

#include "runtime/amp_auto.h"
#include "runtime/session_impl.h"

_Static_assert(AMP_TENSOR_MAX_RANK == AMP_MAX_RANK, "public and kernel rank limits differ");

/* The backend's copies out so far (0 where it counts none: the CPU). */
static size_t host_reads(AmpBackend *be) {
    AmpBackendStats bs;
    amp_backend_stats(be, &bs);
    return bs.host_reads;
}

size_t amp_tensor_view_bytes(const AmpTensorView *t) {
    if (!t || t->rank < 0 || t->rank > AMP_TENSOR_MAX_RANK) return 0;
    uint64_t n = 1;
    for (int i = 0; i < t->rank; i++) n *= t->dims[i] > 0 ? (uint64_t)t->dims[i] : 0;
    size_t bytes = 0;
    return amp_tensor_expected_bytes(t->dtype, n, &bytes) ? bytes : 0;
}

void amp_tensor_view_free(AmpTensorView *t) {
    if (!t) return;
    free(t->data);
    t->data = NULL;
}

bool amp_session_has_training_info(const AmpSession *s) {
    return s->n_alg > 0;
}

void amp_session_close(AmpSession *s) {
    if (!s) return;
    for (size_t k = 0; k < s->n_alg; k++) amp_exec_free(s->alg[k].exec);
    free(s->alg);
    amp_exec_free(s->main);
    amp_session_free_state(s);
    amp_session_free_io(s);
    amp_model_free(s->m);
    amp_backend_close(s->be); /* last: everything above gave its device memory back */
    free(s);
}

/* ---- open ------------------------------------------------------------------------------ */

static AmpValue *graph_output(const AmpGraph *g, const char *name) {
    for (size_t i = 0; i < g->outputs.n; i++)
        if (strcmp(g->outputs.items[i].value->name, name) == 0) return g->outputs.items[i].value;
    return NULL;
}

/* Whether value v's declared type is exactly the state's: dtype and every dim known. */
static bool declared_as(const AmpValue *v, const AmpBuf *state) {
    if (v->type.kind != AMP_TYPE_TENSOR || v->type.dtype != state->dtype || v->type.rank != state->rank) return false;
    for (int i = 0; i < state->rank; i++)
        if (v->type.dims[i].value != state->dims[i]) return false;
    return true;
}

/* Each update binding whose new value the algorithm can compute straight into the state
 * buffer it replaces does so (amp_exec_write_into): the step then applies it without a
 * copy (apply_updates finds the source is the destination). A step that fails leaves the
 * state as it was, so this is done only where no failure can come after such a write but
 * the kernels' own (out of memory): every update binding of the algorithm declared with
 * its state's exact type (apply_updates' checks cannot fail), and no timeout set. A value
 * bound to two keys, or state the session does not own (the model's own bytes), keeps
 * the copy. */
static void plan_in_place_updates(AmpSession *s) {
    if (s->timeout > 0) return;
    for (size_t k = 0; k < s->n_alg; k++) {
        const AmpTrainingInfo *ti = s->alg[k].ti;
        bool typed = true;
        for (size_t j = 0; j < ti->n_update_bindings && typed; j++) {
            StateEntry *e = amp_session_find_state(s, ti->update_bindings[j].key);
            AmpValue *v = graph_output(ti->algorithm, ti->update_bindings[j].value);
            typed = e && v && declared_as(v, &e->buf);
        }
        if (!typed) continue;
        for (size_t j = 0; j < ti->n_update_bindings; j++) {
            const AmpStrPair *b = &ti->update_bindings[j];
            StateEntry *e = amp_session_find_state(s, b->key);
            AmpValue *v = graph_output(ti->algorithm, b->value);
            bool twice = false;
            for (size_t i = 0; i < ti->n_update_bindings; i++)
                twice |= i != j && strcmp(ti->update_bindings[i].value, b->value) == 0;
            if (e && e->owned && v && !twice) amp_exec_write_into(s->alg[k].exec, v, e->value, &e->buf);
        }
    }
}

/* Runs each training_info's initialization graph once and applies its bindings. */
static AmpCode run_initialization(AmpSession *s, const AmpExecOptions *eo, AmpStatus *st) {
    for (size_t i = 0; i < s->m->n_training; i++) {
        AmpTrainingInfo *ti = &s->m->training[i];
        if (!ti->initialization) continue;
        AmpExec *init = NULL;
        AmpCode rc = amp_exec_reset(s->main, st);
        if (!rc) rc = amp_exec_prepare_in(s->main, ti->initialization, eo, &init, st);
        if (!rc) rc = amp_exec_run(init, NULL, 0, NULL, st);
        for (size_t k = 0; !rc && k < ti->n_init_bindings; k++) {
            const AmpStrPair *b = &ti->init_bindings[k];
            AmpValue *v = graph_output(ti->initialization, b->value);
            const AmpBuf *buf = v ? amp_exec_value(init, v) : NULL;
            StateEntry *e = amp_session_find_state(s, b->key);
            if (!buf || !e) {
                rc = amp_fail(st, AMP_ERR_INPUT, "initialization_binding '%s' <- '%s': no such value", b->key, b->value);
                break;
            }
            rc = amp_state_assign(s, e, buf, true, true, "the initialization output", st);
        }
        amp_exec_free(init);
        if (rc) {
            amp_status_prefix(st, "training_info[%zu].initialization: ", i);
            return rc;
        }
    }
    return AMP_OK;
}

/* Takes m (freed on failure). */
static AmpCode open_model(AmpModel *m, const AmpSessionOptions *opt, AmpAutoConfig *cfg, AmpSession **out,
                          AmpStatus *st) {
    AmpSession *s = calloc(1, sizeof *s);
    if (!s) {
        amp_model_free(m);
        return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    }
    s->m = m;
    s->rng = opt->seed ? opt->seed : 0x9e3779b97f4a7c15ull;
    /* ONNX's Gradient op has no kernel: it becomes backward nodes first (passes/gradient.c),
     * with AMP_AUTO or without (the pipeline's gradient pass then finds none left). */
    AmpCode rc = amp_expand_gradients(m, NULL, NULL, st);
    if (!rc) rc = amp_auto_apply(m, cfg, &s->amp_applied, st);
    if (cfg->enabled) {
        s->amp_precision = cfg->opts.stay_fp32                          ? "fp32"
                           : cfg->opts.po.precision == AMP_DT_BFLOAT16 ? "bf16"
                                                                        : "fp16";
        s->amp_precision_why = cfg->opts.precision_why;
    }
    if (!rc) rc = amp_session_dp_open(s, opt, cfg, st);
    if (!rc) rc = amp_session_dp_prepare(s, cfg, opt, st);
    if (!rc) {
        /* Types help the reports (index ranges, output shapes); a model inference cannot
         * type completely still runs. */
        AmpStatus ignored = {0};
        amp_infer_model(m, &ignored);
        rc = amp_backend_open((AmpBackendKind)cfg->backend, &cfg->be, &s->be, st);
    }
    s->timeout = opt->timeout_seconds > 0 ? opt->timeout_seconds : 0;
    s->max_tensor_bytes = opt->max_tensor_bytes;
    AmpExecOptions eo = {.backend = s->be,
                         .fallback = opt->no_fallback || s->be == amp_backend_cpu() ? NULL : amp_backend_cpu(),
                         .rng = &s->rng,
                         .no_plan = opt->no_plan,
                         .no_fuse = opt->no_fuse,
                         .max_iterations = opt->max_iterations,
                         .max_tensor_bytes = opt->max_tensor_bytes,
                         .deadline = &s->deadline,
                         .comm = s->comm};
    if (!rc) rc = amp_exec_prepare(m, m->graph, &eo, &s->main, st);
    size_t n_alg = 0;
    for (size_t i = 0; !rc && i < m->n_training; i++) n_alg += m->training[i].algorithm != NULL;
    if (!rc && n_alg && !(s->alg = calloc(n_alg, sizeof *s->alg))) rc = amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    for (size_t i = 0; !rc && i < m->n_training; i++) {
        AmpTrainingInfo *ti = &m->training[i];
        if (!ti->algorithm) continue;
        Algo *a = &s->alg[s->n_alg];
        a->ti = ti;
        rc = amp_exec_prepare_after(s->main, ti->algorithm, &eo, &a->exec, st);
        if (rc) amp_status_prefix(st, "training_info[%zu].algorithm: ", i);
        else s->n_alg++;
    }
    if (!rc) rc = amp_session_build_state(s, st);
    if (!rc) plan_in_place_updates(s);
    if (!rc) rc = run_initialization(s, &eo, st);
    /* Every weight on the device now, once: a backend without room for them fails the
     * open, not the first step. */
    if (!rc) rc = amp_exec_reset(s->main, st);
    for (size_t k = 0; !rc && k < s->n_alg; k++) rc = amp_exec_reset(s->alg[k].exec, st);
    if (!rc) rc = amp_session_build_io(s, st);
    if (!rc) rc = amp_session_track_init(s, opt->loss, st);
    if (rc) {
        amp_session_close(s);
        return rc;
    }
    *out = s;
    return AMP_OK;
}

/* The session's settings (amp_auto_config), and the CPU's knobs set from them (process-wide:
 * OpenMP's, OpenBLAS's and oneDNN's threads and the library itself are the process's),
 * before the load, which uses the thread count. */
static AmpCode read_settings(const AmpSessionOptions *opt, AmpAutoConfig *cfg, AmpStatus *st) {
    AmpCode rc = amp_auto_config(opt, cfg, st);
    if (rc) return rc;
    if (cfg->threads > 0) amp_threads_set(cfg->threads);
    if (cfg->no_dnnl) amp_dnnl_set_off();
    return AMP_OK;
}

/* The options the caller gave, in this library's layout (amp_api_struct_in): *o zeroed
 * (the defaults) where opt is NULL or older than this library. */
static AmpCode take_options(const AmpSessionOptions *opt, AmpSessionOptions *o, AmpStatus *st) {
    /* struct_size 0: the fields of version 0.1, which ended with `threads`. */
    return amp_api_struct_in(opt, opt ? opt->struct_size : 0, offsetof(AmpSessionOptions, threads) + sizeof(int),
                             o, sizeof *o, "AmpSessionOptions", st);
}

/* What both opens share once the model is loaded (or failed to: rc): onnxruntime-training's
 * optimizer imported into it, then the session made. */
static AmpCode open_loaded(AmpCode rc, AmpModel *m, const AmpSessionOptions *o, AmpAutoConfig *cfg,
                           AmpSession **out, AmpStatus *st) {
    if (!rc && o->ort_optimizer) {
        rc = amp_ort_import_files(m, o->ort_optimizer, o->ort_checkpoint, o->learning_rate, NULL, 0, st);
        if (rc) amp_model_free(m);
    }
    if (!rc) rc = open_model(m, o, cfg, out, st);
    amp_auto_config_free(cfg);
    return rc;
}

AmpCode amp_session_open(const char *path, const AmpSessionOptions *opt, AmpSession **out, AmpStatus *st) {
    *out = NULL;
    if (!path || !*path) return amp_fail(st, AMP_ERR_USAGE, "amp_session_open: no path");
    AmpSessionOptions o;
    AmpAutoConfig cfg;
    AmpCode rc = take_options(opt, &o, st);
    if (!rc) rc = read_settings(&o, &cfg, st);
    if (rc) return rc;
    AmpModel *m = NULL;
    rc = amp_model_load_file(path, NULL, &m, st);
    rc = open_loaded(rc, m, &o, &cfg, out, st);
    if (rc && st && !strstr(st->msg, path)) amp_status_prefix(st, "%s: ", path);
    return rc;
}

AmpCode amp_session_open_bytes(const void *data, size_t len, const char *dir, const AmpSessionOptions *opt,
                               AmpSession **out, AmpStatus *st) {
    *out = NULL;
    if (!data && len) return amp_fail(st, AMP_ERR_USAGE, "amp_session_open_bytes: no data");
    AmpSessionOptions o;
    AmpAutoConfig cfg;
    AmpCode rc = take_options(opt, &o, st);
    if (!rc) rc = read_settings(&o, &cfg, st);
    if (rc) return rc;
    AmpModel *m = NULL;
    rc = amp_model_load_bytes(data, len, dir, NULL, &m, st);
    return open_loaded(rc, m, &o, &cfg, out, st);
}

void amp_session_options_init(AmpSessionOptions *opt) {
    if (opt) *opt = (AmpSessionOptions)AMP_SESSION_OPTIONS_INIT;
}

const char *amp_version(void) {
    return AMPC_VERSION_STRING;
}

AmpCode amp_api_struct_in(const void *given, size_t given_size, size_t size_0_1, void *dst, size_t dst_size,
                          const char *type, AmpStatus *st) {
    memset(dst, 0, dst_size);
    if (!given) return AMP_OK;
    size_t n = given_size ? given_size : size_0_1;
    if (n < sizeof(size_t) || (given_size && given_size < size_0_1))
        return amp_fail(st, AMP_ERR_USAGE, "%s.struct_size %zu: expected 0 or sizeof(%s) (%zu in this library)", type,
                        given_size, type, dst_size);
    /* A caller compiled against a newer header: the fields this library lacks must be left
     * at their defaults (zero), or it would silently ignore what was asked. */
    for (size_t i = dst_size; i < n; i++)
        if (((const unsigned char *)given)[i])
            return amp_fail(st, AMP_ERR_USAGE, "%s: a field past the %zu bytes this library (ampc %s) knows is set: "
                            "the program was built against a newer ampc; link that version", type, dst_size,
                            AMPC_VERSION_STRING);
    memcpy(dst, given, n < dst_size ? n : dst_size);
    return AMP_OK;
}

/* ---- running --------------------------------------------------------------------------- */

static AmpCode fetch(AmpSession *s, AmpExec *e, const OutEntry *o, AmpTensorView *out, AmpStatus *st) {
    const AmpBuf *b = amp_exec_value(e, o->value);
    if (!b) return amp_fail(st, AMP_ERR_INTERNAL, "output '%s' was not computed", o->name);
    size_t bytes = amp_buf_bytes(b);
    memset(out, 0, sizeof *out);
    out->name = o->name;
    out->dtype = b->dtype;
    out->rank = b->rank;
    for (int i = 0; i < b->rank; i++) out->dims[i] = b->dims[i];
    if (!(out->data = malloc(bytes ? bytes : 1))) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    return bytes ? s->be->copy_out(s->be, out->data, b->data, bytes, st) : AMP_OK;
}

/* Copies the requested outputs made by graph `graph` (-1 main, k algorithm k). */
static AmpCode fetch_from(AmpSession *s, AmpMode mode, int graph, const size_t *idx, size_t n, AmpTensorView *outs,
                          AmpStatus *st) {
    AmpExec *e = graph < 0 ? s->main : s->alg[graph].exec;
    for (size_t j = 0; j < n; j++) {
        const OutEntry *o = &s->io[mode].out[idx[j]];
        if (o->graph != graph) continue;
        AmpCode rc = fetch(s, e, o, &outs[j], st);
        if (rc) return rc;
    }
    return AMP_OK;
}

/* Applies algorithm a's update bindings: every check first, then every copy, each source
 * read before any state it might alias is written. */
static AmpCode apply_updates(AmpSession *s, const Algo *a, AmpStatus *st) {
    const AmpTrainingInfo *ti = a->ti;
    size_t n = ti->n_update_bindings;
    if (!n) return AMP_OK;
    AmpBuf *src = calloc(n, sizeof *src);
    bool *tmp = calloc(n, sizeof *tmp);
    StateEntry **dst = calloc(n, sizeof *dst);
    AmpCode rc = AMP_OK;
    if (!src || !tmp || !dst) {
        rc = amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
        goto done;
    }
    for (size_t k = 0; k < n && !rc; k++) {
        const AmpStrPair *b = &ti->update_bindings[k];
        AmpValue *v = graph_output(ti->algorithm, b->value);
        const AmpBuf *buf = v ? amp_exec_value(a->exec, v) : NULL;
        dst[k] = amp_session_find_state(s, b->key);
        if (!buf || !dst[k]) {
            rc = amp_fail(st, AMP_ERR_INTERNAL, "update_binding '%s' <- '%s': no value", b->key, b->value);
            break;
        }
        src[k] = *buf;
        if (!amp_buf_same_shape(&src[k], &dst[k]->buf)) {
            char want[160], got[160];
            amp_buf_describe(&dst[k]->buf, want, sizeof want);
            amp_buf_describe(&src[k], got, sizeof got);
            rc = amp_fail(st, AMP_ERR_INPUT, "update_binding '%s' <- '%s': the algorithm made %s, the state is %s",
                          b->key, b->value, got, want);
            break;
        }
        /* A source that is some state's own buffer is copied aside first (on the device). */
        for (size_t j = 0; j < s->n_state && !tmp[k]; j++)
            if (src[k].data == s->state[j].buf.data && &s->state[j] != dst[k]) tmp[k] = true;
        if (tmp[k]) {
            size_t bytes = amp_buf_bytes(&src[k]);
            void *p = s->be->alloc(s->be, bytes);
            if (!p) {
                tmp[k] = false;
                rc = amp_fail(st, AMP_ERR_INTERNAL, "out of device memory");
                break;
            }
            rc = bytes ? s->be->copy(s->be, p, src[k].data, bytes, st) : AMP_OK;
            src[k].data = p;
        }
    }
    for (size_t k = 0; k < n && !rc; k++)
        if (src[k].data != dst[k]->buf.data) rc = amp_state_assign(s, dst[k], &src[k], true, true, "update", st);
done:
    for (size_t k = 0; src && tmp && k < n; k++)
        if (tmp[k]) s->be->free(s->be, src[k].data);
    free(src), free(tmp), free(dst);
    return rc;
}

static AmpCode begin(AmpSession *s, AmpMode mode, const AmpTensorView *inputs, size_t n_inputs,
                     const char *const *names, size_t n_outputs, AmpTensorView *outputs, AmpNamedBuf **named,
                     size_t **idx, size_t *n_idx, AmpStatus *st) {
    *named = NULL;
    *idx = NULL;
    for (size_t j = 0; outputs && j < n_outputs; j++) memset(&outputs[j], 0, sizeof outputs[j]);
    if (!s) return amp_fail(st, AMP_ERR_USAGE, "no session");
    s->reads_at = host_reads(s->be);
    if (n_outputs && !outputs) return amp_fail(st, AMP_ERR_USAGE, "no array for the outputs");
    size_t room = names ? n_outputs : s->io[mode].n_out;
    *named = calloc(n_inputs ? n_inputs : 1, sizeof **named);
    *idx = calloc(room ? room : 1, sizeof **idx);
    if (!*named || !*idx) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    AmpCode rc = amp_session_check_inputs(s, mode, inputs, n_inputs, *named, st);
    s->deadline = s->timeout > 0 ? amp_exec_clock() + s->timeout : 0;
    return rc ? rc : amp_session_resolve_outputs(s, mode, names, n_outputs, *idx, n_idx, st);
}

static AmpCode finish(AmpCode rc, AmpNamedBuf *named, size_t *idx, AmpTensorView *outputs, size_t n_outputs) {
    if (rc)
        for (size_t j = 0; outputs && j < n_outputs; j++) amp_tensor_view_free(&outputs[j]);
    free(named);
    free(idx);
    return rc;
}

AmpCode amp_session_run(AmpSession *s, const AmpTensorView *inputs, size_t n_inputs, const char *const *names,
                        size_t n_outputs, AmpTensorView *outputs, AmpStatus *st) {
    AmpNamedBuf *named;
    size_t *idx, n_idx = 0;
    double t0 = amp_exec_clock();
    AmpCode rc = begin(s, AMP_MODE_RUN, inputs, n_inputs, names, n_outputs, outputs, &named, &idx, &n_idx, st);
    if (!rc) {
        amp_exec_set_training(s->main, false);
        rc = amp_exec_run(s->main, named, n_inputs, NULL, st);
    }
    if (!rc) rc = fetch_from(s, AMP_MODE_RUN, -1, idx, n_idx, outputs, st);
    if (!rc) amp_session_track_time(&s->run_time, (amp_exec_clock() - t0) * 1e3);
    if (s) s->last_reads = host_reads(s->be) - s->reads_at;
    return finish(rc, named, idx, outputs, n_outputs);
}

AmpCode amp_session_train_step(AmpSession *s, const AmpTensorView *inputs, size_t n_inputs, const char *const *names,
                               size_t n_outputs, AmpTensorView *outputs, AmpStatus *st) {
    AmpNamedBuf *named;
    size_t *idx, n_idx = 0;
    double t0 = amp_exec_clock();
    AmpCode rc = begin(s, AMP_MODE_TRAIN, inputs, n_inputs, names, n_outputs, outputs, &named, &idx, &n_idx, st);
    if (!rc) amp_exec_set_training(s->main, true);
    if (!rc && !s->n_alg) rc = amp_exec_run(s->main, named, n_inputs, NULL, st);
    /* ONNX: executing every algorithm in order, each concatenated with the main graph,
     * and applying its update bindings is one training iteration. */
    for (size_t k = 0; !rc && k < s->n_alg; k++) {
        Algo *a = &s->alg[k];
        rc = amp_exec_run(s->main, named, n_inputs, NULL, st);
        if (!rc) {
            amp_exec_set_training(a->exec, true);
            rc = amp_exec_run(a->exec, named, n_inputs, NULL, st);
            if (rc) amp_status_prefix(st, "training_info algorithm: ");
        }
        if (!rc) rc = fetch_from(s, AMP_MODE_TRAIN, (int)k, idx, n_idx, outputs, st);
        if (!rc) rc = apply_updates(s, a, st);
    }
    if (!rc) rc = fetch_from(s, AMP_MODE_TRAIN, -1, idx, n_idx, outputs, st);
    if (!rc) {
        s->steps++;
        /* Its report (the loss, the loss scale, the overflow flag) from what it copied out. */
        amp_session_track_step(s, idx, n_idx, outputs, (amp_exec_clock() - t0) * 1e3);
    }
    if (s) s->last_reads = host_reads(s->be) - s->reads_at;
    return finish(rc, named, idx, outputs, n_outputs);
}
