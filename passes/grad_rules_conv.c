/* Gradient rules of the convolutions and the pooling ops. Their geometry (strides,
 * dilations, pads, kernel) is read into a Geom from the node and the static spatial dims
 * of its input and output; the batch dim may be symbolic. The backward of a Conv's input
 * (and of AveragePool) is a ConvTranspose of g with the same geometry; the backward of
 * its weight is a Conv over the batch-transposed input and gradient (stride and dilation
 * swapped). */
#include <stdio.h>
#include <string.h>

#include "passes/grad_impl.h"

#define B(c) ((c)->b)
#define IN(c, i) ((c)->n->inputs[i])
#define OUT(c) ((c)->n->outputs[0])
#define G(c) ((c)->gy[0])

enum { MAXS = 8 }; /* spatial axes */

typedef struct Geom {
    int ns;                                                          /* spatial axes */
    int64_t in[MAXS], out[MAXS], k[MAXS], s[MAXS], d[MAXS], pb[MAXS], pe[MAXS];
} Geom;

/* dims[from .. from + n) of v, all static; false (error set) otherwise. */
static bool static_dims(AmpGradCtx *c, const AmpValue *v, int from, int n, int64_t *out) {
    for (int i = 0; i < n; i++) {
        int64_t d = v->type.rank > from + i ? v->type.dims[from + i].value : -1;
        if (d <= 0) {
            char why[320];
            snprintf(why, sizeof why, "dim %d of '%s' is not a static size (export with fixed spatial and channel "
                     "sizes)", from + i, v->name);
            amp_grad_unsupported(c, why);
            return false;
        }
        out[i] = d;
    }
    return true;
}

/* An ints attribute of n entries (dflt where absent); false (error set) when it has
 * another count. */
static bool ints_attr(AmpGradCtx *c, const char *name, int n, int64_t dflt, int64_t *out) {
    const AmpAttr *a = amp_node_attr(c->n, name);
    if (a && a->n_ints != (size_t)n) {
        char why[96];
        snprintf(why, sizeof why, "%s has %zu entries, not %d", name, a->n_ints, n);
        amp_grad_unsupported(c, why);
        return false;
    }
    for (int i = 0; i < n; i++) out[i] = a ? a->ints[i] : dflt;
    return true;
}

/* The geometry of the Conv/pool node c->n from x [N, C, in...] to y [N, M, out...] with
 * kernel `kern`: strides, dilations, and the pads given or those auto_pad implies. */
static bool geom(AmpGradCtx *c, const AmpValue *x, const AmpValue *y, const int64_t *kern, Geom *gm) {
    int ns = x->type.rank - 2;
    if (ns < 1 || ns > MAXS || y->type.rank != x->type.rank) {
        amp_grad_unsupported(c, "the input is not [N, C, spatial...] with 1 to 8 spatial axes");
        return false;
    }
    gm->ns = ns;
    int64_t pads[2 * MAXS];
    if (!static_dims(c, x, 2, ns, gm->in) || !static_dims(c, y, 2, ns, gm->out) || !ints_attr(c, "strides", ns, 1, gm->s) ||
        !ints_attr(c, "dilations", ns, 1, gm->d) || !ints_attr(c, "pads", 2 * ns, 0, pads))
        return false;
    const char *ap = amp_node_attr_string(c->n, "auto_pad", "NOTSET");
    bool same = ap && strncmp(ap, "SAME", 4) == 0, lower = ap && strcmp(ap, "SAME_LOWER") == 0;
    bool valid = ap && strcmp(ap, "VALID") == 0;
    for (int i = 0; i < ns; i++) {
        gm->k[i] = kern[i];
        gm->pb[i] = valid ? 0 : pads[i];
        gm->pe[i] = valid ? 0 : pads[ns + i];
        if (same) {
            int64_t total = (gm->out[i] - 1) * gm->s[i] + (kern[i] - 1) * gm->d[i] + 1 - gm->in[i];
            if (total < 0) total = 0;
            gm->pb[i] = lower ? total - total / 2 : total / 2;
            gm->pe[i] = total - gm->pb[i];
        }
    }
    return true;
}

