/* Control flow in the interpreter: If runs one branch, Loop and Scan their body, through
 * child executors that read the enclosing values through the parent chain; Loop and Scan
 * carry state between iterations and stack their scan outputs. Every buffer here is a
 * device buffer: conditions and trip counts are read with copy_out, the loop counter is
 * written with copy_in, and slices and stacks are device-to-device copies. A body runs
 * through the AmpExecBodyFn exec.c hands down (amp_exec_run_body), whose own If / Loop /
 * Scan nodes come back here: the interpreter's recursion, through that pointer, so this
 * file names nothing of exec.c. */
#include <stdlib.h>
#include <string.h>

#include "runtime/exec_impl.h"
#include "passes/options.h"

AmpCode amp_exec_run_if(AmpExec *e, AmpNode *n, const AmpBuf *const *in, AmpExecBodyFn run_body, AmpStatus *st) {
    if (!in[0] || in[0]->nelem != 1)
        return amp_fail(st, AMP_ERR_INPUT, "node '%s' (If): the condition must hold one element",
                        n->name ? n->name : "");
    int64_t c64;
    AmpCode rc = amp_exec_read_i64(e, in[0], "the condition", &c64, st);
    if (rc) return rc;
    bool cond = c64 != 0;
    const AmpAttr *br = amp_node_attr(n, cond ? "then_branch" : "else_branch");
    if (!br || !br->g)
        return amp_fail(st, AMP_ERR_INPUT, "node '%s' (If): no %s", n->name ? n->name : "",
                        cond ? "then_branch" : "else_branch");
    AmpExec *c;
    if ((rc = amp_exec_get_child(e, br->g, &c, st))) return rc;
    size_t no = br->g->outputs.n;
    AmpBuf *outs = calloc(no ? no : 1, sizeof *outs);
    if (!outs) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    rc = run_body(c, NULL, 0, outs, st);
    for (size_t k = 0; !rc && k < no; k++) amp_exec_take_output(e, n, (int)k, &outs[k]);
    free(outs);
    return rc;
}

/* Stacks the per-iteration buffers of one scan output along a new axis `axis` (0 for
 * Loop), in reverse iteration order when `reverse`. All parts must agree in shape. */
static AmpCode stack(const AmpExec *e, AmpBuf *parts, size_t n_parts, int axis, bool reverse, AmpBuf *out,
                     AmpStatus *st) {
    memset(out, 0, sizeof *out);
    if (!n_parts) {
        AmpBuf empty = {.dtype = AMP_DT_FLOAT, .rank = 1};
        return amp_exec_alloc_like(e, &empty, out, st);
    }
    const AmpBuf *p0 = &parts[0];
    if (p0->rank + 1 > AMP_MAX_RANK) return amp_fail(st, AMP_ERR_UNSUPPORTED, "scan output rank too large");
    if (axis < 0 || axis > p0->rank) return amp_fail(st, AMP_ERR_INPUT, "scan output axis %d out of range", axis);
    for (size_t i = 1; i < n_parts; i++) {
        bool same = parts[i].dtype == p0->dtype && parts[i].rank == p0->rank;
        for (int d = 0; same && d < p0->rank; d++) same = parts[i].dims[d] == p0->dims[d];
        if (!same) return amp_fail(st, AMP_ERR_INPUT, "scan output changes shape between iterations");
    }
    size_t each = amp_buf_bytes(p0), total;
    if (!amp_mul_size(each, n_parts, &total)) return amp_fail(st, AMP_ERR_INPUT, "scan output too large");
    out->dtype = p0->dtype;
    out->rank = p0->rank + 1;
    for (int d = 0, k = 0; d < out->rank; d++) out->dims[d] = d == axis ? (int64_t)n_parts : p0->dims[k++];
    out->nelem = p0->nelem * n_parts;
    AmpBuf shape = *out;
    AmpCode rc = amp_exec_alloc_like(e, &shape, out, st);
    if (rc) return rc;
    /* out viewed as (outer, n_parts, inner) with outer = prod(dims[:axis]) */
    uint64_t outer = 1;
    for (int d = 0; d < axis; d++) outer *= (uint64_t)p0->dims[d];
    size_t inner = outer ? each / outer : 0;
    for (size_t t = 0; t < n_parts && inner && !rc; t++) {
        const char *src = parts[reverse ? n_parts - 1 - t : t].data;
        for (uint64_t o = 0; o < outer && !rc; o++)
            rc = e->be->copy(e->be, (char *)out->data + (o * n_parts + t) * inner, src + o * inner, inner, st);
    }
    if (rc) amp_exec_buf_free(e, out);
    return rc;
}

