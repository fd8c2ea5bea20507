/* The helpers every family of gradient rules (grad_rules_*.c) uses: the error naming the
 * node, ranks, broadcasting summed back, reshapes, axes of a Reduce, and the adjoint of
 * data movement. They call no rule back (the table is grad_rules.c's). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes/grad_impl.h"

void amp_grad_unsupported(AmpGradCtx *c, const char *why) {
    amp_builder_fail(c->b, AMP_ERR_UNSUPPORTED, "grad: %s node '%s': %s", c->n->op_type,
                     c->n->name ? c->n->name : "", why);
}

int amp_grad_rank(AmpGradCtx *c, const AmpValue *v) {
    if (v && v->type.kind == AMP_TYPE_TENSOR && v->type.rank >= 0) return v->type.rank;
    char why[320];
    snprintf(why, sizeof why, "the rank of '%s' is unknown (run shape inference on the export, or give its inputs "
             "fixed ranks)", v ? v->name : "");
    amp_grad_unsupported(c, why);
    return -1;
}

AmpValue *amp_grad_scalar_like(AmpGradCtx *c, const AmpValue *v, double x) {
    return amp_build_scalar(c->b, "c", v ? v->type.dtype : AMP_DT_FLOAT, x);
}

AmpValue *amp_grad_reshape_like(AmpGradCtx *c, AmpValue *g, AmpValue *x) {
    AmpBuilder *b = c->b;
    return amp_build2(b, "Reshape", "reshape", g, amp_build1(b, "Shape", "shape", x));
}

AmpValue *amp_grad_unbroadcast(AmpGradCtx *c, AmpValue *g, AmpValue *x) {
    int rg = amp_grad_rank(c, g), rx = amp_grad_rank(c, x);
    if (rg < 0 || rx < 0) return NULL;
    if (rx > rg) {
        amp_grad_unsupported(c, "an input has more axes than the output's gradient");
        return NULL;
    }
    int64_t axes[64];
    size_t n = 0;
    for (int a = 0; a < rg && n < 64; a++) {
        int i = a - (rg - rx); /* x's axis under output axis a, or < 0 */
        if (i < 0) {
            axes[n++] = a;
            continue;
        }
        int64_t dx = x->type.dims[i].value, dg = g->type.dims[a].value;
        /* A symbolic x dim is taken as equal to the output's (it cannot be 1 and broadcast
         * unless the export says so). */
        if (dx == 1 && dg != 1) axes[n++] = a;
    }
    if (!n) return g;
    AmpValue *r = amp_build_reduce(c->b, "ReduceSum", "unbroadcast", g, axes, n, 1);
    return rg == rx ? r : amp_grad_reshape_like(c, r, x);
}

AmpValue *amp_grad_swap_last(AmpGradCtx *c, AmpValue *v) {
    int r = amp_grad_rank(c, v);
    if (r < 2) {
        if (r >= 0) amp_grad_unsupported(c, "a matrix operand of rank < 2");
        return NULL;
    }
    int64_t perm[64];
    for (int i = 0; i < r && i < 64; i++) perm[i] = i;
    perm[r - 2] = r - 1, perm[r - 1] = r - 2;
    return amp_build_transpose(c->b, "T", v, perm, (size_t)r);
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

bool amp_grad_reduce_axes(AmpGradCtx *c, int rank, int64_t *axes, size_t *count, bool *all) {
    AmpNode *n = c->n;
    const AmpAttr *a = amp_node_attr(n, "axes");
    *count = 0;
    *all = false;
    if (a) {
        for (size_t i = 0; i < a->n_ints && i < 64; i++) axes[(*count)++] = a->ints[i];
    } else if (n->n_inputs >= 2 && n->inputs[1]) {
        if (!amp_value_const_ints(n->inputs[1], axes, 64, count) || *count > 64) {
            amp_grad_unsupported(c, "its axes are computed, not constant");
            return false;
        }
    }
    if (!*count) {
        if (amp_node_attr_int(n, "noop_with_empty_axes", 0)) {
            amp_grad_unsupported(c, "noop_with_empty_axes with no axes");
            return false;
        }
        *all = true;
        for (int i = 0; i < rank; i++) axes[(*count)++] = i;
        return true;
    }
    for (size_t i = 0; i < *count; i++) {
        if (axes[i] < 0) axes[i] += rank;
        if (axes[i] < 0 || axes[i] >= rank) {
            amp_grad_unsupported(c, "an axis out of range");
            return false;
        }
    }
    qsort(axes, *count, sizeof *axes, cmp_i64);
    return true;
}

void amp_grad_copy_attrs(AmpGradCtx *c, AmpNode *n) {
    if (!n || !amp_builder_ok(c->b)) return;
    for (size_t i = 0; i < c->n->n_attrs; i++) {
        const AmpAttr *a = &c->n->attrs[i];
        AmpAttr *d = amp_node_add_attr(n, a->name, a->type);
        if (!d) {
            amp_builder_fail(c->b, AMP_ERR_INTERNAL, "grad: out of memory");
            return;
        }
        *d = *a; /* the arrays live in the model's arena: shared */
    }
}

AmpValue *amp_grad_zeros_like(AmpGradCtx *c, AmpValue *v) {
    return amp_build_fill(c->b, "zeros", amp_build1(c->b, "Shape", "zeros_shape", v), v ? v->type.dtype : 0, 0.0);
}

AmpValue *amp_grad_iota_like(AmpGradCtx *c, AmpValue *x) {
    AmpBuilder *b = c->b;
    AmpValue *in[3] = {amp_build_scalar(b, "iota_0", AMP_DT_INT64, 0), amp_build1(b, "Size", "iota_n", x),
                       amp_build_scalar(b, "iota_1", AMP_DT_INT64, 1)};
    AmpValue *r = amp_build_end(b, amp_build_start(b, "Range", "iota_flat", in, 3, 1));
    return amp_build2(b, "Reshape", "iota", r, amp_build1(b, "Shape", "iota_shape", x));
}

AmpValue *amp_grad_scatter_back(AmpGradCtx *c, AmpValue *g, AmpValue *from, AmpValue *x) {
    AmpBuilder *b = c->b;
    static const int64_t flat[1] = {-1}, col[2] = {-1, 1}, front[1] = {0};
    AmpValue *n = amp_build_axes_op(b, "Unsqueeze", "scatter_n", amp_build1(b, "Size", "scatter_size", x), front, 1);
    AmpValue *in[3] = {amp_build_fill(b, "scatter_zeros", n, x ? x->type.dtype : 0, 0.0),
                       amp_build2(b, "Reshape", "scatter_idx", from, amp_build_ints(b, "scatter_col", col, 2)),
                       amp_build2(b, "Reshape", "scatter_upd", g, amp_build_ints(b, "scatter_flat", flat, 1))};
    AmpNode *s = amp_build_start(b, "ScatterND", "scatter", in, 3, 1);
    amp_build_attr_string(b, s, "reduction", "add");
    return amp_grad_reshape_like(c, amp_build_end(b, s), x);
}
