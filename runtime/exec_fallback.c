/* The CPU fallback of the interpreter (AmpExecOptions.fallback): a node the backend has
 * no kernel for runs on a host-memory backend with copies around it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/exec_impl.h"

#define nname amp_exec_node_name

/* ---- the fallback: a node the backend lacks, on the CPU ----------------------------
 * Its inputs are copied out of the device into host buffers, the kernel runs on the
 * fallback backend (host memory) into host copies of its placed outputs, which are then
 * copied in; an output it sizes itself (a data-dependent shape) gets its device buffer
 * from the executor and a host shadow, copied in after the kernel. */

typedef struct FbAlloc {
    AllocCtx *ac;
    AmpBackend *fb;
    AmpBuf *hout;             /* host copies of the placed outputs */
    AmpBuf shadow[AMP_EXEC_MAX_OUT];        /* outputs the kernel asked for: host side ... */
    AmpBuf *dev[AMP_EXEC_MAX_OUT];         /* ... and the device buffer the executor gave it */
} FbAlloc;

static AmpBuf *fallback_alloc(void *ctx, int index, int dtype, int rank, const int64_t *dims, AmpStatus *st) {
    FbAlloc *f = ctx;
    const AmpNode *n = f->ac->n;
    if (index < 0 || index >= AMP_EXEC_MAX_OUT || index >= n->n_outputs) {
        amp_fail(st, AMP_ERR_INTERNAL, "node '%s' (%s): kernel wrote output %d of %d", nname(n), n->op_type, index,
                 n->n_outputs);
        return NULL;
    }
    if (f->ac->placed[index]) {
        const AmpBuf *p = &f->hout[index];
        if (dtype != p->dtype || rank != p->rank || (rank > 0 && memcmp(dims, p->dims, (size_t)rank * sizeof *dims))) {
            amp_fail(st, AMP_ERR_INTERNAL, "node '%s' (%s): the kernel made output %d in another shape than its "
                     "shape function", nname(n), n->op_type, index);
            return NULL;
        }
        return &f->hout[index];
    }
    AmpBuf *d = amp_exec_alloc(f->ac, index, dtype, rank, dims, st);
    if (!d) return NULL;
    if (f->shadow[index].data) f->fb->free(f->fb, f->shadow[index].data);
    f->shadow[index] = *d;
    if (!(f->shadow[index].data = f->fb->alloc(f->fb, amp_buf_bytes(d)))) {
        amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
        return NULL;
    }
    f->dev[index] = d;
    return &f->shadow[index];
}

/* A host copy, on the fallback fb, of device buffer src of be (dst->data NULL when out of
 * memory). */
static AmpCode to_host(AmpBackend *fb, AmpBackend *be, const AmpBuf *src, AmpBuf *dst, AmpStatus *st) {
    *dst = *src;
    size_t bytes = amp_buf_bytes(dst);
    if (!(dst->data = fb->alloc(fb, bytes))) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    return bytes ? be->copy_out(be, dst->data, src->data, bytes, st) : AMP_OK;
}

/* The kernel's outputs back on the device: the placed ones (hout[0..n_out)), then those
 * it asked for. */
static AmpCode copy_back(AmpBackend *be, const AmpKernelCtx *k, const AmpBuf *hout, int n_out, const FbAlloc *fa,
                         AmpStatus *st) {
    AmpCode rc = AMP_OK;
    for (int o = 0; o < n_out && !rc; o++)
        if (k->out[o].data) rc = be->copy_in(be, k->out[o].data, hout[o].data, amp_buf_bytes(&hout[o]), st);
    for (int o = 0; o < AMP_EXEC_MAX_OUT && !rc; o++)
        if (fa->dev[o]) rc = be->copy_in(be, fa->dev[o]->data, fa->shadow[o].data, amp_buf_bytes(fa->dev[o]), st);
    return rc;
}