static void set_ints(AmpGradCtx *c, AmpNode *n, const char *name, const int64_t *v, int count) {
    amp_build_attr_ints(B(c), n, name, v, (size_t)count);
}

/* ConvTranspose(g, w) with gm's strides, dilations and pads, its end pads and
 * output_padding chosen so that the result has gm->in's spatial size: the adjoint of a
 * Conv (or a pool, w a kernel of ones) over that geometry. */
static AmpValue *adjoint(AmpGradCtx *c, AmpValue *g, AmpValue *w, const Geom *gm, int64_t group, const char *what) {
    int ns = gm->ns;
    int64_t pads[2 * MAXS], op[MAXS];
    bool any_op = false;
    for (int i = 0; i < ns; i++) {
        int64_t full = (gm->out[i] - 1) * gm->s[i] + (gm->k[i] - 1) * gm->d[i] + 1;
        int64_t pe = full - gm->in[i] - gm->pb[i];
        op[i] = pe < 0 ? -pe : 0;
        if (op[i] && op[i] >= gm->s[i] && op[i] >= gm->d[i]) {
            amp_grad_unsupported(c, "input positions past the last window exceed the stride");
            return NULL;
        }
        any_op |= op[i] != 0;
        pads[i] = gm->pb[i];
        pads[ns + i] = pe < 0 ? 0 : pe;
    }
    AmpValue *in[2] = {g, w};
    AmpNode *t = amp_build_start(B(c), "ConvTranspose", what, in, 2, 1);
    set_ints(c, t, "strides", gm->s, ns);
    set_ints(c, t, "dilations", gm->d, ns);
    set_ints(c, t, "pads", pads, 2 * ns);
    if (any_op) set_ints(c, t, "output_padding", op, ns);
    if (group != 1) amp_build_attr_int(B(c), t, "group", group);
    return amp_build_end(B(c), t);
}

/* The axes 0..n-1 with a and b swapped. */
static AmpValue *swap01(AmpGradCtx *c, AmpValue *v, int rank, const char *what) {
    int64_t perm[MAXS + 3];
    for (int i = 0; i < rank; i++) perm[i] = i;
    perm[0] = 1, perm[1] = 0;
    return amp_build_transpose(B(c), what, v, perm, (size_t)rank);
}

/* v [N, Ch, sp...] as [Ch/G, G*N, sp...] (channel-in-group first, then the group, then
 * the batch: perm (2, 1, 0, ...)) or, for the output side, [Ch, N, sp...] grouped by
 * (group, channel-in-group) (perm (1, 2, 0, ...)). sp: the static spatial dims. */
static AmpValue *regroup(AmpGradCtx *c, AmpValue *v, int64_t group, int64_t ch, const int64_t *sp, int ns,
                         bool out_side) {
    AmpBuilder *b = B(c);
    int64_t shape[MAXS + 3] = {0, group, ch / group}, perm[MAXS + 3];
    for (int i = 0; i < ns; i++) shape[3 + i] = sp[i];
    AmpValue *s = amp_build2(b, "Reshape", "wgrad_split", v, amp_build_ints(b, "wgrad_shape", shape, (size_t)ns + 3));
    perm[0] = out_side ? 1 : 2, perm[1] = out_side ? 2 : 1, perm[2] = 0;
    for (int i = 0; i < ns; i++) perm[3 + i] = 3 + i;
    s = amp_build_transpose(b, "wgrad_perm", s, perm, (size_t)ns + 3);
    int64_t flat[MAXS + 2] = {out_side ? ch : ch / group, -1};
    for (int i = 0; i < ns; i++) flat[2 + i] = sp[i];
    return amp_build2(b, "Reshape", "wgrad_flat", s, amp_build_ints(b, "wgrad_fshape", flat, (size_t)ns + 2));
}

/* The weight gradient [Co, Ci/G, k...]: for each output channel co and input channel ci of
 * its group, the sum over the batch and the output positions o of
 * gout[n, co, o] * inp[n, ci, o*s + k*d - pb], as one Conv whose input is inp with the
 * batch as channels, whose weight is gout likewise, with stride d and dilation s; its
 * output is cut to the kernel's size. gm: inp's spatial dims as `in`, gout's as `out`. */
