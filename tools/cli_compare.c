/* `ampc compare FP32 AMP [--inputs DIR] [--top N]`: runs both models on the same inputs
 * (the CPU executor), the FP32 one first, keeping its float values, then the AMP one with
 * a hook after each node. Each 16-bit node's output is compared with the FP32 graph's
 * value of the same name (its error with what it inherited), and the node is run once
 * more, alone, on the FP32 graph's inputs cast to its input types (its local error only).
 * No bisection: one run of each model. Values are matched by name, through Casts either
 * side (ampc's `<name>_fp16` and `<name>_to_fp16`, onnxconverter-common's
 * `InsertedCast_*`), so models converted by other tools compare too. A float32 input the
 * AMP model takes in 16 bits (converted with --no-keep-io-types) is rounded to its type. */
#include "tools/cli_calib.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/half.h"
#include "runtime/observe.h"
#include "tools/cli_say.h"

/* The FP32 run's float values, per value id of its main graph (data NULL: none). */
typedef struct Ref {
    AmpModel *m;
    AmpGraph *g;
    AmpBuf *val;
} Ref;

typedef struct NodeErr {
    const AmpNode *node;
    double local, full; /* max |y - fp32| / max |fp32|, alone on FP32 inputs and in the AMP run */
    /* The same for the FP32 node computing in float32 on its inputs rounded to the 16-bit
     * node's input types: how much of `local` is the rounding of its inputs, which
     * keeping the node alone in float32 does not remove (NAN: not measured). */
    double rounding;
    double scale;       /* max |fp32| */
    const char *value;  /* the FP32 value compared */
} NodeErr;

typedef struct Cmp {
    Ref ref;
    AmpModel *amp;
    NodeErr *errs;
    size_t n, cap;
    size_t skipped; /* 16-bit nodes with no FP32 value to compare */
    AmpStatus *st;
} Cmp;

static AmpCode keep_ref(void *ctx, AmpExec *e, const AmpNode *n, AmpStatus *st) {
    Ref *r = ctx;
    for (int k = 0; k < n->n_inputs + n->n_outputs; k++) { /* outputs, and graph inputs read */
        const AmpValue *v = k < n->n_inputs ? n->inputs[k] : n->outputs[k - n->n_inputs];
        if (!v || v->graph != r->g || v->type.kind != AMP_TYPE_TENSOR || !amp_dtype_is_float(v->type.dtype)) continue;
        if (k < n->n_inputs && (v->producer || v->initializer || r->val[v->id].data)) continue;
        amp_buf_free(&r->val[v->id]);
        if (amp_exec_value_f32(e, v, &r->val[v->id], st)) *st = (AmpStatus){0};
    }
    return AMP_OK;
}

static const AmpBuf *ref_named(const Ref *r, const char *name) {
    const AmpValue *v = amp_graph_lookup(r->g, name);
    return v && v->graph == r->g && r->val[v->id].data ? &r->val[v->id] : NULL;
}

static bool is16(int dt) {
    return dt == AMP_DT_FLOAT16 || dt == AMP_DT_BFLOAT16;
}

/* The FP32 value that AMP value v stands for: its own name, else through Casts: the Cast
 * it was made by (an input cast to 16 bits), a Cast reading it (a 16-bit output cast back
 * under the FP32 name), or its name less the `_fp16` / `_bf16` suffix. */
static const AmpBuf *ref_of(const Cmp *c, const AmpValue *v, const char **name) {
    for (int hop = 0; v && hop < 4; hop++) {
        const AmpBuf *b = ref_named(&c->ref, v->name);
        if (b) {
            *name = v->name;
            return b;
        }
        for (size_t u = 0; u < v->n_uses; u++) {
            const AmpNode *r = v->uses[u].node;
            if (r->op == AMP_OP_Cast && r->outputs[0] && (b = ref_named(&c->ref, r->outputs[0]->name))) {
                *name = r->outputs[0]->name;
                return b;
            }
        }
        size_t l = strlen(v->name);
        if (l > 5 && (strcmp(v->name + l - 5, "_fp16") == 0 || strcmp(v->name + l - 5, "_bf16") == 0)) {
            char buf[1024];
            snprintf(buf, sizeof buf, "%.*s", (int)(l - 5), v->name);
            if ((b = ref_named(&c->ref, buf))) {
                const AmpValue *fv = amp_graph_lookup(c->ref.g, buf);
                *name = fv ? fv->name : v->name;
                return b;
            }
        }
        v = v->producer && v->producer->op == AMP_OP_Cast ? v->producer->inputs[0] : NULL;
    }
    return NULL;
}