/* Room for one more turn's scan outputs: each of the n_scan arrays grows to twice *cap
 * (8 at first). */
static AmpCode grow_scans(AmpBuf **scans, int n_scan, size_t *cap, AmpStatus *st) {
    size_t c = *cap ? *cap * 2 : 8;
    for (int s = 0; s < n_scan; s++) {
        AmpBuf *p = realloc(scans[s], c * sizeof *p);
        if (!p) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
        scans[s] = p;
    }
    *cap = c;
    return AMP_OK;
}

/* A Loop's outputs once the turns are over (rc: how they ended): the final loop-carried
 * values, then each scan output stacked over the `iters` turns; everything is freed on
 * failure. Returns the status. */
static AmpCode loop_outputs(AmpExec *e, AmpNode *n, AmpCode rc, AmpBuf *carried, int n_carried, AmpBuf **scans,
                            int n_scan, size_t iters, AmpStatus *st) {
    for (int k = 0; k < n_carried; k++) {
        if (!rc) amp_exec_take_output(e, n, k, &carried[k]);
        else amp_exec_buf_free(e, &carried[k]);
    }
    for (int s = 0; s < n_scan; s++) {
        if (!rc) {
            AmpBuf stacked;
            rc = stack(e, scans[s], iters, 0, false, &stacked, st);
            if (!rc) amp_exec_take_output(e, n, n_carried + s, &stacked);
        }
        for (size_t i = 0; i < iters; i++) amp_exec_buf_free(e, &scans[s][i]);
        free(scans[s]);
    }
    return rc;
}

/* A Loop node's body, its counts and its trip count and first condition (inputs M and
 * cond, either absent: no limit, true), checked against the node. */
static AmpCode loop_start(AmpExec *e, AmpNode *n, const AmpBuf *const *in, AmpGraph **body, int64_t *max_trip,
                          bool *cond, AmpStatus *st) {
    const AmpAttr *ba = amp_node_attr(n, "body");
    if (!ba || !ba->g) return amp_fail(st, AMP_ERR_INPUT, "node '%s' (Loop): no body", n->name ? n->name : "");
    *body = ba->g;
    int n_carried = n->n_inputs - 2;
    if (n_carried < 0 || (*body)->inputs.n != (size_t)n_carried + 2 || (*body)->outputs.n < (size_t)n_carried + 1)
        return amp_fail(st, AMP_ERR_INPUT, "node '%s' (Loop): body inputs/outputs do not match the node",
                        n->name ? n->name : "");
    for (int k = 0; k < n_carried; k++)
        if (!in[k + 2])
            return amp_fail(st, AMP_ERR_INPUT, "node '%s' (Loop): loop-carried input %d is missing",
                            n->name ? n->name : "", k);
    int64_t c64 = 1;
    *max_trip = INT64_MAX;
    AmpCode rc = in[0] ? amp_exec_read_i64(e, in[0], "the trip count M", max_trip, st) : AMP_OK;
    if (!rc && in[1]) rc = amp_exec_read_i64(e, in[1], "the condition", &c64, st);
    if (rc) {
        amp_status_prefix(st, "node '%s' (Loop): ", n->name ? n->name : "");
        return rc;
    }
    *cond = c64 != 0;
    return AMP_OK;
}