static AmpValue *filter_grad(AmpGradCtx *c, AmpValue *inp, AmpValue *gout, int64_t group, int64_t ci, int64_t co,
                             const Geom *gm) {
    AmpBuilder *b = B(c);
    int ns = gm->ns, r = ns + 2;
    AmpValue *x2 = group == 1 ? swap01(c, inp, r, "wgrad_x") : regroup(c, inp, group, ci, gm->in, ns, false);
    AmpValue *g2 = group == 1 ? swap01(c, gout, r, "wgrad_g") : regroup(c, gout, group, co, gm->out, ns, true);
    int64_t pads[2 * MAXS], starts[MAXS], ends[MAXS], axes[MAXS];
    bool cut = false;
    for (int i = 0; i < ns; i++) {
        pads[i] = gm->pb[i], pads[ns + i] = gm->pe[i];
        int64_t kk = (gm->in[i] + gm->pb[i] + gm->pe[i] - (gm->out[i] - 1) * gm->s[i] - 1) / gm->d[i] + 1;
        if (kk < gm->k[i]) {
            amp_grad_unsupported(c, "the output is smaller than its geometry implies");
            return NULL;
        }
        cut |= kk > gm->k[i];
        starts[i] = 0, ends[i] = gm->k[i], axes[i] = 2 + i;
    }
    AmpValue *in[2] = {x2, g2};
    AmpNode *cv = amp_build_start(b, "Conv", "wgrad", in, 2, 1);
    set_ints(c, cv, "strides", gm->d, ns);
    set_ints(c, cv, "dilations", gm->s, ns);
    set_ints(c, cv, "pads", pads, 2 * ns);
    if (group != 1) amp_build_attr_int(b, cv, "group", group);
    AmpValue *w = amp_build_end(b, cv);
    if (cut) {
        AmpValue *sin[4] = {w, amp_build_ints(b, "wgrad_starts", starts, (size_t)ns),
                            amp_build_ints(b, "wgrad_ends", ends, (size_t)ns), amp_build_ints(b, "wgrad_axes", axes, (size_t)ns)};
        w = amp_build_end(b, amp_build_start(b, "Slice", "wgrad_cut", sin, 4, 1));
    }
    return swap01(c, w, r, "wgrad_d");
}

/* The bias gradient: g summed over every axis but the channels. */
static AmpValue *bias_grad(AmpGradCtx *c, AmpValue *g, int rank) {
    int64_t axes[MAXS + 2];
    size_t n = 0;
    for (int i = 0; i < rank; i++)
        if (i != 1) axes[n++] = i;
    return amp_build_reduce(B(c), "ReduceSum", "bias_d", g, axes, n, 0);
}

/* Y = Conv(X [N, C, in...], W [M, C/G, k...], B [M]). */
void amp_grad_conv(AmpGradCtx *c) {
    AmpValue *x = IN(c, 0), *w = IN(c, 1), *g = G(c);
    int r = amp_grad_rank(c, x);
    if (r < 0) return;
    Geom gm;
    int64_t kern[MAXS], ch[2];
    int64_t group = amp_node_attr_int(c->n, "group", 1);
    if (r < 3 || r > MAXS + 2 || !static_dims(c, w, 2, r - 2, kern) || !static_dims(c, x, 1, 1, &ch[0]) ||
        !static_dims(c, w, 0, 1, &ch[1]) || !geom(c, x, OUT(c), kern, &gm))
        return;
    if (amp_grad_wants(c, 0)) c->gx[0] = adjoint(c, g, w, &gm, group, "conv_dx");
    if (amp_grad_wants(c, 1)) c->gx[1] = filter_grad(c, x, g, group, ch[0], ch[1], &gm);
    if (amp_grad_wants(c, 2)) c->gx[2] = bias_grad(c, g, r);
}