/* max |y - ref| / max |ref| (inf when y has NaN/inf where ref is finite). */
static double rel_err(const float *y, const AmpBuf *ref, double *scale) {
    const float *r = ref->data;
    double d = 0, s = 0;
    for (uint64_t i = 0; i < ref->nelem; i++) {
        double a = fabs((double)r[i]), e = fabs((double)y[i] - (double)r[i]);
        if (isfinite(a) && a > s) s = a;
        if (isnan(e) && !isnan(r[i])) e = INFINITY;
        if (e > d) d = e;
    }
    *scale = s;
    return s > 0 ? d / s : d;
}

/* A host copy of device value v of e (raw bytes), as the node read it. */
static AmpCode host_copy(AmpExec *e, const AmpValue *v, AmpBuf *out, AmpStatus *st) {
    const AmpBuf *b = amp_exec_value(e, v);
    if (!b) return amp_fail(st, AMP_ERR_INTERNAL, "value '%s' is not held", v->name);
    size_t bytes = amp_buf_bytes(b);
    *out = *b;
    if (!(out->data = malloc(bytes ? bytes : 1))) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    AmpBackend *be = amp_exec_backend(e);
    return bytes ? be->copy_out(be, out->data, b->data, bytes, st) : AMP_OK;
}

/* Input v of the node as the FP32 graph has it, rounded to v's type; else as the AMP run has it. */
static AmpCode local_input(Cmp *c, AmpExec *e, const AmpValue *v, AmpBuf *out, AmpStatus *st) {
    AmpCode rc = host_copy(e, v, out, st);
    const char *name;
    const AmpBuf *r = rc || v->initializer ? NULL : ref_of(c, v, &name);
    if (!r || r->nelem != out->nelem || !amp_dtype_is_float(out->dtype)) return rc;
    const float *x = r->data;
    if (out->dtype == AMP_DT_FLOAT) memcpy(out->data, x, r->nelem * sizeof *x);
    else if (out->dtype == AMP_DT_FLOAT16) amp_f32_to_f16_n(out->data, x, r->nelem);
    else if (out->dtype == AMP_DT_BFLOAT16) amp_f32_to_bf16_n(out->data, x, r->nelem);
    return AMP_OK;
}

static float *as_f32(const AmpBuf *b) {
    float *f = malloc(b->nelem ? b->nelem * sizeof *f : 1);
    if (!f) return NULL;
    if (b->dtype == AMP_DT_FLOAT16) amp_f16_to_f32_n(f, b->data, b->nelem);
    else if (b->dtype == AMP_DT_BFLOAT16) amp_bf16_to_f32_n(f, b->data, b->nelem);
    else memcpy(f, b->data, b->nelem * sizeof *f);
    return f;
}

/* Runs n alone on the FP32 inputs: its output `k` as float32 (malloc'd), or NULL. */
static float *run_local(Cmp *c, AmpExec *e, const AmpNode *n, int k, AmpStatus *st) {
    AmpBuf in[64] = {{0}}, out[16] = {{0}};
    const AmpBuf *inp[64] = {0};
    float *y = NULL;
    AmpCode rc = n->n_inputs <= 64 && n->n_outputs <= 16 ? AMP_OK : AMP_ERR_UNSUPPORTED;
    for (int i = 0; !rc && i < n->n_inputs; i++)
        if (n->inputs[i] && !(rc = local_input(c, e, n->inputs[i], &in[i], st))) inp[i] = &in[i];
    for (int j = 0; !rc && j < n->n_outputs; j++) {
        const AmpBuf *b = n->outputs[j] ? amp_exec_value(e, n->outputs[j]) : NULL;
        if (!b) continue;
        out[j] = *b;
        size_t bytes = amp_buf_bytes(b);
        if (!(out[j].data = calloc(bytes ? bytes : 1, 1))) rc = AMP_ERR_INTERNAL;
    }
    if (!rc) rc = amp_run_node_alone(c->amp, n, inp, out, st);
    if (!rc && out[k].data) y = as_f32(&out[k]);
    for (int i = 0; i < 64; i++) free(in[i].data);
    for (int j = 0; j < 16; j++) free(out[j].data);
    *st = (AmpStatus){0}; /* a node that cannot run alone is listed without a local error */
    return y;
}

