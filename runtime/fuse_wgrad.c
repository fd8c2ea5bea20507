/* The plan-level fusion's convolution weight gradients (fuse.h; docs/internals.md,
 * "Fusion"), for a backend that asks for them (AmpBackend.fuse_cpu: the CPU).
 * `ampc grad` writes the weight gradient dW [M, C, k...] of Y = Conv(X, W) (strides s,
 * dilations d, pads p, no group) as one Conv over the batch-transposed tensors
 * (passes/grad_rules_conv.c, filter_grad), a valid ONNX graph every runtime takes:
 *     dW = Transpose(Slice(Conv(Transpose(X), Transpose(dY), strides d, dilations s, pads p)))
 * each Transpose swapping axes 0 and 1, the Slice (cutting the Conv's output to k) only
 * where the window overshoots. On a CPU the three Transposes copy every activation and
 * gradient once more and the Conv reads them in layouts no convolution library is made for
 * (oneDNN's reorders of the swapped layouts cost more than its convolution). The group
 * becomes one com.microsoft ConvGrad (dY, X, no W) -> (no dX, dW) with the forward
 * convolution's geometry (strides s, dilations d, pads p, kernel_shape k), which the CPU
 * computes with oneDNN's backward weights on the plain layouts: the same sums, in another
 * order (float32 reassociation). It writes dW straight into the gradient output where an
 * Identity copies dW there (as `ampc grad` names each gradient), and in float32 where a
 * Cast widens a bfloat16 dW for the update (AMP). */
#include <string.h>

#include "runtime/fuse_state.h"

enum { MAXS = AMP_MAX_RANK - 2 }; /* spatial axes */

/* v's dims, rank r, every one a known positive number. */
static bool static_dims(const AmpValue *v, int r, int64_t *d) {
    if (!v || v->type.kind != AMP_TYPE_TENSOR || v->type.rank != r) return false;
    for (int i = 0; i < r; i++)
        if ((d[i] = v->type.dims[i].value) <= 0) return false;
    return true;
}

/* n is a Transpose of a rank-r tensor swapping axes 0 and 1, and nothing else. */
static bool swaps01(const AmpNode *n, int r) {
    const AmpAttr *a = n && n->op == AMP_OP_Transpose && n->n_inputs == 1 && n->n_attrs == 1 && n->inputs[0]
                           ? amp_node_attr(n, "perm")
                           : NULL;
    if (!a || a->type != AMP_ATTR_INTS || a->n_ints != (size_t)r) return false;
    for (int i = 0; i < r; i++)
        if (a->ints[i] != (i < 2 ? 1 - i : i)) return false;
    return true;
}

/* The n ints of attribute `name` of node c (dflt each where absent); false where it holds
 * another count or type. */
static bool ints_of(const AmpNode *c, const char *name, int n, int64_t dflt, int64_t *out) {
    const AmpAttr *a = amp_node_attr(c, name);
    if (a && (a->type != AMP_ATTR_INTS || a->n_ints != (size_t)n)) return false;
    for (int i = 0; i < n; i++) out[i] = a ? a->ints[i] : dflt;
    return true;
}

/* Constant v of int64 [n] equal to want[0..n). */
static bool const_ints_are(Fuse *f, const AmpValue *v, const int64_t *want, int n) {
    AmpBuf b;
    if (!amp_fuse_const_buf(f, v, &b) || b.dtype != AMP_DT_INT64 || b.rank != 1 || b.nelem != (size_t)n) return false;
    return memcmp(b.data, want, (size_t)n * sizeof *want) == 0;
}

/* The plan index of node n's producer of input i when it is a node on the device, in no
 * fused node yet, whose output nothing else reads; -1 otherwise. */
static int sole_feeder(const Fuse *f, const AmpNode *n, int i, int at) {
    int p = producer_at(f, n->inputs[i]);
    return p >= 0 && on_device(f, p) && sole_reader(f, n->inputs[i]) == at ? p : -1;
}