/* A running Loop: its body's executor and what the turns carry. */
typedef struct LoopRun {
    AmpExec *e, *c;        /* the node's executor, the body's */
    AmpExecBodyFn run;     /* runs the body (exec.c's) */
    AmpGraph *body;
    int n_carried, n_scan;
    AmpNamedBuf *bin;      /* the body's inputs */
    AmpBuf *carried;       /* owned copies of the loop-carried values */
    AmpBuf *bout;          /* the body's outputs */
    AmpBuf **scans;        /* per scan output: each turn's */
    size_t cap, iters;
    /* The body's iteration number and condition inputs, device scalars written each turn. */
    AmpBuf iter_dev, cond_dev;
} LoopRun;

/* Turn `it` of the body: the carried values become its outputs, the scan outputs are kept,
 * *cond is the body's condition output. */
static AmpCode loop_turn(LoopRun *r, int64_t it, bool *cond, AmpStatus *st) {
    AmpExec *e = r->e;
    int64_t iter_val = it, c64 = 0;
    uint8_t cond_val = *cond;
    AmpCode rc;
    if ((rc = e->be->copy_in(e->be, r->iter_dev.data, &iter_val, sizeof iter_val, st)) ||
        (rc = e->be->copy_in(e->be, r->cond_dev.data, &cond_val, sizeof cond_val, st)))
        return rc;
    r->bin[0].name = r->body->inputs.items[0].value->name;
    r->bin[0].buf = r->iter_dev;
    r->bin[1].name = r->body->inputs.items[1].value->name;
    r->bin[1].buf = r->cond_dev;
    for (int k = 0; k < r->n_carried; k++) {
        r->bin[k + 2].name = r->body->inputs.items[k + 2].value->name;
        r->bin[k + 2].buf = r->carried[k];
    }
    if ((rc = r->run(r->c, r->bin, (size_t)r->n_carried + 2, r->bout, st))) return rc;
    rc = amp_exec_read_i64(e, &r->bout[0], "the body's condition output", &c64, st);
    *cond = c64 != 0;
    amp_exec_buf_free(e, &r->bout[0]);
    for (int k = 0; k < r->n_carried; k++) {
        amp_exec_buf_free(e, &r->carried[k]);
        r->carried[k] = r->bout[k + 1];
    }
    if (!rc && r->iters == r->cap) rc = grow_scans(r->scans, r->n_scan, &r->cap, st);
    if (rc) {
        for (int s = 0; s < r->n_scan; s++) amp_exec_buf_free(e, &r->bout[1 + r->n_carried + s]);
        return rc;
    }
    for (int s = 0; s < r->n_scan; s++) r->scans[s][r->iters] = r->bout[1 + r->n_carried + s];
    r->iters++;
    return AMP_OK;
}

AmpCode amp_exec_run_loop(AmpExec *e, AmpNode *n, const AmpBuf *const *in, AmpExecBodyFn run_body, AmpStatus *st) {
    LoopRun r = {.e = e, .run = run_body, .n_carried = n->n_inputs - 2};
    int64_t max_trip = INT64_MAX;
    bool cond = true;
    AmpCode rc = loop_start(e, n, in, &r.body, &max_trip, &cond, st);
    if (rc || (rc = amp_exec_get_child(e, r.body, &r.c, st))) return rc;
    r.n_scan = (int)r.body->outputs.n - 1 - r.n_carried;
    r.bin = calloc((size_t)r.n_carried + 2, sizeof *r.bin);
    r.carried = calloc((size_t)r.n_carried + 1, sizeof *r.carried);
    r.bout = calloc(r.body->outputs.n, sizeof *r.bout);
    r.scans = calloc((size_t)r.n_scan + 1, sizeof *r.scans);
    r.iter_dev = (AmpBuf){.dtype = AMP_DT_INT64, .rank = 0, .nelem = 1};
    r.cond_dev = (AmpBuf){.dtype = AMP_DT_BOOL, .rank = 0, .nelem = 1};
    if (!r.bin || !r.carried || !r.bout || !r.scans) {
        rc = amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
        goto done;
    }
    if ((rc = amp_exec_alloc_like(e, &r.iter_dev, &r.iter_dev, st)) ||
        (rc = amp_exec_alloc_like(e, &r.cond_dev, &r.cond_dev, st)))
        goto done;
    for (int k = 0; k < r.n_carried && !rc; k++) rc = amp_exec_copy_buf(e, in[k + 2], &r.carried[k], st);
    for (int64_t it = 0; !rc && it < max_trip && cond; it++) {
        if ((rc = amp_exec_check_iterations(e, n, (uint64_t)it, st)) || (rc = amp_exec_check_deadline(e, st))) break;
        rc = loop_turn(&r, it, &cond, st);
    }
    rc = loop_outputs(e, n, rc, r.carried, r.n_carried, r.scans, r.n_scan, r.iters, st);
done:
    amp_exec_buf_free(e, &r.iter_dev);
    amp_exec_buf_free(e, &r.cond_dev);
    free(r.bin), free(r.carried), free(r.bout), free(r.scans);
    return rc;
}