/* Input k of FP32 node f as the FP32 run has it (an initializer: the model's tensor),
 * rounded to dtype `dt` and back when that is a 16-bit type; malloc'd float32. */
static float *rounded_input(const Cmp *c, const AmpNode *f, int k, int dt, AmpBuf *out) {
    const AmpValue *v = f->inputs[k];
    const AmpBuf *src = v ? ref_named(&c->ref, v->name) : NULL;
    AmpBuf init;
    AmpStatus st = {AMP_OK, ""};
    if (!src && v && v->initializer && !amp_buf_from_tensor(c->ref.m, v->initializer, &init, &st)) src = &init;
    if (!src || src->dtype != AMP_DT_FLOAT) return NULL;
    *out = *src;
    float *x = malloc(src->nelem ? src->nelem * sizeof *x : 1);
    if (!x) return NULL;
    memcpy(x, src->data, src->nelem * sizeof *x);
    for (uint64_t i = 0; i < src->nelem && is16(dt); i++)
        x[i] = dt == AMP_DT_FLOAT16 ? amp_f16_to_f32(amp_f32_to_f16(x[i])) : amp_bf16_to_f32(amp_f32_to_bf16(x[i]));
    out->data = x;
    return x;
}

/* x->rounding for AMP node n: the FP32 graph's node making the value compared, run in
 * float32 on its inputs rounded as n reads them. */
static void rounding_error(const Cmp *c, AmpExec *e, const AmpNode *n, NodeErr *x, const AmpBuf *ref) {
    const AmpValue *fv = amp_graph_lookup(c->ref.g, x->value);
    const AmpNode *f = fv ? fv->producer : NULL;
    if (!f || f->n_inputs != n->n_inputs || f->n_inputs > 64 || f->n_outputs > 16) return;
    AmpBuf in[64] = {{0}}, out[16] = {{0}};
    const AmpBuf *inp[64] = {0};
    bool ok = true;
    for (int k = 0; k < f->n_inputs && ok; k++) {
        if (!f->inputs[k]) continue;
        const AmpValue *a = n->inputs[k];
        AmpStatus st = {AMP_OK, ""};
        if (!amp_dtype_is_float(f->inputs[k]->type.dtype)) /* integer inputs: as the AMP run had them */
            ok = a && !host_copy(e, a, &in[k], &st);
        else
            ok = rounded_input(c, f, k, a ? a->type.dtype : AMP_DT_FLOAT, &in[k]) != NULL;
        inp[k] = &in[k];
    }
    int k = fv->producer_slot;
    for (int j = 0; j < f->n_outputs && ok; j++) {
        const AmpBuf *b = f->outputs[j] ? ref_named(&c->ref, f->outputs[j]->name) : NULL;
        if (!b) continue;
        out[j] = *b;
        ok = (out[j].data = calloc(b->nelem ? b->nelem : 1, sizeof(float))) != NULL;
    }
    AmpStatus st = {AMP_OK, ""};
    double scale;
    if (ok && out[k].data && !amp_run_node_alone(c->ref.m, f, inp, out, &st)) x->rounding = rel_err(out[k].data, ref, &scale);
    for (int i = 0; i < 64; i++) free(in[i].data);
    for (int j = 0; j < 16; j++) free(out[j].data);
}

