/* A session's state: the initializers training binds (weights, optimizer state, loss-scale
 * state; of the main graph or of an algorithm graph) held in session-owned buffers the
 * executors read, their get/set, and checkpoints: an ONNX file whose initializers are the
 * state (bit-exact raw data) and whose metadata holds the step counter and RNG state. */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ampc/version.h"
#include "runtime/session_impl.h"


#define META_STEPS "ampc.steps"
#define META_RNG "ampc.rng"
#define META_FORMAT "ampc.checkpoint"

StateEntry *amp_session_find_state(const AmpSession *s, const char *name) {
    for (size_t i = 0; i < s->n_state; i++)
        if (strcmp(s->state[i].name, name) == 0) return &s->state[i];
    return NULL;
}

/* The executor that runs v's graph: the main one, or the algorithm's that owns v. */
static AmpExec *exec_of(const AmpSession *s, const AmpValue *v) {
    if (v->graph == s->m->graph) return s->main;
    for (size_t k = 0; k < s->n_alg; k++)
        if (s->alg[k].ti->algorithm == v->graph) return s->alg[k].exec;
    return NULL;
}

/* The state entry of binding key `key` of training_info ti (NULL: a model without
 * bindings, where every main-graph initializer is state). */
static AmpCode add_entry(AmpSession *s, const AmpTrainingInfo *ti, size_t i, const char *what, const char *key,
                         size_t cap, AmpStatus *st) {
    AmpValue *v = ti ? amp_training_key(s->m, ti, key) : amp_graph_lookup(s->m->graph, key);
    AmpExec *e = v && v->initializer ? exec_of(s, v) : NULL;
    if (!e) {
        if (ti && ti->algorithm)
            return amp_fail(st, AMP_ERR_INPUT,
                            "training_info[%zu]: %s '%s' is not an initializer of the main graph, nor of "
                            "training_info[%zu].algorithm", i, what, key, i);
        return amp_fail(st, AMP_ERR_INPUT, "training_info[%zu]: %s '%s' is not an initializer of the main graph", i,
                        what, key);
    }
    StateEntry *had = amp_session_find_state(s, key);
    if (had && had->value != v)
        return amp_fail(st, AMP_ERR_INPUT,
                        "training_info[%zu]: %s '%s': another training_info binds an initializer of that name too", i,
                        what, key);
    if (had) return AMP_OK;
    if (s->n_state >= cap) return amp_fail(st, AMP_ERR_INTERNAL, "state: more entries than bindings");
    s->state[s->n_state++] = (StateEntry){.name = v->name, .value = v, .exec = e};
    return AMP_OK;
}

/* Copies src (a device buffer when on_device, else host memory) into dst->data. */
static AmpCode put(AmpSession *s, void *dst, const AmpBuf *src, bool on_device, AmpStatus *st) {
    size_t bytes = amp_buf_bytes(src);
    if (!bytes) return AMP_OK;
    return on_device ? s->be->copy(s->be, dst, src->data, bytes, st) : s->be->copy_in(s->be, dst, src->data, bytes, st);
}

/* A backend buffer holding a copy of src. */
static AmpCode own_copy(AmpSession *s, const AmpBuf *src, bool on_device, AmpBuf *dst, AmpStatus *st) {
    AmpBuf b = *src;
    if (!(b.data = s->be->alloc(s->be, amp_buf_bytes(src))))
        return amp_fail(st, AMP_ERR_INTERNAL, "out of memory for the state");
    AmpCode rc = put(s, b.data, src, on_device, st);
    if (rc) {
        s->be->free(s->be, b.data);
        return rc;
    }
    *dst = b;
    return AMP_OK;
}