/* The ConvGrad node for plan index i, a Transpose closing the pattern above; the plan
 * indices of the nodes it absorbs in parts[0..*n_parts), i first (the fused node runs
 * there). NULL where it is not the pattern. */
static AmpNode *match(Fuse *f, int i, int *parts, int *n_parts) {
    const AmpNode *to = f->nodes[i];
    int64_t dw[AMP_MAX_RANK], xd[AMP_MAX_RANK], gd[AMP_MAX_RANK];
    int r = to->n_inputs == 1 && to->outputs[0] && to->inputs[0] ? to->outputs[0]->type.rank : -1;
    if (r < 3 || r > MAXS + 2 || !swaps01(to, r) || !on_device(f, i) || !static_dims(to->outputs[0], r, dw))
        return NULL;
    int ns = r - 2, k = 0, ci = producer_at(f, to->inputs[0]);
    parts[k++] = i;
    const AmpNode *cut = NULL, *conv = ci >= 0 ? f->nodes[ci] : NULL;
    if (conv && conv->op == AMP_OP_Slice) { /* Slice(conv, starts 0, ends k, axes 2..) */
        int64_t zeros[MAXS] = {0}, axes[MAXS];
        for (int a = 0; a < ns; a++) axes[a] = 2 + a;
        if ((ci = sole_feeder(f, to, 0, i)) < 0 || conv->n_inputs != 4 || conv->n_attrs ||
            !const_ints_are(f, conv->inputs[1], zeros, ns) || !const_ints_are(f, conv->inputs[2], dw + 2, ns) ||
            !const_ints_are(f, conv->inputs[3], axes, ns))
            return NULL;
        cut = conv;
        parts[k++] = ci;
        ci = sole_feeder(f, cut, 0, ci);
        conv = ci >= 0 ? f->nodes[ci] : NULL;
    } else if (sole_feeder(f, to, 0, i) < 0) {
        return NULL;
    }
    /* Conv(Transpose(X), Transpose(dY)), no bias, no group, explicit pads */
    if (!conv || conv->op != AMP_OP_Conv || (conv->n_inputs != 2 && (conv->n_inputs != 3 || conv->inputs[2])) ||
        amp_node_attr_int(conv, "group", 1) != 1 ||
        !amp_node_attr_string(conv, "auto_pad", "NOTSET") ||
        strcmp(amp_node_attr_string(conv, "auto_pad", "NOTSET"), "NOTSET") != 0)
        return NULL;
    parts[k++] = ci;
    int tx = sole_feeder(f, conv, 0, ci), tg = sole_feeder(f, conv, 1, ci);
    if (tx < 0 || tg < 0 || tx == tg || !swaps01(f->nodes[tx], r) || !swaps01(f->nodes[tg], r)) return NULL;
    parts[k++] = tx, parts[k++] = tg;
    AmpValue *x = f->nodes[tx]->inputs[0], *dy = f->nodes[tg]->inputs[0];
    int64_t s[MAXS], d[MAXS], pads[2 * MAXS], kern[MAXS];
    if (!static_dims(x, r, xd) || !static_dims(dy, r, gd) || xd[0] != gd[0] || dw[0] != gd[1] || dw[1] != xd[1] ||
        x->type.dtype != dy->type.dtype || x->type.dtype != to->outputs[0]->type.dtype ||
        !ints_of(conv, "strides", ns, 1, d) || !ints_of(conv, "dilations", ns, 1, s) ||
        !ints_of(conv, "pads", 2 * ns, 0, pads))
        return NULL;
    /* kernel_shape, where given, is dY's spatial size (the Conv's window) */
    const AmpAttr *ks = amp_node_attr(conv, "kernel_shape");
    if (ks && (ks->type != AMP_ATTR_INTS || ks->n_ints != (size_t)ns || memcmp(ks->ints, gd + 2, ns * sizeof *gd)))
        return NULL;
    /* The forward convolution of X by a kernel k with these strides, dilations and pads
     * has dY's positions exactly (ConvGrad checks that), and the Conv's output is at least
     * k (cut to it) or k (no cut). */
    for (int a = 0; a < ns; a++) {
        kern[a] = dw[2 + a];
        if (s[a] < 1 || d[a] < 1 || pads[a] < 0 || pads[ns + a] < 0) return NULL;
        int64_t span = xd[2 + a] + pads[a] + pads[ns + a];
        int64_t fwd = span - (kern[a] - 1) * d[a] - 1, q = span - (gd[2 + a] - 1) * s[a] - 1;
        if (fwd < 0 || fwd / s[a] + 1 != gd[2 + a] || q < 0 || (cut ? q / d[a] + 1 < kern[a] : q / d[a] + 1 != kern[a]))
            return NULL;
    }
    AmpNode *c = amp_fuse_new_node(f, AMP_OP_Ms_ConvGrad, "ConvGrad", "com.microsoft", conv, 3, 2);
    if (!c) return NULL;
    AmpAttr *at = amp_fuse_arena(f, 5 * sizeof *at);
    if (!at || !amp_fuse_add_ints(f, &at[0], "strides", s, (size_t)ns) ||
        !amp_fuse_add_ints(f, &at[1], "dilations", d, (size_t)ns) ||
        !amp_fuse_add_ints(f, &at[2], "pads", pads, 2 * (size_t)ns) ||
        !amp_fuse_add_ints(f, &at[3], "kernel_shape", kern, (size_t)ns))
        return NULL;
    c->attrs = at, c->n_attrs = 4;
    c->inputs[0] = dy, c->inputs[1] = x; /* no W: the weight gradient alone */
    c->outputs[1] = to->outputs[0];
    /* An Identity that alone reads dW (`ampc grad`'s, naming the gradient output) is a
     * copy of it: ConvGrad writes its output instead. */
    int id = sole_reader(f, to->outputs[0]);
    const AmpNode *cp = id >= 0 ? f->nodes[id] : NULL;
    if (cp && cp->op == AMP_OP_Identity && on_device(f, id) && cp->n_inputs == 1 && cp->n_outputs == 1 &&
        cp->outputs[0] && cp->outputs[0]->graph == f->g && cp->outputs[0]->type.dtype == to->outputs[0]->type.dtype)
        c->outputs[1] = cp->outputs[0], parts[k++] = id;
    /* A Cast to float32 that alone reads a bfloat16 dW (AMP's, before the float32 update):
     * ConvGrad writes float32 itself (AMP_CONV_GRAD_DW_F32), oneDNN's float32 sums not
     * rounded to bfloat16 first: a pass over the weights' size less, and a gradient the
     * more precise. */
    AmpValue *grad = c->outputs[1];
    int ct = sole_reader(f, grad);
    const AmpNode *cast = ct >= 0 ? f->nodes[ct] : NULL;
    if (grad->type.dtype == AMP_DT_BFLOAT16 && cast && cast->op == AMP_OP_Cast && on_device(f, ct) &&
        cast->n_outputs == 1 && cast->outputs[0] && cast->outputs[0]->graph == f->g &&
        cast->outputs[0]->type.dtype == AMP_DT_FLOAT && amp_node_attr_int(cast, "to", 0) == AMP_DT_FLOAT) {
        c->outputs[1] = cast->outputs[0], parts[k++] = ct;
        at[4] = (AmpAttr){.name = AMP_CONV_GRAD_DW_F32, .type = AMP_ATTR_INT, .has = AMP_ATTR_HAS_TYPE | AMP_ATTR_HAS_I,
                          .i = 1};
        c->n_attrs = 5;
    }
    *n_parts = k;
    return amp_fuse_device_takes(f, c) ? c : NULL;
}

void amp_fuse_conv_grads(Fuse *f) {
    for (size_t i = 0; i < f->n; i++) {
        int parts[7], n_parts = 0;
        AmpNode *c = match(f, (int)i, parts, &n_parts);
        if (!c) continue;
        for (int k = 1; k < n_parts; k++) f->gone[parts[k]] = true;
        f->repl[i] = c;
        f->fused++;
    }
}