static AmpCode observe(void *ctx, AmpExec *e, const AmpNode *n, AmpStatus *st) {
    Cmp *c = ctx;
    if (n->op == AMP_OP_Cast || n->graph != c->amp->graph) return AMP_OK;
    bool any16 = false;
    for (int k = 0; k < n->n_inputs + n->n_outputs && !any16; k++) {
        const AmpValue *v = k < n->n_inputs ? n->inputs[k] : n->outputs[k - n->n_inputs];
        any16 = v && v->type.kind == AMP_TYPE_TENSOR && is16(v->type.dtype);
    }
    if (!any16) return AMP_OK;
    int k = -1;
    const char *name = NULL;
    const AmpBuf *ref = NULL;
    for (int j = 0; j < n->n_outputs && !ref; j++)
        if (n->outputs[j] && amp_dtype_is_float(n->outputs[j]->type.dtype) && (ref = ref_of(c, n->outputs[j], &name)))
            k = j;
    if (!ref) {
        c->skipped++;
        return AMP_OK;
    }
    AmpBuf full;
    if (amp_exec_value_f32(e, n->outputs[k], &full, st) || full.nelem != ref->nelem) {
        amp_buf_free(&full);
        *st = (AmpStatus){0};
        c->skipped++;
        return AMP_OK;
    }
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 64;
        NodeErr *p = realloc(c->errs, cap * sizeof *p);
        if (!p) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
        c->errs = p, c->cap = cap;
    }
    NodeErr *x = &c->errs[c->n++];
    *x = (NodeErr){.node = n, .value = name, .local = NAN, .rounding = NAN};
    x->full = rel_err(full.data, ref, &x->scale);
    amp_buf_free(&full);
    float *y = run_local(c, e, n, k, st);
    if (y) x->local = rel_err(y, ref, &x->scale);
    free(y);
    rounding_error(c, e, n, x, ref);
    return AMP_OK;
}

static double rank_key(double x) {
    return isnan(x) ? -1 : x;
}

static int by_local(const void *a, const void *b) {
    double x = rank_key(((const NodeErr *)a)->local), y = rank_key(((const NodeErr *)b)->local);
    return x < y ? 1 : x > y ? -1 : 0;
}

/* The graph outputs: max abs, max rel (to the FP32 output's largest |x|), cosine. */
static void print_outputs(const AmpTensorView *f, const AmpTensorView *a, size_t n) {
    for (size_t i = 0; i < n; i++) {
        AmpBuf fb = {.dtype = f[i].dtype, .rank = f[i].rank, .data = f[i].data};
        AmpBuf ab = {.dtype = a[i].dtype, .rank = a[i].rank, .data = a[i].data};
        for (int d = 0; d < f[i].rank; d++) fb.dims[d] = f[i].dims[d];
        for (int d = 0; d < a[i].rank; d++) ab.dims[d] = a[i].dims[d];
        fb.nelem = amp_shape_nelem(fb.rank, fb.dims), ab.nelem = amp_shape_nelem(ab.rank, ab.dims);
        bool fl = (fb.dtype == AMP_DT_FLOAT || is16(fb.dtype)) && (ab.dtype == AMP_DT_FLOAT || is16(ab.dtype));
        if (!fl || fb.nelem != ab.nelem) {
            printf("output '%s': not compared (%s)\n", f[i].name, fl ? "shapes differ" : "not a float output");
            continue;
        }
        float *x = as_f32(&fb), *y = as_f32(&ab);
        double abs_err = 0, scale = 0, dot = 0, nx = 0, ny = 0;
        uint64_t bad = 0; /* FP32 elements that are NaN or inf: nothing to compare with */
        for (uint64_t j = 0; x && y && j < fb.nelem; j++) {
            if (!isfinite(x[j])) {
                bad++;
                continue;
            }
            double e = fabs((double)y[j] - (double)x[j]);
            if (isnan(e)) e = INFINITY;
            if (e > abs_err) abs_err = e;
            if (fabs((double)x[j]) > scale) scale = fabs((double)x[j]);
            dot += (double)x[j] * y[j], nx += (double)x[j] * x[j], ny += (double)y[j] * y[j];
        }
        double cosine = nx > 0 && ny > 0 ? dot / sqrt(nx * ny) : (nx == ny ? 1 : 0);
        if (!isfinite(ny) || !isfinite(dot)) cosine = NAN; /* inf/NaN in the AMP output */
        printf("output '%s': max abs %.3g, max rel %.3g, cosine %.6f\n", f[i].name, abs_err,
               scale > 0 ? abs_err / scale : abs_err, cosine);
        if (bad)
            printf("note: %llu of %llu elements of the FP32 output '%s' are NaN or inf (left out above): are the "
                   "inputs in range? (--inputs DIR)\n", (unsigned long long)bad, (unsigned long long)fb.nelem, f[i].name);
        free(x), free(y);
    }
}