AmpCode amp_session_build_state(AmpSession *s, AmpStatus *st) {
    AmpModel *m = s->m;
    size_t cap = 0;
    for (size_t i = 0; i < m->n_training; i++) cap += m->training[i].n_update_bindings + m->training[i].n_init_bindings;
    bool bound = cap > 0;
    if (!bound) cap = m->graph->n_initializers;
    s->state = calloc(cap ? cap : 1, sizeof *s->state);
    if (!s->state) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    AmpCode rc = AMP_OK;
    for (size_t i = 0; !rc && i < m->n_training; i++) {
        const AmpTrainingInfo *ti = &m->training[i];
        for (size_t k = 0; !rc && k < ti->n_update_bindings; k++)
            rc = add_entry(s, ti, i, "update_binding", ti->update_bindings[k].key, cap, st);
        for (size_t k = 0; !rc && k < ti->n_init_bindings; k++)
            rc = add_entry(s, ti, i, "initialization_binding", ti->init_bindings[k].key, cap, st);
    }
    for (size_t i = 0; !rc && !bound && i < m->graph->n_initializers; i++)
        rc = add_entry(s, NULL, 0, "initializer", m->graph->initializers[i]->name, cap, st);
    if (rc) return rc;
    for (size_t i = 0; i < s->n_state; i++) {
        StateEntry *e = &s->state[i];
        /* Bound state is written every step: it gets its own device buffer now. Other
         * entries share the executor's upload of the model's tensor until someone sets them. */
        if (bound) {
            AmpBuf view;
            if ((rc = amp_buf_from_tensor(m, e->value->initializer, &view, st))) return rc;
            if ((rc = own_copy(s, &view, false, &e->buf, st))) return rc;
            e->owned = true;
        } else {
            const AmpBuf *dev;
            if ((rc = amp_exec_initializer(e->exec, e->value, &dev, st))) return rc;
            e->buf = *dev;
        }
        /* An algorithm's own initializer is bound into its executor: each step reads the
         * state's current value, not the model's tensor. */
        if ((rc = amp_exec_bind(e->exec, e->value, &e->buf, st))) return rc;
    }
    return AMP_OK;
}

void amp_session_free_state(AmpSession *s) {
    for (size_t i = 0; i < s->n_state; i++) {
        if (s->state[i].owned) s->be->free(s->be, s->state[i].buf.data);
        free(s->state[i].host);
    }
    free(s->state);
    s->state = NULL;
    s->n_state = 0;
}

AmpCode amp_state_assign(AmpSession *s, StateEntry *e, const AmpBuf *src, bool on_device, bool reshape,
                         const char *what, AmpStatus *st) {
    if (!amp_buf_same_shape(&e->buf, src) && !reshape) {
        char want[160], got[160];
        amp_buf_describe(&e->buf, want, sizeof want);
        amp_buf_describe(src, got, sizeof got);
        return amp_fail(st, AMP_ERR_USAGE, "state '%s' is %s; %s is %s", e->name, want, what, got);
    }
    size_t bytes = amp_buf_bytes(src);
    if (e->owned && amp_buf_bytes(&e->buf) == bytes) {
        AmpCode rc = put(s, e->buf.data, src, on_device, st);
        if (rc) return rc;
        void *data = e->buf.data;
        e->buf = *src;
        e->buf.data = data;
        return AMP_OK;
    }
    AmpBuf fresh;
    AmpCode rc = own_copy(s, src, on_device, &fresh, st);
    if (rc) return rc;
    if (e->owned) s->be->free(s->be, e->buf.data);
    e->buf = fresh;
    e->owned = true;
    return AMP_OK;
}

/* ---- public ---------------------------------------------------------------------------- */

size_t amp_session_state_count(const AmpSession *s) {
    return s->n_state;
}

bool amp_session_state_at(const AmpSession *s, size_t i, AmpTensorView *out) {
    if (i >= s->n_state) return false;
    /* The value is copied out of the device into a host buffer the entry keeps (the
     * session's own memory, not its logical state: hence the cast). */
    StateEntry *e = (StateEntry *)&s->state[i];
    memset(out, 0, sizeof *out);
    size_t bytes = amp_buf_bytes(&e->buf);
    void *host = realloc(e->host, bytes ? bytes : 1);
    AmpStatus st = {0};
    if (!host) return false;
    e->host = host;
    if (bytes && s->be->copy_out(s->be, host, e->buf.data, bytes, &st)) return false;
    out->name = e->name;
    out->dtype = e->buf.dtype;
    out->rank = e->buf.rank;
    for (int k = 0; k < e->buf.rank; k++) out->dims[k] = e->buf.dims[k];
    out->data = host;
    return true;
}