AmpCode amp_exec_check_iterations(const AmpExec *e, const AmpNode *n, uint64_t done, AmpStatus *st) {
    uint64_t cap = e->opt.max_iterations;
    if (!cap || done < cap) return AMP_OK;
    return amp_fail(st, AMP_ERR_UNSUPPORTED, "node '%s' (%s): more than %llu iterations (%s)", n->name ? n->name : "",
                    n->op_type, (unsigned long long)cap, AMP_OPT_SAY("max-iterations", NULL));
}

AmpCode amp_exec_read_i64(const AmpExec *e, const AmpBuf *b, const char *what, int64_t *out, AmpStatus *st) {
    size_t bytes = 0;
    /* A float trip count of 3.0 is not 3 iterations, nor an empty tensor any number. */
    if (!b || b->nelem < 1 || amp_dtype_is_float(b->dtype) || !amp_tensor_expected_bytes(b->dtype, 1, &bytes) ||
        bytes > 8 || b->dtype == AMP_DT_STRING)
        return amp_fail(st, AMP_ERR_INPUT, "%s must hold an integer or bool element, not %s[%llu]", what,
                        b ? amp_dtype_name(b->dtype) : "nothing", b ? (unsigned long long)b->nelem : 0ull);
    uint64_t raw = 0; /* element 0, copied out of the device */
    AmpCode rc = e->be->copy_out(e->be, &raw, b->data, bytes, st);
    if (rc) return rc;
    AmpBuf host = *b;
    host.nelem = 1;
    host.data = &raw;
    *out = amp_buf_get_i64(&host, 0);
    return AMP_OK;
}

/* Reads an ints attribute entry, default `dflt` when the attribute or entry is absent. */
static int64_t attr_int_at(const AmpNode *n, const char *name, size_t i, int64_t dflt) {
    const AmpAttr *a = amp_node_attr(n, name);
    return a && a->type == AMP_ATTR_INTS && i < a->n_ints ? a->ints[i] : dflt;
}

enum { SCAN_MAX_INPUTS = AMP_MAX_RANK * 8 };

/* Scan's sequence length L and each scan input's axis (negative axes count from the end);
 * every input must be present. */