/* The 16-bit node that makes AMP value v (through Casts), or NULL. */
static const AmpNode *maker16(const AmpValue *v) {
    for (int hop = 0; v && v->producer && hop < 4; hop++) {
        const AmpNode *p = v->producer;
        if (p->op != AMP_OP_Cast) return is16(v->type.dtype) ? p : NULL;
        v = p->inputs[0];
    }
    return NULL;
}

static void keep_line(const AmpNode *n, const AmpNode **done, size_t *n_done) {
    for (size_t i = 0; i < *n_done; i++)
        if (done[i] == n) return;
    done[(*n_done)++] = n;
    printf("  --keep-fp32 '%s'\n", n->name ? n->name : "");
}

/* Counts the 16-bit nodes of the bodies (If, Loop, Scan) below the main graph: compare
 * keeps the FP32 values of the main graph only, so these are not compared. */
static AmpCode count_body16(AmpGraph *g, void *ctx, AmpStatus *st) {
    (void)st;
    if (!g->owner) return AMP_OK;
    for (const AmpNode *n = g->first; n; n = n->next) {
        bool any16 = false;
        for (int k = 0; k < n->n_outputs && !any16; k++)
            any16 = n->outputs[k] && n->outputs[k]->type.kind == AMP_TYPE_TENSOR && is16(n->outputs[k]->type.dtype);
        *(size_t *)ctx += any16 && n->op != AMP_OP_Cast;
    }
    return AMP_OK;
}

/* The ranking, then the --keep-fp32 lines for the nodes of local error from 1e-2 up: the
 * node, and where most of its error is the rounding of its 16-bit inputs, their makers. */
static void print_nodes(const Cmp *c, long top) {
    printf("%zu 16-bit nodes compared (%zu without an FP32 value of the same name); by local error "
           "(max |y - fp32| / max |fp32|, the node alone on the FP32 inputs cast to its input types; in "
           "brackets the part its inputs' rounding makes, computed in float32), beside the error with what "
           "it inherited:\n", c->n, c->skipped);
    size_t in_bodies = 0;
    amp_graph_walk(c->amp->graph, count_body16, &in_bodies, NULL);
    if (in_bodies)
        printf("(%zu 16-bit nodes inside If/Loop/Scan bodies are not compared: compare keeps the FP32 values of the "
               "main graph only; their errors show in the If/Loop/Scan node's outputs)\n", in_bodies);
    for (size_t i = 0; i < c->n && (long)i < top; i++) {
        const NodeErr *x = &c->errs[i];
        printf("%3zu. %s (%s) -> '%s': local %.3g (inputs' rounding %.3g), inherited+local %.3g, max |fp32| %.3g\n",
               i + 1, x->node->name ? x->node->name : "", x->node->op_type, x->value, x->local, x->rounding, x->full,
               x->scale);
    }
    const AmpNode *done[256];
    size_t n_done = 0, worst = 0;
    for (size_t i = 0; i < c->n && (long)i < top && n_done < 192; i++, worst++) {
        const NodeErr *x = &c->errs[i];
        if (!(x->local >= 1e-2)) break;
        if (!i) printf("to keep the worst in float32 (local error from 1e-2 up), convert again with:\n");
        keep_line(x->node, done, &n_done);
        if (!(x->rounding >= 0.5 * x->local)) continue;
        for (int k = 0; k < x->node->n_inputs && n_done < 256; k++) {
            const AmpNode *p = x->node->inputs[k] ? maker16(x->node->inputs[k]) : NULL;
            if (p) keep_line(p, done, &n_done);
        }
    }
    if (!worst) printf("no node's local error reaches 1e-2\n");
}

/* The inputs of the AMP run: in's tensors, each float32 one that the AMP model takes as
 * float16 or bfloat16 rounded to that type (into bufs[i], which the caller frees). */
static AmpCode amp_inputs(const AmpSession *as, const RunInputs *in, AmpTensorView *t, void **bufs,
                          AmpStatus *st) {
    size_t n_in = amp_session_input_count(as, AMP_MODE_RUN);
    for (size_t i = 0; i < in->n; i++) {
        t[i] = in->t[i];
        AmpIoInfo io = {0};
        int dt = 0;
        for (size_t j = 0; j < n_in && !dt; j++)
            if (amp_session_input_info(as, AMP_MODE_RUN, j, &io) && io.name && strcmp(io.name, t[i].name) == 0)
                dt = io.dtype ? io.dtype : -1;
        if (t[i].dtype != AMP_DT_FLOAT || !is16(dt)) continue;
        size_t n = amp_tensor_view_bytes(&t[i]) / sizeof(float);
        uint16_t *h = malloc(n * sizeof *h + 1);
        if (!h) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
        if (dt == AMP_DT_FLOAT16) amp_f32_to_f16_n(h, t[i].data, n);
        else amp_f32_to_bf16_n(h, t[i].data, n);
        bufs[i] = h, t[i].data = h, t[i].dtype = dt;
    }
    return AMP_OK;
}