/* An AmpBuf over a caller's view (checked sizes). */
static AmpCode view_buf(const AmpTensorView *t, AmpBuf *b, AmpStatus *st) {
    memset(b, 0, sizeof *b);
    if (t->rank < 0 || t->rank > AMP_MAX_RANK)
        return amp_fail(st, AMP_ERR_USAGE, "state '%s': rank %d", t->name ? t->name : "", t->rank);
    uint64_t n = 1;
    for (int i = 0; i < t->rank; i++) {
        if (t->dims[i] < 0 || (t->dims[i] && n > (UINT64_C(1) << 62) / (uint64_t)t->dims[i]))
            return amp_fail(st, AMP_ERR_USAGE, "state '%s': bad dim %lld", t->name ? t->name : "", (long long)t->dims[i]);
        n *= (uint64_t)t->dims[i];
        b->dims[i] = t->dims[i];
    }
    b->dtype = t->dtype;
    b->rank = t->rank;
    b->nelem = n;
    b->data = t->data;
    size_t bytes;
    if (!amp_tensor_expected_bytes(t->dtype, n, &bytes) || (bytes && !t->data))
        return amp_fail(st, AMP_ERR_USAGE, "state '%s': no data or an unsupported dtype", t->name ? t->name : "");
    return AMP_OK;
}

AmpCode amp_session_state_set(AmpSession *s, const AmpTensorView *t, AmpStatus *st) {
    if (!t || !t->name) return amp_fail(st, AMP_ERR_USAGE, "state_set: no tensor or no name");
    StateEntry *e = amp_session_find_state(s, t->name);
    if (!e) return amp_fail(st, AMP_ERR_USAGE, "state '%s': the session holds no state of that name", t->name);
    AmpBuf b;
    AmpCode rc = view_buf(t, &b, st);
    return rc ? rc : amp_state_assign(s, e, &b, false, false, "the value given", st);
}

/* ---- checkpoints ----------------------------------------------------------------------- */

static AmpCode put_meta(AmpModel *ck, size_t i, const char *key, const char *value, AmpStatus *st) {
    ck->metadata[i].key = amp_arena_strdup(&ck->arena, key);
    ck->metadata[i].value = amp_arena_strdup(&ck->arena, value);
    return ck->metadata[i].key && ck->metadata[i].value ? AMP_OK : amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
}

AmpCode amp_session_state_save(AmpSession *s, const char *path, AmpStatus *st) {
    if (!path || !*path) return amp_fail(st, AMP_ERR_USAGE, "state_save: no path");
    AmpModel *ck = amp_model_new();
    if (!ck) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    AmpArena *a = &ck->arena;
    AmpCode rc = AMP_OK;
    ck->has = AMP_MODEL_HAS_IR_VERSION;
    ck->ir_version = 8;
    ck->producer_name = "ampc";
    ck->producer_version = AMPC_VERSION_STRING;
    ck->graph->name = "ampc_checkpoint";
    ck->n_opsets = 1;
    ck->opsets = amp_arena_calloc(a, 1, sizeof *ck->opsets);
    ck->n_metadata = 3;
    ck->metadata = amp_arena_calloc(a, 3, sizeof *ck->metadata);
    if (!ck->opsets || !ck->metadata) {
        rc = amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
        goto done;
    }
    ck->opsets[0] = (AmpOpset){"", 17, true};
    char num[64];
    snprintf(num, sizeof num, "%" PRIu64, s->steps);
    if ((rc = put_meta(ck, 0, META_FORMAT, "1", st)) || (rc = put_meta(ck, 1, META_STEPS, num, st))) goto done;
    snprintf(num, sizeof num, "%016" PRIx64, s->rng);
    if ((rc = put_meta(ck, 2, META_RNG, num, st))) goto done;
    for (size_t i = 0; i < s->n_state; i++) {
        const StateEntry *e = &s->state[i];
        AmpTensor *t = amp_arena_calloc(a, 1, sizeof *t);
        AmpValue *v = amp_graph_value(ck->graph, e->name);
        size_t bytes = amp_buf_bytes(&e->buf);
        uint8_t *raw = amp_arena_alloc(a, bytes ? bytes : 1);
        int64_t *dims = amp_arena_calloc(a, e->buf.rank ? (size_t)e->buf.rank : 1, sizeof *dims);
        if (!t || !v || !raw || !dims) {
            rc = amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
            goto done;
        }
        if (bytes && (rc = s->be->copy_out(s->be, raw, e->buf.data, bytes, st))) goto done;
        for (int k = 0; k < e->buf.rank; k++) dims[k] = e->buf.dims[k];
        t->dtype = e->buf.dtype;
        t->has = AMP_TENSOR_HAS_DTYPE | AMP_TENSOR_HAS_RAW;
        t->ndims = (size_t)e->buf.rank;
        t->dims = dims;
        t->nelem = e->buf.nelem;
        t->raw = (AmpBytes){raw, bytes};
        if (amp_graph_add_initializer(ck->graph, v, t)) {
            rc = amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
            goto done;
        }
    }
    /* Never external: a checkpoint is one self-contained file. */
    AmpSaveOptions so = {.external = AMP_SAVE_EXTERNAL_NEVER};
    rc = amp_model_save_file(ck, path, &so, st);
done:
    amp_model_free(ck);
    return rc;
}