static AmpCode scan_axes(const AmpNode *n, const AmpBuf *const *in, int N, int M, int *axes, int64_t *L,
                         AmpStatus *st) {
    const char *nm = n->name ? n->name : "";
    if (M > SCAN_MAX_INPUTS) return amp_fail(st, AMP_ERR_UNSUPPORTED, "node '%s' (Scan): too many scan inputs", nm);
    for (int j = 0; j < N + M; j++)
        if (!in[j]) return amp_fail(st, AMP_ERR_INPUT, "node '%s' (Scan): input %d is missing", nm, j);
    for (int j = 0; j < M; j++) {
        const AmpBuf *x = in[N + j];
        if (x->rank < 1 || !amp_norm_axis(attr_int_at(n, "scan_input_axes", (size_t)j, 0), x->rank, &axes[j]))
            return amp_fail(st, AMP_ERR_INPUT, "node '%s' (Scan): bad scan axis for scan input %d", nm, j);
        if (*L >= 0 && x->dims[axes[j]] != *L)
            return amp_fail(st, AMP_ERR_INPUT, "node '%s' (Scan): scan inputs disagree on the sequence length", nm);
        *L = x->dims[axes[j]];
    }
    return AMP_OK;
}

/* The buffer one turn's slice of scan input x is copied into: (outer, L, inner) ->
 * (outer, inner). */
static AmpCode scan_slice(AmpExec *e, const AmpBuf *x, int axis, int64_t L, AmpBuf *sl, AmpStatus *st) {
    sl->dtype = x->dtype;
    sl->rank = x->rank - 1;
    for (int d = 0, k = 0; d < x->rank; d++)
        if (d != axis) sl->dims[k++] = x->dims[d];
    sl->nelem = L ? x->nelem / (uint64_t)L : 0;
    AmpBuf shape = *sl;
    return amp_exec_alloc_like(e, &shape, sl, st);
}

/* Turn t's slice of every scan input in[N ..N+M) into slice[0..M): element t along its
 * scan axis, or L - 1 - t for an input scanned backwards. */
static AmpCode scan_inputs(AmpExec *e, const AmpNode *n, const AmpBuf *const *in, int N, int M, const int *axes,
                           int64_t L, int64_t t, AmpBuf *slice, AmpStatus *st) {
    AmpCode rc = AMP_OK;
    for (int j = 0; j < M; j++) {
        const AmpBuf *x = in[N + j];
        int64_t at = attr_int_at(n, "scan_input_directions", (size_t)j, 0) ? L - 1 - t : t;
        uint64_t outer = 1;
        for (int d = 0; d < axes[j]; d++) outer *= (uint64_t)x->dims[d];
        size_t inner = outer ? amp_buf_bytes(&slice[j]) / outer : 0;
        for (uint64_t o = 0; o < outer && inner && !rc; o++)
            rc = e->be->copy(e->be, (char *)slice[j].data + o * inner,
                             (const char *)x->data + (o * (uint64_t)L + (uint64_t)at) * inner, inner, st);
    }
    return rc;
}

/* A Scan's outputs once the turns are over (rc: how they ended): the final states, then
 * each scan output stacked over the L turns along its axis; everything is freed on
 * failure. Returns the status. */
static AmpCode scan_outputs(AmpExec *e, AmpNode *n, AmpCode rc, AmpBuf *state, int N, AmpBuf **scans, int K,
                            int64_t L, AmpStatus *st) {
    for (int k = 0; k < N; k++) {
        if (!rc) amp_exec_take_output(e, n, k, &state[k]);
        else amp_exec_buf_free(e, &state[k]);
    }
    for (int k = 0; k < K; k++) {
        if (!scans[k]) continue;
        if (!rc) {
            AmpBuf stacked;
            int rank = scans[k][0].rank + 1, axis = 0;
            if (L > 0 && !amp_norm_axis(attr_int_at(n, "scan_output_axes", (size_t)k, 0), rank, &axis))
                rc = amp_fail(st, AMP_ERR_INPUT, "node '%s' (Scan): bad scan_output_axes for output %d",
                              n->name ? n->name : "", k);
            if (!rc)
                rc = stack(e, scans[k], (size_t)L, axis, attr_int_at(n, "scan_output_directions", (size_t)k, 0) != 0,
                           &stacked, st);
            if (!rc) amp_exec_take_output(e, n, N + k, &stacked);
        }
        for (int64_t t = 0; t < L; t++) amp_exec_buf_free(e, &scans[k][t]);
        free(scans[k]);
    }
    return rc;
}