static AmpCode open_cpu(const char *path, AmpSession **s, AmpStatus *st) {
    AmpSessionOptions so = {.backend = AMP_BACKEND_CPU, .amp_auto = "0", .no_fuse = true};
    AmpCode rc = amp_session_open(path, &so, s, st);
    if (rc) amp_status_prefix(st, "%s: ", path);
    return rc;
}

int ampc_cmd_compare(CalibArgs *ca) {
    AmpStatus st = {AMP_OK, ""};
    AmpSession *fs = NULL, *as = NULL;
    Cmp c = {.st = &st};
    RunInputs in = {0};
    AmpTensorView *fo = NULL, *ao = NULL;
    AmpCode rc = open_cpu(ca->run.model, &fs, &st);
    if (!rc) rc = open_cpu(ca->amp, &as, &st);
    size_t n_out = fs ? amp_session_output_count(fs, AMP_MODE_RUN) : 0;
    if (!rc && as && amp_session_output_count(as, AMP_MODE_RUN) != n_out)
        rc = amp_fail(&st, AMP_ERR_INPUT, "the two models have different numbers of outputs");
    if (!rc) {
        c.ref.m = amp_session_model(fs);
        c.ref.g = c.ref.m->graph;
        c.amp = amp_session_model(as);
        c.ref.val = calloc(c.ref.g->n_values + 1, sizeof *c.ref.val);
        fo = calloc(n_out + 1, sizeof *fo), ao = calloc(n_out + 1, sizeof *ao);
        if (!c.ref.val || !fo || !ao) rc = amp_fail(&st, AMP_ERR_INTERNAL, "out of memory");
    }
    RunArgs ra = ca->run;
    ra.inputs = ca->n_dirs ? ca->dirs[0] : NULL;
    if (!rc) rc = ampc_run_inputs(&ra, fs, AMP_MODE_RUN, &in, &st);
    if (!rc) {
        amp_session_set_hook(fs, keep_ref, &c.ref);
        rc = amp_session_run(fs, in.t, in.n, NULL, n_out, fo, &st);
    }
    AmpTensorView *at = rc ? NULL : calloc(in.n + 1, sizeof *at);
    void **bufs = rc ? NULL : calloc(in.n + 1, sizeof *bufs);
    if (!rc && (!at || !bufs)) rc = amp_fail(&st, AMP_ERR_INTERNAL, "out of memory");
    if (!rc) rc = amp_inputs(as, &in, at, bufs, &st);
    if (!rc) {
        amp_session_set_hook(as, observe, &c);
        rc = amp_session_run(as, at, in.n, NULL, n_out, ao, &st);
    }
    for (size_t i = 0; bufs && i < in.n; i++) free(bufs[i]);
    free(bufs), free(at);
    if (!rc) {
        print_outputs(fo, ao, n_out);
        if (c.n) qsort(c.errs, c.n, sizeof *c.errs, by_local); /* qsort takes no NULL, even for 0 */
        print_nodes(&c, ca->top > 0 ? ca->top : 10);
        if (fflush(stdout) != 0) rc = amp_fail(&st, AMP_ERR_INTERNAL, "writing to standard output failed");
    }
    if (rc) ampc_say("%s", st.msg);
    for (size_t i = 0; fo && ao && i < n_out; i++) amp_tensor_view_free(&fo[i]), amp_tensor_view_free(&ao[i]);
    for (size_t i = 0; c.ref.val && i < c.ref.g->n_values; i++) amp_buf_free(&c.ref.val[i]);
    free(c.ref.val), free(c.errs), free(fo), free(ao);
    ampc_run_inputs_free(&in);
    amp_session_close(fs);
    amp_session_close(as);
    return rc;
}