/* A checkpoint number: digits of `base` only (no sign, blank or prefix, which strtoull
 * would take, negating a '-'), and no more than 64 bits (where strtoull saturates). */
static bool parse_u64(const char *s, unsigned base, uint64_t *out) {
    uint64_t v = 0;
    if (!*s) return false;
    for (; *s; s++) {
        unsigned d;
        if (*s >= '0' && *s <= '9') d = (unsigned)(*s - '0');
        else if (base == 16 && *s >= 'a' && *s <= 'f') d = (unsigned)(*s - 'a' + 10);
        else if (base == 16 && *s >= 'A' && *s <= 'F') d = (unsigned)(*s - 'A' + 10);
        else return false;
        if (d >= base || v > (UINT64_MAX - d) / base) return false;
        v = v * base + d;
    }
    *out = v;
    return true;
}

static const char *meta(const AmpModel *m, const char *key) {
    for (size_t i = 0; i < m->n_metadata; i++)
        if (m->metadata[i].key && strcmp(m->metadata[i].key, key) == 0) return m->metadata[i].value;
    return NULL;
}

AmpCode amp_session_state_load(AmpSession *s, const char *path, AmpStatus *st) {
    AmpModel *ck = NULL;
    AmpCode rc = amp_model_load_file(path, NULL, &ck, st);
    if (rc) return rc;
    AmpBuf *bufs = calloc(s->n_state ? s->n_state : 1, sizeof *bufs);
    bool *seen = calloc(s->n_state ? s->n_state : 1, sizeof *seen);
    const char *steps = meta(ck, META_STEPS), *rng = meta(ck, META_RNG);
    uint64_t n_steps = 0, rng_state = 0;
    if (!bufs || !seen) {
        rc = amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
        goto done;
    }
    if (!meta(ck, META_FORMAT) || !steps || !rng) {
        rc = amp_fail(st, AMP_ERR_INPUT, "%s: not an ampc checkpoint (no %s metadata)", path, META_FORMAT);
        goto done;
    }
    if (!parse_u64(steps, 10, &n_steps))
        rc = amp_fail(st, AMP_ERR_INPUT, "%s: bad %s '%s' (want decimal digits, at most 2^64-1)", path, META_STEPS,
                      steps);
    else if (!parse_u64(rng, 16, &rng_state))
        rc = amp_fail(st, AMP_ERR_INPUT, "%s: bad %s '%s' (want at most 16 hex digits)", path, META_RNG, rng);
    /* Everything is checked before anything changes. */
    for (size_t i = 0; !rc && i < ck->graph->n_initializers; i++) {
        AmpTensor *t = ck->graph->initializers[i];
        StateEntry *e = amp_session_find_state(s, t->name);
        if (!e) {
            rc = amp_fail(st, AMP_ERR_INPUT, "%s: '%s' is no state of this model", path, t->name);
            break;
        }
        size_t at = (size_t)(e - s->state);
        AmpBuf *b = &bufs[at];
        if (seen[at]) {
            rc = amp_fail(st, AMP_ERR_INPUT, "%s: '%s' is there twice", path, t->name);
            break;
        }
        seen[at] = true;
        if ((rc = amp_buf_from_tensor(ck, t, b, st))) break;
        if (!amp_buf_same_shape(b, &e->buf)) {
            char want[160], got[160];
            amp_buf_describe(&e->buf, want, sizeof want);
            amp_buf_describe(b, got, sizeof got);
            rc = amp_fail(st, AMP_ERR_INPUT, "%s: state '%s' is %s in the checkpoint, %s in the session", path, t->name,
                          got, want);
        }
    }
    for (size_t i = 0; !rc && i < s->n_state; i++)
        if (!seen[i])
            rc = amp_fail(st, AMP_ERR_INPUT, "%s: the checkpoint has no '%s'", path, s->state[i].name);
    for (size_t i = 0; !rc && i < s->n_state; i++) rc = amp_state_assign(s, &s->state[i], &bufs[i], false, false, "checkpoint", st);
    if (!rc) {
        s->steps = n_steps;
        s->rng = rng_state;
    }
done:
    free(bufs);
    free(seen);
    amp_model_free(ck);
    return rc;
}