/* Scan (opset 9 and later): N state variables, then M scan inputs sliced along their scan
 * axis each iteration; the body returns N new states and K per-iteration slices that are
 * stacked along each scan output's axis. */
AmpCode amp_exec_run_scan(AmpExec *e, AmpNode *n, const AmpBuf *const *in, AmpExecBodyFn run_body, AmpStatus *st) {
    const char *nm = n->name ? n->name : "";
    if (amp_model_opset(e->m, n->domain) < 9)
        return amp_fail(st, AMP_ERR_UNSUPPORTED, "node '%s' (Scan): Scan-8 (batched, sequence_lens) is not supported", nm);
    const AmpAttr *ba = amp_node_attr(n, "body");
    int64_t m_scan = amp_node_attr_int(n, "num_scan_inputs", -1);
    if (!ba || !ba->g || m_scan < 1 || m_scan > n->n_inputs)
        return amp_fail(st, AMP_ERR_INPUT, "node '%s' (Scan): needs a body and 1..%d num_scan_inputs", nm, n->n_inputs);
    AmpGraph *body = ba->g;
    int M = (int)m_scan, N = n->n_inputs - M, K = n->n_outputs - N;
    if (K < 0 || body->inputs.n != (size_t)(N + M) || body->outputs.n != (size_t)(N + K))
        return amp_fail(st, AMP_ERR_INPUT, "node '%s' (Scan): body inputs/outputs do not match the node", nm);

    int64_t L = -1;
    int axes[SCAN_MAX_INPUTS];
    AmpCode rc = scan_axes(n, in, N, M, axes, &L, st);
    AmpExec *c;
    if (rc || (rc = amp_exec_get_child(e, body, &c, st))) return rc;

    AmpNamedBuf *bin = calloc((size_t)(N + M) + 1, sizeof *bin);
    AmpBuf *state = calloc((size_t)N + 1, sizeof *state);  /* owned copies */
    AmpBuf *slice = calloc((size_t)M + 1, sizeof *slice);  /* owned, reused */
    AmpBuf *bout = calloc((size_t)(N + K) + 1, sizeof *bout);
    AmpBuf **scans = calloc((size_t)K + 1, sizeof *scans);
    if (!bin || !state || !slice || !bout || !scans) {
        rc = amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
        goto done;
    }
    for (int k = 0; k < K && !rc; k++)
        if (!(scans[k] = calloc((size_t)L + 1, sizeof **scans))) rc = amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    for (int k = 0; k < N && !rc; k++) rc = amp_exec_copy_buf(e, in[k], &state[k], st);
    for (int j = 0; j < M && !rc; j++) rc = scan_slice(e, in[N + j], axes[j], L, &slice[j], st);
    for (int j = 0; j < M; j++) bin[N + j].name = body->inputs.items[N + j].value->name;
    for (int k = 0; k < N; k++) bin[k].name = body->inputs.items[k].value->name;
    for (int64_t t = 0; !rc && t < L; t++) {
        if ((rc = amp_exec_check_iterations(e, n, (uint64_t)t, st)) || (rc = amp_exec_check_deadline(e, st))) break;
        rc = scan_inputs(e, n, in, N, M, axes, L, t, slice, st);
        for (int j = 0; j < M; j++) bin[N + j].buf = slice[j];
        for (int k = 0; k < N; k++) bin[k].buf = state[k];
        if (rc || (rc = run_body(c, bin, (size_t)(N + M), bout, st))) break;
        for (int k = 0; k < N; k++) {
            amp_exec_buf_free(e, &state[k]);
            state[k] = bout[k];
        }
        for (int k = 0; k < K; k++) scans[k][t] = bout[N + k];
    }
    rc = scan_outputs(e, n, rc, state, N, scans, K, L, st);
done:
    for (int j = 0; slice && j < M; j++) amp_exec_buf_free(e, &slice[j]);
    free(bin), free(state), free(slice), free(bout), free(scans);
    return rc;
}