/* Y = ConvTranspose(X [N, C, in...], W [C, M/G, k...], B [M]) with explicit pads (its
 * adjoint is a Conv of g with the same geometry; its weight gradient the Conv one with
 * the roles of input and gradient swapped). */
void amp_grad_conv_transpose(AmpGradCtx *c) {
    AmpBuilder *b = B(c);
    AmpValue *x = IN(c, 0), *w = IN(c, 1), *g = G(c);
    int r = amp_grad_rank(c, x);
    if (r < 0) return;
    const char *ap = amp_node_attr_string(c->n, "auto_pad", "NOTSET");
    if (amp_node_attr(c->n, "output_shape") || (ap && strcmp(ap, "NOTSET") != 0 && strcmp(ap, "VALID") != 0)) {
        amp_grad_unsupported(c, "output_shape or auto_pad SAME has no gradient rule yet (give explicit pads)");
        return;
    }
    Geom gm;
    int64_t kern[MAXS], ch[2], op[MAXS], pads[2 * MAXS];
    int64_t group = amp_node_attr_int(c->n, "group", 1);
    int ns = r - 2;
    if (r < 3 || r > MAXS + 2 || !static_dims(c, w, 2, ns, kern) || !static_dims(c, x, 1, 1, &ch[0]) ||
        !static_dims(c, OUT(c), 1, 1, &ch[1]) || !geom(c, OUT(c), x, kern, &gm) ||
        !ints_attr(c, "output_padding", ns, 0, op))
        return;
    for (int i = 0; i < ns; i++) {
        if (op[i] >= gm.s[i]) {
            amp_grad_unsupported(c, "output_padding at or above the stride");
            return;
        }
        pads[i] = gm.pb[i], pads[ns + i] = gm.pe[i];
    }
    if (amp_grad_wants(c, 0)) {
        AmpValue *in[2] = {g, w};
        AmpNode *cv = amp_build_start(b, "Conv", "convt_dx", in, 2, 1);
        set_ints(c, cv, "strides", gm.s, ns);
        set_ints(c, cv, "dilations", gm.d, ns);
        set_ints(c, cv, "pads", pads, 2 * ns);
        if (group != 1) amp_build_attr_int(b, cv, "group", group);
        c->gx[0] = amp_build_end(b, cv);
    }
    if (amp_grad_wants(c, 1)) c->gx[1] = filter_grad(c, g, x, group, ch[1], ch[0], &gm);
    if (amp_grad_wants(c, 2)) c->gx[2] = bias_grad(c, g, r);
}

/* g routed to each window's argmax by MaxPool's Indices (the forward's, or those of the
 * same MaxPool run again): one element per window, so a tie is never counted twice, and
 * an element that is the max of several windows gets the sum. */
void amp_grad_max_pool(AmpGradCtx *c) {
    AmpNode *n = c->n;
    if (amp_node_attr_int(n, "storage_order", 0) != 0) {
        amp_grad_unsupported(c, "storage_order 1 has no gradient rule yet");
        return;
    }
    AmpValue *idx = n->n_outputs > 1 ? n->outputs[1] : NULL;
    if (!idx) {
        AmpValue *in[1] = {IN(c, 0)};
        AmpNode *m = amp_build_start(B(c), "MaxPool", "maxpool_arg", in, 1, 2);
        amp_grad_copy_attrs(c, m);
        if (amp_build_end(B(c), m)) idx = m->outputs[1];
    }
    c->gx[0] = amp_grad_scatter_back(c, G(c), idx, IN(c, 0));
}

/* A Conv or ConvTranspose kernel [1, 1, k...] of ones. */
static AmpValue *ones_kernel(AmpGradCtx *c, const Geom *gm, int dtype) {
    int64_t shape[MAXS + 2] = {1, 1};
    for (int i = 0; i < gm->ns; i++) shape[2 + i] = gm->k[i];
    AmpBuilder *b = B(c);
    return amp_build_fill(b, "avgpool_ones", amp_build_ints(b, "avgpool_kshape", shape, (size_t)gm->ns + 2), dtype, 1.0);
}

