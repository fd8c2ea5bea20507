/* Control flow in the interpreter: If runs one branch and Loop its body through child
 * executors that read the enclosing values through the parent chain; Loop carries its
 * state between iterations and stacks its scan outputs. */
#include <stdlib.h>
#include <string.h>

#include "exec_impl.h"

AmpCode amp_exec_run_if(AmpExec *e, AmpNode *n, const AmpBuf *const *in, AmpStatus *st) {
    if (!in[0] || in[0]->nelem != 1)
        return amp_fail(st, AMP_ERR_INPUT, "node '%s' (If): the condition must hold one element",
                        n->name ? n->name : "");
    bool cond = amp_buf_get_i64(in[0], 0) != 0;
    const AmpAttr *br = amp_node_attr(n, cond ? "then_branch" : "else_branch");
    if (!br || !br->g)
        return amp_fail(st, AMP_ERR_INPUT, "node '%s' (If): no %s", n->name ? n->name : "",
                        cond ? "then_branch" : "else_branch");
    AmpExec *c;
    AmpCode rc = amp_exec_get_child(e, br->g, &c, st);
    if (rc) return rc;
    size_t no = br->g->outputs.n;
    AmpBuf *outs = calloc(no ? no : 1, sizeof *outs);
    if (!outs) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    rc = amp_exec_run(c, NULL, 0, outs, st);
    for (size_t k = 0; k < no; k++) {
        if (!rc) amp_exec_take_output(e, n, (int)k, &outs[k]);
        else amp_buf_free(&outs[k]);
    }
    free(outs);
    return rc;
}

/* Stacks the per-iteration buffers of one scan output along a new axis 0. */
static AmpCode stack(AmpBuf *parts, size_t n_parts, AmpBuf *out, AmpStatus *st) {
    memset(out, 0, sizeof *out);
    if (!n_parts) {
        out->dtype = AMP_DT_FLOAT;
        out->rank = 1;
        out->data = malloc(1);
        return out->data ? AMP_OK : amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    }
    const AmpBuf *p0 = &parts[0];
    if (p0->rank + 1 > AMP_MAX_RANK) return amp_fail(st, AMP_ERR_UNSUPPORTED, "Loop scan output rank too large");
    size_t each = amp_buf_bytes(p0);
    for (size_t i = 1; i < n_parts; i++)
        if (parts[i].nelem != p0->nelem || parts[i].dtype != p0->dtype)
            return amp_fail(st, AMP_ERR_INPUT, "Loop: scan output changes shape between iterations");
    size_t total;
    if (!amp_mul_size(each, n_parts, &total)) return amp_fail(st, AMP_ERR_INPUT, "Loop: scan output too large");
    out->dtype = p0->dtype;
    out->rank = p0->rank + 1;
    out->dims[0] = (int64_t)n_parts;
    for (int i = 0; i < p0->rank; i++) out->dims[i + 1] = p0->dims[i];
    out->nelem = p0->nelem * n_parts;
    out->data = malloc(total ? total : 1);
    if (!out->data) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    for (size_t i = 0; i < n_parts; i++)
        if (each) memcpy((char *)out->data + i * each, parts[i].data, each);
    return AMP_OK;
}

AmpCode amp_exec_run_loop(AmpExec *e, AmpNode *n, const AmpBuf *const *in, AmpStatus *st) {
    const AmpAttr *ba = amp_node_attr(n, "body");
    if (!ba || !ba->g) return amp_fail(st, AMP_ERR_INPUT, "node '%s' (Loop): no body", n->name ? n->name : "");
    AmpGraph *body = ba->g;
    int n_carried = n->n_inputs - 2;
    if (n_carried < 0 || body->inputs.n != (size_t)n_carried + 2 || body->outputs.n < (size_t)n_carried + 1)
        return amp_fail(st, AMP_ERR_INPUT, "node '%s' (Loop): body inputs/outputs do not match the node",
                        n->name ? n->name : "");
    for (int k = 0; k < n_carried; k++)
        if (!in[k + 2])
            return amp_fail(st, AMP_ERR_INPUT, "node '%s' (Loop): loop-carried input %d is missing",
                            n->name ? n->name : "", k);
    int n_scan = (int)body->outputs.n - 1 - n_carried;
    int64_t max_trip = in[0] ? amp_buf_get_i64(in[0], 0) : INT64_MAX;
    bool cond = in[1] ? amp_buf_get_i64(in[1], 0) != 0 : true;
    AmpExec *c;
    AmpCode rc = amp_exec_get_child(e, body, &c, st);
    if (rc) return rc;

    size_t nb = body->outputs.n;
    AmpNamedBuf *bin = calloc((size_t)n_carried + 2, sizeof *bin);
    AmpBuf *carried = calloc((size_t)n_carried + 1, sizeof *carried); /* owned copies */
    AmpBuf *bout = calloc(nb, sizeof *bout);
    AmpBuf **scans = calloc((size_t)n_scan + 1, sizeof *scans);
    size_t cap = 0, iters = 0;
    int64_t iter_val = 0;
    uint8_t cond_val = 1;
    if (!bin || !carried || !bout || !scans) {
        rc = amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
        goto done;
    }
    for (int k = 0; k < n_carried && !rc; k++) rc = amp_exec_copy_buf(e, in[k + 2], &carried[k], st);
    for (int64_t it = 0; !rc && it < max_trip && cond; it++) {
        iter_val = it;
        cond_val = cond;
        bin[0].name = body->inputs.items[0].value->name;
        bin[0].buf = (AmpBuf){.dtype = AMP_DT_INT64, .rank = 0, .nelem = 1, .data = &iter_val};
        bin[1].name = body->inputs.items[1].value->name;
        bin[1].buf = (AmpBuf){.dtype = AMP_DT_BOOL, .rank = 0, .nelem = 1, .data = &cond_val};
        for (int k = 0; k < n_carried; k++) {
            bin[k + 2].name = body->inputs.items[k + 2].value->name;
            bin[k + 2].buf = carried[k];
        }
        if ((rc = amp_exec_run(c, bin, (size_t)n_carried + 2, bout, st))) break;
        cond = amp_buf_get_i64(&bout[0], 0) != 0;
        amp_buf_free(&bout[0]);
        for (int k = 0; k < n_carried; k++) {
            amp_buf_free(&carried[k]);
            carried[k] = bout[k + 1];
        }
        if (iters == cap) {
            cap = cap ? cap * 2 : 8;
            for (int s = 0; s < n_scan; s++) {
                AmpBuf *p = realloc(scans[s], cap * sizeof *p);
                if (!p) {
                    rc = amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
                    break;
                }
                scans[s] = p;
            }
            if (rc) {
                for (int s = 0; s < n_scan; s++) amp_buf_free(&bout[1 + n_carried + s]);
                break;
            }
        }
        for (int s = 0; s < n_scan; s++) scans[s][iters] = bout[1 + n_carried + s];
        iters++;
    }
    for (int k = 0; k < n_carried; k++) {
        if (!rc) amp_exec_take_output(e, n, k, &carried[k]);
        else amp_buf_free(&carried[k]);
    }
    for (int s = 0; s < n_scan; s++) {
        if (!rc) {
            AmpBuf stacked;
            rc = stack(scans[s], iters, &stacked, st);
            if (!rc) amp_exec_take_output(e, n, n_carried + s, &stacked);
        }
        for (size_t i = 0; i < iters; i++) amp_buf_free(&scans[s][i]);
        free(scans[s]);
    }
done:
    free(bin), free(carried), free(bout), free(scans);
    return rc;
}