void amp_session_stats(const AmpSession *s, AmpSessionStats *out) {
    AmpSessionStats all;
    amp_session_stats_base(s, &all);
    memcpy(out, &all, offsetof(AmpSessionStats, amp_precision_why) + sizeof(const char *));
}

void amp_session_stats_base(const AmpSession *s, AmpSessionStats *out) {
    memset(out, 0, sizeof *out);
    out->steps = s->steps;
    for (size_t i = 0; i < s->n_state; i++) out->state_bytes += amp_buf_bytes(&s->state[i].buf);
    AmpExecMemory mm;
    amp_exec_memory(s->main, &mm);
    size_t arena = mm.arena_bytes, peak = mm.peak_bytes;
    bool planned = mm.planned;
    for (size_t k = 0; k < s->n_alg; k++) {
        amp_exec_memory(s->alg[k].exec, &mm);
        arena += mm.arena_bytes;
        peak += mm.peak_bytes;
        planned = planned && mm.planned;
    }
    out->planned = planned;
    out->intermediate_bytes = planned ? arena : peak;
    amp_exec_memory(s->main, &mm);
    out->values_sized = mm.values_sized;
    out->values_dynamic = mm.values_dynamic;
    out->syncs = mm.syncs;
    out->fallback_nodes = mm.fallback_nodes;
    out->fused_nodes = mm.fused_nodes;
    out->absorbed_nodes = mm.absorbed_nodes;
    out->host_reads = s->last_reads;
    AmpBackendMemory mem; /* a backend with device memory of its own: what it added */
    if (!amp_backend_memory(s->be, &mem)) out->device_bytes = mem.used > mem.before ? mem.used - mem.before : 0;
    AmpBackendStats bs;
    amp_backend_stats(s->be, &bs);
    out->kernel_syncs = bs.kernel_syncs;
    for (size_t k = 0; k < s->n_alg; k++) {
        amp_exec_memory(s->alg[k].exec, &mm);
        out->values_sized += mm.values_sized;
        out->values_dynamic += mm.values_dynamic;
        out->syncs += mm.syncs;
        out->fallback_nodes += mm.fallback_nodes;
        out->fused_nodes += mm.fused_nodes;
        out->absorbed_nodes += mm.absorbed_nodes;
    }
    /* The texts live in the session; stats are read, not changed: hence the casts. The
     * main graph's executor, then each algorithm's. */
    const AmpExec *es[1 + 16];
    size_t n_es = 0;
    es[n_es++] = s->main;
    for (size_t k = 0; k < s->n_alg && n_es < sizeof es / sizeof *es; k++) es[n_es++] = s->alg[k].exec;
    amp_exec_fallback_ops(es, n_es, ((AmpSession *)s)->fallback_ops, sizeof s->fallback_ops);
    amp_exec_fused_ops(es, n_es, ((AmpSession *)s)->fused_ops, sizeof s->fused_ops);
    out->amp_applied = s->amp_applied;
    out->amp_precision = s->amp_precision ? s->amp_precision : "";
    out->amp_precision_why = s->amp_precision_why ? s->amp_precision_why : "";
    out->backend = s->be->name;
    out->fallback_ops = s->fallback_ops;
    out->fused_ops = s->fused_ops;
}

double amp_session_device_ms(AmpSession *s) {
    return s && s->be ? amp_backend_device_ms(s->be) : -1;
}