/* The count of input (not pad) positions under each window: a Conv of ones [1, 1, in...]
 * with a kernel of ones, zero-padded as the pool is. */
static AmpValue *window_counts(AmpGradCtx *c, const Geom *gm, AmpValue *kernel, int dtype) {
    AmpBuilder *b = B(c);
    int ns = gm->ns;
    int64_t shape[MAXS + 2] = {1, 1}, pads[2 * MAXS];
    for (int i = 0; i < ns; i++) shape[2 + i] = gm->in[i], pads[i] = gm->pb[i], pads[ns + i] = gm->pe[i];
    AmpValue *in[2] = {amp_build_fill(b, "avgpool_xones", amp_build_ints(b, "avgpool_xshape", shape, (size_t)ns + 2), dtype, 1.0),
                       kernel};
    AmpNode *cv = amp_build_start(b, "Conv", "avgpool_count", in, 2, 1);
    set_ints(c, cv, "strides", gm->s, ns);
    set_ints(c, cv, "dilations", gm->d, ns);
    set_ints(c, cv, "pads", pads, 2 * ns);
    return amp_build_end(b, cv);
}

/* Each window's g over its divisor (the kernel's size with count_include_pad, else the
 * input positions it covers) spread over the window: the adjoint of a ones kernel,
 * per channel (the channels folded into the batch). */
void amp_grad_average_pool(AmpGradCtx *c) {
    AmpBuilder *b = B(c);
    AmpValue *x = IN(c, 0), *g = G(c);
    int r = amp_grad_rank(c, x);
    if (r < 0) return;
    int ns = r - 2;
    Geom gm;
    int64_t kern[MAXS];
    if (ns < 1 || ns > MAXS || !ints_attr(c, "kernel_shape", ns, 0, kern) || !geom(c, x, OUT(c), kern, &gm)) return;
    bool pads = false;
    int64_t size = 1, flat[MAXS + 2] = {-1, 1};
    for (int i = 0; i < ns; i++) {
        if (kern[i] < 1) {
            amp_grad_unsupported(c, "no kernel_shape");
            return;
        }
        int64_t floor_out = (gm.in[i] + gm.pb[i] + gm.pe[i] - (kern[i] - 1) * gm.d[i] - 1) / gm.s[i] + 1;
        if (floor_out != gm.out[i]) {
            amp_grad_unsupported(c, "ceil_mode adding windows has no gradient rule yet");
            return;
        }
        pads |= gm.pb[i] || gm.pe[i];
        size *= kern[i];
        flat[2 + i] = gm.out[i];
    }
    int dt = x->type.dtype;
    AmpValue *kernel = ones_kernel(c, &gm, dt);
    AmpValue *h = amp_build2(b, "Reshape", "avgpool_g", g, amp_build_ints(b, "avgpool_gshape", flat, (size_t)ns + 2));
    if (pads && !amp_node_attr_int(c->n, "count_include_pad", 0))
        h = amp_build2(b, "Div", "avgpool_share", h, window_counts(c, &gm, kernel, dt));
    else
        h = amp_build2(b, "Mul", "avgpool_share", h, amp_grad_scalar_like(c, x, 1.0 / (double)size));
    c->gx[0] = amp_grad_reshape_like(c, adjoint(c, h, kernel, &gm, 1, "avgpool_d"), x);
}

/* g spread evenly over the spatial positions it averaged. */
void amp_grad_global_average_pool(AmpGradCtx *c) {
    AmpBuilder *b = B(c);
    AmpValue *x = IN(c, 0);
    int dt = x->type.dtype;
    AmpValue *e = amp_build2(b, "Expand", "gap_e", G(c), amp_build1(b, "Shape", "gap_shape", x));
    AmpValue *nx = amp_build_cast(b, "gap_nx", amp_build1(b, "Size", "gap_sx", x), dt);
    AmpValue *ny = amp_build_cast(b, "gap_ny", amp_build1(b, "Size", "gap_sy", OUT(c)), dt);
    c->gx[0] = amp_build2(b, "Div", "gap_d", e, amp_build2(b, "Div", "gap_n", nx, ny));
}