AmpCode amp_exec_run_fallback(AmpExec *e, size_t i, AmpKernelCtx *k, AllocCtx *ac, AmpStatus *st) {
    AmpBackend *fb = e->node_be[i], *be = e->be;
    AmpBuf hin_stack[AMP_EXEC_MAX_IN], hout[AMP_EXEC_MAX_OUT], *hin = hin_stack;
    const AmpBuf *hinp_stack[AMP_EXEC_MAX_IN], **hinp = hinp_stack;
    if (k->n_in > AMP_EXEC_MAX_IN) { /* a variadic node with many inputs */
        hin = malloc((size_t)k->n_in * sizeof *hin);
        hinp = malloc((size_t)k->n_in * sizeof *hinp);
        if (!hin || !hinp) {
            if (hin != hin_stack) free(hin);
            free(hinp == hinp_stack ? NULL : hinp);
            return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
        }
    }
    FbAlloc fa = {.ac = ac, .fb = fb, .hout = hout};
    AmpCode rc = AMP_OK;
    int n_in = 0, n_out = 0;
    for (; n_in < k->n_in && !rc; n_in++) {
        hinp[n_in] = NULL;
        hin[n_in].data = NULL;
        if (!k->in[n_in]) continue;
        rc = to_host(fb, be, k->in[n_in], &hin[n_in], st);
        hinp[n_in] = &hin[n_in];
    }
    for (; n_out < k->n_out && !rc; n_out++) {
        hout[n_out] = k->out[n_out];
        if (!hout[n_out].data) continue;
        if (!(hout[n_out].data = fb->alloc(fb, amp_buf_bytes(&hout[n_out]))))
            rc = amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    }
    AmpBuf hgate = {0};
    if (!rc && k->gate) rc = to_host(fb, be, k->gate, &hgate, st); /* a folded update gate (fuse.c): one bool */
    if (!rc) {
        AmpKernelCtx hk = *k;
        hk.gate = k->gate ? &hgate : NULL;
        hk.in = hinp;
        hk.out = hout;
        hk.alloc = fallback_alloc;
        hk.alloc_ctx = &fa;
        rc = fb->run_node(fb, &e->kernels[i], &hk);
    }
    if (!rc) rc = copy_back(be, k, hout, n_out, &fa, st);
    for (int j = 0; j < n_in; j++)
        if (hinp[j] && hin[j].data) fb->free(fb, hin[j].data);
    for (int o = 0; o < n_out; o++)
        if (k->out[o].data && hout[o].data) fb->free(fb, hout[o].data);
    for (int o = 0; o < AMP_EXEC_MAX_OUT; o++)
        if (fa.shadow[o].data) fb->free(fb, fa.shadow[o].data);
    if (hgate.data) fb->free(fb, hgate.data);
    if (hin != hin_stack) free(hin), free(hinp);
    return rc;
}

/* The name node i of x is listed under, or NULL when it is not one `fused` (fused nodes
 * and optimizers with a folded gate) or !`fused` (nodes on the fallback) lists. */
static const char *listed_as(const AmpExec *x, size_t i, bool fused) {
    const AmpNode *n = x->nodes[i];
    const char *op = n->op_type ? n->op_type : "?";
    if (!fused) return x->node_be[i] && x->node_be[i] != x->be ? op : NULL;
    if (x->gate[i]) return n->op == AMP_OP_Adam ? "Adam+gate" : n->op == AMP_OP_Momentum ? "Momentum+gate" : "Adagrad+gate";
    /* a node the fusion made is in no graph (fuse_node.c), whatever its domain: the CPU's
     * weight gradients are com.microsoft ConvGrad nodes (fuse_wgrad.c) */
    /* (ai.ampc AllReduceMean, the allreduce pass's node in the graph, fuses nothing) */
    if (n->op == AMP_OP_Ampc_AllReduceMean) return NULL;
    return n->id == UINT32_MAX || (n->domain && strcmp(n->domain, "ai.ampc") == 0) ? op : NULL;
}

/* Op types in first-met order, each with its count over the executors es[0..n) and
 * their bodies. */
static void list_ops(const AmpExec *const *es, size_t n, char *buf, size_t len, bool fused) {
    if (!len) return;
    buf[0] = '\0';
    size_t at = 0;
    const AmpExec *stack[64];
    int sp = 0;
    const char *seen[64];
    size_t count[64];
    int n_seen = 0;
    for (size_t k = n; k-- > 0 && sp < 64;) stack[sp++] = es[k];
    while (sp) {
        const AmpExec *x = stack[--sp];
        for (size_t i = 0; i < x->n_nodes; i++) {
            const char *op = listed_as(x, i, fused);
            if (!op) continue;
            int j = 0;
            while (j < n_seen && strcmp(seen[j], op) != 0) j++;
            if (j == n_seen && n_seen < 64) seen[n_seen] = op, count[n_seen++] = 0;
            if (j < n_seen) count[j]++;
        }
        for (const AmpExec *c = x->children; c && sp < 64; c = c->next_sibling) stack[sp++] = c;
    }
    for (int j = 0; j < n_seen && at + 1 < len; j++) {
        int w = snprintf(buf + at, len - at, "%s%s x%zu", j ? ", " : "", seen[j], count[j]);
        if (w < 0) break;
        at += (size_t)w;
    }
}

void amp_exec_fallback_ops(const AmpExec *const *es, size_t n, char *buf, size_t len) {
    list_ops(es, n, buf, len, false);
}

void amp_exec_fused_ops(const AmpExec *const *es, size_t n, char *buf, size_t len) {
    list_ops(es, n, buf, len, true);
}
